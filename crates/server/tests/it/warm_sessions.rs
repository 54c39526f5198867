//! Warm sessions belong to one submitter under one profile: two users who pick the same
//! client session id never share an MCP session, a release drains only the releaser's, the
//! caps close the least recently used idle session, and a session id is shown only to readers
//! with Use on its profile.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::Duration;
use switchyard_mcp_runner::SessionCaps;
use switchyard_testkit::poll::{Bound, Check};

const WAIT: Duration = Duration::from_secs(60);

/// The connection's events as `reader` sees them.
async fn events_as(reader: &Client, ws: &str) -> Vec<Value> {
    reader
        .get(&format!(
            "/api/v1/workspaces/{ws}/connections/fixture/events"
        ))
        .await
        .ok()
        .as_array()
        .expect("a list of events")
        .clone()
}

/// The `session_started` events with client session id `key`, as the owner sees them.
async fn started(server: &TestServer, ws: &str, key: &str) -> Vec<Value> {
    events_as(&server.owner, ws)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "session_started" && e["detail"]["client_session_id"] == key)
        .collect()
}

/// Polls the owner's view of the events until `pick` finds `n` of them.
async fn wait_events(server: &TestServer, ws: &str, n: usize, pick: impl Fn(&Value) -> bool) {
    Bound::new(WAIT, Duration::from_millis(50))
        .until(async || {
            let events = events_as(&server.owner, ws).await;
            Ok(if events.iter().filter(|e| pick(e)).count() >= n {
                Check::Done(())
            } else {
                Check::NotYet(format!("events never came: {events:?}"))
            })
        })
        .await
        .expect("the events arrive");
}

/// Runs `echo` as `client` under `profile` in warm session `key`, until it succeeds.
async fn echo(client: &Client, ws: &str, profile: &str, key: &str) {
    let mut body = call_body("echo", json!({"text": "x"}));
    body["profile_id"] = json!(profile);
    body["client_session_id"] = json!(key);
    let call = client
        .post(&format!("/api/v1/workspaces/{ws}/calls"), body)
        .await
        .ok();
    let done = client
        .wait_call(ws, call["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(done["state"], "succeeded", "{done}");
}

/// Adds `name` to workspace `ws`, with Use on profile `main` when `with_use`.
async fn member(server: &TestServer, ws: &str, name: &str, with_use: bool) -> Client {
    let user = server.user(name).await;
    let owner = &server.owner;
    owner
        .post(
            &format!("/api/v1/workspaces/{ws}/members"),
            json!({"user": name}),
        )
        .await
        .ok();
    if with_use {
        owner
            .post(
                &format!("/api/v1/workspaces/{ws}/profiles/main/grants"),
                json!({"user": name, "use": true}),
            )
            .await
            .ok();
    }
    user
}

#[sqlx::test(migrations = "../../migrations")]
async fn one_client_session_id_is_a_session_per_user_and_per_profile(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    let owner = &server.owner;
    let bob = member(&server, ws, "bob", true).await;
    owner
        .post(
            &format!("/api/v1/workspaces/{ws}/profiles"),
            json!({"name": "other", "connections": ["fixture"]}),
        )
        .await
        .ok();
    owner
        .post(
            &format!("/api/v1/workspaces/{ws}/profiles/other/grants"),
            json!({"user": "owner", "use": true}),
        )
        .await
        .ok();

    echo(owner, ws, "main", "s1").await;
    echo(owner, ws, "main", "s1").await;
    assert_eq!(
        started(&server, ws, "s1").await.len(),
        1,
        "the owner's calls share one"
    );
    echo(&bob, ws, "main", "s1").await;
    echo(owner, ws, "other", "s1").await;

    let sessions = started(&server, ws, "s1").await;
    let pids: std::collections::HashSet<u64> = sessions
        .iter()
        .map(|e| e["detail"]["pid"].as_u64().expect("a stdio server's pid"))
        .collect();
    assert_eq!(
        (sessions.len(), pids.len()),
        (3, 3),
        "owner/main, bob/main and owner/other each have a process of their own: {sessions:?}"
    );

    // Bob's release drains his session only: the owner's next call reuses hers.
    let released = bob
        .post(
            &format!("/api/v1/workspaces/{ws}/sessions/s1/release"),
            json!({}),
        )
        .await
        .ok();
    assert_eq!(released["connection_ids"].as_array().unwrap().len(), 1);
    wait_events(&server, ws, 1, |e| {
        e["kind"] == "session_closed" && e["detail"]["reason"] == "released"
    })
    .await;
    echo(owner, ws, "main", "s1").await;
    let closed: Vec<Value> = events_as(owner, ws)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "session_closed")
        .collect();
    assert_eq!(closed.len(), 1, "only bob's session closed: {closed:?}");
    assert_eq!(started(&server, ws, "s1").await.len(), 3, "no new session");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_session_id_is_shown_only_to_readers_with_use_on_its_profile(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    let carol = member(&server, ws, "carol", false).await;
    let dave = member(&server, ws, "dave", true).await;
    echo(&server.owner, ws, "main", "private-key-7").await;
    wait_events(&server, ws, 1, |e| {
        e["kind"] == "session_started" && e["detail"]["client_session_id"] == "private-key-7"
    })
    .await;

    // A member without Use sees that a session started, not its id.
    let seen = events_as(&carol, ws).await;
    let session = seen
        .iter()
        .find(|e| e["kind"] == "session_started")
        .expect("carol sees the event");
    assert!(
        session["detail"]["client_session_id"].is_null(),
        "{session}"
    );
    assert!(!Value::Array(seen).to_string().contains("private-key-7"));
    // Nor through the calls: the list holds none of them, and the call is refused.
    let list = carol
        .get(&format!("/api/v1/workspaces/{ws}/calls"))
        .await
        .ok();
    assert!(!list.to_string().contains("private-key-7"), "{list}");
    let calls = server
        .owner
        .get(&format!("/api/v1/workspaces/{ws}/calls"))
        .await
        .ok();
    let id = calls["calls"][0]["id"].as_str().expect("the owner's call");
    let refused = carol
        .get(&format!("/api/v1/workspaces/{ws}/calls/{id}"))
        .await;
    assert!(!refused.status.is_success(), "{:?}", refused.body);
    assert!(!refused.body.to_string().contains("private-key-7"));

    // A reader with Use on the profile sees it.
    let seen = events_as(&dave, ws).await;
    assert!(
        seen.iter()
            .any(|e| e["detail"]["client_session_id"] == "private-key-7"),
        "{seen:?}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_full_cap_closes_the_least_recently_used_idle_session(pool: PgPool) {
    let server = TestServer::start_with(pool, |config| {
        config.central.executor.session_caps = SessionCaps {
            per_submitter: 2,
            ..SessionCaps::default()
        };
    })
    .await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    let owner = &server.owner;
    echo(owner, ws, "main", "a").await;
    echo(owner, ws, "main", "b").await;
    // `a` is used again: `b` is now the least recently used.
    echo(owner, ws, "main", "a").await;

    echo(owner, ws, "main", "c").await;

    wait_events(&server, ws, 1, |e| {
        e["kind"] == "session_closed" && e["detail"]["reason"] == "capacity"
    })
    .await;
    let closed: Vec<Value> = events_as(owner, ws)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "session_closed")
        .collect();
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(closed[0]["detail"]["client_session_id"], "b");
    echo(owner, ws, "main", "a").await;
    assert_eq!(started(&server, ws, "a").await.len(), 1, "`a` stayed warm");
}
