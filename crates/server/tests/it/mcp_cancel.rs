//! Cancellation of `/mcp` tool calls by their clients, whichever replica hears it: a
//! session's `notifications/cancelled` (2025-11-25) sent to another replica, or before the
//! request it names, and a stateless client (2026-07-28) closing its response stream.

use crate::harness::*;
use crate::mcp_endpoint::{Raw, text_of, wait_for_held_call};
use reqwest::StatusCode;
use serde_json::json;
use sqlx::PgPool;
use std::time::Duration;
use switchyard_testkit::poll::{Bound, Check};

/// A server holding `/mcp` calls for 30 s, and a second replica on its database.
async fn two_replicas(pool: PgPool) -> (TestServer, TestServer) {
    let first = TestServer::start_with(pool, |config| {
        config.app.mcp_call_hold = Duration::from_secs(30);
    })
    .await;
    let second = TestServer::replica(&first).await;
    (first, second)
}

/// [`two_replicas`] with `count` held for approval (counting into `counter`), and the owner's
/// session, started on the first replica, as a client of each.
async fn a_session_on_two_replicas(
    pool: PgPool,
    counter: &str,
) -> (TestServer, TestServer, Raw, Raw) {
    let (first, second) = two_replicas(pool).await;
    approval_gate(&first, counter).await;
    let mut on_first = Raw::new(&first, first.owner.token());
    on_first.initialize().await;
    let mut on_second = Raw::new(&second, first.owner.token());
    on_second.session = on_first.session.clone();
    (first, second, on_first, on_second)
}

/// The client's `notifications/cancelled` for request `id` of its session.
async fn cancel(raw: &Raw, id: u64) {
    let sent = raw
        .post(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": id, "reason": "the user stopped"}}),
            &[("mcp-protocol-version", "2025-11-25")],
        )
        .await;
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.body);
}

/// The rows of `mcp_requests_in_flight`: (request id, call id).
async fn in_flight(server: &TestServer) -> Vec<(String, Option<uuid::Uuid>)> {
    sqlx::query_as("SELECT request_id, call_id FROM mcp_requests_in_flight ORDER BY request_id")
        .fetch_all(&server.pool)
        .await
        .expect("in-flight requests read")
}

/// Waits until `mcp_requests_in_flight` holds exactly `want`.
async fn wait_in_flight(server: &TestServer, want: Vec<(String, Option<uuid::Uuid>)>) {
    Bound::new(Duration::from_secs(20), Duration::from_millis(20))
        .until(async || {
            let rows = in_flight(server).await;
            Ok(if rows == want {
                Check::Done(())
            } else {
                Check::NotYet(format!("in flight: {rows:?}, want {want:?}"))
            })
        })
        .await
        .expect("the in-flight requests become what was expected");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_cancellation_sent_to_another_replica_cancels_the_held_call(pool: PgPool) {
    let counter = scratch_dir("mcp-cancel-replica");
    let counter = counter.path("count");
    let (first, _second, on_first, on_second) = a_session_on_two_replicas(pool, &counter).await;

    let pending = {
        let raw = on_first.clone();
        tokio::spawn(async move {
            raw.session_request(
                7,
                "tools/call",
                json!({"name": "fixture__count", "arguments": {"label": "mcp"}}),
            )
            .await
        })
    };
    let held = wait_for_held_call(&first).await;
    // The first replica records the held request's call; the second finds it there.
    wait_in_flight(&first, vec![("7".into(), Some(held.parse().unwrap()))]).await;
    cancel(&on_second, 7).await;

    let call = first
        .owner
        .wait_call("acme", &held, Duration::from_secs(20))
        .await;
    assert_eq!(call["state"], "cancelled", "{call}");
    // The client still waiting on the first replica hears that its call was cancelled.
    let answer = pending.await.expect("the request ends").result();
    assert_eq!(answer["isError"], true, "{answer}");
    assert!(text_of(&answer).contains("ended `cancelled`"), "{answer}");
    // The cancel is audited as `mcp cancel`'s is: the question closed, by the session's owner.
    let log = first.owner.get("/api/v1/workspaces/acme/audit").await.ok();
    let entry = log
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "approval.cancelled" && e["object"]["id"] == held.as_str())
        .unwrap_or_else(|| panic!("no approval.cancelled entry for {held} in {log}"));
    assert_eq!(entry["actor"]["name"], "owner", "{entry}");
    wait_in_flight(&first, vec![]).await;
    assert_eq!(count_lines(&counter), 0);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_cancellation_that_arrives_before_its_request_cancels_its_call(pool: PgPool) {
    let counter = scratch_dir("mcp-cancel-early");
    let counter = counter.path("count");
    let (first, _second, on_first, on_second) = a_session_on_two_replicas(pool, &counter).await;

    // The cancellation overtakes its request (through another replica): it is kept...
    cancel(&on_second, 9).await;
    wait_in_flight(&first, vec![("9".into(), None)]).await;
    // ...and the request, once its call is known, finds it and cancels the call.
    let answer = on_first
        .session_request(
            9,
            "tools/call",
            json!({"name": "fixture__count", "arguments": {"label": "mcp"}}),
        )
        .await
        .result();
    assert_eq!(answer["isError"], true, "{answer}");
    assert!(text_of(&answer).contains("ended `cancelled`"), "{answer}");
    let call = answer["structuredContent"]["call_id"]
        .as_str()
        .expect("the answer names its call")
        .to_owned();
    let call = first
        .owner
        .get(&format!("/api/v1/workspaces/acme/calls/{call}"))
        .await
        .ok();
    assert_eq!(call["state"], "cancelled", "{call}");
    wait_in_flight(&first, vec![]).await;
    assert_eq!(count_lines(&counter), 0);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_cancellation_no_request_claims_is_forgotten_after_ten_minutes(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let mut raw = Raw::new(&server, server.owner.token());
    raw.initialize().await;
    cancel(&raw, 3).await;
    cancel(&raw, 4).await;
    wait_in_flight(&server, vec![("3".into(), None), ("4".into(), None)]).await;

    sqlx::query(
        "UPDATE mcp_requests_in_flight SET recorded_at = now() - interval '11 minutes'
         WHERE request_id = '3'",
    )
    .execute(&server.pool)
    .await
    .unwrap();
    // The sweeper forgets the old one and keeps the recent one.
    wait_in_flight(&server, vec![("4".into(), None)]).await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_stateless_client_closing_its_stream_cancels_the_held_call(pool: PgPool) {
    let server = TestServer::start_with(pool, |config| {
        config.app.mcp_call_hold = Duration::from_secs(30);
    })
    .await;
    let counter = scratch_dir("mcp-cancel-stateless");
    let counter = counter.path("count");
    approval_gate(&server, &counter).await;
    let raw = Raw::new(&server, server.owner.token());
    let pending = {
        let raw = raw.clone();
        tokio::spawn(async move {
            raw.stateless(
                "tools/call",
                Some("fixture__count"),
                json!({"name": "fixture__count", "arguments": {"label": "mcp"}}),
            )
            .await
        })
    };
    let held = wait_for_held_call(&server).await;
    // The 2026-07-28 client gives up: it closes the response stream, and sends nothing else.
    pending.abort();
    let call = server
        .owner
        .wait_call("acme", &held, Duration::from_secs(20))
        .await;
    assert_eq!(call["state"], "cancelled", "{call}");
    assert_eq!(count_lines(&counter), 0);
    // Nothing of a stateless request is recorded.
    assert!(in_flight(&server).await.is_empty());
}
