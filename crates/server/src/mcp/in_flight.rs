//! A held `tools/call` and its client's cancellation, whichever replica receives it.
//!
//! In a session (2025-11-25), the client cancels with `notifications/cancelled`, which may
//! reach another replica than the one holding the request: a request held longer than
//! [`RECORD_AFTER`] records its call in the database, by session and JSON-RPC id, and the
//! notification finds it there (`App::mcp_request_cancel`). A cancellation that arrives first
//! leaves a mark the record finds, so the order never matters. Most calls settle sooner and
//! never cost the write. Nothing of it is kept in memory: the replica holding the request
//! finds a cancellation through the database like any other.
//!
//! In the stateless era (2026-07-28) the client cancels by closing the response stream, and
//! sends no notification (rmcp drops one if it does): a request whose client went away while
//! the server is not stopping has its call cancelled by the replica holding it.

use crate::app::{Actor, App};
use rmcp::RoleServer;
use rmcp::model::{Extensions, RequestId as JsonRpcId};
use rmcp::service::RequestContext;
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use std::time::Duration;
use switchyard_protocol::{CallId, WorkspaceId};
use tokio_util::sync::CancellationToken;

/// How long a session's `tools/call` is held before its call is recorded as in flight.
const RECORD_AFTER: Duration = Duration::from_millis(200);

/// How a held request's client cancels it.
#[derive(Debug)]
pub(super) enum Cancelled {
    /// By `notifications/cancelled` naming the request in its session (2025-11-25).
    ByNotification {
        /// The `Mcp-Session-Id`.
        session: String,
    },
    /// By closing the response stream (the stateless era, 2026-07-28).
    ByDisconnect,
    /// Not at all: a request of a handshake era without a session (rmcp refuses those
    /// before they reach a handler; kept so that one never records anything).
    NotAtAll,
}

impl Cancelled {
    /// How the client of the request `context` cancels it: by its protocol era.
    pub(super) fn of(context: &RequestContext<RoleServer>) -> Self {
        let stateless = context
            .protocol_version()
            .is_some_and(|version| !version.has_initialize());
        if stateless {
            return Self::ByDisconnect;
        }
        match session_of(&context.extensions) {
            Some(session) => Self::ByNotification { session },
            None => Self::NotAtAll,
        }
    }
}

/// A `tools/call` request held while its call settles.
pub(super) struct Held<'a> {
    /// The app.
    pub app: &'a App,
    /// The principal.
    pub actor: &'a Actor,
    /// How the client cancels.
    pub cancelled: Cancelled,
    /// The request's JSON-RPC id.
    pub request: &'a JsonRpcId,
    /// The call's workspace.
    pub workspace: WorkspaceId,
    /// The call.
    pub call: CallId,
    /// The request's own token: cancelled when the request ends without an answer.
    pub gone: &'a CancellationToken,
    /// The server's: cancelled when it stops.
    pub shutdown: &'a CancellationToken,
}

impl Held<'_> {
    /// Waits for `answer` (the request's answer), keeping the call cancellable meanwhile.
    pub(super) async fn answer<T>(&self, answer: impl Future<Output = T>) -> T {
        let session = match &self.cancelled {
            Cancelled::ByNotification { session } => session.as_str(),
            Cancelled::ByDisconnect => {
                let answer = answer.await;
                if self.client_left() {
                    self.cancel().await;
                }
                return answer;
            }
            Cancelled::NotAtAll => return answer.await,
        };
        let mut answer = std::pin::pin!(answer);
        let (answer, recorded) = tokio::select! {
            answer = &mut answer => (answer, false),
            () = tokio::time::sleep(RECORD_AFTER) => {
                self.record(session).await;
                (answer.await, true)
            }
        };
        if self.client_left() {
            // rmcp ended the request for its client's notification, which is handled on its
            // own (possibly after this) and must find the call.
            if !recorded {
                self.record(session).await;
            }
        } else if recorded
            && let Err(error) = self
                .app
                .mcp_request_forget((session, &json_id(self.request)), self.call)
                .await
        {
            tracing::warn!(%error, call = %self.call, "an answered /mcp request was not forgotten");
        }
        answer
    }

    /// Whether the request ended because its client went away (or cancelled it), not
    /// because the server stops.
    fn client_left(&self) -> bool {
        self.gone.is_cancelled() && !self.shutdown.is_cancelled()
    }

    /// Records the call as the request's (cancelling it if its client already did).
    async fn record(&self, session: &str) {
        let request = json_id(self.request);
        if let Err(error) = self
            .app
            .mcp_request_record(self.actor, (session, &request), self.workspace, self.call)
            .await
        {
            tracing::warn!(%error, call = %self.call, "a held /mcp call was not recorded as in flight");
        }
    }

    /// Cancels the call: its client went away.
    async fn cancel(&self) {
        if let Err(error) = self
            .app
            .mcp_call_cancel(self.actor, self.workspace, self.call)
            .await
        {
            tracing::warn!(%error, call = %self.call, "a call its /mcp client left was not cancelled");
        }
    }
}

/// The `Mcp-Session-Id` of a request or notification, if it names a session.
pub(super) fn session_of(extensions: &Extensions) -> Option<String> {
    extensions
        .get::<axum::http::request::Parts>()?
        .headers
        .get(HEADER_SESSION_ID)?
        .to_str()
        .ok()
        .map(str::to_owned)
}

/// A JSON-RPC id as JSON text, which keeps `7` and `"7"` apart.
pub(super) fn json_id(id: &JsonRpcId) -> String {
    serde_json::to_string(id).unwrap_or_else(|_| id.to_string())
}
