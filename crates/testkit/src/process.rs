//! A child process with its stderr in a log file: signalled, waited for with a bound, and
//! killed and reaped when dropped, so an aborted test or benchmark leaves nothing running. The
//! server and runner handles ([`crate::server`], [`crate::runner`]) are built on it.
//!
//! The child is a plain `std::process::Child`, owned by no async runtime: a handle works the
//! same from a test's runtime, the benchmark's, or none, and dropping it never depends on a
//! runtime still running. Waits poll `try_wait` at a short interval.

use crate::error::{Error, Result};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How often a wait for a process looks again.
const WAIT_EVERY: Duration = Duration::from_millis(20);

/// A running child and its log; killed and reaped on drop.
#[derive(Debug)]
pub(crate) struct Process {
    child: Child,
    /// The program's name, for messages.
    name: String,
    log: PathBuf,
    /// Set once the child has been reaped.
    status: Option<ExitStatus>,
}

impl Process {
    /// Spawns `command` with its stderr appended to `log` (so a restart keeps the earlier log).
    pub(crate) fn spawn(mut command: Command, name: &str, log: &Path) -> Result<Process> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(Error::io(format!("opening {}", log.display())))?;
        let child = command
            .stderr(file)
            .spawn()
            .map_err(Error::io(format!("starting {name}")))?;
        Ok(Process {
            child,
            name: name.to_owned(),
            log: log.to_owned(),
            status: None,
        })
    }

    /// The child's stdout, if it was piped and not taken yet.
    pub(crate) fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// The process id, until the process has been reaped.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.status.is_none().then(|| self.child.id())
    }

    /// How the process ended, if it has (reaping it).
    pub(crate) fn exited(&mut self) -> Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self
                .child
                .try_wait()
                .map_err(Error::io(format!("waiting for {}", self.name)))?;
        }
        Ok(self.status)
    }

    /// Sends `signal`.
    pub(crate) fn signal(&self, signal: Signal) -> Result<()> {
        let pid = self
            .pid()
            .ok_or_else(|| Error::Setup(format!("{} has exited", self.name)))?;
        let pid = i32::try_from(pid).map_err(|_| Error::Setup(format!("odd pid {pid}")))?;
        kill(Pid::from_raw(pid), signal)
            .map_err(|e| Error::Setup(format!("cannot send {signal} to {}: {e}", self.name)))
    }

    /// SIGKILL, and wait until it is gone.
    pub(crate) fn kill(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }

    /// Waits for the process to exit within `within`; its exit code (`None`: ended by a
    /// signal). Past the bound the process is left running and the error shows its log.
    pub(crate) async fn wait_exit(&mut self, within: Duration) -> Result<Option<i32>> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.exited()? {
                return Ok(status.code());
            }
            if started.elapsed() >= within {
                return Err(Error::TimedOut {
                    what: format!("{} did not exit; log:\n{}", self.name, self.log_tail()),
                    within,
                });
            }
            tokio::time::sleep(WAIT_EVERY).await;
        }
    }

    /// SIGTERM (a graceful stop), then SIGKILL if it has not exited after `grace`.
    pub(crate) async fn stop(&mut self, grace: Duration) {
        let _ = self.signal(Signal::SIGTERM);
        if self.wait_exit(grace).await.is_err() {
            self.kill();
        }
    }

    /// Waits until the log holds `needle` at least `times` times, within `within`. Fails early
    /// if the process exits without having logged it.
    pub(crate) async fn wait_for_log(
        &mut self,
        needle: &str,
        times: usize,
        within: Duration,
    ) -> Result<()> {
        let started = Instant::now();
        loop {
            let logged = |log: &str| log.matches(needle).count() >= times;
            if logged(&self.log_text()) {
                return Ok(());
            }
            if let Some(status) = self.exited()? {
                // It may have logged the line just before exiting: look once more.
                if logged(&self.log_text()) {
                    return Ok(());
                }
                return Err(Error::Setup(format!(
                    "{} exited ({status}) without logging `{needle}`; log:\n{}",
                    self.name,
                    self.log_tail()
                )));
            }
            if started.elapsed() >= within {
                return Err(Error::TimedOut {
                    what: format!(
                        "{} did not log `{needle}`; log:\n{}",
                        self.name,
                        self.log_tail()
                    ),
                    within,
                });
            }
            tokio::time::sleep(WAIT_EVERY).await;
        }
    }

    /// The whole log so far.
    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last lines of the log, for error messages.
    pub(crate) fn log_tail(&self) -> String {
        tail(&self.log)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last 40 lines of a log file (nothing if it cannot be read).
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
