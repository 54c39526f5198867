//! The approval gate's routes: the questions held calls ask and their answers, a profile's
//! approval policies and the workspace's approval timeout. People only: the `Actor`
//! extractor refuses a device credential.

use super::AppState;
use super::error::{ApiError, ApiJson};
use crate::app::Actor;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use switchyard_protocol::approval::*;

type Answer<T> = Result<Json<T>, ApiError>;

/// The approval routes (relative to `/api/v1`).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/workspaces/{ws}/approvals", get(approval_list))
        .route("/workspaces/{ws}/approvals/{call}", get(approval_get))
        .route(
            "/workspaces/{ws}/approvals/{call}/approve",
            post(approval_approve),
        )
        .route(
            "/workspaces/{ws}/approvals/{call}/decline",
            post(approval_decline),
        )
        .route(
            "/workspaces/{ws}/profiles/{profile}/approval-policy",
            get(approval_policies).put(approval_policy_set),
        )
        .route(
            "/workspaces/{ws}/approval-timeout",
            get(approval_timeout).put(approval_timeout_set),
        )
}

async fn approval_list(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Answer<ApprovalList> {
    Ok(Json(s.app.approval_list(&actor, &ws).await?))
}

async fn approval_get(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, call)): Path<(String, String)>,
) -> Answer<ApprovalView> {
    Ok(Json(s.app.approval_get(&actor, &ws, &call).await?))
}

async fn approval_approve(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, call)): Path<(String, String)>,
    ApiJson(req): ApiJson<DecideApproval>,
) -> Answer<ApprovalView> {
    Ok(Json(s.app.approval_approve(&actor, &ws, &call, req).await?))
}

async fn approval_decline(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, call)): Path<(String, String)>,
    ApiJson(req): ApiJson<DecideApproval>,
) -> Answer<ApprovalView> {
    Ok(Json(s.app.approval_decline(&actor, &ws, &call, req).await?))
}

async fn approval_policies(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, profile)): Path<(String, String)>,
) -> Answer<ApprovalPolicyList> {
    Ok(Json(
        s.app
            .profile_approval_policies(&actor, &ws, &profile)
            .await?,
    ))
}

async fn approval_policy_set(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, profile)): Path<(String, String)>,
    ApiJson(req): ApiJson<SetApprovalPolicy>,
) -> Answer<ApprovalPolicyList> {
    Ok(Json(
        s.app
            .profile_set_approval(&actor, &ws, &profile, req)
            .await?,
    ))
}

async fn approval_timeout(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Answer<ApprovalTimeout> {
    Ok(Json(s.app.workspace_approval_timeout(&actor, &ws).await?))
}

async fn approval_timeout_set(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
    ApiJson(req): ApiJson<ApprovalTimeout>,
) -> Answer<ApprovalTimeout> {
    Ok(Json(
        s.app
            .workspace_set_approval_timeout(&actor, &ws, req)
            .await?,
    ))
}
