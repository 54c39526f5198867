//! Published MCP clients through `/mcp` on a central connection: the Python SDK's client and
//! the Inspector's CLI (installed by scripts/test.sh; `switchyard_testkit::mcp_clients`) list
//! and call the fixture's tools in both protocol eras, 2025-11-25 (initialize, a session) and
//! 2026-07-28 (stateless), as a person (their API token) and as an agent (its token, granted
//! Use on the profile). Each call is an ordinary Switchyard call under the
//! `_meta["io.switchyard/request_id"]` the client sent.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use switchyard_testkit::mcp_clients::{
    CallOutcome, Endpoint, Era, ToolCall, inspector_call, inspector_list, python_sdk,
};
use uuid::Uuid;

/// A W3C trace context, sent in `_meta.traceparent` with every call.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// `/mcp` of `server` with `token`.
fn endpoint(server: &TestServer, token: &str) -> Endpoint {
    Endpoint::new(format!("http://{}/mcp", server.addr), Some(token))
}

/// A call of the fixture's `echo` with a fresh request id and the trace context.
fn echo(text: &str) -> (ToolCall, Uuid) {
    let request_id = Uuid::new_v4();
    let call = ToolCall::new("fixture__echo", json!({ "text": text }))
        .request_id(request_id)
        .traceparent(TRACEPARENT);
    (call, request_id)
}

/// The workspace's call made under `request_id`, as its owner sees it.
async fn call_by_request_id(server: &TestServer, ws: &str, request_id: Uuid) -> Value {
    let calls = server
        .owner
        .get(&format!("/api/v1/workspaces/{ws}/calls"))
        .await
        .ok();
    calls["calls"]
        .as_array()
        .and_then(|calls| {
            calls
                .iter()
                .find(|call| call["request_id"] == request_id.to_string())
        })
        .cloned()
        .unwrap_or_else(|| panic!("no call with request_id {request_id}: {calls}"))
}

/// Both clients, in both eras, list `fixture__echo` and call it through `endpoint`; each call is a succeeded Switchyard call under the request id the
/// client sent.
async fn both_clients_list_and_call(server: &TestServer, ws: &str, endpoint: &Endpoint) {
    for era in Era::ALL {
        let (call, request_id) = echo(&format!("python {era:?}"));
        let python = python_sdk(endpoint, era, Some(&call))
            .await
            .expect("the Python SDK's session through /mcp");
        assert_eq!(python.listing.protocol_version, era.protocol_version());
        assert!(
            python.listing.names().contains(&"fixture__echo"),
            "{era:?}: {:?}",
            python.listing.names()
        );
        assert_announces_fixture(python.listing.instructions.as_deref());
        let listing = inspector_list(endpoint, era)
            .await
            .expect("the Inspector's listing through /mcp");
        assert_eq!(listing.protocol_version, era.protocol_version());
        assert_eq!(listing.names(), python.listing.names(), "{era:?}");
        assert_announces_fixture(listing.instructions.as_deref());

        let outcome = python.call.expect("the Python SDK's call");
        assert_succeeded(&outcome, &format!("python {era:?}"));
        let made = call_by_request_id(server, ws, request_id).await;
        assert_eq!(
            (
                made["state"].as_str(),
                made["tool_name"].as_str(),
                made["runner"].as_str()
            ),
            (Some("succeeded"), Some("echo"), Some("central")),
            "{made}"
        );
        let (call, request_id) = echo(&format!("inspector {era:?}"));
        let outcome = inspector_call(endpoint, era, &call)
            .await
            .expect("the Inspector's call through /mcp");
        assert_succeeded(&outcome, &format!("inspector {era:?}"));
        let made = call_by_request_id(server, ws, request_id).await;
        assert_eq!(made["state"], "succeeded", "{made}");
    }
}

/// The server's instructions announce the fixture connection.
#[track_caller]
fn assert_announces_fixture(instructions: Option<&str>) {
    let instructions = instructions.expect("the server's instructions");
    let fixture = instructions
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|notice| notice["mcp_server"] == "fixture")
        .unwrap_or_else(|| panic!("no notice of the fixture: {instructions}"));
    assert!(
        fixture["tools"].as_u64().is_some_and(|n| n > 0),
        "{fixture}"
    );
    assert!(fixture["about"].is_string(), "{fixture}");
}

#[track_caller]
fn assert_succeeded(outcome: &CallOutcome, text: &str) {
    assert_eq!(
        (outcome.is_error, outcome.text().as_str()),
        (false, text),
        "{outcome:?}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn published_clients_list_and_call_through_mcp_as_a_person(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let endpoint = endpoint(&server, server.owner.token());
    both_clients_list_and_call(&server, "acme", &endpoint).await;

    // A wrong token: both clients fail, and say why.
    let refused = self::endpoint(&server, "not-a-token");
    for era in Era::ALL {
        let python = python_sdk(&refused, era, None)
            .await
            .expect_err("the Python SDK refused");
        assert!(python.to_string().contains("HTTP 401"), "{era:?}: {python}");
        let inspector = inspector_list(&refused, era)
            .await
            .expect_err("the Inspector refused");
        assert!(
            inspector.to_string().contains("auth_required"),
            "{era:?}: {inspector}"
        );
    }
}

#[sqlx::test(migrations = "../../migrations")]
async fn published_clients_list_and_call_through_mcp_as_an_agent(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let created = server
        .owner
        .post(
            "/api/v1/workspaces/acme/agents",
            json!({"name": "interop-bot"}),
        )
        .await
        .ok();
    let token = created["token"].as_str().expect("the agent's token");
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"agent": "interop-bot", "use": true}),
        )
        .await
        .ok();
    both_clients_list_and_call(&server, "acme", &endpoint(&server, token)).await;
}
