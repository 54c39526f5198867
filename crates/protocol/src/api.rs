//! Request bodies and response views of the HTTP API under `/api/v1`.
//!
//! Path parameters that name a workspace, connector, connection or profile accept either the
//! object's UUID or its unique name.

use crate::ids::*;
use crate::state::CallState;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

pub use crate::agents::*;
pub use crate::audit::*;
pub use crate::connection_auth::*;
pub use crate::credentials::*;
pub use crate::placement::*;
pub use crate::reconcile::*;
pub use crate::tools::*;

/// Default `timeout_seconds` of a call.
pub const DEFAULT_TIMEOUT_SECONDS: u32 = 300;
/// Largest accepted `timeout_seconds`.
pub const MAX_TIMEOUT_SECONDS: u32 = 3600;
/// The environment every workspace starts with.
pub const DEFAULT_ENVIRONMENT: &str = "default";
/// The runner reference of the executor inside the server.
pub const CENTRAL_RUNNER: &str = "central";

/// `GET /api/v1/me`, and the user part of other views.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UserView {
    /// The user's id.
    pub id: UserId,
    /// Unique user name.
    pub name: String,
    /// Whether the user is an installation owner (may manage connectors).
    pub is_owner: bool,
}

/// `POST /api/v1/tokens`: a new personal API token for the caller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreateToken {
    /// A name to tell the caller's tokens apart (e.g. `laptop`, `ci`).
    pub name: String,
    /// Seconds until the token stops working; without it the token works until revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_seconds: Option<u64>,
}

/// A personal API token, without its secret (the server keeps only a hash).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenView {
    /// The token's id: what `revoke` names.
    pub id: TokenId,
    /// Its name.
    pub name: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it stops working, if it expires.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked; a revoked token is refused (401) at its next request.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// The answer to `POST /api/v1/tokens`: the token and its secret, shown this once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreatedToken {
    /// The token.
    pub token: TokenView,
    /// The bearer secret (`sy_…`). The server cannot show it again.
    pub secret: String,
}

/// `POST /api/v1/workspaces`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreateWorkspace {
    /// Unique workspace name.
    pub name: String,
}

/// A workspace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceView {
    /// The workspace's id.
    pub id: WorkspaceId,
    /// Unique name.
    pub name: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
}

/// A member's role in a workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MemberRole {
    /// May read the workspace and use profiles they hold Use on.
    #[default]
    Member,
    /// May also add members, environments, connections and profiles. Never implies Use.
    Admin,
}

/// `POST /api/v1/workspaces/{ws}/members`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AddMember {
    /// User id or name.
    pub user: String,
    /// Role; `member` when omitted.
    #[serde(default)]
    pub role: MemberRole,
}

/// A workspace member.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberView {
    /// The workspace.
    pub workspace_id: WorkspaceId,
    /// The user.
    pub user_id: UserId,
    /// The user's name.
    pub user_name: String,
    /// The role.
    pub role: MemberRole,
}

/// The answer to `POST /api/v1/workspaces/{ws}/members/{user}/remove`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RemovedMember {
    /// The member as they were.
    pub member: MemberView,
    /// How many grants on the workspace's profiles they lost with it.
    pub grants_removed: u64,
}

/// `POST /api/v1/workspaces/{ws}/environments`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreateEnvironment {
    /// Name, unique in the workspace.
    pub name: String,
}

/// An environment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentView {
    /// The environment's id.
    pub id: EnvironmentId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// Name, unique in the workspace.
    pub name: String,
}

/// How a connector reaches its MCP server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum ConnectorSpec {
    /// A local process speaking MCP over stdin/stdout.
    Stdio {
        /// Program to run (a path or a name on PATH).
        command: String,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// Names of environment variables the server needs (values come from credential
        /// bindings, never from here).
        #[serde(default)]
        env: Vec<String>,
    },
    /// A remote MCP server over streamable HTTP.
    Http {
        /// The MCP endpoint URL.
        url: String,
    },
}

/// `POST /api/v1/connectors`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreateConnector {
    /// Unique connector name.
    pub name: String,
    /// Transport and target.
    #[serde(flatten)]
    pub spec: ConnectorSpec,
}

/// A connector's transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// A local process over stdin/stdout.
    Stdio,
    /// A remote server over streamable HTTP.
    Http,
}

impl ConnectorSpec {
    /// Its transport.
    pub fn transport(&self) -> Transport {
        match self {
            ConnectorSpec::Stdio { .. } => Transport::Stdio,
            ConnectorSpec::Http { .. } => Transport::Http,
        }
    }
}

/// What a connector runs or reaches, as its reader may see it: the whole spec to those who
/// may manage connectors (installation owners), the transport alone to everyone else.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ConnectorTarget {
    /// Transport and target: command, arguments and variable names, or URL.
    Shown(ConnectorSpec),
    /// The transport only.
    Withheld {
        /// The transport.
        transport: Transport,
    },
}

impl ConnectorTarget {
    /// The transport, shown or not.
    pub fn transport(&self) -> Transport {
        match self {
            ConnectorTarget::Shown(spec) => spec.transport(),
            ConnectorTarget::Withheld { transport } => *transport,
        }
    }

    /// The spec, when shown.
    pub fn spec(&self) -> Option<&ConnectorSpec> {
        match self {
            ConnectorTarget::Shown(spec) => Some(spec),
            ConnectorTarget::Withheld { .. } => None,
        }
    }
}

/// A connector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectorView {
    /// The connector's id.
    pub id: ConnectorId,
    /// Unique name.
    pub name: String,
    /// Transport, and — to those who may manage connectors — the target.
    #[serde(flatten)]
    pub target: ConnectorTarget,
    /// Revision; bumped whenever the target changes.
    pub revision: i64,
    /// Whether the current revision is approved to run. HTTP connectors need no approval.
    pub approved: bool,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Set while it is retired: none of its connections runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired: Option<RetiredView>,
}

/// When a connector, connection or profile was retired, and by whom. A retired object runs
/// nothing and accepts nothing new, and stays readable with everything that names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetiredView {
    /// Since when.
    pub at: DateTime<Utc>,
    /// Who retired it (`None`: the user is gone).
    pub by: Option<UserId>,
}

/// `POST /api/v1/connectors/import` answer: what was created and what was left out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImportReport {
    /// Connectors created.
    pub created: Vec<ConnectorView>,
    /// Notes for the operator, e.g. environment values that were dropped.
    pub warnings: Vec<String>,
}

/// `PUT /api/v1/workspaces/{ws}/connections/{connection}/prefix-tools`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetPrefixTools {
    /// `true`: `namespace__tool` (the default); `false`: the tool's own name.
    pub prefix_tools: bool,
}

/// `PUT /api/v1/workspaces/{ws}/connections/{connection}/declared`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetDeclared {
    /// `true`: a declarative file owns the connection (`switchyard apply` retires it when its
    /// section is removed); `false`: it is managed by hand.
    pub declared: bool,
}

/// A connection's tools are prefixed unless it says otherwise.
fn prefixed() -> bool {
    true
}

/// `POST /api/v1/workspaces/{ws}/connections`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreateConnection {
    /// Name, unique in the workspace.
    pub name: String,
    /// Connector id or name.
    pub connector: String,
    /// Runner reference; `central` when omitted.
    #[serde(default)]
    pub runner: Option<String>,
    /// Namespace slug, 2–24 characters of `[a-z0-9_]`, unique in the workspace; derived from
    /// the name when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Credential references for a central connection (references only, never values): the
    /// server resolves them, checks them with the MCP `initialize` handshake (HTTP), and writes
    /// them into its credential bindings file under the new connection's id. Refused for a
    /// device placement (a device binds its own credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<ConnectionCredentials>,
    /// Created by a declarative file (`switchyard apply`), which may retire it when its
    /// section is removed; `false` when omitted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub declared: bool,
}

/// A connection: a connector placed in a workspace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionView {
    /// The connection's id.
    pub id: ConnectionId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// Name, unique in the workspace.
    pub name: String,
    /// Namespace slug (2–24 characters of `[a-z0-9_]`), unique in the workspace: what
    /// agent-facing tool names are made of (`slug__tool`).
    pub namespace: String,
    /// The connector.
    pub connector_id: ConnectorId,
    /// The connector's name.
    pub connector_name: String,
    /// Runner reference: `central` or `device:<uuid>`.
    pub runner: String,
    /// Revision; bumped whenever the connection's configuration changes.
    pub revision: i64,
    /// When tools were last discovered.
    pub last_discovery_at: Option<DateTime<Utc>>,
    /// Why the last discovery failed, if it did.
    pub last_discovery_error: Option<String>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Set while it is retired: it runs nothing, and its tools are retired with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired: Option<RetiredView>,
    /// Whether its tools reach agents as `namespace__tool` (else by their own names).
    #[serde(default = "prefixed")]
    pub prefix_tools: bool,
    /// Whether a declarative file created or adopted it (`switchyard apply`).
    #[serde(default)]
    pub declared: bool,
    /// How it authenticates to its server and whether it is authorized, once its auth
    /// settings were set (`PUT …/auth`) or it was authorized; absent before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<ConnectionAuthView>,
}

/// `POST /api/v1/workspaces/{ws}/connections/{c}/discover` answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiscoveryView {
    /// The connection.
    pub connection_id: ConnectionId,
    /// The catalog after discovery.
    pub tools: Vec<ToolView>,
}

/// `POST /api/v1/workspaces/{ws}/profiles`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CreateProfile {
    /// Name, unique in the workspace.
    pub name: String,
    /// Environment id or name; `default` when omitted.
    #[serde(default)]
    pub environment: Option<String>,
    /// Connection ids or names the profile may run.
    pub connections: Vec<String>,
    /// The exact tools it grants of its one connection; without it, every tool of each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
}

/// `PUT /api/v1/workspaces/{ws}/profiles/{p}/connections/{c}/tools`: the complete set of the
/// connection's tools the profile grants, replacing the one before.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetTools {
    /// The tools by name; `null` grants the connection whole (every tool, present and future).
    pub tools: Option<Vec<String>>,
}

/// `POST /api/v1/workspaces/{ws}/profiles/{p}/grants`: adds the named grants (independent).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GrantRequest {
    /// User id or name (a person); exactly one of `user` and `agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Agent id or name in the workspace: it may hold Use only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Grant Use: run tools and read results.
    #[serde(default, rename = "use")]
    pub use_: bool,
    /// Grant Manage: edit the profile.
    #[serde(default)]
    pub manage: bool,
    /// Grant Share: grant to others.
    #[serde(default)]
    pub share: bool,
    /// Grant Approve: answer approval questions about calls through the profile (never one's
    /// own).
    #[serde(default)]
    pub approve: bool,
}

/// One principal's grants on a profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GrantView {
    /// The user.
    pub user_id: UserId,
    /// The user's name.
    pub user_name: String,
    /// Holds Use.
    #[serde(rename = "use")]
    pub use_: bool,
    /// Holds Manage.
    pub manage: bool,
    /// Holds Share.
    pub share: bool,
    /// Holds Approve.
    #[serde(default)]
    pub approve: bool,
}

/// An execution profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProfileView {
    /// The profile's id.
    pub id: ProfileId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// Name, unique in the workspace.
    pub name: String,
    /// The environment it runs in.
    pub environment_id: EnvironmentId,
    /// Connections it may run.
    pub connection_ids: Vec<ConnectionId>,
    /// The connections it grants only some tools of, with those tools; any other of
    /// `connection_ids` is granted whole.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<ConnectionId, Vec<String>>,
    /// Who holds which grants.
    pub grants: Vec<GrantView>,
    /// Set while it is retired: nothing is submitted through it, its grants are inert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired: Option<RetiredView>,
}

/// `POST /api/v1/workspaces/{ws}/calls`: run one tool.
///
/// `profile_id` and `connection_id` also accept unique names; the idempotency payload is
/// compared after they are resolved to ids.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubmitCall {
    /// The client's idempotency key (a UUID kept for retries).
    pub request_id: RequestId,
    /// Profile id or name.
    pub profile_id: String,
    /// Connection id or name.
    pub connection_id: String,
    /// Tool to call.
    pub tool_name: String,
    /// Tool arguments: a JSON object.
    pub arguments: Value,
    /// Environment id or name; must match the profile's.
    #[serde(default)]
    pub environment_id: Option<String>,
    /// Warm-session key chosen by the client.
    #[serde(default)]
    pub client_session_id: Option<String>,
    /// 1–3600; 300 when omitted.
    #[serde(default)]
    pub timeout_seconds: Option<u32>,
    /// The operation (immutable scope) a device-submitted call runs under; required when the
    /// caller is a device, optional otherwise.
    #[serde(default)]
    pub operation_id: Option<OperationId>,
}

/// The error recorded for a call that failed or became unknown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallError {
    /// Stable code, e.g. `spawn_failed`, `timeout`, `runner_lost`.
    pub code: String,
    /// Redacted explanation.
    pub message: String,
}

impl CallError {
    /// An error with a stable `code` and its explanation.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

/// A call, as its readers see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallView {
    /// The call's id.
    pub id: CallId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// The client's idempotency key.
    pub request_id: RequestId,
    /// The profile it runs under.
    pub profile_id: ProfileId,
    /// The connection it runs on.
    pub connection_id: ConnectionId,
    /// The environment it runs in.
    pub environment_id: EnvironmentId,
    /// The tool.
    pub tool_name: String,
    /// Warm-session key, if any.
    pub client_session_id: Option<String>,
    /// Runner-enforced timeout.
    pub timeout_seconds: u32,
    /// Current state.
    pub state: CallState,
    /// Runner reference selected for the call.
    pub runner: String,
    /// The arguments; absent once inputs have expired.
    pub arguments: Option<Value>,
    /// The retained MCP `CallToolResult` (redacted, bounded); absent until finished or once
    /// expired.
    pub result: Option<Value>,
    /// Whether the retained result was cut to the retention bound.
    pub result_truncated: bool,
    /// Why the call failed or became unknown.
    pub error: Option<CallError>,
    /// When it was submitted.
    pub created_at: DateTime<Utc>,
    /// When a runner leased it.
    pub leased_at: Option<DateTime<Utc>>,
    /// When the server acknowledged its start.
    pub started_at: Option<DateTime<Utc>>,
    /// When it reached its current terminal or unknown state.
    pub finished_at: Option<DateTime<Utc>>,
    /// When cancellation was requested for a dispatched call.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// When retention erased the call's inputs and results; reads then show only this minimal
    /// disposition (state, error code, times).
    pub retention_expired_at: Option<DateTime<Utc>>,
    /// An ordinary tool call, or a receipt lookup run for `parent_call_id`.
    #[serde(default)]
    pub kind: CallKind,
    /// For a lookup: the unknown call it looks up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_call_id: Option<CallId>,
    /// For a `resolved` call: the outcome it was settled with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution_outcome: Option<ResolutionOutcome>,
    /// The attempt that was started (at most one), as it was recorded. Shown when reading one
    /// call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<AttemptView>,
    /// What receipt lookups and late receipts reported, oldest first. Shown when reading one
    /// call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observations: Vec<ObservationView>,
    /// How the call was settled, if it was. Shown when reading one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<ResolutionView>,
    /// Lookups, receipts and evidence linked to the call. Shown when reading one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<LineageView>,
    /// When the call's evidence was erased; only the minimal disposition remains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erased_at: Option<DateTime<Utc>>,
}

/// A call as the history list shows it: who submitted what, where it ran and how it ended —
/// never its arguments, result or error message (read one call for those).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallSummary {
    /// The call's id.
    pub id: CallId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// The client's idempotency key.
    pub request_id: RequestId,
    /// The profile it runs under.
    pub profile_id: ProfileId,
    /// The connection it runs on.
    pub connection_id: ConnectionId,
    /// The environment it runs in.
    pub environment_id: EnvironmentId,
    /// The tool.
    pub tool_name: String,
    /// An ordinary tool call, a receipt lookup or a discovery.
    pub kind: CallKind,
    /// For a lookup: the unknown call it looks up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_call_id: Option<CallId>,
    /// Current state.
    pub state: CallState,
    /// For a `resolved` call: the outcome it was settled with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution_outcome: Option<ResolutionOutcome>,
    /// Where it was placed: `central` or `device:<id>`.
    pub runner: String,
    /// The user who submitted it (for a device's call, the user who approved the device).
    pub submitted_by: UserId,
    /// The device that submitted it, if a device did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted_by_device: Option<DeviceId>,
    /// The stable code of why it failed or became unknown (its message is in the call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// When it was submitted.
    pub created_at: DateTime<Utc>,
    /// When the server acknowledged its start.
    pub started_at: Option<DateTime<Utc>>,
    /// When it reached its current terminal or unknown state.
    pub finished_at: Option<DateTime<Utc>>,
    /// When retention erased its inputs and results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_expired_at: Option<DateTime<Utc>>,
    /// When its evidence was erased.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erased_at: Option<DateTime<Utc>>,
}

/// `GET /api/v1/workspaces/{ws}/calls` answer: one page of the history, newest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallList {
    /// Newest first.
    pub calls: Vec<CallSummary>,
    /// Pass as `cursor` (with the same filters) for the next, older page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// What a cancel request did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelOutcome {
    /// The call had not been sent: it is `cancelled` now.
    Cancelled,
    /// The call was already dispatched: the runner sends MCP cancellation and records whatever
    /// the server answers.
    CancellationRequested,
    /// The call had already finished: nothing to cancel.
    AlreadyFinished,
}

/// `POST /api/v1/workspaces/{ws}/calls/{call}/cancel` answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CancelAnswer {
    /// What the request did.
    pub outcome: CancelOutcome,
    /// The call after the request.
    pub call: CallView,
}

/// `POST /api/v1/workspaces/{ws}/sessions/{client_session_id}/release`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReleaseSession {
    /// Connection id or name; all connections the caller may use when omitted.
    #[serde(default)]
    pub connection_id: Option<String>,
}

/// `…/sessions/{client_session_id}/release` answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReleaseAnswer {
    /// The released session key.
    pub client_session_id: String,
    /// Connections whose sessions with that key are draining.
    pub connection_ids: Vec<ConnectionId>,
}

/// A sanitized lifecycle event of a connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionEventView {
    /// Increasing event number.
    pub id: i64,
    /// The connection.
    pub connection_id: ConnectionId,
    /// `session_started`, `session_closed`, `process_exited`, `discovery_succeeded`, `discovery_failed`.
    pub kind: String,
    /// Kind-specific details (pid, reason, exit status, tool count, error).
    pub detail: Value,
    /// The runner that reported it, if any.
    pub runner: Option<String>,
    /// When it happened.
    pub at: DateTime<Utc>,
}

/// `POST /api/v1/pairing` (no authentication): a device asks to be paired.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartPairing {
    /// A name for the device, shown to the approving user (e.g. the host name).
    pub device_name: String,
}

/// Answer to [`StartPairing`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairingStarted {
    /// Identifies this pairing attempt when polling.
    pub pairing_id: uuid::Uuid,
    /// The short code a workspace member approves (e.g. `K7QM-3XTD`).
    pub code: String,
    /// When the code stops working.
    pub expires_at: DateTime<Utc>,
    /// Secret the device presents when polling, so only it can collect the credential.
    pub poll_secret: String,
}

/// `POST /api/v1/pairing/{pairing_id}/poll` (no authentication; the poll secret proves it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PollPairing {
    /// The secret from [`PairingStarted`].
    pub poll_secret: String,
}

/// Where a pairing attempt stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PairingStatus {
    /// Waiting for approval.
    Pending {
        /// When the code stops working.
        expires_at: DateTime<Utc>,
    },
    /// Approved. The credential is handed out on the first poll after approval only.
    Approved {
        /// The new device.
        device_id: DeviceId,
        /// Its workspace.
        workspace_id: WorkspaceId,
        /// The device credential (`sy_dev_…`); `None` once it was collected.
        credential: Option<String>,
    },
    /// The code expired unapproved.
    Expired,
}

/// `POST /api/v1/workspaces/{ws}/devices/approve`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApproveDevice {
    /// The code the device shows.
    pub code: String,
    /// Execution profile (id or name) the device may run calls under; the approver needs
    /// Use on it.
    pub profile: String,
}

/// A paired device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceView {
    /// The device's id.
    pub id: DeviceId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// Its name.
    pub name: String,
    /// Its runner reference, `device:<id>`: connections placed on it use this.
    pub runner: String,
    /// The profile it is bound to.
    pub profile_id: ProfileId,
    /// Who approved it.
    pub approved_by: UserId,
    /// When it was paired.
    pub created_at: DateTime<Utc>,
    /// When it was last heard from.
    pub last_seen_at: Option<DateTime<Utc>>,
    /// When it was revoked; a revoked device is refused at its next request.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// `POST /api/v1/workspaces/{ws}/operations`: begin an immutable scope for device calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BeginOperation {
    /// Environment id or name.
    pub environment: String,
    /// Profile id or name.
    pub profile: String,
    /// What the work is for, for people reading the record (≤ 500 characters).
    pub task: String,
}

/// An operation: the immutable scope device calls run under.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperationView {
    /// The operation's id.
    pub id: OperationId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// Its environment.
    pub environment_id: EnvironmentId,
    /// Its profile.
    pub profile_id: ProfileId,
    /// The task label.
    pub task: String,
    /// The device that began it, if a device did.
    pub device_id: Option<DeviceId>,
    /// When it began.
    pub created_at: DateTime<Utc>,
}
