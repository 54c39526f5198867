//! `switchyard mcp-runner DIR [--profile NAME]`: runs the device runner helper,
//! `switchyard-mcp-runner`, from the directory the running `switchyard` executable is in.
//!
//! The helper is found next to the resolved executable only — never on `PATH` — so what runs
//! is what was installed with this CLI. It *replaces* this process (`exec`): it inherits the
//! terminal, receives SIGINT and SIGTERM itself, and its exit status is the command's. A
//! forwarding parent would double every Ctrl-C (the terminal signals the whole foreground
//! process group, the parent included) and turn one graceful drain request into two.

use crate::cli::McpRunnerArgs;
use crate::error::CliError;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use switchyard_mcp_runner::identity::select_profile;

/// The helper's file name.
pub const HELPER: &str = "switchyard-mcp-runner";

/// Runs `switchyard mcp-runner`; returns only if the helper could not be started.
pub fn run(args: McpRunnerArgs) -> Result<(), CliError> {
    let profile = select_profile(args.profile.as_deref()).map_err(CliError::IdentityStore)?;
    let exe = std::env::current_exe().map_err(|source| CliError::HelperExec {
        path: PathBuf::from(HELPER),
        source,
    })?;
    let helper = helper_path(&exe);
    if !helper.is_file() {
        return Err(CliError::HelperMissing { path: helper });
    }
    let source = Command::new(&helper)
        .arg(&args.dir)
        .arg("--profile")
        .arg(&profile)
        .exec();
    Err(CliError::HelperExec {
        path: helper,
        source,
    })
}

/// Where the helper must be: beside `exe`, the running `switchyard` (already resolved through
/// symbolic links by the OS, so a linked `switchyard` finds the helper of its installation).
fn helper_path(exe: &Path) -> PathBuf {
    exe.with_file_name(HELPER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helper_sits_beside_the_executable() {
        assert_eq!(
            helper_path(Path::new("/opt/switchyard/bin/switchyard")),
            Path::new("/opt/switchyard/bin/switchyard-mcp-runner")
        );
        assert_eq!(
            helper_path(Path::new("/switchyard")),
            Path::new("/switchyard-mcp-runner")
        );
    }
}
