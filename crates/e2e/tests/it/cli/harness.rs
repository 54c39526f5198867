//! The `switchyard` binary as a subprocess, pointed at a real server, and the demo workspace
//! set up through it.

pub use crate::harness::Server;
use crate::harness::binary;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use switchyard_testkit::bins;
use switchyard_testkit::oauth_server::OAuthServer;
use switchyard_testkit::poll::{Bound, Check};

/// How long one CLI run may take to finish.
const DEADLINE: Duration = Duration::from_secs(60);

/// A fresh directory for one test's files, kept after it.
#[track_caller]
pub fn scratch_dir(test: &str) -> PathBuf {
    crate::harness::scratch("cli", test)
}

/// The fixture MCP server binary.
pub fn fixture_binary() -> String {
    binary(bins::FIXTURE).display().to_string()
}

impl Server {
    /// `switchyard` pointed at this server, as alice.
    pub fn cli(&self) -> Switchyard {
        Switchyard::new(self.url(), Some(self.token()))
    }
}

/// How to run the `switchyard` binary: server URL, token and where device identities live.
///
/// Runs are hermetic: the configuration directory is always set (by default to one that does
/// not exist), device credentials go to files (`SWITCHYARD_DEVICE_KEYRING=off`) and no device
/// profile is inherited from the test's environment.
#[derive(Clone)]
pub struct Switchyard {
    url: Option<String>,
    token: Option<String>,
    config_dir: PathBuf,
}

impl Switchyard {
    /// A CLI for `url` with `token` (`None`: no SWITCHYARD_TOKEN at all).
    pub fn new(url: &str, token: Option<&str>) -> Switchyard {
        Switchyard {
            url: Some(url.to_owned()),
            token: token.map(str::to_owned),
            config_dir: Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join("cli")
                .join("no-config"),
        }
    }

    /// The same CLI with another token, or none.
    pub fn with_token(&self, token: Option<&str>) -> Switchyard {
        Switchyard {
            token: token.map(str::to_owned),
            ..self.clone()
        }
    }

    /// The same CLI with another SWITCHYARD_URL, or none.
    pub fn with_url(&self, url: Option<&str>) -> Switchyard {
        Switchyard {
            url: url.map(str::to_owned),
            ..self.clone()
        }
    }

    /// The same CLI without a token, using the device identities under `config_dir`.
    pub fn as_device(&self, config_dir: &Path) -> Switchyard {
        Switchyard {
            token: None,
            config_dir: config_dir.to_owned(),
            ..self.clone()
        }
    }

    /// `switchyard ARGS` set up with this CLI's environment, stdio piped, not started.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(binary(bins::CLI));
        command
            .args(args)
            .env_remove("SWITCHYARD_URL")
            .env_remove("SWITCHYARD_TOKEN")
            .env_remove("SWITCHYARD_DEVICE_PROFILE")
            .env("SWITCHYARD_CONFIG_DIR", &self.config_dir)
            .env("SWITCHYARD_DEVICE_KEYRING", "off")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(url) = &self.url {
            command.env("SWITCHYARD_URL", url);
        }
        if let Some(token) = &self.token {
            command.env("SWITCHYARD_TOKEN", token);
        }
        command
    }

    /// Runs `switchyard ARGS` with empty stdin.
    #[track_caller]
    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with_stdin(args, b"")
    }

    /// Runs `switchyard ARGS` with `stdin` as standard input, within the deadline.
    #[track_caller]
    pub fn run_with_stdin(&self, args: &[&str], stdin: &[u8]) -> Run {
        let mut child = self.command(args).spawn().expect("spawn switchyard");
        let mut input = child.stdin.take().expect("stdin");
        let stdin = stdin.to_vec();
        // Write from a thread: a child that does not read stdin must not block the test.
        std::thread::spawn(move || {
            let _ = input.write_all(&stdin);
        });
        let stdout = drain(child.stdout.take().expect("stdout"));
        let stderr = drain(child.stderr.take().expect("stderr"));
        let code = wait_within_deadline(&mut child, args);
        Run {
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            code,
            stdout: stdout.recv().unwrap_or_default(),
            stderr: stderr.recv().unwrap_or_default(),
        }
    }

    /// Starts `switchyard ARGS` in the background, reading its stdout line by line.
    #[track_caller]
    pub fn start(&self, args: &[&str]) -> Running {
        let mut child = self.command(args).spawn().expect("spawn switchyard");
        drop(child.stdin.take());
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = drain(child.stderr.take().expect("stderr"));
        Running {
            child: Some(child),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            lines,
            seen: Vec::new(),
            stderr,
        }
    }
}

/// A `switchyard` process started with [`Switchyard::start`]; killed if dropped unfinished.
pub struct Running {
    child: Option<Child>,
    args: Vec<String>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: mpsc::Receiver<String>,
}

impl Running {
    /// The process id, e.g. to signal it.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).expect("still running")
    }

    /// The next stdout line, within the deadline.
    #[track_caller]
    pub fn next_line(&mut self) -> String {
        match self.lines.recv_timeout(DEADLINE) {
            Ok(line) => {
                self.seen.push(line.clone());
                line
            }
            Err(_) => panic!(
                "switchyard {:?} printed no further line within {DEADLINE:?}; so far: {:?}",
                self.args, self.seen
            ),
        }
    }

    /// Waits for the process to end (within the deadline); the run's stdout holds every line
    /// it printed, including those already read.
    #[track_caller]
    pub fn finish(mut self) -> Run {
        let mut child = self.child.take().expect("not finished yet");
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let code = wait_within_deadline(&mut child, &args);
        // The pipe is closed now, so the reader thread ends and the channel drains.
        self.seen.extend(self.lines.iter());
        Run {
            args: self.args.clone(),
            code,
            stdout: self.seen.join("\n"),
            stderr: self.stderr.recv().unwrap_or_default(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits for `child` to exit within the deadline (killing it and failing the test if not);
/// returns its exit code (`None` if a signal ended it).
#[track_caller]
fn wait_within_deadline(child: &mut Child, args: &[&str]) -> Option<i32> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for switchyard") {
            return status.code();
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("switchyard {args:?} did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads a pipe to the end on a thread.
fn drain(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    rx
}

/// One finished `switchyard` run.
#[derive(Debug)]
pub struct Run {
    /// The arguments, for failure messages.
    pub args: Vec<String>,
    /// Exit code (`None` if killed by a signal).
    pub code: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Run {
    /// Asserts exit code 0.
    #[track_caller]
    pub fn success(self) -> Run {
        self.code(0)
    }

    /// Asserts the exit code.
    #[track_caller]
    pub fn code(self, expected: i32) -> Run {
        assert_eq!(
            self.code,
            Some(expected),
            "switchyard {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.args,
            self.stdout,
            self.stderr
        );
        self
    }

    /// Stdout parsed as JSON.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|err| {
            panic!(
                "stdout of {:?} is not JSON ({err}):\n{}",
                self.args, self.stdout
            )
        })
    }
}

/// Polls `mcp status --json WS CALL` until `done` holds for the call, within `deadline`;
/// returns that call.
pub async fn wait_for_call(
    cli: &Switchyard,
    workspace: &str,
    call: &str,
    deadline: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    Bound::new(deadline, Duration::from_millis(200))
        .until(async || {
            let view = cli
                .run(&["--json", "mcp", "status", workspace, call])
                .success()
                .json();
            Ok(if done(&view) {
                Check::Done(view)
            } else {
                Check::NotYet(format!(
                    "call {call} did not reach the expected state: {view}"
                ))
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A SubmitCall object with a fresh request_id.
pub fn submit_call(profile: &str, connection: &str, tool: &str, arguments: Value) -> Value {
    serde_json::json!({
        "request_id": uuid::Uuid::new_v4().to_string(),
        "profile_id": profile,
        "connection_id": connection,
        "tool_name": tool,
        "arguments": arguments,
        "timeout_seconds": 30,
    })
}

/// Runs `tool` on `demo` (profile `main`, connection `fx`) with `--wait --json`, expecting exit
/// `code`; returns the call.
#[track_caller]
pub fn call_and_wait(cli: &Switchyard, tool: &str, arguments: Value, code: i32) -> Value {
    let call = submit_call("main", "fx", tool, arguments);
    cli.run_with_stdin(
        &["--json", "mcp", "call", "demo", "-", "--wait"],
        call.to_string().as_bytes(),
    )
    .code(code)
    .json()
}

/// The tour's setup, asserted step by step: workspace `demo`, an approved stdio connector
/// `fixture`, connection `fx` with its tools discovered and classified, profile `main` on which alice holds Use.
#[track_caller]
pub fn set_up_demo(cli: &Switchyard) {
    set_up_demo_with(cli, &[]);
}

/// Classifies every tool of `connection` with `switchyard tool classify`, as an admin would
/// after discovery: read-only and low where the server hints read-only, else side-effecting
/// and low (what the default approval policy runs without asking).
#[track_caller]
pub fn classify_all(cli: &Switchyard, workspace: &str, connection: &str) {
    let listed = cli
        .run(&["--json", "tool", "list", workspace, connection])
        .success()
        .json();
    for tool in listed.as_array().expect("a catalog") {
        let name = tool["name"].as_str().expect("a name");
        let effect = if tool["hints"]["readOnlyHint"] == true {
            "--read-only"
        } else {
            "--side-effect"
        };
        let run = cli
            .run(&[
                "tool", "classify", workspace, connection, name, "--risk", "low", effect,
            ])
            .success();
        assert!(run.stdout.contains("classified"), "{}", run.stdout);
    }
}

/// [`set_up_demo`] with the fixture started with `fixture_args` after `stdio` (e.g.
/// `--count-file PATH`).
#[track_caller]
pub fn set_up_demo_with(cli: &Switchyard, fixture_args: &[&str]) {
    let fixture = fixture_binary();
    let run = cli.run(&["workspace", "create", "demo"]).success();
    assert!(
        run.stdout.contains("created workspace demo"),
        "{}",
        run.stdout
    );

    let mut add = vec![
        "connector",
        "add",
        "fixture",
        "--stdio",
        "--",
        &fixture,
        "stdio",
    ];
    add.extend_from_slice(fixture_args);
    let run = cli.run(&add).success();
    assert!(run.stdout.contains("not approved yet"), "{}", run.stdout);
    let run = cli.run(&["connector", "approve", "fixture"]).success();
    assert!(
        run.stdout.contains("approved connector fixture"),
        "{}",
        run.stdout
    );

    let run = cli
        .run(&[
            "connection",
            "create",
            "demo",
            "fx",
            "--connector",
            "fixture",
        ])
        .success();
    assert!(run.stdout.contains("on runner central"), "{}", run.stdout);
    let run = cli.run(&["connection", "discover", "demo", "fx"]).success();
    let tools: Vec<&str> = run.stdout.lines().collect();
    assert!(
        tools.contains(&"echo") && tools.contains(&"fail"),
        "discovered: {tools:?}"
    );
    classify_all(cli, "demo", "fx");

    cli.run(&["profile", "create", "demo", "main", "--connection", "fx"])
        .success();
    let run = cli
        .run(&[
            "profile", "grant", "demo", "main", "--user", "alice", "--use",
        ])
        .success();
    let alice_use = run.stdout.lines().find_map(|l| {
        let cells: Vec<&str> = l.split_whitespace().collect();
        (cells.first() == Some(&"alice")).then(|| cells.get(1).copied())
    });
    assert_eq!(alice_use, Some(Some("yes")), "{}", run.stdout);
}

/// The fixture MCP server over streamable HTTP on a free loopback port; killed when dropped.
pub struct HttpFixture {
    /// Its MCP endpoint.
    pub url: String,
    child: Child,
}

impl HttpFixture {
    /// Started with `args` after `http --listen 127.0.0.1:0`, and `env` added.
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> HttpFixture {
        let mut child = Command::new(fixture_binary())
            .args(["http", "--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the HTTP fixture");
        let stdout = child.stdout.take().expect("piped stdout");
        let line = BufReader::new(stdout)
            .lines()
            .next()
            .expect("the fixture announces its address")
            .expect("read the fixture's stdout");
        let url = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected announcement {line:?}"))
            .to_owned();
        HttpFixture { url, child }
    }

    /// Started as a resource server of `auth`: it takes only tokens `auth` issued, checked by
    /// introspection with `auth`'s resource-server client.
    pub fn protected_by(auth: &OAuthServer) -> HttpFixture {
        let (id, secret) = auth.resource_server();
        let introspection = format!("{id}:{secret}");
        HttpFixture::start(
            &[
                "--oauth-issuer",
                auth.issuer(),
                "--oauth-client-env",
                "FIXTURE_INTROSPECTION_CLIENT",
            ],
            &[("FIXTURE_INTROSPECTION_CLIENT", &introspection)],
        )
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
