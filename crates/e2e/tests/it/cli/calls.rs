//! Following a call after it was submitted: cancelling it, reading it once retention has erased
//! its inputs and result, and what the MCP server it ran on could see of the server's process.

use super::harness::{Server, Switchyard, call_and_wait, set_up_demo, submit_call, wait_for_call};
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::time::Duration;

/// How long a call may take to reach the state a test waits for.
const CALL_DEADLINE: Duration = Duration::from_secs(60);

/// Submits `call` to `demo` without waiting and returns its id.
#[track_caller]
fn submit(cli: &Switchyard, call: &Value) -> String {
    let view = cli
        .run_with_stdin(
            &["--json", "mcp", "call", "demo", "-"],
            call.to_string().as_bytes(),
        )
        .success()
        .json();
    view["id"].as_str().expect("call id").to_owned()
}

/// The call's state, as the API names it.
fn state(view: &Value) -> &str {
    view["state"].as_str().unwrap_or_default()
}

#[sqlx::test(migrations = false)]
async fn cancelling_a_finished_call_changes_nothing(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    set_up_demo(&cli);
    let finished = call_and_wait(&cli, "echo", json!({"text": "done already"}), 0);
    let id = finished["id"].as_str().expect("call id");

    let run = cli.run(&["mcp", "cancel", "demo", id]).success();
    assert_eq!(
        run.stdout.trim_end(),
        format!("call {id}: already finished (succeeded): nothing to cancel"),
    );
    let answer = cli
        .run(&["--json", "mcp", "cancel", "demo", id])
        .success()
        .json();
    assert_eq!(answer["outcome"], "already_finished", "{answer}");
    assert_eq!(answer["call"]["state"], "succeeded", "{answer}");
    assert!(answer["call"]["cancel_requested_at"].is_null(), "{answer}");

    let status = cli.run(&["mcp", "status", "demo", id]).success();
    assert!(
        !status.stdout.contains("cancel requested"),
        "{}",
        status.stdout
    );
    assert!(status.stdout.contains("done already"), "{}", status.stdout);
}

#[sqlx::test(migrations = false)]
async fn cancelling_a_running_call_stops_it_running(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    set_up_demo(&cli);
    let id = submit(
        &cli,
        &submit_call("main", "fx", "slow", json!({"seconds": 30})),
    );
    // Cancel once it was sent, so the request has to go through the runner.
    wait_for_call(&cli, "demo", &id, CALL_DEADLINE, |c| state(c) == "running").await;

    let answer = cli
        .run(&["--json", "mcp", "cancel", "demo", &id])
        .success()
        .json();
    let outcome = answer["outcome"].as_str().unwrap_or_default();
    assert!(
        matches!(outcome, "cancellation_requested" | "cancelled"),
        "{answer}"
    );
    if outcome == "cancellation_requested" {
        assert!(
            answer["call"]["cancel_requested_at"].is_string(),
            "{answer}"
        );
        let status = cli.run(&["mcp", "status", "demo", &id]).success();
        assert!(
            status
                .stdout
                .lines()
                .any(|l| l.starts_with("cancel requested at")),
            "{}",
            status.stdout
        );
        // Asking again is harmless and says the same.
        let again = cli.run(&["mcp", "cancel", "demo", &id]).success();
        assert!(
            again
                .stdout
                .contains("cancellation requested: the call was already sent")
                || again.stdout.contains("already finished"),
            "{}",
            again.stdout
        );
    }

    let settled = wait_for_call(&cli, "demo", &id, CALL_DEADLINE, |c| {
        !matches!(state(c), "queued" | "leased" | "running")
    })
    .await;
    assert!(
        matches!(
            state(&settled),
            "unknown" | "cancelled" | "succeeded" | "tool_error"
        ),
        "{settled}"
    );
}

#[sqlx::test(migrations = false)]
async fn an_expired_call_shows_its_minimal_disposition(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start_with_env(&db, &[("SWITCHYARD_RESULT_RETENTION_SECONDS", "0")]).await;
    let cli = server.cli();
    set_up_demo(&cli);
    let finished = call_and_wait(&cli, "echo", json!({"text": "soon forgotten"}), 0);
    let id = finished["id"].as_str().expect("call id");

    let expired = wait_for_call(&cli, "demo", id, CALL_DEADLINE, |c| {
        c["retention_expired_at"].is_string()
    })
    .await;
    assert!(expired["result"].is_null(), "{expired}");
    assert!(expired["arguments"].is_null(), "{expired}");

    let status = cli.run(&["mcp", "status", "demo", id]).success();
    let line = status
        .stdout
        .lines()
        .find(|l| l.starts_with("inputs and result expired at "))
        .unwrap_or_else(|| panic!("{}", status.stdout));
    assert!(line.ends_with(" (minimal disposition)"), "{line}");
    assert!(
        status
            .stdout
            .lines()
            .any(|l| l.starts_with("state") && l.ends_with("succeeded")),
        "{}",
        status.stdout
    );
    assert!(
        !status.stdout.contains("soon forgotten"),
        "{}",
        status.stdout
    );
}

#[sqlx::test(migrations = false)]
async fn stdio_servers_do_not_inherit_the_servers_secrets(_: PgPoolOptions, db: PgConnectOptions) {
    // A secret in the server process's environment, beside its own database credential.
    const CANARY: (&str, &str) = ("DEPLOY_SIGNING_KEY", "canary-value-1234");
    let server = Server::start_with_env(&db, &[CANARY]).await;
    let cli = server.cli();
    set_up_demo(&cli);
    for name in ["DATABASE_URL", CANARY.0] {
        let call = call_and_wait(&cli, "env", json!({"name": name}), 6);
        assert_eq!(
            state(&call),
            "tool_error",
            "{name} reached the MCP server: {call}"
        );
        assert_eq!(result_text(&call), "not set", "{call}");
    }
    let path = call_and_wait(&cli, "env", json!({"name": "PATH"}), 0);
    assert_eq!(state(&path), "succeeded", "{path}");
}

/// The text of a call's result content.
fn result_text(call: &Value) -> String {
    call["result"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[sqlx::test(migrations = false)]
async fn status_pages_the_history_and_follows_every_page(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    set_up_demo(&cli);
    let ids: Vec<String> = ["one", "two", "three"]
        .iter()
        .map(|text| {
            let call = call_and_wait(&cli, "echo", json!({"text": text}), 0);
            call["id"].as_str().expect("call id").to_owned()
        })
        .collect();

    // One page of two, newest first, and how to read the next.
    let first = cli
        .run(&["mcp", "status", "demo", "--tool", "echo", "--limit", "2"])
        .success();
    let rows = |stdout: &str| -> Vec<String> {
        stdout
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|id| ids.iter().any(|known| known == id))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(rows(&first.stdout), [ids[2].clone(), ids[1].clone()]);
    let cursor = first
        .stdout
        .split('`')
        .find_map(|part| part.strip_prefix("--cursor "))
        .unwrap_or_else(|| panic!("no next cursor: {}", first.stdout))
        .to_owned();
    let second = cli
        .run(&[
            "mcp", "status", "demo", "--tool", "echo", "--limit", "2", "--cursor", &cursor,
        ])
        .success();
    assert_eq!(rows(&second.stdout), [ids[0].clone()]);
    assert!(!second.stdout.contains("--cursor"), "{}", second.stdout);

    // `--all` follows every page; the JSON holds summaries, no arguments or results.
    let all = cli
        .run(&["--json", "mcp", "status", "demo", "--limit", "1", "--all"])
        .success()
        .json();
    let listed: Vec<&str> = all["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(listed, [ids[2].as_str(), ids[1].as_str(), ids[0].as_str()]);
    assert!(all["calls"][0].get("result").is_none(), "{all}");

    // A filter the server cannot take is its refusal, exit 4.
    let refused = cli
        .run(&["mcp", "status", "demo", "--state", "finished"])
        .code(4);
    assert!(
        refused.stderr.contains("invalid_filter"),
        "{}",
        refused.stderr
    );
}
