//! Calls: one row per tool call, receipt lookup or device discovery, from submission to settlement. Every state
//! change is one guarded update (`WHERE state = … AND lease_epoch = …`) that reports whether
//! it won; nothing here reads, decides, then writes. Each method returns what it committed
//! with the wake-ups it calls for ([`Committed`]); sending them is the app layer's.
//!
//! - [`columns`]: the one declaration of what an insert writes, and the insert statements.
//! - [`insert`]: lone, batched and handed inserts.
//! - [`lease`]: leasing queued calls under a runner's epoch, and the dispatch target.
//! - [`start`]: the start ack (`leased` → `running`).
//! - [`complete`]: recording what a runner reports.
//! - [`cancel`], [`sweep`]: cancellation, and the sweeps that settle lost and stale calls.
//! - [`page`]: reading calls one at a time and by the page.
//!
//! [`Committed`]: super::Committed

mod cancel;
mod columns;
mod complete;
mod insert;
mod lease;
mod page;
mod start;
mod sweep;

pub use cancel::CancelEffect;
pub(crate) use complete::PlainCompletion;
pub(crate) use complete::call_complete_on;
pub use complete::{DeviceCompletion, FinishedCall, Kept, SettledCall, StoredCompletion};
pub use insert::HandedRow;
pub use lease::{LeasedRow, LookedUpCall};
pub use page::{CallFilter, PageFrom};
pub use start::DeviceStart;
pub use sweep::ExpiredLeases;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use switchyard_protocol::reconcile::{CallKind, ResolutionOutcome};
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{
    CallId, CallState, ConnectionId, DeviceId, EnvironmentId, OperationId, ProfileId, RequestId,
    RunnerRef, UserId, WorkspaceId,
};

/// A row of `calls`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct CallRow {
    /// Id.
    pub id: CallId,
    /// Workspace.
    pub workspace_id: WorkspaceId,
    /// Client idempotency key.
    pub request_id: RequestId,
    /// SHA-256 of the canonical payload.
    pub payload_digest: Vec<u8>,
    /// Profile.
    pub profile_id: ProfileId,
    /// Connection.
    pub connection_id: ConnectionId,
    /// Connection revision at submission.
    pub connection_revision: i64,
    /// Environment.
    pub environment_id: EnvironmentId,
    /// Tool.
    pub tool_name: String,
    /// Arguments, until they expire.
    pub arguments: Option<Json<Value>>,
    /// Warm-session key.
    pub client_session_id: Option<String>,
    /// Timeout.
    pub timeout_seconds: i32,
    /// Where it is in its lifecycle.
    pub state: CallState,
    /// The runner it runs on.
    pub runner_ref: RunnerRef,
    /// Epoch of the lease it was last leased under.
    pub lease_epoch: Option<Epoch>,
    /// Retained result.
    pub result: Option<Json<Value>>,
    /// Whether the result was cut.
    pub result_truncated: bool,
    /// Failure or uncertainty code.
    pub error_code: Option<String>,
    /// Failure or uncertainty explanation.
    pub error_message: Option<String>,
    /// Submitter (for a device's call, the user who approved the device).
    pub created_by: UserId,
    /// The device that submitted it, when a device did (`created_by` is then its approver).
    pub submitted_by_device: Option<DeviceId>,
    /// Submission time.
    pub created_at: DateTime<Utc>,
    /// Lease time.
    pub leased_at: Option<DateTime<Utc>>,
    /// Start-ack time.
    pub started_at: Option<DateTime<Utc>>,
    /// End time.
    pub finished_at: Option<DateTime<Utc>>,
    /// When cancellation of the dispatched call was requested.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// When retention erased inputs and results.
    pub retention_expired_at: Option<DateTime<Utc>>,
    /// A tool call, or a receipt lookup run for `parent_call_id`.
    pub kind: CallKind,
    /// For a lookup: the unknown call it looks up.
    pub parent_call_id: Option<CallId>,
    /// The connector revision the call was dispatched to (recorded when leased).
    pub connector_revision: Option<i64>,
    /// For a `resolved` call: what it was settled with.
    pub resolution_outcome: Option<ResolutionOutcome>,
    /// When the call's evidence was erased.
    pub evidence_erased_at: Option<DateTime<Utc>>,
}

/// A call to insert: every column a submission writes (see `columns::submitted`).
#[derive(Clone, Debug)]
pub struct NewCall {
    /// The id it is stored under: a fresh [`CallId::new`] (ids order by creation).
    pub id: CallId,
    /// Workspace.
    pub workspace_id: WorkspaceId,
    /// Client idempotency key.
    pub request_id: RequestId,
    /// SHA-256 of the canonical payload.
    pub payload_digest: Vec<u8>,
    /// Profile.
    pub profile_id: ProfileId,
    /// Connection.
    pub connection_id: ConnectionId,
    /// Connection revision now.
    pub connection_revision: i64,
    /// Environment.
    pub environment_id: EnvironmentId,
    /// Tool.
    pub tool_name: String,
    /// Arguments (an object).
    pub arguments: Value,
    /// Warm-session key.
    pub client_session_id: Option<String>,
    /// Timeout.
    pub timeout_seconds: i32,
    /// Runner that will run it.
    pub runner_ref: RunnerRef,
    /// Submitter.
    pub created_by: UserId,
    /// Where it came from beyond its submitter.
    pub origin: CallOrigin,
}

impl NewCall {
    /// A tool call, a receipt lookup when it looks up another call, or a device discovery.
    pub fn kind(&self) -> CallKind {
        match (self.origin.lookup_of, self.origin.discovery) {
            (Some(_), _) => CallKind::Lookup,
            (None, true) => CallKind::Discovery,
            (None, false) => CallKind::Tool,
        }
    }
}

/// Where a call came from beyond its submitter: the operation it runs under and the device
/// that submitted it, when there are, for a receipt lookup the unknown call it looks up, and
/// whether it is a device discovery.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallOrigin {
    /// The operation.
    pub operation_id: Option<OperationId>,
    /// The submitting device.
    pub device_id: Option<DeviceId>,
    /// Set for a receipt lookup: the unknown call it looks up. A lookup is inserted as one
    /// from the start, so no runner ever sees it as anything else.
    pub lookup_of: Option<CallId>,
    /// Set for the discovery (`tools/list`) of a connection placed on a device, run by its
    /// runner (`app/device_discovery.rs`).
    pub discovery: bool,
    /// The trace context the client sent, carried to the MCP server.
    pub trace: Option<TraceParent>,
}

/// A W3C `traceparent` (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, lower case,
/// neither id all zeros), as a client sent it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TraceParent([u8; 55]);

impl TraceParent {
    /// The trace context in `text`, if it is a valid version-00 `traceparent`.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes: [u8; 55] = text.trim().as_bytes().try_into().ok()?;
        let hex = |range: std::ops::Range<usize>| {
            bytes[range.clone()]
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
                && bytes[range].iter().any(|b| *b != b'0')
        };
        let dashes = bytes[2] == b'-' && bytes[35] == b'-' && bytes[52] == b'-';
        let flags = bytes[53..]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
        (&bytes[..2] == b"00" && dashes && hex(3..35) && hex(36..52) && flags)
            .then_some(Self(bytes))
    }

    /// The `traceparent` text.
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever stored (`parse`).
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl std::fmt::Debug for TraceParent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod trace_tests {
    use super::TraceParent;

    #[test]
    fn only_a_valid_version_00_traceparent_parses() {
        let valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            TraceParent::parse(valid)
                .map(|t| t.as_str().to_owned())
                .as_deref(),
            Some(valid)
        );
        for invalid in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
            "garbage",
        ] {
            assert!(TraceParent::parse(invalid).is_none(), "{invalid}");
        }
    }
}
