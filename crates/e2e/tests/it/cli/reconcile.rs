//! Settling unknown calls from the command line: a receipt policy and `mcp reconcile`, evidence
//! capture and `mcp resolve`, `mcp erase`, evidence retention and capture exclusions — each as
//! a user's flow, against the real server, central runner and fixture.

use super::harness::{Server, Switchyard, call_and_wait, scratch_dir, set_up_demo_with};
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::path::Path;

/// Workspace `demo` with connection `fx` on a fixture counting into `counter`, profile `main`
/// on which alice holds Use.
#[track_caller]
fn set_up_counted(cli: &Switchyard, counter: &Path) {
    let counter = counter.display().to_string();
    set_up_demo_with(cli, &["--count-file", &counter]);
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

#[sqlx::test(migrations = false)]
async fn reconcile_asks_the_connector_and_settles_the_call(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    let counter = scratch_dir("reconcile-cli").join("count");
    set_up_counted(&cli, &counter);

    let lost = call_and_wait(&cli, "count_then_crash", json!({"label": "once"}), 7);
    let id = lost["id"].as_str().expect("call id");
    assert_eq!(lost["state"], "unknown", "{lost}");
    assert_eq!(lines(&counter), 1);

    let request = json!({"request_id": uuid::Uuid::new_v4().to_string()}).to_string();
    let refused = cli
        .run_with_stdin(&["mcp", "reconcile", "demo", id, "-"], request.as_bytes())
        .code(4);
    assert!(
        refused.stderr.contains("error[receipt_policy_missing]"),
        "{}",
        refused.stderr
    );

    let policy = cli
        .run(&[
            "connection",
            "receipt-policy",
            "demo",
            "fx",
            "--tool",
            "lookup",
            "--arguments",
            r#"{"request_id": "{{request_id}}"}"#,
        ])
        .success();
    assert!(
        policy
            .stdout
            .contains("receipt policy of connection fx: tool lookup"),
        "{}",
        policy.stdout
    );

    let settled = cli
        .run_with_stdin(
            &["--json", "mcp", "reconcile", "demo", id, "-"],
            request.as_bytes(),
        )
        .success()
        .json();
    assert_eq!(settled["state"], "resolved", "{settled}");
    assert_eq!(settled["resolution_outcome"], "succeeded");
    assert_eq!(settled["error"]["code"], "transport_closed");
    assert_eq!(settled["observations"][0]["reported"], "applied");
    assert_eq!(settled["resolution"]["source"], "observation");
    assert_eq!(lines(&counter), 1, "the lookup only read");

    // The same file again shows the same lookup; the human view tells the story.
    let again = cli
        .run_with_stdin(&["mcp", "reconcile", "demo", id, "-"], request.as_bytes())
        .success();
    assert!(
        again
            .stdout
            .contains(&format!("call {id}: resolved (succeeded)")),
        "{}",
        again.stdout
    );
    let status = cli.run(&["mcp", "status", "demo", id]).success();
    for expected in [
        "observations:",
        ": applied",
        "resolution: succeeded by observation",
        "lookups: ",
    ] {
        assert!(
            status.stdout.contains(expected),
            "{expected}: {}",
            status.stdout
        );
    }
    let full = cli
        .run(&["--json", "mcp", "status", "demo", id])
        .success()
        .json();
    assert_eq!(full["attempts"][0]["error"]["code"], "transport_closed");
    assert_eq!(
        full["lineage"]["lookup_call_ids"].as_array().map(Vec::len),
        Some(1)
    );
}

#[sqlx::test(migrations = false)]
async fn resolve_cites_captured_evidence_and_erase_says_what_it_cannot_undo(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    let counter = scratch_dir("resolve-cli").join("count");
    set_up_counted(&cli, &counter);
    let policy = cli
        .run(&[
            "workspace",
            "capture-policy",
            "demo",
            "--capture-managed-tool-results",
            "on",
        ])
        .success();
    assert!(
        policy
            .stdout
            .starts_with("capture of managed tool results: on"),
        "{}",
        policy.stdout
    );

    let seen = call_and_wait(&cli, "echo", json!({"text": "order 7 was never placed"}), 0);
    let seen_id = seen["id"].as_str().expect("call id");
    let evidence = super::harness::wait_for_call(
        &cli,
        "demo",
        seen_id,
        std::time::Duration::from_secs(60),
        |c| {
            c["lineage"]["evidence_ids"]
                .as_array()
                .is_some_and(|e| !e.is_empty())
        },
    )
    .await["lineage"]["evidence_ids"][0]
        .as_str()
        .expect("evidence id")
        .to_owned();
    let shown = cli.run(&["evidence", "show", "demo", &evidence]).success();
    assert!(
        shown.stdout.contains("order 7 was never placed"),
        "{}",
        shown.stdout
    );

    let crashed = call_and_wait(&cli, "crash", json!({}), 7);
    let id = crashed["id"].as_str().expect("call id");
    let resolution = |evidence: &str| {
        json!({
            "request_id": uuid::Uuid::new_v4().to_string(),
            "outcome": "not_applied",
            "source_version_id": evidence,
            "explanation": "the order system has no order 7",
        })
        .to_string()
    };
    let unknown_evidence = cli
        .run_with_stdin(
            &["mcp", "resolve", "demo", id, "-"],
            resolution(&uuid::Uuid::new_v4().to_string()).as_bytes(),
        )
        .code(4);
    assert!(
        unknown_evidence
            .stderr
            .contains("error[evidence_not_found]"),
        "{}",
        unknown_evidence.stderr
    );
    let resolved = cli
        .run_with_stdin(
            &["--json", "mcp", "resolve", "demo", id, "-"],
            resolution(&evidence).as_bytes(),
        )
        .success()
        .json();
    assert_eq!(resolved["resolution_outcome"], "not_applied", "{resolved}");
    assert_eq!(resolved["resolution"]["source"], "caller");
    assert_eq!(
        resolved["resolution"]["source_version_id"],
        evidence.as_str()
    );
    assert_eq!(
        resolved["resolution"]["explanation"],
        "the order system has no order 7"
    );

    let erased = cli.run(&["mcp", "erase", "demo", seen_id]).success();
    assert!(
        erased.stdout.contains("evidence erased") && erased.stdout.contains("does not undo"),
        "{}",
        erased.stdout
    );
    let shown = cli.run(&["evidence", "show", "demo", &evidence]).success();
    assert!(shown.stdout.contains("output: erased"), "{}", shown.stdout);
    assert!(!shown.stdout.contains("order 7"), "{}", shown.stdout);
    // The resolution citing the erased evidence lost its explanation; who, when and the
    // outcome remain.
    let after = cli
        .run(&["--json", "mcp", "status", "demo", id])
        .success()
        .json();
    assert!(after["resolution"]["explanation"].is_null(), "{after}");
    assert_eq!(after["resolution_outcome"], "not_applied");
}

#[sqlx::test(migrations = false)]
async fn evidence_retention_and_capture_exclusions_are_set_from_the_command_line(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    set_up_demo_with(&cli, &[]);
    let policy = cli
        .run(&[
            "workspace",
            "capture-policy",
            "demo",
            "--evidence-retention-days",
            "7",
        ])
        .success();
    assert!(
        policy.stdout.contains("evidence kept 7 days"),
        "{}",
        policy.stdout
    );

    let set = cli
        .run(&[
            "connection",
            "capture-exclusions",
            "demo",
            "fx",
            "--tool",
            "echo",
            "--drop-argument",
            "text",
            "--drop-result",
            "text",
        ])
        .success();
    assert!(
        set.stdout
            .contains("all but arguments text and result fields text"),
        "{}",
        set.stdout
    );
    let call = call_and_wait(&cli, "echo", json!({"text": "never-kept-3318"}), 0);
    assert_eq!(call["state"], "succeeded", "{call}");
    assert!(!call.to_string().contains("never-kept-3318"), "{call}");

    let removed = cli
        .run(&[
            "connection",
            "capture-exclusions",
            "demo",
            "fx",
            "--tool",
            "echo",
            "--remove",
        ])
        .success();
    assert!(
        removed.stdout.contains("keeps everything"),
        "{}",
        removed.stdout
    );
    let call = call_and_wait(&cli, "echo", json!({"text": "kept-again-3318"}), 0);
    assert!(call.to_string().contains("kept-again-3318"), "{call}");
}
