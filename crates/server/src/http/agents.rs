//! Routes for a workspace's agents: create (the token is shown once), list, show, edit,
//! revoke, per-connection settings, the tool list an agent sees, and whether a connection's
//! tools reach agents prefixed, and whether a declarative file owns a connection.

use super::AppState;
use super::error::{ApiError, ApiJson};
use crate::app::Actor;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use switchyard_protocol::api::*;

/// The agent routes (relative to `/api/v1`).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/workspaces/{ws}/agents",
            get(agent_list).post(agent_create),
        )
        .route(
            "/workspaces/{ws}/agents/{agent}",
            get(agent_show).patch(agent_edit),
        )
        .route("/workspaces/{ws}/agents/{agent}/revoke", post(agent_revoke))
        .route("/workspaces/{ws}/agents/{agent}/tools", get(agent_tools))
        .route(
            "/workspaces/{ws}/agents/{agent}/connections/{connection}",
            put(agent_connection_set),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/prefix-tools",
            put(connection_set_prefix_tools),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/declared",
            put(connection_set_declared),
        )
}

/// The answer holds the new token: no cache may keep it.
async fn agent_create(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
    ApiJson(req): ApiJson<CreateAgent>,
) -> Result<
    (
        StatusCode,
        [(header::HeaderName, &'static str); 1],
        Json<AgentCreated>,
    ),
    ApiError,
> {
    Ok((
        StatusCode::CREATED,
        [(header::CACHE_CONTROL, "no-store")],
        Json(s.app.agent_create(&actor, &ws, req).await?),
    ))
}

async fn agent_list(
    State(s): State<AppState>,
    actor: Actor,
    Path(ws): Path<String>,
) -> Result<Json<Vec<AgentView>>, ApiError> {
    Ok(Json(s.app.agent_list(&actor, &ws).await?))
}

async fn agent_show(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, agent)): Path<(String, String)>,
) -> Result<Json<AgentDetail>, ApiError> {
    Ok(Json(s.app.agent_show(&actor, &ws, &agent).await?))
}

async fn agent_tools(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, agent)): Path<(String, String)>,
) -> Result<Json<AgentToolsView>, ApiError> {
    Ok(Json(s.app.agent_tools(&actor, &ws, &agent).await?))
}

async fn agent_edit(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, agent)): Path<(String, String)>,
    ApiJson(req): ApiJson<EditAgent>,
) -> Result<Json<AgentView>, ApiError> {
    Ok(Json(s.app.agent_edit(&actor, &ws, &agent, req).await?))
}

async fn agent_revoke(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, agent)): Path<(String, String)>,
) -> Result<Json<AgentView>, ApiError> {
    Ok(Json(s.app.agent_revoke(&actor, &ws, &agent).await?))
}

async fn agent_connection_set(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, agent, connection)): Path<(String, String, String)>,
    ApiJson(settings): ApiJson<AgentConnectionSettings>,
) -> Result<Json<AgentConnectionView>, ApiError> {
    Ok(Json(
        s.app
            .agent_connection_set(&actor, &ws, &agent, &connection, settings)
            .await?,
    ))
}

async fn connection_set_prefix_tools(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, connection)): Path<(String, String)>,
    ApiJson(req): ApiJson<SetPrefixTools>,
) -> Result<Json<ConnectionView>, ApiError> {
    Ok(Json(
        s.app
            .connection_set_prefix_tools(&actor, &ws, &connection, req)
            .await?,
    ))
}

async fn connection_set_declared(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, connection)): Path<(String, String)>,
    ApiJson(req): ApiJson<SetDeclared>,
) -> Result<Json<ConnectionView>, ApiError> {
    Ok(Json(
        s.app
            .connection_set_declared(&actor, &ws, &connection, req)
            .await?,
    ))
}
