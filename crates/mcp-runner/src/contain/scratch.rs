//! The scratch directory of one stdio session: `HOME` and working directory of its server.

use std::fs::DirBuilder;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Start of every scratch directory's name; the watch removes nothing else.
const PREFIX: &str = "switchyard-mcp-";
/// Removal attempts: a server killed a moment ago may still finish one last write.
const REMOVE_ATTEMPTS: usize = 3;

/// A fresh private directory (mode 0700, owned by this process's user) in the temp directory,
/// removed with everything in it when dropped. Drop it only once the processes that use it are
/// gone (the session's group was killed).
#[derive(Debug)]
pub(crate) struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// Makes a new directory with a random name under [`std::env::temp_dir`]. It never reuses
    /// an existing path: `mkdir` fails on one, symbolic links included.
    pub(crate) fn create() -> io::Result<Self> {
        let path = std::env::temp_dir().join(format!("{PREFIX}{}", uuid::Uuid::new_v4().simple()));
        DirBuilder::new().mode(0o700).create(&path)?;
        let scratch = Self { path };
        // The umask may only have taken bits away; make the mode exact all the same.
        std::fs::set_permissions(&scratch.path, std::fs::Permissions::from_mode(0o700))?;
        Ok(scratch)
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        remove(&self.path);
    }
}

/// Removes the scratch directory `path` and its contents, if its name says it is one; logs a
/// failure.
pub(super) fn remove(path: &Path) {
    let named_as_scratch = path
        .file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.starts_with(PREFIX));
    if !named_as_scratch {
        tracing::warn!(path = %path.display(), "not a scratch directory: left in place");
        return;
    }
    let mut last_error = None;
    for _ in 0..REMOVE_ATTEMPTS {
        match std::fs::remove_dir_all(path) {
            Ok(()) => return,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return,
            Err(error) => last_error = Some(error),
        }
    }
    if let Some(error) = last_error {
        tracing::warn!(path = %path.display(), %error, "cannot remove a session's scratch directory");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_scratch_directory_is_private_and_removed_on_drop() {
        let scratch = ScratchDir::create().expect("created");
        let path = scratch.path().to_owned();
        let metadata = std::fs::metadata(&path).expect("exists");
        assert!(metadata.is_dir());
        assert_eq!(metadata.mode() & 0o777, 0o700);
        assert_eq!(metadata.uid(), nix::unistd::geteuid().as_raw());
        std::fs::create_dir_all(path.join("cache/deep")).expect("writable");
        std::fs::write(path.join("cache/deep/file"), "x").expect("writable");

        drop(scratch);

        assert!(!path.exists(), "{} is gone", path.display());
    }

    #[test]
    fn only_a_scratch_directory_is_removed() {
        let other = std::env::temp_dir().join(format!("not-scratch-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir(&other).expect("created");

        remove(&other);

        assert!(other.exists());
        std::fs::remove_dir(&other).expect("cleaned up");
    }
}
