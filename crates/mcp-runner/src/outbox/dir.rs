//! The outbox directory: created private (0700), refused when others may read it or when it is
//! not ours, and locked for the life of the process so that one runner at a time uses it.

use super::error::OutboxError;
use nix::fcntl::{Flock, FlockArg};
use nix::unistd::geteuid;
use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The lock file's name inside the directory.
const LOCK_FILE: &str = "lock";
/// The mode of every file the outbox creates.
const FILE_MODE: u32 = 0o600;

/// The held lock on an outbox directory; released when dropped (or when the process ends).
#[derive(Debug)]
pub(super) struct DirLock {
    _lock: Flock<File>,
}

/// Creates `dir` with mode 0700 when it does not exist; otherwise checks that it is a directory
/// owned by this user that no one else may access.
pub(super) fn prepare(dir: &Path) -> Result<(), OutboxError> {
    match std::fs::metadata(dir) {
        Ok(metadata) => check(dir, &metadata),
        Err(error) if error.kind() == ErrorKind::NotFound => create(dir),
        Err(source) => Err(io(dir, "reading its metadata", source)),
    }
}

fn create(dir: &Path) -> Result<(), OutboxError> {
    // Parents get the usual mode; only the outbox itself must be private. `mode` is masked by
    // the umask, which can only narrow it.
    if let Some(parent) = dir.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|source| io(parent, "creating the parent directories", source))?;
    }
    DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(|source| io(dir, "creating it", source))?;
    // A umask cannot widen the mode, but an unusual one can remove the owner's own bits.
    std::fs::set_permissions(dir, Permissions::from_mode(0o700))
        .map_err(|source| io(dir, "setting its mode to 0700", source))
}

fn check(dir: &Path, metadata: &std::fs::Metadata) -> Result<(), OutboxError> {
    if !metadata.is_dir() {
        return Err(OutboxError::NotADirectory {
            path: dir.to_owned(),
        });
    }
    let you = geteuid().as_raw();
    if metadata.uid() != you {
        return Err(OutboxError::NotOwned {
            path: dir.to_owned(),
            owner: metadata.uid(),
            you,
        });
    }
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(OutboxError::TooOpen {
            path: dir.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// Takes the directory's exclusive lock without waiting: a second runner on the same directory
/// is refused instead of queueing behind the first.
pub(super) fn lock(dir: &Path) -> Result<DirLock, OutboxError> {
    let path = dir.join(LOCK_FILE);
    let file = create_private_file(&path)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(DirLock { _lock: lock }),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(OutboxError::Locked {
            path: dir.to_owned(),
            lock: path,
        }),
        Err((_, errno)) => Err(io(&path, "locking it", errno.into())),
    }
}

/// Opens (creating if needed) a file of the outbox with mode 0600, narrowing the mode of an
/// existing file that is wider.
pub(super) fn create_private_file(path: &Path) -> Result<File, OutboxError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|source| io(path, "opening it", source))?;
    restrict(path, &file)?;
    Ok(file)
}

/// Narrows an existing outbox file (SQLite's write-ahead log and shared-memory files, which
/// take the database file's mode) to 0600.
pub(super) fn restrict_if_present(path: &Path) -> Result<(), OutboxError> {
    match OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => restrict(path, &file),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
        Err(source) => Err(io(path, "opening it", source)),
    }
}

fn restrict(path: &Path, file: &File) -> Result<(), OutboxError> {
    let metadata = file
        .metadata()
        .map_err(|source| io(path, "reading its metadata", source))?;
    if metadata.permissions().mode() & 0o777 != FILE_MODE {
        file.set_permissions(Permissions::from_mode(FILE_MODE))
            .map_err(|source| io(path, "setting its mode to 0600", source))?;
    }
    Ok(())
}

fn io(path: &Path, action: &'static str, source: std::io::Error) -> OutboxError {
    OutboxError::Io {
        path: PathBuf::from(path),
        action,
        source,
    }
}
