//! Initialize before store: an HTTP connector is stored only once its endpoint answered the
//! MCP handshake, and a central connection placed with its credentials only once the
//! handshake passed with them — otherwise no row and no binding is left behind.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const TOKEN: &str = "fixture-token-5c1e9a";

/// A loopback port nothing listens on.
fn closed_port_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}/mcp")
}

/// A plain web server that answers every request with an HTML 404 page: not MCP.
async fn not_mcp_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let page = "<html><body><h1>Not Found</h1></body></html>";
                let answer = format!(
                    "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/mcp")
}

async fn connector_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM connectors")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn connection_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM connections")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = "../../migrations")]
async fn connectors_whose_handshake_fails_are_not_stored(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let owner = &server.owner;
    let not_mcp = not_mcp_url().await;
    for url in [closed_port_url(), not_mcp.clone()] {
        let message = owner
            .post(
                "/api/v1/connectors",
                json!({"name": "remote", "transport": "http", "url": url}),
            )
            .await
            .refused(422, "handshake_failed");
        assert!(message.contains("nothing was stored"), "{url}: {message}");
    }
    // An import is all or nothing: one endpoint that is not MCP refuses the lot.
    let (good, _fixture) = http_fixture(&[], &[]);
    owner
        .post(
            "/api/v1/connectors/import",
            json!({"mcpServers": {"good": {"url": good}, "bad": {"url": not_mcp}}}),
        )
        .await
        .refused(422, "handshake_failed");
    assert_eq!(connector_count(&pool).await, 0);

    // An endpoint that asks for a credential is an MCP endpoint: it is added, and the
    // credential is checked when a connection is placed with one.
    let (locked, _locked) = http_fixture(
        &["--bearer-env", "FIXTURE_TOKEN"],
        &[("FIXTURE_TOKEN", TOKEN)],
    );
    owner
        .post(
            "/api/v1/connectors/import",
            json!({"mcpServers": {"good": {"url": good}, "locked": {"url": locked}}}),
        )
        .await
        .ok();
    assert_eq!(connector_count(&pool).await, 2);

    // Editing one to point at an endpoint that is not MCP is refused the same way, and the
    // connector keeps its target.
    let message = owner
        .send(
            reqwest::Method::PATCH,
            "/api/v1/connectors/good",
            Some(json!({"transport": "http", "url": not_mcp})),
        )
        .await
        .refused(422, "handshake_failed");
    assert!(message.contains("nothing was stored"), "{message}");
    let kept = owner.get("/api/v1/connectors/good").await.ok();
    assert_eq!(kept["url"], good.as_str(), "{kept}");
}

/// A server whose central bindings file is `bindings`, next to a secrets file holding the
/// right token (`right`) and a wrong one (`wrong`).
async fn server_with_bindings(pool: PgPool, scratch: &Scratch) -> (TestServer, std::path::PathBuf) {
    let bindings = scratch.join("central.mcp-bindings.json");
    let secrets = scratch.join("central.mcp-secrets.json");
    std::fs::write(
        &secrets,
        json!({"right": TOKEN, "wrong": "not-the-token"}).to_string(),
    )
    .unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    // Another connection's binding, which every change must keep.
    std::fs::write(
        &bindings,
        json!({"bindings": {"0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5e":
            {"env": {"API_TOKEN": {"provider": "environment", "name": "OTHER_TOKEN"}}}}})
        .to_string(),
    )
    .unwrap();
    std::fs::set_permissions(&bindings, std::fs::Permissions::from_mode(0o600)).unwrap();
    let file = bindings.clone();
    let server = TestServer::start_with(pool, move |c| c.app.credentials_file = Some(file)).await;
    (server, bindings)
}

fn bearer(key: &str) -> Value {
    json!({"headers": {"Authorization":
        {"provider": "secrets_file", "key": key, "prefix": "Bearer "}}})
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_refused_credential_leaves_no_row_and_no_binding(pool: PgPool) {
    let scratch = scratch_dir("handshake-credential");
    let (server, bindings) = server_with_bindings(pool.clone(), &scratch).await;
    let owner = &server.owner;
    let (url, _fixture) = http_fixture(
        &["--bearer-env", "FIXTURE_TOKEN"],
        &[("FIXTURE_TOKEN", TOKEN)],
    );
    owner
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": url}),
        )
        .await
        .ok();
    let before = std::fs::read(&bindings).unwrap();
    let place = |credentials: Value| json!({"name": "remote", "connector": "remote", "credentials": credentials});

    // The server refuses the wrong token; a reference to nothing, or a malformed one, never
    // reaches it.
    let message = owner
        .post(
            "/api/v1/workspaces/acme/connections",
            place(bearer("wrong")),
        )
        .await
        .refused(422, "handshake_failed");
    assert!(message.contains("refused the credential"), "{message}");
    assert!(!message.contains("not-the-token"), "{message}");
    let message = owner
        .post(
            "/api/v1/workspaces/acme/connections",
            place(bearer("absent")),
        )
        .await
        .refused(422, "invalid_credentials");
    assert!(message.contains("credential_missing"), "{message}");
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            place(json!({"headers": {"Authorization": {"provider": "environment"}}})),
        )
        .await
        .refused(422, "invalid_credentials");
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            place(json!({"headers": {"Host": {"provider": "secrets_file", "key": "right"}}})),
        )
        .await
        .refused(422, "invalid_credentials");
    assert_eq!(connection_count(&pool).await, 0);
    assert_eq!(
        std::fs::read(&bindings).unwrap(),
        before,
        "the bindings file changed"
    );

    // The right token: stored, bound, discovered, and its tools answer calls.
    let created = owner
        .post(
            "/api/v1/workspaces/acme/connections",
            place(bearer("right")),
        )
        .await
        .ok();
    let id = created["id"].as_str().unwrap();
    assert!(created["last_discovery_at"].is_string(), "{created}");
    assert!(created["last_discovery_error"].is_null(), "{created}");
    let file: Value = serde_json::from_slice(&std::fs::read(&bindings).unwrap()).unwrap();
    assert_eq!(file["bindings"][id], bearer("right"), "{file}");
    assert!(
        file["bindings"]["0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5e"].is_object(),
        "another connection's binding was lost: {file}"
    );
    let mode = std::fs::metadata(&bindings).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let tools = owner
        .get("/api/v1/workspaces/acme/connections/remote/tools")
        .await
        .ok();
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .expect("echo discovered")
        .clone();
    assert!(
        echo["classification"].is_null(),
        "tools arrive unclassified: {echo}"
    );

    // A second placement under the same name is refused before the server is asked.
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            place(bearer("right")),
        )
        .await
        .refused(409, "already_exists");

    owner.classify_all("acme", "remote").await;
    owner.owner_profile("acme", "main", &["remote"]).await;
    let call = owner
        .post(
            "/api/v1/workspaces/acme/calls",
            json!({"request_id": uuid::Uuid::new_v4(), "profile_id": "main",
                   "connection_id": "remote", "tool_name": "echo",
                   "arguments": {"text": "bound at placement"}}),
        )
        .await
        .ok();
    let call = owner
        .wait_call(
            "acme",
            call["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(
        (call["state"].as_str(), result_text(&call).as_str()),
        (Some("succeeded"), "bound at placement")
    );

    // The audit log says what was bound, by destination and provider, never the reference's
    // key or a value.
    let log = owner.get("/api/v1/workspaces/acme/audit").await.ok();
    let created = log
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "connection.created")
        .expect("connection.created logged")
        .clone();
    assert_eq!(
        created["after"]["credentials"]["headers"]["Authorization"], "secrets_file",
        "{created}"
    );
    assert!(!created.to_string().contains(TOKEN), "{created}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_failed_discovery_after_the_handshake_is_stored_and_retried(pool: PgPool) {
    let scratch = scratch_dir("handshake-discovery");
    let (server, bindings) = server_with_bindings(pool, &scratch).await;
    let owner = &server.owner;
    let failing = scratch.join("fail-tools-list");
    std::fs::write(&failing, "").unwrap();
    let (url, _fixture) = http_fixture(
        &[
            "--bearer-env",
            "FIXTURE_TOKEN",
            "--fail-tools-list-file",
            failing.to_str().unwrap(),
        ],
        &[("FIXTURE_TOKEN", TOKEN)],
    );
    owner
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": url}),
        )
        .await
        .ok();
    let created = owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "remote", "connector": "remote", "credentials": bearer("right")}),
        )
        .await
        .ok();
    let error = created["last_discovery_error"]
        .as_str()
        .expect("discovery failed");
    assert!(error.contains("tools/list"), "{error}");
    let file: Value = serde_json::from_slice(&std::fs::read(&bindings).unwrap()).unwrap();
    assert!(file["bindings"][created["id"].as_str().unwrap()].is_object());

    std::fs::remove_file(&failing).unwrap();
    let discovery = owner
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
    let connection = owner
        .get("/api/v1/workspaces/acme/connections/remote")
        .await
        .ok();
    assert!(connection["last_discovery_error"].is_null(), "{connection}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn credentials_need_a_bindings_file(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let owner = &server.owner;
    let (url, _fixture) = http_fixture(&[], &[]);
    owner
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": url}),
        )
        .await
        .ok();
    let message = owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "remote", "connector": "remote", "credentials": bearer("right")}),
        )
        .await
        .refused(422, "invalid_credentials");
    assert!(message.contains("--mcp-credentials-file"), "{message}");
    assert_eq!(connection_count(&pool).await, 0);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_placement_takes_no_credentials(pool: PgPool) {
    let scratch = scratch_dir("handshake-device");
    let (server, bindings) = server_with_bindings(pool.clone(), &scratch).await;
    setup_workspace(&server, "acme", &[]).await;
    let device = crate::devices::pair_device(&server, "acme", "main").await;
    let (url, _fixture) = http_fixture(&[], &[]);
    server
        .owner
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": url}),
        )
        .await
        .ok();
    let before = std::fs::read(&bindings).unwrap();
    let message = server
        .owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "remote", "connector": "remote", "runner": device.runner,
                   "credentials": bearer("right")}),
        )
        .await
        .refused(422, "invalid_credentials");
    assert!(message.contains("bound on the device"), "{message}");
    assert_eq!(connection_count(&pool).await, 1, "only setup's connection");
    assert_eq!(std::fs::read(&bindings).unwrap(), before);
}
