//! Settling unknown calls: receipt policies, receipt lookups run by the real central runner
//! against the fixture, the configuration guard, caller resolutions with evidence, explanation
//! expiry, and late receipts.

use crate::harness::*;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::Duration;
use switchyard_protocol::api::CallError;
use switchyard_protocol::runner::{Completion, Epoch};
use switchyard_protocol::{CallId, RunnerRef};
use switchyard_server::app::{App, AppConfig, CompletionRecorded};
use switchyard_server::db::{Datastore, NewCall};
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(60);
const LOOKUP_POLICY: &str = r#"{"tool": "lookup", "arguments": {"request_id": "{{request_id}}"}}"#;

fn calls(ws: &str) -> String {
    format!("/api/v1/workspaces/{ws}/calls")
}

/// Submits a call and waits until it is no longer on its way.
async fn run_to_end(server: &TestServer, ws: &str, tool: &str, arguments: Value) -> Value {
    let call = server
        .owner
        .post(&calls(ws), call_body(tool, arguments))
        .await
        .ok();
    server
        .owner
        .wait_call(ws, call["id"].as_str().unwrap(), WAIT)
        .await
}

/// Approves the fixture's `lookup` as the receipt policy of connection `fixture`.
async fn approve_lookup_policy(client: &Client, ws: &str) -> Value {
    let policy: Value = serde_json::from_str(LOOKUP_POLICY).unwrap();
    client
        .send(
            Method::PUT,
            &format!("/api/v1/workspaces/{ws}/connections/fixture/receipt-policy"),
            Some(policy),
        )
        .await
        .ok()
}

async fn reconcile(client: &Client, ws: &str, call: &str, request_id: Uuid) -> Answer {
    client
        .post(
            &format!("{}/{call}/reconcile", calls(ws)),
            json!({"request_id": request_id}),
        )
        .await
}

/// Polls a call until `done` holds for it.
async fn wait_for(client: &Client, ws: &str, call: &str, done: impl Fn(&Value) -> bool) -> Value {
    client.wait_call_until(ws, call, WAIT, done).await
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_lost_answer_is_settled_by_the_connectors_receipt_and_never_run_twice(pool: PgPool) {
    let scratch = scratch_dir("reconcile-applied");
    let counter = scratch.path("count");
    let server = TestServer::start(pool).await;
    let ws = &setup_workspace(&server, "acme", &["--count-file", &counter])
        .await
        .ws;

    // The fixture counts, then dies before answering: the effect happened, the answer is lost.
    let lost = run_to_end(&server, ws, "count_then_crash", json!({"label": "once"})).await;
    let id = lost["id"].as_str().unwrap();
    assert_eq!(
        (lost["state"].as_str(), lost["error"]["code"].as_str()),
        (Some("unknown"), Some("transport_closed")),
        "{lost}"
    );
    assert_eq!(count_lines(&counter), 1);

    reconcile(&server.owner, ws, id, Uuid::new_v4())
        .await
        .refused(409, "receipt_policy_missing");
    let policy = approve_lookup_policy(&server.owner, ws).await;
    assert_eq!(
        (policy["tool"].as_str(), &policy["arguments"]),
        (Some("lookup"), &json!({"request_id": "{{request_id}}"}))
    );

    let request_id = Uuid::new_v4();
    let queued = reconcile(&server.owner, ws, id, request_id).await;
    assert_eq!(queued.status.as_u16(), 201, "{}", queued.body);
    let lookup = &queued.body["lookup"];
    assert_eq!(
        (lookup["kind"].as_str(), lookup["parent_call_id"].as_str()),
        (Some("lookup"), Some(id))
    );
    assert_eq!(lookup["tool_name"], "lookup");
    assert_eq!(
        lookup["arguments"],
        json!({"request_id": lost["request_id"]}),
        "built from the policy and the original call"
    );
    let lookup_id = lookup["id"].as_str().unwrap().to_owned();
    assert_eq!(
        server.owner.wait_call(ws, &lookup_id, WAIT).await["state"],
        "succeeded"
    );

    let settled = wait_for(&server.owner, ws, id, |c| c["state"] == "resolved").await;
    assert_eq!(settled["resolution_outcome"], "succeeded", "{settled}");
    // The original attempt is kept as it was recorded.
    assert_eq!(settled["error"]["code"], "transport_closed");
    assert_eq!(settled["started_at"], lost["started_at"]);
    assert_eq!(settled["finished_at"], lost["finished_at"]);
    assert_eq!(settled["attempts"][0]["error"]["code"], "transport_closed");
    assert_eq!(settled["attempts"][0]["runner"], "central");
    let observation = &settled["observations"][0];
    assert_eq!(
        (
            observation["source"].as_str(),
            observation["reported"].as_str()
        ),
        (Some("lookup"), Some("applied"))
    );
    assert_eq!(
        observation["lookup_call_id"].as_str(),
        Some(lookup_id.as_str())
    );
    assert_eq!(
        observation["output"]["structuredContent"],
        json!({"applied": true})
    );
    assert_eq!(settled["resolution"]["source"], "observation");
    assert_eq!(settled["resolution"]["observation_id"], observation["id"]);
    assert_eq!(settled["lineage"]["lookup_call_ids"], json!([lookup_id]));
    // The lookup only read: the count tool ran exactly once.
    assert_eq!(count_lines(&counter), 1);

    // The same request_id answers the same lookup; a new one finds nothing left to settle.
    let replay = reconcile(&server.owner, ws, id, request_id).await;
    assert_eq!(
        (replay.status.as_u16(), replay.body["lookup"]["id"].as_str()),
        (200, Some(lookup_id.as_str()))
    );
    reconcile(&server.owner, ws, id, Uuid::new_v4())
        .await
        .refused(409, "mcp_reconcile_not_unknown");
    // A request_id of another call is a conflict, never a second lookup.
    reconcile(
        &server.owner,
        ws,
        id,
        lost["request_id"].as_str().unwrap().parse().unwrap(),
    )
    .await
    .refused(422, "mcp_request_conflict");
    assert_eq!(count_lines(&counter), 1);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_crash_before_the_effect_settles_not_applied_and_an_unclear_answer_settles_nothing(
    pool: PgPool,
) {
    let scratch = scratch_dir("reconcile-not-applied");
    let counter = scratch.path("count");
    let server = TestServer::start(pool).await;
    let ws = &setup_workspace(&server, "acme", &["--count-file", &counter])
        .await
        .ws;
    let crashed = run_to_end(&server, ws, "crash", json!({})).await;
    let id = crashed["id"].as_str().unwrap();
    assert_eq!(crashed["state"], "unknown");

    // A policy whose tool answers neither `applied` nor `not applied`: an observation, no
    // settlement.
    let echo_policy =
        json!({"tool": "echo", "arguments": {"text": "request {{request_id}} via {{tool_name}}"}});
    server
        .owner
        .send(
            Method::PUT,
            &format!("/api/v1/workspaces/{ws}/connections/fixture/receipt-policy"),
            Some(echo_policy),
        )
        .await
        .ok();
    let unclear = reconcile(&server.owner, ws, id, Uuid::new_v4()).await.ok();
    let unclear_id = unclear["lookup"]["id"].as_str().unwrap();
    let answered = server.owner.wait_call(ws, unclear_id, WAIT).await;
    assert_eq!(
        result_text(&answered),
        format!(
            "request {} via crash",
            crashed["request_id"].as_str().unwrap()
        )
    );
    let still = wait_for(&server.owner, ws, id, |c| {
        c["observations"].as_array().is_some_and(|o| !o.is_empty())
    })
    .await;
    assert_eq!(
        (
            still["state"].as_str(),
            still["observations"][0]["reported"].as_str()
        ),
        (Some("unknown"), Some("unknown"))
    );
    assert!(still["resolution"].is_null());

    approve_lookup_policy(&server.owner, ws).await;
    let lookup = reconcile(&server.owner, ws, id, Uuid::new_v4()).await.ok();
    server
        .owner
        .wait_call(ws, lookup["lookup"]["id"].as_str().unwrap(), WAIT)
        .await;
    let settled = wait_for(&server.owner, ws, id, |c| c["state"] == "resolved").await;
    assert_eq!(settled["resolution_outcome"], "not_applied", "{settled}");
    assert_eq!(settled["observations"][1]["reported"], "not_applied");
    assert_eq!(
        settled["lineage"]["lookup_call_ids"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(settled["error"]["code"], "transport_closed");
    assert_eq!(count_lines(&counter), 0);
}

#[sqlx::test(migrations = "../../migrations")]
async fn receipt_policies_need_admin_and_manage_and_name_a_discovered_tool(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    let path = format!("/api/v1/workspaces/{ws}/connections/fixture/receipt-policy");
    let bob = server.user("bob").await;
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/members"),
            json!({"user": "bob", "role": "admin"}),
        )
        .await
        .ok();
    let policy: Value = serde_json::from_str(LOOKUP_POLICY).unwrap();
    // Bob is an admin without Manage on profile `main`, which includes the connection.
    let message = bob
        .send(Method::PUT, &path, Some(policy.clone()))
        .await
        .refused(403, "forbidden");
    assert!(message.contains("main"), "{message}");
    server
        .owner
        .get(&path)
        .await
        .refused(409, "receipt_policy_missing");
    let unknown_tool = json!({"tool": "nope", "arguments": {}});
    server
        .owner
        .send(Method::PUT, &path, Some(unknown_tool))
        .await
        .refused(404, "tool_not_found");
    let bad_placeholder = json!({"tool": "lookup", "arguments": {"request_id": "{{secret}}"}});
    server
        .owner
        .send(Method::PUT, &path, Some(bad_placeholder))
        .await
        .refused(400, "invalid_arguments");
    server
        .owner
        .send(Method::PUT, &path, Some(policy))
        .await
        .ok();
    // Any member reads it.
    let read = bob.get(&path).await.ok();
    assert_eq!(read["tool"], "lookup");
}

/// Puts another holder's live lease on the central runner (the server's runner drains and
/// waits), or lets it go.
/// Changes the `fixture-acme` connector's command (adds `--grandchild`), which takes away its
/// approval; returns the connector as the API answers.
async fn change_fixture_command(server: &TestServer, counter: &str) -> Value {
    let changed = json!({"transport": "stdio", "command": fixture_bin(), "args": ["stdio", "--count-file", counter, "--grandchild"]});
    server
        .owner
        .send(
            Method::PATCH,
            "/api/v1/connectors/fixture-acme",
            Some(changed),
        )
        .await
        .ok()
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_lookup_is_refused_once_the_connection_changed(pool: PgPool) {
    let scratch = scratch_dir("reconcile-changed");
    let counter = scratch.path("count");
    let server = TestServer::start(pool.clone()).await;
    let ws = &setup_workspace(&server, "acme", &["--count-file", &counter])
        .await
        .ws;
    approve_lookup_policy(&server.owner, ws).await;
    let first = run_to_end(&server, ws, "count_then_crash", json!({"label": "a"})).await;
    let second = run_to_end(&server, ws, "count_then_crash", json!({"label": "b"})).await;
    assert_eq!(
        (first["state"].as_str(), second["state"].as_str()),
        (Some("unknown"), Some("unknown"))
    );

    // A lookup for `second` is queued while no runner serves; then the connector changes.
    hold_central_runner(&pool).await;
    let queued = reconcile(
        &server.owner,
        ws,
        second["id"].as_str().unwrap(),
        Uuid::new_v4(),
    )
    .await
    .ok();
    let connector = change_fixture_command(&server, &counter).await;
    assert_eq!(
        (
            connector["revision"].as_i64(),
            connector["approved"].as_bool()
        ),
        (Some(2), Some(false))
    );
    server
        .owner
        .post("/api/v1/connectors/fixture-acme/approve", json!({}))
        .await
        .ok();

    let message = reconcile(
        &server.owner,
        ws,
        first["id"].as_str().unwrap(),
        Uuid::new_v4(),
    )
    .await
    .refused(409, "mcp_reconcile_config_changed");
    assert!(message.contains("mcp resolve"), "{message}");

    // The lookup queued before the change is refused when leased: nothing is sent.
    release_central_runner(&pool).await;
    let lookup = server
        .owner
        .wait_call(ws, queued["lookup"]["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(
        (lookup["state"].as_str(), lookup["error"]["code"].as_str()),
        (Some("failed"), Some("mcp_reconcile_config_changed")),
        "{lookup}"
    );
    assert!(lookup["started_at"].is_null());
    let second = server
        .owner
        .get(&format!("{}/{}", calls(ws), second["id"].as_str().unwrap()))
        .await
        .ok();
    assert_eq!(second["state"], "unknown");
    assert!(second["observations"].is_null());
    assert_eq!(count_lines(&counter), 2);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_lookup_whose_call_was_resolved_before_it_ran_fails_unsent(pool: PgPool) {
    let scratch = scratch_dir("reconcile-moved-on");
    let counter = scratch.path("count");
    let server = TestServer::start(pool.clone()).await;
    let ws = &setup_workspace(&server, "acme", &["--count-file", &counter])
        .await
        .ws;
    let policy = json!({"capture_managed_tool_results": true});
    server
        .owner
        .send(
            Method::PUT,
            &format!("/api/v1/workspaces/{ws}/capture-policy"),
            Some(policy),
        )
        .await
        .ok();
    let evidence = published_evidence(&server, ws, "the label was written").await;
    approve_lookup_policy(&server.owner, ws).await;
    let lost = run_to_end(&server, ws, "count_then_crash", json!({"label": "a"})).await;
    let id = lost["id"].as_str().unwrap();
    assert_eq!(lost["state"], "unknown");

    // A lookup is queued while no runner serves; meanwhile a caller settles the call.
    hold_central_runner(&pool).await;
    let queued = reconcile(&server.owner, ws, id, Uuid::new_v4()).await.ok();
    let body = json!({"request_id": Uuid::new_v4(), "outcome": "succeeded", "source_version_id": evidence, "explanation": "seen"});
    server
        .owner
        .post(&format!("{}/{id}/resolve", calls(ws)), body)
        .await
        .ok();

    // Leased, the lookup is failed before anything is sent; the settled call keeps its resolution.
    release_central_runner(&pool).await;
    let lookup = server
        .owner
        .wait_call(ws, queued["lookup"]["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(
        (lookup["state"].as_str(), lookup["error"]["code"].as_str()),
        (Some("failed"), Some("mcp_reconcile_not_unknown")),
        "{lookup}"
    );
    assert!(lookup["started_at"].is_null());
    let settled = server.owner.get(&format!("{}/{id}", calls(ws))).await.ok();
    assert_eq!(
        (
            settled["state"].as_str(),
            settled["resolution"]["source"].as_str()
        ),
        (Some("resolved"), Some("caller"))
    );
    assert!(
        settled["observations"].as_array().is_none_or(Vec::is_empty),
        "{settled}"
    );
    assert_eq!(count_lines(&counter), 1);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_queued_call_whose_connector_lost_its_approval_fails_unsent(pool: PgPool) {
    let scratch = scratch_dir("lease-unapproved");
    let counter = scratch.path("count");
    let server = TestServer::start(pool.clone()).await;
    let ws = &setup_workspace(&server, "acme", &["--count-file", &counter])
        .await
        .ws;
    hold_central_runner(&pool).await;
    let call = server
        .owner
        .post(&calls(ws), call_body("count", json!({"label": "a"})))
        .await
        .ok();
    let connector = change_fixture_command(&server, &counter).await;
    assert_eq!(connector["approved"], false);

    release_central_runner(&pool).await;
    let failed = server
        .owner
        .wait_call(ws, call["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(
        (failed["state"].as_str(), failed["error"]["code"].as_str()),
        (Some("failed"), Some("connector_not_approved")),
        "{failed}"
    );
    assert!(failed["started_at"].is_null());
    assert_eq!(count_lines(&counter), 0);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_changed_credential_binding_blocks_the_lookup(pool: PgPool) {
    let scratch = scratch_dir("reconcile-binding");
    let bindings = scratch.join("central.mcp-bindings.json");
    std::fs::write(&bindings, r#"{"bindings": {}}"#).unwrap();
    let file = bindings.clone();
    let server =
        TestServer::start_with(pool.clone(), move |c| c.app.credentials_file = Some(file)).await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    approve_lookup_policy(&server.owner, ws).await;
    let crashed = run_to_end(&server, ws, "crash", json!({})).await;
    assert_eq!(crashed["state"], "unknown");
    let connection = crashed["connection_id"].as_str().unwrap();
    // Only references change (a header binding for another name); no value is involved.
    let changed = json!({"bindings": {connection: {"headers": {"X-Token": {"provider": "environment", "name": "SOME_TOKEN"}}}}});
    std::fs::write(&bindings, changed.to_string()).unwrap();
    reconcile(
        &server.owner,
        ws,
        crashed["id"].as_str().unwrap(),
        Uuid::new_v4(),
    )
    .await
    .refused(409, "mcp_reconcile_config_changed");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_caller_resolves_with_evidence_they_can_read(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    setup_workspace(&server, "other", &[]).await;
    for workspace in [ws.as_str(), "other"] {
        let policy = json!({"capture_managed_tool_results": true});
        server
            .owner
            .send(
                Method::PUT,
                &format!("/api/v1/workspaces/{workspace}/capture-policy"),
                Some(policy),
            )
            .await
            .ok();
    }
    let evidence = published_evidence(&server, ws, "ticket 42 does not exist").await;
    let foreign = published_evidence(&server, "other", "ticket 42 exists").await;
    let crashed = run_to_end(&server, ws, "crash", json!({})).await;
    let resolve = format!("{}/{}/resolve", calls(ws), crashed["id"].as_str().unwrap());
    let body = |evidence: &str, explanation: &str| json!({"request_id": Uuid::new_v4(), "outcome": "not_applied", "source_version_id": evidence, "explanation": explanation});

    // Evidence the caller cannot read: another workspace's, or none at all.
    server
        .owner
        .post(&resolve, body(&foreign, "wrong workspace"))
        .await
        .refused(404, "evidence_not_found");
    server
        .owner
        .post(&resolve, body(&Uuid::new_v4().to_string(), "made up"))
        .await
        .refused(404, "evidence_not_found");
    server
        .owner
        .post(&resolve, body(&evidence, &"x".repeat(2001)))
        .await
        .refused(400, "explanation_too_long");
    // A member without Use on the profile may not settle its calls.
    let bob = server.user("bob").await;
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/members"),
            json!({"user": "bob"}),
        )
        .await
        .ok();
    bob.post(&resolve, body(&evidence, "not mine to say"))
        .await
        .refused(403, "forbidden");

    let accepted = body(&evidence, &"é".repeat(2000));
    let resolved = server.owner.post(&resolve, accepted.clone()).await.ok();
    assert_eq!(
        (
            resolved["state"].as_str(),
            resolved["resolution_outcome"].as_str()
        ),
        (Some("resolved"), Some("not_applied"))
    );
    let resolution = &resolved["resolution"];
    assert_eq!(
        (
            resolution["source"].as_str(),
            resolution["source_version_id"].as_str()
        ),
        (Some("caller"), Some(evidence.as_str()))
    );
    assert_eq!(
        resolution["explanation"]
            .as_str()
            .map(|e| e.chars().count()),
        Some(2000)
    );
    assert_eq!(resolution["request_id"], accepted["request_id"]);
    let me = server.owner.get("/api/v1/me").await.ok();
    assert_eq!(resolution["resolved_by"], me["id"]);
    assert_eq!(
        resolved["error"]["code"], "transport_closed",
        "the attempt is kept"
    );

    // Idempotent on request_id; a reuse with another body is a conflict; nothing is left.
    assert_eq!(
        server.owner.post(&resolve, accepted.clone()).await.ok()["resolution"],
        *resolution
    );
    let mut reused = accepted.clone();
    reused["outcome"] = json!("succeeded");
    server
        .owner
        .post(&resolve, reused)
        .await
        .refused(422, "mcp_request_conflict");
    server
        .owner
        .post(&resolve, body(&evidence, "again"))
        .await
        .refused(409, "mcp_reconcile_not_unknown");
    // A finished call is not unknown.
    let fine = run_to_end(&server, ws, "echo", json!({"text": "ok"})).await;
    let fine_resolve = format!("{}/{}/resolve", calls(ws), fine["id"].as_str().unwrap());
    server
        .owner
        .post(&fine_resolve, body(&evidence, "no"))
        .await
        .refused(409, "mcp_reconcile_not_unknown");
}

/// Runs `echo text` in `ws` (which captures) and returns the id of its published evidence.
pub(crate) async fn published_evidence(server: &TestServer, ws: &str, text: &str) -> String {
    let call = run_to_end(server, ws, "echo", json!({"text": text})).await;
    let id = call["id"].as_str().unwrap();
    let call = wait_for(&server.owner, ws, id, |c| {
        c["lineage"]["evidence_ids"]
            .as_array()
            .is_some_and(|e| !e.is_empty())
    })
    .await;
    call["lineage"]["evidence_ids"][0]
        .as_str()
        .unwrap()
        .to_owned()
}

#[sqlx::test(migrations = "../../migrations")]
async fn explanations_expire_and_who_when_and_outcome_remain(pool: PgPool) {
    let server =
        TestServer::start_with(pool, |c| c.sweeper.explanation_ttl = Duration::from_secs(1)).await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    let policy = json!({"capture_managed_tool_results": true});
    server
        .owner
        .send(
            Method::PUT,
            &format!("/api/v1/workspaces/{ws}/capture-policy"),
            Some(policy),
        )
        .await
        .ok();
    let evidence = published_evidence(&server, ws, "the charge was refunded").await;
    let crashed = run_to_end(&server, ws, "crash", json!({})).await;
    let id = crashed["id"].as_str().unwrap();
    let body = json!({"request_id": Uuid::new_v4(), "outcome": "failed", "source_version_id": evidence, "explanation": "refund seen in the ledger"});
    let resolved = server
        .owner
        .post(&format!("{}/{id}/resolve", calls(ws)), body)
        .await
        .ok();
    assert_eq!(
        resolved["resolution"]["explanation"],
        "refund seen in the ledger"
    );

    let expired = wait_for(&server.owner, ws, id, |c| {
        c["resolution"]["explanation_removed_at"].is_string()
    })
    .await;
    let resolution = &expired["resolution"];
    assert!(resolution["explanation"].is_null(), "{resolution}");
    for kept in [
        "outcome",
        "resolved_by",
        "resolved_at",
        "source_version_id",
        "source",
    ] {
        assert_eq!(resolution[kept], resolved["resolution"][kept], "{kept}");
    }
    assert_eq!(expired["resolution_outcome"], "failed");
    assert!(!expired.to_string().contains("ledger"));
}

const DEVICE: &str = "device:00000000-0000-0000-0000-0000000000e1";

/// The runner [`DEVICE`] names.
fn device() -> RunnerRef {
    DEVICE.parse().expect("a runner reference")
}
const TTL: Duration = Duration::from_secs(30);

/// A call for a runner nobody serves, started under a fresh lease of [`DEVICE`], then lost:
/// its lease expires and the server's sweeper makes it unknown. Returns (call, epoch).
async fn lost_device_call(server: &TestServer, db: &Datastore) -> (CallId, Epoch) {
    let call = NewCall {
        tool_name: "count".into(),
        arguments: json!({"label": "late"}),
        ..echo_call(db, DEVICE).await
    };
    let id = db
        .call_insert(&call)
        .await
        .unwrap()
        .value
        .expect("inserted")
        .id;
    let epoch = db
        .runner_lease_acquire(DEVICE.parse().unwrap(), Uuid::new_v4(), TTL)
        .await
        .unwrap()
        .value
        .expect("lease");
    assert_eq!(
        db.call_lease(device(), epoch, 10, None, &Value::Null)
            .await
            .unwrap()
            .expect("a live lease")
            .len(),
        1
    );
    assert!(db.call_start(id, device(), epoch).await.unwrap());
    expire_runner_lease(db.pool(), DEVICE).await;
    wait_for(&server.owner, "acme", &id.to_string(), |c| {
        c["state"] == "unknown"
    })
    .await;
    (id, epoch)
}

fn counted(text: &str) -> Completion {
    Completion::Succeeded {
        result: json!({"content": [{"type": "text", "text": text}], "isError": false}),
    }
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_valid_late_receipt_settles_an_unknown_call_and_a_fenced_one_is_refused(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let policy = json!({"capture_managed_tool_results": true});
    server
        .owner
        .send(
            Method::PUT,
            "/api/v1/workspaces/acme/capture-policy",
            Some(policy),
        )
        .await
        .ok();
    let db = Datastore::new(pool);
    let app = App::new(db.clone(), AppConfig::default());

    // The runner comes back under the epoch the call was started under, still its own.
    let (call, epoch) = lost_device_call(&server, &db).await;
    let recorded = app
        .call_record_completion(device(), call, epoch, counted("counted late"))
        .await
        .unwrap();
    assert_eq!(recorded, CompletionRecorded::Recorded);
    let view = wait_for(&server.owner, "acme", &call.to_string(), |c| {
        c["lineage"]["evidence_ids"]
            .as_array()
            .is_some_and(|e| !e.is_empty())
    })
    .await;
    assert_eq!(
        (view["state"].as_str(), view["resolution_outcome"].as_str()),
        (Some("resolved"), Some("succeeded"))
    );
    assert_eq!(view["error"]["code"], "runner_lost", "the attempt is kept");
    assert!(
        view["result"].is_null(),
        "the late result is an observation, not the attempt's result"
    );
    let observation = &view["observations"][0];
    assert_eq!(
        (
            observation["source"].as_str(),
            observation["reported"].as_str()
        ),
        (Some("late_receipt"), Some("applied"))
    );
    assert_eq!(
        (
            observation["runner"].as_str(),
            observation["epoch"].as_i64()
        ),
        (Some(DEVICE), Some(epoch.0))
    );
    assert_eq!(observation["output"]["content"][0]["text"], "counted late");
    let evidence = server
        .owner
        .get(&format!(
            "/api/v1/workspaces/acme/evidence/{}",
            view["lineage"]["evidence_ids"][0].as_str().unwrap()
        ))
        .await
        .ok();
    assert_eq!(
        (
            evidence["outcome"].as_str(),
            evidence["resolution_outcome"].as_str()
        ),
        (Some("resolved"), Some("succeeded"))
    );
    assert_eq!(evidence["lineage"]["observation_id"], observation["id"]);
    // Reported again, it changes nothing.
    let again = app
        .call_record_completion(device(), call, epoch, counted("counted late"))
        .await
        .unwrap();
    assert_eq!(again, CompletionRecorded::Superseded);

    // A tool error reported late settles `failed`; an unknown one is only an observation.
    let (errored, epoch) = lost_device_call(&server, &db).await;
    let tool_error = Completion::ToolError {
        result: json!({"content": [{"type": "text", "text": "quota"}], "isError": true}),
    };
    assert_eq!(
        app.call_record_completion(device(), errored, epoch, tool_error)
            .await
            .unwrap(),
        CompletionRecorded::Recorded
    );
    let view = server
        .owner
        .get(&format!("/api/v1/workspaces/acme/calls/{errored}"))
        .await
        .ok();
    assert_eq!(
        (
            view["resolution_outcome"].as_str(),
            view["observations"][0]["reported"].as_str()
        ),
        (Some("failed"), Some("failed"))
    );
    let (uncertain, epoch) = lost_device_call(&server, &db).await;
    let unknown = Completion::Unknown {
        error: CallError {
            code: "runner_restarted".into(),
            message: "stopped mid-call".into(),
        },
    };
    assert_eq!(
        app.call_record_completion(device(), uncertain, epoch, unknown)
            .await
            .unwrap(),
        CompletionRecorded::Superseded
    );
    let view = server
        .owner
        .get(&format!("/api/v1/workspaces/acme/calls/{uncertain}"))
        .await
        .ok();
    assert_eq!(
        (
            view["state"].as_str(),
            view["observations"][0]["reported"].as_str()
        ),
        (Some("unknown"), Some("unknown"))
    );

    // Once another process took the runner over, the old epoch's receipt is fenced: quarantined
    // by the runner, recorded nowhere.
    let (fenced, stale) = lost_device_call(&server, &db).await;
    let newer = db
        .runner_lease_acquire(DEVICE.parse().unwrap(), Uuid::new_v4(), TTL)
        .await
        .unwrap()
        .value
        .expect("lease");
    assert!(newer > stale);
    let recorded = app
        .call_record_completion(device(), fenced, stale, counted("too late"))
        .await
        .unwrap();
    assert_eq!(recorded, CompletionRecorded::Fenced);
    let view = server
        .owner
        .get(&format!("/api/v1/workspaces/acme/calls/{fenced}"))
        .await
        .ok();
    assert_eq!(view["state"], "unknown");
    assert!(view["observations"].is_null(), "{view}");
}
