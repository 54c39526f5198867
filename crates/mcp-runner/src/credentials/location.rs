//! Where a device runner's credential files are: the bindings file named by
//! `SWITCHYARD_MCP_CREDENTIALS_FILE`, else one per device profile in the configuration
//! directory, and the checks the directory that holds them must pass before anything is
//! written there.

use super::error::CredentialError;
use nix::unistd::geteuid;
use std::fs::DirBuilder;
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The variable naming the credential bindings file.
pub const CREDENTIALS_FILE_VAR: &str = "SWITCHYARD_MCP_CREDENTIALS_FILE";

/// The bindings file of device profile `profile`: `$SWITCHYARD_MCP_CREDENTIALS_FILE` when set
/// and not empty, else `<config_dir>/credentials/<profile>.mcp-bindings.json` (its secrets file
/// is the sibling `<profile>.mcp-secrets.json`).
pub fn device_bindings_file(config_dir: &Path, profile: &str) -> PathBuf {
    std::env::var_os(CREDENTIALS_FILE_VAR)
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            config_dir
                .join("credentials")
                .join(format!("{profile}.mcp-bindings.json"))
        })
}

/// Makes sure the directory of `file` can hold credential files: created with mode 0700 when
/// missing; refused when it is not a directory, belongs to another user, or group or others may
/// write it (they could replace the files in it).
pub(super) fn prepare_directory(file: &Path) -> Result<(), CredentialError> {
    let directory = match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    let refused = |problem: String| CredentialError::DirectoryUnsafe {
        path: directory.clone(),
        problem,
    };
    let metadata = match std::fs::symlink_metadata(&directory) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == ErrorKind::NotFound => {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&directory)
                .map_err(|error| refused(format!("it cannot be created: {error}")))?;
            std::fs::symlink_metadata(&directory)
                .map_err(|error| refused(format!("it cannot be examined: {error}")))?
        }
        Err(error) => return Err(refused(format!("it cannot be examined: {error}"))),
    };
    if !metadata.is_dir() {
        return Err(refused("it is not a directory".to_owned()));
    }
    let me = geteuid().as_raw();
    if metadata.uid() != me {
        return Err(refused(format!(
            "it is owned by uid {}, not by this user (uid {me})",
            metadata.uid()
        )));
    }
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(refused(format!("its mode is {mode:04o}")));
    }
    Ok(())
}
