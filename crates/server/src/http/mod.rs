//! The HTTP API: thin handlers that extract input, authenticate, call one app-layer function
//! and return its view. Routes are listed in docs/API.md (device runners' in docs/RUNNER-API.md).

mod agents;
mod approvals;
mod audit;
mod auth;
mod credentials;
mod devices;
mod error;
mod handlers;
mod oauth;
mod reconcile;
mod request_context;
mod retire;
mod runner;
mod runner_channel;
mod tokens;

pub use error::{ApiError, ApiJson};
pub use request_context::{name_span as name_request_span, track as track_request};

use crate::app::App;
use axum::Router;
use axum::routing::{get, post, put};

/// What every handler can reach.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The app layer.
    pub app: App,
}

/// The server's router: health checks and `/api/v1`.
pub fn router(app: App) -> Router {
    use handlers::*;
    let api = Router::new()
        .route("/me", get(me))
        .route("/workspaces", post(workspace_create).get(workspace_list))
        .route("/workspaces/{ws}", get(workspace_get))
        .route(
            "/workspaces/{ws}/members",
            post(member_add).get(member_list),
        )
        .route(
            "/workspaces/{ws}/members/{user}/remove",
            post(member_remove),
        )
        .route(
            "/workspaces/{ws}/environments",
            post(environment_create).get(environment_list),
        )
        .route("/connectors", post(connector_create).get(connector_list))
        .route("/connectors/import", post(connector_import))
        .route(
            "/connectors/{connector}",
            get(connector_get).patch(reconcile::connector_update),
        )
        .route("/connectors/{connector}/approve", post(connector_approve))
        .route(
            "/workspaces/{ws}/connections",
            post(connection_create).get(connection_list),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}",
            get(connection_get),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/discover",
            post(connection_discover),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/diagnose",
            post(connection_diagnose),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/tools",
            get(tool_list),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/tools/{tool}/classification",
            put(tool_classify),
        )
        .route(
            "/workspaces/{ws}/profiles",
            post(profile_create).get(profile_list),
        )
        .route("/workspaces/{ws}/profiles/{profile}", get(profile_get))
        .route(
            "/workspaces/{ws}/profiles/{profile}/grants",
            post(profile_grant),
        )
        .route(
            "/workspaces/{ws}/profiles/{profile}/grants/revoke",
            post(profile_revoke),
        )
        .route(
            "/workspaces/{ws}/profiles/{profile}/connections/{connection}/tools",
            put(profile_set_tools),
        )
        .route("/workspaces/{ws}/calls", post(call_submit).get(call_list))
        .route("/workspaces/{ws}/calls/{call}", get(call_get))
        .route("/workspaces/{ws}/calls/{call}/cancel", post(call_cancel))
        .route(
            "/workspaces/{ws}/sessions/{session}/release",
            post(session_release),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/events",
            get(connection_events),
        )
        .merge(audit::routes())
        .merge(devices::routes())
        .merge(tokens::routes())
        .merge(agents::routes())
        .merge(credentials::routes())
        .merge(oauth::routes())
        .merge(runner::routes())
        .merge(reconcile::routes())
        .merge(retire::routes())
        .merge(approvals::routes())
        .fallback(not_found);
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .nest("/api/v1", api)
        .merge(oauth::browser_routes())
        .with_state(AppState { app })
}
