//! Every way `switchyard` can stop short, each mapped to one stable exit code.
//!
//! The exit codes are a promise to scripts (see `EXIT_CODES.md`): a variant may be added, but an
//! existing one never changes its code.

use std::io;
use std::path::PathBuf;
use switchyard_mcp_runner::credentials::{CredentialError, StoreError};
use switchyard_mcp_runner::identity::IdentityError;
use switchyard_protocol::{CallId, CallState};

/// An error that ends the CLI, with a stable exit code.
///
/// | code | meaning |
/// |---|---|
/// | 0 | success |
/// | 2 | usage or local input error: bad flags, unreadable or invalid file, bad `SWITCHYARD_URL`, a device identity that cannot be stored, a missing runner helper |
/// | 3 | not authenticated: no `SWITCHYARD_TOKEN` and no usable paired device, or the server answered 401 (e.g. `device_revoked`) |
/// | 4 | refused by the server: any other 4xx, printed as `error[<code>]: <message>`; also a pairing code that expired (`pairing_expired`), an `apply` whose plan cannot be carried out (`apply_blocked`: nothing was changed), and an `auth` whose consent did not come in time (`authorization_pending`) |
/// | 5 | server unreachable, or it answered 5xx or something unreadable |
/// | 6 | `mcp call --wait` finished but the call did not succeed (`tool_error`, `failed`, `cancelled`, `expired`) |
/// | 7 | `mcp call --wait` ended with the call `unknown` (or `resolved` from unknown), or `mcp reconcile` left it `unknown`: the effect may or may not have happened — never retry blindly |
/// | 8 | `audit verify` found the workspace's audit log broken: an entry edited, removed or reordered |
/// | 9 | `connection diagnose` found a check failed (the checks are printed) |
/// | 130 | interrupted (Ctrl-C) while `pair` was waiting for approval or `auth` for consent |
///
/// Usage errors found by clap itself also exit 2 (clap's own convention).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Arguments clap cannot check on its own are wrong (exit 2).
    #[error("error: {0}")]
    Usage(String),
    /// A local input (`FILE` or stdin) could not be read (exit 2).
    #[error("error: cannot read {name}: {source}")]
    ReadInput {
        /// The file, or `<stdin>`.
        name: String,
        /// Why reading failed.
        source: io::Error,
    },
    /// A local input is not valid JSON (exit 2).
    #[error("error: {name}: invalid JSON: {source}")]
    InvalidJson {
        /// The file, or `<stdin>`.
        name: String,
        /// The parse error; its text names the line and column.
        source: serde_json::Error,
    },
    /// A local input is valid JSON but not an object (exit 2).
    #[error("error: {name}: expected a JSON object, found {found}")]
    NotAnObject {
        /// The file, or `<stdin>`.
        name: String,
        /// What was found instead (`an array`, `a string`, …).
        found: &'static str,
    },
    /// A `switchyard.toml` breaks the file's rules (exit 2): every problem, with its line and
    /// column.
    #[error("{}", config_issues(name, issues))]
    InvalidConfig {
        /// The file.
        name: String,
        /// What is wrong, in file order.
        issues: Vec<crate::config::Issue>,
    },
    /// A server URL (`SWITCHYARD_URL`, `--server`) cannot be used as the API's base URL (exit 2).
    #[error("error: {origin} `{url}` is not usable: {reason}")]
    BadUrl {
        /// Where the URL came from.
        origin: &'static str,
        /// The value as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be set up on this machine (exit 2).
    #[error("error: cannot set up the HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// No `SWITCHYARD_TOKEN` in the environment and no device paired under the profile (exit 3).
    #[error(
        "error: SWITCHYARD_TOKEN is not set and no device is paired under profile `{profile}`: \
         export a personal API token (an operator creates one with \
         `switchyard-server admin create-user`), or pair this machine with \
         `switchyard pair --server URL`"
    )]
    NoToken {
        /// The device profile that was looked up.
        profile: String,
    },
    /// The paired device identity cannot be used (exit 3).
    #[error("error: cannot use the paired device identity: {0}")]
    DeviceIdentity(#[source] IdentityError),
    /// `SWITCHYARD_URL` names another server than the one the device profile is paired with
    /// (exit 3).
    #[error(
        "error: SWITCHYARD_URL is {url} but device profile `{profile}` is paired with {paired}; \
         unset SWITCHYARD_URL, or select another profile with SWITCHYARD_DEVICE_PROFILE"
    )]
    ServerMismatch {
        /// `SWITCHYARD_URL`.
        url: String,
        /// The device profile.
        profile: String,
        /// The server the profile is paired with.
        paired: String,
    },
    /// A device identity could not be stored, or the store is unusable (exit 2).
    #[error("error: {0}")]
    IdentityStore(#[source] IdentityError),
    /// The pairing code expired before anyone approved it (exit 4).
    #[error(
        "error[pairing_expired]: pairing code {code} expired before it was approved; run \
         `switchyard pair` again for a new code"
    )]
    PairingExpired {
        /// The code.
        code: String,
    },
    /// The pairing was approved but its credential had already been collected (exit 4).
    #[error(
        "error[pairing_collected]: pairing code {code} was approved, but its device credential \
         was already collected by another request; revoke device {device} and pair again"
    )]
    PairingCollected {
        /// The code.
        code: String,
        /// The approved device.
        device: String,
    },
    /// `audit verify` found the chain broken (exit 8).
    #[error("error[audit_broken]: the audit log of {log} is broken at entry {seq}: {message}")]
    AuditBroken {
        /// Which log: `workspace `NAME`` or `the installation`.
        log: String,
        /// The entry where it breaks.
        seq: i64,
        /// What was found.
        message: String,
    },
    /// `connection diagnose` found a check failed (exit 9); the checks are printed.
    #[error("error[diagnose_failed]: connection {connection}: {failed}")]
    DiagnoseFailed {
        /// The connection.
        connection: String,
        /// Which checks failed, and the handshake's failure class.
        failed: String,
    },
    /// A credential value or binding was refused or could not be stored (exit 2).
    #[error("error[{code}]: {0}", code = .0.code())]
    Credential(#[source] CredentialError),
    /// `credential set --store keyring` and the OS keyring cannot be used (exit 2).
    #[error(
        "error[credential_unavailable]: {0}; keep the value in the 0600 secrets file with \
         `--store file`"
    )]
    KeyringUnavailable(#[source] StoreError),
    /// No device is paired on this machine under the profile, so no runner here serves the
    /// connection (exit 2).
    #[error(
        "error[device_not_paired]: no device is paired under profile `{profile}` on this \
         machine: credential values are kept where the device runner that uses them runs; pair \
         this machine with `switchyard pair`, or name its profile with --profile"
    )]
    NoLocalDevice {
        /// The profile looked up.
        profile: String,
    },
    /// The connection is not placed on this machine's device (exit 2).
    #[error(
        "error[connection_not_local]: connection `{connection}` is not placed on device \
         {device} (profile `{profile}`, this machine) but on {elsewhere}; set its values where \
         it runs"
    )]
    NotPlacedHere {
        /// The connection as named.
        connection: String,
        /// The local profile.
        profile: String,
        /// This machine's device.
        device: String,
        /// Where it is placed instead.
        elsewhere: String,
    },
    /// `apply` found the plan cannot be carried out, and changed nothing (exit 4).
    #[error("{}", problems.iter().map(|p| format!("error[apply_blocked]: {p}")).collect::<Vec<_>>().join("\n"))]
    PlanBlocked {
        /// Why, one problem each.
        problems: Vec<String>,
    },
    /// `auth` waited for the browser's consent and the connection was not authorized in time
    /// (exit 4).
    #[error(
        "error[authorization_pending]: connection {connection} was not authorized within {waited_secs} s; open the URL again or run `switchyard auth` again for a new one"
    )]
    AuthorizationPending {
        /// The connection.
        connection: String,
        /// How long it waited.
        waited_secs: u64,
    },
    /// Authorizing a connection placed on this machine's device failed; nothing was kept
    /// (exit 4).
    #[error("error[{code}]: connection {connection}: {message}")]
    DeviceAuthorization {
        /// The connection.
        connection: String,
        /// The stable error code (`authorization_failed`, `issuer_mismatch`, …).
        code: &'static str,
        /// What happened and what to do.
        message: String,
    },
    /// The user interrupted the command (exit 130).
    #[error("error: interrupted{detail}")]
    Interrupted {
        /// What was left undone, e.g. `; the device was not paired`.
        detail: &'static str,
    },
    /// The runner helper is not installed next to `switchyard` (exit 2).
    #[error(
        "error: the device runner helper is missing: {} does not exist; install \
         switchyard-mcp-runner in the same directory as switchyard",
        path.display()
    )]
    HelperMissing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The runner helper could not be started (exit 2).
    #[error("error: cannot run {}: {source}", path.display())]
    HelperExec {
        /// The helper.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// `SWITCHYARD_TOKEN` cannot be sent as an HTTP header (exit 3).
    #[error("error: SWITCHYARD_TOKEN is not a valid token (it must be printable ASCII)")]
    BadToken,
    /// The server answered 401 (exit 3).
    #[error("error[{code}]: {message}")]
    Unauthenticated {
        /// The server's error code.
        code: String,
        /// The server's message.
        message: String,
    },
    /// The server refused the request with a 4xx other than 401 (exit 4).
    #[error("error[{code}]: {message}")]
    Refused {
        /// The server's stable error code.
        code: String,
        /// The server's message.
        message: String,
    },
    /// The server could not be reached, or the connection broke (exit 5).
    #[error("error: cannot reach the Switchyard server at {url}: {detail}")]
    Unreachable {
        /// The base URL, without any password.
        url: String,
        /// The transport error and its causes.
        detail: String,
    },
    /// The server answered 5xx (exit 5).
    #[error("error[{code}]: {message} (HTTP {status})")]
    Server {
        /// The HTTP status.
        status: u16,
        /// The server's error code.
        code: String,
        /// The server's message.
        message: String,
    },
    /// The server answered something this CLI cannot read (exit 5).
    #[error("error: unexpected answer from {url}: {detail}")]
    BadResponse {
        /// The request URL.
        url: String,
        /// What was unexpected.
        detail: String,
    },
    /// A waited-for call reached a terminal state other than `succeeded` (exit 6).
    #[error("error: call {id} ended {state}{}", reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    CallNotSucceeded {
        /// The call.
        id: CallId,
        /// Its final state.
        state: CallState,
        /// The recorded error, if any.
        reason: Option<String>,
    },
    /// A waited-for call ended `unknown` or `resolved`: its effect is uncertain (exit 7).
    #[error(
        "error: call {id} is {state}{}: the tool may or may not have acted. Do not retry \
         blindly; inspect it with `switchyard mcp status {workspace} {id}`",
        reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
    )]
    CallUncertain {
        /// The call.
        id: CallId,
        /// `unknown` or `resolved`.
        state: CallState,
        /// The recorded error, if any (e.g. `runner_lost`, `timeout`).
        reason: Option<String>,
        /// The call's workspace, for the hint.
        workspace: String,
    },
}

impl CliError {
    /// The process exit code for this error (documented in `EXIT_CODES.md`).
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_)
            | CliError::ReadInput { .. }
            | CliError::InvalidJson { .. }
            | CliError::NotAnObject { .. }
            | CliError::InvalidConfig { .. }
            | CliError::BadUrl { .. }
            | CliError::HttpClient(_)
            | CliError::IdentityStore(_)
            | CliError::HelperMissing { .. }
            | CliError::HelperExec { .. }
            | CliError::Credential(_)
            | CliError::KeyringUnavailable(_)
            | CliError::NoLocalDevice { .. }
            | CliError::NotPlacedHere { .. } => 2,
            CliError::NoToken { .. }
            | CliError::BadToken
            | CliError::Unauthenticated { .. }
            | CliError::DeviceIdentity(_)
            | CliError::ServerMismatch { .. } => 3,
            CliError::Refused { .. }
            | CliError::PairingExpired { .. }
            | CliError::PairingCollected { .. }
            | CliError::PlanBlocked { .. }
            | CliError::AuthorizationPending { .. }
            | CliError::DeviceAuthorization { .. } => 4,
            CliError::Unreachable { .. }
            | CliError::Server { .. }
            | CliError::BadResponse { .. } => 5,
            CliError::CallNotSucceeded { .. } => 6,
            CliError::CallUncertain { .. } => 7,
            CliError::AuditBroken { .. } => 8,
            CliError::DiagnoseFailed { .. } => 9,
            CliError::Interrupted { .. } => 130,
        }
    }
}

/// `error: FILE:LINE:COLUMN: message`, one line per issue.
fn config_issues(name: &str, issues: &[crate::config::Issue]) -> String {
    issues
        .iter()
        .map(|issue| format!("error: {name}:{issue}"))
        .collect::<Vec<_>>()
        .join("\n")
}
