//! Runner leases and fencing, against the real SQL: exactly one owner per runner, stale epochs
//! recorded nowhere, lease loss before the start ack requeues, after it makes the call unknown.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::Duration;
use switchyard_protocol::runner::{Completion, Epoch};
use switchyard_protocol::{CallId, RunnerRef};
use switchyard_server::app::{App, AppConfig, CompletionRecorded};
use switchyard_server::db::{Datastore, ExpiredLeases};
use uuid::Uuid;

const DEVICE: &str = "device:00000000-0000-0000-0000-0000000000d1";
const OTHER: &str = "device:00000000-0000-0000-0000-0000000000d2";
const TTL: Duration = Duration::from_secs(30);

/// A queued call for a runner nobody serves, so the test plays the runners itself.
async fn queued_device_call(server: &TestServer, db: &Datastore) -> CallId {
    setup_workspace(server, "acme", &[]).await;
    insert_echo_call(db, DEVICE).await
}

/// Inserts an echo call for `runner_ref` (see [`echo_call`]): the id of the queued call.
async fn insert_echo_call(db: &Datastore, runner_ref: &str) -> CallId {
    let call = echo_call(db, runner_ref).await;
    db.call_insert(&call)
        .await
        .unwrap()
        .value
        .expect("inserted")
        .id
}

/// The runner `reference` names.
fn runner(reference: &str) -> RunnerRef {
    reference.parse().expect("a runner reference")
}

/// Takes `runner`'s lease for a new holder: its epoch.
async fn take_lease(db: &Datastore, runner: &str) -> Epoch {
    db.runner_lease_acquire(self::runner(runner), Uuid::new_v4(), TTL)
        .await
        .unwrap()
        .value
        .expect("the lease is free")
}

async fn state_of(db: &Datastore, call: CallId) -> (String, Option<String>) {
    sqlx::query_as("SELECT state, error_code FROM calls WHERE id = $1")
        .bind(call)
        .fetch_one(db.pool())
        .await
        .unwrap()
}

fn echo_result() -> Completion {
    Completion::Succeeded {
        result: json!({"content": [{"type": "text", "text": "x"}], "isError": false}),
    }
}

#[sqlx::test(migrations = "../../migrations")]
async fn two_processes_racing_for_one_runner_get_one_lease(pool: PgPool) {
    let db = Datastore::new(pool);
    let (a, b) = tokio::join!(
        db.runner_lease_acquire(runner(DEVICE), Uuid::new_v4(), TTL),
        db.runner_lease_acquire(runner(DEVICE), Uuid::new_v4(), TTL)
    );
    let winners = [a.unwrap().value, b.unwrap().value]
        .into_iter()
        .flatten()
        .count();
    assert_eq!(winners, 1);
    // The loser keeps waiting while the lease is live.
    assert_eq!(
        db.runner_lease_acquire(runner(DEVICE), Uuid::new_v4(), TTL)
            .await
            .unwrap()
            .value,
        None
    );
    expire_runner_lease(db.pool(), DEVICE).await;
    assert_eq!(
        db.runner_lease_acquire(runner(DEVICE), Uuid::new_v4(), TTL)
            .await
            .unwrap()
            .value,
        Some(Epoch(2))
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn losing_the_lease_before_the_start_ack_requeues_and_fences_the_old_epoch(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let db = Datastore::new(pool.clone());
    let app = App::new(db.clone(), AppConfig::default());
    let call = queued_device_call(&server, &db).await;

    let (old, new) = (Uuid::new_v4(), Uuid::new_v4());
    let e1 = db
        .runner_lease_acquire(runner(DEVICE), old, TTL)
        .await
        .unwrap()
        .value
        .unwrap();
    assert_eq!(
        db.call_lease(runner(DEVICE), e1, 10, None, &Value::Null)
            .await
            .unwrap()
            .expect("a live lease")
            .len(),
        1
    );
    expire_runner_lease(db.pool(), DEVICE).await;
    // The old owner cannot start it any more: its lease is gone.
    assert!(!db.call_start(call, runner(DEVICE), e1).await.unwrap());
    // The sweeper (running in the server) puts it back in the queue: nothing was sent.
    wait_for_state(&db, call, "queued").await;

    let e2 = db
        .runner_lease_acquire(runner(DEVICE), new, TTL)
        .await
        .unwrap()
        .value
        .unwrap();
    assert!(e2 > e1);
    assert!(
        db.call_lease(runner(DEVICE), e1, 10, None, &Value::Null)
            .await
            .unwrap()
            .is_none(),
        "a stale epoch leases nothing"
    );
    assert_eq!(
        db.call_lease(runner(DEVICE), e2, 10, None, &Value::Null)
            .await
            .unwrap()
            .expect("a live lease")
            .len(),
        1
    );
    assert!(db.call_start(call, runner(DEVICE), e2).await.unwrap());
    // A start asked again under the same epoch (first answer lost) is acknowledged again.
    assert!(db.call_start(call, runner(DEVICE), e2).await.unwrap());
    // The old owner's completion is fenced and recorded nowhere.
    let stale = app
        .call_record_completion(runner(DEVICE), call, e1, echo_result())
        .await
        .unwrap();
    assert_eq!(stale, CompletionRecorded::Fenced);
    assert_eq!(state_of(&db, call).await.0, "running");
    let fresh = app
        .call_record_completion(runner(DEVICE), call, e2, echo_result())
        .await
        .unwrap();
    assert_eq!(fresh, CompletionRecorded::Recorded);
    assert_eq!(state_of(&db, call).await.0, "succeeded");
    // A repeated report changes nothing.
    let again = app
        .call_record_completion(runner(DEVICE), call, e2, echo_result())
        .await
        .unwrap();
    assert_eq!(again, CompletionRecorded::Superseded);
}

#[sqlx::test(migrations = "../../migrations")]
async fn losing_the_lease_after_the_start_ack_makes_the_call_unknown_and_never_reruns_it(
    pool: PgPool,
) {
    let server = TestServer::start(pool.clone()).await;
    let db = Datastore::new(pool.clone());
    let call = queued_device_call(&server, &db).await;

    let e1 = take_lease(&db, DEVICE).await;
    db.call_lease(runner(DEVICE), e1, 10, None, &Value::Null)
        .await
        .unwrap();
    assert!(db.call_start(call, runner(DEVICE), e1).await.unwrap());
    expire_runner_lease(db.pool(), DEVICE).await;
    wait_for_state(&db, call, "unknown").await;
    assert_eq!(state_of(&db, call).await.1.as_deref(), Some("runner_lost"));

    let e2 = take_lease(&db, DEVICE).await;
    assert!(
        db.call_lease(runner(DEVICE), e2, 10, None, &Value::Null)
            .await
            .unwrap()
            .expect("a live lease")
            .is_empty(),
        "an unknown call was leased again"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_recent_sweep_settles_the_leases_that_expired_lately_and_a_full_one_every_one(
    pool: PgPool,
) {
    let server = TestServer::start(pool.clone()).await;
    let db = Datastore::new(pool.clone());
    let (long_ago, lately) = (
        queued_device_call(&server, &db).await,
        insert_echo_call(&db, OTHER).await,
    );
    // The test is the only sweeper.
    server.stop().await;
    for reference in [DEVICE, OTHER] {
        let epoch = take_lease(&db, reference).await;
        let leased = db
            .call_lease(runner(reference), epoch, 10, None, &Value::Null)
            .await
            .unwrap()
            .expect("a live lease");
        assert_eq!(leased.len(), 1);
    }
    sqlx::query(
        "UPDATE runner_leases SET expires_at = CASE runner_ref
             WHEN $1 THEN now() - interval '2 minutes' ELSE now() - interval '1 second' END",
    )
    .bind(DEVICE)
    .execute(db.pool())
    .await
    .unwrap();

    assert_eq!(
        db.call_sweep_lost_leases(ExpiredLeases::Recent)
            .await
            .unwrap()
            .value,
        (1, 0)
    );
    assert_eq!(state_of(&db, lately).await.0, "queued");
    assert_eq!(state_of(&db, long_ago).await.0, "leased");
    assert_eq!(
        db.call_sweep_lost_leases(ExpiredLeases::All)
            .await
            .unwrap()
            .value,
        (1, 0)
    );
    assert_eq!(state_of(&db, long_ago).await.0, "queued");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_batch_of_start_acks_starts_exactly_the_calls_leased_under_its_epoch(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let db = Datastore::new(pool.clone());
    let first = queued_device_call(&server, &db).await;
    let second = insert_echo_call(&db, DEVICE).await;
    let e1 = take_lease(&db, DEVICE).await;
    // Leased after the lease: the third stays queued.
    assert_eq!(
        db.call_lease(runner(DEVICE), e1, 2, None, &Value::Null)
            .await
            .unwrap()
            .expect("a live lease")
            .len(),
        2
    );
    let queued = insert_echo_call(&db, DEVICE).await;
    let batch = [queued, second, first];
    let mut want = vec![first, second];
    want.sort();

    // A stale epoch starts nothing.
    assert!(
        db.call_start_many(&batch, runner(DEVICE), Epoch(e1.0 + 1))
            .await
            .unwrap()
            .is_empty()
    );
    let mut started = db
        .call_start_many(&batch, runner(DEVICE), e1)
        .await
        .unwrap();
    started.sort();
    assert_eq!(started, want);
    // Asked again (an answer lost), the same calls are started again; the queued one still not.
    let mut again = db
        .call_start_many(&batch, runner(DEVICE), e1)
        .await
        .unwrap();
    again.sort();
    assert_eq!(again, want);
    assert_eq!(state_of(&db, first).await.0, "running");
    assert_eq!(state_of(&db, second).await.0, "running");
    assert_eq!(state_of(&db, queued).await.0, "queued");
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_held_calls_in_flight_are_the_leased_and_running_ones(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let db = Datastore::new(pool.clone());
    let mut calls = vec![queued_device_call(&server, &db).await];
    for _ in 0..2 {
        calls.push(insert_echo_call(&db, DEVICE).await);
    }
    let epoch = take_lease(&db, DEVICE).await;
    let taken = db
        .call_lease(runner(DEVICE), epoch, 3, None, &Value::Null)
        .await
        .unwrap()
        .expect("a live lease");
    assert_eq!(taken.len(), 3);
    let [leased, running, failed] = [calls[0], calls[1], calls[2]];
    assert!(db.call_start(running, runner(DEVICE), epoch).await.unwrap());
    assert!(
        db.call_fail_leased(failed, epoch, "test_failure", "failed by the test")
            .await
            .unwrap()
    );
    let queued = insert_echo_call(&db, DEVICE).await;
    let never_stored = CallId::new();

    let mut in_flight = db
        .call_in_flight_among(&[queued, failed, running, never_stored, leased])
        .await
        .unwrap();
    in_flight.sort();
    let mut want = vec![leased, running];
    want.sort();
    assert_eq!(in_flight, want);
    assert_eq!(state_of(&db, failed).await.0, "failed");
}

#[sqlx::test(migrations = "../../migrations")]
async fn two_replicas_share_one_central_runner(pool: PgPool) {
    let scratch = scratch_dir("replicas");
    let counter = scratch.path("count");
    let first = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&first, "acme", &["--count-file", &counter]).await;
    let second = TestServer::replica(&first).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let mut ids = Vec::new();
    for (i, server) in [&first, &second].into_iter().cycle().take(10).enumerate() {
        let call = server
            .owner
            .post(&calls, call_body("count", json!({"label": i.to_string()})))
            .await
            .ok();
        ids.push(call["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        assert_eq!(
            second
                .owner
                .wait_call(&setup.ws, id, Duration::from_secs(60))
                .await["state"],
            "succeeded"
        );
    }
    assert_eq!(count_lines(&counter), 10);
    let leases: i64 =
        sqlx::query_scalar("SELECT count(*) FROM runner_leases WHERE runner_ref = 'central'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(leases, 1);

    // Stopping the first replica releases its lease (if it held it); the second carries on.
    first.stop().await;
    let call = second
        .owner
        .post(&calls, call_body("count", json!({"label": "after"})))
        .await
        .ok();
    let done = second
        .owner
        .wait_call(
            &setup.ws,
            call["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(done["state"], "succeeded");
    assert_eq!(count_lines(&counter), 11);
}

/// Polls `check` until it holds (`Ok`); after 30 s fails with what it last saw (`Err`).
async fn wait_until(mut check: impl AsyncFnMut() -> Result<(), String>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match check().await {
            Ok(()) => return,
            Err(seen) => assert!(std::time::Instant::now() < deadline, "{seen}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_for_state(db: &Datastore, call: CallId, want: &str) {
    wait_until(async || {
        let (state, _) = state_of(db, call).await;
        if state == want {
            Ok(())
        } else {
            Err(format!("call is {state}, wanted {want}"))
        }
    })
    .await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_central_call_whose_lease_answer_was_lost_is_queued_again_and_runs(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let db = Datastore::new(pool);
    let call = queued_device_call(&server, &db).await;
    let started = std::time::Instant::now();
    let epoch = loop {
        let epoch: Option<i64> =
            sqlx::query_scalar("SELECT epoch FROM runner_leases WHERE runner_ref = 'central'")
                .fetch_optional(db.pool())
                .await
                .unwrap();
        if let Some(epoch) = epoch {
            break epoch;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the central runner took no lease"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The database leased the call to the central runner, but the answer never reached it
    // (the connection broke after the commit): nobody holds it.
    sqlx::query("UPDATE calls SET runner_ref = 'central', state = 'leased', lease_epoch = $2, leased_at = now() - interval '1 hour' WHERE id = $1")
        .bind(call)
        .bind(epoch)
        .execute(db.pool())
        .await
        .unwrap();
    // Nothing here saw an answer fail, so the heartbeat's periodic settle (every sixth beat)
    // puts it back in the queue, and it runs.
    let done = server
        .owner
        .wait_call("acme", &call.to_string(), Duration::from_secs(60))
        .await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["runner"], "central");
}

/// A submission that began before a call the central runner already took and committed after
/// it (its insert waited on a lock) is still leased and run: the lease scans the queue from the
/// newest call it took, and the late call's announcement lowers that floor again.
#[sqlx::test(migrations = "../../migrations")]
async fn a_call_committed_after_a_newer_one_was_leased_still_runs(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let db = Datastore::new(pool.clone());
    let late = echo_call(&db, "central").await;

    // An uncommitted call with the late call's request_id: the late insert waits for it.
    let mut blocker = pool.begin().await.unwrap();
    sqlx::query(
        "INSERT INTO calls (id, workspace_id, request_id, payload_digest, profile_id, connection_id,
             connection_revision, environment_id, tool_name, timeout_seconds, state, runner_ref, created_by)
         VALUES ($1, $2, $3, $4, $5, $6, 1, $7, 'echo', 30, 'queued', 'nobody', $8)",
    )
    .bind(Uuid::now_v7())
    .bind(late.workspace_id)
    .bind(late.request_id)
    .bind(&late.payload_digest)
    .bind(late.profile_id)
    .bind(late.connection_id)
    .bind(late.environment_id)
    .bind(late.created_by)
    .execute(&mut *blocker)
    .await
    .unwrap();
    // Inserted through an app of its own: the server's runner hears of each new call as it
    // would from another replica.
    let app = App::new(db.clone(), AppConfig::default());
    let late_insert = tokio::spawn({
        let (db, app) = (db.clone(), app.clone());
        async move { app.sent(db.call_insert(&late).await.unwrap()) }
    });
    wait_for_a_lock_wait(db.pool(), &[]).await;

    let newer = app
        .sent(
            db.call_insert(&echo_call(&db, "central").await)
                .await
                .unwrap(),
        )
        .expect("inserted");
    wait_for_state(&db, newer.id, "succeeded").await;

    blocker.rollback().await.unwrap();
    let late = late_insert
        .await
        .unwrap()
        .expect("inserted once the blocker is gone");
    assert!(
        late.created_at < newer.created_at,
        "the late call was submitted first"
    );
    wait_for_state(&db, late.id, "succeeded").await;
}
