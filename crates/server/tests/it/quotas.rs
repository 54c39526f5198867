//! Per-workspace quotas on queued and running calls: a submission past one is refused with
//! 429 `quota_exceeded`, saying which quota, and nothing is queued.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::Duration;
use switchyard_server::db::CallQuotas;

const WAIT: Duration = Duration::from_secs(60);

/// A server whose central runner runs one call at a time, with `quotas`.
async fn server_with(pool: PgPool, quotas: CallQuotas) -> TestServer {
    TestServer::start_with(pool, |config| {
        config.app.quotas = quotas;
        config.central.executor.max_concurrent = 1;
    })
    .await
}

/// Submits a long `slow` call and waits until it runs: it holds the central runner's place.
async fn hold_the_runner(server: &TestServer, ws: &str) -> String {
    let mut body = call_body("slow", json!({"seconds": 600}));
    body["timeout_seconds"] = json!(3600);
    let call = server
        .owner
        .post(&format!("/api/v1/workspaces/{ws}/calls"), body)
        .await
        .ok();
    let id = call["id"].as_str().unwrap().to_owned();
    server
        .owner
        .wait_call_until(ws, &id, WAIT, |call| call["state"] == "running")
        .await;
    id
}

/// Cancels the held call and waits for it to settle, so that the server stops cleanly.
async fn release_the_runner(server: &TestServer, ws: &str, id: &str) {
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls/{id}/cancel"),
            json!({}),
        )
        .await
        .ok();
    server.owner.wait_call(ws, id, WAIT).await;
}

async fn calls_stored(pool: &PgPool, request_id: &Value) -> i64 {
    let request_id: uuid::Uuid = request_id.as_str().unwrap().parse().unwrap();
    sqlx::query_scalar("SELECT count(*) FROM calls WHERE request_id = $1")
        .bind(request_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_submission_past_the_queued_quota_is_refused_and_stores_nothing(pool: PgPool) {
    let quotas = CallQuotas {
        max_queued: 2,
        ..CallQuotas::default()
    };
    let server = server_with(pool.clone(), quotas).await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    let held = hold_the_runner(&server, ws).await;
    let path = format!("/api/v1/workspaces/{ws}/calls");
    let mut queued = Vec::new();
    for _ in 0..2 {
        let call = server
            .owner
            .post(&path, call_body("echo", json!({"text": "x"})))
            .await
            .ok();
        assert_eq!(call["state"], "queued", "{call}");
        queued.push(call["id"].as_str().unwrap().to_owned());
    }

    let third = call_body("echo", json!({"text": "x"}));
    let message = server
        .owner
        .post(&path, third.clone())
        .await
        .refused(429, "quota_exceeded");

    assert!(
        message.contains("at most 2 queued calls")
            && message.contains("--max-queued-per-workspace"),
        "{message}"
    );
    assert_eq!(calls_stored(&pool, &third["request_id"]).await, 0);
    release_the_runner(&server, ws, &held).await;
    for id in &queued {
        server.owner.wait_call(ws, id, WAIT).await;
    }
    // Once the queue drains, the same request is accepted.
    let accepted = server.owner.post(&path, third.clone()).await.ok();
    assert_eq!(
        calls_stored(&pool, &third["request_id"]).await,
        1,
        "{accepted}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_workspace_at_its_running_quota_queues_nothing_more(pool: PgPool) {
    let quotas = CallQuotas {
        max_running: 1,
        ..CallQuotas::default()
    };
    let server = server_with(pool.clone(), quotas).await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    let held = hold_the_runner(&server, ws).await;

    let next = call_body("echo", json!({"text": "x"}));
    let message = server
        .owner
        .post(&format!("/api/v1/workspaces/{ws}/calls"), next.clone())
        .await
        .refused(429, "quota_exceeded");

    assert!(
        message.contains("at most 1 leased or running calls")
            && message.contains("--max-running-per-workspace"),
        "{message}"
    );
    assert_eq!(calls_stored(&pool, &next["request_id"]).await, 0);
    release_the_runner(&server, ws, &held).await;
}

/// Calls held for a person count toward the queued quota: unanswered questions cannot pile up
/// past it, and answering one makes room again.
#[sqlx::test(migrations = "../../migrations")]
async fn calls_awaiting_approval_count_toward_the_queued_quota(pool: PgPool) {
    let quotas = CallQuotas {
        max_queued: 2,
        ..CallQuotas::default()
    };
    let server = server_with(pool.clone(), quotas).await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    server
        .owner
        .put(
            &format!("/api/v1/workspaces/{ws}/profiles/main/approval-policy"),
            json!({"connection": "fixture", "tool": "echo", "policy": "always"}),
        )
        .await
        .ok();
    let path = format!("/api/v1/workspaces/{ws}/calls");
    let mut held = Vec::new();
    for _ in 0..2 {
        let call = server
            .owner
            .post(&path, call_body("echo", json!({"text": "x"})))
            .await
            .ok();
        assert_eq!(call["state"], "awaiting_approval", "{call}");
        held.push(call["id"].as_str().unwrap().to_owned());
    }
    let third = call_body("echo", json!({"text": "x"}));
    let message = server
        .owner
        .post(&path, third.clone())
        .await
        .refused(429, "quota_exceeded");
    assert!(message.contains("awaiting approval"), "{message}");
    assert_eq!(calls_stored(&pool, &third["request_id"]).await, 0);

    // Cancelling a question makes room for the next.
    server
        .owner
        .post(&format!("{path}/{}/cancel", held[0]), json!({}))
        .await
        .ok();
    let accepted = server.owner.post(&path, third.clone()).await.ok();
    assert_eq!(accepted["state"], "awaiting_approval", "{accepted}");
}
