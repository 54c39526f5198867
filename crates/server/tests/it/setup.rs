//! Workspaces, connectors, connections, discovery, profiles and grants, with their authority.

use crate::harness::*;
use serde_json::json;
use sqlx::PgPool;

#[sqlx::test(migrations = "../../migrations")]
async fn tokens_are_required_and_checked(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    server
        .anonymous()
        .get("/api/v1/me")
        .await
        .refused(401, "unauthenticated");
    let me = server.owner.get("/api/v1/me").await.ok();
    assert_eq!(
        (me["name"].as_str(), me["is_owner"].as_bool()),
        (Some("owner"), Some(true))
    );
    // Only the hash is stored: no row holds the token text.
    let stored: Vec<Vec<u8>> = sqlx::query_scalar("SELECT token_hash FROM api_tokens")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].len(), 32);
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_operator_tour_works_and_discovers_tools(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let owner = &server.owner;
    let ws = owner
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    let envs = owner.get("/api/v1/workspaces/acme/environments").await.ok();
    assert_eq!(envs[0]["name"], "default");
    owner
        .post(
            "/api/v1/workspaces/acme/environments",
            json!({"name": "prod"}),
        )
        .await
        .ok();

    let connector = owner
        .post("/api/v1/connectors", json!({"name": "fx", "transport": "stdio", "command": fixture_bin(), "args": ["stdio"]}))
        .await
        .ok();
    assert_eq!(connector["approved"], false);
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "fx", "connector": "fx"}),
        )
        .await
        .ok();
    // An unapproved stdio command is inert: not even discovery starts it.
    owner
        .post("/api/v1/workspaces/acme/connections/fx/discover", json!({}))
        .await
        .refused(409, "connector_not_approved");
    assert_eq!(
        owner
            .post("/api/v1/connectors/fx/approve", json!({}))
            .await
            .ok()["approved"],
        true
    );

    let discovery = owner
        .post("/api/v1/workspaces/acme/connections/fx/discover", json!({}))
        .await
        .ok();
    let names: Vec<&str> = discovery["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for tool in [
        "echo", "slow", "fail", "crash", "count", "big", "noisy", "env",
    ] {
        assert!(names.contains(&tool), "{tool} missing from {names:?}");
    }
    let tools = owner
        .get(&format!(
            "/api/v1/workspaces/{}/connections/fx/tools",
            ws["id"].as_str().unwrap()
        ))
        .await
        .ok();
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap();
    assert_eq!(echo["input_schema"]["type"], "object");
    assert!(echo["available"].as_bool().unwrap());
    let connection = owner
        .get("/api/v1/workspaces/acme/connections/fx")
        .await
        .ok();
    assert!(connection["last_discovery_at"].is_string());
    assert_eq!(connection["runner"], "central");

    let profile = owner
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "ops", "environment": "prod", "connections": ["fx"]}),
        )
        .await
        .ok();
    // The creating admin gets Manage and Share, never Use.
    assert_eq!(profile["grants"][0]["use"], false);
    assert_eq!(profile["grants"][0]["manage"], true);
    assert_eq!(profile["grants"][0]["share"], true);
}

#[sqlx::test(migrations = "../../migrations")]
async fn connectors_are_owner_only_and_import_drops_secret_values(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let bob = server.user("bob").await;
    bob.post(
        "/api/v1/connectors",
        json!({"name": "x", "transport": "http", "url": "https://example.test/mcp"}),
    )
    .await
    .refused(403, "forbidden");
    // An HTTP connector is stored only once its endpoint answered the MCP handshake.
    let (url, _fixture) = http_fixture(&[], &[]);
    let report = server
        .owner
        .post(
            "/api/v1/connectors/import",
            json!({"mcpServers": {
                "files": {"command": "npx", "args": ["-y", "files"], "env": {"API_KEY": "canary-8a7f3b"}},
                "remote": {"url": url}
            }}),
        )
        .await
        .ok();
    assert_eq!(report["created"].as_array().unwrap().len(), 2);
    assert!(report["warnings"][0].as_str().unwrap().contains("API_KEY"));
    let files = server.owner.get("/api/v1/connectors/files").await.ok();
    assert_eq!(files["env"], json!(["API_KEY"]));
    assert_eq!(files["approved"], false);
    assert_eq!(
        server.owner.get("/api/v1/connectors/remote").await.ok()["approved"],
        true
    );
    let dump: Vec<String> = sqlx::query_scalar("SELECT row_to_json(c)::text FROM connectors c")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(
        dump.iter().all(|row| !row.contains("canary-8a7f3b")),
        "a secret value was stored"
    );
    // A failed import writes nothing.
    server
        .owner
        .post("/api/v1/connectors/import", json!({"mcpServers": {"new-one": {"url": "https://x.test/mcp"}, "files": {"command": "y"}}}))
        .await
        .refused(409, "already_exists");
    server
        .owner
        .get("/api/v1/connectors/new-one")
        .await
        .refused(404, "connector_not_found");
}

#[sqlx::test(migrations = "../../migrations")]
async fn grants_are_independent_and_workspaces_are_isolated(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let ws = &setup.ws;
    let bob = server.user("bob").await;
    let eve = server.user("eve").await;

    // Not a member: the workspace does not exist for bob.
    bob.get(&format!("/api/v1/workspaces/{ws}"))
        .await
        .refused(404, "workspace_not_found");
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/members"),
            json!({"user": "bob", "role": "admin"}),
        )
        .await
        .ok();
    // Admin, and then Manage + Share, still do not give Use.
    bob.post(
        &format!("/api/v1/workspaces/{ws}/calls"),
        call_body("echo", json!({"text": "hi"})),
    )
    .await
    .refused(403, "forbidden");
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/profiles/main/grants"),
            json!({"user": "bob", "manage": true, "share": true}),
        )
        .await
        .ok();
    bob.post(
        &format!("/api/v1/workspaces/{ws}/calls"),
        call_body("echo", json!({"text": "hi"})),
    )
    .await
    .refused(403, "forbidden");

    // The owner's call is invisible to bob (no Use) and to eve (another workspace).
    let call = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls"),
            call_body("echo", json!({"text": "hi"})),
        )
        .await
        .ok();
    let id = call["id"].as_str().unwrap();
    bob.get(&format!("/api/v1/workspaces/{ws}/calls/{id}"))
        .await
        .refused(403, "forbidden");
    assert_eq!(
        bob.get(&format!("/api/v1/workspaces/{ws}/calls"))
            .await
            .ok()["calls"],
        json!([])
    );
    eve.post("/api/v1/workspaces", json!({"name": "evil"}))
        .await
        .ok();
    eve.get(&format!("/api/v1/workspaces/evil/calls/{id}"))
        .await
        .refused(404, "call_not_found");
    eve.get(&format!("/api/v1/workspaces/{ws}/calls/{id}"))
        .await
        .refused(404, "workspace_not_found");

    // Share never lets bob grant Use to himself; the owner may, and from then on he reads
    // results.
    bob.post(
        &format!("/api/v1/workspaces/{ws}/profiles/main/grants"),
        json!({"user": "bob", "use": true}),
    )
    .await
    .refused(403, "forbidden");
    bob.get(&format!("/api/v1/workspaces/{ws}/calls/{id}"))
        .await
        .refused(403, "forbidden");
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/profiles/main/grants"),
            json!({"user": "bob", "use": true}),
        )
        .await
        .ok();
    let done = bob
        .wait_call(ws, id, std::time::Duration::from_secs(30))
        .await;
    assert_eq!(done["state"], "succeeded");
}
