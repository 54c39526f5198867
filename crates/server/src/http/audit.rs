//! Routes of the audit logs: list (filtered, newest first), export (every entry, oldest
//! first, as JSON lines) and verify (walk the hash chain). A workspace's log is for its admins
//! and installation owners (`App::audit_list`); the installation's own (connectors and other
//! changes outside any workspace) for installation owners (`App::installation_audit_list`).

use super::AppState;
use super::error::ApiError;
use crate::app::{Actor, AuditQuery};
use crate::error::AppError;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use switchyard_protocol::ErrorCode;
use switchyard_protocol::api::*;

/// The audit routes (relative to `/api/v1`).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/workspaces/{ws}/audit", get(audit_list))
        .route("/workspaces/{ws}/audit/export", get(audit_export))
        .route("/workspaces/{ws}/audit/verify", get(audit_verify))
        .route("/audit", get(installation_audit_list))
        .route("/audit/export", get(installation_audit_export))
        .route("/audit/verify", get(installation_audit_verify))
}

/// `?connection=&actor=&since=&before=&limit=`.
#[derive(Debug, serde::Deserialize)]
struct ListQuery {
    connection: Option<String>,
    actor: Option<String>,
    since: Option<DateTime<Utc>>,
    before: Option<i64>,
    limit: Option<u32>,
}

async fn audit_list(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Vec<AuditEntryView>>, ApiError> {
    let query = audit_query(query)?;
    Ok(Json(s.app.audit_list(&actor, &ws, query).await?))
}

async fn installation_audit_list(
    State(s): State<AppState>,
    actor: Actor,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Vec<AuditEntryView>>, ApiError> {
    let query = audit_query(query)?;
    Ok(Json(s.app.installation_audit_list(&actor, query).await?))
}

/// The list filters, or an error that names them.
fn audit_query(query: Result<Query<ListQuery>, QueryRejection>) -> Result<AuditQuery, ApiError> {
    let Query(q) = query.map_err(|e| {
        ApiError(AppError::refused(
            ErrorCode::InvalidRequest,
            format!(
                "the filters are `connection`, `actor` (ids or names), `since` (an RFC 3339 time), `before` (a seq) and `limit`: {e}"
            ),
        ))
    })?;
    Ok(AuditQuery {
        connection: q.connection,
        actor: q.actor,
        since: q.since,
        before: q.before,
        limit: q.limit,
    })
}

/// Every entry, oldest first, one JSON object per line.
async fn audit_export(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    Ok(json_lines(&s.app.audit_export(&actor, &ws).await?))
}

/// The installation's every entry, oldest first, one JSON object per line.
async fn installation_audit_export(
    State(s): State<AppState>,
    actor: Actor,
) -> Result<impl IntoResponse, ApiError> {
    Ok(json_lines(&s.app.installation_audit_export(&actor).await?))
}

/// `entries` as JSON lines.
fn json_lines(entries: &[AuditEntryView]) -> impl IntoResponse + use<> {
    let mut body = String::new();
    for entry in entries {
        body.push_str(&serde_json::to_string(entry).unwrap_or_default());
        body.push('\n');
    }
    ([(header::CONTENT_TYPE, "application/x-ndjson")], body)
}

async fn audit_verify(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Result<Json<AuditVerification>, ApiError> {
    Ok(Json(s.app.audit_verify(&actor, &ws).await?))
}

async fn installation_audit_verify(
    State(s): State<AppState>,
    actor: Actor,
) -> Result<Json<AuditVerification>, ApiError> {
    Ok(Json(s.app.installation_audit_verify(&actor).await?))
}
