//! Evidence that expires (a retention period per workspace, enforced by the sweeper) and
//! capture exclusions (per connection or tool: keep nothing, or drop named fields) applied
//! before anything is stored.

use crate::evidence::run_to_end;
use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::Duration;
use switchyard_server::app::{App, AppConfig};
use switchyard_server::db::Datastore;
use switchyard_server::sweeper::{SweeperConfig, sweep_once};
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(60);

/// The call once its evidence is published; the evidence id.
async fn published(server: &TestServer, ws: &str, call: &Value) -> (Value, String) {
    let id = call["id"].as_str().unwrap();
    let call = server
        .owner
        .wait_call_until(ws, id, WAIT, |c| {
            c["lineage"]["evidence_ids"]
                .as_array()
                .is_some_and(|ids| !ids.is_empty())
        })
        .await;
    let evidence = call["lineage"]["evidence_ids"][0]
        .as_str()
        .unwrap()
        .to_owned();
    (call, evidence)
}

async fn policy(client: &Client, ws: &str, body: Value) -> Answer {
    client
        .put(&format!("/api/v1/workspaces/{ws}/capture-policy"), body)
        .await
}

/// Makes an evidence record look `age` old.
async fn age_evidence(pool: &PgPool, evidence: &str, age: &str) {
    sqlx::query(
        "UPDATE evidence_records SET captured_at = now() - $2::interval, published_at = now() - $2::interval
         WHERE id = $1::uuid",
    )
    .bind(evidence)
    .bind(age)
    .execute(pool)
    .await
    .unwrap();
}

async fn evidence_rows(pool: &PgPool, evidence: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM evidence_records WHERE id = $1::uuid")
        .bind(evidence)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrations = "../../migrations")]
async fn expired_evidence_is_deleted_and_its_call_keeps_its_disposition(pool: PgPool) {
    let scratch = scratch_dir("expiry");
    let counter = scratch.path("count");
    let server = TestServer::start(pool.clone()).await;
    let ws = &setup_workspace(&server, "acme", &["--count-file", &counter])
        .await
        .ws;
    setup_workspace(&server, "other", &[]).await;

    // The period is the workspace admins' to set, within bounds, and 30 days unless set.
    let bob = server.member(ws, "bob", "member").await;
    policy(&bob, ws, json!({"evidence_retention_days": 2}))
        .await
        .refused(403, "forbidden");
    for bad in [
        json!({}),
        json!({"evidence_retention_days": 0}),
        json!({"evidence_retention_days": 3651}),
    ] {
        policy(&server.owner, ws, bad)
            .await
            .refused(400, "invalid_request");
    }
    let set = policy(
        &server.owner,
        "other",
        json!({"capture_managed_tool_results": true}),
    )
    .await
    .ok();
    assert_eq!(set["evidence_retention_days"], 30, "{set}");
    policy(
        &server.owner,
        ws,
        json!({"capture_managed_tool_results": true}),
    )
    .await
    .ok();
    let set = policy(&server.owner, ws, json!({"evidence_retention_days": 2}))
        .await
        .ok();
    assert_eq!(
        (
            &set["evidence_retention_days"],
            &set["capture_managed_tool_results"]
        ),
        (&json!(2), &json!(true)),
        "setting one keeps the other: {set}"
    );

    let old = run_to_end(&server, ws, "echo", json!({"text": "old"})).await;
    let recent = run_to_end(&server, ws, "echo", json!({"text": "recent"})).await;
    let elsewhere = run_to_end(&server, "other", "echo", json!({"text": "default"})).await;
    let (_, old_evidence) = published(&server, ws, &old).await;
    let (_, recent_evidence) = published(&server, ws, &recent).await;
    let (_, elsewhere_evidence) = published(&server, "other", &elsewhere).await;
    // An unknown call settled by a person who cited the old record.
    let lost = run_to_end(&server, ws, "count_then_crash", json!({"label": "x"})).await;
    assert_eq!(lost["state"], "unknown", "{lost}");
    let lost_id = lost["id"].as_str().unwrap();
    server
        .owner
        .post(
            &format!("/api/v1/workspaces/{ws}/calls/{lost_id}/resolve"),
            json!({"request_id": Uuid::new_v4(), "outcome": "succeeded",
                   "source_version_id": old_evidence, "explanation": "the ticket exists"}),
        )
        .await
        .ok();

    age_evidence(&pool, &old_evidence, "3 days").await;
    age_evidence(&pool, &recent_evidence, "36 hours").await;
    age_evidence(&pool, &elsewhere_evidence, "3 days").await;
    let app = App::new(Datastore::new(pool.clone()), AppConfig::default());
    sweep_once(&app, &SweeperConfig::default()).await.unwrap();

    assert_eq!(evidence_rows(&pool, &old_evidence).await, 0, "past 2 days");
    assert_eq!(
        evidence_rows(&pool, &recent_evidence).await,
        1,
        "within 2 days"
    );
    assert_eq!(
        evidence_rows(&pool, &elsewhere_evidence).await,
        1,
        "within the default 30 days"
    );
    server
        .owner
        .get(&format!("/api/v1/workspaces/{ws}/evidence/{old_evidence}"))
        .await
        .refused(404, "evidence_not_found");
    // The calls keep their disposition.
    let old_now = server
        .owner
        .get(&format!(
            "/api/v1/workspaces/{ws}/calls/{}",
            old["id"].as_str().unwrap()
        ))
        .await
        .ok();
    assert_eq!(old_now["state"], "succeeded", "{old_now}");
    assert_eq!(old_now["finished_at"], old["finished_at"]);
    assert_eq!(old_now["lineage"]["evidence_ids"], json!([]));
    let lost_now = server
        .owner
        .get(&format!("/api/v1/workspaces/{ws}/calls/{lost_id}"))
        .await
        .ok();
    assert_eq!(
        (
            &lost_now["state"],
            &lost_now["resolution_outcome"],
            &lost_now["resolution"]["outcome"]
        ),
        (&json!("resolved"), &json!("succeeded"), &json!("succeeded")),
        "{lost_now}"
    );
    assert!(
        lost_now["resolution"]["source_version_id"].is_null(),
        "{lost_now}"
    );
    server.stop().await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_excluded_field_never_reaches_the_database(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let ws = &setup_workspace(&server, "acme", &[]).await.ws;
    policy(
        &server.owner,
        ws,
        json!({"capture_managed_tool_results": true}),
    )
    .await
    .ok();
    let path = format!("/api/v1/workspaces/{ws}/connections/fixture/capture-exclusions");
    let bob = server.member(ws, "bob", "member").await;
    let rules = json!({"exclusions": [
        {"tool": "echo", "drop_argument_fields": ["text"], "drop_result_fields": ["text"]},
        {"tool": "fail", "capture_nothing": true}
    ]});
    bob.put(&path, rules.clone())
        .await
        .refused(403, "forbidden");
    for (bad, says) in [
        (
            json!({"exclusions": [{"tool": "echo", "capture_nothing": true, "drop_result_fields": ["a"]}]}),
            "one or the other",
        ),
        (
            json!({"exclusions": [{"tool": "echo"}]}),
            "excludes nothing",
        ),
        (
            json!({"exclusions": [{"capture_nothing": true}, {"capture_nothing": true}]}),
            "twice",
        ),
    ] {
        let message = server
            .owner
            .put(&path, bad)
            .await
            .refused(400, "invalid_request");
        assert!(message.contains(says), "{message}");
    }
    server.owner.put(&path, rules).await.ok();
    let shown = bob.get(&path).await.ok();
    assert_eq!(shown["exclusions"][0]["tool"], "echo", "{shown}");
    assert_eq!(shown["exclusions"][1]["capture_nothing"], true, "{shown}");

    let echoed = run_to_end(&server, ws, "echo", json!({"text": "excluded-value-9931"})).await;
    let failed = run_to_end(&server, ws, "fail", json!({"message": "kept-nowhere-4417"})).await;
    let (echoed, evidence) = published(&server, ws, &echoed).await;
    assert_eq!(echoed["state"], "succeeded", "{echoed}");
    assert_eq!(echoed["arguments"], json!({}), "{echoed}");
    assert_eq!(echoed["result"]["structuredContent"], json!({}), "{echoed}");
    let output = server
        .owner
        .get(&format!("/api/v1/workspaces/{ws}/evidence/{evidence}"))
        .await
        .ok();
    assert_eq!(output["output"]["structuredContent"], json!({}), "{output}");
    assert_eq!(failed["state"], "tool_error", "{failed}");
    assert!(
        failed["result"].is_null() && failed["arguments"].is_null(),
        "{failed}"
    );
    // The sweeper publishes what it captured within a second or so; `fail` captured nothing.
    let dump = dump_database(&pool).await;
    assert!(
        !dump.contains("excluded-value-9931"),
        "the echoed value is stored"
    );
    assert!(
        !dump.contains("kept-nowhere-4417"),
        "the failure's message is stored"
    );
    let failed_evidence: i64 =
        sqlx::query_scalar("SELECT count(*) FROM evidence_records WHERE call_id = $1::uuid")
            .bind(failed["id"].as_str().unwrap())
            .fetch_one(&pool)
            .await
            .unwrap();
    let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM pending_evidence")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((failed_evidence, pending), (0, 0));

    // Removing the exclusions keeps results again from then on.
    server
        .owner
        .put(&path, json!({"exclusions": []}))
        .await
        .ok();
    let kept = run_to_end(&server, ws, "echo", json!({"text": "kept-again"})).await;
    assert_eq!(result_text(&kept), "kept-again");
    assert_eq!(kept["arguments"], json!({"text": "kept-again"}));
    server.stop().await;
}
