//! What a runner and the control plane tell each other: leased work, start decisions and
//! completion reports. The central executor uses these types in-process; the device companion
//! sends them over HTTP.

use crate::api::{AuthKind, AuthState, CallError, ConnectorSpec};
use crate::ids::*;
use crate::placement::SpecDigest;
use crate::reconcile::CallKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A runner's lease epoch. Every report carries it; the server rejects stale ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Epoch(pub i64);

/// Everything a runner needs to execute one leased call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeasedCall {
    /// The call.
    pub call_id: CallId,
    /// The client's idempotency key.
    pub request_id: RequestId,
    /// The epoch the call was leased under.
    pub epoch: Epoch,
    /// The connection to run on.
    pub connection: ConnectionTarget,
    /// Tool to call.
    pub tool_name: String,
    /// Arguments (a JSON object).
    pub arguments: Value,
    /// Timeout the runner enforces.
    pub timeout_seconds: u32,
    /// Warm-session key, if any.
    pub client_session_id: Option<String>,
    /// The profile the call runs under: warm sessions are never shared across profiles.
    pub profile_id: ProfileId,
    /// Who submitted the call: warm sessions are never shared across submitters.
    pub submitter: Submitter,
    /// What to run: `tool` (`tools/call` of `tool_name`), `lookup` (the same, for a receipt
    /// lookup) or `discovery` (`tools/list`, answered as `{"tools": [...]}`). Absent: `tool`.
    #[serde(default, skip_serializing_if = "CallKind::is_tool")]
    pub kind: CallKind,
    /// The W3C `traceparent` the call's client sent, sent on in the `tools/call`'s `_meta`;
    /// absent: the runner derives one from the call and request ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// Who submitted a call: a user, or a paired device (written `{"user": id}` or
/// `{"device": id}`). Warm sessions are keyed by it, so that two submitters never share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Submitter {
    /// A user, through the API or the inspector.
    User(UserId),
    /// A paired device, with its own credential.
    Device(DeviceId),
}

/// The connection a leased call runs on, at the revision it was leased.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionTarget {
    /// The connection.
    pub connection_id: ConnectionId,
    /// The connection's revision.
    pub revision: i64,
    /// The connector's transport and target.
    pub spec: ConnectorSpec,
    /// For a connection placed on a device: the digest of the spec its owner accepted
    /// ([`ConnectorSpec::digest`]), `None` while they have not. A device runner runs the call
    /// only when it equals the digest of `spec`; the central runner ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_spec_digest: Option<SpecDigest>,
    /// For a connection placed on a device: its declared auth kind (`None`: not declared). A
    /// device runner sends its OAuth grant from the device's keyring for `oauth` (or, not
    /// declared, when it holds one for the URL), and forgets a grant when the kind says the
    /// connection no longer uses OAuth. The central runner reads the server's own settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_kind: Option<AuthKind>,
}

/// `POST /api/v1/runner/auth-state`: where the OAuth grant of a connection placed on the
/// device stands now. The grant stays in the device's keyring; the runner sends its state
/// when it changes, so that the server, the inspector and the agent endpoint show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthStateReport {
    /// The connection (placed on the reporting device).
    pub connection_id: ConnectionId,
    /// Its grant's state.
    pub state: AuthState,
}

/// How a call ended, as the runner saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Completion {
    /// The MCP server answered; `result` is the `CallToolResult` JSON.
    Succeeded {
        /// The result.
        result: Value,
    },
    /// The MCP server answered with `isError: true`.
    ToolError {
        /// The result.
        result: Value,
    },
    /// Nothing was sent to the MCP server: certainly no effect.
    Failed {
        /// Why.
        error: CallError,
    },
    /// The request may have reached the MCP server but no answer was received.
    Unknown {
        /// Why (`timeout`, `transport_closed`, …).
        error: CallError,
    },
}

/// A sanitized lifecycle event of an MCP session, reported by a runner. Never carries
/// arguments, results, environment values or headers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LifecycleEvent {
    /// A session was opened (process spawned and initialized, or HTTP session initialized).
    SessionStarted {
        /// The connection.
        connection_id: ConnectionId,
        /// The client's warm-session key, if any.
        client_session_id: Option<String>,
        /// The profile the session serves (absent from runners that predate it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile_id: Option<ProfileId>,
        /// The process id (= process group id) of a stdio server.
        pid: Option<u32>,
    },
    /// A session was closed by the runner.
    SessionClosed {
        /// The connection.
        connection_id: ConnectionId,
        /// The client's warm-session key, if any.
        client_session_id: Option<String>,
        /// The profile the session served (absent from runners that predate it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile_id: Option<ProfileId>,
        /// Why: `idle`, `released`, `capacity`, `timeout`, `credential_changed`, `shutdown`,
        /// `transport_closed`, …
        reason: String,
    },
    /// A stdio server process exited.
    ProcessExited {
        /// The connection.
        connection_id: ConnectionId,
        /// Its process id.
        pid: u32,
        /// Exit status, when it exited normally.
        status: Option<i32>,
        /// Terminating signal name, when it was killed.
        signal: Option<String>,
    },
}

impl LifecycleEvent {
    /// The connection the event belongs to.
    pub fn connection_id(&self) -> ConnectionId {
        match self {
            LifecycleEvent::SessionStarted { connection_id, .. }
            | LifecycleEvent::SessionClosed { connection_id, .. }
            | LifecycleEvent::ProcessExited { connection_id, .. } => *connection_id,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The device runner API (`/api/v1/runner/...`), authenticated with a device credential.
// ---------------------------------------------------------------------------------------------

/// `POST /api/v1/runner/lease/acquire`: take (or, for the same holder, resume) the device's
/// runner lease.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcquireLease {
    /// The runner process's holder id, kept in its outbox directory so a restarted process
    /// resumes its own live lease instead of waiting for it to expire.
    pub holder: uuid::Uuid,
}

/// Answer to [`AcquireLease`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AcquireAnswer {
    /// The lease is this holder's, under `epoch`, for `ttl_seconds`.
    Acquired {
        /// The epoch every report must carry.
        epoch: Epoch,
        /// Lease length; heartbeat well within it.
        ttl_seconds: u64,
    },
    /// Another holder's lease is live; ask again after `retry_after_ms`.
    Held {
        /// When to ask again.
        retry_after_ms: u64,
    },
}

/// `POST /api/v1/runner/heartbeat`: renew the lease and learn what to cancel or release.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// The lease epoch.
    pub epoch: Epoch,
    /// Calls this runner holds right now (leased or started).
    pub active: Vec<CallId>,
    /// Receipts in the runner's outbox that the server has not acknowledged yet, when the
    /// runner reports it (absent from runners that predate it); shown by `/metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbox: Option<u32>,
}

/// A warm-session release addressed to a runner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRelease {
    /// The connection.
    pub connection_id: ConnectionId,
    /// The warm-session key.
    pub client_session_id: Option<String>,
    /// Whose sessions: the releasing user's. Absent (a release recorded before submitters
    /// keyed sessions): every submitter's sessions with this key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitter: Option<Submitter>,
}

/// Answer to [`Heartbeat`] (a stale epoch answers 409 `runner_fenced` instead).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatAnswer {
    /// Active calls whose cancellation was requested.
    pub cancel: Vec<CallId>,
    /// Sessions to drain, requested since the last heartbeat.
    pub release: Vec<SessionRelease>,
}

/// `POST /api/v1/runner/lease`: long-poll for work (waits until work arrives or `wait_ms`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeaseRequest {
    /// The lease epoch.
    pub epoch: Epoch,
    /// Most calls to lease.
    pub max: u32,
    /// Longest wait, in milliseconds (the server caps it at about 25 s).
    pub wait_ms: u64,
}

/// Answer to [`LeaseRequest`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LeaseAnswer {
    /// Calls leased to this runner (possibly none).
    pub calls: Vec<LeasedCall>,
}

/// `POST /api/v1/runner/calls/{call}/start`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartRequest {
    /// The lease epoch.
    pub epoch: Epoch,
}

/// Answer to [`StartRequest`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum StartAnswer {
    /// Recorded: the runner may send the request now.
    Proceed,
    /// Do not send (cancelled, or no longer leased to this runner).
    Abandon {
        /// Why.
        reason: String,
    },
}

/// `POST /api/v1/runner/calls/{call}/complete`: a receipt, uploaded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompleteRequest {
    /// The runner's id for this receipt (unique; the outbox key). Uploading the same receipt
    /// twice records it once.
    pub receipt_id: uuid::Uuid,
    /// The epoch the call was started under.
    pub epoch: Epoch,
    /// How it ended (already redacted by the runner).
    pub completion: Completion,
}

/// Answer to [`CompleteRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CompleteAnswer {
    /// Applied to the call (or applied before: a repeated upload).
    Recorded,
    /// The call had moved on; kept as a late receipt, not applied.
    Superseded,
    /// The epoch is stale or the call's evidence was erased: quarantine the receipt.
    Fenced,
}

/// `POST /api/v1/runner/receipts/check`: which of these receipts must stay quarantined.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiptCheck {
    /// Receipts the runner holds unacknowledged: (receipt id, call id, epoch).
    pub receipts: Vec<ReceiptRef>,
}

/// One receipt the runner holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiptRef {
    /// The receipt.
    pub receipt_id: uuid::Uuid,
    /// Its call.
    pub call_id: CallId,
    /// The epoch it was produced under.
    pub epoch: Epoch,
}

/// Answer to [`ReceiptCheck`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReceiptCheckAnswer {
    /// Receipts to keep quarantined (never upload) until they expire.
    pub fenced: Vec<uuid::Uuid>,
}

/// `POST /api/v1/runner/starts/check`: which of these starts, recorded by a runner that stopped
/// before it heard the server's answer, the server never acknowledged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartCheck {
    /// The starts the runner's outbox holds without a receipt.
    pub starts: Vec<StartRef>,
}

/// One start a runner recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartRef {
    /// The call.
    pub call_id: CallId,
    /// The epoch it was to start under.
    pub epoch: Epoch,
}

/// Answer to [`StartCheck`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StartCheckAnswer {
    /// The calls whose start under that epoch the server never acknowledged to this runner:
    /// their request was never sent, so the runner takes the start back. The others may have
    /// been sent.
    pub unacknowledged: Vec<CallId>,
}

// ---------------------------------------------------------------------------------------------
// The runner channel (`GET /api/v1/runner/channel`, upgraded): the long-poll and the heartbeat
// on one connection that the server holds without HTTP buffers while the runner idles.
// ---------------------------------------------------------------------------------------------

/// The `Upgrade` token of the runner channel.
pub const CHANNEL_PROTOCOL: &str = "switchyard-runner-channel/1";

/// The longest line either side of a runner channel sends; a longer one ends the channel.
/// A request that would be longer goes over its HTTP route instead; an answer that would be
/// longer is replaced by an `answer_too_long` error, and the runner asks again over the HTTP
/// route (a lease's calls are queued again first, so the HTTP lease takes them).
pub const CHANNEL_MAX_LINE: usize = 64 * 1024;

/// One request on a runner channel: a JSON object on one line. Answers carry its `id`; they
/// may come in another order than the requests (a heartbeat or a start is answered while a
/// lease waits).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChannelRequest {
    /// Chosen by the runner, unique on its channel.
    pub id: u64,
    /// What is asked.
    #[serde(flatten)]
    pub call: ChannelCall,
}

/// What a channel request asks: the body of the HTTP route it stands for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelCall {
    /// As `POST /runner/lease`. A new lease request replaces one still waiting on the same
    /// channel (that one is answered with no calls).
    Lease(LeaseRequest),
    /// As `POST /runner/heartbeat`.
    Heartbeat(Heartbeat),
    /// As `POST /runner/calls/{call}/start`.
    Start(ChannelStart),
    /// As `POST /runner/calls/{call}/complete`. A receipt whose line would be longer than
    /// [`CHANNEL_MAX_LINE`] goes over the HTTP route instead.
    Complete(ChannelComplete),
}

/// A start on a runner channel: the call, beside the body of its HTTP route.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChannelStart {
    /// The call to start.
    pub call: CallId,
    /// What the route's body holds.
    #[serde(flatten)]
    pub start: StartRequest,
}

/// A receipt upload on a runner channel: the call, beside the body of its HTTP route.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChannelComplete {
    /// The call the receipt is for.
    pub call: CallId,
    /// What the route's body holds.
    #[serde(flatten)]
    pub receipt: CompleteRequest,
}

/// One answer on a runner channel, on one line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChannelAnswer {
    /// The request's id (0 for an error about a line that could not be read).
    pub id: u64,
    /// The answer.
    #[serde(flatten)]
    pub reply: ChannelReply,
}

/// The answer to a [`ChannelCall`]: what its HTTP route would answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelReply {
    /// A [`LeaseAnswer`].
    Lease(LeaseAnswer),
    /// A [`HeartbeatAnswer`].
    Heartbeat(HeartbeatAnswer),
    /// A [`StartAnswer`].
    Start(StartAnswer),
    /// A [`CompleteAnswer`].
    Complete(CompleteAnswer),
    /// The error the route would answer, with its HTTP status.
    Error(ChannelError),
}

/// An error answer on a runner channel. The code is a string, so that a runner reads codes
/// its build does not know.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelError {
    /// The HTTP status the route would answer with.
    pub status: u16,
    /// The stable error code.
    pub code: String,
    /// What went wrong, for a person.
    pub message: String,
}

#[cfg(test)]
mod channel_tests {
    use super::*;

    #[test]
    fn a_channel_line_names_its_route_beside_the_id() {
        let request = ChannelRequest {
            id: 7,
            call: ChannelCall::Heartbeat(Heartbeat {
                epoch: Epoch(3),
                active: Vec::new(),
                outbox: None,
            }),
        };
        let line = serde_json::to_string(&request).unwrap();
        assert_eq!(line, r#"{"id":7,"heartbeat":{"epoch":3,"active":[]}}"#);
        assert_eq!(
            serde_json::from_str::<ChannelRequest>(&line).unwrap(),
            request
        );

        let answer: ChannelAnswer = serde_json::from_str(
            r#"{"id":7,"error":{"status":409,"code":"runner_fenced","message":"stale"}}"#,
        )
        .unwrap();
        assert_eq!(
            answer.reply,
            ChannelReply::Error(ChannelError {
                status: 409,
                code: "runner_fenced".into(),
                message: "stale".into(),
            })
        );
    }

    #[test]
    fn a_start_and_a_receipt_on_the_channel_carry_their_call_beside_the_route_body() {
        let call: CallId = "0195f1a0-0000-7000-8000-000000000001".parse().unwrap();
        let start = ChannelRequest {
            id: 2,
            call: ChannelCall::Start(ChannelStart {
                call,
                start: StartRequest { epoch: Epoch(4) },
            }),
        };
        let line = serde_json::to_string(&start).unwrap();
        assert_eq!(
            line,
            r#"{"id":2,"start":{"call":"0195f1a0-0000-7000-8000-000000000001","epoch":4}}"#
        );
        assert_eq!(
            serde_json::from_str::<ChannelRequest>(&line).unwrap(),
            start
        );

        let receipt = ChannelRequest {
            id: 3,
            call: ChannelCall::Complete(ChannelComplete {
                call,
                receipt: CompleteRequest {
                    receipt_id: uuid::Uuid::nil(),
                    epoch: Epoch(4),
                    completion: Completion::Unknown {
                        error: CallError {
                            code: "timeout".into(),
                            message: "no answer within 300 s".into(),
                        },
                    },
                },
            }),
        };
        let line = serde_json::to_string(&receipt).unwrap();
        assert_eq!(
            serde_json::from_str::<ChannelRequest>(&line).unwrap(),
            receipt
        );

        let answer: ChannelAnswer =
            serde_json::from_str(r#"{"id":2,"start":{"decision":"proceed"}}"#).unwrap();
        assert_eq!(answer.reply, ChannelReply::Start(StartAnswer::Proceed));
        let answer: ChannelAnswer =
            serde_json::from_str(r#"{"id":3,"complete":{"status":"recorded"}}"#).unwrap();
        assert_eq!(
            answer.reply,
            ChannelReply::Complete(CompleteAnswer::Recorded)
        );
    }
}
