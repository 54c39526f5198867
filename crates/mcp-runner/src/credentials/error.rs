//! Why credentials could not be resolved, with the stable code each reason is reported under.
//!
//! Every message names the connection, the destination and the reference involved, and never a
//! value: these errors end up in call records, API responses and logs.

use super::reference::{Destination, Reference};
use std::fmt;
use std::path::PathBuf;
use switchyard_protocol::api::CallError;
use switchyard_protocol::ids::ConnectionId;

/// The stable error codes a resolution failure is reported under (`CallError::code`).
pub mod codes {
    /// A needed binding, variable, keyring entry or secrets-file key does not exist.
    pub const MISSING: &str = "credential_missing";
    /// The OS keyring is not configured, locked, or denied access.
    pub const UNAVAILABLE: &str = "credential_unavailable";
    /// A resolved value breaks the value rules (length, forbidden characters).
    pub const INVALID: &str = "credential_invalid";
    /// A binding targets a destination (or reads a source) the runner reserves.
    pub const RESERVED: &str = "credential_reserved";
    /// The bindings or secrets file is unsafe, malformed, or contradicts the connector.
    pub const CONFIG_INVALID: &str = "credential_config_invalid";
    /// The MCP server refused the credential it was sent, or asked for one it was not sent
    /// (HTTP 401, or 403 with an authentication challenge): reported by a session, not by
    /// resolution (`SessionError::Unauthorized`).
    pub const REFUSED: &str = "credential_refused";
    /// The connection's OAuth grant can no longer be renewed (the authorization server
    /// refused the refresh token, or forgot the client it was issued to) or there is none:
    /// a person must authorize the connection again.
    pub const AUTH_REQUIRED: &str = "credential_auth_required";
    /// Renewing the connection's OAuth token failed for now (the authorization server did
    /// not answer in time, or answered with an error that may pass): nothing was sent.
    pub const RENEWAL_FAILED: &str = "credential_renewal_failed";
    /// A per-person connection (`credential = user`) holds no usable grant of the person the
    /// call runs for: that person authorizes it. Others' calls are unaffected, so this is not
    /// a failure of the connection's credential ([`is_credential_failure`]).
    pub const CALLER_UNAUTHORIZED: &str = "credential_caller_unauthorized";

    /// Whether a call error `code` says the connection's credential is what failed — refused
    /// by its server, or not resolvable (every code of this module) — so that a person must
    /// authorize the connection again; `/mcp` tells its clients `needs_authorization`.
    pub fn is_credential_failure(code: &str) -> bool {
        matches!(
            code,
            MISSING | UNAVAILABLE | INVALID | RESERVED | CONFIG_INVALID | REFUSED | AUTH_REQUIRED
        )
    }
}

/// One binding: which destination of which connection, bound to which reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingSite {
    /// The connection.
    pub connection: ConnectionId,
    /// Where the value was to go.
    pub destination: Destination,
    /// Where the value comes from.
    pub reference: Reference,
}

impl fmt::Display for BindingSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of connection {} (bound to {})",
            self.destination, self.connection, self.reference
        )
    }
}

/// Why a connection's credentials could not be resolved, or a bindings file was refused.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The bindings file could not be opened or read.
    #[error("cannot read credential bindings file `{}`: {source}", path.display())]
    BindingsRead {
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// The bindings file could not be written (a binding added or removed through the API).
    #[error("cannot write credential bindings file `{}`: {source}", path.display())]
    BindingsWrite {
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// Credentials were given for a connection, but no bindings file is configured to hold
    /// them.
    #[error(
        "connection {connection}: no credential bindings file is configured to hold its \
         credential references; start the server with `--mcp-credentials-file PATH` (a file \
         named `*.mcp-bindings.json`)"
    )]
    NoBindingsFile {
        /// The connection.
        connection: ConnectionId,
    },
    /// The bindings file is not a regular file.
    #[error("credential bindings file `{}` is not a regular file", path.display())]
    BindingsNotRegular {
        /// The file.
        path: PathBuf,
    },
    /// The bindings file is a symbolic link, which could point the runner at another file.
    #[error(
        "credential bindings file `{}` is a symbolic link; refusing it — put the file itself there",
        path.display()
    )]
    BindingsSymlink {
        /// The file.
        path: PathBuf,
    },
    /// Another user owns the bindings file, so they could redirect references.
    #[error(
        "credential bindings file `{}` is owned by uid {owner}, not by the runner's uid {runner}; \
         refusing it — `chown` it to the user the runner runs as",
        path.display()
    )]
    BindingsForeign {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The runner's effective uid.
        runner: u32,
    },
    /// Group or others may write the bindings file, so anyone could redirect references.
    #[error(
        "credential bindings file `{}` is writable by group or others (mode {mode:04o}); refusing \
         it — run `chmod go-w` on it",
        path.display()
    )]
    BindingsWritable {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The bindings file is not valid JSON or does not have the bindings shape.
    #[error(
        "credential bindings file `{}` is invalid at line {line} column {column}: {message}",
        path.display()
    )]
    BindingsSyntax {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What is wrong (the file holds references only, so quoting it is safe).
        message: String,
    },
    /// A header name of a binding is not a valid HTTP header name.
    #[error("connection {connection}: `{name}` is not a valid HTTP header name")]
    InvalidHeaderName {
        /// The connection.
        connection: ConnectionId,
        /// The name as written.
        name: String,
    },
    /// Two header bindings of one connection differ only in case.
    #[error("connection {connection}: header `{name}` is bound more than once (names ignore case)")]
    DuplicateHeader {
        /// The connection.
        connection: ConnectionId,
        /// The header.
        name: String,
    },
    /// A prefix was given for an environment variable; prefixes are for headers.
    #[error("{site}: a prefix is only allowed for headers")]
    PrefixOnEnv {
        /// The binding.
        site: Box<BindingSite>,
    },
    /// A header prefix contains a character a header value cannot hold.
    #[error("{site}: the prefix contains a control character (CR, LF, NUL, …)")]
    InvalidPrefix {
        /// The binding.
        site: Box<BindingSite>,
    },
    /// A binding's destination does not exist for the connector's transport.
    #[error("{site}: this connection's connector is {transport}, which takes {accepted} only")]
    WrongTransport {
        /// The binding.
        site: Box<BindingSite>,
        /// `a stdio server` or `an HTTP server`.
        transport: &'static str,
        /// `environment variables` or `headers`.
        accepted: &'static str,
    },
    /// An environment binding names a variable the stdio connector does not declare.
    #[error(
        "{site}: the stdio connector does not declare this variable; add it to the connector's \
         environment names or remove the binding"
    )]
    UndeclaredEnv {
        /// The binding.
        site: Box<BindingSite>,
    },
    /// A binding's destination is reserved by the runner (loader, routing, PATH, …).
    #[error("{site}: this destination is reserved by the runner and cannot be bound")]
    ReservedDestination {
        /// The binding.
        site: Box<BindingSite>,
    },
    /// An `environment` reference names the runner's own configuration (DATABASE_URL,
    /// SWITCHYARD_*), which must never be handed to an MCP server.
    #[error("{site}: the runner's own configuration cannot be used as a credential source")]
    ReservedSource {
        /// The binding.
        site: Box<BindingSite>,
    },
    /// Header credentials are bound to a connection whose URL is plain `http://` to another
    /// machine: they would cross the network in clear.
    #[error(
        "connection {connection} binds header credentials, but its URL is http:// to `{host}`, \
         which is not this machine; a credential is never sent in clear — use an https:// URL"
    )]
    CleartextHeaders {
        /// The connection.
        connection: ConnectionId,
        /// The URL's host.
        host: String,
    },
    /// A `secrets_file` reference is used but the bindings file is not named
    /// `*.mcp-bindings.json`, so there is no sibling secrets file to read.
    #[error(
        "credential bindings file `{}` uses the secrets_file provider but its name does not end \
         in `.mcp-bindings.json`, so no sibling `.mcp-secrets.json` can be found",
        path.display()
    )]
    SecretsFileName {
        /// The bindings file.
        path: PathBuf,
    },
    /// The secrets file could not be opened or read.
    #[error("cannot read secrets file `{}`: {source}", path.display())]
    SecretsRead {
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// The directory that holds the bindings and secrets files could be changed by someone
    /// else (or is not a directory), so files written there could be swapped.
    #[error(
        "directory `{}` is refused for credential files: {problem}; it must be a directory owned \
         by this user that group and others cannot write (e.g. `chmod 700`)",
        path.display()
    )]
    DirectoryUnsafe {
        /// The directory.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The secrets file could not be written (a value stored by `switchyard credential set`).
    #[error("cannot write secrets file `{}`: {source}", path.display())]
    SecretsWrite {
        /// The file.
        path: PathBuf,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// The secrets file is not a private regular file of the runner's user.
    #[error(
        "secrets file `{}` is refused: {problem}; it must be a regular file owned by the runner's \
         user with mode 0600",
        path.display()
    )]
    SecretsUnsafe {
        /// The file.
        path: PathBuf,
        /// What is wrong (not a regular file, owner, mode).
        problem: String,
    },
    /// The secrets file is not a JSON object of strings. Only the position is reported: the
    /// parser's message could quote a value.
    #[error(
        "secrets file `{}` is invalid at line {line} column {column}: it must be a JSON object \
         mapping keys to string values",
        path.display()
    )]
    SecretsSyntax {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
    },
    /// Declared environment variables have no binding.
    #[error("connection {connection}: no credential binding for {names} ({where_})", names = names.join(", "))]
    NotBound {
        /// The connection.
        connection: ConnectionId,
        /// The unbound variables, in declaration order.
        names: Vec<String>,
        /// Which bindings file was consulted, or that none is configured.
        where_: String,
    },
    /// The referenced variable, keyring entry or secrets-file key does not exist.
    #[error("{site}: no such value")]
    ValueMissing {
        /// The binding.
        site: Box<BindingSite>,
    },
    /// The value's provider could not be asked (keyring not configured, locked, denied).
    #[error("{site}: the value cannot be read: {reason}")]
    ValueUnavailable {
        /// The binding.
        site: Box<BindingSite>,
        /// The provider's explanation.
        reason: String,
    },
    /// The value's length is outside 4–16,384 bytes.
    #[error("{site}: the value is {length} bytes long; values must be 4–16,384 bytes")]
    ValueLength {
        /// The binding.
        site: Box<BindingSite>,
        /// The value's length in bytes.
        length: usize,
    },
    /// The value could not be stored with its provider (the OS keyring refused it or is not
    /// usable).
    #[error("{site}: the value cannot be stored: {reason}")]
    ValueNotStored {
        /// The binding.
        site: Box<BindingSite>,
        /// The provider's explanation.
        reason: String,
    },
    /// A value was to be written for a binding whose provider cannot be written from here (the
    /// runner's own environment).
    #[error(
        "{site}: its value lives in the runner's environment, which cannot be changed from here; \
         change it where the runner is started, or bind a stored value with `switchyard \
         credential set`"
    )]
    NotWritable {
        /// The binding.
        site: Box<BindingSite>,
    },
    /// The value contains something its destination cannot carry.
    #[error("{site}: the value {problem}")]
    ValueCharacters {
        /// The binding.
        site: Box<BindingSite>,
        /// What is wrong, e.g. `contains a NUL byte`.
        problem: &'static str,
    },
}

impl CredentialError {
    /// The stable code this error is reported under (one of [`codes`]).
    pub fn code(&self) -> &'static str {
        match self {
            CredentialError::NotBound { .. } | CredentialError::ValueMissing { .. } => {
                codes::MISSING
            }
            CredentialError::ValueUnavailable { .. } | CredentialError::ValueNotStored { .. } => {
                codes::UNAVAILABLE
            }
            CredentialError::ValueLength { .. } | CredentialError::ValueCharacters { .. } => {
                codes::INVALID
            }
            CredentialError::ReservedDestination { .. }
            | CredentialError::ReservedSource { .. } => codes::RESERVED,
            CredentialError::BindingsRead { .. }
            | CredentialError::BindingsWrite { .. }
            | CredentialError::NoBindingsFile { .. }
            | CredentialError::BindingsNotRegular { .. }
            | CredentialError::BindingsSymlink { .. }
            | CredentialError::CleartextHeaders { .. }
            | CredentialError::BindingsForeign { .. }
            | CredentialError::BindingsWritable { .. }
            | CredentialError::BindingsSyntax { .. }
            | CredentialError::InvalidHeaderName { .. }
            | CredentialError::DuplicateHeader { .. }
            | CredentialError::PrefixOnEnv { .. }
            | CredentialError::InvalidPrefix { .. }
            | CredentialError::WrongTransport { .. }
            | CredentialError::UndeclaredEnv { .. }
            | CredentialError::SecretsFileName { .. }
            | CredentialError::SecretsRead { .. }
            | CredentialError::SecretsWrite { .. }
            | CredentialError::DirectoryUnsafe { .. }
            | CredentialError::NotWritable { .. }
            | CredentialError::SecretsUnsafe { .. }
            | CredentialError::SecretsSyntax { .. } => codes::CONFIG_INVALID,
        }
    }
}

impl From<CredentialError> for CallError {
    fn from(error: CredentialError) -> Self {
        CallError {
            code: error.code().to_owned(),
            message: error.to_string(),
        }
    }
}
