//! Routes that retire and restore connectors, connections and profiles (`POST …/retire`,
//! `POST …/restore` under each object's route).

use super::AppState;
use super::error::ApiError;
use crate::app::Actor;
use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};
use switchyard_protocol::api::*;

type Answer<T> = Result<Json<T>, ApiError>;

/// The retire and restore routes (relative to `/api/v1`).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/connectors/{connector}/retire", post(connector_retire))
        .route("/connectors/{connector}/restore", post(connector_restore))
        .route(
            "/workspaces/{ws}/connections/{connection}/retire",
            post(connection_retire),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/restore",
            post(connection_restore),
        )
        .route(
            "/workspaces/{ws}/profiles/{profile}/retire",
            post(profile_retire),
        )
        .route(
            "/workspaces/{ws}/profiles/{profile}/restore",
            post(profile_restore),
        )
}

async fn connector_retire(
    State(s): State<AppState>,
    actor: Actor,
    Path(key): Path<String>,
) -> Answer<ConnectorView> {
    Ok(Json(s.app.connector_retire(&actor, &key).await?))
}

async fn connector_restore(
    State(s): State<AppState>,
    actor: Actor,
    Path(key): Path<String>,
) -> Answer<ConnectorView> {
    Ok(Json(s.app.connector_restore(&actor, &key).await?))
}

async fn connection_retire(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, c)): Path<(String, String)>,
) -> Answer<ConnectionView> {
    Ok(Json(s.app.connection_retire(&actor, &ws, &c).await?))
}

async fn connection_restore(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, c)): Path<(String, String)>,
) -> Answer<ConnectionView> {
    Ok(Json(s.app.connection_restore(&actor, &ws, &c).await?))
}

async fn profile_retire(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, p)): Path<(String, String)>,
) -> Answer<ProfileView> {
    Ok(Json(s.app.profile_retire(&actor, &ws, &p).await?))
}

async fn profile_restore(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, p)): Path<(String, String)>,
) -> Answer<ProfileView> {
    Ok(Json(s.app.profile_restore(&actor, &ws, &p).await?))
}
