//! Streamable HTTP connectors: a header credential from the central bindings file reaches the
//! MCP server and nothing else — not the database, not the logs, not a result.

use crate::harness::*;
use serde_json::json;
use sqlx::PgPool;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::Duration;
use switchyard_server::app::{App, AppConfig};
use switchyard_server::db::Datastore;

const CANARY: &str = "canary-7f3a9c41d2e8b6";

#[sqlx::test(migrations = "../../migrations")]
async fn a_header_credential_reaches_the_server_and_is_stored_nowhere(pool: PgPool) {
    let scratch = scratch_dir("http-canary");
    let bindings = scratch.path("central.mcp-bindings.json");
    let secrets = scratch.path("central.mcp-secrets.json");
    std::fs::write(&secrets, json!({"fixture-token": CANARY}).to_string()).unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();

    // The MCP server demands the bearer token; it learns it from its own environment.
    let mut fixture = Command::new(fixture_bin())
        .args([
            "http",
            "--listen",
            "127.0.0.1:0",
            "--bearer-env",
            "FIXTURE_TOKEN",
        ])
        .env("FIXTURE_TOKEN", CANARY)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = read_announcement(&mut fixture, "listening on");
    let _fixture = ChildGuard(fixture);

    let app = App::new(Datastore::new(pool.clone()), AppConfig::default());
    let (_, token) = app.user_create("owner", true).await.unwrap();
    let log = scratch.path("server.log");
    let mut server = Command::new(env!("CARGO_BIN_EXE_switchyard-server"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--allow-endpoint",
            "127.0.0.1",
        ])
        .env("DATABASE_URL", database_url_of(&pool))
        .env("SWITCHYARD_MCP_CREDENTIALS_FILE", &bindings)
        .env("SWITCHYARD_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let base = read_announcement(&mut server, "listening on");
    let server = ChildGuard(server);
    let client = Client::at(&base, &token);

    client
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    client
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": url}),
        )
        .await
        .ok();
    let connection = client
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "remote", "connector": "remote"}),
        )
        .await
        .ok();
    // Without a binding the server refuses us, and says so without any value.
    let refused = client
        .post(
            "/api/v1/workspaces/acme/connections/remote/discover",
            json!({}),
        )
        .await;
    refused.refused(502, "discovery_failed");

    std::fs::write(
        &bindings,
        json!({"bindings": {connection["id"].as_str().unwrap(): {"headers": {"Authorization":
            {"provider": "secrets_file", "key": "fixture-token", "prefix": "Bearer "}}}}})
        .to_string(),
    )
    .unwrap();
    std::fs::set_permissions(&bindings, std::fs::Permissions::from_mode(0o600)).unwrap();
    let discovery = client
        .post(
            "/api/v1/workspaces/acme/connections/remote/discover",
            json!({}),
        )
        .await
        .ok();
    assert!(
        discovery["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo")
    );
    client.classify_all("acme", "remote").await;
    client.owner_profile("acme", "main", &["remote"]).await;

    let body = |tool: &str, arguments: serde_json::Value| {
        json!({"request_id": uuid::Uuid::new_v4(), "profile_id": "main", "connection_id": "remote",
               "tool_name": tool, "arguments": arguments})
    };
    let echo = client
        .post(
            "/api/v1/workspaces/acme/calls",
            body("echo", json!({"text": "over http"})),
        )
        .await
        .ok();
    let echo = client
        .wait_call(
            "acme",
            echo["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(
        (echo["state"].as_str(), result_text(&echo).as_str()),
        (Some("succeeded"), "over http")
    );

    // The MCP server echoes the secret back: the retained result holds only the redaction.
    let leak = client
        .post(
            "/api/v1/workspaces/acme/calls",
            body("env", json!({"name": "FIXTURE_TOKEN"})),
        )
        .await
        .ok();
    let leak = client
        .wait_call(
            "acme",
            leak["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(leak["state"], "succeeded");
    assert_eq!(result_text(&leak), "[REDACTED]");

    drop(server);
    let dump = dump_database(&pool).await;
    assert!(
        dump.contains("over http"),
        "the dump should hold the retained results"
    );
    assert!(!dump.contains(CANARY), "the secret reached the database");
    let logs = std::fs::read_to_string(&log).unwrap();
    assert!(logs.contains("listening"), "the server log was captured");
    assert!(!logs.contains(CANARY), "the secret reached the logs");
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_reference_server_works_over_streamable_http(pool: PgPool) {
    let script = std::env::var("SWITCHYARD_TEST_EVERYTHING").expect("set by scripts/test.sh");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let everything = Command::new("node")
        .args([script.as_str(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _everything = ChildGuard(everything);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "server-everything did not listen on {port}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let server = TestServer::start(pool).await;
    let owner = &server.owner;
    owner
        .post("/api/v1/workspaces", json!({"name": "interop"}))
        .await
        .ok();
    owner
        .post("/api/v1/connectors", json!({"name": "everything", "transport": "http", "url": format!("http://127.0.0.1:{port}/mcp")}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/interop/connections",
            json!({"name": "everything", "connector": "everything"}),
        )
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/interop/connections/everything/discover",
            json!({}),
        )
        .await
        .ok();
    owner.classify_all("interop", "everything").await;
    owner.owner_profile("interop", "p", &["everything"]).await;
    let call = owner
        .post(
            "/api/v1/workspaces/interop/calls",
            json!({"request_id": uuid::Uuid::new_v4(), "profile_id": "p", "connection_id": "everything",
                   "tool_name": "echo", "arguments": {"message": "over streamable http"}}),
        )
        .await
        .ok();
    let done = owner
        .wait_call(
            "interop",
            call["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(result_text(&done), "Echo: over streamable http");
}
