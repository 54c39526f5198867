//! Scratch directories for one test's files: logs, outboxes, device identities, count files.
//! Every directory made here is private (0700), since device credentials and outboxes go into
//! them and the runner refuses an outbox others can read. Two kinds:
//!
//! - [`kept`]: `target/tmp/<suite>/<test>`, emptied when the test starts and left behind after
//!   it, so a failed test's logs can be read;
//! - [`Scratch`]: a fresh directory under the system's temp directory, removed on drop.
//!
//! The benchmark driver does not use these: it is given its own work directory.

use crate::bins;
use crate::error::{Error, Result};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A fresh, empty, private directory `<target>/tmp/<suite>/<test>` (where cargo's
/// `CARGO_TARGET_TMPDIR` points), kept after the test.
pub fn kept(suite: &str, test: &str) -> Result<PathBuf> {
    let dir = bins::target_dir()?.join("tmp").join(suite).join(test);
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(Error::io(format!("emptying {}", dir.display()))(e));
        }
        _ => {}
    }
    private_dir(&dir)?;
    Ok(dir)
}

/// Creates `dir` and its missing parents, and makes `dir` itself 0700.
fn private_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(Error::io(format!("creating {}", dir.display())))?;
    // `mode` applies to directories it creates; a leftover parent is not its business, but
    // `dir` was just created or emptied, and must be private whatever the umask.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(Error::io(format!("making {} private", dir.display())))
}

/// A path under the system's temp directory that no other test uses (not created).
pub fn unique_path(label: &str) -> PathBuf {
    std::env::temp_dir().join(format!("switchyard-it-{label}-{}", uuid::Uuid::new_v4()))
}

/// A fresh private directory under the system's temp directory, removed when dropped.
#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// Creates `switchyard-test-<label>-<uuid>` under the temp directory.
    pub fn new(label: &str) -> Result<Scratch> {
        let dir =
            std::env::temp_dir().join(format!("switchyard-test-{label}-{}", uuid::Uuid::new_v4()));
        private_dir(&dir)?;
        Ok(Scratch { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `name` inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `name` inside the directory as a string, for JSON bodies and command lines.
    pub fn path(&self, name: &str) -> String {
        self.join(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The permission bits of `path` (e.g. `0o600`).
pub fn mode(path: &Path) -> Result<u32> {
    let metadata =
        std::fs::metadata(path).map_err(Error::io(format!("reading {}", path.display())))?;
    Ok(metadata.permissions().mode() & 0o7777)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_directory_is_private_and_empty_each_time() {
        let dir = kept("switchyard-testkit", "kept").expect("first");
        std::fs::write(dir.join("leftover"), "x").expect("write");
        let again = kept("switchyard-testkit", "kept").expect("again");
        assert_eq!(again, dir);
        assert_eq!(mode(&dir).expect("mode"), 0o700);
        assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 0);
    }

    #[test]
    fn a_scratch_directory_is_private_and_removed_on_drop() {
        let scratch = Scratch::new("testkit").expect("create");
        let dir = scratch.dir().to_owned();
        assert_eq!(mode(&dir).expect("mode"), 0o700);
        drop(scratch);
        assert!(!dir.exists());
    }
}
