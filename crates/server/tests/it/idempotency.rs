//! request_id idempotency: retries return the same call, conflicting reuse is refused, and
//! concurrent duplicates create exactly one call and one execution.

use crate::harness::*;
use serde_json::json;
use sqlx::PgPool;
use std::time::Duration;

#[sqlx::test(migrations = "../../migrations")]
async fn a_retry_returns_the_same_call_and_a_changed_payload_conflicts(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let body = call_body("echo", json!({"text": "once", "nested": {"b": 1, "a": 2}}));

    let first = server.owner.post(&calls, body.clone()).await;
    assert_eq!(first.status.as_u16(), 201);
    let first = first.ok();
    // The same payload with keys in another order and names swapped for ids is the same call.
    let profile_id = server
        .owner
        .get(&format!("/api/v1/workspaces/{}/profiles/main", setup.ws))
        .await
        .ok()["id"]
        .clone();
    let mut retry = body.clone();
    retry["profile_id"] = profile_id;
    retry["arguments"] = json!({"nested": {"a": 2, "b": 1}, "text": "once"});
    let again = server.owner.post(&calls, retry).await;
    assert_eq!(again.status.as_u16(), 200);
    assert_eq!(again.ok()["id"], first["id"]);

    let mut changed = body.clone();
    changed["arguments"] = json!({"text": "twice"});
    let message = server
        .owner
        .post(&calls, changed)
        .await
        .refused(422, "mcp_request_conflict");
    assert!(message.contains("fresh request_id"), "{message}");
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM calls")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 1);
}

#[sqlx::test(migrations = "../../migrations")]
async fn fifty_concurrent_duplicates_create_one_call_and_one_execution(pool: PgPool) {
    let scratch = Scratch::new("dupes");
    let counter = scratch.path("count");
    let server = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&server, "acme", &["--count-file", &counter]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let body = call_body("count", json!({"label": "dupe"}));

    let submissions = (0..50).map(|_| {
        let client = server.owner.clone();
        let (calls, body) = (calls.clone(), body.clone());
        tokio::spawn(async move { client.post(&calls, body).await })
    });
    let mut ids = std::collections::HashSet::new();
    let mut created = 0;
    for answer in futures::future::join_all(submissions).await {
        let answer = answer.unwrap();
        if answer.status.as_u16() == 201 {
            created += 1;
        }
        ids.insert(answer.ok()["id"].as_str().unwrap().to_owned());
    }
    assert_eq!((ids.len(), created), (1, 1));
    let id = ids.into_iter().next().unwrap();
    assert_eq!(
        server
            .owner
            .wait_call(&setup.ws, &id, Duration::from_secs(60))
            .await["state"],
        "succeeded"
    );
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM calls")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 1);
    assert_eq!(count_lines(&counter), 1, "the tool ran more than once");
    // The executed request carried the request_id to the MCP server.
    let line = std::fs::read_to_string(&counter).unwrap();
    assert!(
        line.contains(body["request_id"].as_str().unwrap()),
        "{line}"
    );
}
