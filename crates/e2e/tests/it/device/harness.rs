//! The device suite's harness: a workspace with a paired device, its connection placed on the
//! device, and the `switchyard-mcp-runner` binary as a subprocess — `switchyard-testkit`'s
//! setup, pairing and runner process with this suite's defaults, a failed step failing the test.

pub use crate::harness::Server;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use switchyard_protocol::api::{ConnectorSpec, SubmitCall};
use switchyard_protocol::{DeviceId, RequestId};
use switchyard_testkit::api::Api;
use switchyard_testkit::bins;
use switchyard_testkit::pairing;
use switchyard_testkit::poll::{Bound, Check};
use switchyard_testkit::runner::RunnerProcess;
use switchyard_testkit::setup;

/// How long a process may take to start, a call to settle or a log line to appear.
pub const DEADLINE: Duration = Duration::from_secs(60);
/// The workspace every end-to-end test works in.
pub const WORKSPACE: &str = "demo";

/// A fresh, empty directory for one test's files, kept after it.
#[track_caller]
pub fn scratch(test: &str) -> PathBuf {
    crate::harness::scratch("device", test)
}

/// The fixture MCP server over stdio, its stdin copied (appended) to `stdin_copy` so a test can
/// count the requests it received, with `env` declared for credential bindings.
pub fn fixture_spec(stdin_copy: &Path, env: &[&str]) -> ConnectorSpec {
    let fixture = crate::harness::binary(bins::FIXTURE);
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
/// given connector) placed on the device and accepted by its owner alice, in profile `dev` on
/// which alice holds Use.
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
        setup::workspace(&api, WORKSPACE)
            .await
            .expect("create the workspace");
        setup::approved_connector(&api, "fixture", spec)
            .await
            .expect("add the connector");
        // The profile the device is bound to (it submits nothing in these tests).
        setup::profile(&api, WORKSPACE, "main", &[], "alice")
            .await
            .expect("create profile main");
        let paired = pairing::pair(&api, WORKSPACE, "test-box", "main")
            .await
            .expect("pair the device");
        let connection =
            setup::connection(&api, WORKSPACE, "dfx", "fixture", Some(paired.device_id))
                .await
                .expect("create the device connection");
        let connection_id = connection["id"].as_str().expect("connection id").to_owned();
        setup::accept_placement(&api, WORKSPACE, paired.device_id, "dfx")
            .await
            .expect("accept the placement as the device's owner");
        setup::profile(&api, WORKSPACE, "dev", &["dfx"], "alice")
            .await
            .expect("create profile dev");

        let config_dir = dir.join("config");
        pairing::save_identity(&config_dir, server.url(), &paired)
            .expect("save the device identity");
        Paired {
            api,
            server_url: server.url().to_owned(),
            device_id: paired.device_id,
            credential: paired.credential,
            connection_id,
            config_dir,
            dir,
        }
    }

    /// Has the device's runner — running, or starting within the discovery's wait — discover
    /// `dfx`, and classifies its tools low risk, as the workspace's admin does before calls
    /// are made: a device tool is called only once its runner listed it and it is classified.
    pub async fn discover_classified(&self) {
        setup::discover_classified(&self.api, WORKSPACE, "dfx")
            .await
            .expect("discover dfx on the device and classify its tools");
    }

    /// [`Paired::discover_classified`] through a runner of its own (outbox
    /// `outbox-discovery`), stopped by SIGTERM, which releases the lease, once done: for a test
    /// that plays the runner's part itself or starts its runner only after submitting.
    pub async fn discover_with_a_runner_of_its_own(&self) {
        let mut runner = self.runner(&self.dir.join("outbox-discovery"), "discovery.log", &[]);
        runner.wait_for_log("lease epoch").await;
        self.discover_classified().await;
        runner.signal(nix::sys::signal::Signal::SIGTERM);
        assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
    }

    /// Has the device's runner reach the server at `url` (a proxy in front of it) from now on.
    pub fn reach_through(&self, url: &str) {
        pairing::move_identity(&self.config_dir, url).expect("move the device identity");
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
            .await
            .expect("submit the call");
        call["id"].as_str().expect("call id").to_owned()
    }

    /// The call as alice reads it.
    pub async fn call(&self, call: &str) -> Value {
        self.api
            .get(&format!("/workspaces/demo/calls/{call}"))
            .await
            .expect("read the call")
    }

    /// Polls the call until its state is `state`, within the deadline; returns it.
    pub async fn wait_for_state(&self, call: &str, state: &str) -> Value {
        Bound::new(DEADLINE, Duration::from_millis(100))
            .until(async || {
                let view = self.call(call).await;
                Ok(if view["state"] == state {
                    Check::Done(view)
                } else {
                    Check::NotYet(format!("call {call} did not become {state}: {view}"))
                })
            })
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Polls `done` every 50 ms until it holds; fails with `failure` once the deadline passed.
pub async fn poll_until(done: impl FnMut() -> bool, failure: impl Fn() -> String) {
    if Bound::new(DEADLINE, Duration::from_millis(50))
        .until_true("the condition", done)
        .await
        .is_err()
    {
        panic!("{}", failure());
    }
}

/// A `switchyard-mcp-runner` process, stderr in a log file; killed if dropped running.
pub struct Runner {
    process: RunnerProcess,
}

impl Runner {
    /// Starts the runner for the identities in `config_dir` with outbox `outbox`, logging to
    /// `log` at level info, with a clean environment plus `env`.
    pub fn start(config_dir: &Path, outbox: &Path, log: &Path, env: &[(&str, &str)]) -> Runner {
        let mut all = vec![("SWITCHYARD_LOG", "info")];
        all.extend_from_slice(env);
        let binary = crate::harness::binary(bins::RUNNER);
        let process = RunnerProcess::start(&binary, outbox, config_dir, log, &all)
            .expect("start switchyard-mcp-runner");
        Runner { process }
    }

    /// The runner's stderr so far.
    pub fn log_text(&self) -> String {
        self.process.log_text()
    }

    /// Waits until the log contains `needle`, within the deadline.
    pub async fn wait_for_log(&mut self, needle: &str) {
        self.process
            .wait_for_log(needle, 1, DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// The runner's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Sends `signal` to the runner.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        self.process.signal(signal).expect("signal the runner");
    }

    /// Waits for the runner to exit, within the deadline; its exit code (`None`: killed).
    pub async fn wait_exit(&mut self) -> Option<i32> {
        self.process
            .wait_exit(DEADLINE)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }
}
