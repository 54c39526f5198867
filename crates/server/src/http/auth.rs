//! Authentication at the edge: `Authorization: Bearer <token>` becomes an [`Actor`].

use super::error::ApiError;
use super::AppState;
use crate::app::Actor;
use crate::error::AppError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use switchyard_protocol::ErrorCode;

impl FromRequestParts<AppState> for Actor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let token = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError(AppError::refused(
                    ErrorCode::Unauthenticated,
                    "send your personal API token as `Authorization: Bearer <token>` (SWITCHYARD_TOKEN for the CLI)",
                ))
            })?;
        Ok(state.app.authenticate(token).await?)
    }
}
