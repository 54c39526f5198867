//! Taking access away: personal API tokens (created with an optional expiry, listed without
//! secrets, revoked; refused from their next request), members removed with their grants, and
//! grants revoked — each recorded with who did it, and bad input storing nothing.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;

async fn tokens_stored(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM api_tokens")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_user_creates_lists_and_revokes_their_own_tokens(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let base = format!("http://{}", server.addr);

    let created = server
        .owner
        .post("/api/v1/tokens", json!({"name": "ci"}))
        .await
        .ok();
    let secret = created["secret"].as_str().expect("the secret").to_owned();
    assert!(secret.starts_with("sy_") && secret.len() == 67, "{created}");
    assert_eq!(created["token"]["name"], "ci", "{created}");
    assert!(created["token"]["expires_at"].is_null(), "{created}");
    let id = created["token"]["id"].as_str().unwrap().to_owned();

    // The new token acts as its user.
    let ci = Client::at(&base, &secret);
    assert_eq!(ci.get("/api/v1/me").await.ok()["name"], "owner");

    // Listed with the first one, never with a secret.
    let listed = server.owner.get("/api/v1/tokens").await.ok();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["initial", "ci"], "{listed}");
    assert!(!listed.to_string().contains(&secret[3..]), "{listed}");
    assert!(!listed.to_string().contains("secret"), "{listed}");

    // Another user cannot revoke it, and learns nothing of it.
    let bob = server.user("bob").await;
    bob.post(&format!("/api/v1/tokens/{id}/revoke"), json!({}))
        .await
        .refused(404, "token_not_found");
    assert_eq!(ci.get("/api/v1/me").await.ok()["name"], "owner");

    // Revoked by its user: refused at once; the user's other token goes on working.
    let revoked = server
        .owner
        .post(&format!("/api/v1/tokens/{id}/revoke"), json!({}))
        .await
        .ok();
    assert!(revoked["revoked_at"].is_string(), "{revoked}");
    ci.get("/api/v1/me").await.refused(401, "unauthenticated");
    ci.get("/api/v1/workspaces")
        .await
        .refused(401, "unauthenticated");
    assert_eq!(server.owner.get("/api/v1/me").await.ok()["name"], "owner");

    // Revoking it again answers it as it is; its revocation keeps its first time.
    let again = server
        .owner
        .post(&format!("/api/v1/tokens/{id}/revoke"), json!({}))
        .await
        .ok();
    assert_eq!(again["revoked_at"], revoked["revoked_at"]);
    let (by,): (Option<uuid::Uuid>,) =
        sqlx::query_as("SELECT revoked_by FROM api_tokens WHERE id = $1::uuid")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
    let owner = server.owner.get("/api/v1/me").await.ok();
    assert_eq!(
        by.map(|u| u.to_string()),
        owner["id"].as_str().map(str::to_owned)
    );
    let changes = access_changes(&pool).await;
    assert_eq!(changes.len(), 1, "one revocation recorded: {changes:?}");
    let (action, actor, subject) = &changes[0];
    assert_eq!(
        (action.as_str(), actor.as_str()),
        ("token_revoked", "owner")
    );
    assert_eq!(subject["token_id"], id.as_str(), "{subject}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_token_that_expired_is_refused(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let created = server
        .owner
        .post(
            "/api/v1/tokens",
            json!({"name": "short-lived", "expires_in_seconds": 3600}),
        )
        .await
        .ok();
    let expires: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(created["token"]["expires_at"].clone()).expect("an expiry");
    let in_an_hour = chrono::Utc::now() + chrono::Duration::hours(1);
    assert!((in_an_hour - expires).num_seconds().abs() < 60, "{created}");
    let token = Client::at(
        &format!("http://{}", server.addr),
        created["secret"].as_str().unwrap(),
    );
    assert_eq!(token.get("/api/v1/me").await.ok()["name"], "owner");

    // The hour passes.
    sqlx::query(
        "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE name = 'short-lived'",
    )
    .execute(&pool)
    .await
    .unwrap();
    token
        .get("/api/v1/me")
        .await
        .refused(401, "unauthenticated");
    let setup = server
        .owner
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await;
    assert_eq!(setup.status, 201, "the owner's other token still works");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_bad_token_request_is_refused_and_stores_nothing(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let before = tokens_stored(&pool).await;
    let cases: [(Value, &str); 4] = [
        (
            json!({"name": "ci", "expires_in_seconds": 0}),
            "invalid_request",
        ),
        (
            json!({"name": "ci", "expires_in_seconds": 400_000_000u64}),
            "invalid_request",
        ),
        (json!({"name": "has space"}), "invalid_name"),
        (json!({"expires_in_seconds": 60}), "invalid_request"),
    ];
    for (body, code) in cases {
        let message = server
            .owner
            .post("/api/v1/tokens", body.clone())
            .await
            .refused(400, code);
        assert!(!message.is_empty(), "{body}: a message says what to fix");
    }
    server
        .owner
        .post("/api/v1/tokens/not-a-token/revoke", json!({}))
        .await
        .refused(404, "token_not_found");
    server
        .anonymous()
        .post("/api/v1/tokens", json!({"name": "ci"}))
        .await
        .refused(401, "unauthenticated");
    assert_eq!(tokens_stored(&pool).await, before);
}

/// The access changes recorded, oldest first: (action, actor's name or `operator`, subject).
async fn access_changes(pool: &PgPool) -> Vec<(String, String, Value)> {
    sqlx::query_as(
        "SELECT a.action, COALESCE(u.name, 'operator'), a.subject
         FROM access_changes a LEFT JOIN users u ON u.id = a.actor_id ORDER BY a.at, a.id",
    )
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .map(
        |(action, actor, subject): (String, String, sqlx::types::Json<Value>)| {
            (action, actor, subject.0)
        },
    )
    .collect()
}

/// `call_body` under profile `profile` instead of `main`.
fn call_in(profile: &str, tool: &str, arguments: Value) -> Value {
    let mut body = call_body(tool, arguments);
    body["profile_id"] = json!(profile);
    body
}

/// Adds `name` to workspace `ws` as a member and grants them Use on `main`, as the owner.
async fn member_with_use(server: &TestServer, ws: &str, name: &str) -> Client {
    let user = server.user(name).await;
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/members"),
            json!({"user": name}),
        )
        .await
        .ok();
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/profiles/main/grants"),
            json!({"user": name, "use": true, "share": true}),
        )
        .await
        .ok();
    user
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_removed_member_loses_their_grants_and_runs_nothing(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let bob = member_with_use(&server, "acme", "bob").await;
    let call = bob
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("echo", json!({"text": "before"})),
        )
        .await
        .ok();
    let call_id = call["id"].as_str().unwrap().to_owned();
    server
        .owner
        .wait_call("acme", &call_id, std::time::Duration::from_secs(30))
        .await;

    // A member may not remove anyone; an admin may.
    bob.post("/api/v1/workspaces/acme/members/owner/remove", json!({}))
        .await
        .refused(403, "forbidden");
    let removed = server
        .owner
        .post("/api/v1/workspaces/acme/members/bob/remove", json!({}))
        .await
        .ok();
    assert_eq!(removed["member"]["user_name"], "bob", "{removed}");
    assert_eq!(removed["grants_removed"], 2, "Use and Share: {removed}");

    // Bob is out: the workspace looks unknown to him, and he submits nothing.
    bob.get("/api/v1/workspaces/acme")
        .await
        .refused(404, "workspace_not_found");
    bob.post(
        "/api/v1/workspaces/acme/calls",
        call_body("echo", json!({"text": "after"})),
    )
    .await
    .refused(404, "workspace_not_found");
    let profile = server
        .owner
        .get("/api/v1/workspaces/acme/profiles/main")
        .await
        .ok();
    let holders: Vec<&str> = profile["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["user_name"].as_str().unwrap())
        .collect();
    assert!(!holders.contains(&"bob"), "{profile}");
    // His call stays readable to the workspace.
    let kept = server
        .owner
        .get(&format!("/api/v1/workspaces/acme/calls/{call_id}"))
        .await
        .ok();
    assert_eq!(kept["state"], "succeeded", "{kept}");

    // Removing him again, or the only admin, changes nothing.
    server
        .owner
        .post("/api/v1/workspaces/acme/members/bob/remove", json!({}))
        .await
        .refused(404, "member_not_found");
    server
        .owner
        .post("/api/v1/workspaces/acme/members/owner/remove", json!({}))
        .await
        .refused(409, "last_admin");
    server.owner.get("/api/v1/workspaces/acme").await.ok();

    let changes = access_changes(&pool).await;
    assert_eq!(changes.len(), 1, "{changes:?}");
    let (action, actor, subject) = &changes[0];
    assert_eq!(
        (action.as_str(), actor.as_str()),
        ("member_removed", "owner")
    );
    assert_eq!(subject["grants_removed"], 2, "{subject}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn revoked_use_stops_the_next_call_and_use_is_never_self_granted(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let bob = member_with_use(&server, "acme", "bob").await;
    let carol = member_with_use(&server, "acme", "carol").await;

    // A Share holder grants others, never themselves, Use; the installation owner may.
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/members",
            json!({"user": "bob", "role": "admin"}),
        )
        .await
        .ok();
    let created = bob
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "bobs", "connections": ["fixture"]}),
        )
        .await
        .ok();
    assert_eq!(created["name"], "bobs");
    bob.post(
        "/api/v1/workspaces/acme/profiles/bobs/grants",
        json!({"user": "bob", "use": true}),
    )
    .await
    .refused(403, "forbidden");
    bob.post(
        "/api/v1/workspaces/acme/profiles/bobs/grants",
        json!({"user": "carol", "use": true}),
    )
    .await
    .ok();
    let grants: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM profile_grants g JOIN users u ON u.id = g.user_id
         WHERE u.name = 'bob' AND g.grant_kind = 'use' AND g.profile_id = (SELECT id FROM profiles WHERE name = 'bobs')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(grants, 0, "bob holds no Use on the profile he made");

    // Carol may not revoke (no Share on `bobs`); bob, holding Share, may.
    carol
        .post(
            "/api/v1/workspaces/acme/profiles/bobs/grants/revoke",
            json!({"user": "carol", "use": true}),
        )
        .await
        .refused(403, "forbidden");
    let body = call_in("bobs", "echo", json!({"text": "while granted"}));
    carol.post("/api/v1/workspaces/acme/calls", body).await.ok();
    let after = bob
        .post(
            "/api/v1/workspaces/acme/profiles/bobs/grants/revoke",
            json!({"user": "carol", "use": true}),
        )
        .await
        .ok();
    assert!(
        after["grants"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["user_name"] != "carol"),
        "{after}"
    );
    let body = call_in("bobs", "echo", json!({"text": "after the revocation"}));
    carol
        .post("/api/v1/workspaces/acme/calls", body)
        .await
        .refused(403, "forbidden");
    // Carol's Use on `main` is untouched.
    carol
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("echo", json!({"text": "main"})),
        )
        .await
        .ok();

    // Revoking nothing named is refused; revoking what is not held records nothing.
    bob.post(
        "/api/v1/workspaces/acme/profiles/bobs/grants/revoke",
        json!({"user": "carol"}),
    )
    .await
    .refused(400, "invalid_request");
    bob.post(
        "/api/v1/workspaces/acme/profiles/bobs/grants/revoke",
        json!({"user": "carol", "use": true}),
    )
    .await
    .ok();
    let changes = access_changes(&pool).await;
    assert_eq!(changes.len(), 1, "{changes:?}");
    let (action, actor, subject) = &changes[0];
    assert_eq!((action.as_str(), actor.as_str()), ("grant_revoked", "bob"));
    assert_eq!(subject["grants"], json!(["use"]), "{subject}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_request_id_conflict_does_not_name_another_users_call(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let bob = member_with_use(&server, "acme", "bob").await;
    let carol = member_with_use(&server, "acme", "carol").await;
    let mut body = call_body("echo", json!({"text": "bob's"}));
    let bobs = bob
        .post("/api/v1/workspaces/acme/calls", body.clone())
        .await
        .ok();
    let bobs_id = bobs["id"].as_str().unwrap();

    body["arguments"] = json!({"text": "carol's"});
    let message = carol
        .post("/api/v1/workspaces/acme/calls", body.clone())
        .await
        .refused(422, "mcp_request_conflict");
    assert!(!message.contains(bobs_id), "{message}");
    assert!(message.contains("another submitter"), "{message}");
    // The same body again is no replay of bob's call for carol either.
    let mut same = body.clone();
    same["arguments"] = json!({"text": "bob's"});
    let same = carol
        .post("/api/v1/workspaces/acme/calls", same)
        .await
        .refused(422, "mcp_request_conflict");
    assert!(!same.contains(bobs_id), "{same}");
    // To bob himself the conflict names his call.
    let own = bob
        .post("/api/v1/workspaces/acme/calls", body)
        .await
        .refused(422, "mcp_request_conflict");
    assert!(own.contains(bobs_id), "{own}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn commands_and_urls_are_shown_only_to_those_who_manage_connectors(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let command = fixture_bin();
    let (url, _fixture) = http_fixture(&[], &[]);
    server
        .owner
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": url}),
        )
        .await
        .ok();
    let bob = member_with_use(&server, "acme", "bob").await;

    let seen_by_bob = bob.get("/api/v1/connectors").await.ok();
    let text = seen_by_bob.to_string();
    assert!(!text.contains(&command) && !text.contains(&url), "{text}");
    let transports: Vec<(&str, &str)> = seen_by_bob
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap(),
                c["transport"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(transports, [("fixture-acme", "stdio"), ("remote", "http")]);
    let one = bob.get("/api/v1/connectors/remote").await.ok();
    assert!(one.get("url").is_none(), "{one}");

    let seen_by_owner = server
        .owner
        .get("/api/v1/connectors")
        .await
        .ok()
        .to_string();
    assert!(
        seen_by_owner.contains(&command) && seen_by_owner.contains(&url),
        "{seen_by_owner}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_profile_that_lists_tools_runs_those_tools_only(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let bob = member_with_use(&server, "acme", "bob").await;
    let created = server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "narrow", "connections": ["fixture"], "tools": ["echo"]}),
        )
        .await
        .ok();
    let connection = created["connection_ids"][0].as_str().unwrap().to_owned();
    assert_eq!(created["tools"][&connection], json!(["echo"]), "{created}");
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/narrow/grants",
            json!({"user": "bob", "use": true}),
        )
        .await
        .ok();
    let call = |tool: &str, arguments: Value| call_in("narrow", tool, arguments);
    let calls = "/api/v1/workspaces/acme/calls";
    bob.post(calls, call("echo", json!({"text": "granted"})))
        .await
        .ok();
    let message = bob
        .post(calls, call("fail", json!({"message": "not granted"})))
        .await
        .refused(403, "tool_not_granted");
    assert!(message.contains("`fail`"), "{message}");
    let stored = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM calls")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(stored().await, 1, "nothing queued for the refused tool");

    // The set is replaced whole, by a holder of Manage only.
    let tools = "/api/v1/workspaces/acme/profiles/narrow/connections/fixture/tools";
    let put = |client: &Client, body: Value| {
        let client = client.clone();
        async move { client.send(reqwest::Method::PUT, tools, Some(body)).await }
    };
    put(&bob, json!({"tools": ["echo", "fail"]}))
        .await
        .refused(403, "forbidden");
    let set = put(&server.owner, json!({"tools": ["fail"]})).await.ok();
    assert_eq!(set["tools"][&connection], json!(["fail"]), "{set}");
    bob.post(calls, call("fail", json!({"message": "now granted"})))
        .await
        .ok();
    bob.post(calls, call("echo", json!({"text": "no longer"})))
        .await
        .refused(403, "tool_not_granted");

    // Bad sets change nothing.
    put(&server.owner, json!({"tools": []}))
        .await
        .refused(400, "invalid_request");
    put(&server.owner, json!({"tools": ["fail", "fail"]}))
        .await
        .refused(400, "invalid_request");
    put(&server.owner, json!({"tools": ["no_such_tool"]}))
        .await
        .refused(404, "tool_not_found");
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "two", "connections": ["fixture", "fixture"], "tools": ["echo"]}),
        )
        .await
        .refused(400, "invalid_request");
    let profile = server
        .owner
        .get("/api/v1/workspaces/acme/profiles/narrow")
        .await
        .ok();
    assert_eq!(profile["tools"][&connection], json!(["fail"]), "{profile}");

    // `null` grants the connection whole again.
    let whole = put(&server.owner, json!({"tools": null})).await.ok();
    assert!(whole.get("tools").is_none(), "{whole}");
    bob.post(calls, call("echo", json!({"text": "whole again"})))
        .await
        .ok();
}
