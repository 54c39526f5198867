//! Warm sessions and the connection's lifecycle: releasing a session key and reading events.

use super::harness::{Server, set_up_demo};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

#[sqlx::test(migrations = false)]
async fn releasing_a_session_lists_the_connections_draining(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    set_up_demo(&cli);
    let connections = cli
        .run(&["--json", "connection", "list", "demo"])
        .success()
        .json();
    let fx = connections[0]["id"].as_str().expect("connection id");

    // No call ever opened a session with this key: releasing it is still accepted.
    let run = cli
        .run(&["mcp", "release", "demo", "s-never-used"])
        .success();
    assert_eq!(
        run.stdout.trim_end(),
        "session s-never-used: draining on fx (active calls finish, then the sessions close)"
    );

    let answer = cli
        .run(&[
            "--json",
            "mcp",
            "release",
            "demo",
            "s-never-used",
            "--connection",
            "fx",
        ])
        .success()
        .json();
    assert_eq!(answer["client_session_id"], "s-never-used", "{answer}");
    assert_eq!(
        answer["connection_ids"],
        serde_json::json!([fx]),
        "{answer}"
    );

    let run = cli
        .run(&["mcp", "release", "demo", "s1", "--connection", "nope"])
        .code(4);
    assert!(run.stderr.starts_with("error["), "{}", run.stderr);
}

#[sqlx::test(migrations = false)]
async fn connection_events_show_discovery(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    set_up_demo(&cli);

    let run = cli.run(&["connection", "events", "demo", "fx"]).success();
    let mut lines = run.stdout.lines();
    let header: Vec<&str> = lines
        .next()
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    assert_eq!(
        header,
        ["TIME", "KIND", "DETAILS", "RUNNER"],
        "{}",
        run.stdout
    );
    let row = lines
        .find(|l| l.contains("discovery_succeeded"))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1], "discovery_succeeded", "{row}");
    // What the discovery changed in the catalog: all of it was new.
    assert!(
        cells[2].starts_with("added=") && cells.iter().any(|c| c.starts_with("tools=")),
        "{row}"
    );
    // The server discovers on its own, not through a runner.
    assert_eq!(cells.last(), Some(&"-"), "{row}");

    let events = cli
        .run(&["--json", "connection", "events", "demo", "fx"])
        .success()
        .json();
    let discovery = events
        .as_array()
        .expect("array")
        .iter()
        .find(|e| e["kind"] == "discovery_succeeded")
        .unwrap_or_else(|| panic!("{events}"));
    assert!(discovery["detail"]["tools"].as_u64() > Some(0), "{events}");
}
