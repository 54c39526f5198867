//! The device runner API (`/api/v1/runner/...`): authenticated with a device credential only;
//! every route calls one app function under the device's runner reference.

use super::AppState;
use super::auth::DeviceCredential;
use super::error::{ApiError, ApiJson};
use super::runner_channel;
use crate::app::DeviceActor;
use axum::extract::{DefaultBodyLimit, Request};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use switchyard_mcp_runner::message_bound::MAX_MCP_MESSAGE_BYTES;
use switchyard_protocol::runner::*;

/// The runner routes (relative to `/api/v1`).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/runner/lease/acquire", post(acquire))
        .route("/runner/lease/release", post(release))
        .route("/runner/heartbeat", post(heartbeat))
        .route("/runner/lease", post(lease))
        .route("/runner/channel", get(channel))
        .route("/runner/calls/{call}/start", post(start))
        .route(
            "/runner/calls/{call}/complete",
            post(complete).layer(DefaultBodyLimit::max(RECEIPT_BODY_LIMIT_BYTES)),
        )
        .route("/runner/receipts/check", post(check_receipts))
        .route("/runner/starts/check", post(check_starts))
        .route("/runner/events", post(event))
        .route("/runner/auth-state", post(auth_state))
}

/// A device connection's grant state, as the device's runner reports it.
async fn auth_state(
    State(s): State<AppState>,
    device: DeviceActor,
    ApiJson(report): ApiJson<AuthStateReport>,
) -> Result<StatusCode, ApiError> {
    s.app.runner_auth_state(&device, report).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The largest receipt upload: a receipt carries the result as the device runner read it, up
/// to [`MAX_MCP_MESSAGE_BYTES`] from the MCP server, and re-encoded it may be longer; the
/// server bounds it to 1 MiB when it records it, as it does a central result.
const RECEIPT_BODY_LIMIT_BYTES: usize = 2 * MAX_MCP_MESSAGE_BYTES;

type Answer<T> = Result<Json<T>, ApiError>;

async fn acquire(
    State(s): State<AppState>,
    device: DeviceActor,
    ApiJson(req): ApiJson<AcquireLease>,
) -> Answer<AcquireAnswer> {
    Ok(Json(s.app.runner_acquire(&device, req).await?))
}

/// `{"epoch": n}`: the lease to give up.
#[derive(Debug, Deserialize)]
struct ReleaseLease {
    epoch: Epoch,
}

async fn release(
    State(s): State<AppState>,
    device: DeviceActor,
    ApiJson(req): ApiJson<ReleaseLease>,
) -> Result<StatusCode, ApiError> {
    s.app.runner_release(&device, req.epoch).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The credential is checked by the heartbeat's own read.
async fn heartbeat(
    State(s): State<AppState>,
    credential: DeviceCredential,
    ApiJson(req): ApiJson<Heartbeat>,
) -> Answer<HeartbeatAnswer> {
    Ok(Json(s.app.runner_heartbeat(&credential.0, req).await?))
}

/// A long-poll: answers when work arrives or the (capped) wait ends.
async fn lease(
    State(s): State<AppState>,
    device: DeviceActor,
    ApiJson(req): ApiJson<LeaseRequest>,
) -> Answer<LeaseAnswer> {
    Ok(Json(s.app.runner_lease(&device, req).await?))
}

/// The runner channel: the long-poll and the heartbeat on one upgraded connection (see
/// `runner_channel`). Each request on it checks the device credential; the upgrade refuses
/// only what cannot be one, so that it reads nothing and the connection leaves hyper's
/// buffers at once, even when thousands of runners reconnect together.
async fn channel(
    State(s): State<AppState>,
    credential: DeviceCredential,
    mut req: Request,
) -> Result<Response, ApiError> {
    crate::app::expect_device_credential(&credential.0)?;
    let upgrade = hyper::upgrade::on(&mut req);
    if !runner_channel::asks_for_channel(req.headers()) {
        return Err(ApiError(crate::error::AppError::refused(
            switchyard_protocol::ErrorCode::InvalidRequest,
            format!(
                "open the runner channel with `Connection: Upgrade` and `Upgrade: {CHANNEL_PROTOCOL}`"
            ),
        )));
    }
    Ok(runner_channel::accept(s.app, credential.0, upgrade))
}

/// The credential is checked by the start's own statement.
async fn start(
    State(s): State<AppState>,
    credential: DeviceCredential,
    Path(call): Path<String>,
    ApiJson(req): ApiJson<StartRequest>,
) -> Answer<StartAnswer> {
    Ok(Json(s.app.runner_start(&credential.0, &call, req).await?))
}

/// The credential is checked by the upload's first read.
async fn complete(
    State(s): State<AppState>,
    credential: DeviceCredential,
    Path(call): Path<String>,
    ApiJson(req): ApiJson<CompleteRequest>,
) -> Answer<CompleteAnswer> {
    Ok(Json(
        s.app.runner_complete(&credential.0, &call, req).await?,
    ))
}

async fn check_receipts(
    State(s): State<AppState>,
    device: DeviceActor,
    ApiJson(req): ApiJson<ReceiptCheck>,
) -> Answer<ReceiptCheckAnswer> {
    Ok(Json(s.app.runner_check_receipts(&device, req).await?))
}

async fn check_starts(
    State(s): State<AppState>,
    device: DeviceActor,
    ApiJson(req): ApiJson<StartCheck>,
) -> Answer<StartCheckAnswer> {
    Ok(Json(s.app.runner_check_starts(&device, req).await?))
}

async fn event(
    State(s): State<AppState>,
    device: DeviceActor,
    ApiJson(event): ApiJson<LifecycleEvent>,
) -> Result<StatusCode, ApiError> {
    s.app.runner_event(&device, event).await?;
    Ok(StatusCode::NO_CONTENT)
}
