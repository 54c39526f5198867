//! Route handlers. Each one: extract, authenticate, one app call, a view.

use super::AppState;
use super::auth::PresentedToken;
use super::error::{ApiError, ApiJson};
use crate::app::{Actor, CallHistoryQuery, HISTORY_FILTERS, Principal, views_user};
use crate::error::AppError;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{Value, json};
use std::time::Duration;
use switchyard_protocol::ErrorCode;
use switchyard_protocol::api::*;
use switchyard_protocol::diagnose::{DiagnoseRequest, DiagnosisView};

type Answer<T> = Result<Json<T>, ApiError>;
type Created<T> = Result<(StatusCode, Json<T>), ApiError>;

fn created<T>(value: T) -> (StatusCode, Json<T>) {
    (StatusCode::CREATED, Json(value))
}

pub(super) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

pub(super) async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    match state.app.db().readiness().await {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ready"}))),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "not_ready", "reason": reason})),
        ),
    }
}

pub(super) async fn not_found() -> ApiError {
    ApiError(AppError::refused(
        ErrorCode::InvalidRequest,
        "no such API route; see docs/API.md",
    ))
}

pub(super) async fn me(actor: Actor) -> Json<UserView> {
    Json(views_user(&actor))
}

pub(super) async fn workspace_create(
    State(s): State<AppState>,
    actor: Actor,
    ApiJson(req): ApiJson<CreateWorkspace>,
) -> Created<WorkspaceView> {
    Ok(created(s.app.workspace_create(&actor, req).await?))
}

pub(super) async fn workspace_list(
    State(s): State<AppState>,
    actor: Actor,
) -> Answer<Vec<WorkspaceView>> {
    Ok(Json(s.app.workspace_list(&actor).await?))
}

pub(super) async fn workspace_get(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Answer<WorkspaceView> {
    Ok(Json(s.app.workspace_get(&actor, &ws).await?))
}

pub(super) async fn member_add(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
    ApiJson(req): ApiJson<AddMember>,
) -> Created<MemberView> {
    Ok(created(s.app.member_add(&actor, &ws, req).await?))
}

pub(super) async fn member_remove(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, user)): Path<(String, String)>,
) -> Answer<RemovedMember> {
    Ok(Json(s.app.member_remove(&actor, &ws, &user).await?))
}

pub(super) async fn member_list(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Answer<Vec<MemberView>> {
    Ok(Json(s.app.member_list(&actor, &ws).await?))
}

pub(super) async fn environment_create(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
    ApiJson(req): ApiJson<CreateEnvironment>,
) -> Created<EnvironmentView> {
    Ok(created(s.app.environment_create(&actor, &ws, req).await?))
}

pub(super) async fn environment_list(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Answer<Vec<EnvironmentView>> {
    Ok(Json(s.app.environment_list(&actor, &ws).await?))
}

pub(super) async fn connector_create(
    State(s): State<AppState>,
    actor: Actor,
    ApiJson(req): ApiJson<CreateConnector>,
) -> Created<ConnectorView> {
    Ok(created(s.app.connector_create(&actor, req).await?))
}

pub(super) async fn connector_import(
    State(s): State<AppState>,
    actor: Actor,
    ApiJson(doc): ApiJson<Value>,
) -> Created<ImportReport> {
    Ok(created(s.app.connector_import(&actor, doc).await?))
}

pub(super) async fn connector_list(
    State(s): State<AppState>,
    actor: Actor,
) -> Answer<Vec<ConnectorView>> {
    Ok(Json(s.app.connector_list(&actor).await?))
}

pub(super) async fn connector_get(
    State(s): State<AppState>,
    actor: Actor,
    Path(key): Path<String>,
) -> Answer<ConnectorView> {
    Ok(Json(s.app.connector_get(&actor, &key).await?))
}

pub(super) async fn connector_approve(
    State(s): State<AppState>,
    actor: Actor,
    Path(key): Path<String>,
) -> Answer<ConnectorView> {
    Ok(Json(s.app.connector_approve(&actor, &key).await?))
}

pub(super) async fn connection_create(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
    ApiJson(req): ApiJson<CreateConnection>,
) -> Created<ConnectionView> {
    Ok(created(s.app.connection_create(&actor, &ws, req).await?))
}

pub(super) async fn connection_list(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Answer<Vec<ConnectionView>> {
    Ok(Json(s.app.connection_list(&actor, &ws).await?))
}

pub(super) async fn connection_get(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, c)): Path<(String, String)>,
) -> Answer<ConnectionView> {
    Ok(Json(s.app.connection_get(&actor, &ws, &c).await?))
}

/// `?wait_ms=N`: for a connection placed on a device, wait up to N ms (at most 25 s; 25 s
/// when absent) for its runner's discovery.
pub(super) async fn connection_discover(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, c)): Path<(String, String)>,
    query: Result<Query<WaitQuery>, QueryRejection>,
) -> Answer<DiscoveryView> {
    let wait = match query {
        Ok(Query(WaitQuery { wait_ms: None })) => crate::app::DISCOVERY_WAIT,
        query => wait_of(query)?,
    };
    Ok(Json(
        s.app.connection_discover(&actor, &ws, &c, wait).await?,
    ))
}

/// The body may be empty: every field of [`DiagnoseRequest`] may be left out.
pub(super) async fn connection_diagnose(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, c)): Path<(String, String)>,
    ApiJson(req): ApiJson<DiagnoseRequest>,
) -> Answer<DiagnosisView> {
    Ok(Json(s.app.connection_diagnose(&actor, &ws, &c, req).await?))
}

pub(super) async fn tool_list(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, c)): Path<(String, String)>,
) -> Answer<Vec<ToolView>> {
    Ok(Json(s.app.tool_list(&actor, &ws, &c).await?))
}

pub(super) async fn tool_classify(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, c, tool)): Path<(String, String, String)>,
    ApiJson(req): ApiJson<ToolClassification>,
) -> Answer<ToolView> {
    Ok(Json(
        s.app.tool_classify(&actor, &ws, &c, &tool, req).await?,
    ))
}

pub(super) async fn profile_create(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
    ApiJson(req): ApiJson<CreateProfile>,
) -> Created<ProfileView> {
    Ok(created(s.app.profile_create(&actor, &ws, req).await?))
}

pub(super) async fn profile_list(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Answer<Vec<ProfileView>> {
    Ok(Json(s.app.profile_list(&actor, &ws).await?))
}

pub(super) async fn profile_get(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, p)): Path<(String, String)>,
) -> Answer<ProfileView> {
    Ok(Json(s.app.profile_get(&actor, &ws, &p).await?))
}

pub(super) async fn profile_grant(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, p)): Path<(String, String)>,
    ApiJson(req): ApiJson<GrantRequest>,
) -> Answer<ProfileView> {
    Ok(Json(s.app.profile_grant(&actor, &ws, &p, req).await?))
}

pub(super) async fn profile_set_tools(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, p, connection)): Path<(String, String, String)>,
    ApiJson(req): ApiJson<SetTools>,
) -> Answer<ProfileView> {
    Ok(Json(
        s.app
            .profile_set_tools(&actor, &ws, &p, &connection, req)
            .await?,
    ))
}

pub(super) async fn profile_revoke(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, p)): Path<(String, String)>,
    ApiJson(req): ApiJson<GrantRequest>,
) -> Answer<ProfileView> {
    Ok(Json(s.app.profile_revoke(&actor, &ws, &p, req).await?))
}

/// 201 for a new call, 200 when a retried request_id returns the existing one. A user or a
/// device may submit. `?wait_ms=N`: answer once the call settles, or after N ms (at most
/// 25 s), with the call as it is then.
pub(super) async fn call_submit(
    State(s): State<AppState>,
    PresentedToken(token): PresentedToken,
    Path(ws): Path<String>,
    query: Result<Query<WaitQuery>, QueryRejection>,
    ApiJson(req): ApiJson<SubmitCall>,
) -> Created<CallView> {
    let wait = wait_of(query)?;
    let (call, is_new) = s.app.call_submit_presented(&token, &ws, req, wait).await?;
    Ok((
        if is_new {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        Json(call),
    ))
}

/// `?state=&tool=&connection=&submitter=&placement=&since=&until=&limit=&cursor=`: a page of
/// call summaries, newest first.
pub(super) async fn call_list(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
    query: Result<Query<CallHistoryQuery>, QueryRejection>,
) -> Answer<CallList> {
    let Query(query) = query.map_err(|e| {
        ApiError(AppError::refused(
            ErrorCode::InvalidFilter,
            format!("{HISTORY_FILTERS}, each given once: {e}"),
        ))
    })?;
    Ok(Json(s.app.call_history(&actor, &ws, query).await?))
}

/// `?wait_ms=N` on a call's read or submission.
#[derive(Debug, serde::Deserialize)]
pub(super) struct WaitQuery {
    wait_ms: Option<u64>,
}

/// How long a request asks to wait for its call to settle (zero: not at all).
fn wait_of(query: Result<Query<WaitQuery>, QueryRejection>) -> Result<Duration, ApiError> {
    let Query(read) = query.map_err(|e| {
        ApiError(AppError::refused(
            ErrorCode::InvalidRequest,
            format!("`wait_ms` must be a number of milliseconds: {e}"),
        ))
    })?;
    Ok(Duration::from_millis(read.wait_ms.unwrap_or(0)))
}

/// A user, or a device reading a call of its profile.
/// `?wait_ms=N`: wait up to N ms (at most 25 s) for the call to settle before answering.
pub(super) async fn call_get(
    State(s): State<AppState>,
    principal: Principal,
    Path((ws, call)): Path<(String, String)>,
    query: Result<Query<WaitQuery>, QueryRejection>,
) -> Answer<CallView> {
    let wait = wait_of(query)?;
    if wait.is_zero() {
        Ok(Json(s.app.call_get_as(&principal, &ws, &call).await?))
    } else {
        Ok(Json(
            s.app.call_wait_as(&principal, &ws, &call, wait).await?,
        ))
    }
}

pub(super) async fn call_cancel(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, call)): Path<(String, String)>,
) -> Answer<CancelAnswer> {
    Ok(Json(s.app.call_cancel(&actor, &ws, &call).await?))
}

/// The body is optional: an empty one releases the key on every connection the caller may use.
pub(super) async fn session_release(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, session)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Answer<ReleaseAnswer> {
    let req = if body.iter().all(u8::is_ascii_whitespace) {
        ReleaseSession::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError(AppError::refused(
                ErrorCode::InvalidRequest,
                format!("the body is not a release request: {e}"),
            ))
        })?
    };
    Ok(Json(
        s.app.session_release(&actor, &ws, &session, req).await?,
    ))
}

pub(super) async fn connection_events(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, c)): Path<(String, String)>,
) -> Answer<Vec<ConnectionEventView>> {
    Ok(Json(s.app.connection_events(&actor, &ws, &c).await?))
}
