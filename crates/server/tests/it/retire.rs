//! Retiring connections, connectors and profiles: a retired object runs nothing (its queued
//! calls fail with a stable code and never reach the MCP server, submissions are refused and
//! store nothing, a call that slipped past is refused at its start ack), stays listed and
//! readable with its history, and comes back only by an explicit restore — a connection with
//! its tools ungranted. Only who may create the object may retire it, and each change is
//! recorded with who made it.

use crate::devices::*;
use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::Duration;
use switchyard_server::db::Datastore;

const WAIT: Duration = Duration::from_secs(60);
const CALLS: &str = "/api/v1/workspaces/acme/calls";
const CONNECTION: &str = "/api/v1/workspaces/acme/connections/fixture";

/// The retire and restore changes recorded, oldest first: (action, actor's name).
async fn retirements(pool: &PgPool) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT a.action, u.name FROM access_changes a JOIN users u ON u.id = a.actor_id
         WHERE a.action LIKE '%_retired' OR a.action LIKE '%_restored' ORDER BY a.at, a.id",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Adds `name` to workspace `acme` as a plain member holding Use on `main`.
async fn member_with_use(server: &TestServer, name: &str) -> Client {
    let user = server.user(name).await;
    let owner = &server.owner;
    owner
        .post("/api/v1/workspaces/acme/members", json!({"user": name}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"user": name, "use": true}),
        )
        .await
        .ok();
    user
}

/// The labels the fixture's count file recorded, in order.
fn ledger(path: &str) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["label"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

async fn submit_count(client: &Client, label: &str) -> Answer {
    client
        .post(CALLS, call_body("count", json!({"label": label})))
        .await
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_retired_connection_runs_nothing_keeps_its_history_and_restores_ungranted(pool: PgPool) {
    let scratch = scratch_dir("retire");
    let counter = scratch.path("count");
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &["--count-file", &counter]).await;
    let bob = member_with_use(&server, "bob").await;
    let owner = &server.owner;

    let before = submit_count(owner, "before").await.ok();
    let before_id = before["id"].as_str().unwrap().to_owned();
    assert_eq!(
        owner.wait_call("acme", &before_id, WAIT).await["state"],
        "succeeded"
    );
    // A call queued while no runner leases: retiring must fail it before it is ever sent.
    hold_central_runner(&pool).await;
    let queued = submit_count(owner, "queued").await.ok();
    let queued_id = queued["id"].as_str().unwrap().to_owned();
    assert_eq!(queued["state"], "queued", "{queued}");

    // Only a workspace admin retires a connection; a refusal writes nothing.
    bob.post(&format!("{CONNECTION}/retire"), json!({}))
        .await
        .refused(403, "forbidden");
    assert!(retirements(&pool).await.is_empty());
    assert!(owner.get(CONNECTION).await.ok().get("retired").is_none());
    let retired = owner
        .post(&format!("{CONNECTION}/retire"), json!({}))
        .await
        .ok();
    let owner_id = owner.get("/api/v1/me").await.ok()["id"].clone();
    assert_eq!(retired["retired"]["by"], owner_id, "{retired}");

    // Its queued call failed with the stable code; nothing new is accepted or stored.
    let failed = owner.get(&format!("{CALLS}/{queued_id}")).await.ok();
    assert_eq!(
        (failed["state"].as_str(), failed["error"]["code"].as_str()),
        (Some("failed"), Some("connection_retired")),
        "{failed}"
    );
    assert!(failed["started_at"].is_null(), "{failed}");
    let stored = calls_stored(&pool).await;
    submit_count(&bob, "refused")
        .await
        .refused(409, "connection_retired");
    assert_eq!(calls_stored(&pool).await, stored, "nothing queued");
    owner
        .post(&format!("{CONNECTION}/discover"), json!({}))
        .await
        .refused(409, "connection_retired");
    owner
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "later", "connections": ["fixture"]}),
        )
        .await
        .refused(409, "connection_retired");

    // The runner is back, and still nothing of the retired connection runs.
    release_central_runner(&pool).await;
    assert_eq!(ledger(&counter), ["before"]);

    // History stays readable; the connection and its tools stay listed, marked retired.
    let kept = bob.get(&format!("{CALLS}/{before_id}")).await.ok();
    assert_eq!(kept["state"], "succeeded", "{kept}");
    let listed = bob.get(CALLS).await.ok();
    assert_eq!(listed["calls"].as_array().unwrap().len(), 2, "{listed}");
    let connections = bob.get("/api/v1/workspaces/acme/connections").await.ok();
    assert!(connections[0]["retired"]["at"].is_string(), "{connections}");
    let tools = bob.get(&format!("{CONNECTION}/tools")).await.ok();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["retired"] == true),
        "{tools}"
    );
    bob.get(&format!("{CONNECTION}/events")).await.ok();

    // Retiring again changes nothing and records nothing more.
    owner
        .post(&format!("{CONNECTION}/retire"), json!({}))
        .await
        .ok();
    assert_eq!(retirements(&pool).await.len(), 1);

    // Restore is explicit, by an admin; the tools come back ungranted until set again, and
    // unclassified until classified again.
    bob.post(&format!("{CONNECTION}/restore"), json!({}))
        .await
        .refused(403, "forbidden");
    let restored = owner
        .post(&format!("{CONNECTION}/restore"), json!({}))
        .await
        .ok();
    assert!(restored.get("retired").is_none(), "{restored}");
    let tools = bob.get(&format!("{CONNECTION}/tools")).await.ok();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["retired"] == false
                && t["state"] == "unclassified"
                && t.get("classification").is_none()),
        "back unclassified: {tools}"
    );
    let profile = owner
        .get("/api/v1/workspaces/acme/profiles/main")
        .await
        .ok();
    assert_eq!(
        profile["tools"][restored["id"].as_str().unwrap()],
        json!([]),
        "{profile}"
    );
    submit_count(&bob, "ungranted")
        .await
        .refused(403, "tool_not_granted");
    owner
        .send(
            reqwest::Method::PUT,
            "/api/v1/workspaces/acme/profiles/main/connections/fixture/tools",
            Some(json!({"tools": ["count"]})),
        )
        .await
        .ok();
    let stored = calls_stored(&pool).await;
    submit_count(&bob, "unclassified")
        .await
        .refused(409, "tool_unclassified");
    assert_eq!(calls_stored(&pool).await, stored, "nothing queued");
    owner
        .classify(
            "acme",
            "fixture",
            "count",
            json!({"side_effect": true, "risk": "low"}),
        )
        .await
        .ok();
    let after = submit_count(&bob, "after").await.ok();
    assert_eq!(
        owner
            .wait_call("acme", after["id"].as_str().unwrap(), WAIT)
            .await["state"],
        "succeeded"
    );
    assert_eq!(ledger(&counter), ["before", "after"]);
    assert_eq!(
        retirements(&pool).await,
        [
            ("connection_retired".to_owned(), "owner".to_owned()),
            ("connection_restored".to_owned(), "owner".to_owned())
        ]
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_call_that_slipped_past_a_retirement_is_refused_at_the_central_start(pool: PgPool) {
    let scratch = scratch_dir("retire-central");
    let counter = scratch.path("count");
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &["--count-file", &counter]).await;
    hold_central_runner(&pool).await;
    // A submission whose read came before the profile was retired, stored after it: nothing
    // failed it, so the start ack is what keeps it from running.
    let db = Datastore::new(pool.clone());
    let mut call = echo_call(&db, "central").await;
    call.tool_name = "count".into();
    call.arguments = json!({"label": "slipped"});
    let id = call.id.to_string();
    let _ = db.call_insert(&call).await.unwrap();
    sqlx::query("UPDATE profiles SET retired_at = now() WHERE name = 'main'")
        .execute(&pool)
        .await
        .unwrap();
    release_central_runner(&pool).await;

    let done = server.owner.wait_call("acme", &id, WAIT).await;
    assert_eq!(
        (done["state"].as_str(), done["error"]["code"].as_str()),
        (Some("failed"), Some("profile_retired")),
        "{done}"
    );
    assert!(done["started_at"].is_null(), "{done}");
    assert!(ledger(&counter).is_empty(), "the fixture never ran it");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_is_refused_the_start_of_a_call_whose_connection_was_retired(pool: PgPool) {
    let scratch = scratch_dir("retire-device");
    let counter = scratch.path("count");
    let server = TestServer::start(pool.clone()).await;
    let device = setup_device_connection(&server, &counter).await;
    let call = server
        .owner
        .post(CALLS, device_call_body("count", json!({"label": "x"})))
        .await
        .ok();
    let id = call["id"].as_str().unwrap().to_owned();
    let epoch = acquire_lease(&device, uuid::Uuid::new_v4()).await;
    let leased = device
        .client
        .post(
            "/api/v1/runner/lease",
            json!({"epoch": epoch, "max": 8, "wait_ms": 20_000}),
        )
        .await
        .ok();
    assert_eq!(leased["calls"][0]["call_id"], id.as_str(), "{leased}");
    // Retired after its lease, without failing it (a retirement racing the lease).
    sqlx::query("UPDATE connections SET retired_at = now() WHERE name = 'local'")
        .execute(&pool)
        .await
        .unwrap();
    let start = device
        .client
        .post(
            &format!("/api/v1/runner/calls/{id}/start"),
            json!({"epoch": epoch}),
        )
        .await
        .ok();
    assert_eq!(start["decision"], "abandon", "{start}");
    assert!(
        start["reason"]
            .as_str()
            .unwrap()
            .contains("connection_retired"),
        "{start}"
    );
    let failed = server.owner.get(&format!("{CALLS}/{id}")).await.ok();
    assert_eq!(
        (failed["state"].as_str(), failed["error"]["code"].as_str()),
        (Some("failed"), Some("connection_retired")),
        "{failed}"
    );
    assert!(ledger(&counter).is_empty());
}

#[sqlx::test(migrations = "../../migrations")]
async fn retired_connectors_and_profiles_accept_nothing_and_stay_listed(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let bob = member_with_use(&server, "bob").await;
    let owner = &server.owner;
    let echo = || call_body("echo", json!({"text": "hi"}));

    // A connector: only an installation owner retires it; its connections run nothing.
    let connector = "/api/v1/connectors/fixture-acme";
    bob.post(&format!("{connector}/retire"), json!({}))
        .await
        .refused(403, "forbidden");
    owner
        .post(&format!("{connector}/retire"), json!({}))
        .await
        .ok();
    let listed = bob.get("/api/v1/connectors").await.ok();
    assert!(listed[0]["retired"]["at"].is_string(), "{listed}");
    let stored = calls_stored(&pool).await;
    bob.post(CALLS, echo())
        .await
        .refused(409, "connector_retired");
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "another", "connector": "fixture-acme"}),
        )
        .await
        .refused(409, "connector_retired");
    assert_eq!(calls_stored(&pool).await, stored);
    owner
        .post(&format!("{connector}/restore"), json!({}))
        .await
        .ok();
    bob.post(CALLS, echo()).await.ok();

    // A profile: a workspace admin retires it; its grants stay, inert.
    let profile = "/api/v1/workspaces/acme/profiles/main";
    bob.post(&format!("{profile}/retire"), json!({}))
        .await
        .refused(403, "forbidden");
    owner
        .post(&format!("{profile}/retire"), json!({}))
        .await
        .ok();
    let profiles = bob.get("/api/v1/workspaces/acme/profiles").await.ok();
    assert!(profiles[0]["retired"]["at"].is_string(), "{profiles}");
    assert_eq!(profiles[0]["grants"].as_array().unwrap().len(), 2);
    let stored = calls_stored(&pool).await;
    bob.post(CALLS, echo())
        .await
        .refused(409, "profile_retired");
    assert_eq!(calls_stored(&pool).await, stored);
    owner
        .post(&format!("{profile}/restore"), json!({}))
        .await
        .ok();
    bob.post(CALLS, echo()).await.ok();

    let actions: Vec<String> = retirements(&pool)
        .await
        .into_iter()
        .map(|(a, _)| a)
        .collect();
    assert_eq!(
        actions,
        [
            "connector_retired",
            "connector_restored",
            "profile_retired",
            "profile_restored"
        ]
    );
}
