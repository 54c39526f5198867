//! The runner channel (`GET /api/v1/runner/channel`), spoken line by line as a device would:
//! the upgrade and its refusals, a heartbeat answered while a lease waits, a lease woken by a
//! submission, errors under the request's id, a revoked device shut out at its next request,
//! leases that follow each other without missing a call submitted between them, and a call
//! started and reported on the channel.

use crate::devices::*;
use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use uuid::Uuid;

const CHANNEL: &str = "/api/v1/runner/channel";

/// An open channel, read and written as raw lines.
struct Lines {
    stream: BufReader<reqwest::Upgraded>,
}

impl Lines {
    async fn send(&mut self, request: Value) {
        self.send_raw(&request.to_string()).await;
    }

    async fn send_raw(&mut self, line: &str) {
        let stream = self.stream.get_mut();
        stream.write_all(line.as_bytes()).await.unwrap();
        stream.write_all(b"\n").await.unwrap();
        stream.flush().await.unwrap();
    }

    /// The next answer, which must be an error: its id, code and HTTP status.
    async fn error(&mut self) -> (u64, String, u64) {
        let answer = self.answer().await;
        let error = &answer["error"];
        match (
            answer["id"].as_u64(),
            error["code"].as_str(),
            error["status"].as_u64(),
        ) {
            (Some(id), Some(code), Some(status)) => (id, code.to_owned(), status),
            _ => panic!("not an error answer: {answer}"),
        }
    }

    /// The next answer, which must be lease `id`'s: the ids of the calls it leased.
    async fn leased(&mut self, id: u64) -> Vec<Value> {
        let answer = self.answer().await;
        assert_eq!(answer["id"], id, "{answer}");
        let calls = answer["lease"]["calls"].as_array();
        let calls = calls.unwrap_or_else(|| panic!("not a lease answer: {answer}"));
        calls.iter().map(|call| call["call_id"].clone()).collect()
    }

    /// The next answer line, within 30 s.
    async fn answer(&mut self) -> Value {
        let mut line = String::new();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            self.stream.read_line(&mut line),
        )
        .await
        .expect("an answer within 30 s")
        .expect("read an answer");
        assert!(read > 0, "the channel closed");
        serde_json::from_str(&line).expect("an answer is one JSON line")
    }
}

/// Asks `server` for a channel with `token` and `upgrade` as the `Upgrade` header.
async fn ask(server: &TestServer, token: &str, upgrade: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("http://{}{CHANNEL}", server.addr))
        .bearer_auth(token)
        .header("connection", "Upgrade")
        .header("upgrade", upgrade)
        .send()
        .await
        .expect("send the upgrade")
}

async fn open(server: &TestServer, device: &Device) -> Lines {
    open_with(server, &device.credential).await
}

async fn open_with(server: &TestServer, credential: &str) -> Lines {
    let response = ask(server, credential, "switchyard-runner-channel/1").await;
    assert_eq!(response.status().as_u16(), 101);
    assert_eq!(response.headers()["upgrade"], "switchyard-runner-channel/1");
    let stream = response.upgrade().await.expect("upgraded");
    Lines {
        stream: BufReader::new(stream),
    }
}

/// Submits a `count` call placed on the device; its view as the submission answers it.
async fn submit_count(server: &TestServer) -> Value {
    let body = device_call_body("count", json!({"label": "x", "text": "x"}));
    server
        .owner
        .post("/api/v1/workspaces/acme/calls", body)
        .await
        .ok()
}

/// The call as its owner reads it.
async fn call_view(server: &TestServer, id: &str) -> Value {
    let path = format!("/api/v1/workspaces/acme/calls/{id}");
    server.owner.get(&path).await.ok()
}

async fn error_code(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("an error body");
    (status, body["error"]["code"].as_str().unwrap().to_owned())
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_waits_for_work_and_heartbeats_on_one_channel(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device = setup_device_connection(&server, &scratch_dir("channel").path("count")).await;

    // Only with a device credential, and only with the upgrade asked for.
    let as_user = ask(&server, server.owner.token(), "switchyard-runner-channel/1").await;
    assert_eq!(
        error_code(as_user).await,
        (401, "unauthenticated".to_owned())
    );
    let not_upgraded = ask(&server, &device.credential, "websocket").await;
    assert_eq!(
        error_code(not_upgraded).await,
        (400, "invalid_request".to_owned())
    );

    // A credential no device holds is refused at its first request.
    let mut stranger = open_with(&server, "sy_dev_not-a-device").await;
    stranger
        .send(json!({"id": 1, "heartbeat": {"epoch": 1, "active": []}}))
        .await;
    assert_eq!(
        stranger.error().await,
        (1, "unauthenticated".to_owned(), 401)
    );

    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    let mut channel = open(&server, &device).await;

    // A heartbeat is answered while the lease waits, under its own id.
    channel
        .send(json!({"id": 1, "lease": {"epoch": epoch, "max": 8, "wait_ms": 20_000}}))
        .await;
    channel
        .send(json!({"id": 2, "heartbeat": {"epoch": epoch, "active": []}}))
        .await;
    assert_eq!(
        channel.answer().await,
        json!({"id": 2, "heartbeat": {"cancel": [], "release": []}})
    );

    // A submission wakes the waiting lease.
    let call = submit_count(&server).await;
    let leased = channel.answer().await;
    assert_eq!(leased["id"], 1, "{leased}");
    assert_eq!(leased["lease"]["calls"][0]["call_id"], call["id"]);
    assert_eq!(leased["lease"]["calls"][0]["epoch"], epoch);

    // Errors come back under the request's id, and the channel goes on.
    channel.send_raw(r#"{"id": 3, "lease": "soon"}"#).await;
    assert_eq!(
        channel.error().await,
        (3, "invalid_request".to_owned(), 400)
    );
    channel
        .send(json!({"id": 4, "lease": {"epoch": epoch + 1, "max": 8, "wait_ms": 1_000}}))
        .await;
    assert_eq!(channel.error().await, (4, "runner_fenced".to_owned(), 409));

    // A second lease replaces a waiting one, which is answered with no calls.
    channel
        .send(json!({"id": 5, "lease": {"epoch": epoch, "max": 8, "wait_ms": 20_000}}))
        .await;
    channel
        .send(json!({"id": 6, "lease": {"epoch": epoch, "max": 8, "wait_ms": 200}}))
        .await;
    assert_eq!(
        channel.answer().await,
        json!({"id": 5, "lease": {"calls": []}})
    );
    assert_eq!(
        channel.answer().await,
        json!({"id": 6, "lease": {"calls": []}})
    );

    // Revoked: the next request on the open channel is refused.
    let revoke = format!("/api/v1/workspaces/acme/devices/{}/revoke", device.id);
    server.owner.post(&revoke, json!({})).await.ok();
    channel
        .send(json!({"id": 7, "heartbeat": {"epoch": epoch, "active": [call["id"]]}}))
        .await;
    assert_eq!(channel.error().await, (7, "device_revoked".to_owned(), 401));
    channel
        .send(json!({"id": 8, "lease": {"epoch": epoch, "max": 8, "wait_ms": 1_000}}))
        .await;
    assert_eq!(channel.error().await.1, "device_revoked");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_lease_after_one_that_took_every_queued_call_still_sees_calls_submitted_between(
    pool: PgPool,
) {
    let server = TestServer::start(pool).await;
    let device = setup_device_connection(&server, &scratch_dir("channel").path("count")).await;
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    let mut channel = open(&server, &device).await;
    let lease = |id: u64| json!({"id": id, "lease": {"epoch": epoch, "max": 8, "wait_ms": 20_000}});

    // Queued before the first lease, which takes it (and everything else queued).
    let first = submit_count(&server).await;
    channel.send(lease(1)).await;
    assert_eq!(channel.leased(1).await, [first["id"].clone()]);

    // Submitted while no lease waits: the next lease, which waits for an announcement before
    // it looks, has heard it all the same and takes it (an empty answer after 20 s if not).
    let between = submit_count(&server).await;
    channel.send(lease(2)).await;
    assert_eq!(channel.leased(2).await, [between["id"].clone()]);

    // And a lease waiting after that one is woken by the next submission.
    channel.send(lease(3)).await;
    channel
        .send(
            json!({"id": 4, "heartbeat": {"epoch": epoch, "active": [first["id"], between["id"]]}}),
        )
        .await;
    assert_eq!(
        channel.answer().await["id"],
        4,
        "the heartbeat is answered while the lease waits"
    );
    let last = submit_count(&server).await;
    assert_eq!(channel.leased(3).await, [last["id"].clone()]);
    for call in [&first, &between, &last] {
        let id = call["id"].as_str().unwrap();
        assert_eq!(call_view(&server, id).await["state"], "leased", "{id}");
    }
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_starts_and_reports_a_call_on_its_channel(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device =
        setup_device_connection(&server, &scratch_dir("channel-report").path("count")).await;
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    let mut channel = open(&server, &device).await;
    let call = submit_count(&server).await;
    let id = call["id"].as_str().unwrap().to_owned();
    channel
        .send(json!({"id": 1, "lease": {"epoch": epoch, "max": 8, "wait_ms": 20_000}}))
        .await;
    assert_eq!(channel.answer().await["lease"]["calls"][0]["call_id"], id);

    // A start under a stale epoch is fenced under its id; under the lease's it proceeds, and
    // the call is running. Both are answered while the next lease waits.
    channel
        .send(json!({"id": 2, "lease": {"epoch": epoch, "max": 8, "wait_ms": 20_000}}))
        .await;
    channel
        .send(json!({"id": 3, "start": {"call": id, "epoch": epoch + 1}}))
        .await;
    assert_eq!(channel.error().await, (3, "runner_fenced".to_owned(), 409));
    channel
        .send(json!({"id": 4, "start": {"call": id, "epoch": epoch}}))
        .await;
    assert_eq!(
        channel.answer().await,
        json!({"id": 4, "start": {"decision": "proceed"}})
    );
    let view = call_view(&server, &id).await;
    assert_eq!(view["state"], "running", "{view}");

    // The receipt is recorded and settles the call; uploaded again, it is recorded once.
    let upload = json!({
        "id": 5,
        "complete": {
            "call": id,
            "receipt_id": Uuid::new_v4(),
            "epoch": epoch,
            "completion": {"outcome": "succeeded", "result": {"content": [{"type": "text", "text": "counted"}], "isError": false}},
        },
    });
    channel.send(upload.clone()).await;
    assert_eq!(
        channel.answer().await,
        json!({"id": 5, "complete": {"status": "recorded"}})
    );
    let mut again = upload;
    again["id"] = json!(6);
    channel.send(again).await;
    assert_eq!(
        channel.answer().await,
        json!({"id": 6, "complete": {"status": "recorded"}})
    );
    let view = call_view(&server, &id).await;
    assert_eq!(view["state"], "succeeded", "{view}");
    assert_eq!(view["result"]["content"][0]["text"], "counted", "{view}");

    // A call not leased to this device is not to be sent, and the lease still waits.
    channel
        .send(json!({"id": 7, "start": {"call": Uuid::now_v7(), "epoch": epoch}}))
        .await;
    let abandoned = channel.answer().await;
    assert_eq!(abandoned["id"], 7);
    assert_eq!(abandoned["start"]["decision"], "abandon", "{abandoned}");
    channel
        .send(json!({"id": 8, "heartbeat": {"epoch": epoch, "active": []}}))
        .await;
    assert_eq!(channel.answer().await["id"], 8);
}

/// A server with a device connection (scratch directory `name`) and the device's channel, on
/// which lease 1 took the one queued call: the next lease waits at once.
async fn drained_channel(pool: PgPool, name: &str) -> (TestServer, Device, i64, Lines) {
    let server = TestServer::start(pool).await;
    let device = setup_device_connection(&server, &scratch_dir(name).path("count")).await;
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    let mut channel = open(&server, &device).await;
    let first = submit_count(&server).await;
    channel
        .send(json!({"id": 1, "lease": {"epoch": epoch, "max": 8, "wait_ms": 20_000}}))
        .await;
    assert_eq!(channel.leased(1).await, [first["id"].clone()]);
    (server, device, epoch, channel)
}

/// Submits a `count` call on the device from a task of its own (its insert may wait).
fn submit_count_aside(server: &TestServer) -> tokio::task::JoinHandle<Value> {
    let owner = server.owner.clone();
    tokio::spawn(async move {
        let body = device_call_body("count", json!({"label": "x", "text": "x"}));
        owner.post("/api/v1/workspaces/acme/calls", body).await.ok()
    })
}

/// Sends lease `id` (of at most 8 calls, waiting up to `wait_ms`) and a heartbeat after it,
/// and reads the heartbeat's answer: the lease has been read and is being answered.
async fn lease_then_beat(channel: &mut Lines, epoch: i64, id: u64, wait_ms: u64) {
    channel
        .send(json!({"id": id, "lease": {"epoch": epoch, "max": 8, "wait_ms": wait_ms}}))
        .await;
    channel
        .send(json!({"id": id + 1, "heartbeat": {"epoch": epoch, "active": []}}))
        .await;
    assert_eq!(channel.answer().await["id"], id + 1);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_call_submitted_while_its_device_lease_waits_is_handed_to_it_already_leased(
    pool: PgPool,
) {
    let (server, _device, epoch, mut channel) = drained_channel(pool, "channel-handoff").await;

    // A lease after a drained one waits at once; a call submitted meanwhile is inserted
    // leased to it — the submission answers `leased`, leased in the insert's own transaction —
    // and is its answer. (Should the submission come before the lease is ready to take it,
    // the call is queued and leased by the lease's look instead; the next round tries again.)
    let mut handed = None;
    for round in 0..10 {
        let id = 10 * round + 2;
        lease_then_beat(&mut channel, epoch, id, 20_000).await;
        let call = submit_count(&server).await;
        assert_eq!(channel.leased(id).await, [call["id"].clone()], "{call}");
        if call["state"] == "leased" {
            handed = Some(call);
            break;
        }
        assert_eq!(call["state"], "queued", "{call}");
    }
    let handed = handed.expect("a submission handed to a waiting lease within 10 rounds");
    assert_eq!(handed["leased_at"], handed["created_at"], "{handed}");

    // It runs as any leased call: started, reported, succeeded.
    let id = handed["id"].as_str().unwrap().to_owned();
    channel
        .send(json!({"id": 100, "start": {"call": id, "epoch": epoch}}))
        .await;
    assert_eq!(
        channel.answer().await,
        json!({"id": 100, "start": {"decision": "proceed"}})
    );
    channel
        .send(json!({
            "id": 101,
            "complete": {
                "call": id,
                "receipt_id": Uuid::new_v4(),
                "epoch": epoch,
                "completion": {"outcome": "succeeded", "result": {"content": [{"type": "text", "text": "handed"}], "isError": false}},
            },
        }))
        .await;
    assert_eq!(
        channel.answer().await,
        json!({"id": 101, "complete": {"status": "recorded"}})
    );
    let view = call_view(&server, &id).await;
    assert_eq!(view["state"], "succeeded", "{view}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_call_for_a_waiting_lease_whose_epoch_was_taken_over_is_queued(pool: PgPool) {
    let (server, device, epoch, mut channel) =
        drained_channel(pool, "channel-handoff-fenced").await;
    lease_then_beat(&mut channel, epoch, 2, 20_000).await;

    // Another holder takes the runner over while the lease waits.
    sqlx::query("UPDATE runner_leases SET epoch = epoch + 1, holder = $2 WHERE runner_ref = $1")
        .bind(&device.runner)
        .bind(Uuid::new_v4())
        .execute(&server.pool)
        .await
        .unwrap();
    let call = submit_count(&server).await;
    assert_eq!(call["state"], "queued", "{call}");
    assert_eq!(channel.error().await, (2, "runner_fenced".to_owned(), 409));
    let id = call["id"].as_str().unwrap();
    assert_eq!(call_view(&server, id).await["state"], "queued");
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_handed_off_call_whose_lease_stopped_waiting_is_queued_again_and_leased_next(
    pool: PgPool,
) {
    let (server, device, epoch, mut channel) = drained_channel(pool, "channel-handoff-late").await;

    // The connection's row is locked, so the next call's insert (its foreign key) waits.
    let mut lock = server.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM connections WHERE runner_ref = $1 FOR UPDATE")
        .bind(&device.runner)
        .execute(&mut *lock)
        .await
        .unwrap();
    lease_then_beat(&mut channel, epoch, 2, 1_000).await;
    let submitted = submit_count_aside(&server);
    wait_for_a_lock_wait(&server.pool, &CALL_INSERTS).await;
    // The lease's wait ends while the insert waits: it answers with nothing.
    assert_eq!(channel.leased(2).await, Vec::<Value>::new());
    lock.rollback().await.unwrap();
    let call = submitted.await.unwrap();
    let id = call["id"].as_str().unwrap();
    // The call reached no lease: it is queued again, and the next lease takes it.
    assert_eq!(call_view(&server, id).await["state"], "queued");
    channel
        .send(json!({"id": 4, "lease": {"epoch": epoch, "max": 8, "wait_ms": 20_000}}))
        .await;
    assert_eq!(channel.leased(4).await, [call["id"].clone()]);
    assert_eq!(call_view(&server, id).await["state"], "leased");
}

/// The statements that insert a call: a handed-off one begins with its target, and the text of
/// any is longer than the activity view keeps.
const CALL_INSERTS: [&str; 2] = ["WITH target AS%", "%INSERT INTO calls%"];

#[sqlx::test(migrations = "../../migrations")]
async fn a_lease_whose_handed_call_is_on_its_way_takes_a_call_queued_meanwhile_beside_it(
    pool: PgPool,
) {
    let (server, device, epoch, mut channel) =
        drained_channel(pool, "channel-handoff-beside").await;
    // A second connection on the same device, under its own profile.
    let owner = &server.owner;
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "second", "connector": "counted", "runner": device.runner}),
        )
        .await
        .ok();
    accept_placement(owner, "acme", &device.id, "second").await;
    owner
        .post(
            "/api/v1/workspaces/acme/profiles",
            json!({"name": "dev2", "connections": ["second"]}),
        )
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/dev2/grants",
            json!({"user": "owner", "use": true}),
        )
        .await
        .ok();
    // Its runner discovers it (the test, under the channel's epoch).
    discover_classified_under(&server, &device, "second", epoch).await;

    // The first connection's row is locked: a call on it waits in its insert.
    let mut lock = server.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM connections WHERE name = 'local' FOR UPDATE")
        .execute(&mut *lock)
        .await
        .unwrap();
    lease_then_beat(&mut channel, epoch, 2, 20_000).await;
    let blocked = submit_count_aside(&server);
    wait_for_a_lock_wait(&server.pool, &CALL_INSERTS).await;
    // A call on the second connection, submitted meanwhile, is queued and announced; the
    // waiting lease looks for it beside the insert that is still on its way.
    let mut body = device_call_body("count", json!({"label": "y", "text": "y"}));
    body["profile_id"] = json!("dev2");
    body["connection_id"] = json!("second");
    let beside = server
        .owner
        .post("/api/v1/workspaces/acme/calls", body)
        .await
        .ok();
    let beside_id = beside["id"].as_str().unwrap().to_owned();
    // Leased while the other insert waits (the lease does not wait for it first).
    server
        .owner
        .wait_call_until(
            "acme",
            &beside_id,
            std::time::Duration::from_secs(20),
            |call| call["state"] == "leased",
        )
        .await;
    lock.rollback().await.unwrap();
    let handed = blocked.await.unwrap();

    // Both reach the runner once: together in the waiting lease's answer, or — had the
    // handed call come later than the lease could wait for it — that one in the next lease.
    let mut leased = channel.leased(2).await;
    assert!(leased.contains(&beside["id"]), "{leased:?}");
    if !leased.contains(&handed["id"]) {
        channel
            .send(json!({"id": 3, "lease": {"epoch": epoch, "max": 8, "wait_ms": 20_000}}))
            .await;
        leased.extend(channel.leased(3).await);
    }
    leased.sort_by_key(|id| id.to_string());
    let mut expected = vec![beside["id"].clone(), handed["id"].clone()];
    expected.sort_by_key(|id| id.to_string());
    assert_eq!(leased, expected);
    for id in [&beside_id, handed["id"].as_str().unwrap()] {
        assert_eq!(call_view(&server, id).await["state"], "leased", "{id}");
    }
}
