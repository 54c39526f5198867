//! Settling uncertain completions: receipt policies, receipt lookups (`reconcile`), caller
//! resolutions (`resolve`), observations, evidence capture and erasure.
//!
//! An `unknown` call is never repeated. What is learned about it later is recorded *beside*
//! the original attempt, never over it: an observation (what a receipt lookup or a late
//! receipt reported) or a resolution (the outcome the call was settled with). These types are
//! re-exported from [`crate::api`].

use crate::api::{CallError, CallView};
use crate::ids::*;
use crate::state::CallState;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most characters a resolution's explanation may hold.
pub const MAX_EXPLANATION_CHARS: usize = 2000;

/// Placeholders a receipt policy's argument strings may contain; each is replaced by the
/// original call's value when a lookup is built.
pub const RECEIPT_PLACEHOLDERS: [&str; 3] = ["{{request_id}}", "{{call_id}}", "{{tool_name}}"];

/// What a call is for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A tool call a client submitted.
    #[default]
    Tool,
    /// A read-only receipt lookup run for an unknown call (its `parent_call_id`).
    Lookup,
    /// A tool discovery (`tools/list`) of a connection placed on a device, run by the
    /// device's runner; its result is the catalog the server reconciles. Never a tool call.
    Discovery,
}

impl CallKind {
    /// Whether this is a client's tool call (not a lookup or a discovery).
    pub fn is_tool(&self) -> bool {
        *self == CallKind::Tool
    }

    /// The kind's wire and database name.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Tool => "tool",
            CallKind::Lookup => "lookup",
            CallKind::Discovery => "discovery",
        }
    }
}

impl std::fmt::Display for CallKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is none of an enum's wire names.
#[derive(Debug, thiserror::Error)]
#[error("unknown {what} `{name}`")]
pub struct UnknownName {
    /// What was named (`call kind`, `resolution outcome`).
    pub what: &'static str,
    /// The name given.
    pub name: String,
}

impl std::str::FromStr for CallKind {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [CallKind::Tool, CallKind::Lookup, CallKind::Discovery]
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| UnknownName {
                what: "call kind",
                name: s.to_owned(),
            })
    }
}

/// The outcome an unknown call was settled with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolutionOutcome {
    /// The effect happened.
    Succeeded,
    /// The effect did not happen.
    NotApplied,
    /// The server answered with an error.
    Failed,
}

impl ResolutionOutcome {
    /// The outcome's wire and database name.
    pub fn as_str(self) -> &'static str {
        match self {
            ResolutionOutcome::Succeeded => "succeeded",
            ResolutionOutcome::NotApplied => "not_applied",
            ResolutionOutcome::Failed => "failed",
        }
    }

    /// Reads a wire or database name.
    pub fn parse(name: &str) -> Option<Self> {
        [
            ResolutionOutcome::Succeeded,
            ResolutionOutcome::NotApplied,
            ResolutionOutcome::Failed,
        ]
        .into_iter()
        .find(|o| o.as_str() == name)
    }
}

impl std::fmt::Display for ResolutionOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ResolutionOutcome {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ResolutionOutcome::parse(s).ok_or_else(|| UnknownName {
            what: "resolution outcome",
            name: s.to_owned(),
        })
    }
}

/// What a connector (through a receipt lookup) or a runner (through a late receipt) reported
/// about an unknown call's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reported {
    /// The effect happened (a lookup answered `applied`, or a late receipt carries a result).
    Applied,
    /// The effect did not happen (a lookup answered `not applied`, or the runner never sent
    /// the request).
    NotApplied,
    /// The server answered the call with an error result (a late `tool_error` receipt).
    Failed,
    /// Nothing certain was learned.
    Unknown,
}

impl Reported {
    /// The report's wire and database name.
    pub fn as_str(self) -> &'static str {
        match self {
            Reported::Applied => "applied",
            Reported::NotApplied => "not_applied",
            Reported::Failed => "failed",
            Reported::Unknown => "unknown",
        }
    }

    /// Reads a wire or database name.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Reported::Applied,
            Reported::NotApplied,
            Reported::Failed,
            Reported::Unknown,
        ]
        .into_iter()
        .find(|r| r.as_str() == name)
    }

    /// The outcome this report settles an unknown call with; `None` leaves it unknown.
    pub fn settles(self) -> Option<ResolutionOutcome> {
        match self {
            Reported::Applied => Some(ResolutionOutcome::Succeeded),
            Reported::NotApplied => Some(ResolutionOutcome::NotApplied),
            Reported::Failed => Some(ResolutionOutcome::Failed),
            Reported::Unknown => None,
        }
    }
}

/// Where an observation came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationSource {
    /// A receipt lookup (`reconcile`) asked the connector.
    Lookup,
    /// The runner reported the call after it had been marked unknown.
    LateReceipt,
}

/// Something learned about an unknown call after the fact, recorded beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObservationView {
    /// The observation's id.
    pub id: ObservationId,
    /// Where it came from.
    pub source: ObservationSource,
    /// What was reported.
    pub reported: Reported,
    /// The lookup call that asked, for `lookup` observations.
    pub lookup_call_id: Option<CallId>,
    /// The runner that answered.
    pub runner: String,
    /// The lease epoch the report was made under, for late receipts.
    pub epoch: Option<i64>,
    /// The retained lookup output or late result (redacted, bounded); absent once erased or
    /// past retention.
    pub output: Option<Value>,
    /// When it was recorded.
    pub recorded_at: DateTime<Utc>,
    /// When erasure removed its output.
    pub erased_at: Option<DateTime<Utc>>,
}

/// How a resolution came about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolutionSource {
    /// An observation (a lookup answer or a late receipt) settled the call.
    Observation,
    /// A person or agent resolved it, citing evidence (`mcp resolve`).
    Caller,
}

/// How an unknown call was settled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResolutionView {
    /// The outcome.
    pub outcome: ResolutionOutcome,
    /// How it came about.
    pub source: ResolutionSource,
    /// The observation that settled it, for `observation` resolutions.
    pub observation_id: Option<ObservationId>,
    /// The evidence record the caller cited, for `caller` resolutions.
    pub source_version_id: Option<EvidenceId>,
    /// The caller's explanation; removed one hour after recording or when its evidence is
    /// erased, whichever comes first.
    pub explanation: Option<String>,
    /// When the explanation was removed.
    pub explanation_removed_at: Option<DateTime<Utc>>,
    /// Who resolved it, for `caller` resolutions.
    pub resolved_by: Option<UserId>,
    /// The caller's idempotency key, for `caller` resolutions.
    pub request_id: Option<RequestId>,
    /// When it was settled.
    pub resolved_at: DateTime<Utc>,
}

/// The one attempt a started call made: where it ran and how it ended. Kept as it was when
/// later observations and resolutions are recorded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttemptView {
    /// The runner it ran on.
    pub runner: String,
    /// The lease epoch it was started under.
    pub epoch: Option<i64>,
    /// The connector revision it was dispatched to.
    pub connector_revision: Option<i64>,
    /// When it was leased.
    pub leased_at: Option<DateTime<Utc>>,
    /// When its start was acknowledged.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended (or became unknown).
    pub finished_at: Option<DateTime<Utc>>,
    /// Why it failed or became unknown.
    pub error: Option<CallError>,
}

/// What a call is linked to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LineageView {
    /// Receipt lookups run for this call, oldest first.
    #[serde(default)]
    pub lookup_call_ids: Vec<CallId>,
    /// Receipts runners uploaded for this call.
    #[serde(default)]
    pub receipt_ids: Vec<uuid::Uuid>,
    /// Evidence records captured from this call or its lookups (erased ones included).
    #[serde(default)]
    pub evidence_ids: Vec<EvidenceId>,
}

/// `PUT /api/v1/workspaces/{ws}/connections/{connection}/receipt-policy`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetReceiptPolicy {
    /// A read-only lookup tool of the same connector.
    pub tool: String,
    /// Its arguments: a JSON object whose string values may contain
    /// [`RECEIPT_PLACEHOLDERS`].
    pub arguments: Value,
}

/// A connection's approved receipt policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReceiptPolicyView {
    /// The connection.
    pub connection_id: ConnectionId,
    /// The lookup tool.
    pub tool: String,
    /// The argument template.
    pub arguments: Value,
    /// Who approved it.
    pub approved_by: UserId,
    /// When.
    pub approved_at: DateTime<Utc>,
}

/// `POST /api/v1/workspaces/{ws}/calls/{call}/reconcile`: run the receipt lookup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReconcileCall {
    /// A fresh idempotency key for the lookup call.
    pub request_id: RequestId,
    /// Warm-session key for the lookup.
    #[serde(default)]
    pub client_session_id: Option<String>,
}

/// Answer to [`ReconcileCall`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReconcileAnswer {
    /// The lookup call (queued when new); its completion records an observation on `call`.
    pub lookup: CallView,
    /// The original call, as it is now.
    pub call: CallView,
}

/// `POST /api/v1/workspaces/{ws}/calls/{call}/resolve`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResolveCall {
    /// The caller's idempotency key for this resolution.
    pub request_id: RequestId,
    /// The outcome.
    pub outcome: ResolutionOutcome,
    /// A retained evidence record the caller can read.
    pub source_version_id: EvidenceId,
    /// Why (at most [`MAX_EXPLANATION_CHARS`] characters).
    pub explanation: String,
}

/// `POST /api/v1/workspaces/{ws}/calls/{call}/erase` answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EraseAnswer {
    /// The call's minimal disposition after erasure.
    pub call: CallView,
    /// Observations whose output was removed.
    pub observations_erased: u64,
    /// Evidence records whose output was removed.
    pub evidence_erased: u64,
    /// Evidence still waiting to be published that was dropped.
    pub pending_evidence_dropped: u64,
    /// What erasure does not do, in words.
    pub notice: String,
}

/// `PUT /api/v1/workspaces/{ws}/capture-policy`: what to change (at least one; an absent
/// field keeps its setting).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SetCapturePolicy {
    /// Capture completed managed tool results as evidence records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_managed_tool_results: Option<bool>,
    /// Days an evidence record is kept after its capture, 1–[`MAX_EVIDENCE_RETENTION_DAYS`];
    /// the sweeper deletes it then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_retention_days: Option<u32>,
}

/// One capture exclusion of a connection: what Switchyard never keeps of its calls (of every
/// tool when `tool` is absent, else of that tool). Either `capture_nothing`, or fields to drop.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureExclusion {
    /// The tool; absent for every tool of the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Keep no arguments, result or evidence: only the disposition (state, error code, times).
    #[serde(default)]
    pub capture_nothing: bool,
    /// Top-level argument fields removed from the retained arguments once the call completes.
    #[serde(default)]
    pub drop_argument_fields: Vec<String>,
    /// Top-level fields of the result's `structuredContent` (and of text content that is a JSON
    /// object) dropped before the result is bounded, stored or captured.
    #[serde(default)]
    pub drop_result_fields: Vec<String>,
}

/// `PUT /api/v1/workspaces/{ws}/connections/{connection}/capture-exclusions`: the connection's
/// exclusions, replacing those it had (an empty list removes them all).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetCaptureExclusions {
    /// At most one per tool, and one for the whole connection.
    pub exclusions: Vec<CaptureExclusion>,
}

/// A connection's capture exclusions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureExclusionsView {
    /// The connection.
    pub connection_id: ConnectionId,
    /// The connection-wide one first, then by tool.
    pub exclusions: Vec<CaptureExclusion>,
    /// When they were last set.
    pub updated_at: Option<DateTime<Utc>>,
}

/// How long evidence records are kept unless an admin sets otherwise, in days.
pub const DEFAULT_EVIDENCE_RETENTION_DAYS: u32 = 30;

/// The longest evidence retention, in days (ten years).
pub const MAX_EVIDENCE_RETENTION_DAYS: u32 = 3650;

/// [`DEFAULT_EVIDENCE_RETENTION_DAYS`], for views written before retention was set.
fn default_retention_days() -> u32 {
    DEFAULT_EVIDENCE_RETENTION_DAYS
}

/// A workspace's evidence capture policy and its queue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapturePolicyView {
    /// The workspace.
    pub workspace_id: WorkspaceId,
    /// Whether completed results are captured (off by default).
    pub capture_managed_tool_results: bool,
    /// Evidence waiting to be published.
    pub pending_records: u64,
    /// Its size in bytes.
    pub pending_bytes: u64,
    /// Evidence not captured because the queue was full.
    pub dropped: u64,
    /// Pending evidence given up after its 30-day deadline.
    pub expired: u64,
    /// Days an evidence record is kept after its capture before the sweeper deletes it.
    #[serde(default = "default_retention_days")]
    pub evidence_retention_days: u32,
    /// When the policy last changed.
    pub updated_at: Option<DateTime<Utc>>,
}

/// An evidence record: a completed result captured under the workspace's capture policy.
/// Readable by any member of the workspace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EvidenceView {
    /// The record's id (the `source_version_id` resolutions cite).
    pub id: EvidenceId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// The call it was captured from.
    pub call_id: CallId,
    /// That call's request id.
    pub request_id: RequestId,
    /// That call's kind.
    pub kind: CallKind,
    /// The profile (scope) the call ran under.
    pub profile_id: ProfileId,
    /// The environment.
    pub environment_id: EnvironmentId,
    /// The operation, for device calls.
    pub operation_id: Option<OperationId>,
    /// The tool.
    pub tool_name: String,
    /// The connection.
    pub connection_id: ConnectionId,
    /// The connector it was dispatched to.
    pub connector_id: Option<ConnectorId>,
    /// The connector's revision then.
    pub connector_revision: Option<i64>,
    /// The runner.
    pub runner: String,
    /// The outcome reported when it was captured (`succeeded`, `tool_error` or `resolved`).
    pub outcome: CallState,
    /// For `resolved`: the outcome it was settled with.
    pub resolution_outcome: Option<ResolutionOutcome>,
    /// The retained output (redacted, bounded); absent once erased.
    pub output: Option<Value>,
    /// Whether the output was cut to the retention bound.
    pub output_truncated: bool,
    /// Receipt lineage: `parent_call_id`, `observation_id`, `lookup_call_ids`, `receipt_ids`.
    pub lineage: Value,
    /// When the result was captured (the completion).
    pub captured_at: DateTime<Utc>,
    /// When it was published.
    pub published_at: DateTime<Utc>,
    /// When it was erased.
    pub erased_at: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_settle_as_documented() {
        assert_eq!(
            Reported::Applied.settles(),
            Some(ResolutionOutcome::Succeeded)
        );
        assert_eq!(
            Reported::NotApplied.settles(),
            Some(ResolutionOutcome::NotApplied)
        );
        assert_eq!(Reported::Failed.settles(), Some(ResolutionOutcome::Failed));
        assert_eq!(Reported::Unknown.settles(), None);
        for r in [
            Reported::Applied,
            Reported::NotApplied,
            Reported::Failed,
            Reported::Unknown,
        ] {
            assert_eq!(Reported::parse(r.as_str()), Some(r));
            assert_eq!(
                serde_json::to_value(r).unwrap(),
                serde_json::json!(r.as_str())
            );
        }
        for o in [
            ResolutionOutcome::Succeeded,
            ResolutionOutcome::NotApplied,
            ResolutionOutcome::Failed,
        ] {
            assert_eq!(ResolutionOutcome::parse(o.as_str()), Some(o));
            assert_eq!(
                serde_json::to_value(o).unwrap(),
                serde_json::json!(o.as_str())
            );
        }
    }

    #[test]
    fn resolve_file_round_trips() {
        let text = r#"{"request_id":"0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5e","outcome":"not_applied","source_version_id":"0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5f","explanation":"ticket absent"}"#;
        let resolve: ResolveCall = serde_json::from_str(text).unwrap();
        assert_eq!(resolve.outcome, ResolutionOutcome::NotApplied);
        assert_eq!(serde_json::to_string(&resolve).unwrap(), text);
    }
}
