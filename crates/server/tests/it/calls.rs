//! Running tools on the central runner and reading what happened.

use crate::harness::*;
use serde_json::json;
use sqlx::PgPool;
use std::time::Duration;
use switchyard_server::central::CentralConfig;

const WAIT: Duration = Duration::from_secs(60);

#[sqlx::test(migrations = "../../migrations")]
async fn echo_runs_centrally_and_its_result_is_retained(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let submitted = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{}/calls", setup.ws),
            call_body("echo", json!({"text": "hello, switchyard"})),
        )
        .await;
    assert_eq!(submitted.status.as_u16(), 201);
    let call = submitted.ok();
    // Queued, or — when the central runner's lease was waiting for it — leased at once.
    assert!(
        call["state"] == "queued" || call["state"] == "leased",
        "{call}"
    );
    assert_eq!(call["runner"], "central");

    let done = server
        .owner
        .wait_call(&setup.ws, call["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(result_text(&done), "hello, switchyard");
    assert_eq!(
        done["result"]["structuredContent"]["text"],
        "hello, switchyard"
    );
    for stamp in ["leased_at", "started_at", "finished_at"] {
        assert!(done[stamp].is_string(), "{stamp} missing: {done}");
    }
    let listed = server
        .owner
        .get(&format!("/api/v1/workspaces/{}/calls", setup.ws))
        .await
        .ok();
    assert_eq!(listed["calls"][0]["id"], call["id"]);
    server.stop().await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn tool_errors_and_crashes_are_told_apart(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);

    let failing = server
        .owner
        .post(
            &calls,
            call_body("fail", json!({"message": "disk on fire"})),
        )
        .await
        .ok();
    let failing = server
        .owner
        .wait_call(&setup.ws, failing["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(failing["state"], "tool_error");
    assert_eq!(failing["result"]["isError"], true);
    assert!(result_text(&failing).contains("disk on fire"));

    // The server died after the request was sent: the effect is uncertain, never "failed".
    let crashing = server
        .owner
        .post(&calls, call_body("crash", json!({})))
        .await
        .ok();
    let crashing = server
        .owner
        .wait_call(&setup.ws, crashing["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(crashing["state"], "unknown", "{crashing}");
    assert_eq!(crashing["error"]["code"], "transport_closed");
    assert!(crashing["result"].is_null());
}

#[sqlx::test(migrations = "../../migrations")]
async fn stderr_never_reaches_results_and_big_results_are_bounded(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);

    let noisy = server
        .owner
        .post(&calls, call_body("noisy", json!({"lines": 50})))
        .await
        .ok();
    let noisy = server
        .owner
        .wait_call(&setup.ws, noisy["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(noisy["state"], "succeeded");
    assert_eq!(result_text(&noisy), "quiet result");
    assert!(!noisy.to_string().contains("noise"));

    let big = server
        .owner
        .post(&calls, call_body("big", json!({"bytes": 3 * 1024 * 1024})))
        .await
        .ok();
    let big = server
        .owner
        .wait_call(&setup.ws, big["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(big["state"], "succeeded");
    assert_eq!(big["result_truncated"], true);
    assert!(big["result"].to_string().len() <= 1024 * 1024);
    assert!(result_text(&big).contains("[truncated by Switchyard"));

    let small = server
        .owner
        .post(&calls, call_body("big", json!({"bytes": 1000})))
        .await
        .ok();
    let small = server
        .owner
        .wait_call(&setup.ws, small["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(
        (result_text(&small).len(), &small["result_truncated"]),
        (1000, &json!(false))
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn many_calls_all_complete_exactly_once(pool: PgPool) {
    many_calls_complete_exactly_once(pool, CentralConfig::default().batch_max).await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn many_calls_all_complete_exactly_once_when_every_write_is_a_statement_of_its_own(
    pool: PgPool,
) {
    many_calls_complete_exactly_once(pool, 1).await;
}

/// Twenty calls submitted back to back, so that the central runner leases, starts and completes
/// several at once: each succeeds, and the fixture ran each once.
async fn many_calls_complete_exactly_once(pool: PgPool, batch_max: usize) {
    let scratch = scratch_dir("many");
    let counter = scratch.path("count");
    let server = TestServer::start_with(pool, |config| config.central.batch_max = batch_max).await;
    let setup = setup_workspace(&server, "acme", &["--count-file", &counter]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let mut ids = Vec::new();
    for i in 0..20 {
        let call = server
            .owner
            .post(
                &calls,
                call_body("count", json!({"label": format!("n{i}")})),
            )
            .await
            .ok();
        ids.push(call["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        assert_eq!(
            server.owner.wait_call(&setup.ws, id, WAIT).await["state"],
            "succeeded"
        );
    }
    assert_eq!(count_lines(&counter), 20);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_read_with_wait_ms_answers_when_the_call_settles(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);

    // A slow call: the read waits for it instead of answering `running` at once.
    let slow = server
        .owner
        .post(&calls, call_body("slow", json!({"seconds": 1})))
        .await
        .ok();
    let path = format!("{calls}/{}?wait_ms=20000", slow["id"].as_str().unwrap());
    let started = std::time::Instant::now();
    let done = server.owner.get(&path).await.ok();
    assert_eq!(done["state"], "succeeded", "{done}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the read waited {:?}",
        started.elapsed()
    );

    // A settled call answers at once; a call that does not settle in time answers as it is.
    let again = server.owner.get(&path).await.ok();
    assert_eq!(again["state"], "succeeded");
    let slower = server
        .owner
        .post(&calls, call_body("slow", json!({"seconds": 30})))
        .await
        .ok();
    let early = server
        .owner
        .get(&format!(
            "{calls}/{}?wait_ms=300",
            slower["id"].as_str().unwrap()
        ))
        .await
        .ok();
    assert!(
        ["queued", "leased", "running"].contains(&early["state"].as_str().unwrap()),
        "{early}"
    );
    server
        .owner
        .get(&format!(
            "{calls}/{}?wait_ms=soon",
            slower["id"].as_str().unwrap()
        ))
        .await
        .refused(400, "invalid_request");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_submission_with_wait_ms_answers_with_the_outcome(pool: PgPool) {
    let scratch = scratch_dir("submit-wait");
    let counter = scratch.path("count");
    let server = TestServer::start(pool).await;
    let setup = setup_workspace(&server, "acme", &["--count-file", &counter]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let waiting = format!("{calls}?wait_ms=20000");

    // A new call: one request answers with its outcome.
    let body = call_body("count", json!({"label": "once"}));
    let first = server.owner.post(&waiting, body.clone()).await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.body["state"], "succeeded", "{}", first.body);
    assert_eq!(result_text(&first.body), "counted");
    // Answered with the call as a read shows it.
    let id = first.body["id"].as_str().unwrap();
    assert_eq!(
        first.body,
        server.owner.get(&format!("{calls}/{id}")).await.ok()
    );
    // The same request again: the same call, settled, not run again.
    let again = server.owner.post(&waiting, body).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(again.body["id"], first.body["id"]);
    assert_eq!(again.body["state"], "succeeded");
    assert_eq!(count_lines(&counter), 1);

    // A call that does not settle within the wait is answered as it is then, and so is its
    // replay.
    let slow = call_body("slow", json!({"seconds": 30}));
    let early = server
        .owner
        .post(&format!("{calls}?wait_ms=300"), slow.clone())
        .await;
    assert_eq!(early.status, 201, "{}", early.body);
    assert!(
        ["queued", "leased", "running"].contains(&early.body["state"].as_str().unwrap()),
        "{}",
        early.body
    );
    let replayed = server
        .owner
        .post(&format!("{calls}?wait_ms=300"), slow)
        .await;
    assert_eq!(replayed.status, 200, "{}", replayed.body);
    assert_eq!(replayed.body["id"], early.body["id"]);

    // A wait that is not a number is refused before anything is stored: the same request
    // without it is then a new call.
    let body = call_body("count", json!({"label": "refused"}));
    server
        .owner
        .post(&format!("{calls}?wait_ms=soon"), body.clone())
        .await
        .refused(400, "invalid_request");
    assert_eq!(count_lines(&counter), 1);
    assert_eq!(server.owner.post(&calls, body).await.status, 201);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_submission_checks_its_token_before_anything_else(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let body = call_body("echo", json!({"text": "once"}));

    // No token, a token nobody holds — for a workspace that exists and one that does not.
    server
        .anonymous()
        .post(&calls, body.clone())
        .await
        .refused(401, "unauthenticated");
    let stranger = Client::at(&format!("http://{}", server.addr), "sy_not_a_token");
    stranger
        .post(&calls, body.clone())
        .await
        .refused(401, "unauthenticated");
    stranger
        .post("/api/v1/workspaces/nowhere/calls", body.clone())
        .await
        .refused(401, "unauthenticated");
    // A real user who is not a member: the workspace looks unknown.
    server
        .user("mallory")
        .await
        .post(&calls, body.clone())
        .await
        .refused(404, "workspace_not_found");
    assert_eq!(calls_stored(&pool).await, 0);

    // The owner's submission is stored once, and its replay answered from it.
    let call = server.owner.post(&calls, body.clone()).await.ok();
    let replay = server.owner.post(&calls, body.clone()).await;
    assert_eq!(replay.status, 200);
    assert_eq!(replay.ok()["id"], call["id"]);

    // Once the token is revoked, it submits nothing, not even a replay.
    sqlx::query("UPDATE api_tokens SET revoked_at = now()")
        .execute(&pool)
        .await
        .unwrap();
    server
        .owner
        .post(&calls, body.clone())
        .await
        .refused(401, "unauthenticated");
    server
        .owner
        .post(&calls, call_body("echo", json!({"text": "another"})))
        .await
        .refused(401, "unauthenticated");
    assert_eq!(calls_stored(&pool).await, 1);
}

/// A submission that names what an accepted one named is decided afresh: whatever changed since
/// — a grant, the profile's connections, the connector's approval, the tool's catalog or its
/// classification — is
/// refused as a first submission would be, and nothing is stored; once it is put back, the call
/// is accepted again.
#[sqlx::test(migrations = "../../migrations")]
async fn a_submission_like_an_accepted_one_is_refused_once_what_it_named_changed(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let calls = format!("/api/v1/workspaces/{}/calls", setup.ws);
    let submit = || {
        server
            .owner
            .post(&calls, call_body("echo", json!({"text": "again"})))
    };
    assert_eq!(submit().await.status, 201);

    // (the change, as SQL; the refusal it brings; the SQL that puts it back)
    let changes = [
        (
            "DELETE FROM profile_grants WHERE grant_kind = 'use'",
            (403, "forbidden"),
            "INSERT INTO profile_grants (profile_id, user_id, grant_kind)
             SELECT p.id, u.id, 'use' FROM profiles p, users u WHERE u.name = 'owner'",
        ),
        (
            "UPDATE tools SET available = false",
            (409, "tool_unavailable"),
            "UPDATE tools SET available = true",
        ),
        (
            "UPDATE tools SET side_effect = NULL, risk = NULL",
            (409, "tool_unclassified"),
            "UPDATE tools SET side_effect = true, risk = 'low'",
        ),
        (
            "UPDATE connectors SET approved_revision = NULL",
            (409, "connector_not_approved"),
            "UPDATE connectors SET approved_revision = revision",
        ),
    ];
    let mut stored = 1;
    for (change, (status, code), restore) in changes {
        sqlx::query(change).execute(&pool).await.unwrap();
        submit().await.refused(status, code);
        assert_eq!(calls_stored(&pool).await, stored, "after `{change}`");
        sqlx::query(restore).execute(&pool).await.unwrap();
        assert_eq!(submit().await.status, 201, "after `{restore}`");
        stored += 1;
        assert_eq!(calls_stored(&pool).await, stored);
    }

    // A connection taken out of the profile, through the same kind of change.
    let removed: Vec<(uuid::Uuid, uuid::Uuid)> =
        sqlx::query_as("DELETE FROM profile_connections RETURNING profile_id, connection_id")
            .fetch_all(&pool)
            .await
            .unwrap();
    submit().await.refused(422, "connection_not_in_profile");
    assert_eq!(calls_stored(&pool).await, stored);
    for (profile, connection) in removed {
        sqlx::query("INSERT INTO profile_connections (profile_id, connection_id) VALUES ($1, $2)")
            .bind(profile)
            .bind(connection)
            .execute(&pool)
            .await
            .unwrap();
    }
    assert_eq!(submit().await.status, 201);

    // A replay of an accepted call is answered from it; another payload under its request_id
    // is a conflict.
    let body = call_body("echo", json!({"text": "replayed"}));
    let call = server.owner.post(&calls, body.clone()).await.ok();
    let replay = server.owner.post(&calls, body.clone()).await;
    assert_eq!(replay.status, 200);
    assert_eq!(replay.ok()["id"], call["id"]);
    let mut other = body;
    other["arguments"] = json!({"text": "not what was sent"});
    server
        .owner
        .post(&calls, other)
        .await
        .refused(422, "mcp_request_conflict");
    server.stop().await;
}

/// Submissions that wait at the same moment are read by one statement: for each, it reads
/// what that submission's own submit read reads — whoever submits (an API token, valid or
/// not, a user or a device known before), whatever it names (by name or id, found or not) and
/// whether its request_id is taken — so a batch decides every submission as alone.
#[sqlx::test(migrations = "../../migrations")]
async fn a_batch_of_submit_reads_reads_for_each_submission_what_it_reads_alone(pool: PgPool) {
    use switchyard_protocol::{DeviceId, OperationId, RequestId, UserId};
    use switchyard_server::app::hash_token;
    use switchyard_server::db::{Datastore, Key, SubmitKeys, SubmitRead, Submitter, SubmitterKey};
    use uuid::Uuid;

    let server = TestServer::start(pool.clone()).await;
    let setup = setup_workspace(&server, "acme", &[]).await;
    let stranger = server.user("stranger").await;
    let stored = server
        .owner
        .post(
            &format!("/api/v1/workspaces/{}/calls", setup.ws),
            call_body("echo", json!({"text": "stored"})),
        )
        .await
        .ok();
    let stored_request: Uuid = stored["request_id"].as_str().unwrap().parse().unwrap();
    // Settled, so that what is stored under it stays as it is between the reads.
    server
        .owner
        .wait_call(&setup.ws, stored["id"].as_str().unwrap(), WAIT)
        .await;
    let (owner, workspace, profile, connection): (Uuid, Uuid, Uuid, Uuid) = sqlx::query_as(
        "SELECT u.id, w.id, p.id, c.id FROM users u, workspaces w, profiles p, connections c
         WHERE u.name = 'owner' AND w.name = 'acme' AND p.name = 'main' AND c.name = 'fixture'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    let (owner_hash, stranger_hash) = (
        hash_token(server.owner.token()),
        hash_token(stranger.token()),
    );
    let by_name = |submitter| SubmitKeys {
        workspace: Key::Name("acme"),
        submitter,
        profile: Key::Name("main"),
        connection: Key::Name("fixture"),
        environment: None,
        operation: None,
        request_id: RequestId::new(),
        tool_name: "echo",
    };
    let owner_token = SubmitterKey::UserToken(&owner_hash);
    let mut cases: Vec<(&str, SubmitKeys<'_>)> = vec![
        ("the owner's token", by_name(owner_token)),
        (
            "a request_id taken",
            SubmitKeys {
                request_id: RequestId(stored_request),
                ..by_name(owner_token)
            },
        ),
        (
            "by ids",
            SubmitKeys {
                workspace: Key::Id(workspace),
                profile: Key::Id(profile),
                connection: Key::Id(connection),
                ..by_name(owner_token)
            },
        ),
        (
            "the owner known before",
            by_name(SubmitterKey::Known(Submitter::User(UserId(owner)))),
        ),
        (
            "names not found",
            SubmitKeys {
                connection: Key::Name("missing"),
                environment: Some(Key::Name("nowhere")),
                operation: Some(OperationId::new()),
                tool_name: "nothing",
                ..by_name(owner_token)
            },
        ),
        (
            "a user not a member",
            by_name(SubmitterKey::UserToken(&stranger_hash)),
        ),
        (
            "an unknown token",
            by_name(SubmitterKey::UserToken(b"not a token's hash")),
        ),
        (
            "a device of no workspace",
            by_name(SubmitterKey::Known(Submitter::Device(DeviceId::new()))),
        ),
        (
            "an unknown workspace",
            SubmitKeys {
                workspace: Key::Name("nope"),
                ..by_name(owner_token)
            },
        ),
    ];
    // The same submission twice in one batch reads the same twice.
    cases.push(("the first again", cases[0].1.clone()));

    let db = Datastore::new(pool.clone());
    let reads: Vec<SubmitRead> = cases
        .iter()
        .map(|(_, keys)| SubmitRead::new(keys))
        .collect();
    let batch = db.call_submit_read_many(&reads).await.unwrap();
    assert_eq!(batch.len(), cases.len());
    for ((case, keys), read) in cases.iter().zip(&batch) {
        let alone = db.call_submit_read(&SubmitRead::new(keys)).await.unwrap();
        assert_eq!(format!("{read:?}"), format!("{alone:?}"), "{case}");
    }
    let found: Vec<bool> = batch.iter().map(Option::is_some).collect();
    assert_eq!(
        found,
        [
            true, true, true, true, true, false, false, false, false, true
        ]
    );
    let read = |i: usize| batch[i].as_ref().unwrap();
    assert_eq!(
        read(0).token_user.as_ref().map(|u| u.id),
        Some(UserId(owner))
    );
    assert!(read(3).token_user.is_none() && read(3).user_holds_use);
    assert_eq!(
        read(1).existing.as_ref().map(|c| c.request_id),
        Some(RequestId(stored_request))
    );
    assert!(read(0).existing.is_none());
    // What decides a submission reads the same by name and by id.
    let decides = |i: usize| {
        let read = read(i);
        format!(
            "{:?} {:?} {:?}",
            read.profile, read.connection, read.environment_id
        )
    };
    assert_eq!(decides(0), decides(2));
    let missing = read(4);
    assert!(missing.connection.is_none() && missing.environment_id.is_none());
    assert!(missing.operation.is_none() && missing.profile.is_some());
    server.stop().await;
}
