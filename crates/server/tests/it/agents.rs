//! Agents as principals: created by admins with a token shown once, granted Use only, refused
//! everywhere but `/mcp`, configured per connection, revoked for good.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use switchyard_protocol::api::SubmitCall;
use switchyard_protocol::{CallState, RequestId};
use switchyard_server::app::{App, AppConfig};
use switchyard_server::db::Datastore;

/// Creates agent `name` in `acme` as the owner (an admin of it) and returns its token.
async fn create_agent(server: &TestServer, name: &str) -> String {
    let created = server
        .owner
        .post("/api/v1/workspaces/acme/agents", json!({"name": name}))
        .await
        .ok();
    created["token"].as_str().expect("a token").to_owned()
}

/// A submission of the fixture's `tool` under `main`, as an agent's MCP call would make it.
fn submission(tool: &str) -> SubmitCall {
    SubmitCall {
        request_id: RequestId::new(),
        profile_id: "main".into(),
        connection_id: "fixture".into(),
        tool_name: tool.into(),
        arguments: json!({"text": "hi"}),
        environment_id: None,
        client_session_id: None,
        timeout_seconds: Some(30),
        operation_id: None,
    }
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_agent_token_works_on_mcp_only_and_stops_when_revoked(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let token = create_agent(&server, "triage-bot").await;
    assert!(token.starts_with("sy_"), "{token}");

    // The REST API and the inspector refuse it, saying where it works.
    let agent = Client::at(&format!("http://{}", server.addr), &token);
    let refusal = agent
        .get("/api/v1/workspaces")
        .await
        .refused(401, "unauthenticated");
    assert!(refusal.contains("/mcp only"), "{refusal}");
    agent
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("echo", json!({"text": "x"})),
        )
        .await
        .refused(401, "unauthenticated");

    // The inspector signs nobody in with it.
    assert!(
        crate::authz::principal::sign_in(&server, &token)
            .await
            .is_none(),
        "an agent token signed in to the inspector"
    );

    // `/mcp` authenticates it as itself.
    let app = App::new(Datastore::new(pool.clone()), AppConfig::default());
    let (actor, _) = app
        .mcp_authenticate(&token, None)
        .await
        .expect("accepted on /mcp");
    assert_eq!(actor.user.name, "triage-bot@acme");

    // A call of its that waits for a person is cancelled by the revoke: nobody can approve it
    // into running afterwards.
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"agent": "triage-bot", "use": true}),
        )
        .await
        .ok();
    server
        .owner
        .put(
            "/api/v1/workspaces/acme/agents/triage-bot/connections/fixture",
            json!({"approve": "always"}),
        )
        .await
        .ok();
    let (held, _) = app
        .call_submit(&actor, "acme", submission("echo"))
        .await
        .unwrap();
    assert_eq!(held.state, CallState::AwaitingApproval);

    // Listed, then revoked: the token stops working at once.
    let list = server
        .owner
        .get("/api/v1/workspaces/acme/agents")
        .await
        .ok();
    assert_eq!(list[0]["name"], "triage-bot");
    assert_eq!(list[0]["revoked_at"], Value::Null);
    let revoked = server
        .owner
        .post(
            "/api/v1/workspaces/acme/agents/triage-bot/revoke",
            json!({}),
        )
        .await
        .ok();
    assert!(revoked["revoked_at"].is_string());
    let refused = app
        .mcp_authenticate(&token, None)
        .await
        .expect_err("revoked");
    assert!(refused.to_string().contains("revoked"), "{refused}");
    let call = server
        .owner
        .get(&format!("/api/v1/workspaces/acme/calls/{}", held.id))
        .await
        .ok();
    assert_eq!(call["state"], "cancelled", "{call}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn only_admins_create_agents_and_names_are_unique(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let bob = server.member("acme", "bob", "member").await;
    bob.post("/api/v1/workspaces/acme/agents", json!({"name": "bot"}))
        .await
        .refused(403, "forbidden");
    create_agent(&server, "bot").await;
    server
        .owner
        .post("/api/v1/workspaces/acme/agents", json!({"name": "bot"}))
        .await
        .refused(409, "already_exists");
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/agents",
            json!({"name": "not a name"}),
        )
        .await
        .refused(400, "invalid_name");
    // Members see the agents; an unknown one is a clear 404.
    let shown = bob.get("/api/v1/workspaces/acme/agents/bot").await.ok();
    assert_eq!(shown["agent"]["mode"], "tools");
    bob.get("/api/v1/workspaces/acme/agents/nobody")
        .await
        .refused(404, "agent_not_found");
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_agent_holds_use_only_and_never_two_different_routes(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    create_agent(&server, "bot").await;
    let owner = &server.owner;
    for grant in ["manage", "share", "approve"] {
        let refusal = owner
            .post(
                "/api/v1/workspaces/acme/profiles/main/grants",
                json!({"agent": "bot", "use": true, grant: true}),
            )
            .await
            .refused(400, "invalid_request");
        assert!(refusal.contains("Use only"), "{refusal}");
    }
    // Naming both, or an agent as a user, is refused.
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"agent": "bot", "user": "owner", "use": true}),
        )
        .await
        .refused(400, "invalid_request");
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"user": "bot@acme", "use": true}),
        )
        .await
        .refused(400, "invalid_request");
    let granted = owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"agent": "bot", "use": true}),
        )
        .await
        .ok();
    assert!(
        granted["grants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["user_name"] == "bot@acme" && g["use"] == true),
        "{granted}"
    );

    // A second profile over the same connection with other tools is a second route that
    // grants it differently: refused, nothing granted.
    owner
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "narrow", "connections": ["fixture"], "tools": ["echo"]}),
        )
        .await
        .ok();
    let refusal = owner
        .post(
            "/api/v1/workspaces/acme/profiles/narrow/grants",
            json!({"agent": "bot", "use": true}),
        )
        .await
        .refused(409, "conflicting_routes");
    assert!(refusal.contains("`main`"), "{refusal}");
    let shown = owner.get("/api/v1/workspaces/acme/agents/bot").await.ok();
    let profiles: Vec<&str> = shown["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(profiles, ["main"]);
    // A profile granting the connection alike is no conflict.
    owner
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "alike", "connections": ["fixture"]}),
        )
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/alike/grants",
            json!({"agent": "bot", "use": true}),
        )
        .await
        .ok();
    let tools = owner
        .get("/api/v1/workspaces/acme/agents/bot/tools")
        .await
        .ok();
    assert_eq!(tools["unavailable"], json!([]), "{tools}");
    assert!(!tools["tools"].as_array().unwrap().is_empty(), "{tools}");

    // One of them then grants it differently: by the same rule, the connection offers the
    // agent nothing until a person removes the conflict, and says why.
    owner
        .put(
            "/api/v1/workspaces/acme/profiles/alike/connections/fixture/tools",
            json!({"tools": ["echo"]}),
        )
        .await
        .ok();
    let tools = owner
        .get("/api/v1/workspaces/acme/agents/bot/tools")
        .await
        .ok();
    assert_eq!(
        tools["unavailable"],
        json!([{"connection": "fixture", "reason": "conflicting_routes"}]),
        "{tools}"
    );
    assert_eq!(tools["tools"], json!([]), "{tools}");
    // …and a grant that would add another such route is refused, naming the one it meets.
    let refusal = owner
        .post(
            "/api/v1/workspaces/acme/profiles/narrow/grants",
            json!({"agent": "bot", "use": true}),
        )
        .await
        .refused(409, "conflicting_routes");
    assert!(refusal.contains("`main`"), "{refusal}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn connection_settings_are_replaced_whole_and_checked(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    create_agent(&server, "bot").await;
    let path = "/api/v1/workspaces/acme/agents/bot/connections/fixture";
    let set = server
        .owner
        .put(
            path,
            json!({"include": ["ec*"], "read_only": true, "defer": true, "approve": "always", "auth_failure": "degrade"}),
        )
        .await
        .ok();
    assert_eq!(set["include"], json!(["ec*"]));
    assert_eq!(set["approve"], "always");
    assert_eq!(set["auth_failure"], "degrade");
    assert_eq!(set["announce"], "auto");
    // Replaced whole: what is not sent is back to its default.
    let set = server
        .owner
        .put(path, json!({"exclude": ["sleep"]}))
        .await
        .ok();
    assert_eq!(set["include"], json!([]));
    assert_eq!(set["read_only"], false);
    assert_eq!(set["auth_failure"], "stop");
    let shown = server
        .owner
        .get("/api/v1/workspaces/acme/agents/bot")
        .await
        .ok();
    assert_eq!(shown["connections"][0]["connection_name"], "fixture");
    assert_eq!(shown["connections"][0]["exclude"], json!(["sleep"]));

    server
        .owner
        .put(path, json!({"include": ["has space"]}))
        .await
        .refused(400, "invalid_request");
    server
        .owner
        .put(path, json!({"approve": "sometimes"}))
        .await
        .refused(400, "invalid_request");
    server
        .owner
        .put(
            "/api/v1/workspaces/acme/agents/bot/connections/nope",
            json!({}),
        )
        .await
        .refused(404, "connection_not_found");
    let bob = server.member("acme", "bob", "member").await;
    bob.put(path, json!({})).await.refused(403, "forbidden");
    // The mode and deferral are the agent's own.
    let edited = server
        .owner
        .send(
            reqwest::Method::PATCH,
            "/api/v1/workspaces/acme/agents/bot",
            Some(json!({"mode": "menu"})),
        )
        .await
        .ok();
    assert_eq!(edited["mode"], "menu");
    assert_eq!(edited["defer_all"], false);
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_agents_approval_policy_adds_a_person_beside_the_profiles(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let token = create_agent(&server, "bot").await;
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"agent": "bot", "use": true}),
        )
        .await
        .ok();
    let app = App::new(Datastore::new(pool.clone()), AppConfig::default());
    let (agent, _) = app.mcp_authenticate(&token, None).await.unwrap();

    // Under the profile's default policy a low-risk call runs.
    let (call, _) = app
        .call_submit(&agent, "acme", submission("echo"))
        .await
        .unwrap();
    assert_ne!(call.state, CallState::AwaitingApproval);

    // The agent's own `always` holds its calls for a person; a person's calls are unchanged.
    server
        .owner
        .put(
            "/api/v1/workspaces/acme/agents/bot/connections/fixture",
            json!({"approve": "always"}),
        )
        .await
        .ok();
    let (held, _) = app
        .call_submit(&agent, "acme", submission("echo"))
        .await
        .unwrap();
    assert_eq!(held.state, CallState::AwaitingApproval);
    let person = server
        .owner
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("echo", json!({"text": "x"})),
        )
        .await
        .ok();
    assert_ne!(person["state"], "awaiting_approval");
    // The agent's calls are its own: it is their submitter.
    let by_agent: i64 = sqlx::query_scalar("SELECT count(*) FROM calls WHERE created_by = $1")
        .bind(agent.user.id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(by_agent, 2);
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_declared_mark_is_set_at_creation_and_changed_by_admins_only(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    // Made by hand: not declared.
    let hand = server
        .owner
        .get("/api/v1/workspaces/acme/connections/fixture")
        .await
        .ok();
    assert_eq!(hand["declared"], false, "{hand}");
    // Created by a file: declared, in the answer and when read again.
    let agent = server
        .owner
        .post(
            "/api/v1/workspaces/acme/agents",
            json!({"name": "filed", "declared": true}),
        )
        .await
        .ok();
    assert_eq!(agent["agent"]["declared"], true, "{agent}");
    let listed = server
        .owner
        .get("/api/v1/workspaces/acme/agents")
        .await
        .ok();
    assert_eq!(listed[0]["declared"], true, "{listed}");

    // Adopted: an admin marks the hand-made connection and an agent declared.
    let adopted = server
        .owner
        .put(
            "/api/v1/workspaces/acme/connections/fixture/declared",
            json!({"declared": true}),
        )
        .await
        .ok();
    assert_eq!(adopted["declared"], true, "{adopted}");
    create_agent(&server, "handmade").await;
    let edited = server
        .owner
        .send(
            reqwest::Method::PATCH,
            "/api/v1/workspaces/acme/agents/handmade",
            Some(json!({"declared": true})),
        )
        .await
        .ok();
    assert_eq!(edited["declared"], true, "{edited}");
    assert_eq!(edited["mode"], "tools", "{edited}");

    // A member who is not an admin may not; a bad body is refused as such.
    let bob = server.member("acme", "bob", "member").await;
    bob.put(
        "/api/v1/workspaces/acme/connections/fixture/declared",
        json!({"declared": false}),
    )
    .await
    .refused(403, "forbidden");
    server
        .owner
        .put(
            "/api/v1/workspaces/acme/connections/fixture/declared",
            json!({"declared": "yes"}),
        )
        .await
        .refused(400, "invalid_request");
    let still = server
        .owner
        .get("/api/v1/workspaces/acme/connections/fixture")
        .await
        .ok();
    assert_eq!(still["declared"], true, "{still}");
}
