//! The device runner API over HTTP, with the test acting as the device: leases and their
//! epochs, long-poll leasing across replicas, the two-phase start, receipts, heartbeats with
//! cancellations and releases, lifecycle events, and fencing.

use crate::devices::*;
use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

const CALLS: &str = "/api/v1/workspaces/acme/calls";

/// Acquires the device's lease for `holder`; returns the answer.
async fn acquire(device: &Device, holder: Uuid) -> Value {
    device
        .client
        .post("/api/v1/runner/lease/acquire", json!({"holder": holder}))
        .await
        .ok()
}

/// Acquires and asserts success; returns the epoch.
async fn acquired_epoch(device: &Device, holder: Uuid) -> i64 {
    let answer = acquire(device, holder).await;
    assert_eq!(answer["status"], "acquired", "{answer}");
    assert_eq!(answer["ttl_seconds"], 30);
    answer["epoch"].as_i64().unwrap()
}

/// One lease request; returns the leased calls.
async fn lease(device: &Device, epoch: i64, wait_ms: u64) -> Vec<Value> {
    let answer = device
        .client
        .post(
            "/api/v1/runner/lease",
            json!({"epoch": epoch, "max": 8, "wait_ms": wait_ms}),
        )
        .await
        .ok();
    answer["calls"].as_array().unwrap().clone()
}

async fn submit(server: &TestServer, tool: &str) -> String {
    let call = server
        .owner
        .post(
            CALLS,
            device_call_body(tool, json!({"label": "x", "text": "x"})),
        )
        .await
        .ok();
    call["id"].as_str().unwrap().to_owned()
}

async fn state(server: &TestServer, call: &str) -> Value {
    server.owner.get(&format!("{CALLS}/{call}")).await.ok()
}

fn start_path(call: &str) -> String {
    format!("/api/v1/runner/calls/{call}/start")
}

/// Asks for the start of `call` under `epoch`; returns the answer.
async fn start(device: &Device, call: &str, epoch: i64) -> Value {
    device
        .client
        .post(&start_path(call), json!({"epoch": epoch}))
        .await
        .ok()
}

/// Uploads a receipt for `call`; returns the answer.
async fn upload(device: &Device, call: &str, receipt: Value) -> Value {
    device.client.post(&complete_path(call), receipt).await.ok()
}

fn complete_path(call: &str) -> String {
    format!("/api/v1/runner/calls/{call}/complete")
}

fn succeeded(receipt: Uuid, epoch: i64, text: &str) -> Value {
    json!({
        "receipt_id": receipt,
        "epoch": epoch,
        "completion": {"outcome": "succeeded", "result": {"content": [{"type": "text", "text": text}], "isError": false}},
    })
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_runs_a_call_through_the_whole_protocol(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device = setup_device_connection(&server, &scratch_dir("protocol").path("count")).await;
    let call = submit(&server, "count").await;

    let epoch = acquired_epoch(&device, Uuid::new_v4()).await;
    let leased = lease(&device, epoch, 20_000).await;
    assert_eq!(leased.len(), 1);
    assert_eq!(
        (leased[0]["call_id"].as_str(), leased[0]["epoch"].as_i64()),
        (Some(call.as_str()), Some(epoch))
    );
    assert_eq!(leased[0]["tool_name"], "count");
    assert_eq!(leased[0]["arguments"]["label"], "x");
    assert_eq!(leased[0]["connection"]["spec"]["transport"], "stdio");

    let started = start(&device, &call, epoch).await;
    assert_eq!(started["decision"], "proceed");
    // A start asked again (the first answer lost) is acknowledged again.
    assert_eq!(start(&device, &call, epoch).await["decision"], "proceed");
    assert_eq!(state(&server, &call).await["state"], "running");

    let receipt = Uuid::new_v4();
    let answer = upload(&device, &call, succeeded(receipt, epoch, "counted x")).await;
    assert_eq!(answer["status"], "recorded");
    let done = state(&server, &call).await;
    assert_eq!(
        (done["state"].as_str(), result_text(&done).as_str()),
        (Some("succeeded"), "counted x")
    );
    // The same receipt uploaded again answers the same, once recorded.
    assert_eq!(
        upload(&device, &call, succeeded(receipt, epoch, "counted x")).await["status"],
        "recorded"
    );
    // Another receipt with a different outcome no longer applies.
    let late = json!({"receipt_id": Uuid::new_v4(), "epoch": epoch, "completion": {"outcome": "unknown", "error": {"code": "timeout", "message": "late"}}});
    assert_eq!(upload(&device, &call, late).await["status"], "superseded");
    assert_eq!(state(&server, &call).await["state"], "succeeded");
    // A receipt id is one receipt: reusing it for another call is refused.
    let other = submit(&server, "count").await;
    device
        .client
        .post(&complete_path(&other), succeeded(receipt, epoch, "x"))
        .await
        .refused(400, "invalid_request");

    // The check quarantines nothing of the current epoch.
    let check = json!({"receipts": [{"receipt_id": receipt, "call_id": call, "epoch": epoch}]});
    assert_eq!(
        device
            .client
            .post("/api/v1/runner/receipts/check", check)
            .await
            .ok()["fenced"],
        json!([])
    );

    let released = device
        .client
        .post("/api/v1/runner/lease/release", json!({"epoch": epoch}))
        .await;
    assert_eq!(released.status.as_u16(), 204);
    // Released: a new holder takes over at once, with a new epoch.
    assert_eq!(acquired_epoch(&device, Uuid::new_v4()).await, epoch + 1);
}

/// `mcp call --wait` on a device call: the submission is answered with the call as the
/// device's upload recorded it — its outcome and the receipt that carried it — exactly as a
/// read of the call shows it afterwards.
#[sqlx::test(migrations = "../../migrations")]
async fn a_waiting_submission_answers_with_the_call_as_the_upload_recorded_it(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device = setup_device_connection(&server, &scratch_dir("waited").path("count")).await;
    let epoch = acquired_epoch(&device, Uuid::new_v4()).await;
    let receipt = Uuid::new_v4();
    let waiting = format!("{CALLS}?wait_ms=20000");
    let submitted = server
        .owner
        .post(&waiting, device_call_body("count", json!({"label": "x"})));
    let run = async {
        let leased = lease(&device, epoch, 20_000).await;
        assert_eq!(leased.len(), 1, "{leased:?}");
        let call = leased[0]["call_id"].as_str().unwrap().to_owned();
        let started = start(&device, &call, epoch).await;
        assert_eq!(started["decision"], "proceed");
        let uploaded = upload(&device, &call, succeeded(receipt, epoch, "counted x")).await;
        assert_eq!(uploaded["status"], "recorded");
        call
    };
    let (answer, call) = tokio::join!(submitted, run);
    assert_eq!(answer.status, 201, "{}", answer.body);
    assert_eq!(answer.body["id"], call.as_str());
    assert_eq!(answer.body["state"], "succeeded", "{}", answer.body);
    assert_eq!(result_text(&answer.body), "counted x");
    assert_eq!(answer.body["lineage"]["receipt_ids"], json!([receipt]));
    assert_eq!(answer.body, state(&server, &call).await);
}

/// A runner back from a crash asks which of the starts its outbox recorded the server never
/// acknowledged: a leased call it never started is listed, a started one is not, nor a call
/// the server does not know (whether that one was sent cannot be told).
#[sqlx::test(migrations = "../../migrations")]
async fn the_start_check_lists_the_starts_the_server_never_acknowledged(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device = setup_device_connection(&server, &scratch_dir("start-check").path("count")).await;
    let started = submit(&server, "count").await;
    let unstarted = submit(&server, "count").await;
    let epoch = acquired_epoch(&device, Uuid::new_v4()).await;
    let mut leased = Vec::new();
    while leased.len() < 2 {
        leased.extend(lease(&device, epoch, 20_000).await);
    }
    assert_eq!(
        device
            .client
            .post(&start_path(&started), json!({"epoch": epoch}))
            .await
            .ok()["decision"],
        "proceed"
    );

    let check = json!({"starts": [
        {"call_id": started, "epoch": epoch},
        {"call_id": unstarted, "epoch": epoch},
        {"call_id": Uuid::new_v4(), "epoch": epoch},
    ]});
    let answer = device
        .client
        .post("/api/v1/runner/starts/check", check)
        .await
        .ok();

    assert_eq!(answer["unacknowledged"], json!([unstarted]), "{answer}");
    assert_eq!(state(&server, &started).await["state"], "running");
    assert_eq!(state(&server, &unstarted).await["state"], "leased");
    // More starts than an outbox can hold is a malformed check.
    let starts: Vec<Value> = (0..257)
        .map(|_| json!({"call_id": Uuid::new_v4(), "epoch": epoch}))
        .collect();
    device
        .client
        .post("/api/v1/runner/starts/check", json!({ "starts": starts }))
        .await
        .refused(400, "invalid_request");
}

/// The start ack and the upload check the device credential in their own statements: a
/// credential no device holds is `unauthenticated`, even beside a malformed call id; a revoked
/// device is `device_revoked` and changes nothing — its leased call is not started, its running
/// call not completed.
#[sqlx::test(migrations = "../../migrations")]
async fn starts_and_uploads_check_the_device_credential_and_a_revoked_device_changes_nothing(
    pool: PgPool,
) {
    let server = TestServer::start(pool).await;
    let device = setup_device_connection(&server, &scratch_dir("revoked").path("count")).await;
    let (first, second) = (
        submit(&server, "count").await,
        submit(&server, "count").await,
    );
    let epoch = acquired_epoch(&device, Uuid::new_v4()).await;
    assert_eq!(lease(&device, epoch, 20_000).await.len(), 2);
    let started = device
        .client
        .post(&start_path(&first), json!({"epoch": epoch}))
        .await
        .ok();
    assert_eq!(started["decision"], "proceed");

    let stranger = Client::at(
        &format!("http://{}", server.addr),
        "sy_dev_not-a-credential-any-device-holds",
    );
    stranger
        .post(&start_path(&second), json!({"epoch": epoch}))
        .await
        .refused(401, "unauthenticated");
    stranger
        .post(&start_path("not-a-call-id"), json!({"epoch": epoch}))
        .await
        .refused(401, "unauthenticated");
    stranger
        .post(
            &complete_path(&first),
            succeeded(Uuid::new_v4(), epoch, "x"),
        )
        .await
        .refused(401, "unauthenticated");
    device
        .client
        .post(&start_path("not-a-call-id"), json!({"epoch": epoch}))
        .await
        .refused(404, "call_not_found");
    device
        .client
        .post(
            &complete_path("not-a-call-id"),
            succeeded(Uuid::new_v4(), epoch, "x"),
        )
        .await
        .refused(404, "call_not_found");

    let revoke = format!("/api/v1/workspaces/acme/devices/{}/revoke", device.id);
    server.owner.post(&revoke, json!({})).await.ok();
    device
        .client
        .post(&start_path(&second), json!({"epoch": epoch}))
        .await
        .refused(401, "device_revoked");
    device
        .client
        .post(
            &complete_path(&first),
            succeeded(Uuid::new_v4(), epoch, "done"),
        )
        .await
        .refused(401, "device_revoked");
    // Revoking expired the lease, so a sweep may have settled both since: the leased call
    // queued again, the running one unknown. Neither was started or completed by the device.
    let second_state = state(&server, &second).await["state"].clone();
    assert!(
        second_state == "leased" || second_state == "queued",
        "{second_state}"
    );
    let first_state = state(&server, &first).await["state"].clone();
    assert!(
        first_state == "running" || first_state == "unknown",
        "{first_state}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_long_poll_on_one_replica_wakes_for_a_call_submitted_to_another(pool: PgPool) {
    let a = TestServer::start(pool).await;
    let device = setup_device_connection(&a, &scratch_dir("replicas").path("count")).await;
    let b = TestServer::replica(&a).await;
    let on_b = Device {
        client: client_with(&b, &device.credential),
        ..device
    };

    let epoch = acquired_epoch(&on_b, Uuid::new_v4()).await;
    assert!(lease(&on_b, epoch, 0).await.is_empty());
    let poll = {
        let client = on_b.client.clone();
        tokio::spawn(async move {
            client
                .post(
                    "/api/v1/runner/lease",
                    json!({"epoch": epoch, "max": 8, "wait_ms": 20_000}),
                )
                .await
                .ok()
        })
    };
    let call = submit(&a, "count").await;
    let answer = poll.await.unwrap();
    let calls = answer["calls"].as_array().unwrap();
    assert_eq!(
        calls.len(),
        1,
        "the long-poll on replica B did not get the call submitted to A: {answer}"
    );
    assert_eq!(calls[0]["call_id"], call.as_str());
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_same_holder_resumes_its_lease_and_another_waits(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device = setup_device_connection(&server, &scratch_dir("resume").path("count")).await;
    let holder = Uuid::new_v4();
    let epoch = acquired_epoch(&device, holder).await;
    let call = submit(&server, "count").await;
    assert_eq!(lease(&device, epoch, 0).await.len(), 1);

    // A restarted process with the same holder id resumes the lease under the same epoch;
    // the call it leased stays leased under it.
    assert_eq!(acquired_epoch(&device, holder).await, epoch);
    let leased = state(&server, &call).await;
    assert_eq!(leased["state"], "leased");
    let held = acquire(&device, Uuid::new_v4()).await;
    assert_eq!(held["status"], "held");
    assert!(held["retry_after_ms"].as_u64().unwrap() > 0);
    assert_eq!(start(&device, &call, epoch).await["decision"], "proceed");
}

#[sqlx::test(migrations = "../../migrations")]
async fn stale_epochs_are_fenced(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let device = setup_device_connection(&server, &scratch_dir("fenced").path("count")).await;
    let running = submit(&server, "count").await;
    let leased = submit(&server, "count").await;
    let old = acquired_epoch(&device, Uuid::new_v4()).await;
    assert_eq!(lease(&device, old, 0).await.len(), 2);
    assert_eq!(
        device
            .client
            .post(&start_path(&running), json!({"epoch": old}))
            .await
            .ok()["decision"],
        "proceed"
    );
    let receipt = Uuid::new_v4();

    // The old process stops renewing; a new one takes the runner over.
    expire_runner_lease(&pool, &device.runner).await;
    let new = acquired_epoch(&device, Uuid::new_v4()).await;
    assert!(new > old);
    assert_eq!(state(&server, &running).await["state"], "unknown");
    assert_eq!(state(&server, &leased).await["state"], "queued");

    let heartbeat = json!({"epoch": old, "active": [running]});
    device
        .client
        .post("/api/v1/runner/heartbeat", heartbeat)
        .await
        .refused(409, "runner_fenced");
    device
        .client
        .post(
            "/api/v1/runner/lease",
            json!({"epoch": old, "max": 1, "wait_ms": 0}),
        )
        .await
        .refused(409, "runner_fenced");
    device
        .client
        .post(&start_path(&leased), json!({"epoch": old}))
        .await
        .refused(409, "runner_fenced");
    device
        .client
        .post(&complete_path(&running), succeeded(receipt, old, "late"))
        .await
        .refused(409, "runner_fenced");
    // Uploaded again, the receipt gets the same answer; the check keeps it quarantined.
    device
        .client
        .post(&complete_path(&running), succeeded(receipt, old, "late"))
        .await
        .refused(409, "runner_fenced");
    let check = json!({"receipts": [{"receipt_id": receipt, "call_id": running, "epoch": old}]});
    assert_eq!(
        device
            .client
            .post("/api/v1/runner/receipts/check", check)
            .await
            .ok()["fenced"],
        json!([receipt])
    );
    assert_eq!(state(&server, &running).await["state"], "unknown");
    // The new epoch works.
    assert_eq!(lease(&device, new, 0).await.len(), 1);
    assert_eq!(
        device
            .client
            .post(&start_path(&leased), json!({"epoch": new}))
            .await
            .ok()["decision"],
        "proceed"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn heartbeats_carry_cancellations_and_releases_and_requeue_forgotten_leases(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let device = setup_device_connection(&server, &scratch_dir("heartbeat").path("count")).await;
    let epoch = acquired_epoch(&device, Uuid::new_v4()).await;
    let running = submit(&server, "count").await;
    assert_eq!(lease(&device, epoch, 0).await.len(), 1);
    device
        .client
        .post(&start_path(&running), json!({"epoch": epoch}))
        .await
        .ok();
    let beat = json!({"epoch": epoch, "active": [running]});
    assert_eq!(
        device
            .client
            .post("/api/v1/runner/heartbeat", beat.clone())
            .await
            .ok(),
        json!({"cancel": [], "release": []})
    );

    let cancelled = server
        .owner
        .post(&format!("{CALLS}/{running}/cancel"), json!({}))
        .await
        .ok();
    assert_eq!(cancelled["outcome"], "cancellation_requested");
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/sessions/s1/release",
            json!({"connection_id": "local"}),
        )
        .await
        .ok();
    let answer = device
        .client
        .post("/api/v1/runner/heartbeat", beat.clone())
        .await
        .ok();
    assert_eq!(answer["cancel"], json!([running]));
    let local = server
        .owner
        .get("/api/v1/workspaces/acme/connections/local")
        .await
        .ok();
    let owner = server.owner.get("/api/v1/me").await.ok();
    assert_eq!(
        answer["release"],
        json!([{"connection_id": local["id"], "client_session_id": "s1", "submitter": {"user": owner["id"]}}]),
        "the release drains the releasing user's sessions only"
    );
    // A release is delivered once; the cancellation stands until the call ends.
    let again = device
        .client
        .post("/api/v1/runner/heartbeat", beat.clone())
        .await
        .ok();
    assert_eq!(
        (again["cancel"].clone(), again["release"].clone()),
        (json!([running]), json!([]))
    );

    // A call leased long ago that the runner does not list as held (its predecessor leased it,
    // or the lease answer was lost) goes back to the queue; nothing was sent for it.
    let forgotten = submit(&server, "count").await;
    assert_eq!(lease(&device, epoch, 0).await.len(), 1);
    sqlx::query("UPDATE calls SET leased_at = now() - interval '1 hour' WHERE id = $1")
        .bind(Uuid::parse_str(&forgotten).unwrap())
        .execute(&pool)
        .await
        .unwrap();
    device
        .client
        .post("/api/v1/runner/heartbeat", beat)
        .await
        .ok();
    assert_eq!(state(&server, &forgotten).await["state"], "queued");
    assert_eq!(state(&server, &running).await["state"], "running");
    // A late start for it (the lost lease answer arriving after all) is refused.
    assert_eq!(
        device
            .client
            .post(&start_path(&forgotten), json!({"epoch": epoch}))
            .await
            .ok()["decision"],
        "abandon"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn devices_report_events_for_their_own_connections(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device = setup_device_connection(&server, &scratch_dir("events").path("count")).await;
    let local = server
        .owner
        .get("/api/v1/workspaces/acme/connections/local")
        .await
        .ok();
    let event = json!({"kind": "session_started", "connection_id": local["id"], "client_session_id": "s1", "pid": 4242});
    let reported = device.client.post("/api/v1/runner/events", event).await;
    assert_eq!(reported.status.as_u16(), 204);
    let events = server
        .owner
        .get("/api/v1/workspaces/acme/connections/local/events")
        .await
        .ok();
    assert_eq!(events[0]["kind"], "session_started");
    assert_eq!(events[0]["runner"], device.runner.as_str());
    assert_eq!(events[0]["detail"]["pid"], 4242);

    let central = server
        .owner
        .get("/api/v1/workspaces/acme/connections/fixture")
        .await
        .ok();
    let event = json!({"kind": "session_closed", "connection_id": central["id"], "client_session_id": null, "reason": "idle"});
    device
        .client
        .post("/api/v1/runner/events", event)
        .await
        .refused(404, "connection_not_found");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_holder_back_after_its_lease_expired_resumes_its_epoch_and_its_receipt_settles_the_lost_call(
    pool: PgPool,
) {
    let server = TestServer::start(pool.clone()).await;
    let device = setup_device_connection(&server, &scratch_dir("back").path("count")).await;
    let holder = Uuid::new_v4();
    let epoch = acquired_epoch(&device, holder).await;
    let call = submit(&server, "count").await;
    assert_eq!(lease(&device, epoch, 0).await.len(), 1);
    assert_eq!(start(&device, &call, epoch).await["decision"], "proceed");

    // The runner is lost: its lease runs out and the call becomes unknown.
    expire_runner_lease(&pool, &device.runner).await;
    let started = std::time::Instant::now();
    while state(&server, &call).await["state"] != "unknown" {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the call never became unknown"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // The same process identity comes back: nobody took over, so it resumes its epoch, and the
    // receipt in its outbox is a late receipt that settles the call.
    assert_eq!(acquired_epoch(&device, holder).await, epoch);
    let receipt = Uuid::new_v4();
    let check = json!({"receipts": [{"receipt_id": receipt, "call_id": call, "epoch": epoch}]});
    assert_eq!(
        device
            .client
            .post("/api/v1/runner/receipts/check", check)
            .await
            .ok()["fenced"],
        json!([])
    );
    assert_eq!(
        upload(&device, &call, succeeded(receipt, epoch, "counted")).await["status"],
        "recorded"
    );
    let settled = state(&server, &call).await;
    assert_eq!(
        (
            settled["state"].as_str(),
            settled["resolution_outcome"].as_str()
        ),
        (Some("resolved"), Some("succeeded")),
        "{settled}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_started_call_the_resumed_runner_does_not_hold_becomes_unknown(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let device = setup_device_connection(&server, &scratch_dir("orphan").path("count")).await;
    let holder = Uuid::new_v4();
    let epoch = acquired_epoch(&device, holder).await;
    let call = submit(&server, "count").await;
    assert_eq!(lease(&device, epoch, 0).await.len(), 1);
    // Acknowledged by the server, but the process died before its outbox recorded the start.
    assert_eq!(start(&device, &call, epoch).await["decision"], "proceed");
    assert_eq!(acquired_epoch(&device, holder).await, epoch);

    // Within a lease of its start the call is left alone (a heartbeat may race the start).
    let beat = json!({"epoch": epoch, "active": []});
    device
        .client
        .post("/api/v1/runner/heartbeat", beat.clone())
        .await
        .ok();
    assert_eq!(state(&server, &call).await["state"], "running");
    sqlx::query("UPDATE calls SET started_at = now() - interval '1 hour' WHERE id = $1")
        .bind(Uuid::parse_str(&call).unwrap())
        .execute(&pool)
        .await
        .unwrap();
    device
        .client
        .post("/api/v1/runner/heartbeat", beat)
        .await
        .ok();
    let lost = state(&server, &call).await;
    assert_eq!(
        (lost["state"].as_str(), lost["error"]["code"].as_str()),
        (Some("unknown"), Some("runner_restarted")),
        "{lost}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_cannot_touch_another_devices_calls(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let a = setup_device_connection(&server, &scratch_dir("isolation").path("count")).await;
    let b = pair_device(&server, "acme", "main").await;
    let call = submit(&server, "count").await;
    let b_epoch = acquired_epoch(&b, Uuid::new_v4()).await;
    let a_epoch = acquired_epoch(&a, Uuid::new_v4()).await;

    // B's lease never holds A's call.
    assert!(lease(&b, b_epoch, 0).await.is_empty());
    let leased = lease(&a, a_epoch, 20_000).await;
    assert_eq!(leased[0]["call_id"], call.as_str());

    // B can neither start, complete, check nor read it; nothing changes. (Refused, or told to
    // abandon: never told to proceed, never recorded.)
    for epoch in [b_epoch, a_epoch] {
        let started = b
            .client
            .post(&start_path(&call), json!({"epoch": epoch}))
            .await;
        assert!(
            started.status.is_client_error() || started.body["decision"] == "abandon",
            "B started A's call: {}",
            started.body
        );
        let completed = b
            .client
            .post(
                &complete_path(&call),
                succeeded(Uuid::new_v4(), epoch, "forged"),
            )
            .await;
        assert!(
            completed.status.is_client_error(),
            "B completed A's call: {}",
            completed.body
        );
    }
    assert_eq!(state(&server, &call).await["state"], "leased");
    b.client
        .get(&format!("{CALLS}/{call}"))
        .await
        .refused(403, "forbidden");

    // A runs it as ever, and B's forged receipt left no trace.
    assert_eq!(start(&a, &call, a_epoch).await["decision"], "proceed");
    let receipt = Uuid::new_v4();
    assert_eq!(
        upload(&a, &call, succeeded(receipt, a_epoch, "counted x")).await["status"],
        "recorded"
    );
    let done = state(&server, &call).await;
    assert_eq!(result_text(&done), "counted x");
    let check = json!({"receipts": [{"receipt_id": receipt, "call_id": call, "epoch": a_epoch}]});
    let answer = b
        .client
        .post("/api/v1/runner/receipts/check", check)
        .await
        .ok();
    assert!(!answer.to_string().contains("counted"), "{answer}");
}
