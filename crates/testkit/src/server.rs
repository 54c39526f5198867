//! `switchyard-server` as a real process, set up the way an operator sets it up: its admin
//! commands ([`admin`], [`install`]: migrate, create the owner) and `serve` on an address with
//! its stderr in a log file ([`ServerProcess`]). The process is killed when its handle drops.

use crate::error::{Error, Result};
use crate::process::Process;
use nix::sys::signal::Signal;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long a server may take to start and announce its address.
pub const START_DEADLINE: Duration = Duration::from_secs(60);

/// Any free port on the loopback interface: the server binds it and announces which.
pub const ANY_PORT: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));

/// Runs `switchyard-server ARGS` (the binary `server`) against `database_url`; its trimmed
/// stdout.
pub async fn admin(server: &Path, database_url: &str, args: &[&str]) -> Result<String> {
    let output = tokio::process::Command::new(server)
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

/// Migrates the (empty) database and creates the installation owner `owner`; the owner's
/// token.
pub async fn install(server: &Path, database_url: &str, owner: &str) -> Result<String> {
    admin(server, database_url, &["migrate"]).await?;
    let token = admin(
        server,
        database_url,
        &["admin", "create-owner", "--name", owner],
    )
    .await?;
    if token.is_empty() {
        return Err(Error::Setup("create-owner printed no token".into()));
    }
    Ok(token)
}

/// How to start a server process.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Its database.
    pub database_url: String,
    /// Where it listens ([`ANY_PORT`]: a free port).
    pub listen: SocketAddr,
    /// Extra environment, e.g. `SWITCHYARD_LEASE_TTL_SECONDS` (its settings).
    pub env: Vec<(String, String)>,
    /// Its stderr goes here (appended, so restarts keep the earlier log).
    pub log: PathBuf,
    /// Its `--allow-endpoint`s: [`LOOPBACK_FIXTURES`] unless changed, so that HTTP connectors
    /// may point at fixtures on this machine.
    pub allow_endpoints: Vec<String>,
}

/// What a test server allows its HTTP connectors to reach besides public addresses: the
/// loopback interface, where the tests' fixture MCP servers listen.
pub const LOOPBACK_FIXTURES: &[&str] = &["127.0.0.0/8", "::1"];

impl ServerConfig {
    /// A server on [`ANY_PORT`] with no extra environment.
    pub fn new(database_url: &str, log: &Path) -> ServerConfig {
        ServerConfig {
            database_url: database_url.to_owned(),
            listen: ANY_PORT,
            env: Vec::new(),
            log: log.to_owned(),
            allow_endpoints: LOOPBACK_FIXTURES.iter().map(|e| (*e).to_owned()).collect(),
        }
    }

    /// The same with `env` added to the server's environment.
    pub fn with_env(mut self, env: &[(&str, &str)]) -> ServerConfig {
        self.env
            .extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        self
    }
}

/// A running `switchyard-server serve`; killed when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    process: Process,
    /// Its base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    /// Its bound address.
    pub addr: SocketAddr,
}

impl ServerProcess {
    /// Starts the binary `server` with `config` and waits until it announces its address.
    pub async fn start(server: &Path, config: &ServerConfig) -> Result<ServerProcess> {
        let mut command = Command::new(server);
        command
            .args(["serve", "--listen", &config.listen.to_string()])
            .args(
                config
                    .allow_endpoints
                    .iter()
                    .flat_map(|entry| ["--allow-endpoint", entry.as_str()]),
            )
            .env("DATABASE_URL", &config.database_url)
            .envs(config.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut process = Process::spawn(command, "switchyard-server", &config.log)?;
        let stdout = process
            .take_stdout()
            .ok_or_else(|| Error::Setup("no server stdout".into()))?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        // Keep draining stdout for the server's whole life so it never blocks on a full pipe.
        // A thread, not a task: it outlives any one runtime, and ends when the server does.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("listening on ")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let Ok(Ok(url)) = tokio::time::timeout(START_DEADLINE, rx).await else {
            return Err(Error::Setup(format!(
                "switchyard-server did not announce its address; log {}:\n{}",
                config.log.display(),
                process.log_tail()
            )));
        };
        let addr = url
            .trim_start_matches("http://")
            .parse()
            .map_err(|e| Error::Setup(format!("the server announced an odd address {url}: {e}")))?;
        Ok(ServerProcess { process, url, addr })
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Sends `signal` to it.
    pub fn signal(&self, signal: Signal) -> Result<()> {
        self.process.signal(signal)
    }

    /// SIGKILL (a crash), and wait until it is gone.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// SIGTERM (a graceful shutdown), then SIGKILL after `grace`; waits until it is gone.
    pub async fn stop(&mut self, grace: Duration) {
        self.process.stop(grace).await;
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
