//! Routes for a user's own personal API tokens.

use super::AppState;
use super::error::{ApiError, ApiJson};
use crate::app::Actor;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::routing::{get, post};
use axum::{Json, Router};
use switchyard_protocol::api::*;

/// The token routes (relative to `/api/v1`).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/tokens", get(token_list).post(token_create))
        .route("/tokens/{token}/revoke", post(token_revoke))
}

/// The answer holds the new secret: no cache may keep it.
async fn token_create(
    State(s): State<AppState>,
    actor: Actor,
    ApiJson(req): ApiJson<CreateToken>,
) -> Result<
    (
        StatusCode,
        [(header::HeaderName, &'static str); 1],
        Json<CreatedToken>,
    ),
    ApiError,
> {
    Ok((
        StatusCode::CREATED,
        [(header::CACHE_CONTROL, "no-store")],
        Json(s.app.token_create(&actor, req).await?),
    ))
}

async fn token_list(
    State(s): State<AppState>,
    actor: Actor,
) -> Result<Json<Vec<TokenView>>, ApiError> {
    Ok(Json(s.app.token_list(&actor).await?))
}

async fn token_revoke(
    State(s): State<AppState>,
    actor: Actor,
    Path(token): Path<String>,
) -> Result<Json<TokenView>, ApiError> {
    Ok(Json(s.app.token_revoke(&actor, &token).await?))
}
