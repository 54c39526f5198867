//! Discovery of a device connection by the real `switchyard-mcp-runner`: `connection
//! discover` is carried out on the device (`tools/list` on its MCP server, never a
//! `tools/call`) and fills the catalog; a tool the device's server stops offering becomes
//! unavailable at the next discovery and is refused.

use super::harness::{Paired, Server, scratch};
use crate::harness::binary;
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::path::Path;
use switchyard_protocol::RequestId;
use switchyard_protocol::api::{ConnectorSpec, DiscoveryView, SubmitCall};
use switchyard_testkit::{Error, bins, setup};

/// The fixture over stdio, its stdin copied to `stdin_copy`, hiding the tools `hide` lists
/// (read each time a session starts).
fn hiding_spec(stdin_copy: &Path, hide: &Path) -> ConnectorSpec {
    ConnectorSpec::Stdio {
        command: "sh".to_owned(),
        args: vec![
            "-c".to_owned(),
            r#"tee -a "$1" | "$2" stdio --hide-tools-file "$3""#.to_owned(),
            "sh".to_owned(),
            stdin_copy.display().to_string(),
            binary(bins::FIXTURE).display().to_string(),
            hide.display().to_string(),
        ],
        env: Vec::new(),
    }
}

/// `switchyard connection discover demo dfx`, through the API as alice.
async fn discover(paired: &Paired) -> DiscoveryView {
    let view: Value = setup::discover(&paired.api, "demo", "dfx")
        .await
        .expect("discover the device connection");
    serde_json::from_value(view).expect("a discovery view")
}

/// The tools a discovery lists as available, by name.
fn available(view: &DiscoveryView) -> Vec<&str> {
    view.tools
        .iter()
        .filter(|t| t.available)
        .map(|t| t.name.as_str())
        .collect()
}

/// Submits `tool` on `dfx`; the API's answer.
async fn submit(paired: &Paired, tool: &str) -> Result<Value, Error> {
    paired
        .api
        .post(
            "/workspaces/demo/calls",
            &SubmitCall {
                request_id: RequestId::new(),
                profile_id: "dev".to_owned(),
                connection_id: "dfx".to_owned(),
                tool_name: tool.to_owned(),
                arguments: json!({}),
                environment_id: None,
                client_session_id: None,
                timeout_seconds: Some(30),
                operation_id: None,
            },
        )
        .await
}

#[sqlx::test(migrations = false)]
async fn the_device_runner_discovers_its_connection_and_a_vanished_tool_is_unavailable(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let dir = scratch("discovery-spec");
    let (copy, hide) = (dir.join("stdin"), dir.join("hidden"));
    let paired = Paired::set_up(&server, "discovery", hiding_spec(&copy, &hide)).await;
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &[]);
    runner.wait_for_log("lease epoch").await;

    let first = discover(&paired).await;
    let listed = available(&first);
    assert!(
        listed.contains(&"count") && listed.contains(&"echo"),
        "{listed:?}"
    );
    let sent = std::fs::read_to_string(&copy).expect("read what the server received");
    assert!(sent.contains("\"tools/list\""), "{sent}");
    assert!(!sent.contains("\"tools/call\""), "{sent}");

    // The device's server stops offering `count`.
    std::fs::write(&hide, "count\n").expect("hide count");
    let second = discover(&paired).await;
    let count = second
        .tools
        .iter()
        .find(|t| t.name == "count")
        .expect("count stays in the catalog");
    assert!(!count.available, "{second:?}");
    assert!(available(&second).contains(&"echo"));
    match submit(&paired, "count").await {
        Err(Error::Api { status, body, .. }) => {
            assert_eq!(status, 409, "{body}");
            assert!(body.contains("tool_unavailable"), "{body}");
        }
        other => panic!("a call to a vanished tool was not refused: {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(&copy)
            .unwrap_or_default()
            .matches("\"tools/call\"")
            .count(),
        0
    );
}

#[sqlx::test(migrations = false)]
async fn a_call_to_a_tool_the_device_catalog_does_not_list_is_refused_and_nothing_is_queued(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let dir = scratch("unlisted-spec");
    let (copy, hide) = (dir.join("stdin"), dir.join("hidden"));
    let paired = Paired::set_up(&server, "unlisted", hiding_spec(&copy, &hide)).await;
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &[]);
    runner.wait_for_log("lease epoch").await;
    let refused = async |tool: &str| match submit(&paired, tool).await {
        Err(Error::Api { status, body, .. }) => {
            assert_eq!(status, 404, "{body}");
            assert!(body.contains("tool_not_found"), "{body}");
        }
        other => panic!(
            "a call to `{tool}`, which the catalog does not list, was not refused: {other:?}"
        ),
    };

    // Never discovered: no tool is listed, so none is taken.
    refused("echo").await;
    // Discovered and classified: a name its server does not offer is still refused.
    paired.discover_classified().await;
    refused("no_such_tool").await;

    let calls: Value = paired
        .api
        .get("/workspaces/demo/calls")
        .await
        .expect("list calls");
    let kinds: Vec<&str> = calls["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| c["kind"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        kinds,
        ["discovery"],
        "only the discovery was queued: {calls}"
    );
    let sent = std::fs::read_to_string(&copy).expect("read what the server received");
    assert!(!sent.contains("\"tools/call\""), "{sent}");
    // What it lists runs.
    let echo = paired.submit("echo", json!({ "text": "listed" }), 30).await;
    paired.wait_for_state(&echo, "succeeded").await;
}

/// `switchyard connection diagnose demo dfx`, through the API as alice, the handshake bounded
/// by 10 s.
async fn diagnose(paired: &Paired) -> Value {
    paired
        .api
        .post(
            "/workspaces/demo/connections/dfx/diagnose",
            &json!({"timeout_ms": 10_000}),
        )
        .await
        .expect("diagnose the device connection")
}

/// The status and detail of check `name` of `diagnosis`.
fn check<'a>(diagnosis: &'a Value, name: &str) -> (&'a str, &'a str) {
    let found = diagnosis["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|check| check["check"] == name)
        .unwrap_or_else(|| panic!("no {name} check: {diagnosis}"));
    (
        found["status"].as_str().unwrap(),
        found["detail"].as_str().unwrap(),
    )
}

#[sqlx::test(migrations = false)]
async fn a_device_connection_is_diagnosed_live_by_the_device_runner(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let dir = scratch("diagnose-spec");
    let (copy, hide) = (dir.join("stdin"), dir.join("hidden"));
    let paired = Paired::set_up(&server, "diagnose-live", hiding_spec(&copy, &hide)).await;
    let mut runner = paired.runner(&paired.dir.join("outbox"), "runner.log", &[]);
    runner.wait_for_log("lease epoch").await;

    let healthy = diagnose(&paired).await;
    assert_eq!(healthy["live_check"], "on_device", "{healthy}");
    let (status, detail) = check(&healthy, "handshake");
    assert_eq!(status, "passed", "{healthy}");
    assert!(detail.contains("tools/list"), "{detail}");
    let sent = std::fs::read_to_string(&copy).expect("read what the server received");
    assert!(sent.contains("\"initialize\""), "{sent}");
    assert!(healthy["failure"].is_null(), "{healthy}");

    // The connector now names a program the device does not have: the device's runner
    // reports the class, and the diagnosis shows it.
    let missing = dir.join("no-such-mcp-server");
    paired
        .api
        .patch(
            "/connectors/fixture",
            &json!({"transport": "stdio", "command": missing.display().to_string(), "args": []}),
        )
        .await
        .expect("point the connector at a missing program");
    paired
        .api
        .post("/connectors/fixture/approve", &json!({}))
        .await
        .expect("approve the new revision");
    setup::accept_placement(&paired.api, "demo", paired.device_id, "dfx")
        .await
        .expect("accept the changed placement as the device's owner");
    let broken = diagnose(&paired).await;
    let (status, detail) = check(&broken, "handshake");
    assert_eq!(status, "failed", "{broken}");
    assert_eq!(broken["failure"], "executable_not_found", "{broken}");
    assert!(
        detail.starts_with("executable_not_found on device:"),
        "{detail}"
    );
    assert_eq!(broken["passed"], false, "{broken}");
}
