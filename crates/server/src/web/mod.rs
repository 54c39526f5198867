//! The call inspector: a desktop web UI served by the server itself at `/`.
//!
//! Server-rendered HTML (askama templates in `templates/`, checked and embedded at compile
//! time) with a little hand-written JavaScript and CSS (`static/`, embedded with
//! `include_str!`); live call state arrives over Server-Sent Events. Handlers are as thin as
//! the JSON API's: they take an [`crate::app::Actor`] from the session cookie
//! ([`session`]), call the same app-layer functions and render the result. No SQL here.
//!
//! Pages: `/sign-in`, `/workspaces`, a workspace's connections, profiles, cached tools and
//! the Run tool form ([`workspaces`], [`tools`]), a connection's tool classification and
//! recent audit history ([`catalog`]) and its diagnosis ([`diagnose`]), the calls list and the
//! call inspector ([`calls`]) with, for an unknown call, Look up the receipt and Resolve
//! ([`settle`]) and a call's evidence records ([`evidence`]), the live Approvals page
//! ([`approvals`]), the audit log ([`audit`]), agents and the tool list each sees ([`agents`]),
//! devices and the placements awaiting their owner ([`devices`]), connectors ([`connectors`]),
//! and the user's tokens, a workspace's members and a profile's grants, each revocable
//! ([`access`]).

mod access;
mod agents;
mod approvals;
mod assets;
mod audit;
mod calls;
mod catalog;
mod connectors;
mod credentials;
mod devices;
mod diagnose;
mod error;
mod evidence;
mod output;
mod page;
mod retire;
mod schema_form;
mod session;
mod settle;
mod sign_in;
mod streams;
mod tools;
mod workspaces;

use crate::app::App;
use crate::db::SessionTimes;
use axum::Router;
use axum::http::HeaderValue;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::response::Response;
use axum::routing::{get, post};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Settings of the web UI.
#[derive(Clone, Debug)]
pub struct WebConfig {
    /// Mark cookies `Secure`: set when the UI is served over https (a proxy in front).
    pub secure_cookies: bool,
    /// A session unused this long ends.
    pub session_idle: Duration,
    /// No session lives longer than this.
    pub session_lifetime: Duration,
    /// The longest an open call inspector stream waits before it reads its call again (a
    /// call that settles is sent at once, on its completion's wake-up); the Approvals page's
    /// stream reads its questions this often.
    pub stream_look: Duration,
    /// Live streams (call inspectors, Approvals pages) one session may hold open at once.
    pub streams_per_session: usize,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            secure_cookies: false,
            session_idle: Duration::from_secs(8 * 3600),
            session_lifetime: Duration::from_secs(24 * 3600),
            stream_look: Duration::from_secs(2),
            streams_per_session: 8,
        }
    }
}

impl WebConfig {
    fn session_times(&self) -> SessionTimes {
        SessionTimes {
            idle: self.session_idle,
            lifetime: self.session_lifetime,
        }
    }
}

/// What every web handler can reach.
#[derive(Clone, Debug)]
pub struct WebState {
    app: App,
    config: WebConfig,
    /// Cancelled at server shutdown: open event streams end, so shutdown does not wait on them.
    shutdown: CancellationToken,
    /// The event streams open per session.
    streams: std::sync::Arc<streams::OpenStreams>,
}

/// The web UI's routes, to be merged with the API router.
pub fn router(app: App, config: WebConfig, shutdown: CancellationToken) -> Router {
    let state = WebState {
        app,
        streams: std::sync::Arc::new(streams::OpenStreams::new(config.streams_per_session)),
        config,
        shutdown,
    };
    Router::new()
        .route("/", get(sign_in::home))
        .route("/sign-in", get(sign_in::form).post(sign_in::submit))
        .route("/sign-out", post(sign_in::sign_out))
        .route("/static/{file}", get(assets::file))
        .route("/workspaces", get(workspaces::list))
        .route("/tokens", get(access::tokens))
        .route("/tokens/{token}/revoke", post(access::token_revoke))
        .route("/workspaces/{ws}/members", get(access::members))
        .route(
            "/workspaces/{ws}/members/{user}/remove",
            post(access::member_remove),
        )
        .route("/workspaces/{ws}", get(workspaces::connections))
        .route(
            "/workspaces/{ws}/connections/{connection}",
            get(workspaces::connection),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/discover",
            post(workspaces::discover),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/diagnose",
            post(diagnose::diagnose),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/credentials/{name}",
            post(credentials::set),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/tools/{tool}/classify",
            post(catalog::classify),
        )
        .route("/workspaces/{ws}/approvals", get(approvals::page))
        .route("/workspaces/{ws}/approvals/events", get(approvals::events))
        .route(
            "/workspaces/{ws}/approvals/{call}/approve",
            post(approvals::approve),
        )
        .route(
            "/workspaces/{ws}/approvals/{call}/decline",
            post(approvals::decline),
        )
        .route("/workspaces/{ws}/profiles", get(workspaces::profiles))
        .route(
            "/workspaces/{ws}/profiles/{profile}",
            get(workspaces::profile),
        )
        .route(
            "/workspaces/{ws}/profiles/{profile}/grants/revoke",
            post(access::grant_revoke),
        )
        .route(
            "/workspaces/{ws}/profiles/{profile}/connections/{connection}/tools",
            get(tools::list),
        )
        .route(
            "/workspaces/{ws}/profiles/{profile}/connections/{connection}/tools/{tool}/run",
            get(tools::run_form).post(tools::run_submit),
        )
        .route("/workspaces/{ws}/calls", get(calls::list))
        .route("/workspaces/{ws}/calls/{call}", get(calls::inspector))
        .route("/workspaces/{ws}/calls/{call}/events", get(calls::events))
        .route("/workspaces/{ws}/calls/{call}/cancel", post(calls::cancel))
        .route(
            "/workspaces/{ws}/calls/{call}/release",
            post(calls::release),
        )
        .route(
            "/workspaces/{ws}/calls/{call}/reconcile",
            post(settle::reconcile),
        )
        .route(
            "/workspaces/{ws}/calls/{call}/resolve",
            post(settle::resolve),
        )
        .route(
            "/workspaces/{ws}/calls/{call}/evidence",
            get(evidence::page),
        )
        .route("/workspaces/{ws}/audit", get(audit::page))
        .route("/workspaces/{ws}/agents", get(agents::list))
        .route("/workspaces/{ws}/agents/{agent}", get(agents::detail))
        .route("/workspaces/{ws}/devices", get(devices::list))
        .route("/workspaces/{ws}/devices/approve", post(devices::approve))
        .route(
            "/workspaces/{ws}/devices/{device}/revoke",
            post(devices::revoke),
        )
        .route(
            "/workspaces/{ws}/devices/{device}/placements/{connection}/accept",
            post(devices::accept),
        )
        .route(
            "/workspaces/{ws}/devices/{device}/placements/{connection}/decline",
            post(devices::decline),
        )
        .route(
            "/connectors",
            get(connectors::list).post(connectors::create),
        )
        .route("/connectors/import", post(connectors::import))
        .route("/connectors/{connector}", get(connectors::detail))
        .route("/connectors/{connector}/approve", post(connectors::approve))
        .route("/connectors/{connector}/inspect", post(connectors::inspect))
        .route(
            "/connectors/{connector}/retire",
            post(retire::connector_retire),
        )
        .route(
            "/connectors/{connector}/restore",
            post(retire::connector_restore),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/retire",
            post(retire::connection_retire),
        )
        .route(
            "/workspaces/{ws}/connections/{connection}/restore",
            post(retire::connection_restore),
        )
        .route(
            "/workspaces/{ws}/profiles/{profile}/retire",
            post(retire::profile_retire),
        )
        .route(
            "/workspaces/{ws}/profiles/{profile}/restore",
            post(retire::profile_restore),
        )
        .fallback(page::not_found)
        .layer(axum::middleware::map_response(security_headers))
        .with_state(state)
}

/// Headers on every web answer: a strict content security policy (scripts, styles and
/// connections only from this origin; images also as `data:` URLs for MCP image content), no
/// framing, no sniffing, and no caching of pages (they hold CSRF tokens and call results).
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers
        .entry(CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}
