//! Interop with the published reference server `@modelcontextprotocol/server-everything`
//! (installed from npm by scripts/test.sh, which exports SWITCHYARD_TEST_EVERYTHING).

use crate::harness::*;
use serde_json::json;
use sqlx::PgPool;
use std::time::Duration;

fn everything_script() -> String {
    std::env::var("SWITCHYARD_TEST_EVERYTHING").expect(
        "SWITCHYARD_TEST_EVERYTHING is not set: run the tests with scripts/test.sh, which installs \
         @modelcontextprotocol/server-everything from npm and points this variable at its dist/index.js",
    )
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_reference_server_runs_through_the_whole_path(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let owner = &server.owner;
    owner
        .post("/api/v1/workspaces", json!({"name": "interop"}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/connectors/import",
            json!({"mcpServers": {"everything": {"command": "node", "args": [everything_script(), "stdio"]}}}),
        )
        .await
        .ok();
    owner
        .post("/api/v1/connectors/everything/approve", json!({}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/interop/connections",
            json!({"name": "everything", "connector": "everything"}),
        )
        .await
        .ok();
    let discovery = owner
        .post(
            "/api/v1/workspaces/interop/connections/everything/discover",
            json!({}),
        )
        .await
        .ok();
    let echo = discovery["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .expect("echo tool listed");
    assert_eq!(echo["annotations"]["readOnlyHint"], true);
    owner.classify_all("interop", "everything").await;
    owner.owner_profile("interop", "p", &["everything"]).await;
    let call = owner
        .post(
            "/api/v1/workspaces/interop/calls",
            json!({"request_id": uuid::Uuid::new_v4(), "profile_id": "p", "connection_id": "everything",
                   "tool_name": "echo", "arguments": {"message": "interop works"}}),
        )
        .await
        .ok();
    let done = owner
        .wait_call(
            "interop",
            call["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(result_text(&done), "Echo: interop works");

    // Bad arguments: the reference server answers with an error result, recorded as such.
    let bad = owner
        .post(
            "/api/v1/workspaces/interop/calls",
            json!({"request_id": uuid::Uuid::new_v4(), "profile_id": "p", "connection_id": "everything",
                   "tool_name": "echo", "arguments": {"wrong": 1}}),
        )
        .await
        .ok();
    let bad = owner
        .wait_call(
            "interop",
            bad["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(bad["state"], "tool_error", "{bad}");
}
