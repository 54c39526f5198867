//! `POST /api/v1/workspaces/{ws}/connections/{c}/diagnose`: the ordered checks of one
//! connection and, when its live handshake failed, the class of the failure.
//!
//! The names here are a promise: scripts match on [`DiagnoseCheck`] and [`FailureClass`], so
//! a variant may be added but never renamed.

use crate::ids::ConnectionId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Longest stderr tail (in characters) a diagnosis carries: its last lines, where the reason
/// a server failed usually is.
pub const DIAGNOSE_STDERR_TAIL_CHARS: usize = 4096;

/// Longest time bound a diagnosis may ask for its live handshake, in milliseconds.
pub const MAX_DIAGNOSE_TIMEOUT_MS: u64 = 60_000;

/// The request body; every field may be left out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiagnoseRequest {
    /// Time bound of the live handshake (`initialize` and `tools/list`), 1 to
    /// [`MAX_DIAGNOSE_TIMEOUT_MS`]; the server's discovery deadline when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// One check of a diagnosis, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnoseCheck {
    /// The connection and its connector are in service (not retired).
    Enabled,
    /// The connector's command is approved by an installation owner.
    Approved,
    /// The connector's transport settings (command and arguments, or URL) and placement.
    Transport,
    /// Which credentials are bound and whether their values are present (names only).
    Credentials,
    /// The cached tool catalog and the last discovery.
    Catalog,
    /// Profiles that hold the connection, and who holds a `use` grant on them.
    Grants,
    /// A live MCP handshake (`initialize`, then `tools/list`) within the time bound.
    Handshake,
}

impl DiagnoseCheck {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enabled => "enabled",
            Self::Approved => "approved",
            Self::Transport => "transport",
            Self::Credentials => "credentials",
            Self::Catalog => "catalog",
            Self::Grants => "grants",
            Self::Handshake => "handshake",
        }
    }
}

impl fmt::Display for DiagnoseCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Nothing wrong.
    Passed,
    /// Something to fix; the detail says what.
    Failed,
    /// Not run: an earlier check failed, or it runs elsewhere (the detail says which).
    Skipped,
}

impl CheckStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
        }
    }
}

impl fmt::Display for CheckStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a live handshake failed, from the error's kind (never from its words).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The stdio command does not exist (on the runner's `PATH`, or at its path).
    ExecutableNotFound,
    /// The stdio command exists but could not be started (not executable, not a file, …).
    SpawnFailed,
    /// The server did not complete the handshake within the time bound.
    HandshakeTimeout,
    /// Something answered, but not as an MCP server (not JSON-RPC, or refused `initialize`).
    NotMcp,
    /// The server refused the credential (HTTP 401/403), or a bound value was unusable.
    AuthRefused,
    /// The TLS handshake with an `https://` endpoint failed.
    TlsFailed,
    /// Nothing answered: connection refused, reset, or the host name did not resolve.
    Unreachable,
    /// The runner's endpoint guard refused the address; nothing was sent to it.
    EndpointBlocked,
}

impl FailureClass {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExecutableNotFound => "executable_not_found",
            Self::SpawnFailed => "spawn_failed",
            Self::HandshakeTimeout => "handshake_timeout",
            Self::NotMcp => "not_mcp",
            Self::AuthRefused => "auth_refused",
            Self::TlsFailed => "tls_failed",
            Self::Unreachable => "unreachable",
            Self::EndpointBlocked => "endpoint_blocked",
        }
    }
}

impl FailureClass {
    /// Every class, in the order the documentation lists them.
    pub const ALL: [FailureClass; 8] = [
        Self::ExecutableNotFound,
        Self::SpawnFailed,
        Self::HandshakeTimeout,
        Self::NotMcp,
        Self::AuthRefused,
        Self::TlsFailed,
        Self::Unreachable,
        Self::EndpointBlocked,
    ];

    /// The class whose wire name is `name`, if any.
    pub fn from_name(name: &str) -> Option<FailureClass> {
        Self::ALL.into_iter().find(|class| class.as_str() == name)
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the live handshake of a diagnosis runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LiveCheck {
    /// In the server, as the central runner would open the session.
    Central,
    /// On the device the connection is placed on, by its runner with the device's credentials
    /// (a discovery within the bound); the server cannot open that session itself.
    OnDevice,
}

/// The outcome of one check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// Which check.
    pub check: DiagnoseCheck,
    /// How it came out.
    pub status: CheckStatus,
    /// What it found, for people; names credentials, never a value.
    pub detail: String,
}

/// The answer: every check in order, and the failure class of a failed live handshake.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiagnosisView {
    /// The connection.
    pub connection_id: ConnectionId,
    /// Its name.
    pub connection: String,
    /// Runner reference: `central` or `device:<uuid>`.
    pub runner: String,
    /// Where the live handshake runs.
    pub live_check: LiveCheck,
    /// The checks, in the order they ran.
    pub checks: Vec<CheckResult>,
    /// Whether no check failed.
    pub passed: bool,
    /// The class of the live handshake's failure, when it failed.
    pub failure: Option<FailureClass>,
    /// The last of a failed stdio server's stderr (at most [`DIAGNOSE_STDERR_TAIL_CHARS`]
    /// characters), with bound credential values redacted.
    pub stderr_tail: Option<String>,
}
