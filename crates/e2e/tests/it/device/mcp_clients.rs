//! Published MCP clients through `/mcp` on a device connection: the Python SDK's client and the
//! Inspector's CLI (installed by scripts/test.sh; `switchyard_testkit::mcp_clients`) list the
//! device's tools and call one in both protocol eras, as alice and as an agent; each call runs
//! on the device through its runner, under the request id the client sent in `_meta`, and
//! reaches the device's MCP server with the client's `_meta.traceparent`.

use super::harness::{Paired, Server, WORKSPACE, fixture_spec, scratch};
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::path::Path;
use switchyard_testkit::mcp_clients::{
    CallOutcome, Endpoint, Era, ToolCall, inspector_call, inspector_list, python_sdk,
};
use uuid::Uuid;

/// The device connection `dfx`'s `echo`, as `/mcp` names it.
const ECHO: &str = "dfx__echo";
/// A W3C trace context, sent in `_meta.traceparent` with every call.
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A call of `dfx__echo` with a fresh request id and the trace context.
fn echo(text: &str) -> (ToolCall, Uuid) {
    let request_id = Uuid::new_v4();
    let call = ToolCall::new(ECHO, json!({ "text": text }))
        .request_id(request_id)
        .traceparent(TRACEPARENT);
    (call, request_id)
}

/// The `tools/call` requests the fixture behind `stdin_copy` received.
fn tool_calls(stdin_copy: &Path) -> Vec<String> {
    std::fs::read_to_string(stdin_copy)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains("\"tools/call\""))
        .map(str::to_owned)
        .collect()
}

/// The call made under `request_id` has succeeded on the device, and the client got its text.
async fn ran_on_the_device(paired: &Paired, request_id: Uuid, outcome: &CallOutcome, text: &str) {
    assert_eq!(
        (outcome.is_error, outcome.text().as_str()),
        (false, text),
        "{outcome:?}"
    );
    let calls: Value = paired
        .api
        .get(&format!("/workspaces/{WORKSPACE}/calls"))
        .await
        .expect("list the calls");
    let call = calls["calls"]
        .as_array()
        .and_then(|calls| {
            calls
                .iter()
                .find(|call| call["request_id"] == request_id.to_string())
        })
        .unwrap_or_else(|| panic!("no call with request_id {request_id}: {calls}"));
    assert_eq!(
        (&call["state"], &call["tool_name"], &call["runner"]),
        (
            &json!("succeeded"),
            &json!("echo"),
            &json!(format!("device:{}", paired.device_id))
        ),
        "{call}"
    );
}

#[sqlx::test(migrations = false)]
async fn published_clients_list_and_call_a_device_tool_through_mcp(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let copy = scratch("mcp-clients-spec").join("stdin");
    let paired = Paired::set_up(&server, "mcp-clients", fixture_spec(&copy, &[])).await;
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &[]);
    runner.wait_for_log("lease epoch").await;
    paired.discover_classified().await;
    // An agent granted Use on `dev`, beside alice.
    let created = paired
        .api
        .post(
            &format!("/workspaces/{WORKSPACE}/agents"),
            &json!({"name": "device-bot"}),
        )
        .await
        .expect("create an agent");
    let agent_token = created["token"].as_str().expect("the agent's token");
    paired
        .api
        .post(
            &format!("/workspaces/{WORKSPACE}/profiles/dev/grants"),
            &json!({"agent": "device-bot", "use": true}),
        )
        .await
        .expect("grant the agent Use on dev");

    let url = format!("{}/mcp", server.url());
    for (who, token) in [("alice", server.token()), ("device-bot", agent_token)] {
        let endpoint = Endpoint::new(url.as_str(), Some(token));
        for era in Era::ALL {
            let text = format!("python as {who} on the device, {era:?}");
            let (call, request_id) = echo(&text);
            let python = python_sdk(&endpoint, era, Some(&call))
                .await
                .expect("the Python SDK's session through /mcp");
            assert_eq!(python.listing.protocol_version, era.protocol_version());
            assert!(
                python.listing.names().contains(&ECHO),
                "{who}, {era:?}: {:?}",
                python.listing.names()
            );
            let listing = inspector_list(&endpoint, era)
                .await
                .expect("the Inspector's listing through /mcp");
            assert_eq!(listing.protocol_version, era.protocol_version());
            assert_eq!(listing.names(), python.listing.names(), "{who}, {era:?}");

            let outcome = python.call.expect("the Python SDK's call");
            ran_on_the_device(&paired, request_id, &outcome, &text).await;
            let text = format!("inspector as {who} on the device, {era:?}");
            let (call, request_id) = echo(&text);
            let outcome = inspector_call(&endpoint, era, &call)
                .await
                .expect("the Inspector's call through /mcp");
            ran_on_the_device(&paired, request_id, &outcome, &text).await;
        }
    }
    // Each call reached the device's MCP server once, in the client's trace.
    let received = tool_calls(&copy);
    assert_eq!(
        received.len(),
        2 * 2 * Era::ALL.len(),
        "{}",
        runner.log_text()
    );
    for request in &received {
        assert!(request.contains(TRACEPARENT), "{request}");
    }
}
