//! Placements: a connection placed on a paired device runs there only once the device's owner
//! (the user who approved its pairing) has accepted it, for the launch spec they saw. The
//! acceptance records the spec's [`SpecDigest`]; an edit of the connector that changes the
//! spec makes the placement pending again, and the device runner refuses a leased call whose
//! spec does not match the digest the owner accepted (`spec_changed`).

use crate::api::ConnectorSpec;
use crate::ids::*;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// The SHA-256 of a launch spec's canonical form ([`ConnectorSpec::digest`]), as 64 lower-case
/// hex digits.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SpecDigest(pub String);

impl fmt::Display for SpecDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl ConnectorSpec {
    /// The digest of what this spec launches or reaches: the SHA-256 of the compact JSON array
    /// `["switchyard.spec.v1", "stdio", command, [args…], [env names…]]` or
    /// `["switchyard.spec.v1", "http", url]`. Arrays of strings only, so the form is canonical;
    /// the variable names are in it because they decide which bound secrets a process gets.
    /// An HTTP connector's header names are not: they come from the device's own bindings.
    pub fn digest(&self) -> SpecDigest {
        let canonical = match self {
            ConnectorSpec::Stdio { command, args, env } => {
                serde_json::json!(["switchyard.spec.v1", "stdio", command, args, env])
            }
            ConnectorSpec::Http { url } => serde_json::json!(["switchyard.spec.v1", "http", url]),
        };
        let hash = Sha256::digest(canonical.to_string().as_bytes());
        SpecDigest(hash.iter().map(|b| format!("{b:02x}")).collect())
    }
}

/// Where a placement stands, for the spec its connector has now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlacementState {
    /// The device's owner has not decided yet: calls are refused `placement_pending`.
    Pending,
    /// Accepted for the current spec: calls run on the device.
    Accepted,
    /// Accepted for another spec: the connector was edited since. Calls are refused
    /// `spec_changed` until the owner accepts the new spec.
    SpecChanged,
    /// The owner declined it: calls are refused `placement_pending` until they accept it.
    Declined,
}

/// A connection placed on one of the caller's devices, as its owner decides on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlacementView {
    /// The device.
    pub device_id: DeviceId,
    /// The device's name.
    pub device_name: String,
    /// The connection placed on it.
    pub connection_id: ConnectionId,
    /// The connection's name.
    pub connection_name: String,
    /// Its connector's name.
    pub connector_name: String,
    /// What the device would launch or reach: shown to the owner whatever their other
    /// authority, since it runs as them.
    pub spec: ConnectorSpec,
    /// The digest of `spec`; accepting names it.
    pub spec_digest: SpecDigest,
    /// Where the placement stands.
    pub state: PlacementState,
    /// The digest the owner last accepted, if they did.
    pub accepted_digest: Option<SpecDigest>,
    /// Who decided last (the device's owner).
    pub decided_by: Option<UserId>,
    /// When.
    pub decided_at: Option<DateTime<Utc>>,
}

/// `POST /api/v1/workspaces/{ws}/devices/{device}/placements/{connection}/accept`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptPlacement {
    /// The digest of the spec the owner was shown ([`PlacementView::spec_digest`]); refused
    /// `spec_changed` when the connector's spec is another by now.
    pub spec_digest: SpecDigest,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_the_sha256_of_the_canonical_array_and_changes_with_any_part() {
        let spec = ConnectorSpec::Http {
            url: "https://mcp.example.com/mcp".into(),
        };
        // printf '["switchyard.spec.v1","http","https://mcp.example.com/mcp"]' | sha256sum
        assert_eq!(
            spec.digest().0,
            "d58a69854e93dd0b3c8db1c984f8818244b679d2e54955068cfe298f888abf7f"
        );
        let stdio = |command: &str, args: &[&str], env: &[&str]| ConnectorSpec::Stdio {
            command: command.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: env.iter().map(|e| (*e).to_owned()).collect(),
        };
        let base = stdio("srv", &["a b"], &["TOKEN"]);
        for other in [
            stdio("srv2", &["a b"], &["TOKEN"]),
            stdio("srv", &["a", "b"], &["TOKEN"]),
            stdio("srv", &["a b"], &[]),
            stdio("srv", &["a b", ""], &["TOKEN"]),
        ] {
            assert_ne!(base.digest(), other.digest(), "{other:?}");
        }
    }
}
