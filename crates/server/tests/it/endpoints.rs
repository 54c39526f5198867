//! The endpoint guard through the API: HTTP connectors pointing at addresses the installation
//! does not let its runner reach are refused before anything is stored, the allow-list admits
//! what it names, a redirect into a blocked range is not followed, and the central runner
//! judges the endpoint again when it connects for a call.

use crate::harness::*;
use reqwest::Method;
use serde_json::json;
use sqlx::PgPool;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use switchyard_mcp_runner::endpoints::{AllowList, EndpointGuard};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server whose allow-list is `allow` (nothing: public addresses only). Its handshakes give
/// up after two seconds: an admitted address where nothing answers fails quickly.
async fn guarded(pool: PgPool, allow: &[&str]) -> TestServer {
    let allow = AllowList::parse(allow.iter().copied()).expect("valid allow-list");
    TestServer::start_with(pool, |config| {
        config.app.endpoints = EndpointGuard::public(allow);
        config.app.discovery_deadline = Duration::from_secs(2);
    })
    .await
}

async fn connector_names(server: &TestServer) -> Vec<String> {
    let list = server.owner.get("/api/v1/connectors").await.ok();
    list.as_array()
        .expect("a list")
        .iter()
        .map(|c| c["name"].as_str().expect("a name").to_owned())
        .collect()
}

#[sqlx::test(migrations = "../../migrations")]
async fn connectors_at_blocked_addresses_are_refused_and_not_stored(pool: PgPool) {
    let server = guarded(pool, &[]).await;
    for url in [
        "http://127.0.0.1:9/mcp",
        "http://localhost:9/mcp",
        "http://[::1]:9/mcp",
        "http://10.0.0.5/mcp",
        "http://169.254.169.254/latest/meta-data",
        "http://[::ffff:169.254.169.254]/mcp",
        "http://100.64.0.1/mcp",
        "http://[fd00::1]/mcp",
        "http://0.0.0.0:9/mcp",
    ] {
        let message = server
            .owner
            .post(
                "/api/v1/connectors",
                json!({"name": "remote", "transport": "http", "url": url}),
            )
            .await
            .refused(422, "endpoint_blocked");
        assert!(message.contains("--allow-endpoint"), "{url}: {message}");
    }
    // Nor through an import, nor by editing a connector that was allowed.
    server
        .owner
        .post(
            "/api/v1/connectors/import",
            json!({"mcpServers": {"meta": {"url": "http://169.254.169.254/"}}}),
        )
        .await
        .refused(422, "endpoint_blocked");
    assert!(connector_names(&server).await.is_empty());

    server
        .owner
        .post(
            "/api/v1/connectors",
            json!({"name": "files", "transport": "stdio", "command": "/bin/true"}),
        )
        .await
        .ok();
    server
        .owner
        .send(
            Method::PATCH,
            "/api/v1/connectors/files",
            Some(json!({"transport": "http", "url": "http://192.168.1.1/mcp"})),
        )
        .await
        .refused(422, "endpoint_blocked");
    let files = server.owner.get("/api/v1/connectors/files").await.ok();
    assert_eq!(files["transport"], "stdio", "{files}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_allow_list_admits_what_it_names_and_nothing_else(pool: PgPool) {
    let server = guarded(pool, &["127.0.0.0/8", "10.2.0.0/16"]).await;
    let (url, _fixture) = http_fixture(&[], &[]);
    let port = url::Url::parse(&url).unwrap().port().unwrap();
    for (name, url) in [
        ("loop", url.clone()),
        ("named", format!("http://localhost:{port}/mcp")),
    ] {
        server
            .owner
            .post(
                "/api/v1/connectors",
                json!({"name": name, "transport": "http", "url": url}),
            )
            .await
            .ok();
    }
    // Admitted by the guard, then refused only because no MCP server answers there.
    let message = server
        .owner
        .post(
            "/api/v1/connectors",
            json!({"name": "lan", "transport": "http", "url": "http://10.2.3.4/mcp"}),
        )
        .await
        .refused(422, "handshake_failed");
    assert!(!message.contains("--allow-endpoint"), "{message}");
    server
        .owner
        .post(
            "/api/v1/connectors",
            json!({"name": "other", "transport": "http", "url": "http://10.3.0.1/mcp"}),
        )
        .await
        .refused(422, "endpoint_blocked");
    let mut names = connector_names(&server).await;
    names.sort();
    assert_eq!(names, ["loop", "named"]);
}

/// A plain TCP server that counts the connections it accepts and closes them.
async fn counting_listener() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (format!("http://{addr}/mcp"), count)
}

/// An HTTP server on 127.0.0.2 that answers every request with a 307 to `target`.
async fn redirecting_to(target: String) -> String {
    let listener = TcpListener::bind("127.0.0.2:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nLocation: {target}\r\n\
                     Content-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/mcp")
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_redirect_into_a_blocked_range_is_not_followed(pool: PgPool) {
    // Only the redirecting server's address is allowed; the target on 127.0.0.1 is not.
    let server = guarded(pool, &["127.0.0.2/32"]).await;
    let (target, reached) = counting_listener().await;
    let url = redirecting_to(target).await;
    let owner = &server.owner;
    owner
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    // Adding it: the handshake meets the redirect and refuses it.
    let message = owner
        .post(
            "/api/v1/connectors",
            json!({"name": "hop", "transport": "http", "url": url}),
        )
        .await
        .refused(422, "endpoint_blocked");
    assert!(message.contains("127.0.0.1"), "{message}");
    assert!(connector_names(&server).await.is_empty());
    // Nor by editing a connector to point there: the edit's handshake refuses it too.
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "hop", "transport": "stdio", "command": "/bin/true"}),
        )
        .await
        .ok();
    owner
        .send(
            Method::PATCH,
            "/api/v1/connectors/hop",
            Some(json!({"transport": "http", "url": url})),
        )
        .await
        .refused(422, "endpoint_blocked");
    // A connector stored there before these checks existed (written as an older release
    // would have): its discovery meets the redirect and refuses it.
    sqlx::query("UPDATE connectors SET transport = 'http', url = $1, command = NULL, args = '[]' WHERE name = 'hop'")
        .bind(&url)
        .execute(&server.pool)
        .await
        .unwrap();
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "hop", "connector": "hop"}),
        )
        .await
        .ok();
    let message = owner
        .post(
            "/api/v1/workspaces/acme/connections/hop/discover",
            json!({}),
        )
        .await
        .refused(422, "endpoint_blocked");
    assert!(message.contains("127.0.0.1"), "{message}");
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "the blocked target was reached"
    );
}

/// The guard judges the endpoint again each time the central runner connects: a connector
/// admitted under one allow-list is refused by a server started without it, and its call ends
/// `failed` with `endpoint_blocked`, the MCP server never reached.
#[sqlx::test(migrations = "../../migrations")]
async fn a_central_call_is_refused_when_its_endpoint_is_no_longer_allowed(pool: PgPool) {
    let scratch = scratch_dir("endpoint-at-call");
    let counter = scratch.path("count");
    let mut fixture = std::process::Command::new(fixture_bin())
        .args(["http", "--listen", "127.0.0.1:0", "--count-file", &counter])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = read_announcement(&mut fixture, "listening on");
    let _fixture = ChildGuard(fixture);

    let first = guarded(pool, &["127.0.0.1/32"]).await;
    let owner = &first.owner;
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
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "fixture", "connector": "remote"}),
        )
        .await
        .ok();
    owner.make_callable("acme", "fixture", "main").await;
    let call = owner
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("count", json!({"label": "allowed"})),
        )
        .await
        .ok();
    let done = owner
        .wait_call(
            "acme",
            call["id"].as_str().unwrap(),
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(count_lines(&counter), 1);

    // The same installation restarted with an allow-list that no longer names the address.
    let second = TestServer::replica_with(&first, |config| {
        config.app.endpoints = EndpointGuard::public(AllowList::parse([]).unwrap());
    })
    .await;
    first.stop().await;
    let owner = &second.owner;
    let call = owner
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("count", json!({"label": "blocked"})),
        )
        .await
        .ok();
    let done = owner
        .wait_call(
            "acme",
            call["id"].as_str().unwrap(),
            Duration::from_secs(30),
        )
        .await;
    assert_eq!(done["state"], "failed", "{done}");
    assert_eq!(done["error"]["code"], "endpoint_blocked", "{done}");
    assert!(
        done["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("127.0.0.1")),
        "{done}"
    );
    assert_eq!(count_lines(&counter), 1, "the MCP server was reached");
}
