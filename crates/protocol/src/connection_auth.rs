//! How a connection authenticates to its MCP server (`none`, a static `token`, or OAuth 2.1),
//! who holds its credential, and whether it is authorized now: the settings `PUT
//! /api/v1/workspaces/{ws}/connections/{c}/auth` takes and the view every connection shows.
//! Values never appear here: a token or a grant stays with the server, sealed. Re-exported
//! from [`crate::api`].

use crate::agents::{UnknownValue, named_enum};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

named_enum!(
    /// What a connection sends its server. Absent from the settings: discovered when it is
    /// first authorized (a 401 with a `Bearer` challenge means `oauth`).
    AuthKind, "auth kind" {
        /// Nothing: the server needs no credential.
        #[default]
        None = "none",
        /// A static token, set as a credential value.
        Token = "token",
        /// OAuth 2.1, as the MCP authorization spec says: the server obtains, stores and
        /// renews the tokens.
        Oauth = "oauth",
    }
);

named_enum!(
    /// Whose credential a connection sends: one for everybody (`shared`), or each person's
    /// own grant (`user`, not available for central connections yet).
    CredentialHolder, "credential holder" {
        /// One credential, authorized once, used for every caller.
        #[default]
        Shared = "shared",
        /// Each caller's own credential.
        User = "user",
    }
);

named_enum!(
    /// Whether a connection's credential is usable now.
    AuthState, "auth state" {
        /// Nothing obtained yet (or it was revoked, or the settings changed): authorize it.
        #[default]
        NeedsAuthorization = "needs_authorization",
        /// A credential is held and renews itself.
        Authorized = "authorized",
        /// Renewing failed for good (the authorization server refused the refresh token, or
        /// the server refused a renewed token): a person must authorize it again.
        AuthRequired = "auth_required",
        /// The access token expired and nothing can renew it (no refresh token).
        Expired = "expired",
    }
);

/// `PUT /api/v1/workspaces/{ws}/connections/{c}/auth`: the connection's auth settings,
/// replacing the ones before. Changing `kind` empties the credential it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetConnectionAuth {
    /// What it sends; omitted: discovered when it is first authorized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<AuthKind>,
    /// OAuth scopes to ask for; empty: what the server advertises.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// For a server that registers no clients: the server-side environment variable holding
    /// the OAuth client id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id_env: Option<String>,
    /// The server-side environment variable holding that client's secret, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// Whose credential it sends; `shared` when omitted.
    #[serde(default)]
    pub credential: CredentialHolder,
    /// The header a static token is sent in (kind `token` only, [`check_token_header`]);
    /// omitted: `Authorization`, with the `Bearer ` prefix (`Authorization` given is kept as
    /// omitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
}

/// A connection's auth settings and state, in its view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionAuthView {
    /// What it sends; absent: not known yet (discovered when it is first authorized).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<AuthKind>,
    /// OAuth scopes it asks for (empty: what the server advertises).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The server-side variable naming its OAuth client id, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id_env: Option<String>,
    /// The server-side variable naming its OAuth client secret, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// Whose credential it sends.
    pub credential: CredentialHolder,
    /// Whether its credential is usable now.
    pub state: AuthState,
    /// When a person last completed its authorization (renewals do not change it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorized_at: Option<DateTime<Utc>>,
    /// The header its static token is sent in, when set (kind `token`; absent:
    /// `Authorization`, with the `Bearer ` prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
}

/// `POST /api/v1/workspaces/{ws}/connections/{c}/authorize` answer: where a person consents.
/// The browser comes back to the server's `/mcp/callback`, which finishes the authorization.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizationStarted {
    /// The authorization server's page to open in a browser.
    pub authorization_url: String,
    /// The `state` of this authorization (it expires after ten minutes).
    pub state: String,
}

/// The prefix of every server environment variable an OAuth client may be read from: a
/// workspace admin names the variable, so it must not be able to name `DATABASE_URL` or any
/// other of the server's own secrets and have it sent to an authorization server.
pub const OAUTH_ENV_PREFIX: &str = "SWITCHYARD_OAUTH_";

/// Why a `client_id_env` / `client_secret_env` name is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientVariableProblem {
    /// Not an environment variable name: capitals, digits and `_`, not starting with a digit,
    /// at most 128 characters.
    NotAName,
    /// A name outside [`OAUTH_ENV_PREFIX`].
    OutsideNamespace,
}

/// Checks a variable name an OAuth client would be read from on the server.
pub fn check_client_variable(name: &str) -> Result<(), ClientVariableProblem> {
    let valid = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !valid {
        return Err(ClientVariableProblem::NotAName);
    }
    if !name.starts_with(OAUTH_ENV_PREFIX) {
        return Err(ClientVariableProblem::OutsideNamespace);
    }
    Ok(())
}

/// The header a static token goes in when a connection names none.
pub const DEFAULT_TOKEN_HEADER: &str = "Authorization";

/// Whether `header` is [`DEFAULT_TOKEN_HEADER`] (header names ignore case): a token goes in
/// it with the `Bearer ` prefix, and settings keep it as no header at all.
pub fn is_default_token_header(header: &str) -> bool {
    header.eq_ignore_ascii_case(DEFAULT_TOKEN_HEADER)
}

/// Headers a token may not be sent in: HTTP itself and the MCP transport own them. Compared
/// ignoring case.
pub const RESERVED_HEADERS: &[&str] = &[
    "Host",
    "Content-Length",
    "Content-Type",
    "Transfer-Encoding",
    "Connection",
    "Accept",
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    "Last-Event-ID",
];

/// Why a token `header` is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenHeaderProblem {
    /// Not an HTTP header name: 1–128 characters of letters, digits and
    /// ``!#$%&'*+-.^_`|~`` (an RFC 9110 token).
    NotAName,
    /// One of [`RESERVED_HEADERS`].
    Reserved,
}

/// Checks the header a static token is to be sent in.
pub fn check_token_header(name: &str) -> Result<(), TokenHeaderProblem> {
    let token = (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(TokenHeaderProblem::NotAName);
    }
    if RESERVED_HEADERS
        .iter()
        .any(|reserved| reserved.eq_ignore_ascii_case(name))
    {
        return Err(TokenHeaderProblem::Reserved);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_header_is_an_http_name_the_transport_does_not_own() {
        for fine in ["Authorization", "X-Api-Key", "x_api.key", "PRIVATE-TOKEN"] {
            assert_eq!(check_token_header(fine), Ok(()), "{fine}");
        }
        for not_a_name in ["", "X Key", "X-Key:", "Clé", &"a".repeat(129)] {
            assert_eq!(
                check_token_header(not_a_name),
                Err(TokenHeaderProblem::NotAName),
                "{not_a_name}"
            );
        }
        for reserved in ["host", "Content-Length", "mcp-session-id"] {
            assert_eq!(
                check_token_header(reserved),
                Err(TokenHeaderProblem::Reserved),
                "{reserved}"
            );
        }
    }
}
