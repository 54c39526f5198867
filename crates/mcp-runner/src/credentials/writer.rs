//! Changing the bindings file: adding a connection's binding (credentials given through the
//! API once the MCP handshake passed with them) or removing it again.
//!
//! The file is read with the checks every reader makes ([`super::bindings::read_text`]), must
//! parse as a bindings file (a broken file is reported, never overwritten), and is replaced
//! atomically: the new text goes to a fresh 0600 file in the same directory, is synced, and is
//! renamed over the old one, so a reader sees the old file or the new one, never a torn one.
//! Other connections' entries are kept as they were written (as JSON values). Changes made
//! by this process are serialized; an edit made by hand at the same instant may be lost, as
//! with any two editors of one file.

use super::bindings;
use super::error::CredentialError;
use serde_json::{Map, Value};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use switchyard_protocol::api::ConnectionCredentials;
use switchyard_protocol::ids::ConnectionId;

/// Serializes this process's changes to bindings files.
static WRITING: Mutex<()> = Mutex::new(());

/// Sets (`Some`) or removes (`None`) `connection`'s binding in the bindings file at `path`,
/// creating the file when it does not exist yet.
pub(super) fn update(
    path: &Path,
    connection: ConnectionId,
    credentials: Option<&ConnectionCredentials>,
) -> Result<(), CredentialError> {
    let _writing = WRITING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut document = match bindings::read_text(path) {
        Ok(text) => {
            bindings::parse(path, &text)?;
            serde_json::from_str::<Value>(&text).map_err(|error| {
                CredentialError::BindingsSyntax {
                    path: path.to_owned(),
                    line: error.line(),
                    column: error.column(),
                    message: error.to_string(),
                }
            })?
        }
        Err(CredentialError::BindingsRead { source, .. })
            if source.kind() == ErrorKind::NotFound =>
        {
            if credentials.is_none() {
                return Ok(());
            }
            Value::Object(Map::from_iter([(
                "bindings".to_owned(),
                Value::Object(Map::new()),
            )]))
        }
        Err(error) => Err(error)?,
    };
    // `parse` accepted it: an object with a `bindings` object.
    let Some(entries) = document.get_mut("bindings").and_then(Value::as_object_mut) else {
        return Err(CredentialError::BindingsSyntax {
            path: path.to_owned(),
            line: 1,
            column: 1,
            message: "expected an object with a `bindings` object".to_owned(),
        });
    };
    let key = connection.to_string();
    match credentials {
        Some(credentials) => {
            let entry = serde_json::to_value(credentials)
                .map_err(|error| write_error(path, error.into()))?;
            entries.insert(key, entry);
        }
        None => {
            if entries.remove(&key).is_none() {
                return Ok(());
            }
        }
    }
    let mut text =
        serde_json::to_string_pretty(&document).map_err(|error| write_error(path, error.into()))?;
    text.push('\n');
    replace(path, text.as_bytes()).map_err(|error| write_error(path, error))
}

fn write_error(path: &Path, source: std::io::Error) -> CredentialError {
    CredentialError::BindingsWrite {
        path: path.to_owned(),
        source,
    }
}

/// Replaces the file at `path` with `contents`: a new 0600 file beside it, synced, renamed
/// over it, and the directory synced so the rename survives a crash.
fn replace(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(ErrorKind::InvalidInput, "not a file path"))?;
    let temporary = directory.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        uuid::Uuid::new_v4().simple()
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&temporary)?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written?;
    std::fs::File::open(&directory)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use switchyard_protocol::api::{CredentialProvider, CredentialReference};

    fn token(name: &str) -> ConnectionCredentials {
        ConnectionCredentials {
            env: Default::default(),
            headers: [(
                "Authorization".to_owned(),
                CredentialReference {
                    provider: CredentialProvider::Environment,
                    name: Some(name.to_owned()),
                    account: None,
                    key: None,
                    prefix: Some("Bearer ".to_owned()),
                },
            )]
            .into(),
        }
    }

    #[test]
    fn bindings_are_added_and_removed_keeping_the_others() {
        let dir = std::env::temp_dir().join(format!("writer-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("central.mcp-bindings.json");
        let (first, second) = (ConnectionId::new(), ConnectionId::new());
        update(&path, first, Some(&token("FIRST_TOKEN"))).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        update(&path, second, Some(&token("SECOND_TOKEN"))).unwrap();
        update(&path, first, None).unwrap();
        let file = bindings::read(&path).unwrap();
        assert_eq!(file.bindings.keys().collect::<Vec<_>>(), [&second]);
        // Only the file itself is left in the directory: no temporary file.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_broken_file_is_reported_and_left_alone() {
        let dir = std::env::temp_dir().join(format!("writer-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir(&dir).unwrap();
        let path = dir.join("central.mcp-bindings.json");
        std::fs::write(&path, "{\"bindings\": [").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let error = update(&path, ConnectionId::new(), Some(&token("T"))).unwrap_err();
        assert!(
            matches!(error, CredentialError::BindingsSyntax { .. }),
            "{error}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"bindings\": [");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
