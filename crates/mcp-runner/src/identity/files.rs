//! Private files for identity profiles: a 0700 directory owned by this user, files written
//! atomically with mode 0600, and reads that refuse anything another user could have read or
//! changed.
//!
//! Checks are made on what is actually opened (`fstat` of the open file, `O_NOFOLLOW`), so a
//! symbolic link or a swapped file is refused rather than followed.

use super::error::IdentityError;
use nix::unistd::geteuid;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// How private a file must be to be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Privacy {
    /// Holds a secret: neither group nor others may have any access (0600 or narrower).
    Secret,
    /// Holds data the credential is sent to (the server URL): neither group nor others may
    /// write it.
    Trusted,
}

impl Privacy {
    /// Permission bits that must be clear.
    fn forbidden(self) -> u32 {
        match self {
            Privacy::Secret => 0o077,
            Privacy::Trusted => 0o022,
        }
    }
}

/// Creates `dir` and its missing parents with mode 0700, then checks it with
/// [`check_private_dir`].
pub(super) fn ensure_private_dir(dir: &Path) -> Result<(), IdentityError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| IdentityError::Io {
            action: "create directory",
            path: dir.to_owned(),
            source,
        })?;
    check_private_dir(dir).map(|_| ())
}

/// Checks that `dir`, if it exists, is a directory owned by this user that group and others
/// cannot access. Returns whether it exists.
pub(super) fn check_private_dir(dir: &Path) -> Result<bool, IdentityError> {
    let metadata = match std::fs::metadata(dir) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(false),
        Err(source) => {
            return Err(IdentityError::Io {
                action: "inspect",
                path: dir.to_owned(),
                source,
            });
        }
    };
    let refuse = |problem: String, fix: String| IdentityError::Unsafe {
        path: dir.to_owned(),
        problem,
        fix,
    };
    if !metadata.is_dir() {
        return Err(refuse(
            "it is not a directory".to_owned(),
            "move it away so a private directory can be created there".to_owned(),
        ));
    }
    check_owner(dir, metadata.uid())?;
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(refuse(
            format!(
                "its mode is {mode:04o}, but it holds device credentials and must not be \
                 accessible to group or others"
            ),
            format!("run `chmod 700 {}`", dir.display()),
        ));
    }
    Ok(true)
}

/// Reads the file at `path` if it exists, refusing links, non-regular files, files of other
/// users and files whose mode is wider than `privacy` allows. At most `limit` bytes are read;
/// a longer file is refused.
pub(super) fn read_private(
    path: &Path,
    privacy: Privacy,
    limit: u64,
) -> Result<Option<Vec<u8>>, IdentityError> {
    let refuse = |problem: String, fix: String| IdentityError::Unsafe {
        path: path.to_owned(),
        problem,
        fix,
    };
    let read_error = |source| IdentityError::Io {
        action: "read",
        path: path.to_owned(),
        source,
    };
    // O_NOFOLLOW: a link could point at a file that is not ours. O_NONBLOCK: a FIFO in its
    // place must not hang the caller.
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) if error.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(refuse(
                "it is a symbolic link".to_owned(),
                "replace it with a regular file".to_owned(),
            ));
        }
        Err(source) => return Err(read_error(source)),
    };
    let metadata = file.metadata().map_err(read_error)?;
    if !metadata.is_file() {
        return Err(refuse(
            "it is not a regular file".to_owned(),
            "remove it and pair again".to_owned(),
        ));
    }
    check_owner(path, metadata.uid())?;
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & privacy.forbidden() != 0 {
        let wanted = match privacy {
            Privacy::Secret => {
                "it holds a device credential and must be readable by its owner only"
            }
            Privacy::Trusted => {
                "it says where the device credential is sent and must be writable by its owner only"
            }
        };
        return Err(refuse(
            format!("its mode is {mode:04o}, but {wanted}"),
            format!("run `chmod 600 {}`", path.display()),
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > limit {
        return Err(refuse(
            format!("it is larger than {limit} bytes"),
            "remove it and pair again".to_owned(),
        ));
    }
    Ok(Some(bytes))
}

/// Replaces `dir/name` with `bytes` atomically: written to a 0600 temporary file in the same
/// directory, flushed to disk, then renamed over the target.
pub(super) fn write_private(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), IdentityError> {
    let target = dir.join(name);
    // A leading dot and the process id keep temporaries apart from profiles and from each
    // other; a stale one left by a crash is simply replaced.
    let temp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let io = |action, source| IdentityError::Io {
        action,
        path: temp.clone(),
        source,
    };
    if let Err(error) = std::fs::remove_file(&temp)
        && error.kind() != ErrorKind::NotFound
    {
        return Err(io("remove", error));
    }
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&temp)
        .map_err(|e| io("create", e))
        .and_then(|mut file| {
            file.write_all(bytes).map_err(|e| io("write", e))?;
            file.sync_all().map_err(|e| io("flush", e))
        })
        .and_then(|()| {
            std::fs::rename(&temp, &target).map_err(|source| IdentityError::Io {
                action: "replace",
                path: target.clone(),
                source,
            })
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
        return written;
    }
    // Makes the rename itself durable.
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| IdentityError::Io {
            action: "flush",
            path: dir.to_owned(),
            source,
        })
}

/// Removes the file at `path`; returns whether it existed.
pub(super) fn remove_if_present(path: &Path) -> Result<bool, IdentityError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(false),
        Err(source) => Err(IdentityError::Io {
            action: "remove",
            path: path.to_owned(),
            source,
        }),
    }
}

fn check_owner(path: &Path, uid: u32) -> Result<(), IdentityError> {
    let me = geteuid().as_raw();
    if uid == me {
        return Ok(());
    }
    Err(IdentityError::Unsafe {
        path: path.to_owned(),
        problem: format!("it is owned by uid {uid}, not by this user (uid {me})"),
        fix: "only the user who paired the device may use it".to_owned(),
    })
}
