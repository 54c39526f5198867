//! Test harness: scratch directories, a real `switchyard-server` per test on a fresh database,
//! a workspace with a paired device, and the `switchyard-mcp-runner` binary as a subprocess.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::Serialize;
use serde_json::{Value, json};
use sqlx::ConnectOptions;
use sqlx::postgres::PgConnectOptions;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use switchyard_mcp_runner::identity::{DeviceIdentity, IdentityStore, KeyringChoice};
use switchyard_protocol::api::{
    ApproveDevice, ConnectorSpec, CreateConnection, CreateConnector, CreateProfile,
    CreateWorkspace, GrantRequest, PairingStarted, PairingStatus, PollPairing, StartPairing,
    SubmitCall,
};
use switchyard_protocol::{DeviceId, RequestId};

/// How long a process may take to start, a call to settle or a log line to appear.
pub const DEADLINE: Duration = Duration::from_secs(60);
/// The workspace every end-to-end test works in.
pub const WORKSPACE: &str = "demo";

/// A fresh, empty directory for one test's files.
pub fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("switchyard-device")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

/// The permission bits of `path`.
#[track_caller]
pub fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// A binary built into the same target directory as this test.
#[track_caller]
pub fn sibling_binary(name: &str) -> PathBuf {
    // current_exe is target/<profile>/deps/device-<hash>; binaries live in target/<profile>.
    let exe = std::env::current_exe().expect("current_exe");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("the target directory")
        .join(name);
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build -p {name}`",
        path.display()
    );
    path
}

/// A running `switchyard-server serve` on a fresh database, as owner `alice`; killed on drop.
pub struct Server {
    child: Child,
    url: String,
    token: String,
    log: PathBuf,
}

impl Server {
    /// Migrates the test database, creates the owner `alice` and starts the server on port 0.
    #[track_caller]
    pub fn start(db: &PgConnectOptions, test: &str) -> Server {
        Server::start_with_env(db, test, &[])
    }

    /// [`Server::start`] with extra environment variables for the server (its settings).
    #[track_caller]
    pub fn start_with_env(db: &PgConnectOptions, test: &str, env: &[(&str, &str)]) -> Server {
        let database_url = db.to_url_lossy().to_string();
        let log = scratch(&format!("{test}-server")).join("server.log");
        server_admin(&database_url, &["migrate"]);
        let token = server_admin(&database_url, &["admin", "create-owner", "--name", "alice"]);
        let mut child = Command::new(sibling_binary("switchyard-server"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("DATABASE_URL", &database_url)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(&log).expect("server log"))
            .spawn()
            .expect("spawn switchyard-server");
        let stdout = child.stdout.take().expect("server stdout");
        let (tx, rx) = mpsc::channel();
        // Drain stdout for the server's whole life so that it never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("listening on ") {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let url = rx.recv_timeout(DEADLINE).unwrap_or_else(|_| {
            panic!(
                "the server printed no `listening on` line; log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        Server {
            child,
            url,
            token,
            log,
        }
    }

    /// The server's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The API as alice.
    pub fn api(&self) -> Api {
        // reqwest is built without a TLS provider: one must be installed before a client exists.
        switchyard_mcp_runner::device::install_tls_provider();
        Api {
            http: reqwest::Client::new(),
            base: format!("{}/api/v1", self.url),
            token: Some(self.token.clone()),
        }
    }

    /// The server's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `switchyard-server ARGS` against `database_url`; asserts success, returns stdout.
#[track_caller]
fn server_admin(database_url: &str, args: &[&str]) -> String {
    let output = Command::new(sibling_binary("switchyard-server"))
        .args(args)
        .env("DATABASE_URL", database_url)
        .stdin(Stdio::null())
        .output()
        .expect("run switchyard-server");
    assert!(
        output.status.success(),
        "switchyard-server {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The HTTP API, as alice or as nobody.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Api {
    /// The same API without a token (pairing).
    pub fn anonymous(&self) -> Api {
        Api {
            token: None,
            ..self.clone()
        }
    }

    /// The same API with `token` (e.g. a device credential).
    pub fn with_token(&self, token: &str) -> Api {
        Api {
            token: Some(token.to_owned()),
            ..self.clone()
        }
    }

    /// `POST path` with `body`: the status and the JSON answer (`null` when there is none).
    pub async fn try_post(&self, path: &str, body: &impl Serialize) -> (u16, Value) {
        let mut request = self.http.post(format!("{}{path}", self.base)).json(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        answer(request.send().await.expect("POST")).await
    }

    /// `POST path` with `body`, asserting success.
    pub async fn post(&self, path: &str, body: &impl Serialize) -> Value {
        let (status, answer) = self.try_post(path, body).await;
        assert!(
            (200..300).contains(&status),
            "POST {path} answered {status}: {answer}"
        );
        answer
    }

    /// `GET path`, asserting success.
    pub async fn get(&self, path: &str) -> Value {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let (status, answer) = answer(request.send().await.expect("GET")).await;
        assert!(
            (200..300).contains(&status),
            "GET {path} answered {status}: {answer}"
        );
        answer
    }
}

async fn answer(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.expect("answer body");
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, body)
}

/// The fixture MCP server over stdio, its stdin copied (appended) to `stdin_copy` so a test can
/// count the requests it received, with `env` declared for credential bindings.
pub fn fixture_spec(stdin_copy: &Path, env: &[&str]) -> ConnectorSpec {
    let fixture = sibling_binary("switchyard-fixture");
    ConnectorSpec::Stdio {
        command: "sh".to_owned(),
        args: vec![
            "-c".to_owned(),
            r#"tee -a "$1" | "$2" stdio"#.to_owned(),
            "sh".to_owned(),
            stdin_copy.display().to_string(),
            fixture.display().to_string(),
        ],
        env: env.iter().map(|name| (*name).to_owned()).collect(),
    }
}

/// A workspace with a device paired to it, its identity saved, and connection `dfx` (the
/// given connector) placed on the device, in profile `dev` on which alice holds Use.
pub struct Paired {
    /// The API as alice.
    pub api: Api,
    /// The server's URL.
    pub server_url: String,
    /// The device.
    pub device_id: DeviceId,
    /// The device credential.
    pub credential: String,
    /// Connection `dfx`'s id.
    pub connection_id: String,
    /// Where the device identity is saved (`SWITCHYARD_CONFIG_DIR`).
    pub config_dir: PathBuf,
    /// The test's scratch directory.
    pub dir: PathBuf,
}

impl Paired {
    /// Sets everything up for `test`, with `spec` as the device connection's connector.
    pub async fn set_up(server: &Server, test: &str, spec: ConnectorSpec) -> Paired {
        let dir = scratch(test);
        let api = server.api();
        api.post(
            "/workspaces",
            &CreateWorkspace {
                name: WORKSPACE.to_owned(),
            },
        )
        .await;
        let connector = api
            .post(
                "/connectors",
                &CreateConnector {
                    name: "fixture".to_owned(),
                    spec,
                },
            )
            .await;
        let connector = connector["id"].as_str().expect("connector id").to_owned();
        api.post(&format!("/connectors/{connector}/approve"), &json!({}))
            .await;
        // The profile the device is bound to (it submits nothing in these tests).
        api.post(
            "/workspaces/demo/profiles",
            &CreateProfile {
                name: "main".to_owned(),
                environment: None,
                connections: Vec::new(),
            },
        )
        .await;
        grant_use(&api, "main").await;

        let anonymous = api.anonymous();
        let (_, started) = anonymous
            .try_post(
                "/pairing",
                &StartPairing {
                    device_name: "test-box".to_owned(),
                },
            )
            .await;
        let started: PairingStarted = serde_json::from_value(started).expect("a pairing answer");
        api.post(
            "/workspaces/demo/devices/approve",
            &ApproveDevice {
                code: started.code.clone(),
                profile: "main".to_owned(),
            },
        )
        .await;
        let (_, status) = anonymous
            .try_post(
                &format!("/pairing/{}/poll", started.pairing_id),
                &PollPairing {
                    poll_secret: started.poll_secret.clone(),
                },
            )
            .await;
        let status: PairingStatus = serde_json::from_value(status).expect("a pairing status");
        let PairingStatus::Approved {
            device_id,
            workspace_id,
            credential: Some(credential),
        } = status
        else {
            panic!("the pairing is not approved with a credential: {status:?}");
        };

        let connection = api
            .post(
                "/workspaces/demo/connections",
                &CreateConnection {
                    name: "dfx".to_owned(),
                    connector: "fixture".to_owned(),
                    runner: Some(format!("device:{device_id}")),
                },
            )
            .await;
        let connection_id = connection["id"].as_str().expect("connection id").to_owned();
        api.post(
            "/workspaces/demo/profiles",
            &CreateProfile {
                name: "dev".to_owned(),
                environment: None,
                connections: vec!["dfx".to_owned()],
            },
        )
        .await;
        grant_use(&api, "dev").await;

        let config_dir = dir.join("config");
        let store = IdentityStore::open(config_dir.clone(), KeyringChoice::Off)
            .expect("open the identity store");
        store
            .save(&DeviceIdentity {
                profile: "default".to_owned(),
                server_url: server.url().to_owned(),
                device_id,
                workspace_id,
                credential: credential.clone(),
            })
            .expect("save the device identity");
        Paired {
            api,
            server_url: server.url().to_owned(),
            device_id,
            credential,
            connection_id,
            config_dir,
            dir,
        }
    }

    /// Has the device's runner reach the server at `url` (a proxy in front of it) from now on.
    pub fn reach_through(&self, url: &str) {
        let store = IdentityStore::open(self.config_dir.clone(), KeyringChoice::Off)
            .expect("open the identity store");
        let mut identity = store
            .load("default")
            .expect("load the device identity")
            .expect("the device identity is saved");
        identity.server_url = url.to_owned();
        store.save(&identity).expect("save the device identity");
    }

    /// Starts `switchyard-mcp-runner OUTBOX` as this device, with `env` added.
    pub fn runner(&self, outbox: &Path, name: &str, env: &[(&str, &str)]) -> Runner {
        Runner::start(&self.config_dir, outbox, &self.dir.join(name), env)
    }

    /// Submits `tool` with `arguments` on `dfx` under profile `dev`; returns the call id.
    pub async fn submit(&self, tool: &str, arguments: Value, timeout_seconds: u32) -> String {
        let call = self
            .api
            .post(
                "/workspaces/demo/calls",
                &SubmitCall {
                    request_id: RequestId::new(),
                    profile_id: "dev".to_owned(),
                    connection_id: "dfx".to_owned(),
                    tool_name: tool.to_owned(),
                    arguments,
                    environment_id: None,
                    client_session_id: None,
                    timeout_seconds: Some(timeout_seconds),
                    operation_id: None,
                },
            )
            .await;
        call["id"].as_str().expect("call id").to_owned()
    }

    /// The call as alice reads it.
    pub async fn call(&self, call: &str) -> Value {
        self.api
            .get(&format!("/workspaces/demo/calls/{call}"))
            .await
    }

    /// Polls the call until its state is `state`, within the deadline; returns it.
    pub async fn wait_for_state(&self, call: &str, state: &str) -> Value {
        let started = Instant::now();
        loop {
            let view = self.call(call).await;
            if view["state"] == state {
                return view;
            }
            assert!(
                started.elapsed() < DEADLINE,
                "call {call} did not become {state} within {DEADLINE:?}: {view}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn grant_use(api: &Api, profile: &str) {
    api.post(
        &format!("/workspaces/demo/profiles/{profile}/grants"),
        &GrantRequest {
            user: "alice".to_owned(),
            use_: true,
            manage: false,
            share: false,
        },
    )
    .await;
}

/// Polls `done` every 50 ms until it holds; fails with `failure` once the deadline passed.
pub async fn poll_until(mut done: impl FnMut() -> bool, failure: impl Fn() -> String) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < DEADLINE, "{}", failure());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A `switchyard-mcp-runner` process, stderr in a log file; killed if dropped running.
pub struct Runner {
    child: Option<Child>,
    log: PathBuf,
}

impl Runner {
    /// Starts the runner for the identities in `config_dir` with outbox `outbox`, logging to
    /// `log`, with a clean environment plus `env`.
    pub fn start(config_dir: &Path, outbox: &Path, log: &Path, env: &[(&str, &str)]) -> Runner {
        let child = Command::new(env!("CARGO_BIN_EXE_switchyard-mcp-runner"))
            .arg(outbox)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", std::env::var_os("HOME").unwrap_or_default())
            .env("SWITCHYARD_CONFIG_DIR", config_dir)
            .env("SWITCHYARD_DEVICE_KEYRING", "off")
            .env("SWITCHYARD_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(log).expect("runner log"))
            .spawn()
            .expect("spawn switchyard-mcp-runner");
        Runner {
            child: Some(child),
            log: log.to_owned(),
        }
    }

    /// The runner's stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log contains `needle`, within the deadline.
    pub async fn wait_for_log(&self, needle: &str) {
        poll_until(
            || self.log_text().contains(needle),
            || {
                format!(
                    "the runner did not log `{needle}` within {DEADLINE:?}; log:\n{}",
                    self.log_text()
                )
            },
        )
        .await;
    }

    /// Sends `signal` to the runner.
    pub fn signal(&self, signal: Signal) {
        let child = self.child.as_ref().expect("the runner is running");
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        kill(pid, signal).expect("signal the runner");
    }

    /// Waits for the runner to exit, within the deadline; its exit code (`None`: killed).
    pub async fn wait_exit(&mut self) -> Option<i32> {
        let mut child = self.child.take().expect("the runner is running");
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("wait for the runner") {
                return status.code();
            }
            if started.elapsed() > DEADLINE {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the runner did not exit within {DEADLINE:?}; log:\n{}",
                    self.log_text()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
