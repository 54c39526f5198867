//! Retiring and restoring a connection through the CLI: who may, what a retired connection
//! refuses, what stays readable, and that a restored connection's tools must be granted again.

use super::harness::{Server, Switchyard, call_and_wait, classify_all, set_up_demo, submit_call};
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// Exit code of a run the server refused.
const REFUSED: i32 = 4;

/// Submits an echo call on `demo` that the server refuses; returns its stderr.
#[track_caller]
fn refused_call(cli: &Switchyard, text: &str) -> String {
    let call = submit_call("main", "fx", "echo", json!({"text": text}));
    cli.run_with_stdin(&["mcp", "call", "demo", "-"], call.to_string().as_bytes())
        .code(REFUSED)
        .stderr
}

#[sqlx::test(migrations = false)]
async fn an_admin_retires_and_restores_a_connection_with_the_cli(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let alice = server.cli();
    set_up_demo(&alice);
    let bob = alice.with_token(Some(&server.create_user("bob").await));
    alice
        .run(&["workspace", "member", "add", "demo", "--user", "bob"])
        .success();
    let before = call_and_wait(&alice, "echo", json!({"text": "before"}), 0);
    let before_id = before["id"].as_str().unwrap();

    // A member who is not an admin may not retire it.
    let refused = bob
        .run(&["connection", "retire", "demo", "fx"])
        .code(REFUSED);
    assert!(refused.stderr.contains("forbidden"), "{}", refused.stderr);
    let listed = alice.run(&["connection", "list", "demo"]).success().stdout;
    assert!(listed.contains("active"), "{listed}");

    let retired = alice
        .run(&["connection", "retire", "demo", "fx"])
        .success()
        .stdout;
    assert!(retired.starts_with("connection fx: retired "), "{retired}");
    let listed = alice.run(&["connection", "list", "demo"]).success().stdout;
    assert!(listed.contains("retired"), "{listed}");
    let tools = alice
        .run(&["connection", "tools", "demo", "fx"])
        .success()
        .stdout;
    assert!(
        tools.contains("echo") && tools.contains("retired"),
        "{tools}"
    );

    // It runs nothing new; what ran before stays readable.
    let refused = refused_call(&alice, "after");
    assert!(refused.contains("connection_retired"), "{refused}");
    let kept = alice
        .run(&["--json", "mcp", "status", "demo", before_id])
        .success()
        .json();
    assert_eq!(kept["state"], "succeeded", "{kept}");

    // Restored, its tools are granted by no profile until set again.
    let restored = alice
        .run(&["connection", "restore", "demo", "fx"])
        .success()
        .stdout;
    assert!(restored.contains("profile set-tools"), "{restored}");
    let ungranted = refused_call(&alice, "ungranted");
    assert!(ungranted.contains("tool_not_granted"), "{ungranted}");
    alice
        .run(&[
            "profile",
            "set-tools",
            "demo",
            "main",
            "--connection",
            "fx",
            "--all",
        ])
        .success();
    // Granted again, its tools are still unclassified until classified again.
    let unclassified = refused_call(&alice, "unclassified");
    assert!(unclassified.contains("tool_unclassified"), "{unclassified}");
    classify_all(&alice, "demo", "fx");
    let again = call_and_wait(&alice, "echo", json!({"text": "again"}), 0);
    assert_eq!(again["state"], "succeeded", "{again}");
}
