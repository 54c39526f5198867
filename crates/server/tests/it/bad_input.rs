//! Bad input gets a stable code and a message saying what to fix, and writes nothing.

use crate::harness::*;
use serde_json::json;
use sqlx::PgPool;

#[sqlx::test(migrations = "../../migrations")]
async fn bad_call_submissions_are_refused_and_write_nothing(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let owner = &server.owner;

    owner
        .send_raw(&calls, "{\"request_id\": ")
        .await
        .refused(400, "invalid_json");
    let mut missing = call_body("echo", json!({}));
    missing.as_object_mut().unwrap().remove("tool_name");
    let message = owner
        .post(&calls, missing)
        .await
        .refused(400, "invalid_request");
    assert!(message.contains("tool_name"), "{message}");
    let mut bad_id = call_body("echo", json!({}));
    bad_id["request_id"] = json!("not-a-uuid");
    owner
        .post(&calls, bad_id)
        .await
        .refused(400, "invalid_request");
    owner
        .post(&calls, call_body("echo", json!(["text"])))
        .await
        .refused(400, "invalid_arguments");
    for timeout in [0, 3601] {
        let mut body = call_body("echo", json!({}));
        body["timeout_seconds"] = json!(timeout);
        let message = owner
            .post(&calls, body)
            .await
            .refused(400, "invalid_timeout");
        assert!(message.contains("between 1 and 3600"), "{message}");
    }
    let mut body = call_body("echo", json!({}));
    body["profile_id"] = json!("nope");
    owner
        .post(&calls, body)
        .await
        .refused(404, "profile_not_found");
    let mut body = call_body("echo", json!({}));
    body["connection_id"] = json!("nope");
    owner
        .post(&calls, body)
        .await
        .refused(404, "connection_not_found");
    let message = owner
        .post(&calls, call_body("no_such_tool", json!({})))
        .await
        .refused(404, "tool_not_found");
    assert!(message.contains("connection discover"), "{message}");
    owner
        .post(
            "/api/v1/workspaces/nowhere/calls",
            call_body("echo", json!({})),
        )
        .await
        .refused(404, "workspace_not_found");
    owner
        .post("/api/v1/workspaces", json!({"name": "bad name!"}))
        .await
        .refused(400, "invalid_name");
    owner
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .refused(409, "already_exists");

    let rows = calls_stored(&pool).await;
    assert_eq!(rows, 0, "a refused submission left a call behind");
}

#[sqlx::test(migrations = "../../migrations")]
async fn unapproved_and_unlisted_connections_are_refused_before_queueing(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let owner = &server.owner;
    let ws = &setup.ws;
    // A second connection outside the profile.
    owner
        .post(
            &format!("/api/v1/workspaces/{ws}/connections"),
            json!({"name": "other", "connector": format!("fixture-{ws}")}),
        )
        .await
        .ok();
    let mut body = call_body("echo", json!({}));
    body["connection_id"] = json!("other");
    owner
        .post(&format!("/api/v1/workspaces/{ws}/calls"), body)
        .await
        .refused(422, "connection_not_in_profile");

    let mut body = call_body("echo", json!({}));
    body["environment_id"] = json!("nope");
    owner
        .post(&format!("/api/v1/workspaces/{ws}/calls"), body)
        .await
        .refused(404, "environment_not_found");
    owner
        .post(
            &format!("/api/v1/workspaces/{ws}/environments"),
            json!({"name": "prod"}),
        )
        .await
        .ok();
    let mut body = call_body("echo", json!({}));
    body["environment_id"] = json!("prod");
    owner
        .post(&format!("/api/v1/workspaces/{ws}/calls"), body)
        .await
        .refused(422, "environment_mismatch");

    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "bad", "transport": "stdio", "command": ""}),
        )
        .await
        .refused(400, "invalid_connector");
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "bad", "transport": "http", "url": "ftp://x"}),
        )
        .await
        .refused(400, "invalid_connector");
    owner
        .post(
            &format!("/api/v1/workspaces/{ws}/connections"),
            json!({"name": "dev", "connector": format!("fixture-{ws}"), "runner": "elsewhere"}),
        )
        .await
        .refused(400, "invalid_request");
    let rows = calls_stored(&pool).await;
    assert_eq!(rows, 0);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_client_session_id_is_bounded_and_plain(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let longest = "s".repeat(128);
    let too_long = "s".repeat(129);
    for bad in [
        too_long.as_str(),
        "",
        "<script>alert(1)</script>",
        "a b",
        "ünïcode",
    ] {
        let mut body = call_body("echo", json!({"text": "x"}));
        body["client_session_id"] = json!(bad);
        let message = server
            .owner
            .post(&calls, body)
            .await
            .refused(400, "invalid_request");
        assert!(message.contains("client_session_id"), "{message}");
        assert!(!message.contains("<script>"), "shown inert: {message}");
    }
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM calls")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0, "nothing was queued");

    let mut body = call_body("echo", json!({"text": "x"}));
    body["client_session_id"] = json!(format!("{longest}"));
    server.owner.post(&calls, body).await.ok();
    let release = format!("/api/v1/workspaces/acme/sessions/{too_long}/release");
    server
        .owner
        .post(&release, json!({}))
        .await
        .refused(400, "invalid_request");
    let release = "/api/v1/workspaces/acme/sessions/ci:job-7.run_2/release";
    server.owner.post(release, json!({})).await.ok();
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_connector_url_with_a_password_is_refused_and_not_echoed(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    for url in [
        "https://deploy:hunter22@mcp.example.test/mcp",
        "http://hunter22@mcp.example.test/mcp",
    ] {
        let message = server
            .owner
            .post(
                "/api/v1/connectors",
                json!({"name": "remote", "transport": "http", "url": url}),
            )
            .await
            .refused(400, "invalid_connector");
        assert!(!message.contains("hunter22"), "{message}");
        assert!(
            message.contains("header"),
            "says what to do instead: {message}"
        );
    }
    server
        .owner
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": "ftp://mcp.example.test/"}),
        )
        .await
        .refused(400, "invalid_connector");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM connectors")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
    let (url, _fixture) = http_fixture(&[], &[]);
    server
        .owner
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": url}),
        )
        .await
        .ok();
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_body_over_the_limit_is_refused_with_413_and_stores_nothing(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let huge = "x".repeat(3 * 1024 * 1024);
    let message = server
        .owner
        .post(&calls, call_body("echo", json!({ "text": huge })))
        .await
        .refused(413, "body_too_large");
    assert!(message.contains("MiB"), "{message}");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM calls")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
    // One MiB of arguments is within the limit.
    let big = "x".repeat(1024 * 1024);
    server
        .owner
        .post(&calls, call_body("echo", json!({ "text": big })))
        .await
        .ok();
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_client_that_sends_its_head_slowly_is_dropped(pool: PgPool) {
    use std::time::{Duration, Instant};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = TestServer::start_with(pool, |c| {
        c.http.header_read_timeout = Duration::from_secs(1);
    })
    .await;
    let mut slow = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    slow.write_all(b"GET /healthz HT").await.unwrap();
    let began = Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), slow.read_to_end(&mut rest))
        .await
        .expect("the server closes the connection");
    assert!(
        began.elapsed() >= Duration::from_millis(900),
        "not before the timeout"
    );
    assert!(
        read.is_err() || !String::from_utf8_lossy(&rest).contains("200 OK"),
        "no answer to a head never finished: {:?}",
        String::from_utf8_lossy(&rest)
    );
    // Others are served meanwhile and after.
    server.owner.get("/api/v1/me").await.ok();
}
