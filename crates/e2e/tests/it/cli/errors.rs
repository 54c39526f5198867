//! Every documented failure exits with its documented code and says what went wrong.

use super::harness::{Server, Switchyard, scratch_dir, set_up_demo, submit_call};
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

#[sqlx::test(migrations = false)]
async fn a_failing_tool_exits_6(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    set_up_demo(&cli);
    let call = submit_call("main", "fx", "fail", json!({"message": "the tool said no"}));
    let run = cli
        .run_with_stdin(
            &["mcp", "call", "demo", "-", "--wait"],
            call.to_string().as_bytes(),
        )
        .code(6);
    assert!(run.stderr.contains("tool_error"), "{}", run.stderr);
    assert!(run.stdout.contains("the tool said no"), "{}", run.stdout);

    let json = cli.run_with_stdin(
        &["--json", "mcp", "call", "demo", "-", "--wait"],
        call.to_string().as_bytes(),
    );
    assert_eq!(json.code(6).json()["state"], "tool_error");
}

#[sqlx::test(migrations = false)]
async fn a_call_cut_by_its_timeout_is_unknown_and_exits_7(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    set_up_demo(&cli);
    let mut call = submit_call("main", "fx", "slow", json!({"seconds": 30}));
    call["timeout_seconds"] = json!(1);
    let run = cli
        .run_with_stdin(
            &["mcp", "call", "demo", "-", "--wait"],
            call.to_string().as_bytes(),
        )
        .code(7);
    assert!(
        run.stderr.contains("is unknown") && run.stderr.contains("Do not retry blindly"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("switchyard mcp status demo "),
        "{}",
        run.stderr
    );
}

#[sqlx::test(migrations = false)]
async fn a_bad_call_file_exits_2_naming_the_problem(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    let dir = scratch_dir("bad-call-file");

    let broken = dir.join("broken.json");
    std::fs::write(
        &broken,
        "{\n  \"request_id\": \"x\",\n  \"tool_name\": echo\n}\n",
    )
    .expect("write");
    let run = cli
        .run(&["mcp", "call", "demo", &broken.display().to_string()])
        .code(2);
    assert!(
        run.stderr.contains("broken.json") && run.stderr.contains("line 3"),
        "{}",
        run.stderr
    );

    let array = cli
        .run_with_stdin(&["mcp", "call", "demo", "-"], b"[1, 2]")
        .code(2);
    assert!(
        array.stderr.contains("<stdin>: expected a JSON object"),
        "{}",
        array.stderr
    );

    let missing = dir.join("missing.json");
    let run = cli
        .run(&["mcp", "call", "demo", &missing.display().to_string()])
        .code(2);
    assert!(
        run.stderr.contains("cannot read") && run.stderr.contains("missing.json"),
        "{}",
        run.stderr
    );

    // Usage errors are 2 as well, and env values are refused without being echoed.
    let run = cli
        .run(&[
            "connector",
            "add",
            "x",
            "--env",
            "TOKEN=hunter22",
            "--stdio",
            "--",
            "/bin/true",
        ])
        .code(2);
    assert!(!run.stderr.contains("hunter22"), "{}", run.stderr);
    cli.run(&["profile", "grant", "demo", "main", "--user", "alice"])
        .code(2);
}

#[sqlx::test(migrations = false)]
async fn no_token_or_a_wrong_token_exits_3(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let run = server
        .cli()
        .with_token(None)
        .run(&["workspace", "list"])
        .code(3);
    assert!(run.stderr.contains("SWITCHYARD_TOKEN"), "{}", run.stderr);

    let run = server
        .cli()
        .with_token(Some("not-a-real-token"))
        .run(&["workspace", "list"])
        .code(3);
    assert!(
        run.stderr.contains("error[unauthenticated]"),
        "{}",
        run.stderr
    );
}

#[sqlx::test(migrations = false)]
async fn refusals_exit_4_with_the_error_code(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    let run = cli.run(&["mcp", "status", "no-such-workspace"]).code(4);
    assert!(
        run.stderr.starts_with("error[workspace_not_found]: "),
        "{}",
        run.stderr
    );

    // A member without Use may not run the profile's tools.
    set_up_demo(&cli);
    let bob = cli.with_token(Some(&server.create_user("bob").await));
    cli.run(&["workspace", "member", "add", "demo", "--user", "bob"])
        .success();
    let call = submit_call("main", "fx", "echo", json!({"text": "bob"}));
    let run = bob
        .run_with_stdin(&["mcp", "call", "demo", "-"], call.to_string().as_bytes())
        .code(4);
    assert!(
        run.stderr.starts_with("error[forbidden]: "),
        "{}",
        run.stderr
    );
}

#[sqlx::test(migrations = false)]
async fn an_unreachable_server_exits_5(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = Switchyard::new(server.url(), Some(server.token()));
    cli.run(&["workspace", "list"]).success();
    server.stop();
    let run = cli.run(&["workspace", "list"]).code(5);
    assert!(
        run.stderr.contains("cannot reach the Switchyard server"),
        "{}",
        run.stderr
    );
}
