//! Where the workspace's binaries are. Cargo puts every binary of a build in one directory,
//! `target/<profile>`, and a test executable one level below it, in `target/<profile>/deps`.
//! Before running a package's tests cargo builds that package's own binaries only: another
//! package's binary is there only if the workspace was built (`cargo build --workspace`).
//! Nothing here builds anything; a missing binary is an [`Error::MissingBinary`] that says so.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The control plane, `switchyard-server`.
pub const SERVER: &str = "switchyard-server";
/// The device companion, `switchyard-mcp-runner`.
pub const RUNNER: &str = "switchyard-mcp-runner";
/// The fixture MCP server, `switchyard-fixture`.
pub const FIXTURE: &str = "switchyard-fixture";
/// The CLI, `switchyard`.
pub const CLI: &str = "switchyard";
/// The benchmark driver, `switchyard-bench`.
pub const BENCH: &str = "switchyard-bench";

/// The directory of the binaries built with the running executable: `target/<profile>` for a
/// test (which runs from its `deps/`), the executable's own directory for a binary.
pub fn beside_current_exe() -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(Error::io("finding the running executable"))?;
    let dir = exe
        .parent()
        .ok_or_else(|| Error::Setup(format!("{} has no directory", exe.display())))?;
    Ok(match dir.file_name() {
        Some(name) if name == "deps" => dir.parent().unwrap_or(dir),
        _ => dir,
    }
    .to_owned())
}

/// The target directory of the running executable (the parent of `target/<profile>`).
pub fn target_dir() -> Result<PathBuf> {
    let profile_dir = beside_current_exe()?;
    profile_dir
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| Error::Setup(format!("{} has no parent", profile_dir.display())))
}

/// The binary `name` in `dir`, which must exist.
pub fn find_in(dir: &Path, name: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::MissingBinary(path))
    }
}

/// The workspace binary `name` built with the running executable.
pub fn workspace_binary(name: &str) -> Result<PathBuf> {
    find_in(&beside_current_exe()?, name)
}

/// The binaries a deployment runs: server, device runner and fixture, all of one build.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// `switchyard-server`.
    pub server: PathBuf,
    /// `switchyard-mcp-runner`.
    pub runner: PathBuf,
    /// `switchyard-fixture`.
    pub fixture: PathBuf,
}

impl Binaries {
    /// The binaries in `dir` (e.g. `target/release`); each must exist.
    pub fn in_dir(dir: &Path) -> Result<Binaries> {
        Ok(Binaries {
            server: find_in(dir, SERVER)?,
            runner: find_in(dir, RUNNER)?,
            fixture: find_in(dir, FIXTURE)?,
        })
    }

    /// The binaries built with the running executable (see [`beside_current_exe`]).
    pub fn beside_current_exe() -> Result<Binaries> {
        Binaries::in_dir(&beside_current_exe()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_binary_says_to_build_the_workspace() {
        let error = find_in(Path::new("/nonexistent"), SERVER).expect_err("missing");
        assert!(matches!(error, Error::MissingBinary(_)));
        assert!(
            error.to_string().contains("cargo build --workspace"),
            "{error}"
        );
    }
}
