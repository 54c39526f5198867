//! The audit log: every change is an entry naming who, what and on what, with summaries that
//! never hold a secret; the database refuses to change or remove an entry; and `audit verify`
//! finds an entry edited, removed or reordered by someone who got past that — a database
//! superuser, who can turn the refusal off with `SET session_replication_role = replica`,
//! exactly as these tests do.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::Duration;
use switchyard_server::app::{App, AppConfig};
use switchyard_server::db::Datastore;
use switchyard_server::sweeper::{SweeperConfig, sweep_once};
use switchyard_testkit::poll::{Bound, Check};
use uuid::Uuid;

const AUDIT: &str = "/api/v1/workspaces/acme/audit";

/// The workspace's entries, oldest first.
async fn entries(client: &Client) -> Vec<Value> {
    let mut list = client.get(AUDIT).await.ok().as_array().unwrap().clone();
    list.reverse();
    list
}

async fn chain(pool: &PgPool, ws: &str) -> Uuid {
    sqlx::query_scalar("SELECT id FROM workspaces WHERE name = $1")
        .bind(ws)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Runs `sql` as a superuser with triggers off: how an attacker with the database's superuser
/// would tamper with the log.
async fn tamper(pool: &PgPool, statements: &[&'static str], chain: Uuid) {
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await
        .unwrap();
    for sql in statements {
        sqlx::query(*sql)
            .bind(chain)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
}

async fn verify(client: &Client) -> Value {
    client.get(&format!("{AUDIT}/verify")).await.ok()
}

#[sqlx::test(migrations = "../../migrations")]
async fn changes_are_logged_with_actor_object_and_summaries_but_no_secret(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let owner = &server.owner;
    server.user("bob").await;
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
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants/revoke",
            json!({"user": "bob", "use": true}),
        )
        .await
        .ok();
    // A connector whose environment carries a value, and a token: neither secret may appear.
    let secret_env = "s3cr3t-env-value-8841";
    owner
        .post(
            "/api/v1/connectors/import",
            json!({"mcpServers": {"leaky": {"command": "leaky-mcp", "env": {"LEAKY_API_KEY": secret_env}}}}),
        )
        .await
        .ok();
    let token = owner
        .post("/api/v1/tokens", json!({"name": "ci"}))
        .await
        .ok();
    let token_secret = token["secret"].as_str().unwrap().to_owned();

    let log = entries(owner).await;
    let actions: Vec<&str> = log.iter().map(|e| e["action"].as_str().unwrap()).collect();
    for expected in [
        "workspace.created",
        "connection.created",
        "profile.created",
        "grant.changed",
        "member.added",
    ] {
        assert!(
            actions.contains(&expected),
            "{expected} missing: {actions:?}"
        );
    }
    let connection = log
        .iter()
        .find(|e| e["action"] == "connection.created")
        .unwrap();
    assert_eq!(connection["actor"]["kind"], "user");
    assert_eq!(connection["actor"]["name"], "owner");
    assert_eq!(connection["object"]["kind"], "connection");
    assert_eq!(connection["object"]["name"], "fixture");
    assert_eq!(connection["after"]["connector"], "fixture-acme");
    assert!(connection["request_id"].is_string() && connection["trace_id"].is_string());
    let grants: Vec<&Value> = log
        .iter()
        .filter(|e| e["action"] == "grant.changed" && e["object"]["name"] == "bob on main")
        .collect();
    assert_eq!(grants.len(), 2, "{log:?}");
    assert_eq!(grants[0]["before"]["grants"], json!([]));
    assert_eq!(grants[0]["after"]["grants"], json!(["use"]));
    assert_eq!(grants[1]["after"]["grants"], json!([]));
    // Filters: by connection and by actor.
    let for_connection = owner.get(&format!("{AUDIT}?connection=fixture")).await.ok();
    assert!(
        for_connection
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["connection_id"] == connection["connection_id"]),
        "{for_connection}"
    );
    assert!(
        owner
            .get(&format!("{AUDIT}?actor=bob"))
            .await
            .ok()
            .as_array()
            .unwrap()
            .is_empty()
    );

    // The connector's entry is installation-wide and names the variable, not its value.
    let leaky: Value = sqlx::query_scalar(
        "SELECT after FROM audit_log WHERE action = 'connector.created' AND object_name = 'leaky'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(leaky["env"], json!(["LEAKY_API_KEY"]));
    let everything: Vec<String> = sqlx::query_scalar("SELECT a::text FROM audit_log a")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(everything.iter().any(|row| row.contains("token.created")));
    for row in &everything {
        assert!(
            !row.contains(secret_env),
            "an environment value in the log: {row}"
        );
        assert!(!row.contains(&token_secret), "a token in the log: {row}");
    }
    assert_eq!(verify(owner).await["broken"], Value::Null);
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_database_refuses_to_change_or_remove_an_entry(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    for sql in [
        "UPDATE audit_log SET actor_name = 'mallory'",
        "DELETE FROM audit_log",
        "TRUNCATE audit_log",
    ] {
        let error = sqlx::query(sql).execute(&pool).await.unwrap_err();
        assert!(error.to_string().contains("append-only"), "{sql}: {error}");
    }
    assert!(!entries(&server.owner).await.is_empty());
}

#[sqlx::test(migrations = "../../migrations")]
async fn verify_names_the_entry_edited_removed_or_reordered(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let owner = &server.owner;
    let ws = chain(&pool, "acme").await;
    let intact = verify(owner).await;
    assert_eq!(intact["broken"], Value::Null, "{intact}");
    let count = intact["entries"].as_u64().unwrap();
    assert!(count >= 4, "{intact}");
    sqlx::query("CREATE TABLE saved AS SELECT * FROM audit_log WHERE chain = $1")
        .bind(ws)
        .execute(&pool)
        .await
        .unwrap();
    let restore = "INSERT INTO audit_log SELECT * FROM saved WHERE chain = $1";
    let clear = "DELETE FROM audit_log WHERE chain = $1";

    // Edited: entry 2 names someone else.
    tamper(
        &pool,
        &["UPDATE audit_log SET actor_name = 'mallory' WHERE chain = $1 AND seq = 2"],
        ws,
    )
    .await;
    let found = verify(owner).await;
    assert_eq!(found["broken"]["kind"], "edited", "{found}");
    assert_eq!(found["broken"]["seq"], 2, "{found}");

    // Removed: entry 3 is gone.
    tamper(&pool, &[clear, restore], ws).await;
    assert_eq!(verify(owner).await["broken"], Value::Null);
    tamper(
        &pool,
        &["DELETE FROM audit_log WHERE chain = $1 AND seq = 3"],
        ws,
    )
    .await;
    let found = verify(owner).await;
    assert_eq!(found["broken"]["kind"], "removed", "{found}");
    assert_eq!(found["broken"]["seq"], 3, "{found}");

    // Reordered: entries 2 and 3 swap places.
    tamper(&pool, &[clear, restore], ws).await;
    tamper(
        &pool,
        &[
            "UPDATE audit_log SET seq = 1000000 WHERE chain = $1 AND seq = 2",
            "UPDATE audit_log SET seq = 2 WHERE chain = $1 AND seq = 3",
            "UPDATE audit_log SET seq = 3 WHERE chain = $1 AND seq = 1000000",
        ],
        ws,
    )
    .await;
    let found = verify(owner).await;
    assert_eq!(found["broken"]["kind"], "reordered", "{found}");
    assert_eq!(found["broken"]["seq"], 2, "{found}");

    // The last entry removed: the head still counts it.
    tamper(&pool, &[clear, restore], ws).await;
    tamper(
        &pool,
        &["DELETE FROM audit_log WHERE chain = $1
           AND seq = (SELECT max(seq) FROM audit_log WHERE chain = $1)"],
        ws,
    )
    .await;
    let found = verify(owner).await;
    assert_eq!(found["broken"]["kind"], "truncated", "{found}");
    assert_eq!(found["broken"]["seq"], count, "{found}");
}

/// The installation's own log holds what no workspace owns (connectors): its owner reads,
/// exports and verifies it; a workspace admin who is not an owner may not.
#[sqlx::test(migrations = "../../migrations")]
async fn the_installation_log_is_the_owners_and_verifies_like_a_workspaces(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let owner = &server.owner;
    let listed = owner.get("/api/v1/audit").await.ok();
    let actions: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["connector.approved", "connector.created"],
        "newest first, and only the installation's entries: {listed}"
    );
    assert_eq!(listed[1]["object"]["name"], "fixture-acme", "{listed}");
    assert_eq!(listed[1]["workspace"], Value::Null, "{listed}");
    let exported = owner.get("/api/v1/audit/export").await.ok();
    let lines: Vec<Value> = exported
        .as_str()
        .expect("JSON lines")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{exported}");
    assert_eq!(
        lines[0]["action"], "connector.created",
        "oldest first: {exported}"
    );
    let intact = owner.get("/api/v1/audit/verify").await.ok();
    assert_eq!(intact["entries"], 2, "{intact}");
    assert_eq!(intact["broken"], Value::Null, "{intact}");

    owner
        .get("/api/v1/audit?connection=fixture")
        .await
        .refused(400, "invalid_request");
    let ada = server.member("acme", "ada", "admin").await;
    ada.get("/api/v1/workspaces/acme/audit").await.ok();
    let message = ada.get("/api/v1/audit").await.refused(403, "forbidden");
    assert!(message.contains("installation owners"), "{message}");

    tamper(
        &pool,
        &["UPDATE audit_log SET object_name = 'other' WHERE chain = $1 AND seq = 1"],
        Uuid::nil(),
    )
    .await;
    let found = owner.get("/api/v1/audit/verify").await.ok();
    assert_eq!(found["broken"]["kind"], "edited", "{found}");
    assert_eq!(found["broken"]["seq"], 1, "{found}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn calls_submitted_and_ended_are_logged_once_by_the_sweeper(pool: PgPool) {
    let server = TestServer::start_with(pool.clone(), |config| {
        config.sweeper.audit_lag = Duration::from_millis(100);
    })
    .await;
    setup_workspace(&server, "acme", &[]).await;
    let owner = &server.owner;
    let call = owner
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("echo", json!({"text": "audited-argument-4412"})),
        )
        .await
        .ok();
    let id = call["id"].as_str().unwrap().to_owned();
    let ended = owner.wait_call("acme", &id, Duration::from_secs(60)).await;
    assert_eq!(ended["state"], "succeeded", "{ended}");

    let logged = Bound::new(Duration::from_secs(60), Duration::from_millis(50))
        .until(async || {
            let list = owner.get(&format!("{AUDIT}?connection=fixture")).await.ok();
            let actions: Vec<String> = list
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["call_id"] == id.as_str())
                .map(|e| e["action"].as_str().unwrap().to_owned())
                .collect();
            Ok(if actions.len() == 2 {
                Check::Done(list)
            } else {
                Check::NotYet(format!("call entries so far: {actions:?}"))
            })
        })
        .await
        .unwrap();
    let of_call: Vec<&Value> = logged
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["call_id"] == id.as_str())
        .collect();
    // Newest first: the end, then the submission.
    assert_eq!(of_call[0]["action"], "call.ended");
    assert_eq!(of_call[0]["after"]["state"], "succeeded");
    assert_eq!(of_call[1]["action"], "call.submitted");
    assert_eq!(of_call[1]["actor"]["name"], "owner");
    assert_eq!(of_call[1]["object"]["name"], "echo");
    assert_eq!(of_call[1]["request_id"], call["request_id"]);

    // More passes, from another replica too, write nothing again.
    let app = App::new(Datastore::new(pool.clone()), AppConfig::default());
    let config = SweeperConfig {
        audit_lag: Duration::ZERO,
        ..SweeperConfig::default()
    };
    sweep_once(&app, &config).await.unwrap();
    sweep_once(&app, &config).await.unwrap();
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE call_id = $1")
        .bind(Uuid::parse_str(&id).unwrap())
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(count, 2);
    let arguments: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log a WHERE a::text LIKE '%audited-argument%'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(arguments, 0, "a call's arguments are never logged");
    assert_eq!(verify(owner).await["broken"], Value::Null);
}
