//! Every way `switchyard` can stop short, each mapped to one stable exit code.
//!
//! The exit codes are a promise to scripts (see `EXIT_CODES.md`): a variant may be added, but an
//! existing one never changes its code.

use std::io;
use switchyard_protocol::{CallId, CallState};

/// An error that ends the CLI, with a stable exit code.
///
/// | code | meaning |
/// |---|---|
/// | 0 | success |
/// | 2 | usage or local input error: bad flags, unreadable or invalid file, bad `SWITCHYARD_URL` |
/// | 3 | not authenticated: no `SWITCHYARD_TOKEN`, or the server answered 401 |
/// | 4 | refused by the server: any other 4xx, printed as `error[<code>]: <message>` |
/// | 5 | server unreachable, or it answered 5xx or something unreadable |
/// | 6 | `mcp call --wait` finished but the call did not succeed (`tool_error`, `failed`, `cancelled`, `expired`) |
/// | 7 | `mcp call --wait` ended with the call `unknown` (or `resolved` from unknown): the effect may or may not have happened — never retry blindly |
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
    /// `SWITCHYARD_URL` cannot be used as the API's base URL (exit 2).
    #[error("error: SWITCHYARD_URL `{url}` is not usable: {reason}")]
    BadUrl {
        /// The value as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be set up on this machine (exit 2).
    #[error("error: cannot set up the HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// No `SWITCHYARD_TOKEN` in the environment (exit 3).
    #[error(
        "error: SWITCHYARD_TOKEN is not set: export a personal API token \
         (an operator creates one with `switchyard-server admin create-user`)"
    )]
    NoToken,
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
            | CliError::BadUrl { .. }
            | CliError::HttpClient(_) => 2,
            CliError::NoToken | CliError::BadToken | CliError::Unauthenticated { .. } => 3,
            CliError::Refused { .. } => 4,
            CliError::Unreachable { .. }
            | CliError::Server { .. }
            | CliError::BadResponse { .. } => 5,
            CliError::CallNotSucceeded { .. } => 6,
            CliError::CallUncertain { .. } => 7,
        }
    }
}
