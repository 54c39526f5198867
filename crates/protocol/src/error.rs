//! Stable error codes and the error body every API error uses:
//! `{"error": {"code": "mcp_request_conflict", "message": "..."}}`.
//!
//! Codes are a promise: clients and scripts match on them. Add new ones; never rename one.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A stable, machine-readable error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The body is not valid JSON.
    InvalidJson,
    /// The body is JSON but a field is missing or has the wrong type.
    InvalidRequest,
    /// A name is empty, too long or uses characters outside `[A-Za-z0-9._-]`.
    InvalidName,
    /// Call `arguments` is not a JSON object.
    InvalidArguments,
    /// `timeout_seconds` is outside 1–3600.
    InvalidTimeout,
    /// A connector definition is incomplete or contradictory.
    InvalidConnector,
    /// A filter of a list (`state`, `tool`, `connection`, `submitter`, `placement`, `since`,
    /// `until`, `limit`) is unknown or has a value it cannot take: the message names it and
    /// what it accepts.
    InvalidFilter,
    /// A list's `cursor` is not one the server issued for these filters (garbled, edited, or
    /// from other filters): repeat the filters it came with, or start over without it.
    InvalidCursor,
    /// No valid token or session was presented.
    Unauthenticated,
    /// The caller is known but lacks the authority needed (e.g. Use on the profile).
    Forbidden,
    /// The workspace does not exist or the caller is not a member.
    WorkspaceNotFound,
    /// No such environment in this workspace.
    EnvironmentNotFound,
    /// No such connector.
    ConnectorNotFound,
    /// No such connection in this workspace.
    ConnectionNotFound,
    /// No such profile in this workspace.
    ProfileNotFound,
    /// No such user.
    UserNotFound,
    /// No such call in this workspace.
    CallNotFound,
    /// The tool is not in the connection's discovered catalog.
    ToolNotFound,
    /// A name given where a unique one is needed matches several objects.
    AmbiguousName,
    /// An object with this name already exists.
    AlreadyExists,
    /// The stdio connector's command has not been approved by the installation owner.
    ConnectorNotApproved,
    /// The connection is not part of the profile.
    ConnectionNotInProfile,
    /// The call's environment differs from the profile's.
    EnvironmentMismatch,
    /// Tool discovery failed (the MCP server could not be started or did not answer).
    DiscoveryFailed,
    /// The request_id was used before with a different payload.
    McpRequestConflict,
    /// The request_id's inputs or result have expired.
    McpReplayExpired,
    /// No pending pairing matches (unknown, expired or already used code, or a wrong poll
    /// secret): one answer for all, so the code space cannot be probed.
    PairingNotFound,
    /// No such device in this workspace.
    DeviceNotFound,
    /// No such API token of this user.
    TokenNotFound,
    /// The user is not a member of this workspace.
    MemberNotFound,
    /// The change would leave the workspace without an admin.
    LastAdmin,
    /// The device credential belongs to a revoked device.
    DeviceRevoked,
    /// The runner's lease epoch is stale: another process owns the runner now.
    RunnerFenced,
    /// A device submitted a call without an `operation_id`.
    OperationRequired,
    /// No such operation in this workspace (for a device: under its profile).
    OperationNotFound,
    /// The call's profile or environment differs from its operation's.
    OperationMismatch,
    /// The connection's configuration (revision, command, URL, runner or credential binding)
    /// changed since the unknown call ran: a lookup would ask another target.
    McpReconcileConfigChanged,
    /// Only an `unknown` call can be reconciled or resolved.
    McpReconcileNotUnknown,
    /// The connection has no approved receipt policy to look receipts up with.
    ReceiptPolicyMissing,
    /// No readable evidence record with this id in this workspace (unknown, another
    /// workspace's, or erased).
    EvidenceNotFound,
    /// A resolution's explanation is longer than 2,000 characters.
    ExplanationTooLong,
    /// The call's evidence was erased: it can no longer be reconciled or resolved.
    CallErased,
    /// The call is still queued, leased or running: wait until it finishes or is unknown.
    CallActive,
    /// The request body is larger than the server accepts.
    BodyTooLarge,
    /// The profile grants only some tools of the connection, and not this one.
    ToolNotGranted,
    /// The web session holds as many call inspector streams open as it may.
    TooManyStreams,
    /// The connection is retired: it runs nothing until restored.
    ConnectionRetired,
    /// The connector is retired: none of its connections runs until it is restored.
    ConnectorRetired,
    /// The profile is retired: nothing is submitted through it until it is restored.
    ProfileRetired,
    /// On a runner channel: the answer would be longer than a channel line; ask again over the
    /// request's HTTP route (nothing was handed out by the request answered this way).
    AnswerTooLong,
    /// The workspace holds as many queued, or running, calls as the server allows; nothing
    /// was queued. Submit again once some have finished.
    QuotaExceeded,
    /// The connection is placed on a device whose owner has not accepted the placement (or
    /// declined it): `switchyard device accept` on the owner's side.
    PlacementPending,
    /// The connector's launch spec is not the one the device's owner accepted: they must
    /// accept the new spec first.
    SpecChanged,
    /// An HTTP connector's URL is, or resolves to, an address the installation does not let
    /// its runner reach (loopback, private, link-local, …) and its allow-list does not admit.
    EndpointBlocked,
    /// A connection's namespace is not 2–24 characters of lower-case letters, digits and
    /// underscores.
    InvalidNamespace,
    /// A discovery of a connection placed on a device is queued for the device's runner and
    /// did not finish while the request waited (the runner is offline or busy): it stays
    /// queued and runs when the runner takes it; ask again to wait for it.
    DiscoveryPending,
    /// The call needs a person's approval and the profile's policy is `never` (nobody to
    /// ask): nothing was queued.
    ApprovalUnavailable,
    /// No approval question for this call in this workspace (or none the caller may read).
    ApprovalNotFound,
    /// The question was answered already, or its call expired: nothing changed.
    ApprovalDecided,
    /// The approver submitted the call themselves: someone else must approve it.
    SelfApproval,
    /// The tool is in the connection's catalog but not classified (new, or its connection was
    /// restored): an admin must classify it (`switchyard tool classify`) before it can be
    /// called; nothing was queued.
    ToolUnclassified,
    /// The connection's latest discovery no longer lists the tool; nothing was queued.
    ToolUnavailable,
    /// The MCP `initialize` handshake with an HTTP endpoint failed (unreachable, not an MCP
    /// server, or the credential was refused): nothing was stored.
    HandshakeFailed,
    /// A connection's credential references cannot be used (malformed, reserved destination,
    /// value missing, no bindings file to hold them): nothing was stored.
    InvalidCredentials,
    /// Credential values cannot be set through the API here: the server was started without an
    /// installation key (`--installation-key-file`) to seal them with.
    CredentialValuesDisabled,
    /// The connection runs on a device: its credential values are set on that device
    /// (`switchyard credential set`), never sent to the server.
    ConnectionNotCentral,
    /// The `/mcp` session named by `Mcp-Session-Id` does not exist for this principal (it
    /// ended, or another principal started it): start a new one with `initialize`.
    McpSessionNotFound,
    /// No agent of this id or name in the workspace.
    AgentNotFound,
    /// The grant would give an agent one connection through two profiles that grant it
    /// differently (other tools or environment): nothing was granted.
    ConflictingRoutes,
    /// The connection cannot be authorized this way: it is not an HTTP connection placed
    /// centrally, its auth kind is not `oauth`, or its server asks for no OAuth.
    AuthorizationUnsupported,
    /// Authorizing failed at the authorization server or the MCP server: discovery,
    /// registration or the token request failed, did not answer in time, or the server does
    /// not support what the MCP authorization spec requires (PKCE with S256).
    AuthorizationFailed,
    /// The OAuth callback's `state` is not one this installation issued, or it expired (ten
    /// minutes) or was used: start the authorization again.
    AuthorizationStateInvalid,
    /// The OAuth callback names another issuer (`iss`, RFC 9207) than the authorization
    /// server the flow began with: the code was not redeemed.
    IssuerMismatch,
    /// The server holds no installation key (`--installation-key-file`), so it cannot store a
    /// credential sealed.
    VaultNotConfigured,
    /// An OAuth client's `client_id_env`/`client_secret_env` names a server environment
    /// variable outside the `SWITCHYARD_OAUTH_` namespace: only those may hold OAuth clients.
    OauthEnvRefused,
    /// The person declined consent at the authorization server (`access_denied`): nothing was
    /// granted; start the authorization again to consent.
    AuthorizationDeclined,
    /// An internal error; details are in the server log.
    Internal,
}

impl ErrorCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::InvalidName => "invalid_name",
            ErrorCode::InvalidArguments => "invalid_arguments",
            ErrorCode::InvalidTimeout => "invalid_timeout",
            ErrorCode::InvalidConnector => "invalid_connector",
            ErrorCode::InvalidFilter => "invalid_filter",
            ErrorCode::InvalidCursor => "invalid_cursor",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::WorkspaceNotFound => "workspace_not_found",
            ErrorCode::EnvironmentNotFound => "environment_not_found",
            ErrorCode::ConnectorNotFound => "connector_not_found",
            ErrorCode::ConnectionNotFound => "connection_not_found",
            ErrorCode::ProfileNotFound => "profile_not_found",
            ErrorCode::UserNotFound => "user_not_found",
            ErrorCode::CallNotFound => "call_not_found",
            ErrorCode::ToolNotFound => "tool_not_found",
            ErrorCode::AmbiguousName => "ambiguous_name",
            ErrorCode::AlreadyExists => "already_exists",
            ErrorCode::ConnectorNotApproved => "connector_not_approved",
            ErrorCode::ConnectionNotInProfile => "connection_not_in_profile",
            ErrorCode::EnvironmentMismatch => "environment_mismatch",
            ErrorCode::DiscoveryFailed => "discovery_failed",
            ErrorCode::McpRequestConflict => "mcp_request_conflict",
            ErrorCode::McpReplayExpired => "mcp_replay_expired",
            ErrorCode::PairingNotFound => "pairing_not_found",
            ErrorCode::DeviceNotFound => "device_not_found",
            ErrorCode::TokenNotFound => "token_not_found",
            ErrorCode::MemberNotFound => "member_not_found",
            ErrorCode::LastAdmin => "last_admin",
            ErrorCode::DeviceRevoked => "device_revoked",
            ErrorCode::RunnerFenced => "runner_fenced",
            ErrorCode::OperationRequired => "operation_required",
            ErrorCode::OperationNotFound => "operation_not_found",
            ErrorCode::OperationMismatch => "operation_mismatch",
            ErrorCode::McpReconcileConfigChanged => "mcp_reconcile_config_changed",
            ErrorCode::McpReconcileNotUnknown => "mcp_reconcile_not_unknown",
            ErrorCode::ReceiptPolicyMissing => "receipt_policy_missing",
            ErrorCode::EvidenceNotFound => "evidence_not_found",
            ErrorCode::ExplanationTooLong => "explanation_too_long",
            ErrorCode::CallErased => "call_erased",
            ErrorCode::BodyTooLarge => "body_too_large",
            ErrorCode::ToolNotGranted => "tool_not_granted",
            ErrorCode::TooManyStreams => "too_many_streams",
            ErrorCode::AnswerTooLong => "answer_too_long",
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::CallActive => "call_active",
            ErrorCode::ConnectionRetired => "connection_retired",
            ErrorCode::ConnectorRetired => "connector_retired",
            ErrorCode::ProfileRetired => "profile_retired",
            ErrorCode::PlacementPending => "placement_pending",
            ErrorCode::SpecChanged => "spec_changed",
            ErrorCode::EndpointBlocked => "endpoint_blocked",
            ErrorCode::InvalidNamespace => "invalid_namespace",
            ErrorCode::DiscoveryPending => "discovery_pending",
            ErrorCode::ApprovalUnavailable => "approval_unavailable",
            ErrorCode::ApprovalNotFound => "approval_not_found",
            ErrorCode::ApprovalDecided => "approval_decided",
            ErrorCode::SelfApproval => "self_approval",
            ErrorCode::ToolUnclassified => "tool_unclassified",
            ErrorCode::ToolUnavailable => "tool_unavailable",
            ErrorCode::HandshakeFailed => "handshake_failed",
            ErrorCode::InvalidCredentials => "invalid_credentials",
            ErrorCode::CredentialValuesDisabled => "credential_values_disabled",
            ErrorCode::ConnectionNotCentral => "connection_not_central",
            ErrorCode::McpSessionNotFound => "mcp_session_not_found",
            ErrorCode::AgentNotFound => "agent_not_found",
            ErrorCode::ConflictingRoutes => "conflicting_routes",
            ErrorCode::AuthorizationUnsupported => "authorization_unsupported",
            ErrorCode::AuthorizationFailed => "authorization_failed",
            ErrorCode::AuthorizationStateInvalid => "authorization_state_invalid",
            ErrorCode::IssuerMismatch => "issuer_mismatch",
            ErrorCode::VaultNotConfigured => "vault_not_configured",
            ErrorCode::OauthEnvRefused => "oauth_env_refused",
            ErrorCode::AuthorizationDeclined => "authorization_declined",
            ErrorCode::Internal => "internal",
        }
    }

    /// The HTTP status this code is served with.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidJson
            | ErrorCode::InvalidRequest
            | ErrorCode::InvalidName
            | ErrorCode::InvalidArguments
            | ErrorCode::InvalidTimeout
            | ErrorCode::InvalidConnector
            | ErrorCode::InvalidFilter
            | ErrorCode::InvalidCursor
            | ErrorCode::InvalidNamespace
            | ErrorCode::ExplanationTooLong
            | ErrorCode::AuthorizationStateInvalid
            | ErrorCode::IssuerMismatch
            | ErrorCode::OauthEnvRefused => 400,
            ErrorCode::Unauthenticated | ErrorCode::DeviceRevoked => 401,
            ErrorCode::Forbidden
            | ErrorCode::ToolNotGranted
            | ErrorCode::SelfApproval
            | ErrorCode::AuthorizationDeclined => 403,
            ErrorCode::WorkspaceNotFound
            | ErrorCode::EnvironmentNotFound
            | ErrorCode::ConnectorNotFound
            | ErrorCode::ConnectionNotFound
            | ErrorCode::ProfileNotFound
            | ErrorCode::UserNotFound
            | ErrorCode::CallNotFound
            | ErrorCode::ToolNotFound
            | ErrorCode::PairingNotFound
            | ErrorCode::DeviceNotFound
            | ErrorCode::TokenNotFound
            | ErrorCode::MemberNotFound
            | ErrorCode::OperationNotFound
            | ErrorCode::EvidenceNotFound
            | ErrorCode::ApprovalNotFound
            | ErrorCode::McpSessionNotFound
            | ErrorCode::AgentNotFound => 404,
            ErrorCode::AmbiguousName
            | ErrorCode::ConflictingRoutes
            | ErrorCode::AlreadyExists
            | ErrorCode::ConnectorNotApproved
            | ErrorCode::LastAdmin
            | ErrorCode::RunnerFenced
            | ErrorCode::McpReconcileConfigChanged
            | ErrorCode::McpReconcileNotUnknown
            | ErrorCode::ReceiptPolicyMissing
            | ErrorCode::CallActive
            | ErrorCode::ConnectionRetired
            | ErrorCode::ConnectorRetired
            | ErrorCode::ProfileRetired
            | ErrorCode::PlacementPending
            | ErrorCode::SpecChanged
            | ErrorCode::ApprovalDecided
            | ErrorCode::ToolUnclassified
            | ErrorCode::ToolUnavailable
            | ErrorCode::CredentialValuesDisabled
            | ErrorCode::ConnectionNotCentral
            | ErrorCode::VaultNotConfigured => 409,
            ErrorCode::McpReplayExpired | ErrorCode::CallErased => 410,
            ErrorCode::BodyTooLarge | ErrorCode::AnswerTooLong => 413,
            ErrorCode::TooManyStreams | ErrorCode::QuotaExceeded => 429,
            ErrorCode::ConnectionNotInProfile
            | ErrorCode::EnvironmentMismatch
            | ErrorCode::McpRequestConflict
            | ErrorCode::OperationRequired
            | ErrorCode::OperationMismatch
            | ErrorCode::EndpointBlocked
            | ErrorCode::ApprovalUnavailable
            | ErrorCode::HandshakeFailed
            | ErrorCode::InvalidCredentials
            | ErrorCode::AuthorizationUnsupported => 422,
            ErrorCode::DiscoveryFailed | ErrorCode::AuthorizationFailed => 502,
            ErrorCode::DiscoveryPending => 504,
            ErrorCode::Internal => 500,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error object inside an [`ErrorBody`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// Stable machine-readable code.
    pub code: ErrorCode,
    /// What went wrong and what to fix, for a person.
    pub message: String,
}

/// The JSON body of every error response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ApiError,
}

impl ErrorBody {
    /// An error body with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error: ApiError {
                code,
                message: message.into(),
            },
        }
    }
}
