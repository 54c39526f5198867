//! Changing the bindings file — adding a connection's binding (credentials given through the
//! API once the MCP handshake passed with them), removing it again, binding one destination
//! (`switchyard credential set`) — and storing a value in the development secrets file.
//!
//! The file is read with the checks every reader makes ([`super::bindings::read_text`]), must
//! parse as a bindings file (a broken file is reported, never overwritten), and is replaced
//! atomically: the new text goes to a fresh 0600 file in the same directory, is synced, and is
//! renamed over the old one, so a reader sees the old file or the new one, never a torn one.
//! Other connections' entries are kept as they were written (as JSON values).
//!
//! Writers are serialized — within this process by a mutex, across processes (two `switchyard
//! credential set` at once, the server) by an exclusive `flock` on the directory, which the
//! kernel releases when a holder dies — so no change is lost between a read and a write. Under
//! that lock, temporary files a killed writer left behind are removed before the next write.
//! An edit made by hand at the same instant may still be lost, as with any two editors of one
//! file.

use super::bindings;
use super::error::CredentialError;
use super::reference::Destination;
use super::secrets_file;
use nix::fcntl::{Flock, FlockArg};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use switchyard_protocol::api::{ConnectionCredentials, CredentialReference};
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
    let entry = match credentials {
        Some(credentials) => Some(
            serde_json::to_value(credentials).map_err(|error| write_error(path, error.into()))?,
        ),
        None => None,
    };
    update_entry(path, connection, |_| entry)
}

/// Binds `destination` of `connection` to `reference` in the bindings file at `path`, keeping
/// the connection's other destinations (and every other connection) as they were; creates the
/// file when it does not exist yet.
pub(super) fn bind_destination(
    path: &Path,
    connection: ConnectionId,
    destination: &Destination,
    reference: &CredentialReference,
) -> Result<(), CredentialError> {
    let (section, name) = match destination {
        Destination::Env(name) => ("env", name),
        Destination::Header(name) => ("headers", name),
    };
    let reference =
        serde_json::to_value(reference).map_err(|error| write_error(path, error.into()))?;
    update_entry(path, connection, |entry| {
        let mut entry = match entry {
            Some(Value::Object(entry)) => entry,
            // `parse` accepted the file, so an entry is an object; anything else is replaced.
            _ => Map::new(),
        };
        let names = entry
            .entry(section)
            .or_insert_with(|| Value::Object(Map::new()));
        if !names.is_object() {
            *names = Value::Object(Map::new());
        }
        if let Value::Object(names) = names {
            names.insert(name.clone(), reference);
        }
        Some(Value::Object(entry))
    })
}

/// Replaces `connection`'s entry of the bindings file at `path` with what `change` makes of
/// the current one (`None`: no entry), atomically; nothing is written when both are `None`.
fn update_entry(
    path: &Path,
    connection: ConnectionId,
    change: impl FnOnce(Option<Value>) -> Option<Value>,
) -> Result<(), CredentialError> {
    let _writing = WRITING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let _locked = lock_directory(path).map_err(|error| write_error(path, error))?;
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
    let current = entries.remove(&key);
    let had_entry = current.is_some();
    match change(current) {
        Some(entry) => {
            entries.insert(key, entry);
        }
        None if !had_entry => return Ok(()),
        None => {}
    }
    let mut text =
        serde_json::to_string_pretty(&document).map_err(|error| write_error(path, error.into()))?;
    text.push('\n');
    replace(path, text.as_bytes()).map_err(|error| write_error(path, error))
}

/// Stores `value` under `key` in the development secrets file at `path`, keeping its other
/// keys; creates the file (0600) when it does not exist yet. The file is read with the checks
/// every reader makes (a file with loose permissions or another owner is refused, never
/// rewritten) and replaced atomically like the bindings file.
pub(super) fn set_secret(path: &Path, key: &str, value: &str) -> Result<(), CredentialError> {
    let secrets_error = |source| CredentialError::SecretsWrite {
        path: path.to_owned(),
        source,
    };
    let _writing = WRITING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let _locked = lock_directory(path).map_err(secrets_error)?;
    let mut values = match secrets_file::load(path) {
        Ok(secrets) => secrets.into_values(),
        Err(CredentialError::SecretsRead { source, .. })
            if source.kind() == ErrorKind::NotFound =>
        {
            BTreeMap::new()
        }
        Err(error) => return Err(error),
    };
    values.insert(key.to_owned(), value.to_owned());
    // Serializing a map of strings cannot fail; the error, if any, holds no value.
    let mut text =
        serde_json::to_string_pretty(&values).map_err(|error| secrets_error(error.into()))?;
    text.push('\n');
    replace(path, text.as_bytes()).map_err(secrets_error)
}

fn write_error(path: &Path, source: std::io::Error) -> CredentialError {
    CredentialError::BindingsWrite {
        path: path.to_owned(),
        source,
    }
}

/// The directory `path` is in.
fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    }
}

/// Takes an exclusive `flock` on the directory of `path`, waiting for any other writer; held
/// until the returned value is dropped (or the process dies).
fn lock_directory(path: &Path) -> std::io::Result<Flock<File>> {
    let directory = File::open(directory_of(path))?;
    Flock::lock(directory, FlockArg::LockExclusive).map_err(|(_, errno)| errno.into())
}

/// The prefix of the temporary files [`replace`] makes for `name`.
fn temporary_prefix(name: &OsStr) -> String {
    format!(".{}.", name.to_string_lossy())
}

/// Replaces the file at `path` with `contents`: a new 0600 file beside it, synced, renamed
/// over it, and the directory synced so the rename survives a crash. Temporary files of `path`
/// left by a writer that died are removed first (the caller holds the directory's lock, so
/// no live writer's file is among them).
fn replace(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let directory = directory_of(path);
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(ErrorKind::InvalidInput, "not a file path"))?;
    let prefix = temporary_prefix(name);
    for entry in std::fs::read_dir(&directory)?.flatten() {
        let stale = entry.file_name();
        let stale = stale.to_string_lossy();
        if stale.starts_with(&prefix) && stale.ends_with(".tmp") {
            std::fs::remove_file(entry.path())?;
        }
    }
    let temporary = directory.join(format!("{prefix}{}.tmp", uuid::Uuid::new_v4().simple()));
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
    File::open(&directory)?.sync_all()
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
