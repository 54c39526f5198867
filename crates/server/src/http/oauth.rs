//! OAuth routes: a connection's auth settings (`PUT …/auth`), beginning its authorization
//! (`POST …/authorize`), and, outside `/api/v1`, the browser's way back (`GET /mcp/callback`,
//! no API authentication: the flow's `state` is the capability) and the server's Client ID
//! Metadata Document (`GET /mcp/oauth-client.json`). Each calls one app function.

use super::AppState;
use super::error::{ApiError, ApiJson};
use crate::app::Actor;
use crate::app::oauth::{CallbackQuery, client_metadata};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use switchyard_protocol::api::{AuthorizationStarted, ConnectionView, SetConnectionAuth};

/// The OAuth routes under `/api/v1`.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/workspaces/{ws}/connections/{connection}/auth",
            put(connection_auth_set),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/authorize",
            post(connection_authorize),
        )
}

/// The browser-facing OAuth routes, beside `/mcp`.
pub(super) fn browser_routes() -> Router<AppState> {
    Router::new()
        // Literal paths, as the authorization matrix reads them from this file: they are
        // `CALLBACK_PATH` and `CLIENT_METADATA_PATH` (the flow tests consent through them).
        .route("/mcp/callback", get(callback))
        .route("/mcp/oauth-client.json", get(client_metadata_document))
}

async fn connection_auth_set(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, connection)): Path<(String, String)>,
    ApiJson(req): ApiJson<SetConnectionAuth>,
) -> Result<Json<ConnectionView>, ApiError> {
    Ok(Json(
        s.app
            .connection_auth_set(&actor, &ws, &connection, req)
            .await?,
    ))
}

async fn connection_authorize(
    State(s): State<AppState>,
    actor: Actor,
    Path((ws, connection)): Path<(String, String)>,
) -> Result<Json<AuthorizationStarted>, ApiError> {
    Ok(Json(
        s.app.connection_authorize(&actor, &ws, &connection).await?,
    ))
}

/// The page a person's browser lands on: authorized, or why not (with the stable code).
async fn callback(State(s): State<AppState>, Query(query): Query<CallbackQuery>) -> Response {
    match s.app.oauth_callback(query).await {
        Ok(connection) => Html(page(
            "Authorized",
            &format!(
                "Connection <b>{}</b> is authorized. You can close this page.",
                escape(&connection)
            ),
        ))
        .into_response(),
        Err(error) => {
            let (status, code, message) = ApiError(error).public();
            let body = format!("<code>error[{code}]</code>: {}", escape(&message));
            (status, Html(page("Not authorized", &body))).into_response()
        }
    }
}

async fn client_metadata_document(State(s): State<AppState>) -> Response {
    (StatusCode::OK, Json(client_metadata(s.app.public_url()))).into_response()
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Switchyard: {title}</title>\
         </head><body><h1>{title}</h1><p>{body}</p></body></html>"
    )
}

/// `text` safe inside HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}
