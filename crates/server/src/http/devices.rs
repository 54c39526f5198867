//! Routes for pairing devices, managing them, and beginning operations.

use super::AppState;
use super::error::{ApiError, ApiJson};
use crate::app::{Actor, Principal};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use switchyard_protocol::api::*;

/// The pairing, device and operation routes (relative to `/api/v1`).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/pairing", post(pairing_start))
        .route("/pairing/{pairing}/poll", post(pairing_poll))
        .route("/workspaces/{ws}/devices", get(device_list))
        .route("/workspaces/{ws}/devices/approve", post(device_approve))
        .route(
            "/workspaces/{ws}/devices/{device}/revoke",
            post(device_revoke),
        )
        .route("/workspaces/{ws}/devices/placements", get(placement_list))
        .route(
            "/workspaces/{ws}/devices/{device}/placements/{connection}/accept",
            post(placement_accept),
        )
        .route(
            "/workspaces/{ws}/devices/{device}/placements/{connection}/decline",
            post(placement_decline),
        )
        .route("/workspaces/{ws}/operations", post(operation_begin))
}

/// No authentication: the device has no credential yet.
async fn pairing_start(
    State(s): State<AppState>,
    ApiJson(req): ApiJson<StartPairing>,
) -> Result<(StatusCode, Json<PairingStarted>), ApiError> {
    Ok((StatusCode::CREATED, Json(s.app.pairing_start(req).await?)))
}

/// No authentication: the poll secret proves the caller started the pairing.
async fn pairing_poll(
    State(s): State<AppState>,
    Path(pairing): Path<String>,
    ApiJson(req): ApiJson<PollPairing>,
) -> Result<Json<PairingStatus>, ApiError> {
    Ok(Json(s.app.pairing_poll(&pairing, req).await?))
}

async fn device_approve(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
    ApiJson(req): ApiJson<ApproveDevice>,
) -> Result<(StatusCode, Json<DeviceView>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(s.app.device_approve(&actor, &ws, req).await?),
    ))
}

async fn device_list(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Result<Json<Vec<DeviceView>>, ApiError> {
    Ok(Json(s.app.device_list(&actor, &ws).await?))
}

async fn device_revoke(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, device)): Path<(String, String)>,
) -> Result<Json<DeviceView>, ApiError> {
    Ok(Json(s.app.device_revoke(&actor, &ws, &device).await?))
}

/// Any member: the placements on their own devices.
async fn placement_list(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Result<Json<Vec<PlacementView>>, ApiError> {
    Ok(Json(s.app.placement_list(&actor, &ws).await?))
}

/// The device's owner only.
async fn placement_accept(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, device, connection)): Path<(String, String, String)>,
    ApiJson(req): ApiJson<AcceptPlacement>,
) -> Result<Json<PlacementView>, ApiError> {
    let placement = (device.as_str(), connection.as_str());
    Ok(Json(
        s.app.placement_accept(&actor, &ws, placement, req).await?,
    ))
}

/// The device's owner only.
async fn placement_decline(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, device, connection)): Path<(String, String, String)>,
) -> Result<Json<PlacementView>, ApiError> {
    let placement = (device.as_str(), connection.as_str());
    Ok(Json(s.app.placement_decline(&actor, &ws, placement).await?))
}

/// A user with Use on the profile, or a device bound to it.
async fn operation_begin(
    State(s): State<AppState>,
    principal: Principal,
    Path(ws): Path<String>,
    ApiJson(req): ApiJson<BeginOperation>,
) -> Result<(StatusCode, Json<OperationView>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(s.app.operation_begin(&principal, &ws, req).await?),
    ))
}
