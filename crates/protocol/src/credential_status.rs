//! `GET /api/v1/workspaces/{ws}/connections/{connection}/credentials`: where each credential
//! destination of a central connection resolves and whether its value is there — names and
//! references only, never a value.

use crate::api::CredentialReference;
use crate::ids::ConnectionId;
use serde::{Deserialize, Serialize};

/// A central connection's credential destinations with their states.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialStatusList {
    /// The connection.
    pub connection_id: ConnectionId,
    /// The connection's name.
    pub connection: String,
    /// Whether values may be set through the API (the server was started with an
    /// installation key, `--installation-key-file`).
    pub values_settable: bool,
    /// Each environment variable the connector declares or has bound, or each bound header.
    pub credentials: Vec<CredentialStatusView>,
}

/// One destination: where its value resolves and whether it is there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialStatusView {
    /// `env` (a stdio server's environment variable) or `header` (an HTTP server's header).
    pub destination: String,
    /// The variable's or header's name.
    pub name: String,
    /// What the destination is bound to; `None` when unbound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<CredentialReference>,
    /// Whether the value is there.
    pub state: CredentialValueState,
    /// The `credential_*` code of an unusable value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Why an unusable value cannot be used (naming no value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Whether a destination's value can be found where it is bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialValueState {
    /// Nothing is bound to the destination.
    Unbound,
    /// The value is there and follows the value rules.
    Present,
    /// The referenced variable, keyring entry or secrets-file key does not exist.
    Missing,
    /// The value cannot be read or breaks the rules (see `code` and `reason`).
    Unusable,
}

impl CredentialValueState {
    /// The state's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialValueState::Unbound => "unbound",
            CredentialValueState::Present => "present",
            CredentialValueState::Missing => "missing",
            CredentialValueState::Unusable => "unusable",
        }
    }
}
