//! Pairing devices, device credentials, revocation, device connections and operations, over
//! the real HTTP API.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// A paired device and a client acting as it.
pub struct Device {
    pub id: String,
    pub runner: String,
    pub credential: String,
    pub client: Client,
}

/// Takes the device's runner lease for `holder`, as its runner would; returns the epoch.
pub async fn acquire_lease(device: &Device, holder: uuid::Uuid) -> i64 {
    let answer = device
        .client
        .post("/api/v1/runner/lease/acquire", json!({"holder": holder}))
        .await
        .ok();
    assert_eq!(answer["status"], "acquired", "{answer}");
    answer["epoch"].as_i64().unwrap()
}

/// A client of `server` presenting `token`.
pub fn client_with(server: &TestServer, token: &str) -> Client {
    Client::at(&format!("http://{}", server.addr), token)
}

/// Starts a pairing as the device would; returns the `PairingStarted` body.
pub async fn start_pairing(server: &TestServer, name: &str) -> Value {
    let started = server
        .anonymous()
        .post("/api/v1/pairing", json!({"device_name": name}))
        .await;
    assert_eq!(started.status.as_u16(), 201, "{}", started.body);
    started.body
}

/// Polls a pairing with its secret.
pub async fn poll(server: &TestServer, started: &Value) -> Answer {
    let path = format!(
        "/api/v1/pairing/{}/poll",
        started["pairing_id"].as_str().unwrap()
    );
    server
        .anonymous()
        .post(&path, json!({"poll_secret": started["poll_secret"]}))
        .await
}

/// Pairs a device bound to `profile` of `ws`, approved by the owner (who must hold Use on it).
pub async fn pair_device(server: &TestServer, ws: &str, profile: &str) -> Device {
    let started = start_pairing(server, "laptop").await;
    let approved = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/devices/approve"),
            json!({"code": started["code"], "profile": profile}),
        )
        .await
        .ok();
    let status = poll(server, &started).await.ok();
    assert_eq!(status["status"], "approved", "{status}");
    let credential = status["credential"]
        .as_str()
        .expect("credential on the first poll")
        .to_owned();
    Device {
        id: approved["id"].as_str().unwrap().to_owned(),
        runner: approved["runner"].as_str().unwrap().to_owned(),
        client: client_with(server, &credential),
        credential,
    }
}

/// The fixture's tools, as a device's runner lists them for a discovery.
pub const FIXTURE_TOOLS: [&str; 13] = [
    "big",
    "count",
    "count_then_crash",
    "crash",
    "cwd",
    "echo",
    "env",
    "fail",
    "lookup",
    "noisy",
    "noop",
    "read_file",
    "slow",
];

/// [`setup_device_placement`], then connection `local` discovered and classified
/// ([`discover_classified`]), as an admin would before calls are made.
pub async fn setup_device_connection(server: &TestServer, counter: &str) -> Device {
    let device = setup_device_placement(server, counter).await;
    discover_classified(server, &device, "local").await;
    device
}

/// Has the owner discover connection `connection` of `acme`, placed on `device` and accepted,
/// and the test act as the device's runner listing [`FIXTURE_TOOLS`], under a lease of its own
/// that it releases after (so the test's runner takes the lease at once); then classifies
/// every tool so that the default approval policy runs it.
pub async fn discover_classified(server: &TestServer, device: &Device, connection: &str) {
    let epoch = acquire_lease(device, uuid::Uuid::new_v4()).await;
    discover_classified_under(server, device, connection, epoch).await;
    device
        .client
        .post("/api/v1/runner/lease/release", json!({"epoch": epoch}))
        .await
        .ok();
}

/// [`discover_classified`], the test acting as the device's runner under its lease `epoch`.
pub async fn discover_classified_under(
    server: &TestServer,
    device: &Device,
    connection: &str,
    epoch: i64,
) {
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/acme/connections/{connection}/discover?wait_ms=0"),
            json!({}),
        )
        .await
        .refused(504, "discovery_pending");
    run_discovery(device, epoch, &FIXTURE_TOOLS).await;
    server.owner.classify_all("acme", connection).await;
}

/// A tool as `tools/list` describes it.
pub fn listed_tool(name: &str) -> Value {
    json!({"name": name, "description": format!("the {name} tool"), "inputSchema": {"type": "object"}})
}

/// Leases the one queued work item of the device under `epoch`, starts it, and uploads `tools`
/// as its `tools/list` answer, as the device's runner does for a discovery; returns the
/// leased item.
pub async fn run_discovery(device: &Device, epoch: i64, tools: &[&str]) -> Value {
    let leased = device
        .client
        .post(
            "/api/v1/runner/lease",
            json!({"epoch": epoch, "max": 8, "wait_ms": 20_000}),
        )
        .await
        .ok();
    let calls = leased["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{leased}");
    let item = calls[0].clone();
    let call = item["call_id"].as_str().unwrap();
    let started = device
        .client
        .post(
            &format!("/api/v1/runner/calls/{call}/start"),
            json!({"epoch": epoch}),
        )
        .await
        .ok();
    assert_eq!(started["decision"], "proceed");
    let tools: Vec<Value> = tools.iter().map(|name| listed_tool(name)).collect();
    let answer = device
        .client
        .post(
            &format!("/api/v1/runner/calls/{call}/complete"),
            json!({
                "receipt_id": uuid::Uuid::new_v4(),
                "epoch": epoch,
                "completion": {"outcome": "succeeded", "result": {"tools": tools}},
            }),
        )
        .await
        .ok();
    assert_eq!(answer["status"], "recorded");
    item
}

/// `setup_workspace`, a device bound to `main`, and connection `local` (the same fixture
/// connector, counting into `counter`) placed on the device and accepted by its owner, in
/// profile `dev` that the owner may use. Its catalog is empty: nothing discovered it yet.
pub async fn setup_device_placement(server: &TestServer, counter: &str) -> Device {
    setup_workspace(server, "acme", &[]).await;
    let device = pair_device(server, "acme", "main").await;
    let owner = &server.owner;
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "counted", "transport": "stdio", "command": fixture_bin(), "args": ["stdio", "--count-file", counter]}),
        )
        .await
        .ok();
    owner
        .post("/api/v1/connectors/counted/approve", json!({}))
        .await
        .ok();
    let connection = owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "local", "connector": "counted", "runner": device.runner}),
        )
        .await
        .ok();
    assert_eq!(connection["runner"], device.runner.as_str());
    accept_placement(owner, "acme", &device.id, "local").await;
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
    device
}

/// The device's owner (`owner`) accepts connection `connection` placed on device `device` (its
/// id), for the spec their list of placements shows; the accepted placement.
pub async fn accept_placement(owner: &Client, ws: &str, device: &str, connection: &str) -> Value {
    let list = owner
        .get(&format!("/api/v1/workspaces/{ws}/devices/placements"))
        .await
        .ok();
    let placement = list
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["device_id"] == device && p["connection_name"] == connection)
        .unwrap_or_else(|| panic!("no placement of {connection} on {device}: {list}"))
        .clone();
    owner
        .post(
            &format!("/api/v1/workspaces/{ws}/devices/{device}/placements/{connection}/accept"),
            json!({"spec_digest": placement["spec_digest"]}),
        )
        .await
        .ok()
}

/// A call body on the device connection `local` under profile `dev`.
pub fn device_call_body(tool: &str, arguments: Value) -> Value {
    let mut body = call_body(tool, arguments);
    body["profile_id"] = json!("dev");
    body["connection_id"] = json!("local");
    body
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_pairs_once_with_a_short_code_approved_by_a_member_with_use(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let started = start_pairing(&server, "laptop").await;
    let code = started["code"].as_str().unwrap().to_owned();
    assert_eq!(code.len(), 9);
    assert_eq!(&code[4..5], "-");
    assert!(
        code.chars()
            .filter(|c| *c != '-')
            .all(|c| "23456789ABCDEFGHJKMNPQRSTUVWXYZ".contains(c)),
        "{code}"
    );
    assert_eq!(poll(&server, &started).await.ok()["status"], "pending");

    // A member without Use on the profile may not approve; a member with it may.
    let bob = server.user("bob").await;
    server
        .owner
        .post("/api/v1/workspaces/acme/members", json!({"user": "bob"}))
        .await
        .ok();
    let approve = json!({"code": code.to_lowercase(), "profile": "main"});
    bob.post("/api/v1/workspaces/acme/devices/approve", approve.clone())
        .await
        .refused(403, "forbidden");
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"user": "bob", "use": true}),
        )
        .await
        .ok();
    let approved = bob
        .post("/api/v1/workspaces/acme/devices/approve", approve)
        .await;
    assert_eq!(approved.status.as_u16(), 201);
    let device = approved.ok();
    assert_eq!(device["name"], "laptop");
    assert_eq!(
        device["runner"],
        format!("device:{}", device["id"].as_str().unwrap())
    );
    assert!(device["revoked_at"].is_null());

    let first = poll(&server, &started).await.ok();
    assert_eq!(
        (first["status"].as_str(), &first["device_id"]),
        (Some("approved"), &device["id"])
    );
    let credential = first["credential"].as_str().unwrap().to_owned();
    assert!(
        credential.starts_with("sy_dev_") && credential.len() == 7 + 64,
        "{credential}"
    );
    let second = poll(&server, &started).await.ok();
    assert_eq!(second["status"], "approved");
    assert!(
        second["credential"].is_null(),
        "the credential is handed out once: {second}"
    );

    // The code, the poll secret and the credential are stored only as hashes.
    let dump = dump_database(&pool).await;
    for secret in [
        code.replace('-', ""),
        started["poll_secret"].as_str().unwrap().to_owned(),
        credential,
    ] {
        assert!(!dump.contains(&secret), "{secret} is stored in clear");
    }
    let listed = server
        .owner
        .get("/api/v1/workspaces/acme/devices")
        .await
        .ok();
    assert_eq!(listed.as_array().unwrap().len(), 1);
}

#[sqlx::test(migrations = "../../migrations")]
async fn unknown_expired_and_used_codes_get_one_answer(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let approve = |code: &str| json!({"code": code, "profile": "main"});
    let path = "/api/v1/workspaces/acme/devices/approve";

    for bad in ["ABCD-EFGH", "not a code", ""] {
        server
            .owner
            .post(path, approve(bad))
            .await
            .refused(404, "pairing_not_found");
    }

    let used = start_pairing(&server, "one").await;
    server
        .owner
        .post(path, approve(used["code"].as_str().unwrap()))
        .await
        .ok();
    server
        .owner
        .post(path, approve(used["code"].as_str().unwrap()))
        .await
        .refused(404, "pairing_not_found");

    let late = start_pairing(&server, "two").await;
    sqlx::query("UPDATE pairings SET expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(uuid::Uuid::parse_str(late["pairing_id"].as_str().unwrap()).unwrap())
        .execute(&pool)
        .await
        .unwrap();
    server
        .owner
        .post(path, approve(late["code"].as_str().unwrap()))
        .await
        .refused(404, "pairing_not_found");
    assert_eq!(poll(&server, &late).await.ok()["status"], "expired");

    // Polling needs the pairing's own secret.
    let path = format!(
        "/api/v1/pairing/{}/poll",
        late["pairing_id"].as_str().unwrap()
    );
    server
        .anonymous()
        .post(&path, json!({"poll_secret": "guess"}))
        .await
        .refused(404, "pairing_not_found");
    server
        .anonymous()
        .post("/api/v1/pairing/nope/poll", json!({"poll_secret": "guess"}))
        .await
        .refused(404, "pairing_not_found");
    server
        .anonymous()
        .post("/api/v1/pairing", json!({"device_name": " "}))
        .await
        .refused(400, "invalid_request");
}

#[sqlx::test(migrations = "../../migrations")]
async fn device_credentials_and_user_tokens_do_not_cross(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let device = pair_device(&server, "acme", "main").await;
    for path in [
        "/api/v1/me",
        "/api/v1/workspaces",
        "/api/v1/workspaces/acme/devices",
    ] {
        device
            .client
            .get(path)
            .await
            .refused(401, "unauthenticated");
    }
    device
        .client
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "x", "connector": "fixture-acme"}),
        )
        .await
        .refused(401, "unauthenticated");
    let message = server
        .owner
        .post(
            "/api/v1/runner/heartbeat",
            json!({"epoch": 1, "active": []}),
        )
        .await
        .refused(401, "unauthenticated");
    assert!(message.contains("device credential"), "{message}");
    server
        .owner
        .post(
            "/api/v1/runner/lease/acquire",
            json!({"holder": uuid::Uuid::new_v4()}),
        )
        .await
        .refused(401, "unauthenticated");
    server
        .anonymous()
        .post(
            "/api/v1/runner/lease/acquire",
            json!({"holder": uuid::Uuid::new_v4()}),
        )
        .await
        .refused(401, "unauthenticated");
    client_with(&server, "sy_dev_0000")
        .post(
            "/api/v1/runner/lease/acquire",
            json!({"holder": uuid::Uuid::new_v4()}),
        )
        .await
        .refused(401, "unauthenticated");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_revoked_device_is_refused_at_its_next_request(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let device = pair_device(&server, "acme", "main").await;
    let acquired = device
        .client
        .post(
            "/api/v1/runner/lease/acquire",
            json!({"holder": uuid::Uuid::new_v4()}),
        )
        .await
        .ok();
    assert_eq!(acquired["status"], "acquired");
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "local", "connector": "fixture-acme", "runner": device.runner}),
        )
        .await
        .ok();

    // Another member who neither approved it nor administers the workspace may not revoke it.
    let bob = server.user("bob").await;
    server
        .owner
        .post("/api/v1/workspaces/acme/members", json!({"user": "bob"}))
        .await
        .ok();
    let revoke = format!("/api/v1/workspaces/acme/devices/{}/revoke", device.id);
    bob.post(&revoke, json!({})).await.refused(403, "forbidden");
    bob.post(
        &format!(
            "/api/v1/workspaces/acme/devices/{}/revoke",
            uuid::Uuid::new_v4()
        ),
        json!({}),
    )
    .await
    .refused(404, "device_not_found");
    let revoked = server.owner.post(&revoke, json!({})).await.ok();
    assert!(revoked["revoked_at"].is_string());

    let heartbeat = json!({"epoch": acquired["epoch"], "active": []});
    device
        .client
        .post("/api/v1/runner/heartbeat", heartbeat)
        .await
        .refused(401, "device_revoked");
    device
        .client
        .post(
            "/api/v1/workspaces/acme/operations",
            json!({"environment": "default", "profile": "main", "task": "t"}),
        )
        .await
        .refused(401, "device_revoked");
    // Nothing new is placed on it, and its connections take no more calls.
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "again", "connector": "fixture-acme", "runner": device.runner}),
        )
        .await
        .refused(400, "invalid_request");
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "dev", "connections": ["local"]}),
        )
        .await
        .ok();
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/dev/grants",
            json!({"user": "owner", "use": true}),
        )
        .await
        .ok();
    let mut body = call_body("echo", json!({"text": "x"}));
    body["profile_id"] = json!("dev");
    body["connection_id"] = json!("local");
    server
        .owner
        .post("/api/v1/workspaces/acme/calls", body)
        .await
        .refused(404, "device_not_found");
}

#[sqlx::test(migrations = "../../migrations")]
async fn device_connections_queue_for_their_device_and_are_discovered_there(pool: PgPool) {
    let scratch = scratch_dir("device-queue");
    let counter = scratch.path("count");
    let server = TestServer::start(pool).await;
    let device = setup_device_connection(&server, &counter).await;

    for bad in [
        "device:not-a-uuid",
        &format!("device:{}", uuid::Uuid::new_v4()),
        "elsewhere",
    ] {
        server
            .owner
            .post(
                "/api/v1/workspaces/acme/connections",
                json!({"name": "bad", "connector": "counted", "runner": bad}),
            )
            .await
            .refused(400, "invalid_request");
    }

    let call = server
        .owner
        .post(
            "/api/v1/workspaces/acme/calls",
            device_call_body("count", json!({"label": "d"})),
        )
        .await
        .ok();
    assert_eq!(
        (call["state"].as_str(), call["runner"].as_str()),
        (Some("queued"), Some(device.runner.as_str()))
    );
    // A central call submitted after it runs to the end; the device's call is still waiting.
    let witness = server
        .owner
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("echo", json!({"text": "w"})),
        )
        .await
        .ok();
    let witness = server
        .owner
        .wait_call("acme", witness["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(witness["state"], "succeeded");
    let id = call["id"].as_str().unwrap();
    let still = server
        .owner
        .get(&format!("/api/v1/workspaces/acme/calls/{id}"))
        .await
        .ok();
    assert_eq!(still["state"], "queued");
    assert_eq!(
        count_lines(&counter),
        0,
        "the central runner ran a device call"
    );

    // The device leases it.
    let acquired = device
        .client
        .post(
            "/api/v1/runner/lease/acquire",
            json!({"holder": uuid::Uuid::new_v4()}),
        )
        .await
        .ok();
    let leased = device
        .client
        .post(
            "/api/v1/runner/lease",
            json!({"epoch": acquired["epoch"], "max": 8, "wait_ms": 0}),
        )
        .await
        .ok();
    assert_eq!(leased["calls"].as_array().unwrap().len(), 1);
    assert_eq!(leased["calls"][0]["call_id"], id);
    assert_eq!(
        leased["calls"][0]["connection"]["spec"]["args"][2],
        counter.as_str()
    );
    assert_eq!(
        server
            .owner
            .get(&format!("/api/v1/workspaces/acme/calls/{id}"))
            .await
            .ok()["state"],
        "leased"
    );

    // Its discovery is queued for the device's runner, not run centrally: the runner's next
    // lease takes it.
    let pending = server
        .owner
        .post(
            "/api/v1/workspaces/acme/connections/local/discover?wait_ms=0",
            json!({}),
        )
        .await;
    let message = pending.refused(504, "discovery_pending");
    assert!(message.contains(&device.runner), "{message}");
    let leased = device
        .client
        .post(
            "/api/v1/runner/lease",
            json!({"epoch": acquired["epoch"], "max": 8, "wait_ms": 0}),
        )
        .await
        .ok();
    assert_eq!(leased["calls"].as_array().unwrap().len(), 1);
    assert_eq!(leased["calls"][0]["kind"], "discovery");
}

#[sqlx::test(migrations = "../../migrations")]
async fn device_calls_run_under_an_operation_of_the_devices_profile(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device = setup_device_connection(&server, &scratch_dir("ops").path("count")).await;
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/environments",
            json!({"name": "staging"}),
        )
        .await
        .ok();
    let calls = "/api/v1/workspaces/acme/calls";
    let operations = "/api/v1/workspaces/acme/operations";

    // A device needs an operation for every call.
    device
        .client
        .post(calls, call_body("echo", json!({"text": "x"})))
        .await
        .refused(422, "operation_required");
    // Operations are scoped to a profile the principal may use, in the profile's environment.
    device
        .client
        .post(
            operations,
            json!({"environment": "default", "profile": "dev", "task": "t"}),
        )
        .await
        .refused(403, "forbidden");
    device
        .client
        .post(
            operations,
            json!({"environment": "staging", "profile": "main", "task": "t"}),
        )
        .await
        .refused(422, "environment_mismatch");
    device
        .client
        .post(
            operations,
            json!({"environment": "default", "profile": "main", "task": ""}),
        )
        .await
        .refused(400, "invalid_request");
    let begun = device
        .client
        .post(
            operations,
            json!({"environment": "default", "profile": "main", "task": "tidy the inbox"}),
        )
        .await;
    assert_eq!(begun.status.as_u16(), 201);
    let operation = begun.ok();
    assert_eq!(
        (operation["device_id"].as_str(), operation["task"].as_str()),
        (Some(device.id.as_str()), Some("tidy the inbox"))
    );

    let mut body = call_body("echo", json!({"text": "under an operation"}));
    body["operation_id"] = operation["id"].clone();
    let mut elsewhere = body.clone();
    elsewhere["environment_id"] = json!("staging");
    device
        .client
        .post(calls, elsewhere)
        .await
        .refused(422, "operation_mismatch");
    let submitted = device.client.post(calls, body.clone()).await;
    assert_eq!(submitted.status.as_u16(), 201);
    let call = submitted.ok();
    // The device reads its own call; it runs centrally (the connection is central).
    let id = call["id"].as_str().unwrap();
    let done = device.client.wait_call("acme", id, WAIT).await;
    assert_eq!(
        (done["state"].as_str(), result_text(&done).as_str()),
        (Some("succeeded"), "under an operation")
    );
    // A retry with the same request_id is the same call.
    assert_eq!(device.client.post(calls, body).await.ok()["id"], id);
    // Another device on the same profile, approved by the same user, cannot read it.
    let other = pair_device(&server, "acme", "main").await;
    other
        .client
        .get(&format!("{calls}/{id}"))
        .await
        .refused(404, "call_not_found");

    // An operation of another profile is not the device's to use.
    let theirs = server
        .owner
        .post(
            operations,
            json!({"environment": "default", "profile": "dev", "task": "other"}),
        )
        .await
        .ok();
    assert!(theirs["device_id"].is_null());
    let mut body = call_body("echo", json!({"text": "x"}));
    body["operation_id"] = theirs["id"].clone();
    device
        .client
        .post(calls, body.clone())
        .await
        .refused(404, "operation_not_found");
    // A user may name an operation too; then the call must match it.
    server
        .owner
        .post(calls, body)
        .await
        .refused(422, "operation_mismatch");
    let mut unknown = call_body("echo", json!({"text": "x"}));
    unknown["operation_id"] = json!(uuid::Uuid::new_v4());
    server
        .owner
        .post(calls, unknown)
        .await
        .refused(404, "operation_not_found");
    assert_eq!(
        server
            .owner
            .post(calls, call_body("echo", json!({"text": "no operation"})))
            .await
            .status
            .as_u16(),
        201
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_is_seen_when_it_calls(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let device = pair_device(&server, "acme", "main").await;
    let listed = server
        .owner
        .get("/api/v1/workspaces/acme/devices")
        .await
        .ok();
    assert!(listed[0]["last_seen_at"].is_null(), "{listed}");
    device
        .client
        .post(
            "/api/v1/runner/lease/acquire",
            json!({"holder": uuid::Uuid::new_v4()}),
        )
        .await
        .ok();
    let listed = server
        .owner
        .get("/api/v1/workspaces/acme/devices")
        .await
        .ok();
    let seen = listed[0]["last_seen_at"]
        .as_str()
        .expect("last_seen_at set")
        .to_owned();
    // Within half a minute, further requests do not write it again.
    device
        .client
        .post(
            "/api/v1/runner/lease/acquire",
            json!({"holder": uuid::Uuid::new_v4()}),
        )
        .await
        .ok();
    let listed = server
        .owner
        .get("/api/v1/workspaces/acme/devices")
        .await
        .ok();
    assert_eq!(listed[0]["last_seen_at"].as_str(), Some(seen.as_str()));
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_submits_nothing_once_its_approver_lost_use(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let device = setup_device_connection(&server, &scratch_dir("approver").path("count")).await;
    let begun = device
        .client
        .post(
            "/api/v1/workspaces/acme/operations",
            json!({"environment": "default", "profile": "main", "task": "t"}),
        )
        .await
        .ok();
    let mut body = call_body("echo", json!({"text": "while the approver holds Use"}));
    body["operation_id"] = begun["id"].clone();
    let submitted = device
        .client
        .post("/api/v1/workspaces/acme/calls", body.clone())
        .await
        .ok();

    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants/revoke",
            json!({"user": "owner", "use": true}),
        )
        .await
        .ok();
    body["request_id"] = json!(uuid::Uuid::new_v4());
    let message = device
        .client
        .post("/api/v1/workspaces/acme/calls", body)
        .await
        .refused(403, "forbidden");
    assert!(message.contains("approved device"), "{message}");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM calls WHERE kind = 'tool'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 1, "only the call submitted before");
    device
        .client
        .get(&format!(
            "/api/v1/workspaces/acme/calls/{}",
            submitted["id"].as_str().unwrap()
        ))
        .await
        .refused(403, "forbidden");
}
