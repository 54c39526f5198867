//! Routes for settling uncertain completions and for evidence: receipt policies, reconcile,
//! resolve, erase, capture policies and exclusions, and evidence records. Thin handlers, like the others.

use super::AppState;
use super::error::{ApiError, ApiJson};
use crate::app::Actor;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use switchyard_protocol::api::*;

/// The routes (relative to `/api/v1`).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/workspaces/{ws}/connections/{connection}/receipt-policy",
            put(receipt_policy_set).get(receipt_policy_get),
        )
        .route("/workspaces/{ws}/calls/{call}/reconcile", post(reconcile))
        .route("/workspaces/{ws}/calls/{call}/resolve", post(resolve))
        .route("/workspaces/{ws}/calls/{call}/erase", post(erase))
        .route(
            "/workspaces/{ws}/capture-policy",
            put(capture_policy_set).get(capture_policy_get),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/capture-exclusions",
            put(capture_exclusions_set).get(capture_exclusions_get),
        )
        .route("/workspaces/{ws}/evidence/{evidence}", get(evidence_get))
}

type Answer<T> = Result<Json<T>, ApiError>;

async fn receipt_policy_set(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, connection)): Path<(String, String)>,
    ApiJson(req): ApiJson<SetReceiptPolicy>,
) -> Answer<ReceiptPolicyView> {
    Ok(Json(
        s.app
            .receipt_policy_set(&actor, &ws, &connection, req)
            .await?,
    ))
}

async fn receipt_policy_get(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, connection)): Path<(String, String)>,
) -> Answer<ReceiptPolicyView> {
    Ok(Json(
        s.app.receipt_policy_get(&actor, &ws, &connection).await?,
    ))
}

/// 201 when the lookup was queued now, 200 when the request_id names the lookup queued before.
async fn reconcile(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, call)): Path<(String, String)>,
    ApiJson(req): ApiJson<ReconcileCall>,
) -> Result<(StatusCode, Json<ReconcileAnswer>), ApiError> {
    let (answer, is_new) = s.app.call_reconcile(&actor, &ws, &call, req).await?;
    Ok((
        if is_new {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        Json(answer),
    ))
}

async fn resolve(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, call)): Path<(String, String)>,
    ApiJson(req): ApiJson<ResolveCall>,
) -> Answer<CallView> {
    Ok(Json(s.app.call_resolve(&actor, &ws, &call, req).await?))
}

async fn erase(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, call)): Path<(String, String)>,
) -> Answer<EraseAnswer> {
    Ok(Json(s.app.call_erase(&actor, &ws, &call).await?))
}

async fn capture_policy_set(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
    ApiJson(req): ApiJson<SetCapturePolicy>,
) -> Answer<CapturePolicyView> {
    Ok(Json(s.app.capture_policy_set(&actor, &ws, req).await?))
}

async fn capture_exclusions_set(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, connection)): Path<(String, String)>,
    ApiJson(req): ApiJson<SetCaptureExclusions>,
) -> Answer<CaptureExclusionsView> {
    Ok(Json(
        s.app
            .capture_exclusions_set(&actor, &ws, &connection, req)
            .await?,
    ))
}

async fn capture_exclusions_get(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, connection)): Path<(String, String)>,
) -> Answer<CaptureExclusionsView> {
    Ok(Json(
        s.app
            .capture_exclusions_get(&actor, &ws, &connection)
            .await?,
    ))
}

async fn capture_policy_get(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Answer<CapturePolicyView> {
    Ok(Json(s.app.capture_policy_get(&actor, &ws).await?))
}

async fn evidence_get(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, evidence)): Path<(String, String)>,
) -> Answer<EvidenceView> {
    Ok(Json(s.app.evidence_get(&actor, &ws, &evidence).await?))
}

/// `PATCH /api/v1/connectors/{connector}` with a `ConnectorSpec` body (owners).
pub(super) async fn connector_update(
    State(s): State<AppState>,
    actor: Actor,
    Path(connector): Path<String>,
    ApiJson(spec): ApiJson<ConnectorSpec>,
) -> Answer<ConnectorView> {
    Ok(Json(
        s.app.connector_update(&actor, &connector, spec).await?,
    ))
}
