//! Evidence capture (off by default, never importing older calls, never granting Use), the
//! bounded pending queue, and erasure — including a receipt still in a stopped device
//! runner's outbox, which is quarantined when the runner comes back and never published.

use crate::devices::*;
use crate::harness::*;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::{Duration, Instant};
use switchyard_server::app::{App, AppConfig};
use switchyard_server::db::Datastore;
use switchyard_server::sweeper::{SweeperConfig, sweep_once};
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(60);

async fn set_capture(client: &Client, ws: &str, on: bool) -> Answer {
    client
        .send(
            Method::PUT,
            &format!("/api/v1/workspaces/{ws}/capture-policy"),
            Some(json!({"capture_managed_tool_results": on})),
        )
        .await
}

/// Submits `tool` with `arguments` in `ws` as the owner and waits for the call to end.
pub(crate) async fn run_to_end(
    server: &TestServer,
    ws: &str,
    tool: &str,
    arguments: Value,
) -> Value {
    let call = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls"),
            call_body(tool, arguments),
        )
        .await
        .ok();
    server
        .owner
        .wait_call(ws, call["id"].as_str().unwrap(), WAIT)
        .await
}

async fn call_view(client: &Client, ws: &str, call: &str) -> Value {
    client
        .get(&format!("/api/v1/workspaces/{ws}/calls/{call}"))
        .await
        .ok()
}

/// Polls a call until `done` holds for it.
async fn wait_for(client: &Client, ws: &str, call: &str, done: impl Fn(&Value) -> bool) -> Value {
    client.wait_call_until(ws, call, WAIT, done).await
}

fn evidence_ids(call: &Value) -> Vec<String> {
    call["lineage"]["evidence_ids"]
        .as_array()
        .map(|ids| ids.iter().map(|i| i.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[sqlx::test(migrations = "../../migrations")]
async fn captured_results_are_read_under_use_as_their_calls_are(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    let policy = server
        .owner
        .get(&format!("/api/v1/workspaces/{ws}/capture-policy"))
        .await
        .ok();
    assert_eq!(
        policy["capture_managed_tool_results"], false,
        "off by default"
    );
    let before = run_to_end(&server, ws, "echo", json!({"text": "before capture"})).await;

    let bob = server.user("bob").await;
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/members"),
            json!({"user": "bob"}),
        )
        .await
        .ok();
    set_capture(&bob, ws, true).await.refused(403, "forbidden");
    assert_eq!(
        set_capture(&server.owner, ws, true).await.ok()["capture_managed_tool_results"],
        true
    );
    let after = run_to_end(&server, ws, "echo", json!({"text": "captured result"})).await;
    let failing = run_to_end(&server, ws, "fail", json!({"message": "quota exceeded"})).await;

    let id = after["id"].as_str().unwrap();
    let after = wait_for(&server.owner, ws, id, |c| !evidence_ids(c).is_empty()).await;
    let evidence_id = &evidence_ids(&after)[0];
    // Bob, a member without Use, reads neither the evidence nor the call; the owner, with
    // Use, reads both.
    bob.get(&format!("/api/v1/workspaces/{ws}/evidence/{evidence_id}"))
        .await
        .refused(403, "forbidden");
    let evidence = server
        .owner
        .get(&format!("/api/v1/workspaces/{ws}/evidence/{evidence_id}"))
        .await
        .ok();
    assert_eq!(evidence["output"]["content"][0]["text"], "captured result");
    assert_eq!(
        (
            evidence["call_id"].as_str(),
            evidence["request_id"].as_str()
        ),
        (Some(id), after["request_id"].as_str())
    );
    assert_eq!(
        (evidence["outcome"].as_str(), evidence["kind"].as_str()),
        (Some("succeeded"), Some("tool"))
    );
    assert_eq!(
        (evidence["profile_id"].as_str(), evidence["runner"].as_str()),
        (after["profile_id"].as_str(), Some("central"))
    );
    assert_eq!(evidence["connector_revision"], 1);
    assert_eq!(evidence["lineage"]["receipt_ids"], json!([]));
    bob.get(&format!("/api/v1/workspaces/{ws}/calls/{id}"))
        .await
        .refused(403, "forbidden");
    let failing = wait_for(&server.owner, ws, failing["id"].as_str().unwrap(), |c| {
        !evidence_ids(c).is_empty()
    })
    .await;
    let failed_evidence = server
        .owner
        .get(&format!(
            "/api/v1/workspaces/{ws}/evidence/{}",
            evidence_ids(&failing)[0]
        ))
        .await
        .ok();
    assert_eq!(failed_evidence["outcome"], "tool_error");

    // Enabling capture did not import the call that finished before.
    assert!(
        evidence_ids(&call_view(&server.owner, ws, before["id"].as_str().unwrap()).await)
            .is_empty()
    );
    // Another workspace's member cannot read it.
    server
        .owner
        .post("/api/v1/workspaces", json!({"name": "elsewhere"}))
        .await
        .ok();
    server
        .owner
        .get(&format!(
            "/api/v1/workspaces/elsewhere/evidence/{evidence_id}"
        ))
        .await
        .refused(404, "evidence_not_found");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_full_queue_never_fails_a_tool_nor_drops_what_waits(pool: PgPool) {
    // The sweeper passes once at start and then not for an hour: evidence stays pending.
    let server = TestServer::start_with(pool.clone(), |c| {
        c.app.evidence_queue.max_records = 2;
        c.sweeper.interval = Duration::from_secs(3600);
    })
    .await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    set_capture(&server.owner, ws, true).await.ok();
    let mut ids = Vec::new();
    for i in 0..3 {
        let call = run_to_end(&server, ws, "echo", json!({"text": format!("result {i}")})).await;
        assert_eq!(
            call["state"], "succeeded",
            "a full queue must not fail the tool: {call}"
        );
        ids.push(call["id"].as_str().unwrap().to_owned());
    }
    let policy = server
        .owner
        .get(&format!("/api/v1/workspaces/{ws}/capture-policy"))
        .await
        .ok();
    assert_eq!(
        (
            policy["pending_records"].as_u64(),
            policy["dropped"].as_u64()
        ),
        (Some(2), Some(1)),
        "{policy}"
    );
    assert!(policy["pending_bytes"].as_u64().unwrap() > 0);

    // The reconciler publishes what waited; the dropped one was never captured.
    let app = App::new(Datastore::new(pool), AppConfig::default());
    let deadline = Instant::now() + WAIT;
    loop {
        sweep_once(&app, &SweeperConfig::default()).await.unwrap();
        let policy = server
            .owner
            .get(&format!("/api/v1/workspaces/{ws}/capture-policy"))
            .await
            .ok();
        if policy["pending_records"] == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "pending evidence was never published: {policy}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut captured = Vec::new();
    for id in &ids {
        captured.push(evidence_ids(&call_view(&server.owner, ws, id).await).len());
    }
    assert_eq!(captured, vec![1, 1, 0]);
    let policy = server
        .owner
        .get(&format!("/api/v1/workspaces/{ws}/capture-policy"))
        .await
        .ok();
    assert_eq!(
        (
            policy["pending_records"].as_u64(),
            policy["pending_bytes"].as_u64()
        ),
        (Some(0), Some(0))
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn erasure_removes_evidence_keeps_the_disposition_and_says_what_it_cannot_undo(pool: PgPool) {
    let scratch = scratch_dir("erase");
    let counter = scratch.path("count");
    let server = TestServer::start(pool).await;
    let ws = &setup_workspace(&server, "acme", &["--count-file", &counter])
        .await
        .ws;
    set_capture(&server.owner, ws, true).await.ok();
    let policy = json!({"tool": "lookup", "arguments": {"request_id": "{{request_id}}"}});
    server
        .owner
        .send(
            Method::PUT,
            &format!("/api/v1/workspaces/{ws}/connections/fixture/receipt-policy"),
            Some(policy),
        )
        .await
        .ok();
    let lost = run_to_end(
        &server,
        ws,
        "count_then_crash",
        json!({"label": "erase me"}),
    )
    .await;
    let id = lost["id"].as_str().unwrap();
    let reconcile = json!({"request_id": Uuid::new_v4()});
    let lookup = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls/{id}/reconcile"),
            reconcile,
        )
        .await
        .ok();
    let lookup_id = lookup["lookup"]["id"].as_str().unwrap();
    let settled = wait_for(&server.owner, ws, id, |c| c["state"] == "resolved").await;
    assert!(settled["observations"][0]["output"].is_object());
    let lookup_view = wait_for(&server.owner, ws, lookup_id, |c| {
        !evidence_ids(c).is_empty()
    })
    .await;
    let lookup_evidence = evidence_ids(&lookup_view)[0].clone();
    // The unknown call's lineage names the evidence its lookup captured.
    assert_eq!(
        evidence_ids(&call_view(&server.owner, ws, id).await),
        vec![lookup_evidence.clone()]
    );

    // Only an admin erases, and never a call still on its way.
    let bob = server.user("bob").await;
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/members"),
            json!({"user": "bob"}),
        )
        .await
        .ok();
    bob.post(
        &format!("/api/v1/workspaces/{ws}/calls/{id}/erase"),
        json!({}),
    )
    .await
    .refused(403, "forbidden");

    let erased = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls/{id}/erase"),
            json!({}),
        )
        .await
        .ok();
    let notice = erased["notice"].as_str().unwrap();
    assert!(notice.contains("does not undo"), "{notice}");
    assert_eq!(erased["observations_erased"], 1);
    assert_eq!(erased["evidence_erased"], 1, "the lookup's captured answer");
    let call = &erased["call"];
    assert!(call["erased_at"].is_string());
    // The minimal disposition remains: state, outcome, error code, times, what was reported.
    assert_eq!(
        (call["state"].as_str(), call["resolution_outcome"].as_str()),
        (Some("resolved"), Some("succeeded"))
    );
    assert_eq!(call["error"]["code"], "transport_closed");
    assert_eq!(call["started_at"], lost["started_at"]);
    assert!(call["arguments"].is_null());
    let observation = &call["observations"][0];
    assert!(
        observation["output"].is_null() && observation["erased_at"].is_string(),
        "{observation}"
    );
    assert_eq!(observation["reported"], "applied");
    assert!(!call.to_string().contains("erase me"));
    let evidence = server
        .owner
        .get(&format!(
            "/api/v1/workspaces/{ws}/evidence/{lookup_evidence}"
        ))
        .await
        .ok();
    assert!(
        evidence["output"].is_null() && evidence["erased_at"].is_string(),
        "{evidence}"
    );
    assert!(call_view(&server.owner, ws, lookup_id).await["result"].is_null());
    // Erased evidence cannot be cited; an erased call cannot be settled again.
    let crashed = run_to_end(&server, ws, "crash", json!({})).await;
    let cite = json!({"request_id": Uuid::new_v4(), "outcome": "succeeded", "source_version_id": lookup_evidence, "explanation": "x"});
    server
        .owner
        .post(
            &format!(
                "/api/v1/workspaces/{ws}/calls/{}/resolve",
                crashed["id"].as_str().unwrap()
            ),
            cite,
        )
        .await
        .refused(404, "evidence_not_found");
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls/{id}/reconcile"),
            json!({"request_id": Uuid::new_v4()}),
        )
        .await
        .refused(410, "call_erased");
    // Erasing again changes nothing; the external effect is still there.
    let again = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls/{id}/erase"),
            json!({}),
        )
        .await
        .ok();
    assert_eq!(
        (
            again["observations_erased"].as_u64(),
            again["evidence_erased"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert_eq!(count_lines(&counter), 1);
}

#[sqlx::test(migrations = "../../migrations")]
async fn erasing_drops_pending_evidence_and_refuses_active_calls(pool: PgPool) {
    let server =
        TestServer::start_with(pool, |c| c.sweeper.interval = Duration::from_secs(3600)).await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    set_capture(&server.owner, ws, true).await.ok();
    let done = run_to_end(&server, ws, "echo", json!({"text": "pending evidence"})).await;
    let erased = server
        .owner
        .post(
            &format!(
                "/api/v1/workspaces/{ws}/calls/{}/erase",
                done["id"].as_str().unwrap()
            ),
            json!({}),
        )
        .await
        .ok();
    assert_eq!(erased["pending_evidence_dropped"], 1);
    let policy = server
        .owner
        .get(&format!("/api/v1/workspaces/{ws}/capture-policy"))
        .await
        .ok();
    assert_eq!(
        (
            policy["pending_records"].as_u64(),
            policy["pending_bytes"].as_u64()
        ),
        (Some(0), Some(0))
    );

    let mut body = call_body("slow", json!({"seconds": 600}));
    body["timeout_seconds"] = json!(3600);
    let running = server
        .owner
        .post(&format!("/api/v1/workspaces/{ws}/calls"), body)
        .await
        .ok();
    let id = running["id"].as_str().unwrap();
    wait_for(&server.owner, ws, id, |c| c["state"] == "running").await;
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls/{id}/erase"),
            json!({}),
        )
        .await
        .refused(409, "call_active");
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls/{id}/cancel"),
            json!({}),
        )
        .await
        .ok();
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_receipt_left_in_a_stopped_runners_outbox_is_quarantined_after_erasure(pool: PgPool) {
    let scratch = scratch_dir("erase-outbox");
    let server = TestServer::start(pool.clone()).await;
    let device = setup_device_connection(&server, &scratch.path("count")).await;
    set_capture(&server.owner, "acme", true).await.ok();
    let call = server
        .owner
        .post(
            "/api/v1/workspaces/acme/calls",
            device_call_body("count", json!({"label": "x"})),
        )
        .await
        .ok();
    let id = call["id"].as_str().unwrap();

    // The device runs the call and keeps its receipt in the outbox, then stops before uploading.
    let holder = Uuid::new_v4();
    let epoch = acquire_lease(&device, holder).await;
    let leased = device
        .client
        .post(
            "/api/v1/runner/lease",
            json!({"epoch": epoch, "max": 8, "wait_ms": 5000}),
        )
        .await
        .ok();
    assert_eq!(leased["calls"][0]["call_id"], id);
    let started = device
        .client
        .post(
            &format!("/api/v1/runner/calls/{id}/start"),
            json!({"epoch": epoch}),
        )
        .await
        .ok();
    assert_eq!(started["decision"], "proceed");
    let receipt = Uuid::new_v4();
    let upload = json!({
        "receipt_id": receipt,
        "epoch": epoch,
        "completion": {"outcome": "succeeded", "result": {"content": [{"type": "text", "text": "counted"}], "isError": false}},
    });
    // Its lease runs out; the call is unknown; an admin erases it.
    expire_runner_lease(&pool, &device.runner).await;
    wait_for(&server.owner, "acme", id, |c| c["state"] == "unknown").await;
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/acme/calls/{id}/erase"),
            json!({}),
        )
        .await
        .ok();

    // The runner restarts: its check quarantines the receipt, and an upload is refused.
    device
        .client
        .post("/api/v1/runner/lease/acquire", json!({"holder": holder}))
        .await
        .ok();
    let check = json!({"receipts": [{"receipt_id": receipt, "call_id": id, "epoch": epoch}]});
    let answer = device
        .client
        .post("/api/v1/runner/receipts/check", check)
        .await
        .ok();
    assert_eq!(answer["fenced"], json!([receipt]));
    device
        .client
        .post(&format!("/api/v1/runner/calls/{id}/complete"), upload)
        .await
        .refused(409, "runner_fenced");
    let view = call_view(&server.owner, "acme", id).await;
    assert_eq!(view["state"], "unknown");
    assert!(
        view["observations"].is_null() && view["resolution"].is_null(),
        "{view}"
    );
    assert!(evidence_ids(&view).is_empty());
    assert!(!view.to_string().contains("counted"));
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_result_is_captured_with_its_receipt_lineage(pool: PgPool) {
    let scratch = scratch_dir("evidence-device");
    let server = TestServer::start(pool).await;
    let device = setup_device_connection(&server, &scratch.path("count")).await;
    set_capture(&server.owner, "acme", true).await.ok();
    let call = server
        .owner
        .post(
            "/api/v1/workspaces/acme/calls",
            device_call_body("count", json!({"label": "x"})),
        )
        .await
        .ok();
    let id = call["id"].as_str().unwrap();
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    device
        .client
        .post(
            "/api/v1/runner/lease",
            json!({"epoch": epoch, "max": 8, "wait_ms": 5000}),
        )
        .await
        .ok();
    device
        .client
        .post(
            &format!("/api/v1/runner/calls/{id}/start"),
            json!({"epoch": epoch}),
        )
        .await
        .ok();
    let receipt = Uuid::new_v4();
    let upload = json!({
        "receipt_id": receipt,
        "epoch": epoch,
        "completion": {"outcome": "succeeded", "result": {"content": [{"type": "text", "text": "counted"}], "isError": false}},
    });
    assert_eq!(
        device
            .client
            .post(&format!("/api/v1/runner/calls/{id}/complete"), upload)
            .await
            .ok()["status"],
        "recorded"
    );
    let view = wait_for(&server.owner, "acme", id, |c| !evidence_ids(c).is_empty()).await;
    assert_eq!(view["lineage"]["receipt_ids"], json!([receipt]));
    let evidence = server
        .owner
        .get(&format!(
            "/api/v1/workspaces/acme/evidence/{}",
            evidence_ids(&view)[0]
        ))
        .await
        .ok();
    assert_eq!(evidence["lineage"]["receipt_ids"], json!([receipt]));
    assert_eq!(
        (evidence["runner"].as_str(), evidence["outcome"].as_str()),
        (Some(device.runner.as_str()), Some("succeeded"))
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_late_receipt_for_an_erased_call_is_fenced_even_under_its_own_epoch(pool: PgPool) {
    use switchyard_protocol::CallId;
    use switchyard_protocol::runner::{Completion, Epoch};
    use switchyard_server::app::{App, AppConfig, CompletionRecorded};
    let scratch = scratch_dir("erase-late");
    let server = TestServer::start(pool.clone()).await;
    let device = setup_device_connection(&server, &scratch.path("count")).await;
    let call = server
        .owner
        .post(
            "/api/v1/workspaces/acme/calls",
            device_call_body("count", json!({"label": "x"})),
        )
        .await
        .ok();
    let id: CallId = call["id"].as_str().unwrap().parse().unwrap();
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    device
        .client
        .post(
            "/api/v1/runner/lease",
            json!({"epoch": epoch, "max": 8, "wait_ms": 5000}),
        )
        .await
        .ok();
    device
        .client
        .post(
            &format!("/api/v1/runner/calls/{id}/start"),
            json!({"epoch": epoch}),
        )
        .await
        .ok();
    expire_runner_lease(&pool, &device.runner).await;
    wait_for(&server.owner, "acme", &id.to_string(), |c| {
        c["state"] == "unknown"
    })
    .await;
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/acme/calls/{id}/erase"),
            json!({}),
        )
        .await
        .ok();

    // The epoch is still the runner's: without erasure this receipt would settle the call.
    let db = Datastore::new(pool);
    assert!(db.call_is_erased(id).await.unwrap());
    let app = App::new(db, AppConfig::default());
    let completion = Completion::Succeeded {
        result: json!({"content": [{"type": "text", "text": "counted"}], "isError": false}),
    };
    let recorded = app
        .call_record_completion(device.runner.parse().unwrap(), id, Epoch(epoch), completion)
        .await
        .unwrap();
    assert_eq!(recorded, CompletionRecorded::Fenced);
    let view = call_view(&server.owner, "acme", &id.to_string()).await;
    assert_eq!(view["state"], "unknown");
    assert!(view["observations"].is_null(), "{view}");
}
