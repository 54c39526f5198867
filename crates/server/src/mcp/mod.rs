//! `/mcp`: Switchyard as an MCP server over streamable HTTP (rmcp's server side), for agents
//! and for people using an MCP client as themselves. A third edge beside `http/` and `web/`:
//! it authenticates every request (`auth.rs`), lists the principal's tools and turns each
//! `tools/call` into an ordinary Switchyard call (`handler.rs`, `call.rs`), through the app
//! layer like the other edges. A `tools/call` reads its submission while its authentication
//! is on its way, and decides nothing until it has passed (`speculation.rs`).
//!
//! Both protocol eras are served: 2025-11-25 (`initialize`, `Mcp-Session-Id`) and 2026-07-28
//! (stateless, `server/discover`, `Mcp-Method`/`Mcp-Name` headers). A session lives in the
//! database (`store.rs`): any replica answers any request of it, replaying its handshake when
//! it does not hold the session in memory. So does a held `tools/call`'s call, so that its
//! client's cancellation takes effect whichever replica hears it (`in_flight.rs`).

mod auth;
mod call;
mod handler;
mod in_flight;
mod instructions;
mod meta_tools;
mod speculation;
mod store;
mod task;

pub use auth::McpPrincipal;

use crate::app::App;
use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Settings of `/mcp`.
#[derive(Clone, Debug, Default)]
pub struct McpConfig {
    /// The `Host` header values `/mcp` accepts (`host` or `host:port`), rmcp's guard against
    /// DNS rebinding. Unset: derived from the listen address (see [`allowed_hosts`]).
    pub allowed_hosts: Option<Vec<String>>,
}

/// The `Host` values `/mcp` accepts: those configured; else, for a server listening on a
/// loopback address, the loopback names; else any (empty list). Every `/mcp` request must
/// carry a bearer token, which a page rebinding a name to this server cannot present, so
/// Host validation is a second line only; a server reached by known names can still name
/// them (`--mcp-allowed-host`).
pub fn allowed_hosts(config: &McpConfig, listen: SocketAddr) -> Vec<String> {
    match &config.allowed_hosts {
        Some(hosts) => hosts.clone(),
        None if listen.ip().is_loopback() => {
            vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
        }
        None => Vec::new(),
    }
}

/// The `/mcp` route: authentication, then rmcp's streamable HTTP service over the app.
/// `shutdown` ends its sessions and streams.
pub fn router(
    app: App,
    config: &McpConfig,
    listen: SocketAddr,
    shutdown: &CancellationToken,
) -> Router {
    let mut http = StreamableHttpServerConfig::default()
        .with_cancellation_token(shutdown.child_token())
        .with_allowed_hosts(allowed_hosts(config, listen));
    http.session_store = Some(Arc::new(store::PgSessionStore::new(app.clone())));
    let handler_app = app.clone();
    let handler_shutdown = shutdown.clone();
    let sessions = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(
        move || {
            Ok(handler::SwitchyardMcp::new(
                handler_app.clone(),
                handler_shutdown.clone(),
            ))
        },
        Arc::clone(&sessions),
        http,
    );
    Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(
            auth::Authenticator::new(app, sessions),
            auth::authenticate,
        ))
}
