//! Local identity profiles of a paired device: which server it was paired with, its device and
//! workspace ids, and its device credential.
//!
//! `switchyard pair` saves a profile; the CLI and the `switchyard-mcp-runner` binary load it to
//! authenticate as the device. Layout under the configuration directory
//! ([`IdentityStore::default_location`]):
//!
//! ```text
//! <config_dir>/devices/             mode 0700, owned by the user
//! <config_dir>/devices/<p>.json     the non-secret part: ProfileRecord (mode 0600)
//! <config_dir>/devices/<p>.credential   the credential, only when no OS keyring is used (0600)
//! ```
//!
//! The credential lives in the OS keyring (service [`KEYRING_SERVICE`], one account per profile,
//! device and server) when one is usable, otherwise in the `.credential` file.
//!
//! Guarantees:
//! - A credential is never written anywhere but the keyring or a 0600 file in a 0700 directory
//!   owned by the user, and never appears in a record, an error or `Debug` output.
//! - Loading refuses a directory or file that group or others could read (credential) or write
//!   (record: it says where the credential is sent), a symbolic link, or another user's file.
//! - Saving replaces a profile atomically: the record is renamed into place after the new
//!   credential is stored, and only then is the previous credential deleted.

mod error;
mod files;
mod keyring;
mod profile;
mod store;

pub use error::IdentityError;
pub use keyring::KEYRING_SERVICE;
pub use profile::{DEFAULT_PROFILE, PROFILE_VAR, select_profile, validate_profile};
pub use store::{IdentityStore, KeyringStatus};

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use switchyard_protocol::ids::{DeviceId, WorkspaceId};

/// Environment variable naming the configuration directory.
pub const CONFIG_DIR_VAR: &str = "SWITCHYARD_CONFIG_DIR";
/// Environment variable choosing where credentials go: `off` keeps them in files.
pub const KEYRING_VAR: &str = "SWITCHYARD_DEVICE_KEYRING";

/// A paired device's identity, as the CLI and the runner use it.
#[derive(Clone, PartialEq, Eq)]
pub struct DeviceIdentity {
    /// The local profile name.
    pub profile: String,
    /// The server's base URL, e.g. `https://switchyard.example.com`.
    pub server_url: String,
    /// The device's id on that server.
    pub device_id: DeviceId,
    /// The workspace the device belongs to.
    pub workspace_id: WorkspaceId,
    /// The device credential (`sy_dev_…`), sent as a bearer token.
    pub credential: String,
}

impl fmt::Debug for DeviceIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceIdentity")
            .field("profile", &self.profile)
            .field("server_url", &self.server_url)
            .field("device_id", &self.device_id)
            .field("workspace_id", &self.workspace_id)
            .field("credential", &"<redacted>")
            .finish()
    }
}

/// The non-secret part of a profile, stored as `<profile>.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileRecord {
    /// The profile name (also the file name).
    pub profile: String,
    /// The server's base URL.
    pub server_url: String,
    /// The device's id.
    pub device_id: DeviceId,
    /// The device's workspace.
    pub workspace_id: WorkspaceId,
    /// Where the credential is kept.
    pub credential_store: CredentialStoreKind,
}

/// Which kind of store holds a credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialStoreKind {
    /// The OS keyring.
    OsKeyring,
    /// A 0600 file next to the record.
    File,
}

impl CredentialStoreKind {
    /// `os_keyring` or `file`, as in the record and the CLI's JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialStoreKind::OsKeyring => "os_keyring",
            CredentialStoreKind::File => "file",
        }
    }
}

/// Where exactly a saved credential went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredentialLocation {
    /// An OS keyring entry.
    OsKeyring {
        /// The keyring service ([`KEYRING_SERVICE`]).
        service: &'static str,
        /// The entry's account.
        account: String,
    },
    /// A private file.
    File {
        /// The file.
        path: PathBuf,
    },
}

impl CredentialLocation {
    /// The kind of store.
    pub fn kind(&self) -> CredentialStoreKind {
        match self {
            CredentialLocation::OsKeyring { .. } => CredentialStoreKind::OsKeyring,
            CredentialLocation::File { .. } => CredentialStoreKind::File,
        }
    }
}

impl fmt::Display for CredentialLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialLocation::OsKeyring { service, account } => {
                write!(
                    f,
                    "the OS keyring (service `{service}`, account `{account}`)"
                )
            }
            CredentialLocation::File { path } => write!(f, "{} (mode 0600)", path.display()),
        }
    }
}

/// Whether credentials may go to the OS keyring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyringChoice {
    /// Use the OS keyring when it works, files otherwise.
    Auto,
    /// Never use the OS keyring (`SWITCHYARD_DEVICE_KEYRING=off`): credentials go to files.
    Off,
}

impl KeyringChoice {
    /// Reads `SWITCHYARD_DEVICE_KEYRING`: `off` → [`KeyringChoice::Off`]; unset, empty or
    /// `auto` → [`KeyringChoice::Auto`]; anything else is refused so a typo never silently
    /// picks a store.
    pub fn from_env() -> Result<KeyringChoice, IdentityError> {
        match std::env::var(KEYRING_VAR) {
            Err(_) => Ok(KeyringChoice::Auto),
            Ok(value) => match value.as_str() {
                "" | "auto" => Ok(KeyringChoice::Auto),
                "off" => Ok(KeyringChoice::Off),
                _ => Err(IdentityError::InvalidKeyringSetting { value }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_credential() {
        let identity = DeviceIdentity {
            profile: "default".into(),
            server_url: "http://127.0.0.1:8787".into(),
            device_id: DeviceId::new(),
            workspace_id: WorkspaceId::new(),
            credential: "sy_dev_canary-4f2a".into(),
        };
        let shown = format!("{identity:?} {identity:#?}");
        assert!(!shown.contains("canary"), "{shown}");
        assert!(
            shown.contains("<redacted>") && shown.contains("default"),
            "{shown}"
        );
    }

    #[test]
    fn store_kinds_have_their_wire_names() {
        for kind in [CredentialStoreKind::OsKeyring, CredentialStoreKind::File] {
            let json = serde_json::to_string(&kind).expect("serialize");
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
    }
}
