//! Discovery of a device connection, with the test acting as the device's runner: the
//! discovery is queued for the device, leased like a call (kind `discovery`), started under
//! the runner's epoch, and its uploaded tool list fills the catalog; one discovery at a time;
//! a vanished tool becomes unavailable; nothing is queued for a placement its owner has not
//! accepted.

use crate::devices::*;
use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

const DISCOVER: &str = "/api/v1/workspaces/acme/connections/local/discover";

/// Asks for the discovery of `local` and waits `wait_ms` for it.
async fn discover(server: &TestServer, wait_ms: u64) -> Answer {
    server
        .owner
        .post(&format!("{DISCOVER}?wait_ms={wait_ms}"), json!({}))
        .await
}

/// The catalog of `local`: (name, available) by name.
async fn catalog(server: &TestServer) -> Vec<(String, bool)> {
    let tools = server
        .owner
        .get("/api/v1/workspaces/acme/connections/local/tools")
        .await
        .ok();
    tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["available"].as_bool().unwrap(),
            )
        })
        .collect()
}

async fn discoveries(server: &TestServer) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM calls WHERE kind = 'discovery'")
        .fetch_one(&server.pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_discovery_is_leased_to_its_runner_and_fills_the_catalog(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device = setup_device_placement(&server, &scratch_dir("discovery").path("count")).await;

    // No runner yet: the discovery stays queued, and the answer says what to do.
    let message = discover(&server, 0).await.refused(504, "discovery_pending");
    assert!(message.contains("switchyard runner"), "{message}");
    // Asking again joins the discovery queued: still one.
    discover(&server, 0).await.refused(504, "discovery_pending");
    assert_eq!(discoveries(&server).await, 1);

    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    let item = run_discovery(&device, epoch, &["count", "echo"]).await;
    assert_eq!(
        (item["kind"].as_str(), item["tool_name"].as_str()),
        (Some("discovery"), Some("tools/list"))
    );
    assert_eq!(
        catalog(&server).await,
        [("count".to_owned(), true), ("echo".to_owned(), true)]
    );
    // The discovery is shown as what it is, never as a tool call.
    let id = item["call_id"].as_str().unwrap();
    let view = server
        .owner
        .get(&format!("/api/v1/workspaces/acme/calls/{id}"))
        .await
        .ok();
    assert_eq!(
        (view["kind"].as_str(), view["state"].as_str()),
        (Some("discovery"), Some("succeeded"))
    );
    let connection = server
        .owner
        .get("/api/v1/workspaces/acme/connections/local")
        .await
        .ok();
    assert!(connection["last_discovery_at"].is_string(), "{connection}");
    assert!(connection["last_discovery_error"].is_null(), "{connection}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_tool_gone_from_a_device_rediscovery_becomes_unavailable(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device = setup_device_placement(&server, &scratch_dir("vanished").path("count")).await;
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;

    discover(&server, 0).await.refused(504, "discovery_pending");
    run_discovery(&device, epoch, &["count", "echo"]).await;
    discover(&server, 0).await.refused(504, "discovery_pending");
    run_discovery(&device, epoch, &["echo"]).await;

    assert_eq!(
        catalog(&server).await,
        [("count".to_owned(), false), ("echo".to_owned(), true)]
    );
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/calls",
            device_call_body("count", json!({"label": "gone"})),
        )
        .await
        .refused(409, "tool_unavailable");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_discovery_the_runner_already_finished_is_answered_with_the_catalog(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device = setup_device_placement(&server, &scratch_dir("waited").path("count")).await;
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;

    // The request waits while the runner lists the tools, and answers the catalog.
    let (answer, _) = tokio::join!(
        discover(&server, 20_000),
        run_discovery(&device, epoch, &["echo"])
    );
    let answer = answer.ok();
    let names: Vec<&str> = answer["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo"]);
}

#[sqlx::test(migrations = "../../migrations")]
async fn nothing_is_queued_to_discover_a_placement_its_owner_has_not_accepted(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device = setup_device_placement(&server, &scratch_dir("unaccepted").path("count")).await;
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "pending", "connector": "counted", "runner": device.runner}),
        )
        .await
        .ok();

    let message = server
        .owner
        .post(
            "/api/v1/workspaces/acme/connections/pending/discover?wait_ms=0",
            json!({}),
        )
        .await
        .refused(409, "placement_pending");
    assert!(message.contains("switchyard device accept"), "{message}");
    assert_eq!(discoveries(&server).await, 0);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_tool_its_runner_never_listed_is_refused_everywhere(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let device = setup_device_placement(&server, &scratch_dir("unlisted").path("count")).await;
    let owner = &server.owner;
    let set_tools = |tools: Value| {
        owner.send(
            reqwest::Method::PUT,
            "/api/v1/workspaces/acme/profiles/dev/connections/local/tools",
            Some(json!({ "tools": tools })),
        )
    };
    let set_policy = |tool: &str| {
        owner.send(
            reqwest::Method::PUT,
            "/api/v1/workspaces/acme/connections/local/receipt-policy",
            Some(json!({"tool": tool, "arguments": {"request_id": "{{request_id}}"}})),
        )
    };
    let submit = |tool: &str| {
        owner.post(
            "/api/v1/workspaces/acme/calls",
            device_call_body(tool, json!({"label": "x"})),
        )
    };

    // Never discovered: the catalog is empty, and no name is taken.
    set_tools(json!(["count"]))
        .await
        .refused(404, "tool_not_found");
    set_policy("lookup").await.refused(404, "tool_not_found");
    let message = submit("count").await.refused(404, "tool_not_found");
    assert!(message.contains("connection discover"), "{message}");
    assert_eq!(calls_stored(&pool).await, 0, "nothing was queued");

    // Discovered by its runner: what it listed is taken, nothing else.
    discover(&server, 0).await.refused(504, "discovery_pending");
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    run_discovery(&device, epoch, &["count", "lookup"]).await;
    set_tools(json!(["count", "echo"]))
        .await
        .refused(404, "tool_not_found");
    set_policy("echo").await.refused(404, "tool_not_found");
    submit("echo").await.refused(404, "tool_not_found");
    let profile = set_tools(json!(["count"])).await.ok();
    let local = owner
        .get("/api/v1/workspaces/acme/connections/local")
        .await
        .ok();
    assert_eq!(
        profile["tools"][local["id"].as_str().unwrap()],
        json!(["count"])
    );
    assert_eq!(set_policy("lookup").await.ok()["tool"], "lookup");
    // Listed but not classified yet: still not callable.
    submit("count").await.refused(409, "tool_unclassified");
    assert_eq!(
        calls_stored(&pool).await,
        1,
        "only the discovery was queued"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_capture_exclusion_leaves_a_device_discovery_its_catalog(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device = setup_device_placement(&server, &scratch_dir("excluded").path("count")).await;
    // Keep nothing of any call on the connection: a discovery's answer is its catalog, no
    // tool's result, and is kept.
    server
        .owner
        .put(
            "/api/v1/workspaces/acme/connections/local/capture-exclusions",
            json!({"exclusions": [{"capture_nothing": true}]}),
        )
        .await
        .ok();
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    discover(&server, 0).await.refused(504, "discovery_pending");
    run_discovery(&device, epoch, &["count", "echo"]).await;
    assert_eq!(
        catalog(&server).await,
        [("count".to_owned(), true), ("echo".to_owned(), true)]
    );
}
