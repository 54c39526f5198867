//! The route that sets a central connection's credential value in a development installation
//! (`App::connection_credential_set`): the value goes to the server's secrets file, never to
//! the database, the log or the answer.

use super::AppState;
use super::error::{ApiError, ApiJson};
use crate::app::Actor;
use axum::extract::{Path, State};
use axum::routing::put;
use axum::{Json, Router};
use switchyard_protocol::api::{CredentialValueSet, SetCredentialValue};

/// The credential value route (relative to `/api/v1`).
pub(super) fn routes() -> Router<AppState> {
    Router::new().route(
        "/workspaces/{ws}/connections/{connection}/credentials/{name}",
        put(connection_credential_set),
    )
}

async fn connection_credential_set(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, connection, name)): Path<(String, String, String)>,
    ApiJson(req): ApiJson<SetCredentialValue>,
) -> Result<Json<CredentialValueSet>, ApiError> {
    Ok(Json(
        s.app
            .connection_credential_set(&actor, &ws, &connection, &name, req)
            .await?,
    ))
}
