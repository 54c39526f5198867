//! The audit log's wire types: an entry as the API shows it ([`AuditEntryView`]) and what
//! verifying a chain found ([`AuditVerification`]). Entries never hold a secret: summaries
//! name credentials and environment variables, never their values (docs/AUDIT.md).

use crate::ids::*;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// Who made a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditActorKind {
    /// A person, with a personal API token or a web session.
    User,
    /// A paired device.
    Device,
    /// The server itself (the sweeper, the operator on the server's host).
    System,
}

/// The actor of an entry, named as they were when it was written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditActorView {
    /// User, device or system.
    pub kind: AuditActorKind,
    /// The user or device (none for the system).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Uuid>,
    /// Its name then.
    pub name: String,
}

/// What an entry is about: a kind (`connector`, `connection`, `tool`, `profile`, `grant`,
/// `member`, `token`, `device`, `placement`, `call`, …), an id and the name it had.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditObjectView {
    /// Its kind.
    pub kind: String,
    /// Its id, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Uuid>,
    /// Its name then.
    pub name: String,
}

/// One entry of a workspace's audit log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditEntryView {
    /// Its place in the workspace's chain, from 1.
    pub seq: i64,
    /// When it was written.
    pub at: DateTime<Utc>,
    /// The workspace (none: an installation-wide change, such as a connector's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_id: Option<WorkspaceId>,
    /// Who.
    pub actor: AuditActorView,
    /// What, as a stable dotted name (`connection.created`, `grant.changed`, `call.ended`).
    pub action: String,
    /// On what.
    pub object: AuditObjectView,
    /// The connection it concerns, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_id: Option<ConnectionId>,
    /// A summary of the object before (never a secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// A summary of the object after (never a secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
    /// The HTTP request's id (`x-request-id`), or a call's `request_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The request's trace id (from `traceparent`, else made by the server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The call, for `call.*` entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<CallId>,
    /// The previous entry's hash, hex (none for the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_hash: Option<String>,
    /// SHA-256 over this entry's content and `prev_hash`, hex.
    pub hash: String,
}

/// How a chain is broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditBreakKind {
    /// The entry's content no longer matches its hash.
    Edited,
    /// Entries before this one are missing.
    Removed,
    /// The entry is not where it was written: it follows another entry than the one it was
    /// chained to.
    Reordered,
    /// Entries at the end of the chain are missing (the head says there were more).
    Truncated,
}

/// The first break a verification found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditBreak {
    /// How.
    pub kind: AuditBreakKind,
    /// The seq of the entry where the chain breaks.
    pub seq: i64,
    /// What was found, for people.
    pub message: String,
}

/// What `audit verify` found walking a chain from its first entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditVerification {
    /// Entries read.
    pub entries: u64,
    /// The last seq the chain's head records.
    pub head_seq: i64,
    /// The first break, if any (none: the chain is intact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken: Option<AuditBreak>,
}
