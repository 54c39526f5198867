//! Pairing a device end to end with the real binaries: the device shows a code, a user
//! approves it, the identity lands in private files, and the device then authenticates as
//! itself until it is revoked.

use super::harness::{Server, scratch_dir, set_up_demo};
use crate::harness::mode;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;
use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

#[track_caller]
fn json_line(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
}

#[sqlx::test(migrations = false)]
async fn a_paired_device_acts_as_itself_until_revoked(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let alice = server.cli();
    set_up_demo(&alice);
    let config = scratch_dir("paired-device").join("config");
    let device = alice.as_device(&config);

    let mut pair = device.start(&[
        "pair",
        "--server",
        server.url(),
        "--json",
        "--name",
        "build-box",
    ]);
    let first = json_line(&pair.next_line());
    let code = first["code"].as_str().expect("code").to_owned();
    assert!(
        first["expires_at"].is_string() && first["pairing_id"].is_string(),
        "{first}"
    );

    let approved = alice
        .run(&["device", "approve", "demo", &code, "--profile", "main"])
        .success();
    assert!(
        approved.stdout.contains("approved device build-box"),
        "{}",
        approved.stdout
    );

    let run = pair.finish().success();
    let last = json_line(run.stdout.lines().last().expect("a last line"));
    let device_id = last["device_id"].as_str().expect("device_id").to_owned();
    assert_eq!(last["profile"], "default", "{last}");
    assert_eq!(last["credential_store"], "file", "{last}");
    assert!(last["workspace_id"].is_string(), "{last}");
    assert_eq!(run.stdout.lines().count(), 2, "{}", run.stdout);
    assert!(
        !run.stdout.contains("sy_dev_"),
        "credential printed: {}",
        run.stdout
    );
    assert!(
        !run.stderr.contains("sy_dev_"),
        "credential printed: {}",
        run.stderr
    );

    // The identity on disk: a private directory, the secret only in the 0600 credential file.
    let devices = config.join("devices");
    assert_eq!(mode(&devices), 0o700);
    let credential_file = devices.join("default.credential");
    assert_eq!(mode(&credential_file), 0o600);
    let credential = std::fs::read_to_string(&credential_file).expect("credential");
    assert!(
        credential.starts_with("sy_dev_"),
        "unexpected credential shape"
    );
    let record = std::fs::read_to_string(devices.join("default.json")).expect("record");
    assert!(
        !record.contains(&credential) && !record.contains("sy_dev_"),
        "{record}"
    );
    let record: Value = serde_json::from_str(&record).expect("record JSON");
    assert_eq!(record["device_id"], device_id.as_str());
    assert_eq!(record["server_url"], server.url().trim_end_matches('/'));

    let list = alice.run(&["device", "list", "demo"]).success();
    let row = list
        .stdout
        .lines()
        .find(|l| l.contains(&device_id))
        .unwrap_or_else(|| panic!("device not listed: {}", list.stdout));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[..3],
        ["build-box", device_id.as_str(), "main"],
        "{row}"
    );
    assert!(row.ends_with("active"), "{row}");

    // As the device (no SWITCHYARD_TOKEN): begin an operation.
    let begin = [
        "scope",
        "begin",
        "demo",
        "--environment",
        "default",
        "--profile",
        "main",
        "--task",
        "nightly sync",
    ];
    let op = device.run(&begin).success();
    let op_id = op.stdout.trim();
    assert_eq!(op_id.len(), 36, "an operation id: {}", op.stdout);
    let mut with_json = vec!["--json"];
    with_json.extend(begin);
    let view = device.run(&with_json).success().json();
    assert_eq!(view["device_id"], device_id.as_str(), "{view}");
    assert_eq!(view["task"], "nightly sync", "{view}");

    // The device credential goes only to the server it came from.
    let elsewhere = device.with_url(Some("http://127.0.0.1:9"));
    let run = elsewhere.run(&begin).code(3);
    assert!(
        run.stderr.contains("is paired with") && run.stderr.contains("SWITCHYARD_URL"),
        "{}",
        run.stderr
    );
    // Without SWITCHYARD_URL the paired server is used.
    device.with_url(None).run(&begin).success();

    let revoked = alice
        .run(&["device", "revoke", "demo", &device_id])
        .success();
    assert!(
        revoked.stdout.contains("revoked device build-box"),
        "{}",
        revoked.stdout
    );
    let run = device.run(&begin).code(3);
    assert!(
        run.stderr.contains("error[device_revoked]"),
        "{}",
        run.stderr
    );
    let list = alice
        .run(&["--json", "device", "list", "demo"])
        .success()
        .json();
    let listed = list
        .as_array()
        .and_then(|l| l.iter().find(|d| d["id"] == device_id.as_str()))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(listed["revoked_at"].is_string(), "{listed}");
}

#[sqlx::test(migrations = false)]
async fn ctrl_c_while_waiting_exits_130_and_stores_nothing(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let config = scratch_dir("pair-interrupted").join("config");
    let device = server.cli().as_device(&config);

    let mut pair = device.start(&["pair", "--server", server.url(), "--profile", "laptop"]);
    let shown = pair.next_line();
    assert!(
        shown.starts_with("Pairing code: ")
            && shown.contains("UTC). Approve it with: switchyard device approve WS ")
            && shown.ends_with(" --profile PROFILE"),
        "{shown}"
    );
    let pid = Pid::from_raw(i32::try_from(pair.pid()).expect("pid"));
    kill(pid, Signal::SIGINT).expect("send SIGINT");
    let run = pair.finish().code(130);
    assert!(run.stderr.contains("interrupted"), "{}", run.stderr);
    assert!(!config.join("devices").join("laptop.json").exists());

    // Nothing paired: without a token the CLI says how to authenticate.
    let run = device.run(&["workspace", "list"]).code(3);
    assert!(
        run.stderr.contains("SWITCHYARD_TOKEN") && run.stderr.contains("switchyard pair"),
        "{}",
        run.stderr
    );
}

#[sqlx::test(migrations = false)]
async fn a_wrong_code_is_refused_and_the_device_keeps_waiting(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let alice = server.cli();
    set_up_demo(&alice);
    let config = scratch_dir("wrong-code").join("config");
    let device = alice.as_device(&config);
    let mut pair = device.start(&["--json", "pair", "--server", server.url()]);
    let code = json_line(&pair.next_line())["code"]
        .as_str()
        .expect("code")
        .to_owned();

    let run = alice
        .run(&[
            "device",
            "approve",
            "demo",
            "ZZZZ-ZZZZ",
            "--profile",
            "main",
        ])
        .code(4);
    assert!(
        run.stderr.starts_with("error[pairing_not_found]"),
        "{}",
        run.stderr
    );

    // The real code still works, typed in lower case without the dash.
    let typed = code.replace('-', "").to_lowercase();
    alice
        .run(&["device", "approve", "demo", &typed, "--profile", "main"])
        .success();
    let run = pair.finish().success();
    assert_eq!(
        json_line(run.stdout.lines().last().expect("last line"))["profile"],
        "default"
    );
    // A used code is refused like any unknown one.
    let run = alice
        .run(&["device", "approve", "demo", &code, "--profile", "main"])
        .code(4);
    assert!(
        run.stderr.starts_with("error[pairing_not_found]"),
        "{}",
        run.stderr
    );
}

#[sqlx::test(migrations = false)]
async fn an_expired_code_exits_4_and_stores_nothing(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let alice = server.cli();
    set_up_demo(&alice);
    let config = scratch_dir("expired-code").join("config");
    let device = alice.as_device(&config);
    let mut pair = device.start(&["--json", "pair", "--server", server.url()]);
    let first = json_line(&pair.next_line());
    let code = first["code"].as_str().expect("code").to_owned();
    let pairing: uuid::Uuid = first["pairing_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("pairing_id");

    // Codes live ten minutes; move this one's expiry into the past instead of waiting.
    let mut conn = db.connect().await.expect("connect");
    let moved =
        sqlx::query("UPDATE pairings SET expires_at = now() - interval '1 second' WHERE id = $1")
            .bind(pairing)
            .execute(&mut conn)
            .await
            .expect("expire the pairing");
    assert_eq!(moved.rows_affected(), 1);

    let run = pair.finish().code(4);
    assert!(
        run.stderr.contains(&format!(
            "error[pairing_expired]: pairing code {code} expired"
        )),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);
    assert!(!config.join("devices").join("default.json").exists());
    let run = alice
        .run(&["device", "approve", "demo", &code, "--profile", "main"])
        .code(4);
    assert!(
        run.stderr.starts_with("error[pairing_not_found]"),
        "{}",
        run.stderr
    );
}
