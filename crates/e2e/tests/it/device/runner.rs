//! The `switchyard-mcp-runner` binary end to end: device calls with credentials and redaction,
//! a crash mid-call, receipts left by a crash, a second runner for the same device, shutdown,
//! revocation, and a proxy that keeps the runner channel from opening. (The local checks made
//! before anything is sent need no server: they are in `switchyard-mcp-runner`'s own tests.)

use super::harness::{DEADLINE, Paired, Server, fixture_spec, poll_until, scratch};
use super::proxy::PlainProxy;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Instant;
use switchyard_mcp_runner::outbox::{CAPACITY, Capacity, EntryState, Outbox};
use switchyard_protocol::CallId;
use switchyard_protocol::runner::{
    AcquireAnswer, AcquireLease, Completion, Epoch, LeaseAnswer, LeaseRequest, StartAnswer,
    StartRequest,
};

/// How many `tools/call` requests the fixture behind `stdin_copy` received.
fn tool_calls(stdin_copy: &Path) -> usize {
    std::fs::read_to_string(stdin_copy)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains("\"tools/call\""))
        .count()
}

/// Waits until the fixture behind `stdin_copy` has received `count` tool calls.
async fn wait_for_tool_calls(stdin_copy: &Path, count: usize) {
    poll_until(
        || tool_calls(stdin_copy) >= count,
        || format!("the MCP server did not receive {count} tool calls within {DEADLINE:?}"),
    )
    .await;
}

/// The text of a call's first result content.
fn result_text(call: &Value) -> &str {
    call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text result: {call}"))
}

/// Submits an `echo` of each text in turn, each once the one before succeeded with its text;
/// returns the calls.
async fn echo_in_turn(paired: &Paired, texts: &[&str]) -> Vec<String> {
    let mut calls = Vec::new();
    for text in texts {
        let call = paired.submit("echo", json!({ "text": text }), 30).await;
        let view = paired.wait_for_state(&call, "succeeded").await;
        assert_eq!(result_text(&view), *text);
        calls.push(call);
    }
    calls
}

/// Takes the device's lease under `outbox`'s holder id and leases `call` (the only one queued)
/// with the device API, as a runner process does before a test's crash; returns the epoch.
async fn lease_as_the_runner(paired: &Paired, outbox: &Outbox, call: CallId) -> Epoch {
    let device = paired.api.with_token(Some(&paired.credential));
    let acquired = device
        .post(
            "/runner/lease/acquire",
            &AcquireLease {
                holder: outbox.holder(),
            },
        )
        .await
        .expect("take the device's lease");
    let AcquireAnswer::Acquired { epoch, .. } =
        serde_json::from_value(acquired).expect("an acquire answer")
    else {
        panic!("the lease is held by someone else");
    };
    let leased = device
        .post(
            "/runner/lease",
            &LeaseRequest {
                epoch,
                max: 1,
                wait_ms: 5_000,
            },
        )
        .await
        .expect("lease the call");
    let leased: LeaseAnswer = serde_json::from_value(leased).expect("a lease answer");
    assert_eq!(leased.calls.len(), 1, "{leased:?}");
    assert_eq!(leased.calls[0].call_id, call);
    epoch
}

/// Every byte of every file in `dir`, as lossy text.
fn all_file_text(dir: &Path) -> String {
    std::fs::read_dir(dir)
        .expect("list the directory")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.is_file())
        .map(|path| String::from_utf8_lossy(&std::fs::read(&path).expect("read")).into_owned())
        .collect()
}

#[sqlx::test(migrations = false)]
async fn a_device_call_uses_a_credential_from_the_environment_and_its_result_is_redacted(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("redacted-mcp").join("stdin");
    let paired = Paired::set_up(&server, "redacted", fixture_spec(&copy, &["API_TOKEN"])).await;
    let bindings = paired.dir.join("device.mcp-bindings.json");
    let mut by_connection = serde_json::Map::new();
    by_connection.insert(
        paired.connection_id.clone(),
        json!({ "env": { "API_TOKEN": { "provider": "environment", "name": "DEVICE_TEST_SECRET" } } }),
    );
    let binding = json!({ "bindings": by_connection });
    std::fs::write(&bindings, binding.to_string()).expect("write the bindings");
    std::fs::set_permissions(&bindings, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let secret = "device-secret-7f3a9c";
    let outbox = paired.dir.join("outbox");
    let bindings_path = bindings.display().to_string();
    let mut runner = paired.runner(
        &outbox,
        "runner.log",
        &[
            ("SWITCHYARD_MCP_CREDENTIALS_FILE", bindings_path.as_str()),
            ("DEVICE_TEST_SECRET", secret),
        ],
    );
    runner.wait_for_log("lease epoch").await;
    paired.discover_classified().await;
    let status = runner.log_text();
    assert!(
        status.contains(&format!(
            "runner for device {} on {}: lease epoch",
            paired.device_id, paired.server_url
        )) && status.contains(&format!("outbox {}", outbox.display())),
        "{status}"
    );

    let call = paired
        .submit("env", json!({ "name": "API_TOKEN" }), 30)
        .await;
    let view = paired.wait_for_state(&call, "succeeded").await;

    assert_eq!(view["runner"], format!("device:{}", paired.device_id));
    assert_eq!(result_text(&view), "[REDACTED]", "{view}");
    assert!(!view.to_string().contains(secret), "{view}");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
    assert_eq!(crate::harness::mode(&outbox), 0o700);
    assert!(
        !all_file_text(&outbox).contains(secret),
        "the outbox holds the secret"
    );
    assert!(
        !runner.log_text().contains(secret),
        "the runner logged the secret"
    );
    assert!(
        !server.log_text().contains(secret),
        "the server logged the secret"
    );
    assert!(
        !runner.log_text().contains(&paired.credential),
        "the runner logged its device credential"
    );
}

/// A keyring entry (service `switchyard-mcp`) set by this test process, as an operator would set
/// it from their shell, and deleted when dropped.
struct KeyringEntry(keyring_core::Entry);

impl KeyringEntry {
    #[track_caller]
    fn set(account: &str, value: &str) -> Self {
        use linux_keyutils::{KeyRing, KeyRingIdentifier};
        // Like any process setting entries, this thread needs a session keyring of its own.
        KeyRing::from_special_id(KeyRingIdentifier::Session, true).expect("join a session keyring");
        let store: std::sync::Arc<keyring_core::CredentialStore> =
            linux_keyutils_keyring_store::Store::new().expect("keyutils store");
        let entry = keyring_core::Entry::new_in_store(
            &store,
            switchyard_mcp_runner::credentials::KEYRING_SERVICE,
            account,
        )
        .expect("keyring entry");
        entry.set_password(value).expect("set the keyring entry");
        Self(entry)
    }
}

impl Drop for KeyringEntry {
    fn drop(&mut self) {
        let _ = self.0.delete_credential();
    }
}

#[sqlx::test(migrations = false)]
async fn a_device_call_uses_a_credential_from_the_os_keyring(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("keyring-mcp").join("stdin");
    let paired = Paired::set_up(&server, "keyring", fixture_spec(&copy, &["API_TOKEN"])).await;
    let secret = "keyring-secret-51c0de9a";
    let account = format!("device-test-{}", paired.device_id);
    let _entry = KeyringEntry::set(&account, secret);
    let bindings = paired.dir.join("device.mcp-bindings.json");
    let mut by_connection = serde_json::Map::new();
    by_connection.insert(
        paired.connection_id.clone(),
        json!({ "env": { "API_TOKEN": { "provider": "os_store", "account": account } } }),
    );
    std::fs::write(&bindings, json!({ "bindings": by_connection }).to_string())
        .expect("write the bindings");
    std::fs::set_permissions(&bindings, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let outbox = paired.dir.join("outbox");
    let bindings_path = bindings.display().to_string();
    let mut runner = paired.runner(
        &outbox,
        "runner.log",
        &[("SWITCHYARD_MCP_CREDENTIALS_FILE", bindings_path.as_str())],
    );
    runner.wait_for_log("lease epoch").await;
    paired.discover_classified().await;

    let call = paired
        .submit("env", json!({ "name": "API_TOKEN" }), 30)
        .await;
    let view = paired.wait_for_state(&call, "succeeded").await;
    // The value reached the MCP server (it echoed it) and was redacted from what was kept.
    assert_eq!(result_text(&view), "[REDACTED]", "{view}");
    assert!(!view.to_string().contains(secret), "{view}");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
    assert!(
        !all_file_text(&outbox).contains(secret),
        "the outbox holds the secret"
    );
    assert!(
        !runner.log_text().contains(secret),
        "the runner logged the secret"
    );
}

/// The receipt is recorded in the outbox while it is uploaded: both sides end up with the same
/// receipt, applied by the server and acknowledged in the outbox (an acknowledgement names the
/// receipt id, so another id would have left the entry `recorded`).
#[sqlx::test(migrations = false)]
async fn a_completed_call_leaves_the_same_receipt_acknowledged_in_the_outbox_and_applied_on_the_server(
    pool: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("receipt-mcp").join("stdin");
    let paired = Paired::set_up(&server, "receipt", fixture_spec(&copy, &[])).await;
    let outbox_dir = paired.dir.join("outbox");
    let mut runner = paired.runner(&outbox_dir, "runner.log", &[]);
    paired.discover_classified().await;
    // One after the other, so that only a later start can prune an earlier entry. The third
    // receipt is longer than a runner channel line, so it is uploaded over plain HTTP.
    let mut calls = echo_in_turn(&paired, &["one", "two"]).await;
    let big = paired.submit("big", json!({ "bytes": 200_000 }), 30).await;
    let view = paired.wait_for_state(&big, "succeeded").await;
    assert_eq!(result_text(&view), "x".repeat(200_000));
    calls.push(big);
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());

    let outbox = Outbox::open(&outbox_dir, paired.device_id).expect("reopen the outbox");
    assert!(outbox.unacknowledged().expect("unacknowledged").is_empty());
    assert!(outbox.unfinished().expect("unfinished").is_empty());
    let database = pool.connect_with(db).await.expect("connect");
    for call in &calls {
        let call_id: CallId = call.parse().expect("call id");
        let state = outbox.entry_state(call_id).expect("entry state");
        // An earlier call's acknowledged entry may have been pruned by a later start.
        assert!(
            matches!(state, None | Some(EntryState::Acknowledged)),
            "{call}: {state:?}"
        );
        let receipts: Vec<(String, bool)> =
            sqlx::query_as("SELECT answer, applied FROM receipts WHERE call_id = $1")
                .bind(call_id.0)
                .fetch_all(&database)
                .await
                .expect("receipts");
        assert_eq!(receipts, vec![("recorded".to_owned(), true)], "{call}");
    }
    let last: CallId = calls[2].parse().expect("call id");
    assert_eq!(
        outbox.entry_state(last).expect("entry state"),
        Some(EntryState::Acknowledged)
    );
}

/// Through a proxy that drops `Upgrade` the server answers the channel's opening 400: the
/// runner remembers that its server has no channel and leases, starts and reports its calls as
/// plain HTTP requests. Each call runs once and succeeds.
#[sqlx::test(migrations = false)]
async fn behind_a_proxy_that_drops_upgrades_the_runner_works_over_plain_http(
    _pool: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("plain-http-mcp").join("stdin");
    let paired = Paired::set_up(&server, "plain-http", fixture_spec(&copy, &[])).await;
    let proxy = PlainProxy::start(server.url()).await;
    paired.reach_through(&proxy.url);
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &[]);
    paired.discover_classified().await;
    let calls = echo_in_turn(&paired, &["one", "two"]).await;
    assert_eq!(tool_calls(&copy), 2, "each call was sent once");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
    assert!(
        runner
            .log_text()
            .contains("the server did not open a runner channel"),
        "{}",
        runner.log_text()
    );

    let seen = proxy.seen();
    let count = |request: &str| seen.iter().filter(|seen| *seen == request).count();
    // Asked once, then remembered for the rest of the process.
    assert_eq!(count("GET /api/v1/runner/channel"), 1, "{seen:?}");
    assert!(count("POST /api/v1/runner/lease") >= 2, "{seen:?}");
    for call in &calls {
        for step in ["start", "complete"] {
            let request = format!("POST /api/v1/runner/calls/{call}/{step}");
            assert_eq!(count(&request), 1, "{request} in {seen:?}");
        }
    }
}

/// The state of `call`'s outbox entry, read beside the running runner (a WAL reader).
fn entry_state_beside(outbox_dir: &Path, call: &str) -> Option<String> {
    let db = rusqlite::Connection::open_with_flags(
        outbox_dir.join("outbox.sqlite3"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open the outbox to read");
    rusqlite::OptionalExtension::optional(db.query_row(
        "SELECT state FROM entries WHERE call_id = ?1",
        [call],
        |row| row.get(0),
    ))
    .expect("read the entry")
}

/// The last call's acknowledgement waits for a next start that does not come, and is then
/// recorded on its own: a runner killed afterwards has nothing to upload again.
#[sqlx::test(migrations = false)]
async fn an_acknowledgement_no_start_takes_is_recorded_on_its_own(
    pool: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("late-ack-mcp").join("stdin");
    let paired = Paired::set_up(&server, "late-ack", fixture_spec(&copy, &[])).await;
    let outbox_dir = paired.dir.join("outbox");
    let mut runner = paired.runner(&outbox_dir, "first.log", &[]);
    paired.discover_classified().await;
    let call = paired.submit("echo", json!({ "text": "once" }), 30).await;
    paired.wait_for_state(&call, "succeeded").await;

    poll_until(
        || entry_state_beside(&outbox_dir, &call).as_deref() == Some("acknowledged"),
        || {
            format!(
                "the acknowledgement was not recorded within {DEADLINE:?}: {:?}",
                entry_state_beside(&outbox_dir, &call)
            )
        },
    )
    .await;
    runner.signal(Signal::SIGKILL);
    assert_eq!(runner.wait_exit().await, None, "killed by the signal");

    let outbox = Outbox::open(&outbox_dir, paired.device_id).expect("reopen the outbox");
    assert!(outbox.unacknowledged().expect("unacknowledged").is_empty());
    drop(outbox);
    let mut again = paired.runner(&outbox_dir, "second.log", &[]);
    again.wait_for_log("uploaded=0").await;
    again.signal(Signal::SIGTERM);
    assert_eq!(again.wait_exit().await, Some(0), "{}", again.log_text());
    let database = pool.connect_with(db).await.expect("connect");
    let receipts: i64 = sqlx::query_scalar("SELECT count(*) FROM receipts WHERE call_id = $1")
        .bind(call.parse::<uuid::Uuid>().expect("call id"))
        .fetch_one(&database)
        .await
        .expect("receipts");
    assert_eq!(receipts, 1);
    assert_eq!(tool_calls(&copy), 1);
}

#[sqlx::test(migrations = false)]
async fn a_call_cut_off_by_sigkill_is_reported_unknown_and_never_sent_again(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("sigkill-mcp").join("stdin");
    let paired = Paired::set_up(&server, "sigkill", fixture_spec(&copy, &[])).await;
    let outbox = paired.dir.join("outbox");
    let mut first = paired.runner(&outbox, "first.log", &[]);
    first.wait_for_log("lease epoch").await;
    paired.discover_classified().await;

    let call = paired.submit("slow", json!({ "seconds": 60 }), 120).await;
    paired.wait_for_state(&call, "running").await;
    wait_for_tool_calls(&copy, 1).await;
    first.signal(Signal::SIGKILL);
    assert_eq!(first.wait_exit().await, None, "killed by the signal");

    let mut second = paired.runner(&outbox, "second.log", &[]);
    let view = paired.wait_for_state(&call, "unknown").await;

    assert_eq!(view["error"]["code"], "runner_restarted", "{view}");
    second.wait_for_log("unknown=1").await;
    // Admitting new work again: a fresh call runs through the restarted runner.
    let echo = paired.submit("echo", json!({ "text": "after" }), 30).await;
    let echoed = paired.wait_for_state(&echo, "succeeded").await;
    assert_eq!(result_text(&echoed), "after");
    second.signal(Signal::SIGTERM);
    assert_eq!(second.wait_exit().await, Some(0), "{}", second.log_text());
    let copied = std::fs::read_to_string(&copy).expect("the stdin copy");
    let slow_calls = copied
        .lines()
        .filter(|line| line.contains("\"tools/call\"") && line.contains("\"slow\""))
        .count();
    assert_eq!(slow_calls, 1, "the cut-off call was sent again:\n{copied}");
}

#[sqlx::test(migrations = false)]
async fn a_receipt_left_unacknowledged_by_a_crash_is_uploaded_once_after_a_restart(
    pool: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("unacked-mcp").join("stdin");
    let paired = Paired::set_up(&server, "unacked", fixture_spec(&copy, &[])).await;
    paired.discover_with_a_runner_of_its_own().await;
    let outbox_dir = paired.dir.join("outbox");
    let call = paired
        .submit("echo", json!({ "text": "never sent" }), 30)
        .await;

    // A runner that leased and started the call, recorded its receipt, and crashed before
    // uploading it: played here with the device API and the outbox itself.
    let outbox = Outbox::open(&outbox_dir, paired.device_id).expect("open the outbox");
    let call_id: CallId = call.parse().expect("call id");
    let epoch = lease_as_the_runner(&paired, &outbox, call_id).await;
    let device = paired.api.with_token(Some(&paired.credential));
    let start = device
        .post(
            &format!("/runner/calls/{call}/start"),
            &StartRequest { epoch },
        )
        .await
        .expect("start the call");
    assert_eq!(
        serde_json::from_value::<StartAnswer>(start).expect("a start answer"),
        StartAnswer::Proceed
    );
    outbox.record_start(call_id, epoch).expect("start ack");
    let completion = Completion::Succeeded {
        result: json!({ "content": [{ "type": "text", "text": "done before the crash" }], "isError": false }),
    };
    let receipt = outbox
        .record_receipt(call_id, epoch, &completion)
        .expect("receipt");
    drop(outbox);

    let mut runner = paired.runner(&outbox_dir, "first.log", &[]);
    let view = paired.wait_for_state(&call, "succeeded").await;

    assert_eq!(result_text(&view), "done before the crash");
    runner.wait_for_log("uploaded=1").await;
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
    let outbox = Outbox::open(&outbox_dir, paired.device_id).expect("reopen the outbox");
    assert!(outbox.unacknowledged().expect("unacknowledged").is_empty());
    drop(outbox);

    // Another start uploads nothing again.
    let mut again = paired.runner(&outbox_dir, "second.log", &[]);
    again.wait_for_log("uploaded=0").await;
    again.signal(Signal::SIGTERM);
    assert_eq!(again.wait_exit().await, Some(0), "{}", again.log_text());
    let database = pool.connect_with(db).await.expect("connect");
    let receipts: Vec<(uuid::Uuid, String, bool)> =
        sqlx::query_as("SELECT receipt_id, answer, applied FROM receipts WHERE call_id = $1")
            .bind(call_id.0)
            .fetch_all(&database)
            .await
            .expect("receipts");
    assert_eq!(
        receipts,
        vec![(receipt.receipt_id, "recorded".to_owned(), true)]
    );
    assert_eq!(tool_calls(&copy), 0, "the call was sent by the runner");
}

#[sqlx::test(migrations = false)]
async fn a_start_cut_off_before_the_server_acknowledged_it_is_taken_back_and_the_call_runs_once(
    pool: PgPoolOptions,
    db: PgConnectOptions,
) {
    // A short lease, so that the server gives the cut-off lease's call back to the queue soon.
    let server = Server::start_with_env(&db, &[("SWITCHYARD_LEASE_TTL_SECONDS", "4")]).await;
    let copy = scratch("unacked-start-mcp").join("stdin");
    let paired = Paired::set_up(&server, "unacked-start", fixture_spec(&copy, &[])).await;
    paired.discover_with_a_runner_of_its_own().await;
    let outbox_dir = paired.dir.join("outbox");
    let call = paired.submit("echo", json!({ "text": "once" }), 60).await;

    // A runner that leased the call, recorded its start while it asked the server, and was
    // killed before the server heard the start: played here with the device API and the
    // outbox itself.
    let outbox = Outbox::open(&outbox_dir, paired.device_id).expect("open the outbox");
    let call_id: CallId = call.parse().expect("call id");
    let epoch = lease_as_the_runner(&paired, &outbox, call_id).await;
    outbox.record_start(call_id, epoch).expect("the start");
    drop(outbox);

    let mut runner = paired.runner(&outbox_dir, "runner.log", &[]);
    runner.wait_for_log("withdrawn=1").await;
    let view = paired.wait_for_state(&call, "succeeded").await;

    assert_eq!(result_text(&view), "once");
    assert_eq!(tool_calls(&copy), 1, "the call was sent once");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
    let database = pool.connect_with(db).await.expect("connect");
    let receipts: Vec<(String, String, bool)> =
        sqlx::query_as("SELECT outcome, answer, applied FROM receipts WHERE call_id = $1")
            .bind(call_id.0)
            .fetch_all(&database)
            .await
            .expect("receipts");
    assert_eq!(
        receipts,
        vec![("succeeded".to_owned(), "recorded".to_owned(), true)],
        "no `unknown` receipt for the start that was never sent"
    );
    let outbox = Outbox::open(&outbox_dir, paired.device_id).expect("reopen the outbox");
    assert!(outbox.unfinished().expect("unfinished").is_empty());
    assert!(outbox.unacknowledged().expect("unacknowledged").is_empty());
}

#[sqlx::test(migrations = false)]
async fn a_second_runner_for_the_same_device_waits_until_the_first_stops(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("second-mcp").join("stdin");
    let paired = Paired::set_up(&server, "second", fixture_spec(&copy, &[])).await;
    let mut first = paired.runner(&paired.dir.join("outbox-a"), "first.log", &[]);
    first.wait_for_log("lease epoch").await;
    paired.discover_classified().await;

    let mut second = paired.runner(&paired.dir.join("outbox-b"), "second.log", &[]);
    second
        .wait_for_log("another runner for this device is active")
        .await;
    let call = paired.submit("echo", json!({ "text": "one" }), 30).await;
    paired.wait_for_state(&call, "succeeded").await;
    assert!(
        !second.log_text().contains("lease epoch"),
        "{}",
        second.log_text()
    );

    first.signal(Signal::SIGTERM);
    assert_eq!(first.wait_exit().await, Some(0), "{}", first.log_text());
    second.wait_for_log("lease epoch").await;
    let call = paired.submit("echo", json!({ "text": "two" }), 30).await;
    let view = paired.wait_for_state(&call, "succeeded").await;

    assert_eq!(result_text(&view), "two");
    let epoch = |log: &str| -> i64 {
        let after = log.split("lease epoch ").nth(1).expect("a status line");
        after
            .split(',')
            .next()
            .and_then(|n| n.trim().parse().ok())
            .expect("an epoch")
    };
    assert!(epoch(&second.log_text()) > epoch(&first.log_text()));
    second.signal(Signal::SIGTERM);
    assert_eq!(second.wait_exit().await, Some(0), "{}", second.log_text());
}

#[sqlx::test(migrations = false)]
async fn sigterm_lets_the_running_call_finish_then_releases_the_lease(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("drain-mcp").join("stdin");
    let paired = Paired::set_up(&server, "drain", fixture_spec(&copy, &[])).await;
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &[]);
    runner.wait_for_log("lease epoch").await;
    paired.discover_classified().await;
    let call = paired.submit("slow", json!({ "seconds": 2 }), 30).await;
    wait_for_tool_calls(&copy, 1).await;

    runner.signal(Signal::SIGTERM);

    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
    let view = paired.call(&call).await;
    assert_eq!(view["state"], "succeeded", "{view}");
    assert!(
        runner.log_text().contains("runner lease released"),
        "{}",
        runner.log_text()
    );
    // Released, not left to expire: the next runner takes the lease at once.
    let mut next = paired.runner(&paired.dir.join("outbox-next"), "next.log", &[]);
    next.wait_for_log("lease epoch").await;
    assert!(
        !next.log_text().contains("another runner"),
        "{}",
        next.log_text()
    );
}

#[sqlx::test(migrations = false)]
async fn a_revoked_device_stops_its_runner_with_exit_code_3(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("revoked-mcp").join("stdin");
    let paired = Paired::set_up(&server, "revoked", fixture_spec(&copy, &[])).await;
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &[]);
    runner.wait_for_log("lease epoch").await;

    paired
        .api
        .post(
            &format!("/workspaces/demo/devices/{}/revoke", paired.device_id),
            &json!({}),
        )
        .await
        .expect("revoke the device");

    assert_eq!(runner.wait_exit().await, Some(3), "{}", runner.log_text());
    let log = runner.log_text();
    assert!(log.contains("device_revoked"), "{log}");
    assert!(log.contains("switchyard pair"), "{log}");
}

#[sqlx::test(migrations = false)]
async fn a_fenced_runner_stops_admitting_then_takes_its_lease_again(
    pool: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("fenced-mcp").join("stdin");
    let paired = Paired::set_up(&server, "fenced", fixture_spec(&copy, &[])).await;
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &[]);
    runner.wait_for_log("lease epoch 1,").await;

    // The epoch moves on behind the runner's back, as when another process took the lease.
    let database = pool.connect_with(db).await.expect("connect");
    let moved = sqlx::query("UPDATE runner_leases SET epoch = epoch + 1 WHERE runner_ref = $1")
        .bind(format!("device:{}", paired.device_id))
        .execute(&database)
        .await
        .expect("move the epoch");
    assert_eq!(moved.rows_affected(), 1);

    runner.wait_for_log("runner lease lost").await;
    runner.wait_for_log("lease epoch 2,").await;
    paired.discover_classified().await;
    let call = paired
        .submit("echo", json!({ "text": "fenced no more" }), 30)
        .await;
    let view = paired.wait_for_state(&call, "succeeded").await;
    assert_eq!(result_text(&view), "fenced no more");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
}

#[sqlx::test(migrations = false)]
async fn a_full_outbox_pauses_admission_and_drops_no_receipt(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("full-mcp").join("stdin");
    let paired = Paired::set_up(&server, "full", fixture_spec(&copy, &[])).await;
    // Discovered before: the full outbox's runner admits nothing, a discovery neither.
    paired.discover_with_a_runner_of_its_own().await;
    let outbox_dir = paired.dir.join("outbox");
    // Receipts for calls the server does not know: at the start they are checked, found
    // fenced and quarantined, and quarantined receipts are kept (and counted) for an hour.
    let outbox = Outbox::open(&outbox_dir, paired.device_id).expect("open the outbox");
    let strangers: Vec<CallId> = (0..CAPACITY).map(|_| CallId::new()).collect();
    for call in &strangers {
        outbox
            .record_receipt(
                *call,
                Epoch(1),
                &Completion::Succeeded {
                    result: json!({ "content": [], "isError": false }),
                },
            )
            .expect("receipt");
    }
    drop(outbox);
    let call = paired.submit("echo", json!({ "text": "waits" }), 30).await;

    let mut runner = paired.runner(&outbox_dir, "runner.log", &[]);
    runner.wait_for_log("quarantined=64").await;
    runner.wait_for_log("admission paused").await;

    assert!(
        runner.log_text().contains("the receipt outbox is full"),
        "{}",
        runner.log_text()
    );
    // Nothing is leased while paused: the call stays queued.
    let watched = Instant::now();
    while watched.elapsed() < std::time::Duration::from_secs(3) {
        assert_eq!(paired.call(&call).await["state"], "queued");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
    let outbox = Outbox::open(&outbox_dir, paired.device_id).expect("reopen the outbox");
    for call in &strangers {
        assert_eq!(
            outbox.entry_state(*call).expect("state"),
            Some(EntryState::Quarantined)
        );
    }
    assert_eq!(
        outbox.capacity().expect("capacity"),
        Capacity::Full { live: CAPACITY }
    );
}
