//! A device owner decides what runs on the device: placements pending until the owner accepts
//! them for the spec they were shown, refused at submission until then and again once the
//! connector changes, and the accepted digest handed to the device runner with each lease.

use crate::devices::*;
use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;

/// `setup_workspace`, member `bob` with Use on `main` who pairs and approves device `laptop`,
/// and — placed by the owner, a workspace admin and installation owner who is not the device's
/// owner — connection `local` on bob's device, in profile `dev` the owner may use.
pub async fn admin_places_on_bobs_device(server: &TestServer) -> (Client, Device) {
    setup_workspace(server, "acme", &[]).await;
    let owner = &server.owner;
    let bob = server.user("bob").await;
    owner
        .post("/api/v1/workspaces/acme/members", json!({"user": "bob"}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"user": "bob", "use": true}),
        )
        .await
        .ok();
    let started = start_pairing(server, "laptop").await;
    let approved = bob
        .post(
            "/api/v1/workspaces/acme/devices/approve",
            json!({"code": started["code"], "profile": "main"}),
        )
        .await
        .ok();
    let status = poll(server, &started).await.ok();
    let credential = status["credential"].as_str().unwrap().to_owned();
    let device = Device {
        id: approved["id"].as_str().unwrap().to_owned(),
        runner: approved["runner"].as_str().unwrap().to_owned(),
        client: client_with(server, &credential),
        credential,
    };
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "counted", "transport": "stdio", "command": fixture_bin(), "args": ["stdio"]}),
        )
        .await
        .ok();
    owner
        .post("/api/v1/connectors/counted/approve", json!({}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "local", "connector": "counted", "runner": device.runner}),
        )
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "dev", "connections": ["local"]}),
        )
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/dev/grants",
            json!({"user": "owner", "use": true}),
        )
        .await
        .ok();
    (bob, device)
}

/// The placements `client` sees on its devices of `acme`.
async fn placements(client: &Client) -> Vec<Value> {
    let list = client
        .get("/api/v1/workspaces/acme/devices/placements")
        .await
        .ok();
    list.as_array().unwrap().clone()
}

async fn placements_stored(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM placements")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Changes connector `counted`'s arguments to `args` and approves the new command.
async fn edit_connector(server: &TestServer, args: &[&str]) {
    let owner = &server.owner;
    owner
        .send(
            reqwest::Method::PATCH,
            "/api/v1/connectors/counted",
            Some(json!({"transport": "stdio", "command": fixture_bin(), "args": args})),
        )
        .await
        .ok();
    owner
        .post("/api/v1/connectors/counted/approve", json!({}))
        .await
        .ok();
}

fn accept_path(device: &Device) -> String {
    format!(
        "/api/v1/workspaces/acme/devices/{}/placements/local/accept",
        device.id
    )
}

#[sqlx::test(migrations = "../../migrations")]
async fn only_the_devices_owner_accepts_a_placement_and_calls_wait_for_it(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let (bob, device) = admin_places_on_bobs_device(&server).await;
    let owner = &server.owner;
    let call = || device_call_body("echo", json!({"text": "hi"}));

    // Placed by an admin: pending, and nothing is queued.
    owner
        .post("/api/v1/workspaces/acme/calls", call())
        .await
        .refused(409, "placement_pending");
    assert_eq!(calls_stored(&pool).await, 0);

    // Not the admin's device: they do not see it, and may not accept it.
    assert!(placements(owner).await.is_empty());
    let shown = placements(&bob).await;
    assert_eq!(shown.len(), 1, "{shown:?}");
    let placement = &shown[0];
    assert_eq!(placement["state"], "pending");
    assert_eq!(placement["connection_name"], "local");
    assert_eq!(placement["device_id"], device.id.as_str());
    assert_eq!(placement["spec"]["command"], fixture_bin());
    let digest = placement["spec_digest"].clone();
    owner
        .post(&accept_path(&device), json!({"spec_digest": digest}))
        .await
        .refused(403, "forbidden");
    let carol = server.user("carol").await;
    carol
        .post(&accept_path(&device), json!({"spec_digest": digest}))
        .await
        .refused(404, "workspace_not_found");
    // A digest of another spec than the one now placed is refused.
    bob.post(
        &accept_path(&device),
        json!({"spec_digest": "0".repeat(64)}),
    )
    .await
    .refused(409, "spec_changed");
    assert_eq!(placements_stored(&pool).await, 0);

    // The owner accepts what they were shown: calls are taken.
    let accepted = bob
        .post(&accept_path(&device), json!({"spec_digest": digest}))
        .await
        .ok();
    assert_eq!(accepted["state"], "accepted");
    assert_eq!(accepted["accepted_digest"], digest);
    // Its runner discovers it: a call of its own, kind `discovery`.
    discover_classified(&server, &device, "local").await;
    let queued = owner
        .post("/api/v1/workspaces/acme/calls", call())
        .await
        .ok();
    assert_eq!(queued["state"], "queued", "{queued}");

    // Declined: refused again.
    let declined = bob
        .post(
            &format!(
                "/api/v1/workspaces/acme/devices/{}/placements/local/decline",
                device.id
            ),
            json!({}),
        )
        .await
        .ok();
    assert_eq!(declined["state"], "declined");
    owner
        .post("/api/v1/workspaces/acme/calls", call())
        .await
        .refused(409, "placement_pending");
    assert_eq!(calls_stored(&pool).await, 2);
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_edited_connector_needs_the_owners_consent_again_and_a_lease_carries_what_was_accepted(
    pool: PgPool,
) {
    let server = TestServer::start(pool.clone()).await;
    let (bob, device) = admin_places_on_bobs_device(&server).await;
    let owner = &server.owner;
    let call = || device_call_body("echo", json!({"text": "hi"}));
    let first = accept_placement(&bob, "acme", &device.id, "local").await;
    let accepted = first["accepted_digest"].clone();
    discover_classified(&server, &device, "local").await;
    let queued = owner
        .post("/api/v1/workspaces/acme/calls", call())
        .await
        .ok();

    // The connector is repointed while the call waits in the queue.
    edit_connector(&server, &["stdio", "--count-file", "/tmp/elsewhere"]).await;
    owner
        .post("/api/v1/workspaces/acme/calls", call())
        .await
        .refused(409, "spec_changed");
    let shown = placements(&bob).await;
    assert_eq!(shown[0]["state"], "spec_changed");
    assert_eq!(shown[0]["accepted_digest"], accepted);
    assert_ne!(shown[0]["spec_digest"], accepted);
    assert_eq!(shown[0]["spec"]["args"][2], "/tmp/elsewhere");

    // The server cannot take back the call queued before the edit: its lease hands the device
    // the new spec beside the digest the owner accepted, for the runner to refuse.
    let epoch = acquire_lease(&device, uuid::Uuid::new_v4()).await;
    let leased = device
        .client
        .post(
            "/api/v1/runner/lease",
            json!({"epoch": epoch, "max": 8, "wait_ms": 0}),
        )
        .await
        .ok();
    let calls = leased["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{leased}");
    assert_eq!(calls[0]["call_id"], queued["id"]);
    assert_eq!(calls[0]["connection"]["accepted_spec_digest"], accepted);
    assert_eq!(calls[0]["connection"]["spec"]["args"][2], "/tmp/elsewhere");

    // Accepting the new spec lets calls in again.
    let again = accept_placement(&bob, "acme", &device.id, "local").await;
    assert_eq!(again["state"], "accepted");
    assert_eq!(again["accepted_digest"], shown[0]["spec_digest"]);
    owner
        .post("/api/v1/workspaces/acme/calls", call())
        .await
        .ok();
}
