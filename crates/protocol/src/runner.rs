//! What a runner and the control plane tell each other: leased work, start decisions and
//! completion reports. The central executor uses these types in-process; the device companion
//! sends them over HTTP.

use crate::api::{CallError, ConnectorSpec};
use crate::ids::*;
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
        /// The process id (= process group id) of a stdio server.
        pid: Option<u32>,
    },
    /// A session was closed by the runner.
    SessionClosed {
        /// The connection.
        connection_id: ConnectionId,
        /// The client's warm-session key, if any.
        client_session_id: Option<String>,
        /// Why: `idle`, `released`, `timeout`, `credential_changed`, `shutdown`, `transport_closed`, …
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
