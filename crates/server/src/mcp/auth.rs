//! Authentication of every `/mcp` request before rmcp answers it: the bearer token (a
//! person's API token or an agent's; a device credential is refused) becomes the request's
//! [`McpAuth`] extension, which the handler reads from `http::request::Parts`; a request
//! naming a session must come from the principal who started it. A refused request is answered
//! here (401, or 404 for a session that is not the principal's). A `tools/call` the replica
//! may speculate on is served while its authentication runs beside it (`speculation.rs`).

use super::speculation::{McpAuth, Remembered, speculation};
use crate::app::{Actor, App, CatalogGeneration, hash_token};
use crate::error::AppError;
use crate::http::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::sync::Arc;
use switchyard_protocol::ErrorCode;

/// The authenticated principal of an `/mcp` request, and the catalogs' generation its
/// authentication read.
#[derive(Clone, Debug)]
pub struct McpPrincipal(pub Actor, pub CatalogGeneration);

/// The middleware's state.
#[derive(Clone)]
pub(super) struct Authenticator {
    /// The app.
    app: App,
    /// The principals this replica's authentications found.
    remembered: Arc<Remembered>,
    /// The sessions rmcp holds in this replica's memory.
    sessions: Arc<LocalSessionManager>,
}

impl Authenticator {
    /// The middleware's state for a replica's `/mcp`, whose rmcp service keeps its sessions in
    /// `sessions`.
    pub(super) fn new(app: App, sessions: Arc<LocalSessionManager>) -> Self {
        Self {
            app,
            remembered: Arc::default(),
            sessions,
        }
    }
}

/// The middleware: authenticates, checks the session's owner, serves, and records the owner
/// of a session the request started.
pub(super) async fn authenticate(
    State(state): State<Authenticator>,
    request: Request,
    next: Next,
) -> Response {
    let session = request
        .headers()
        .get(HEADER_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let Some(token) = bearer(&request).map(str::to_owned) else {
        return refused(AppError::refused(
            ErrorCode::Unauthenticated,
            "send an agent token or your personal API token as `Authorization: Bearer <token>`",
        ));
    };
    let presented = (hash_token(&token), session.clone());
    let kept = (&*state.remembered, &*state.sessions);
    let (mut request, remembered) = match speculation(request, kept, &presented).await {
        Ok(speculation) => speculation,
        Err(error) => return refused(error),
    };
    let speculated = remembered.is_some();
    let (auth, verdict) = McpAuth::pending(remembered);
    request.extensions_mut().insert(auth);
    let authentication = async {
        let found = state.app.mcp_authenticate(&token, session.as_deref()).await;
        match &found {
            Ok((actor, generation)) => {
                let principal = McpPrincipal(actor.clone(), *generation);
                state.remembered.keep(presented.clone(), principal.clone());
                verdict.passed(principal);
            }
            Err(_) => {
                state.remembered.forget(&presented);
                verdict.refused();
            }
        }
        found
    };
    let (actor, response) = if speculated {
        match tokio::join!(authentication, next.run(request)) {
            (Ok((actor, _)), response) => (actor, response),
            (Err(error), _) => return refused(error),
        }
    } else {
        match authentication.await {
            Ok((actor, _)) => (actor, next.run(request).await),
            Err(error) => return refused(error),
        }
    };
    // A request without a session that was answered with one started it (`initialize`).
    if session.is_none()
        && let Some(started) = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
        && let Err(error) = state.app.mcp_session_claim(&actor, started).await
    {
        return refused(error);
    }
    response
}

/// The bearer token of a request, if it has one.
fn bearer(request: &Request) -> Option<&str> {
    request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// An error answer as the API gives it; a 401 also says how to authenticate.
fn refused(error: AppError) -> Response {
    let mut response = ApiError(error).into_response();
    if response.status() == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"switchyard\""),
        );
    }
    response
}
