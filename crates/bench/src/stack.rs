//! A Switchyard deployment under test, built the way an operator builds one: a migrated
//! database, an installation owner, one or more `switchyard-server` replicas, and through the
//! API a workspace with the fixture MCP server as a central connection and, when asked, a
//! paired device with its own connection and a running `switchyard-mcp-runner`. The pieces
//! (processes, API client, setup requests, pairing) are `switchyard-testkit`'s; this module
//! decides what a benchmark's deployment holds.

use crate::error::{Error, Result};
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, ConnectOptions, PgPool};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};
use switchyard_protocol::api::{CallView, SubmitCall};
use switchyard_protocol::{CallState, DeviceId, RequestId, WorkspaceId};
use switchyard_testkit::api::{Api, from_json};
use switchyard_testkit::bins::Binaries;
use switchyard_testkit::runner::RunnerProcess;
use switchyard_testkit::server::{ANY_PORT, ServerConfig, ServerProcess, install};
use switchyard_testkit::{pairing, setup};

/// The workspace every run works in.
pub const WORKSPACE: &str = "bench";
/// The `application_name` of the driver's own database connections.
pub const DRIVER_APPLICATION: &str = "switchyard-bench";
/// The installation owner the stack creates.
pub const OWNER: &str = "bench";

/// Creates an empty database `name` on the server of `admin_url` (dropping a leftover one) and
/// returns its URL.
pub async fn fresh_database(admin_url: &str, name: &str) -> Result<String> {
    // The name is spliced into DDL (which takes no parameters): allow only a plain identifier.
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        return Err(Error::Setup(format!(
            "database name `{name}` must be lowercase letters, digits and _"
        )));
    }
    let options = PgConnectOptions::from_str(admin_url)?;
    let mut admin = options.connect().await?;
    sqlx::query(AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await?;
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin)
        .await?;
    Ok(options.database(name).to_url_lossy().to_string())
}

/// Where a call goes: a profile and a connection on it.
#[derive(Clone, Debug)]
pub struct Target {
    /// Profile name.
    pub profile: String,
    /// Connection name.
    pub connection: String,
}

impl Target {
    /// A `SubmitCall` for `tool` with `arguments` under a fresh request_id.
    pub fn call(&self, tool: &str, arguments: Value) -> SubmitCall {
        SubmitCall {
            request_id: RequestId::new(),
            profile_id: self.profile.clone(),
            connection_id: self.connection.clone(),
            tool_name: tool.to_owned(),
            arguments,
            environment_id: None,
            client_session_id: None,
            timeout_seconds: Some(30),
            operation_id: None,
        }
    }
}

/// A paired device: its identity saved under `config_dir`, its connection and profile.
#[derive(Clone, Debug)]
pub struct Device {
    /// The device.
    pub device_id: DeviceId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// Its credential (kept in memory only; saved to a 0600 file for the runner).
    pub credential: String,
    /// Where its identity is saved (`SWITCHYARD_CONFIG_DIR` for the runner).
    pub config_dir: PathBuf,
    /// Calls placed on it.
    pub target: Target,
}

/// The deployment: database, server replicas and the owner's API.
pub struct Stack {
    /// The binaries.
    pub bins: Binaries,
    /// The database URL every replica uses.
    pub database_url: String,
    /// The driver's own connections, for statistics and invariants (never call state).
    pub pool: PgPool,
    /// Scratch directory for logs, outboxes and the fixture's count file.
    pub dir: PathBuf,
    /// Server replicas; `None` while one is down.
    pub servers: Vec<Option<ServerProcess>>,
    /// Their addresses (kept across restarts).
    pub addrs: Vec<SocketAddr>,
    server_env: Vec<(String, String)>,
    /// The owner's API on replica 0.
    pub api: Api,
    /// The owner's token.
    pub token: String,
    /// The fixture's count file (one line per executed `count` call).
    pub count_file: PathBuf,
    /// The central connection's target.
    pub central: Target,
}

impl Stack {
    /// Migrates the (empty) database, creates the owner, starts one replica with `server_env`
    /// and sets up workspace `bench`: connector `fixture` (the fixture over stdio, counting
    /// into `count_file`), central connection `fx` with its tools discovered and classified, and profile
    /// `central` on which the owner holds Use.
    pub async fn start(
        bins: Binaries,
        database_url: &str,
        dir: &Path,
        server_env: &[(&str, &str)],
    ) -> Result<Stack> {
        std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        let token = install(&bins.server, database_url, OWNER).await?;
        // Named, so that the chaos suite can terminate every backend but the driver's.
        let options =
            PgConnectOptions::from_str(database_url)?.application_name(DRIVER_APPLICATION);
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        let server_env: Vec<(String, String)> = server_env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let config = ServerConfig {
            env: server_env.clone(),
            ..ServerConfig::new(database_url, &dir.join("server-0.log"))
        };
        let server = ServerProcess::start(&bins.server, &config).await?;
        let api = Api::new(&server.url, Some(&token))?;
        let count_file = dir.join("count.jsonl");
        let mut stack = Stack {
            bins,
            database_url: database_url.to_owned(),
            pool,
            dir: dir.to_owned(),
            addrs: vec![server.addr],
            servers: vec![Some(server)],
            server_env,
            api,
            token,
            count_file,
            central: Target {
                profile: "central".into(),
                connection: "fx".into(),
            },
        };
        stack.set_up_workspace().await?;
        Ok(stack)
    }

    async fn set_up_workspace(&mut self) -> Result<()> {
        setup::workspace(&self.api, WORKSPACE).await?;
        let fixture = self.bins.fixture.display().to_string();
        self.connector(
            "fixture",
            &fixture,
            &[
                "stdio".into(),
                "--count-file".into(),
                self.count_file.display().to_string(),
            ],
        )
        .await?;
        setup::connection(&self.api, WORKSPACE, "fx", "fixture", None).await?;
        setup::discover_classified(&self.api, WORKSPACE, "fx").await?;
        self.profile("central", &["fx"]).await
    }

    /// Creates profile `name` with `connections`; the owner gets Use on it.
    pub async fn profile(&self, name: &str, connections: &[&str]) -> Result<()> {
        setup::profile(&self.api, WORKSPACE, name, connections, OWNER).await?;
        Ok(())
    }

    /// The server log of replica `index`.
    pub fn server_log(&self, index: usize) -> PathBuf {
        self.dir.join(format!("server-{index}.log"))
    }

    /// Starts another replica on a free port; returns its index.
    pub async fn add_replica(&mut self) -> Result<usize> {
        let index = self.servers.len();
        let config = self.server_config(index, ANY_PORT);
        let server = ServerProcess::start(&self.bins.server, &config).await?;
        self.addrs.push(server.addr);
        self.servers.push(Some(server));
        Ok(index)
    }

    fn server_config(&self, index: usize, listen: SocketAddr) -> ServerConfig {
        ServerConfig {
            database_url: self.database_url.clone(),
            listen,
            env: self.server_env.clone(),
            log: self.server_log(index),
            allow_endpoints: switchyard_testkit::server::LOOPBACK_FIXTURES
                .iter()
                .map(|e| (*e).to_owned())
                .collect(),
        }
    }

    /// Replica `index`'s URL.
    pub fn url(&self, index: usize) -> String {
        format!("http://{}", self.addrs[index])
    }

    /// SIGKILLs replica `index` (a crash).
    pub async fn crash_server(&mut self, index: usize) {
        if let Some(mut server) = self.servers[index].take() {
            server.kill();
        }
    }

    /// Stops replica `index` gracefully (SIGTERM; SIGKILL after `grace`).
    pub async fn stop_server(&mut self, index: usize, grace: Duration) {
        if let Some(mut server) = self.servers[index].take() {
            server.stop(grace).await;
        }
    }

    /// Starts replica `index` again on its old address (retrying while the port is busy).
    pub async fn restart_server(&mut self, index: usize) -> Result<()> {
        let config = self.server_config(index, self.addrs[index]);
        let started = Instant::now();
        loop {
            match ServerProcess::start(&self.bins.server, &config).await {
                Ok(server) => {
                    self.servers[index] = Some(server);
                    return Ok(());
                }
                Err(e) if started.elapsed() < Duration::from_secs(20) => {
                    note(&format!("restarting replica {index}: {e}; retrying"));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Stops replica `index` and starts it again on its old address with `server_env` (for
    /// it and every replica started later).
    pub async fn restart_server_with(
        &mut self,
        index: usize,
        server_env: &[(&str, &str)],
    ) -> Result<()> {
        self.stop_server(index, Duration::from_secs(10)).await;
        self.server_env = server_env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.restart_server(index).await
    }

    /// The pid of replica `index`, while it runs.
    pub fn server_pid(&self, index: usize) -> Option<u32> {
        self.servers[index].as_ref().and_then(ServerProcess::pid)
    }

    /// Pairs a device named `name` through the API: a bound profile `<name>-bound`, the
    /// pairing (start, approve, collect), a connection `<name>-fx` on the device (the same
    /// fixture connector, accepted by the device's owner) and a profile `<name>` with it. The identity is saved under
    /// `<dir>/<name>/config` with `server_url` (e.g. a proxy in front of the server).
    pub async fn pair_device(&self, name: &str, server_url: &str) -> Result<Device> {
        self.pair_device_on(name, server_url, "fixture").await
    }

    /// Registers and approves a stdio connector `name` running `command args`.
    pub async fn connector(&self, name: &str, command: &str, args: &[String]) -> Result<()> {
        setup::approved_connector(&self.api, name, setup::stdio(command, args)).await?;
        Ok(())
    }

    /// [`Stack::pair_device`] with the device's connection on `connector`.
    pub async fn pair_device_on(
        &self,
        name: &str,
        server_url: &str,
        connector: &str,
    ) -> Result<Device> {
        let bound = format!("{name}-bound");
        self.profile(&bound, &[]).await?;
        let paired = pairing::pair(&self.api, WORKSPACE, name, &bound).await?;
        let connection = format!("{name}-fx");
        let device = Some(paired.device_id);
        setup::connection(&self.api, WORKSPACE, &connection, connector, device).await?;
        setup::accept_placement(&self.api, WORKSPACE, paired.device_id, &connection).await?;
        self.profile(name, &[&connection]).await?;
        let config_dir = self.dir.join(name).join("config");
        pairing::save_identity(&config_dir, server_url, &paired)?;
        Ok(Device {
            device_id: paired.device_id,
            workspace_id: paired.workspace_id,
            credential: paired.credential,
            config_dir,
            target: Target {
                profile: name.into(),
                connection,
            },
        })
    }

    /// Starts `switchyard-mcp-runner` for `device` with outbox `outbox` and waits until it holds
    /// its lease. `env` is added to its (otherwise clean) environment.
    pub async fn start_runner(
        &self,
        device: &Device,
        outbox: &Path,
        log: &Path,
        env: &[(&str, &str)],
    ) -> Result<RunnerProcess> {
        self.start_runner_binary(&self.bins.runner, device, outbox, log, env)
            .await
    }

    /// [`Stack::start_runner`] with another runner binary (a build to compare with).
    pub async fn start_runner_binary(
        &self,
        runner: &Path,
        device: &Device,
        outbox: &Path,
        log: &Path,
        env: &[(&str, &str)],
    ) -> Result<RunnerProcess> {
        let before = std::fs::read_to_string(log)
            .map(|t| t.matches("lease epoch").count())
            .unwrap_or(0);
        let mut runner = RunnerProcess::start(runner, outbox, &device.config_dir, log, env)?;
        runner
            .wait_for_log("lease epoch", before + 1, Duration::from_secs(60))
            .await?;
        self.discover_once(device).await?;
        Ok(runner)
    }

    /// Has the device's runner discover its connection and classifies its tools low risk,
    /// unless its catalog is filled already:
    /// a call is refused for a tool its catalog does not list, and a restarted runner needs no
    /// second discovery.
    async fn discover_once(&self, device: &Device) -> Result<()> {
        let connection = &device.target.connection;
        let tools = self
            .api
            .get(&format!(
                "/workspaces/{WORKSPACE}/connections/{connection}/tools"
            ))
            .await?;
        if tools.as_array().is_none_or(|tools| tools.is_empty()) {
            setup::discover_classified(&self.api, WORKSPACE, connection).await?;
        }
        Ok(())
    }
}

/// Submits a call; returns the HTTP status (201 new, 200 replay) and the call.
pub async fn submit(api: &Api, call: &SubmitCall) -> Result<(u16, CallView)> {
    submit_to(api, &format!("/workspaces/{WORKSPACE}/calls"), call).await
}

/// Submits a call as `mcp call --wait` does: the server answers once it settles, or after
/// `wait` (at most 25 s) with the call as it is then.
pub async fn submit_waiting(
    api: &Api,
    call: &SubmitCall,
    wait: Duration,
) -> Result<(u16, CallView)> {
    let wait_ms = wait.min(Duration::from_secs(25)).as_millis();
    let path = format!("/workspaces/{WORKSPACE}/calls?wait_ms={wait_ms}");
    submit_to(api, &path, call).await
}

async fn submit_to(api: &Api, path: &str, call: &SubmitCall) -> Result<(u16, CallView)> {
    let answer = api
        .try_post(path, call)
        .await?
        .successful(&format!("POST {path}"))?;
    Ok((answer.status, answer.parse("a submitted call")?))
}

/// Reads a call.
pub async fn read_call(api: &Api, id: &str) -> Result<CallView> {
    let body = api
        .get(&format!("/workspaces/{WORKSPACE}/calls/{id}"))
        .await?;
    Ok(from_json(body, "a call")?)
}

/// Whether a call has reached a terminal state or `unknown` (what `mcp call --wait` waits for).
pub fn settled(state: CallState) -> bool {
    !matches!(
        state,
        CallState::Queued | CallState::Leased | CallState::Running
    )
}

/// Reads a call, letting the server wait up to `wait` for it to settle (`?wait_ms=`).
pub async fn read_call_waiting(api: &Api, id: &str, wait: Duration) -> Result<CallView> {
    let body = api
        .get(&format!(
            "/workspaces/{WORKSPACE}/calls/{id}?wait_ms={}",
            wait.as_millis()
        ))
        .await?;
    Ok(from_json(body, "a call")?)
}

/// Waits until a call is settled, within `deadline`, with waiting reads: the server answers
/// the moment the completion is recorded, as `switchyard mcp call --wait` would see it.
pub async fn wait_settled(api: &Api, id: &str, deadline: Duration) -> Result<CallView> {
    let started = Instant::now();
    loop {
        let left = deadline.saturating_sub(started.elapsed());
        let call = read_call_waiting(api, id, left.min(Duration::from_secs(25))).await?;
        if settled(call.state) {
            return Ok(call);
        }
        if started.elapsed() >= deadline {
            return Err(Error::Setup(format!(
                "call {id} is still {} after {deadline:?}",
                call.state
            )));
        }
    }
}

/// A progress note on stderr (the driver's stdout is its report).
pub fn note(message: &str) {
    eprintln!("[{}] {message}", chrono::Utc::now().format("%H:%M:%S%.3f"));
}
