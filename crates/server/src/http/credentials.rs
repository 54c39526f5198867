//! The routes that list a central connection's credential destinations (references and
//! presence only), set a central connection's credential value
//! (`App::connection_credential_set`: sealed with the installation key into the database,
//! never in clear there, in the log or the answer) and revoke all its values.

use super::AppState;
use super::error::{ApiError, ApiJson};
use crate::app::Actor;
use axum::extract::{Path, State};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use switchyard_protocol::api::{CredentialValueSet, SetCredentialValue};
use switchyard_protocol::credential_status::CredentialStatusList;

/// The credential routes (relative to `/api/v1`).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/workspaces/{ws}/connections/{connection}/credentials",
            get(connection_credential_list),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/credentials/{name}",
            put(connection_credential_set),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/credentials/revoke",
            post(connection_credentials_revoke),
        )
}

async fn connection_credential_list(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, connection)): Path<(String, String)>,
) -> Result<Json<CredentialStatusList>, ApiError> {
    Ok(Json(
        s.app
            .connection_credential_list(&actor, &ws, &connection)
            .await?,
    ))
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

async fn connection_credentials_revoke(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, connection)): Path<(String, String)>,
) -> Result<Json<CredentialStatusList>, ApiError> {
    Ok(Json(
        s.app
            .connection_credentials_revoke(&actor, &ws, &connection)
            .await?,
    ))
}
