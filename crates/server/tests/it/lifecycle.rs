//! Timeouts, cancellation, queue expiry, retention, rediscovery and lifecycle events.

use crate::harness::*;
use serde_json::json;
use sqlx::PgPool;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

#[sqlx::test(migrations = "../../migrations")]
async fn a_timeout_after_dispatch_is_unknown(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let mut body = call_body("slow", json!({"seconds": 30}));
    body["timeout_seconds"] = json!(1);
    let call = server
        .owner
        .post(&format!("/api/v1/workspaces/{}/calls", setup.ws), body)
        .await
        .ok();
    let done = server
        .owner
        .wait_call(&setup.ws, call["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(done["state"], "unknown", "{done}");
    assert_eq!(done["error"]["code"], "timeout");
    assert!(done["started_at"].is_string());
}

#[sqlx::test(migrations = "../../migrations")]
async fn queued_calls_cancel_at_once_and_finished_ones_say_so(pool: PgPool) {
    hold_central_runner(&pool).await;
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let ws = &setup.ws;
    let call = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls"),
            call_body("echo", json!({"text": "x"})),
        )
        .await
        .ok();
    let id = call["id"].as_str().unwrap();
    let cancel = format!("/api/v1/workspaces/{ws}/calls/{id}/cancel");
    let answer = server.owner.post(&cancel, json!({})).await.ok();
    assert_eq!(
        (answer["outcome"].as_str(), answer["call"]["state"].as_str()),
        (Some("cancelled"), Some("cancelled"))
    );
    let again = server.owner.post(&cancel, json!({})).await.ok();
    assert_eq!(
        (again["outcome"].as_str(), again["call"]["state"].as_str()),
        (Some("already_finished"), Some("cancelled"))
    );
    // Cancelling needs Use like reading does.
    let bob = server.user("bob").await;
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/members"),
            json!({"user": "bob"}),
        )
        .await
        .ok();
    bob.post(&cancel, json!({})).await.refused(403, "forbidden");
}

#[sqlx::test(migrations = "../../migrations")]
async fn calls_nobody_runs_expire(pool: PgPool) {
    hold_central_runner(&pool).await;
    let server =
        TestServer::start_with(pool, |c| c.sweeper.queue_expiry = Duration::from_secs(1)).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let call = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{}/calls", setup.ws),
            call_body("echo", json!({"text": "x"})),
        )
        .await
        .ok();
    let done = server
        .owner
        .wait_call(&setup.ws, call["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(done["state"], "expired");
    assert_eq!(done["error"]["code"], "queue_expired");
}

#[sqlx::test(migrations = "../../migrations")]
async fn results_expire_to_a_minimal_disposition_and_replays_answer_gone(pool: PgPool) {
    let server =
        TestServer::start_with(pool, |c| c.sweeper.retention = Duration::from_secs(1)).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let body = call_body("echo", json!({"text": "short-lived"}));
    let call = server.owner.post(&calls, body.clone()).await.ok();
    let id = call["id"].as_str().unwrap();
    assert_eq!(
        server.owner.wait_call(&setup.ws, id, WAIT).await["state"],
        "succeeded"
    );

    let deadline = Instant::now() + WAIT;
    let expired = loop {
        let view = server.owner.get(&format!("{calls}/{id}")).await.ok();
        if view["retention_expired_at"].is_string() {
            break view;
        }
        assert!(
            Instant::now() < deadline,
            "retention never erased the result"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(expired["state"], "succeeded");
    assert!(expired["result"].is_null() && expired["arguments"].is_null());
    assert!(!expired.to_string().contains("short-lived"));
    let message = server
        .owner
        .post(&calls, body)
        .await
        .refused(410, "mcp_replay_expired");
    assert!(message.contains("fresh request_id"), "{message}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn rediscovery_marks_vanished_tools_unavailable_and_refuses_them(pool: PgPool) {
    let scratch = scratch_dir("rediscover");
    let hidden = scratch.path("hidden");
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &["--hide-tools-file", &hidden]).await;
    let ws = &setup.ws;
    std::fs::write(&hidden, "big\n").unwrap();
    let discovery = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/connections/fixture/discover"),
            json!({}),
        )
        .await
        .ok();
    let big = discovery["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "big")
        .expect("kept, not deleted");
    assert_eq!(big["available"], false);
    assert_eq!(big["state"], "unavailable");
    assert_eq!(big["classification"]["risk"], "low", "kept: {big}");
    let message = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls"),
            call_body("big", json!({"bytes": 1})),
        )
        .await
        .refused(409, "tool_unavailable");
    assert!(message.contains("no longer offered"), "{message}");

    std::fs::remove_file(&hidden).unwrap();
    let discovery = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/connections/fixture/discover"),
            json!({}),
        )
        .await
        .ok();
    let big = discovery["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "big")
        .unwrap();
    assert_eq!(big["available"], true);
    assert_eq!(
        big["state"], "classified",
        "back with its classification: {big}"
    );

    let events = server
        .owner
        .get(&format!(
            "/api/v1/workspaces/{ws}/connections/fixture/events"
        ))
        .await
        .ok();
    let kinds: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == "discovery_succeeded")
            .count(),
        3,
        "{kinds:?}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_connection_keeps_its_last_200_events(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let db = switchyard_server::db::Datastore::new(pool);
    let connection: switchyard_protocol::ConnectionId =
        sqlx::query_scalar("SELECT id FROM connections")
            .fetch_one(db.pool())
            .await
            .unwrap();
    for i in 0..210 {
        db.event_record(
            connection,
            "session_closed",
            &json!({"n": i}),
            Some(switchyard_protocol::RunnerRef::Central),
        )
        .await
        .unwrap();
    }
    let events = server
        .owner
        .get("/api/v1/workspaces/acme/connections/fixture/events")
        .await
        .ok();
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), 200);
    assert_eq!(events[0]["detail"]["n"], 209, "newest first");
    assert_eq!(events[199]["detail"]["n"], 10);
}
