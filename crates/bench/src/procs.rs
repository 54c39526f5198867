//! The real processes a run needs: `switchyard-server` (admin commands and `serve`), the device
//! companion `switchyard-mcp-runner`, and what a process costs in memory. Every child is killed
//! when its handle is dropped, so an aborted run leaves nothing behind.

use crate::error::{Error, Result};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long a process may take to start and announce itself.
pub const START_DEADLINE: Duration = Duration::from_secs(60);

/// Where the binaries of one build are.
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
        let find = |name: &str| {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(Error::MissingBinary(path))
            }
        };
        Ok(Binaries {
            server: find("switchyard-server")?,
            runner: find("switchyard-mcp-runner")?,
            fixture: find("switchyard-fixture")?,
        })
    }
}

/// Runs `switchyard-server ARGS` against `database_url`; returns its trimmed stdout.
pub async fn server_admin(bins: &Binaries, database_url: &str, args: &[&str]) -> Result<String> {
    let output = Command::new(&bins.server)
        .args(args)
        .env("DATABASE_URL", database_url)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(Error::io(format!("running switchyard-server {args:?}")))?;
    if !output.status.success() {
        return Err(Error::Setup(format!(
            "switchyard-server {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// How to start a server process.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Its database.
    pub database_url: String,
    /// Where it listens (port 0: any free port).
    pub listen: SocketAddr,
    /// Extra environment (e.g. `SWITCHYARD_LEASE_TTL_SECONDS`).
    pub env: Vec<(String, String)>,
    /// Its stderr goes here (appended, so restarts keep the earlier log).
    pub log: PathBuf,
}

/// A running `switchyard-server serve`.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    /// Its base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    /// Its bound address.
    pub addr: SocketAddr,
    log: PathBuf,
}

impl ServerProcess {
    /// Starts the server and waits until it announces its address.
    pub async fn start(bins: &Binaries, config: &ServerConfig) -> Result<ServerProcess> {
        let log = open_log(&config.log)?;
        let mut child = Command::new(&bins.server)
            .args(["serve", "--listen", &config.listen.to_string()])
            .env("DATABASE_URL", &config.database_url)
            .envs(config.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(Error::io("starting switchyard-server"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| Error::Setup("no server stdout".into()))?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        // Keep draining stdout for the server's whole life so it never blocks on a full pipe.
        tokio::spawn(async move {
            let mut tx = Some(tx);
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(url) = line.strip_prefix("listening on ")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let url = match tokio::time::timeout(START_DEADLINE, rx).await {
            Ok(Ok(url)) => url,
            _ => {
                return Err(Error::Setup(format!(
                    "switchyard-server did not announce its address; log {}:\n{}",
                    config.log.display(),
                    tail(&config.log)
                )));
            }
        };
        let addr = url
            .trim_start_matches("http://")
            .parse()
            .map_err(|e| Error::Setup(format!("the server announced an odd address {url}: {e}")))?;
        Ok(ServerProcess {
            child,
            url,
            addr,
            log: config.log.clone(),
        })
    }

    /// Its process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends `signal` to it.
    pub fn signal(&self, signal: Signal) -> Result<()> {
        signal_pid(self.pid(), signal)
    }

    /// SIGKILL and wait until it is gone.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// SIGTERM (graceful shutdown), then SIGKILL after `grace`; waits until it is gone.
    pub async fn stop(&mut self, grace: Duration) {
        let _ = self.signal(Signal::SIGTERM);
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            self.kill().await;
        }
    }

    /// The last lines of its log, for error messages.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }
}

/// A running `switchyard-mcp-runner`.
#[derive(Debug)]
pub struct RunnerProcess {
    child: Child,
    log: PathBuf,
}

impl RunnerProcess {
    /// Starts the device runner binary `runner` with outbox `outbox`, as the device identity
    /// saved under `config_dir` (credentials in files), logging to `log` (appended).
    pub fn start(
        runner: &Path,
        outbox: &Path,
        config_dir: &Path,
        log: &Path,
        env: &[(&str, &str)],
    ) -> Result<RunnerProcess> {
        let file = open_log(log)?;
        let child = Command::new(runner)
            .arg(outbox)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", std::env::var_os("HOME").unwrap_or_default())
            .env("SWITCHYARD_CONFIG_DIR", config_dir)
            .env("SWITCHYARD_DEVICE_KEYRING", "off")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .map_err(Error::io("starting switchyard-mcp-runner"))?;
        Ok(RunnerProcess {
            child,
            log: log.to_owned(),
        })
    }

    /// Waits until the log holds `needle` at least `times` times, within `deadline`.
    pub async fn wait_for_log(
        &mut self,
        needle: &str,
        times: usize,
        deadline: Duration,
    ) -> Result<()> {
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            if text.matches(needle).count() >= times {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(Error::Setup(format!(
                    "switchyard-mcp-runner exited ({status}); log:\n{}",
                    tail(&self.log)
                )));
            }
            if started.elapsed() > deadline {
                return Err(Error::Setup(format!(
                    "switchyard-mcp-runner did not log `{needle}`; log:\n{}",
                    tail(&self.log)
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Its process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends `signal` to it.
    pub fn signal(&self, signal: Signal) -> Result<()> {
        signal_pid(self.pid(), signal)
    }

    /// SIGKILL and wait until it is gone.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Waits for it to exit within `deadline`; its exit code (`None`: killed by a signal).
    pub async fn wait_exit(&mut self, deadline: Duration) -> Result<Option<i32>> {
        match tokio::time::timeout(deadline, self.child.wait()).await {
            Ok(Ok(status)) => Ok(status.code()),
            Ok(Err(e)) => Err(Error::io("waiting for switchyard-mcp-runner")(e)),
            Err(_) => Err(Error::Setup(format!(
                "switchyard-mcp-runner did not exit; log:\n{}",
                tail(&self.log)
            ))),
        }
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }
}

fn signal_pid(pid: Option<u32>, signal: Signal) -> Result<()> {
    let pid = pid.ok_or_else(|| Error::Setup("the process has exited".into()))?;
    let pid = i32::try_from(pid).map_err(|_| Error::Setup(format!("odd pid {pid}")))?;
    kill(Pid::from_raw(pid), signal)
        .map_err(|e| Error::Setup(format!("cannot send {signal} to {pid}: {e}")))
}

fn open_log(path: &Path) -> Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(Error::io(format!("opening {}", path.display())))
}

/// The last 40 lines of a log file.
pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// The resident set size of a process (VmRSS in /proc/PID/status), in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
