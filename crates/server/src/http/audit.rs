//! Routes of a workspace's audit log: list (filtered, newest first), export (every entry,
//! oldest first, as JSON lines) and verify (walk the hash chain). For workspace admins and
//! installation owners (`App::audit_list`).

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
    let Query(q) = query.map_err(|e| {
        ApiError(AppError::refused(
            ErrorCode::InvalidRequest,
            format!(
                "the filters are `connection`, `actor` (ids or names), `since` (an RFC 3339 time), `before` (a seq) and `limit`: {e}"
            ),
        ))
    })?;
    let query = AuditQuery {
        connection: q.connection,
        actor: q.actor,
        since: q.since,
        before: q.before,
        limit: q.limit,
    };
    Ok(Json(s.app.audit_list(&actor, &ws, query).await?))
}

/// Every entry, oldest first, one JSON object per line.
async fn audit_export(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let entries = s.app.audit_export(&actor, &ws).await?;
    let mut body = String::new();
    for entry in &entries {
        body.push_str(&serde_json::to_string(entry).unwrap_or_default());
        body.push('\n');
    }
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body))
}

async fn audit_verify(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Result<Json<AuditVerification>, ApiError> {
    Ok(Json(s.app.audit_verify(&actor, &ws).await?))
}
