//! The happy path a new user walks, in human and in JSON output.

use super::harness::{HttpFixture, Server, scratch_dir, set_up_demo, submit_call};
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::os::unix::fs::PermissionsExt;

#[sqlx::test(migrations = false)]
async fn tour_from_workspace_to_a_finished_call(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    set_up_demo(&cli);

    let dir = scratch_dir("tour");
    let file = dir.join("echo.json");
    let call = submit_call("main", "fx", "echo", json!({"text": "hello from the tour"}));
    std::fs::write(&file, call.to_string()).expect("write call file");
    let file = file.display().to_string();

    let run = cli.run(&["mcp", "call", "demo", &file, "--wait"]).success();
    assert_eq!(run.stdout.trim_end(), "hello from the tour");

    // The same file again is the same call (request_id), not a second run.
    let again = cli.run(&["mcp", "call", "demo", &file]).success();
    assert!(again.stdout.contains("succeeded"), "{}", again.stdout);
    assert!(again.stdout.contains("existing call"), "{}", again.stdout);
    let id = again
        .stdout
        .split_whitespace()
        .next()
        .expect("call id")
        .to_owned();

    let list = cli.run(&["mcp", "status", "demo"]).success();
    let row = list
        .stdout
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{}", list.stdout));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1..5], ["succeeded", "echo", "fx", "central"], "{row}");

    let one = cli.run(&["mcp", "status", "demo", &id]).success();
    assert!(
        one.stdout
            .lines()
            .any(|l| l.starts_with("state") && l.ends_with("succeeded")),
        "{}",
        one.stdout
    );
    assert!(one.stdout.contains("hello from the tour"), "{}", one.stdout);
}

#[sqlx::test(migrations = false)]
async fn json_output_is_the_api_object(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();

    let created = cli
        .run(&["--json", "workspace", "create", "jsonws"])
        .success()
        .json();
    assert_eq!(created["name"], "jsonws");
    let id = created["id"].as_str().expect("workspace id").to_owned();
    let listed = cli.run(&["workspace", "list", "--json"]).success().json();
    assert!(
        listed
            .as_array()
            .expect("array")
            .iter()
            .any(|ws| ws["id"] == id.as_str()),
        "{listed}"
    );

    set_up_demo(&cli);
    let call = submit_call("main", "fx", "echo", json!({"text": "as json"}));
    let submitted = cli
        .run_with_stdin(
            &["--json", "mcp", "call", "demo", "-"],
            call.to_string().as_bytes(),
        )
        .success()
        .json();
    assert!(submitted["id"].is_string(), "{submitted}");
    assert_eq!(submitted["request_id"], call["request_id"]);

    let finished = cli
        .run_with_stdin(
            &["--json", "mcp", "call", "demo", "-", "--wait"],
            call.to_string().as_bytes(),
        )
        .success()
        .json();
    assert_eq!(finished["id"], submitted["id"]);
    assert_eq!(finished["state"], "succeeded");
    let text = &finished["result"]["content"][0]["text"];
    assert_eq!(text, "as json", "{finished}");

    let status = cli
        .run(&["--json", "mcp", "status", "demo"])
        .success()
        .json();
    assert_eq!(status["calls"][0]["id"], submitted["id"], "{status}");
}

#[sqlx::test(migrations = false)]
async fn import_keeps_env_names_and_never_shows_values(_: PgPoolOptions, db: PgConnectOptions) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    // An HTTP connector is imported only once its endpoint answers the MCP handshake.
    let remote = HttpFixture::start(&[], &[]);
    let config = json!({"mcpServers": {
        "imported": {"command": "/usr/bin/env", "args": ["true"], "env": {"API_KEY": "sekrit-value-123"}},
        "remote": {"url": remote.url}
    }});
    let run = cli
        .run_with_stdin(&["connector", "import", "-"], config.to_string().as_bytes())
        .success();
    assert!(run.stderr.contains("warning"), "{}", run.stderr);
    assert!(
        run.stdout.contains("imported") && run.stdout.contains("remote"),
        "{}",
        run.stdout
    );

    let list = cli.run(&["connector", "list"]).success();
    assert!(list.stdout.contains("(env: API_KEY)"), "{}", list.stdout);
    let json = cli.run(&["--json", "connector", "list"]).success();
    for text in [&run.stdout, &run.stderr, &list.stdout, &json.stdout] {
        assert!(
            !text.contains("sekrit-value-123"),
            "secret value shown: {text}"
        );
    }
}

#[sqlx::test(migrations = false)]
async fn a_connection_is_placed_with_its_credential_references(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let dir = scratch_dir("credentials");
    let bindings = dir.join("central.mcp-bindings.json");
    let secrets = dir.join("central.mcp-secrets.json");
    std::fs::write(
        &secrets,
        json!({"right": "tour-token-31d7", "wrong": "nope-nope"}).to_string(),
    )
    .expect("write the secrets file");
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600))
        .expect("chmod the secrets file");
    let server = Server::start_with_env(
        &db,
        &[(
            "SWITCHYARD_MCP_CREDENTIALS_FILE",
            bindings.to_str().expect("a UTF-8 path"),
        )],
    )
    .await;
    let cli = server.cli();
    let remote = HttpFixture::start(
        &["--bearer-env", "FIXTURE_TOKEN"],
        &[("FIXTURE_TOKEN", "tour-token-31d7")],
    );
    cli.run(&["workspace", "create", "acme"]).success();
    cli.run(&["connector", "add", "remote", "--http", &remote.url])
        .success();
    let credentials = |key: &str| {
        json!({"headers": {"Authorization":
            {"provider": "secrets_file", "key": key, "prefix": "Bearer "}}})
        .to_string()
    };
    let create = [
        "connection",
        "create",
        "acme",
        "remote",
        "--connector",
        "remote",
        "--credentials",
        "-",
    ];

    let refused = cli
        .run_with_stdin(&create, credentials("wrong").as_bytes())
        .code(4);
    assert!(
        refused.stderr.contains("refused the credential"),
        "{}",
        refused.stderr
    );
    assert!(!bindings.exists(), "a refused credential was written");

    let created = cli
        .run_with_stdin(&create, credentials("right").as_bytes())
        .success();
    assert!(
        created.stdout.contains("tools discovered"),
        "{}",
        created.stdout
    );
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&bindings).expect("the bindings file was written"))
            .expect("JSON");
    assert_eq!(
        file["bindings"].as_object().map(|b| b.len()),
        Some(1),
        "{file}"
    );
    let tools = cli.run(&["tool", "list", "acme", "remote"]).success();
    assert!(tools.stdout.contains("echo"), "{}", tools.stdout);
}
