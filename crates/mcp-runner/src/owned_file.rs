//! Opening a file that holds secrets, or references that say where secrets go: the credential
//! bindings file, the development secrets file, the server's database URL file. Every check is
//! made on the opened file, so the file checked is the file read: not a symbolic link
//! (`O_NOFOLLOW`: a link could point at another file), a regular file, owned by this process's
//! effective user, with the permissions the caller's rule allows. `O_NONBLOCK`: a FIFO put in
//! the file's place never stalls the reader.

use nix::unistd::geteuid;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Which permission bits a file may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeRule {
    /// Exactly 0600: it holds secrets.
    OwnerOnly,
    /// No write for group or others: anyone who could write it could redirect references.
    NotWritableByOthers,
}

/// Why a file was not opened.
#[derive(Debug)]
pub enum Refusal {
    /// It is a symbolic link.
    Symlink,
    /// It is not a regular file (a directory, a FIFO, a device).
    NotRegular,
    /// Another user owns it.
    Foreign {
        /// Its owner.
        owner: u32,
        /// This process's effective uid.
        me: u32,
    },
    /// Its permission bits break the rule.
    Mode(u32),
    /// It could not be opened or examined.
    Io(std::io::Error),
}

/// Opens `path` for reading if it passes every check and `rule`.
pub fn open(path: &Path, rule: ModeRule) -> Result<File, Refusal> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|error| match error.raw_os_error() {
            Some(nix::libc::ELOOP) => Refusal::Symlink,
            _ => Refusal::Io(error),
        })?;
    let metadata = file.metadata().map_err(Refusal::Io)?;
    if !metadata.is_file() {
        return Err(Refusal::NotRegular);
    }
    let me = geteuid().as_raw();
    if metadata.uid() != me {
        return Err(Refusal::Foreign {
            owner: metadata.uid(),
            me,
        });
    }
    let mode = metadata.permissions().mode() & 0o7777;
    let allowed = match rule {
        ModeRule::OwnerOnly => mode == 0o600,
        ModeRule::NotWritableByOthers => mode & 0o022 == 0,
    };
    if !allowed {
        return Err(Refusal::Mode(mode));
    }
    Ok(file)
}
