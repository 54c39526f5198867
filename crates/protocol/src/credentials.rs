//! Credential bindings on the wire: what a connection's environment variables and headers are
//! bound to (references, never values), and the one request that carries a value, a central
//! connection's sealed credential (`Debug` never shows it). Re-exported from [`crate::api`].

use crate::ids::ConnectionId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a connection's credentials are bound to: the shape of one entry of a credential
/// bindings file (`docs/CREDENTIALS.md`). Names and references, never a value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionCredentials {
    /// A stdio server's environment variables, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, CredentialReference>,
    /// An HTTP server's request headers, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, CredentialReference>,
}

/// Where a credential value lives: `{"provider": "environment", "name": "TOKEN"}`,
/// `{"provider": "os_store", "account": "github"}` or
/// `{"provider": "secrets_file", "key": "github"}`, with an optional header `prefix`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialReference {
    /// Which provider holds the value.
    pub provider: CredentialProvider,
    /// The variable's name (`environment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The keyring entry's account (`os_store`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// The secrets file's key (`secrets_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Text put in front of the value (headers only, e.g. `Bearer `).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// `PUT /api/v1/workspaces/{ws}/connections/{connection}/credentials/{name}`: a value for one
/// destination of a central connection, sealed with the installation key and kept in the
/// server's database (`switchyard-server serve --installation-key-file`). `Debug` never shows
/// the value.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetCredentialValue {
    /// The value (4–16,384 bytes, no NUL; no CR/LF for a header).
    pub value: String,
    /// Text put before the value in a header, e.g. `Bearer ` (headers only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

impl std::fmt::Debug for SetCredentialValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetCredentialValue")
            .field("value", &"<redacted>")
            .field("prefix", &self.prefix)
            .finish()
    }
}

/// Where a value set through the API went (never the value): the destination and the
/// reference it is now bound to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialValueSet {
    /// The connection.
    pub connection_id: ConnectionId,
    /// `env` (a stdio server's environment variable) or `header` (an HTTP server's header).
    pub destination: String,
    /// The variable's or header's name.
    pub name: String,
    /// The reference the destination is bound to now.
    pub reference: CredentialReference,
}

/// The credential providers a reference may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialProvider {
    /// A variable of the runner's environment.
    Environment,
    /// The OS keyring.
    OsStore,
    /// The development secrets file next to the bindings file.
    SecretsFile,
    /// The server's own store: a central connection's value sealed with the installation key
    /// in PostgreSQL (set with `PUT …/credentials/{name}`); the reference names nothing else.
    Installation,
}

impl CredentialProvider {
    /// The provider's name in a bindings file.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialProvider::Environment => "environment",
            CredentialProvider::OsStore => "os_store",
            CredentialProvider::SecretsFile => "secrets_file",
            CredentialProvider::Installation => "installation",
        }
    }
}
