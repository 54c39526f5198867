//! The approval gate through the CLI against the real server process: a held call approved and
//! then cut off by a SIGKILL of the server before any runner leased it runs exactly once after
//! the restart; `mcp call --wait` says where to answer and keeps waiting; a declined call never
//! runs. Executions are counted by the fixture's count file.

use super::harness::{
    Server, Switchyard, scratch_dir, set_up_demo_with, submit_call, wait_for_call,
};
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::time::Duration;

const CALL_DEADLINE: Duration = Duration::from_secs(60);

/// `demo` with the fixture counting executions in `count`; `bob` holds Approve on `main`, and
/// calls of `count` ask (`always`). Returns alice's and bob's CLIs.
async fn gated_demo(server: &Server, count: &str) -> (Switchyard, Switchyard) {
    let cli = server.cli();
    set_up_demo_with(&cli, &["--count-file", count]);
    let bob_token = server.create_user("bob").await;
    cli.run(&["workspace", "member", "add", "demo", "--user", "bob"])
        .success();
    let run = cli
        .run(&[
            "profile",
            "grant",
            "demo",
            "main",
            "--user",
            "bob",
            "--approve",
        ])
        .success();
    assert!(run.stdout.contains("APPROVE"), "{}", run.stdout);
    let run = cli
        .run(&[
            "profile",
            "set-approval",
            "demo",
            "main",
            "--connection",
            "fx",
            "--tool",
            "count",
            "--policy",
            "always",
        ])
        .success();
    assert!(run.stdout.contains("always"), "{}", run.stdout);
    (cli.clone(), cli.with_token(Some(&bob_token)))
}

fn count_lines(path: &str) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Submits `call` to `demo` without waiting; returns the call.
#[track_caller]
fn submit(cli: &Switchyard, call: &Value) -> Value {
    cli.run_with_stdin(
        &["--json", "mcp", "call", "demo", "-"],
        call.to_string().as_bytes(),
    )
    .success()
    .json()
}

#[sqlx::test(migrations = false)]
async fn an_approved_call_cut_off_by_a_server_crash_runs_once_after_restart(
    pool: PgPoolOptions,
    db: PgConnectOptions,
) {
    let scratch = scratch_dir("approval-crash");
    let count = scratch.join("count").display().to_string();
    let mut server = Server::start(&db).await;
    let (alice, bob) = gated_demo(&server, &count).await;
    let call = submit_call("main", "fx", "count", json!({"label": "once"}));

    let held = submit(&alice, &call);
    assert_eq!(held["state"], "awaiting_approval", "{held}");
    let id = held["id"].as_str().unwrap().to_owned();
    let shown = bob.run(&["approval", "show", "demo", &id]).success();
    for expected in [
        "count",
        "fx",
        "\"label\": \"once\"",
        "alice",
        "the policy is `always`",
    ] {
        assert!(
            shown.stdout.contains(expected),
            "{expected}: {}",
            shown.stdout
        );
    }

    // No runner may lease while the server goes down: another holder keeps the central lease.
    let pool = pool.connect_with(db.clone()).await.unwrap();
    sqlx::query(
        "INSERT INTO runner_leases (runner_ref, epoch, holder, expires_at)
         VALUES ('central', 1, gen_random_uuid(), now() + interval '1 hour')
         ON CONFLICT (runner_ref) DO UPDATE
             SET epoch = runner_leases.epoch + 1, holder = EXCLUDED.holder,
                 expires_at = EXCLUDED.expires_at",
    )
    .execute(&pool)
    .await
    .unwrap();
    let run = bob.run(&["approval", "approve", "demo", &id]).success();
    assert!(run.stdout.contains("runs once"), "{}", run.stdout);
    let queued = wait_for_call(&alice, "demo", &id, CALL_DEADLINE, |c| {
        c["state"] == "queued"
    })
    .await;
    assert!(queued["leased_at"].is_null(), "{queued}");

    server.crash_and_restart().await;
    sqlx::query("UPDATE runner_leases SET expires_at = now() WHERE runner_ref = 'central'")
        .execute(&pool)
        .await
        .unwrap();
    let done = wait_for_call(&alice, "demo", &id, CALL_DEADLINE, |c| {
        c["state"] == "succeeded"
    })
    .await;
    assert_eq!(done["state"], "succeeded");
    assert_eq!(
        count_lines(&count),
        1,
        "the approved call ran other than once"
    );

    // A retry of the request reads the same finished call; nothing runs again.
    let again = submit(&alice, &call);
    assert_eq!(
        (again["id"].as_str(), again["state"].as_str()),
        (Some(id.as_str()), Some("succeeded"))
    );
    assert_eq!(count_lines(&count), 1);
    let run = bob.run(&["approval", "approve", "demo", &id]);
    assert_ne!(run.code, Some(0), "a second answer changes nothing");
    assert!(run.stderr.contains("approval_decided"), "{}", run.stderr);
}

#[sqlx::test(migrations = false)]
async fn mcp_call_wait_says_where_to_answer_and_a_declined_call_never_runs(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let scratch = scratch_dir("approval-decline");
    let count = scratch.join("count").display().to_string();
    let server = Server::start(&db).await;
    let (alice, bob) = gated_demo(&server, &count).await;
    let call = submit_call("main", "fx", "count", json!({"label": "never"}));

    let waiting = alice
        .command(&["mcp", "call", "demo", "-", "--wait"])
        .spawn()
        .expect("spawn switchyard");
    let mut waiting = ChildWithInput::new(waiting, call.to_string());
    let held = wait_for_held(&alice).await;
    let id = held["id"].as_str().unwrap().to_owned();
    // The submitter cannot answer their own call.
    let run = alice.run(&["approval", "approve", "demo", &id]);
    assert!(run.stderr.contains("self_approval"), "{}", run.stderr);
    bob.run(&["approval", "decline", "demo", &id, "--reason", "not today"])
        .success();
    let (code, stderr) = waiting.finish();
    assert_ne!(code, 0, "a declined call is not a success");
    assert!(
        stderr.contains(&format!("call {id} awaits approval")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("switchyard approval approve demo {id}")),
        "{stderr}"
    );
    assert!(stderr.contains("not today"), "{stderr}");
    let status = alice.run(&["mcp", "status", "demo", &id]).success();
    assert!(status.stdout.contains("declined"), "{}", status.stdout);
    assert_eq!(count_lines(&count), 0, "a declined call ran");
}

/// The one held call of `demo`, once there is one.
async fn wait_for_held(cli: &Switchyard) -> Value {
    switchyard_testkit::poll::Bound::new(CALL_DEADLINE, Duration::from_millis(200))
        .until(async || {
            let list = cli
                .run(&["--json", "approval", "list", "demo"])
                .success()
                .json();
            Ok(match list["approvals"].as_array().and_then(|a| a.first()) {
                Some(first) => {
                    switchyard_testkit::poll::Check::Done(json!({"id": first["call_id"]}))
                }
                None => switchyard_testkit::poll::Check::NotYet("no question yet".to_owned()),
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A started `switchyard` whose stdin was written and closed; its stderr read at the end.
struct ChildWithInput(std::process::Child);

impl ChildWithInput {
    fn new(mut child: std::process::Child, input: String) -> Self {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input.as_bytes()).expect("write the call");
        drop(stdin);
        Self(child)
    }

    /// Waits for it to end: its exit code and stderr.
    fn finish(&mut self) -> (i32, String) {
        use std::io::Read;
        let status = self.0.wait().expect("wait for switchyard");
        let mut stderr = String::new();
        if let Some(mut pipe) = self.0.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        (status.code().unwrap_or(-1), stderr)
    }
}

impl Drop for ChildWithInput {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
