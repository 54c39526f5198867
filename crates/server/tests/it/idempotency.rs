//! request_id idempotency: retries return the same call, conflicting reuse is refused, and
//! concurrent duplicates create exactly one call and one execution.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::Duration;
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{CallId, CallState, ProfileId};
use switchyard_server::db::{Datastore, NewCall};
use uuid::Uuid;

#[sqlx::test(migrations = "../../migrations")]
async fn a_retry_returns_the_same_call_and_a_changed_payload_conflicts(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let body = call_body("echo", json!({"text": "once", "nested": {"b": 1, "a": 2}}));

    let first = server.owner.post(&calls, body.clone()).await;
    assert_eq!(first.status.as_u16(), 201);
    let first = first.ok();
    // The same payload with keys in another order and names swapped for ids is the same call.
    let profile_id = server
        .owner
        .get(&format!("/api/v1/workspaces/{}/profiles/main", setup.ws))
        .await
        .ok()["id"]
        .clone();
    let mut retry = body.clone();
    retry["profile_id"] = profile_id;
    retry["arguments"] = json!({"nested": {"a": 2, "b": 1}, "text": "once"});
    let again = server.owner.post(&calls, retry).await;
    assert_eq!(again.status.as_u16(), 200);
    assert_eq!(again.ok()["id"], first["id"]);

    let mut changed = body.clone();
    changed["arguments"] = json!({"text": "twice"});
    let message = server
        .owner
        .post(&calls, changed)
        .await
        .refused(422, "mcp_request_conflict");
    assert!(message.contains("fresh request_id"), "{message}");
    let count = calls_stored(&pool).await;
    assert_eq!(count, 1);
}

#[sqlx::test(migrations = "../../migrations")]
async fn fifty_concurrent_duplicates_create_one_call_and_one_execution(pool: PgPool) {
    let scratch = scratch_dir("dupes");
    let counter = scratch.path("count");
    let server = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&server, "acme", &["--count-file", &counter]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let body = call_body("count", json!({"label": "dupe"}));

    let submissions = (0..50).map(|_| {
        let client = server.owner.clone();
        let (calls, body) = (calls.clone(), body.clone());
        tokio::spawn(async move { client.post(&calls, body).await })
    });
    let mut ids = std::collections::HashSet::new();
    let mut created = 0;
    for answer in futures::future::join_all(submissions).await {
        let answer = answer.unwrap();
        if answer.status.as_u16() == 201 {
            created += 1;
        }
        ids.insert(answer.ok()["id"].as_str().unwrap().to_owned());
    }
    assert_eq!((ids.len(), created), (1, 1));
    let id = ids.into_iter().next().unwrap();
    assert_eq!(
        server
            .owner
            .wait_call(&setup.ws, &id, Duration::from_secs(60))
            .await["state"],
        "succeeded"
    );
    let rows = calls_stored(&pool).await;
    assert_eq!(rows, 1);
    assert_eq!(count_lines(&counter), 1, "the tool ran more than once");
    // The executed request carried the request_id to the MCP server.
    let line = std::fs::read_to_string(&counter).unwrap();
    assert!(
        line.contains(body["request_id"].as_str().unwrap()),
        "{line}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn concurrent_submissions_each_answer_their_own_call(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    // Submitted at once, so that the server inserts several of them together.
    let bodies: Vec<Value> = (0..48)
        .map(|i| call_body("echo", json!({"text": format!("call {i}")})))
        .collect();
    let submissions = bodies.iter().map(|body| {
        let client = server.owner.clone();
        let (calls, body) = (calls.clone(), body.clone());
        tokio::spawn(async move { client.post(&calls, body).await })
    });
    let mut ids = std::collections::HashSet::new();
    for (body, answer) in bodies
        .iter()
        .zip(futures::future::join_all(submissions).await)
    {
        let answer = answer.unwrap();
        assert_eq!(answer.status.as_u16(), 201);
        let call = answer.ok();
        assert_eq!(call["request_id"], body["request_id"]);
        assert_eq!(call["arguments"], body["arguments"]);
        ids.insert(call["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids.len(), bodies.len());
    for id in &ids {
        let call = server
            .owner
            .wait_call(&setup.ws, id, Duration::from_secs(60))
            .await;
        assert_eq!(call["state"], "succeeded");
        assert_eq!(
            result_text(&call),
            call["arguments"]["text"].as_str().unwrap()
        );
    }
}

/// A device runner nobody serves: the tests play its part.
const NOBODY: &str = "device:00000000-0000-0000-0000-00000000000b";

#[sqlx::test(migrations = "../../migrations")]
async fn a_batch_of_inserts_answers_each_call_inserted_or_its_request_id_taken(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let db = Datastore::new(pool.clone());
    let earlier = echo_call(&db, NOBODY).await;
    db.call_insert(&earlier)
        .await
        .unwrap()
        .value
        .expect("inserted");

    let fresh = echo_call(&db, NOBODY).await;
    let retry_of_earlier = NewCall {
        request_id: earlier.request_id,
        ..echo_call(&db, NOBODY).await
    };
    let first = echo_call(&db, NOBODY).await;
    let same_request_later = NewCall {
        request_id: first.request_id,
        arguments: json!({"text": "later"}),
        ..echo_call(&db, NOBODY).await
    };
    let batch = vec![fresh, retry_of_earlier, first, same_request_later];
    let answers = db.call_insert_many(&batch).await.unwrap();

    let inserted: Vec<Option<CallId>> = answers
        .value
        .iter()
        .map(|a| a.as_ref().map(|r| r.id))
        .collect();
    assert_eq!(
        inserted,
        vec![Some(batch[0].id), None, Some(batch[2].id), None]
    );
    assert_eq!(
        answers.wakeups.len(),
        2,
        "each call inserted wakes its runner: {:?}",
        answers.wakeups
    );
    let first_row = answers.value[2].as_ref().unwrap();
    assert_eq!(first_row.state, CallState::Queued);
    assert_eq!(first_row.request_id, batch[2].request_id);
    assert_eq!(
        first_row.arguments.as_ref().map(|a| &a.0),
        Some(&json!({"text": "x"})),
        "the first call of the batch under a request_id is the one stored"
    );
    let stored = calls_stored(&pool).await;
    assert_eq!(stored, 3, "the earlier call and the two fresh ones");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_batch_with_a_call_that_cannot_be_stored_stores_none_of_it(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let db = Datastore::new(pool.clone());
    let good = echo_call(&db, NOBODY).await;
    let unknown_profile = NewCall {
        profile_id: ProfileId::new(),
        ..echo_call(&db, NOBODY).await
    };
    let refused = db.call_insert_many(&[good, unknown_profile]).await;
    assert!(
        matches!(&refused, Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation()),
        "{refused:?}"
    );
    let stored = calls_stored(&pool).await;
    assert_eq!(stored, 0, "the server then inserts them one by one");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_call_handed_to_a_waiting_lease_is_inserted_leased_only_under_its_live_epoch(
    pool: PgPool,
) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let db = Datastore::new(pool.clone());
    let runner = "device:00000000-0000-0000-0000-00000000000c";
    let epoch = db
        .runner_lease_acquire(
            runner.parse().unwrap(),
            Uuid::new_v4(),
            Duration::from_secs(30),
        )
        .await
        .unwrap()
        .value
        .expect("the runner's lease");

    let given = echo_call(&db, runner).await;
    let handed = db
        .call_insert_handed(&given, epoch, &Value::Null)
        .await
        .unwrap();
    let row = handed.value.expect("inserted");
    assert_eq!(
        (row.call.state, row.call.lease_epoch),
        (CallState::Leased, Some(epoch))
    );
    assert!(handed.wakeups.is_empty(), "a handed call wakes nobody");
    assert_eq!(row.call.leased_at, Some(row.call.created_at));
    assert_eq!(row.leased.as_ref().map(|l| l.id), Some(given.id));

    let stale = echo_call(&db, runner).await;
    let queued = db
        .call_insert_handed(&stale, Epoch(epoch.0 + 1), &Value::Null)
        .await
        .unwrap();
    let queued_row = queued.value.as_ref().expect("inserted");
    assert_eq!(
        (queued_row.call.state, queued_row.leased.is_some()),
        (CallState::Queued, false),
        "under an epoch that is not the live lease it is queued, as any other"
    );
    assert_eq!(queued.wakeups.len(), 1, "and wakes its runner");
    let taken = NewCall {
        request_id: given.request_id,
        ..echo_call(&db, runner).await
    };
    let again = db
        .call_insert_handed(&taken, epoch, &Value::Null)
        .await
        .unwrap();
    assert!(again.value.is_none(), "a request_id taken inserts nothing");

    // The target it is recorded as dispatched to is the one a lease statement records.
    let looked: Vec<CallId> = db
        .call_lease(runner.parse().unwrap(), epoch, 8, None, &Value::Null)
        .await
        .unwrap()
        .expect("a live lease")
        .iter()
        .map(|row| row.id)
        .collect();
    assert_eq!(looked, vec![stale.id], "the queued call");
    let digests: Vec<Option<Vec<u8>>> =
        sqlx::query_scalar("SELECT target_digest FROM calls WHERE id = ANY($1) ORDER BY id")
            .bind(vec![given.id, stale.id])
            .fetch_all(&pool)
            .await
            .unwrap();
    assert!(digests[0].is_some(), "{digests:?}");
    assert_eq!(digests[0], digests[1]);
}
