//! `switchyard credential set|rotate|list` end to end: the real CLI storing values for a
//! connection placed on this machine's device, the real device runner using them, the real
//! kernel keyring and files — and a canary value that must show up nowhere else.

use super::harness::{DEADLINE, Paired, Server, WORKSPACE, scratch};
use serde_json::{Value, json};
use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use switchyard_protocol::api::ConnectorSpec;
use switchyard_testkit::bins;
use switchyard_testkit::poll::{Bound, Check};
use switchyard_testkit::setup;

/// A stdio connector declaring `API_TOKEN`: a shell that appends the value it was started with
/// to `seen` (one line per session), then becomes the fixture MCP server.
fn recording_spec(seen: &Path) -> ConnectorSpec {
    let fixture = crate::harness::binary(bins::FIXTURE);
    ConnectorSpec::Stdio {
        command: "sh".to_owned(),
        args: vec![
            "-c".to_owned(),
            r#"printf '%s\n' "$API_TOKEN" >> "$1"; exec "$2" stdio"#.to_owned(),
            "sh".to_owned(),
            seen.display().to_string(),
            fixture.display().to_string(),
        ],
        env: vec!["API_TOKEN".to_owned()],
    }
}

/// `switchyard ARGS` as alice on a machine whose device identities are under `config_dir`.
pub(super) fn cli(server: &Server, config_dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(crate::harness::binary(bins::CLI));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .env("SWITCHYARD_URL", server.url())
        .env("SWITCHYARD_TOKEN", server.token())
        .env("SWITCHYARD_CONFIG_DIR", config_dir)
        .env("SWITCHYARD_DEVICE_KEYRING", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Runs `switchyard ARGS` with `value` on stdin. While it runs, before the value is written,
/// checks that no process's command line holds `value`.
#[track_caller]
pub(super) fn run_with_value(
    server: &Server,
    config_dir: &Path,
    args: &[&str],
    value: &str,
) -> Output {
    let mut child = cli(server, config_dir, args)
        .spawn()
        .expect("spawn switchyard");
    assert_in_no_argv(value);
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(value.as_bytes()).expect("write the value");
    drop(stdin);
    assert_in_no_argv(value);
    child.wait_with_output().expect("wait for switchyard")
}

#[track_caller]
pub(super) fn succeeded(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {stdout}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Fails if any process's command line (`/proc/*/cmdline`) holds `value`.
#[track_caller]
pub(super) fn assert_in_no_argv(value: &str) {
    let entries = std::fs::read_dir("/proc").expect("list /proc");
    for entry in entries.flatten() {
        // Processes come and go while the directory is read: a vanished one has no argv.
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        assert!(
            !String::from_utf8_lossy(&cmdline).contains(value),
            "the value is in the command line of {}",
            entry.path().display()
        );
    }
}

/// The permission bits and owner of `path`.
fn mode_and_owner(path: &Path) -> (u32, u32) {
    let metadata = std::fs::metadata(path).expect("stat");
    (metadata.mode() & 0o7777, metadata.uid())
}

/// Where `credential set` keeps the default profile's files.
fn credential_files(paired: &Paired) -> (PathBuf, PathBuf) {
    let dir = paired.config_dir.join("credentials");
    (
        dir.join("default.mcp-bindings.json"),
        dir.join("default.mcp-secrets.json"),
    )
}

/// The values the session starts recorded in `seen`, in order.
fn seen_values(seen: &Path) -> Vec<String> {
    std::fs::read_to_string(seen)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A keyring entry (service `switchyard-mcp`) deleted when dropped, so a test leaves the
/// user's keyring as it found it.
struct KeyringCleanup(keyring_core::Entry);

impl KeyringCleanup {
    fn new(account: &str) -> Self {
        use linux_keyutils::{KeyRing, KeyRingIdentifier};
        KeyRing::from_special_id(KeyRingIdentifier::Session, true).expect("join a session keyring");
        let store: std::sync::Arc<keyring_core::CredentialStore> =
            linux_keyutils_keyring_store::Store::new().expect("keyutils store");
        let entry = keyring_core::Entry::new_in_store(
            &store,
            switchyard_mcp_runner::credentials::KEYRING_SERVICE,
            account,
        )
        .expect("keyring entry");
        Self(entry)
    }

    /// The entry's value, if any.
    fn value(&self) -> Option<String> {
        self.0.get_password().ok()
    }
}

impl Drop for KeyringCleanup {
    fn drop(&mut self) {
        let _ = self.0.delete_credential();
    }
}

/// Every row of the test database as `pg_dump --data-only` writes it.
fn dump_database(db: &PgConnectOptions) -> String {
    let url = db.to_url_lossy().to_string();
    // sqlx's own parameters (e.g. `statement-cache-capacity`) mean nothing to libpq.
    let url = url.split('?').next().unwrap_or_default();
    let output = Command::new("pg_dump")
        .args(["--data-only", "--no-owner", url])
        .output()
        .expect("run pg_dump");
    assert!(
        output.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("a text dump")
}

/// The connection's events as alice reads them.
async fn events(paired: &Paired) -> Vec<Value> {
    let list = paired
        .api
        .get("/workspaces/demo/connections/dfx/events")
        .await
        .expect("read the connection's events");
    list.as_array().cloned().unwrap_or_default()
}

#[sqlx::test(migrations = false)]
async fn a_value_set_from_a_prompt_less_stdin_is_used_by_the_device_runner_and_rotate_drains_the_old_session(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let seen = scratch("credential-rotate-seen").join("seen");
    let paired = Paired::set_up(&server, "credential-rotate", recording_spec(&seen)).await;
    let first = format!("canary-first-{}", uuid::Uuid::new_v4().simple());
    let second = format!("canary-second-{}", uuid::Uuid::new_v4().simple());
    let keyring = KeyringCleanup::new(&format!("{}/API_TOKEN", paired.connection_id));

    // Set (the OS keyring is the default store); the shell's trailing newline is not kept.
    let set = run_with_value(
        &server,
        &paired.config_dir,
        &["--json", "credential", "set", "demo", "dfx", "API_TOKEN"],
        &format!("{first}\n"),
    );
    let stored: Value = serde_json::from_str(&succeeded(&set)).expect("JSON answer");
    assert_eq!(stored["provider"], "os_store", "{stored}");
    assert_eq!(stored["destination"], "env", "{stored}");
    assert_eq!(keyring.value().as_deref(), Some(first.as_str()));

    let listed = cli(
        &server,
        &paired.config_dir,
        &["--json", "credential", "list", "demo", "dfx"],
    )
    .output()
    .expect("run credential list");
    let listed: Value = serde_json::from_str(&succeeded(&listed)).expect("JSON answer");
    assert_eq!(
        listed["credentials"],
        json!([{
            "destination": "env",
            "name": "API_TOKEN",
            "provider": "os_store",
            "location": format!("{}/API_TOKEN", paired.connection_id),
            "prefix": null,
            "state": "present",
        }]),
        "{listed}"
    );

    // The runner reads the profile's bindings file without being told where it is.
    let outbox = paired.dir.join("outbox");
    let mut runner = paired.runner(&outbox, "runner.log", &[]);
    runner.wait_for_log("lease epoch").await;
    paired.discover_classified().await;
    let call = paired
        .submit("env", json!({ "name": "API_TOKEN" }), 30)
        .await;
    let view = paired.wait_for_state(&call, "succeeded").await;
    assert_eq!(view["result"]["content"][0]["text"], "[REDACTED]", "{view}");
    assert!(
        seen_values(&seen).iter().all(|value| *value == first),
        "sessions before the rotation saw another value"
    );
    // The warm session's server holds the value in its environment, not in its argv.
    assert_in_no_argv(&first);

    let rotate = run_with_value(
        &server,
        &paired.config_dir,
        &["credential", "rotate", "demo", "dfx", "API_TOKEN"],
        &second,
    );
    let said = succeeded(&rotate);
    assert!(
        said.contains("warm sessions holding the old value drain"),
        "{said}"
    );
    assert_eq!(keyring.value().as_deref(), Some(second.as_str()));

    let sessions_before = seen_values(&seen).len();
    let call = paired
        .submit("env", json!({ "name": "API_TOKEN" }), 30)
        .await;
    let view = paired.wait_for_state(&call, "succeeded").await;
    assert_eq!(view["result"]["content"][0]["text"], "[REDACTED]", "{view}");
    let seen_now = seen_values(&seen);
    assert_eq!(
        &seen_now[sessions_before..],
        std::slice::from_ref(&second),
        "the call after the rotation did not open one new session with the new value"
    );
    // The session that held the old value drained: closed for `credential_changed`.
    Bound::new(DEADLINE, Duration::from_millis(100))
        .until(async || {
            let events = events(&paired).await;
            Ok(
                if events.iter().any(|event| {
                    event["kind"] == "session_closed"
                        && event["detail"]["reason"] == "credential_changed"
                }) {
                    Check::Done(())
                } else {
                    Check::NotYet(format!(
                        "no session closed for credential_changed: {events:?}"
                    ))
                },
            )
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    runner.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
    for value in [&first, &second] {
        for (what, text) in [
            ("the runner's log", runner.log_text()),
            ("the server's log", server.log_text()),
            ("the set command's output", format!("{set:?}")),
            ("the rotate command's output", format!("{rotate:?}")),
            ("the call as alice reads it", view.to_string()),
            (
                "the connection's events",
                format!("{:?}", events(&paired).await),
            ),
            ("the database", dump_database(&db)),
        ] {
            assert!(!text.contains(value.as_str()), "{what} holds the value");
        }
    }
}

#[sqlx::test(migrations = false)]
async fn the_secrets_file_is_private_and_whole_after_a_kill_at_any_moment_of_a_set(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let seen = scratch("credential-kill-seen").join("seen");
    let paired = Paired::set_up(&server, "credential-kill", recording_spec(&seen)).await;
    let (bindings, secrets) = credential_files(&paired);
    let key = format!("{}/API_TOKEN", paired.connection_id);
    let set_args = [
        "credential",
        "set",
        "demo",
        "dfx",
        "API_TOKEN",
        "--store",
        "file",
    ];

    let first = "canary-kill-0000";
    let started = Instant::now();
    succeeded(&run_with_value(
        &server,
        &paired.config_dir,
        &set_args,
        first,
    ));
    let one_run = started.elapsed();
    let me = nix::unistd::geteuid().as_raw();
    assert_eq!(mode_and_owner(&bindings), (0o600, me));
    assert_eq!(mode_and_owner(&secrets), (0o600, me));
    assert_eq!(
        mode_and_owner(&paired.config_dir.join("credentials")),
        (0o700, me)
    );

    // Kill `credential set` at moments spread over the second half of a run, where the files
    // are written; each time both files are the old one or the new one, whole.
    let mut written = vec![first.to_owned()];
    const KILLS: u32 = 24;
    for attempt in 1..=KILLS {
        let value = format!("canary-kill-{attempt:04}");
        let mut child = cli(&server, &paired.config_dir, &set_args)
            .spawn()
            .expect("spawn switchyard");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(value.as_bytes()).expect("write the value");
        drop(stdin);
        written.push(value);
        // The moment to kill at, not a wait for anything.
        std::thread::sleep(one_run / 2 + one_run * attempt / (2 * KILLS));
        let _ = child.kill();
        let _ = child.wait();

        let text = std::fs::read_to_string(&secrets).expect("read the secrets file");
        let values: serde_json::Map<String, Value> =
            serde_json::from_str(&text).expect("the secrets file is whole");
        let stored = values[&key].as_str().expect("a string value");
        assert!(
            written.iter().any(|value| value == stored),
            "the secrets file holds a value never written"
        );
        let bound: Value = serde_json::from_str(
            &std::fs::read_to_string(&bindings).expect("read the bindings file"),
        )
        .expect("the bindings file is whole");
        assert_eq!(
            bound["bindings"][&paired.connection_id]["env"]["API_TOKEN"],
            json!({"provider": "secrets_file", "key": key}),
            "{bound}"
        );
        assert_eq!(mode_and_owner(&secrets), (0o600, me));
        assert_eq!(mode_and_owner(&bindings), (0o600, me));
    }

    // The next write succeeds and wins, and clears what killed writers left behind.
    let last = "canary-kill-final";
    succeeded(&run_with_value(
        &server,
        &paired.config_dir,
        &set_args,
        last,
    ));
    let values: Value =
        serde_json::from_str(&std::fs::read_to_string(&secrets).expect("read")).expect("JSON");
    assert_eq!(values[&key], last);
    let mut left: Vec<String> = std::fs::read_dir(paired.config_dir.join("credentials"))
        .expect("list the credentials directory")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["default.mcp-bindings.json", "default.mcp-secrets.json"]
    );

    // Bad values and destinations are refused with their code, and nothing changes.
    let before = (
        std::fs::read(&bindings).expect("read"),
        std::fs::read(&secrets).expect("read"),
    );
    for (args, value, code) in [
        (&set_args[..], "zq9", "credential_invalid"),
        (&set_args[..], "with\0nul", "credential_invalid"),
        (
            &[
                "credential",
                "set",
                "demo",
                "dfx",
                "OTHER",
                "--store",
                "file",
            ][..],
            "long-enough",
            "credential_config_invalid",
        ),
    ] {
        let output = run_with_value(&server, &paired.config_dir, args, value);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&format!("error[{code}]")), "{stderr}");
        assert!(
            !stderr.contains(value),
            "the error shows the value: {stderr}"
        );
    }
    assert_eq!(
        (
            std::fs::read(&bindings).expect("read"),
            std::fs::read(&secrets).expect("read"),
        ),
        before
    );
    assert!(
        !server.log_text().contains("canary-kill"),
        "the server logged a value"
    );
    assert!(
        !dump_database(&db).contains("canary-kill"),
        "the database holds a value"
    );
}

#[sqlx::test(migrations = false)]
async fn a_value_typed_at_the_prompt_is_not_echoed(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let seen = scratch("credential-prompt-seen").join("seen");
    let paired = Paired::set_up(&server, "credential-prompt", recording_spec(&seen)).await;
    let value = "canary-typed-4d1e";
    let cli_binary = crate::harness::binary(bins::CLI);
    // `script` gives the CLI a terminal; its output is what the terminal showed.
    let shown_command = format!(
        "{} credential set demo dfx API_TOKEN --store file",
        cli_binary.display()
    );
    let base = cli(&server, &paired.config_dir, &[]);
    let mut terminal = Command::new("script");
    terminal
        .args(["-q", "-e", "-c", &shown_command, "/dev/null"])
        .env_clear()
        .envs(base.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = terminal.spawn().expect("spawn script");
    let mut stdout = child.stdout.take().expect("stdout");
    let (tx, shown) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut buffer = [0u8; 512];
        while let Ok(read) = stdout.read(&mut buffer) {
            if read == 0 || tx.send(buffer[..read].to_vec()).is_err() {
                break;
            }
        }
    });
    // Type the value only once the prompt is up (echo is off from then on).
    let mut transcript = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    while !String::from_utf8_lossy(&transcript).contains("value for API_TOKEN") {
        let left = deadline.saturating_duration_since(Instant::now());
        let chunk = shown
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no prompt: {}", String::from_utf8_lossy(&transcript)));
        transcript.extend(chunk);
    }
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{value}\n").as_bytes())
        .expect("type the value");
    drop(stdin);
    let status = child.wait().expect("wait for script");
    while let Ok(chunk) = shown.recv_timeout(Duration::from_secs(5)) {
        transcript.extend(chunk);
    }
    let transcript = String::from_utf8_lossy(&transcript).into_owned();
    assert!(status.success(), "{transcript}");
    assert!(transcript.contains("value stored in"), "{transcript}");
    assert!(
        !transcript.contains(value),
        "the terminal showed the value: {transcript}"
    );
    let (_, secrets) = credential_files(&paired);
    let values: Value =
        serde_json::from_str(&std::fs::read_to_string(&secrets).expect("read")).expect("JSON");
    assert_eq!(values[format!("{}/API_TOKEN", paired.connection_id)], value);
}

#[sqlx::test(migrations = false)]
async fn the_server_takes_a_central_value_from_the_cli_sealed_and_its_calls_use_it(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let dir = scratch("credential-central");
    let key = dir.join("installation.key");
    let key_path = key.display().to_string();
    let server = Server::start_with_env(
        &db,
        &[("SWITCHYARD_INSTALLATION_KEY_FILE", key_path.as_str())],
    )
    .await;
    let api = server.api();
    setup::workspace(&api, WORKSPACE).await.expect("workspace");
    setup::approved_connector(&api, "recording", recording_spec(&dir.join("seen")))
        .await
        .expect("connector");
    setup::connection(&api, WORKSPACE, "central", "recording", None)
        .await
        .expect("central connection");
    let value = "canary-central-cli-93ad";
    let no_device = dir.join("no-config");
    let set = run_with_value(
        &server,
        &no_device,
        &["credential", "set", WORKSPACE, "central", "API_TOKEN"],
        &format!("{value}\n"),
    );
    let said = succeeded(&set);
    assert!(said.contains("sealed with its installation key"), "{said}");
    let me = nix::unistd::geteuid().as_raw();
    assert_eq!(mode_and_owner(&key), (0o600, me));

    // `credential list` shows the server's view: kept by the server, present.
    let listed = cli(
        &server,
        &no_device,
        &["credential", "list", WORKSPACE, "central"],
    )
    .output()
    .expect("run credential list");
    let listed = succeeded(&listed);
    let row = listed
        .lines()
        .find(|line| line.contains("API_TOKEN"))
        .unwrap_or_else(|| panic!("no API_TOKEN row: {listed}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[0], "env", "{listed}");
    assert_eq!(cells[2], "installation", "{listed}");
    assert_eq!(cells[4], "present", "{listed}");

    setup::discover_classified(&api, WORKSPACE, "central")
        .await
        .expect("discover with the value");
    setup::profile(&api, WORKSPACE, "main", &["central"], "alice")
        .await
        .expect("profile");
    let call = api
        .post(
            "/workspaces/demo/calls",
            &json!({"request_id": uuid::Uuid::new_v4(), "profile_id": "main",
                    "connection_id": "central", "tool_name": "env",
                    "arguments": {"name": "API_TOKEN"}, "timeout_seconds": 30}),
        )
        .await
        .expect("submit");
    let id = call["id"].as_str().expect("call id").to_owned();
    let view = Bound::new(DEADLINE, Duration::from_millis(100))
        .until(async || {
            let view = api
                .get(&format!("/workspaces/demo/calls/{id}"))
                .await
                .expect("read the call");
            Ok(if view["state"] == "succeeded" {
                Check::Done(view)
            } else {
                Check::NotYet(format!("call did not succeed: {view}"))
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(view["result"]["content"][0]["text"], "[REDACTED]", "{view}");
    assert_eq!(
        seen_values(&dir.join("seen")).last().map(String::as_str),
        Some(value)
    );
    for (what, text) in [
        ("the server's log", server.log_text()),
        ("the command's output", format!("{set:?}")),
        ("the listing", listed.clone()),
        ("the call", view.to_string()),
        ("the database", dump_database(&db)),
    ] {
        assert!(!text.contains(value), "{what} holds the value");
    }
}
