//! Authentication of every `/mcp` request before rmcp sees it: the bearer token (a person's
//! API token or an agent's; a device credential is refused) becomes the request's
//! [`McpPrincipal`] extension, which the handler reads from `http::request::Parts`; a request
//! naming a session must come from the principal who started it.

use crate::app::{Actor, App, CatalogGeneration};
use crate::error::AppError;
use crate::http::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use switchyard_protocol::ErrorCode;

/// The `Mcp-Session-Id` header.
const SESSION_HEADER: &str = "mcp-session-id";

/// The authenticated principal of an `/mcp` request, and the catalogs' generation its
/// authentication read.
#[derive(Clone, Debug)]
pub struct McpPrincipal(pub Actor, pub CatalogGeneration);

/// The middleware: authenticates, checks the session's owner, serves, and records the owner
/// of a session the request started.
pub(super) async fn authenticate(
    State(app): State<App>,
    mut request: Request,
    next: Next,
) -> Response {
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let actor = match bearer(&request) {
        Some(token) => app.mcp_authenticate(token, session.as_deref()).await,
        None => Err(AppError::refused(
            ErrorCode::Unauthenticated,
            "send an agent token or your personal API token as `Authorization: Bearer <token>`",
        )),
    };
    let (actor, generation) = match actor {
        Ok(authenticated) => authenticated,
        Err(error) => return refused(error),
    };
    request
        .extensions_mut()
        .insert(McpPrincipal(actor.clone(), generation));
    let response = next.run(request).await;
    // A request without a session that was answered with one started it (`initialize`).
    if session.is_none()
        && let Some(started) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
        && let Err(error) = app.mcp_session_claim(&actor, started).await
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
