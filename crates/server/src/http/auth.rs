//! Authentication at the edge: `Authorization: Bearer <token>` becomes an [`Actor`] (a user:
//! device credentials refused), a [`DeviceActor`] (a device: user tokens refused, for the
//! runner API) or a [`Principal`] (either, for calls and operations).

use super::AppState;
use super::error::ApiError;
use crate::app::{Actor, DeviceActor, Principal};
use crate::error::AppError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use switchyard_protocol::ErrorCode;

/// The bearer token of a request, or `unauthenticated` saying what to send.
fn bearer<'a>(parts: &'a Parts, what: &str) -> Result<&'a str, ApiError> {
    parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError(AppError::refused(
                ErrorCode::Unauthenticated,
                format!("send {what} as `Authorization: Bearer <token>`"),
            ))
        })
}

const USER_TOKEN: &str = "your personal API token (SWITCHYARD_TOKEN for the CLI)";
const DEVICE_CREDENTIAL: &str = "the device credential from `switchyard pair`";

impl FromRequestParts<AppState> for Actor {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(state.app.authenticate(bearer(parts, USER_TOKEN)?).await?)
    }
}

impl FromRequestParts<AppState> for DeviceActor {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(state
            .app
            .authenticate_device(bearer(parts, DEVICE_CREDENTIAL)?)
            .await?)
    }
}

/// A device credential as presented, not checked yet: for the heartbeat, the start ack and
/// the receipt upload, whose first statement checks it together with what the request needs.
pub(super) struct DeviceCredential(pub String);

impl FromRequestParts<AppState> for DeviceCredential {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(DeviceCredential(
            bearer(parts, DEVICE_CREDENTIAL)?.to_owned(),
        ))
    }
}

/// A bearer token as presented, not checked yet: for a call submission, whose one database
/// read checks a user's API token together with everything else it decides on.
pub(super) struct PresentedToken(pub String);

impl FromRequestParts<AppState> for PresentedToken {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(PresentedToken(bearer(parts, USER_TOKEN)?.to_owned()))
    }
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Ok(state
            .app
            .authenticate_principal(bearer(parts, USER_TOKEN)?)
            .await?)
    }
}
