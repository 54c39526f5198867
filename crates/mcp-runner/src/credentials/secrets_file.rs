//! The development secrets file (`X.mcp-secrets.json`, next to `X.mcp-bindings.json`): a JSON
//! object of key → value that only the runner's user may read.
//!
//! The file is refused unless it is a regular file (not a link, FIFO or directory) owned by the
//! runner's effective user with mode 0600 exactly ([`crate::owned_file`]). Parse errors
//! report the position only: the parser's message could quote a value.

use super::bindings::unique_map;
use super::error::CredentialError;
use crate::owned_file::{self, ModeRule, Refusal};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// The values of a secrets file. `Debug` prints the keys only.
pub(super) struct Secrets {
    values: BTreeMap<String, String>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secrets")
            .field("keys", &self.values.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Secrets {
    /// The value stored under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// Every key with its value, to write the file again with one changed.
    pub fn into_values(self) -> BTreeMap<String, String> {
        self.values
    }
}

/// The file's shape, parsed with duplicate keys refused.
#[derive(serde::Deserialize)]
#[serde(transparent)]
struct SecretsObject(#[serde(deserialize_with = "unique_map")] BTreeMap<String, String>);

/// Opens, checks and parses the secrets file at `path`.
pub(super) fn load(path: &Path) -> Result<Secrets, CredentialError> {
    let unsafe_file = |problem: String| CredentialError::SecretsUnsafe {
        path: path.to_owned(),
        problem,
    };
    let read_error = |source| CredentialError::SecretsRead {
        path: path.to_owned(),
        source,
    };
    let file = owned_file::open(path, ModeRule::OwnerOnly).map_err(|refusal| match refusal {
        Refusal::Symlink => unsafe_file("it is a symbolic link".to_owned()),
        Refusal::NotRegular => unsafe_file("it is not a regular file".to_owned()),
        Refusal::Foreign { owner, me } => unsafe_file(format!(
            "it is owned by uid {owner}, not by the runner's uid {me}"
        )),
        Refusal::Mode(mode) => unsafe_file(format!("its mode is {mode:04o}")),
        Refusal::Io(error) => read_error(error),
    })?;
    let text = std::io::read_to_string(file).map_err(read_error)?;
    let SecretsObject(values) =
        serde_json::from_str(&text).map_err(|error| CredentialError::SecretsSyntax {
            path: path.to_owned(),
            line: error.line(),
            column: error.column(),
        })?;
    Ok(Secrets { values })
}
