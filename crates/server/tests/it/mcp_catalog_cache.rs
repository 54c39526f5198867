//! The catalogs each replica keeps for `/mcp` (`app/mcp_catalog_cache.rs`): a change to what an
//! agent is offered reaches its next request on every replica, and calls, which change none of
//! it, leave the kept catalogs in use.

use crate::harness::*;
use crate::mcp_agents::{agent_in_acme, call, connect, names, set, text};
use serde_json::json;
use sqlx::PgPool;

/// The generation of every `/mcp` catalog.
async fn generation(server: &TestServer) -> i64 {
    sqlx::query_scalar("SELECT generation FROM mcp_catalog_generation")
        .fetch_one(&server.pool)
        .await
        .expect("the catalogs' generation")
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_changed_filter_reaches_the_next_request_on_every_replica(pool: PgPool) {
    let first = TestServer::start(pool).await;
    let second = TestServer::replica(&first).await;
    let token = agent_in_acme(&first).await;
    set(&first, json!({"include": ["echo", "cwd"]})).await;
    let (on_first, on_second) = (
        connect(&first, &token).await,
        connect(&second, &token).await,
    );
    let both = ["fixture__cwd", "fixture__echo"];
    assert_eq!(names(&on_first).await, both);
    assert_eq!(names(&on_second).await, both);
    let answer = call(&on_second, "fixture__cwd", json!({})).await;
    assert_ne!(answer["isError"], true, "{answer}");

    // The change commits before the next request: no replica answers from what it kept.
    set(&first, json!({"include": ["echo"]})).await;
    assert_eq!(names(&on_first).await, ["fixture__echo"]);
    assert_eq!(names(&on_second).await, ["fixture__echo"]);
    let refused = call(&on_second, "fixture__cwd", json!({})).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).contains("not_included"), "{refused}");

    // A grant taken away is gone from the next request too.
    first
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants/revoke",
            json!({"agent": "bot", "use": true}),
        )
        .await
        .ok();
    assert!(names(&on_first).await.is_empty());
    assert!(names(&on_second).await.is_empty());
    on_first.cancel().await.unwrap();
    on_second.cancel().await.unwrap();
}

#[sqlx::test(migrations = "../../migrations")]
async fn calls_leave_the_kept_catalogs_in_use(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let token = agent_in_acme(&server).await;
    let client = connect(&server, &token).await;
    assert!(names(&client).await.contains(&"fixture__echo".to_owned()));

    let before = generation(&server).await;
    for n in 0..5 {
        let answer = call(
            &client,
            "fixture__echo",
            json!({"text": format!("call {n}")}),
        )
        .await;
        assert_eq!(text(&answer), format!("call {n}"), "{answer}");
    }
    let failed = call(&client, "fixture__fail", json!({})).await;
    assert_eq!(failed["isError"], true, "{failed}");
    assert_eq!(
        generation(&server).await,
        before,
        "calls changed nothing an agent is offered"
    );
    client.cancel().await.unwrap();
}
