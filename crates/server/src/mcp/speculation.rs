//! The `/mcp` fast path of `tools/call`, and the one module that owns it: a call's submission
//! reads while its request's authentication is still on its way, and decides nothing until it
//! has passed.
//!
//! Every `/mcp` request is authenticated by one read (`auth.rs`: the token, the session's
//! owner, the catalogs' generation), and a `tools/call` then makes its submission's read: two
//! round trips one after the other. Here they overlap. A replica remembers, by token digest and
//! session, the principal its last authentication of that pair found, with the generation it
//! read ([`Remembered`]). A POST whose body is one JSON-RPC `tools/call` request, for a pair the
//! replica remembers, is served while its authentication runs beside it ([`speculation`]);
//! nothing else is (rmcp acts on other messages before a handler sees them: a cancellation, an
//! `initialize` that stores a session):
//!
//! - The handler resolves the tool in the remembered principal's kept catalog and makes the
//!   submission's read at once ([`submit`]); the submission then waits for the authentication
//!   ([`McpAuth::check`]) before it decides, answers or writes anything. It goes on only if the
//!   authentication found the same principal at a generation no newer than the catalog's.
//!   Otherwise nothing was written, and the request is served as any other, from what the
//!   authentication found ([`McpAuth::verified`]).
//! - The middleware answers a refused authentication with its 401 or 404, whatever the
//!   handler read meanwhile.
//!
//! So a revoked token or agent, a grant taken away or a changed filter decides the request
//! exactly as it would without the speculation; and a session is only ever speculated on for
//! the principal who started it, and only while this replica holds it in memory. One thing a
//! refused speculated request does reach is rmcp's routing of its own session: a request that
//! reuses the id of one still in flight there cuts that one's answer off, as it would for an
//! authenticated client; only the session's own, just revoked, token can do it.

use super::auth::McpPrincipal;
use super::call;
use super::handler::Submitted;
use super::meta_tools;
use crate::app::{App, CatalogGeneration, PendingCheck};
use crate::db::TraceParent;
use crate::error::AppError;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, header};
use rmcp::ErrorData;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, Extensions, JsonObject, JsonRpcRequest};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::collections::HashMap;
use std::sync::Mutex;
use switchyard_protocol::{ErrorCode, RequestId, UserId};
use tokio::sync::watch;

/// How many token and session pairs a replica remembers; past it, it forgets them all.
const MAX_REMEMBERED: usize = 4096;

/// The largest body a request is speculated on: it is read whole to learn its method (and put
/// back for rmcp); a larger one, or one of unknown length, is served the plain way.
const PEEK_LIMIT: usize = 64 * 1024;

/// A token's digest and the session a request names, if any: what a replica remembers an
/// authentication by.
pub(super) type Presented = (Vec<u8>, Option<String>);

/// The principal to speculate with for `request` (presenting `presented`), if it may be: a POST
/// whose body is one JSON-RPC `tools/call` request, for a token and session whose last
/// authentication on this replica passed, and a session this replica holds in memory (one it
/// would restore from the store first is restored for an authenticated request only). The
/// request comes back whole; a body that cannot be read is a refusal.
pub(super) async fn speculation(
    request: Request,
    (remembered, sessions): (&Remembered, &LocalSessionManager),
    presented: &Presented,
) -> Result<(Request, Option<McpPrincipal>), AppError> {
    let short = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .is_some_and(|length| length <= PEEK_LIMIT);
    if request.method() != Method::POST || !short {
        return Ok((request, None));
    }
    let Some(principal) = remembered.get(presented) else {
        return Ok((request, None));
    };
    if let (_, Some(session)) = presented
        && !sessions
            .has_session(&session.as_str().into())
            .await
            .unwrap_or(false)
    {
        return Ok((request, None));
    }
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, PEEK_LIMIT)
        .await
        .map_err(|error| {
            AppError::refused(
                ErrorCode::InvalidRequest,
                format!("the request body could not be read whole: {error}"),
            )
        })?;
    let speculated = is_tools_call(&body).then_some(principal);
    Ok((Request::from_parts(parts, Body::from(body)), speculated))
}

/// Whether `body` is one JSON-RPC `tools/call` request, read as rmcp reads it.
fn is_tools_call(body: &[u8]) -> bool {
    matches!(
        serde_json::from_slice::<ClientJsonRpcMessage>(body),
        Ok(ClientJsonRpcMessage::Request(JsonRpcRequest {
            request: ClientRequest::CallToolRequest(_),
            ..
        }))
    )
}

/// A `tools/call` read for the principal the replica remembers, before the request's
/// authentication has passed: a listed tool of that principal's kept catalog, whose submission
/// reads at once and decides once the authentication confirms what it read for. `None`: the
/// request is to be served from what its authentication found instead (a meta tool, a name
/// the kept catalog refuses, or an authentication that did not confirm it).
pub(super) async fn submit(
    app: &App,
    auth: &McpAuth,
    McpPrincipal(actor, generation): &McpPrincipal,
    (name, arguments): (&str, &JsonObject),
    (request_id, trace): (RequestId, Option<TraceParent>),
) -> Option<Result<Submitted, ErrorData>> {
    let (catalog, built) = app.mcp_catalog_built(&actor.user, *generation).await.ok()?;
    if meta_tools::parse(&catalog, name, arguments).is_some() {
        return None;
    }
    let tool = catalog.call(name).ok()?;
    let arguments = serde_json::Value::Object(arguments.clone());
    let check = auth.check(actor.user.id, built);
    let submitted = app
        .mcp_call_submit(actor, &tool, arguments, request_id, trace, Some(check))
        .await;
    // Settled by now whenever the submission got past its read.
    let verified = auth.confirmed(actor.user.id, built).await?;
    Some(match submitted {
        Ok((call, waiter)) => Ok(Submitted::Call(Box::new((verified.0, call, waiter)))),
        Err(error) => call::refused(error).map(Submitted::Answered),
    })
}

/// The principals a replica's authentications found, by token digest and session.
#[derive(Debug, Default)]
pub(super) struct Remembered {
    /// What the last authentication of each pair found.
    kept: Mutex<HashMap<Presented, McpPrincipal>>,
}

impl Remembered {
    /// The principal the last authentication of `presented` found here.
    fn get(&self, presented: &Presented) -> Option<McpPrincipal> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.get(presented).cloned()
    }

    /// Remembers what an authentication of `presented` found.
    pub(super) fn keep(&self, presented: Presented, principal: McpPrincipal) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= MAX_REMEMBERED && !kept.contains_key(&presented) {
            kept.clear();
        }
        kept.insert(presented, principal);
    }

    /// Forgets `presented`: its authentication was refused.
    pub(super) fn forget(&self, presented: &Presented) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.remove(presented);
    }
}

/// A request's authentication, which may still be on its way: the extension the handler
/// reads it from.
#[derive(Clone, Debug)]
pub(super) struct McpAuth {
    /// The principal to speculate with; `None` when the request is not speculated.
    remembered: Option<McpPrincipal>,
    /// What the authentication found: `None` until it ends, then the principal, or `None`
    /// again forever if it was refused (the sender is dropped unsent).
    verdict: watch::Receiver<Option<McpPrincipal>>,
}

/// Where the middleware sends its request's authentication.
pub(super) struct VerdictSender(watch::Sender<Option<McpPrincipal>>);

impl VerdictSender {
    /// The authentication passed, finding `principal`.
    pub(super) fn passed(self, principal: McpPrincipal) {
        self.0.send_replace(Some(principal));
    }

    /// The authentication was refused.
    pub(super) fn refused(self) {}
}

impl McpAuth {
    /// A request's authentication on its way; with a `remembered` principal, the request is
    /// speculated.
    pub(super) fn pending(remembered: Option<McpPrincipal>) -> (McpAuth, VerdictSender) {
        let (sender, verdict) = watch::channel(None);
        (
            McpAuth {
                remembered,
                verdict,
            },
            VerdictSender(sender),
        )
    }

    /// The authentication of the request whose extensions these are.
    pub(super) fn of(extensions: &Extensions) -> Result<&McpAuth, ErrorData> {
        extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<McpAuth>())
            .ok_or_else(|| ErrorData::internal_error("the request was not authenticated", None))
    }

    /// The principal to speculate with, if the request is speculated.
    pub(super) fn remembered(&self) -> Option<&McpPrincipal> {
        self.remembered.as_ref()
    }

    /// The principal the authentication found, once it has.
    pub(super) async fn verified(&self) -> Result<McpPrincipal, ErrorData> {
        self.settled()
            .await
            .ok_or_else(|| ErrorData::internal_error("the request was not authenticated", None))
    }

    /// The principal the authentication found, if it is `user` at a generation no newer than
    /// `built`: what was read for `user` from a catalog built at `built` stands.
    pub(super) async fn confirmed(
        &self,
        user: UserId,
        built: CatalogGeneration,
    ) -> Option<McpPrincipal> {
        self.settled()
            .await
            .filter(|McpPrincipal(actor, generation)| actor.user.id == user && *generation <= built)
    }

    /// [`McpAuth::confirmed`] as a submission's pending check: one that does not confirm
    /// refuses the submission before it decides anything.
    pub(super) fn check(&self, user: UserId, built: CatalogGeneration) -> PendingCheck<'_> {
        Box::pin(async move {
            match self.confirmed(user, built).await {
                Some(_) => Ok(()),
                None => Err(AppError::refused(
                    ErrorCode::Unauthenticated,
                    "the request's authentication did not confirm what the call was read for",
                )),
            }
        })
    }

    /// What the authentication found, once it ended: `None` if it was refused, or if the
    /// middleware went away first.
    async fn settled(&self) -> Option<McpPrincipal> {
        let mut verdict = self.verdict.clone();
        match verdict.wait_for(Option::is_some).await {
            Ok(found) => found.clone(),
            Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Actor;
    use crate::db::UserRow;
    use switchyard_protocol::agents::PrincipalKind;

    fn principal(user: UserId, generation: i64) -> McpPrincipal {
        let user = UserRow {
            id: user,
            name: "bot@acme".into(),
            is_owner: false,
            kind: PrincipalKind::Agent,
            created_at: chrono::Utc::now(),
        };
        McpPrincipal(Actor { user }, CatalogGeneration::read(generation))
    }

    #[tokio::test]
    async fn only_the_same_principal_at_no_newer_generation_confirms() {
        let (user, other) = (UserId::new(), UserId::new());
        let built = CatalogGeneration::read(5);
        for (found, confirms) in [
            (principal(user, 5), true),
            (principal(user, 4), true),
            (principal(user, 6), false),
            (principal(other, 5), false),
        ] {
            let (auth, verdict) = McpAuth::pending(Some(principal(user, 5)));
            verdict.passed(found.clone());
            let confirmed = auth.confirmed(user, built).await;
            assert_eq!(confirmed.is_some(), confirms, "{found:?}");
            assert_eq!(auth.check(user, built).await.is_ok(), confirms, "{found:?}");
            assert!(auth.verified().await.is_ok(), "{found:?}");
        }
    }

    #[tokio::test]
    async fn a_refused_or_abandoned_authentication_confirms_nothing() {
        let user = UserId::new();
        let built = CatalogGeneration::read(5);
        let (auth, verdict) = McpAuth::pending(Some(principal(user, 5)));
        verdict.refused();
        assert!(auth.confirmed(user, built).await.is_none());
        assert!(auth.verified().await.is_err());

        // The middleware went away before its authentication ended.
        let (auth, verdict) = McpAuth::pending(Some(principal(user, 5)));
        drop(verdict);
        assert!(auth.confirmed(user, built).await.is_none());
        let refusal = auth.check(user, built).await.expect_err("refused");
        assert!(matches!(refusal, AppError::Refused { .. }), "{refusal:?}");
    }

    #[tokio::test]
    async fn a_check_waits_for_the_authentication() {
        let user = UserId::new();
        let (auth, verdict) = McpAuth::pending(Some(principal(user, 5)));
        let check = auth.check(user, CatalogGeneration::read(5));
        let passing = tokio::spawn(async move { verdict.passed(principal(user, 5)) });
        assert!(check.await.is_ok());
        passing.await.unwrap();
    }

    #[test]
    fn only_one_tools_call_request_is_speculated_on() {
        for (body, speculated) in [
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}"#,
                true,
            ),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}"#,
                true,
            ),
            // rmcp refuses a tools/call without its tool's name before any handler.
            (r#"{"jsonrpc":"2.0","id":"a","method":"tools/call"}"#, false),
            (
                r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
                false,
            ),
            (r#"["tools/call",1]"#, false),
            (
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#,
                false,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#,
                false,
            ),
            (
                r#"[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}]"#,
                false,
            ),
            (r#"{"jsonrpc":"2.0","id":3,"result":{}}"#, false),
            ("not json", false),
        ] {
            assert_eq!(is_tools_call(body.as_bytes()), speculated, "{body}");
        }
    }
}
