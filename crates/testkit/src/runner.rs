//! `switchyard-mcp-runner`, the device companion, as a real process: one device identity (from
//! its configuration directory, credentials in files), one outbox, stderr in a log file, and an
//! environment holding nothing of the caller's but `PATH` and `HOME`. Killed when its handle
//! drops.

use crate::error::Result;
use crate::process::Process;
use nix::sys::signal::Signal;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A running `switchyard-mcp-runner`; killed when dropped.
#[derive(Debug)]
pub struct RunnerProcess {
    process: Process,
}

impl RunnerProcess {
    /// Starts the runner binary `runner` with outbox `outbox`, as the device identity saved
    /// under `config_dir` (`SWITCHYARD_DEVICE_KEYRING=off`), logging to `log` (appended), with
    /// `env` added to its otherwise clean environment.
    pub fn start(
        runner: &Path,
        outbox: &Path,
        config_dir: &Path,
        log: &Path,
        env: &[(&str, &str)],
    ) -> Result<RunnerProcess> {
        let mut command = Command::new(runner);
        command
            .arg(outbox)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", std::env::var_os("HOME").unwrap_or_default())
            .env("SWITCHYARD_CONFIG_DIR", config_dir)
            .env("SWITCHYARD_DEVICE_KEYRING", "off")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        let process = Process::spawn(command, "switchyard-mcp-runner", log)?;
        Ok(RunnerProcess { process })
    }

    /// Waits until the log holds `needle` at least `times` times, within `within`; fails early
    /// if the runner exits first.
    pub async fn wait_for_log(
        &mut self,
        needle: &str,
        times: usize,
        within: Duration,
    ) -> Result<()> {
        self.process.wait_for_log(needle, times, within).await
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Sends `signal` to it.
    pub fn signal(&self, signal: Signal) -> Result<()> {
        self.process.signal(signal)
    }

    /// SIGKILL, and wait until it is gone.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Waits for it to exit within `within`; its exit code (`None`: ended by a signal).
    pub async fn wait_exit(&mut self, within: Duration) -> Result<Option<i32>> {
        self.process.wait_exit(within).await
    }

    /// Its whole log so far.
    pub fn log_text(&self) -> String {
        self.process.log_text()
    }

    /// The last lines of its log, for error messages.
    pub fn log_tail(&self) -> String {
        self.process.log_tail()
    }
}
