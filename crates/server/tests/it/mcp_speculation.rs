//! The speculated `tools/call` (`mcp/speculation.rs`): a replica that remembers a token reads
//! the call's submission before the request's authentication has passed, and each request is
//! still decided by its own authentication. Every test here first makes a call that succeeds,
//! so that the ones after it are speculated.

use crate::harness::*;
use crate::mcp_agents::{agent_in_acme, set, text};
use crate::mcp_endpoint::{Raw, RawAnswer};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::PgPool;

/// `tools/call` of `name` with `arguments`, as request `id` of the raw client's session.
async fn session_call(raw: &Raw, id: u64, name: &str, arguments: Value) -> RawAnswer {
    raw.session_request(
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await
}

/// A stateless `tools/call` of `name` with `arguments`.
async fn stateless_call(raw: &Raw, name: &str, arguments: Value) -> RawAnswer {
    raw.stateless(
        "tools/call",
        Some(name),
        json!({"name": name, "arguments": arguments}),
    )
    .await
}

/// A second token of the owner's in a workspace `acme` set up with the fixture: its secret and
/// the route that revokes it (revoking it leaves the owner and their grants as they were).
async fn second_token(server: &TestServer) -> (String, String) {
    setup_workspace(server, "acme", &[]).await;
    let created = server
        .owner
        .post("/api/v1/tokens", json!({"name": "mcp-client"}))
        .await
        .ok();
    let id = created["token"]["id"].as_str().unwrap();
    (
        created["secret"].as_str().unwrap().to_owned(),
        format!("/api/v1/tokens/{id}/revoke"),
    )
}

/// Makes one call that succeeds in a session and one stateless with `token`, revokes it with
/// `revoke`, then checks that the next call of each is refused with a 401 and runs nothing.
async fn calls_stop_at_the_revoke(server: &TestServer, token: &str, revoke: &str) {
    let mut in_session = Raw::new(server, token);
    in_session.initialize().await;
    let stateless = Raw::new(server, token);
    let before = calls_stored(&server.pool).await;
    let echo = json!({"text": "before"});
    let called = session_call(&in_session, 1, "fixture__echo", echo.clone())
        .await
        .result();
    assert_eq!(text(&called), "before", "{called}");
    let called = stateless_call(&stateless, "fixture__echo", echo)
        .await
        .result();
    assert_eq!(text(&called), "before", "{called}");
    assert_eq!(calls_stored(&server.pool).await, before + 2);

    server.owner.post(revoke, json!({})).await.ok();
    let after = json!({"text": "after"});
    for answer in [
        session_call(&in_session, 2, "fixture__echo", after.clone()).await,
        stateless_call(&stateless, "fixture__echo", after).await,
    ] {
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);
        let body: Value = serde_json::from_str(&answer.body).expect("a JSON error body");
        assert_eq!(body["error"]["code"], "unauthenticated", "{body}");
    }
    assert_eq!(
        calls_stored(&server.pool).await,
        before + 2,
        "nothing was submitted after the revoke"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_revoked_token_s_next_call_is_refused_with_401_and_runs_nothing(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let (token, revoke) = second_token(&server).await;
    calls_stop_at_the_revoke(&server, &token, &revoke).await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_revoked_agent_s_next_call_is_refused_with_401_and_runs_nothing(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let token = agent_in_acme(&server).await;
    calls_stop_at_the_revoke(&server, &token, "/api/v1/workspaces/acme/agents/bot/revoke").await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_call_right_after_a_change_is_decided_by_the_change(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let token = agent_in_acme(&server).await;
    let mut raw = Raw::new(&server, &token);
    raw.initialize().await;
    let called = session_call(&raw, 1, "fixture__cwd", json!({}))
        .await
        .result();
    assert_ne!(called["isError"], true, "{called}");

    // The filter changes between two calls: the second is refused by it.
    set(&server, json!({"include": ["echo"]})).await;
    let refused = session_call(&raw, 2, "fixture__cwd", json!({}))
        .await
        .result();
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).contains("not_included"), "{refused}");
    let called = session_call(&raw, 3, "fixture__echo", json!({"text": "still"}))
        .await
        .result();
    assert_eq!(text(&called), "still", "{called}");

    // The grant is taken away between two calls: the tool is no longer the agent's.
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants/revoke",
            json!({"agent": "bot", "use": true}),
        )
        .await
        .ok();
    let answer = session_call(&raw, 4, "fixture__echo", json!({"text": "gone"})).await;
    let error = &answer.response()["error"];
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no tool"),
        "{}",
        answer.body
    );
    assert_eq!(
        calls_stored(&server.pool).await,
        2,
        "cwd once and echo once, nothing refused"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_remembered_token_cannot_call_in_another_principal_s_session(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let mut owners = Raw::new(&server, server.owner.token());
    owners.initialize().await;
    let bob = server.member("acme", "bob", "member").await;
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"user": "bob", "use": true}),
        )
        .await
        .ok();
    let mut bobs = Raw::new(&server, bob.token());
    bobs.initialize().await;
    let called = session_call(&bobs, 1, "fixture__echo", json!({"text": "bob's"}))
        .await
        .result();
    assert_eq!(text(&called), "bob's", "{called}");

    let own_session = std::mem::replace(&mut bobs.session, owners.session.clone());
    let answer = session_call(&bobs, 2, "fixture__echo", json!({"text": "in theirs"})).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
    let body: Value = serde_json::from_str(&answer.body).expect("a JSON error body");
    assert_eq!(body["error"]["code"], "mcp_session_not_found", "{body}");
    // Bob's next call in his own session follows the refused one through the server.
    bobs.session = own_session;
    let called = session_call(&bobs, 3, "fixture__echo", json!({"text": "bob's again"}))
        .await
        .result();
    assert_eq!(text(&called), "bob's again", "{called}");
    assert_eq!(
        calls_stored(&server.pool).await,
        2,
        "bob's own two calls alone"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn only_a_tools_call_is_speculated_on_whatever_its_headers_say(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let (token, revoke) = second_token(&server).await;
    let raw = Raw::new(&server, &token);
    let called = stateless_call(&raw, "fixture__echo", json!({"text": "once"}))
        .await
        .result();
    assert_eq!(text(&called), "once", "{called}");
    server.owner.post(&revoke, json!({})).await.ok();
    let sessions = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM mcp_sessions")
            .fetch_one(&server.pool)
            .await
            .unwrap()
    };
    let before = sessions().await;

    // An `initialize` that says it is a `tools/call` (a header rmcp checks against the body only
    // in the stateless era) is authenticated before rmcp sees it: no session is stored.
    let answer = raw
        .post(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "1"}}}),
            &[("mcp-method", "tools/call")],
        )
        .await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);
    assert_eq!(sessions().await, before, "no session was stored");
    assert_eq!(calls_stored(&server.pool).await, 1);
}
