//! Scratch directories and permission bits for the device tests (`switchyard-testkit`'s, a
//! failed step failing the test), and this package's runner binary as a process.

use std::path::{Path, PathBuf};
use std::time::Duration;
use switchyard_testkit::runner::RunnerProcess;
use switchyard_testkit::scratch;

/// How long a runner may take to exit or to log a line.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A fresh, empty directory for one test's files, kept after it.
#[track_caller]
pub fn scratch(test: &str) -> PathBuf {
    scratch::kept("switchyard-device", test).expect("a scratch directory")
}

/// The permission bits of `path`.
#[track_caller]
pub fn mode(path: &Path) -> u32 {
    scratch::mode(path).unwrap_or_else(|e| panic!("{e}"))
}

/// Starts this package's `switchyard-mcp-runner OUTBOX` for the identities in `config_dir`,
/// logging to `log` at level info, with a clean environment plus `env`.
#[track_caller]
pub fn start_runner(
    config_dir: &Path,
    outbox: &Path,
    log: &Path,
    env: &[(&str, &str)],
) -> RunnerProcess {
    let mut all = vec![("SWITCHYARD_LOG", "info")];
    all.extend_from_slice(env);
    let binary = Path::new(env!("CARGO_BIN_EXE_switchyard-mcp-runner"));
    RunnerProcess::start(binary, outbox, config_dir, log, &all)
        .expect("start switchyard-mcp-runner")
}
