//! Central credential values sealed with the installation key, against the real server binary
//! (`serve --installation-key-file`) and an HTTP MCP server that demands the value as a bearer
//! token: a value set through the API reaches the server on discovery and calls, appears in
//! clear in no `pg_dump`, log line or answer; `admin rotate-key` re-seals it with a new key the
//! running server picks up; a sealed value copied to another row fails closed with a
//! credential error; revoking empties the connection's values.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use switchyard_server::app::{App, AppConfig};
use switchyard_server::db::Datastore;

const CANARY: &str = "canary-sealed-41c7d9";

/// Every row of the test database as `pg_dump --data-only` writes it.
fn pg_dump(pool: &PgPool) -> String {
    let url = database_url_of(pool);
    let url = url.split('?').next().unwrap_or_default();
    let output = Command::new("pg_dump")
        .args(["--data-only", "--no-owner", url])
        .output()
        .expect("run pg_dump");
    assert!(
        output.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("a text dump")
}

/// The key ids of the file at `path`, newest first.
fn key_ids(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|line| line.strip_prefix("switchyard-key v1 "))
        .map(|rest| rest.split_whitespace().next().unwrap().to_owned())
        .collect()
}

/// The key id each stored value of `connection` records.
async fn stored_key_ids(pool: &PgPool, connection: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT v.key_id FROM central_credential_values v JOIN connections c ON c.id = v.connection_id
         WHERE c.name = $1",
    )
    .bind(connection)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Submits `tool` on `connection` with `arguments` and waits for it to settle.
async fn call(client: &Client, connection: &str, tool: &str, arguments: Value) -> Value {
    let call = client
        .post(
            "/api/v1/workspaces/acme/calls",
            json!({"request_id": uuid::Uuid::new_v4(), "profile_id": "main",
                   "connection_id": connection, "tool_name": tool, "arguments": arguments}),
        )
        .await
        .ok();
    client
        .wait_call(
            "acme",
            call["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_sealed_value_is_used_rotated_and_never_in_clear(pool: PgPool) {
    let scratch = scratch_dir("sealed-credentials");
    let key_file = scratch.join("installation.key");

    // The MCP server refuses anyone without the bearer token; it learns it from its own
    // environment.
    let mut fixture = Command::new(fixture_bin())
        .args([
            "http",
            "--listen",
            "127.0.0.1:0",
            "--bearer-env",
            "FIXTURE_TOKEN",
        ])
        .env("FIXTURE_TOKEN", CANARY)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = read_announcement(&mut fixture, "listening on");
    let _fixture = ChildGuard(fixture);

    let app = App::new(Datastore::new(pool.clone()), AppConfig::default());
    let (_, token) = app.user_create("owner", true).await.unwrap();
    let log = scratch.path("server.log");
    let mut server = Command::new(env!("CARGO_BIN_EXE_switchyard-server"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--allow-endpoint",
            "127.0.0.1",
        ])
        .env("DATABASE_URL", database_url_of(&pool))
        .env("SWITCHYARD_INSTALLATION_KEY_FILE", &key_file)
        .env("SWITCHYARD_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let base = read_announcement(&mut server, "listening on");
    let server = ChildGuard(server);
    let client = Client::at(&base, &token);
    // The key file was made at start, private to the server's user.
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let first_key = key_ids(&key_file);
    assert_eq!(first_key.len(), 1, "{first_key:?}");

    client
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    client
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": url}),
        )
        .await
        .ok();
    let mut answers = String::new();
    for connection in ["remote", "copy"] {
        client
            .post(
                "/api/v1/workspaces/acme/connections",
                json!({"name": connection, "connector": "remote"}),
            )
            .await
            .ok();
        let set = client
            .put(
                &format!(
                    "/api/v1/workspaces/acme/connections/{connection}/credentials/Authorization"
                ),
                json!({"value": CANARY, "prefix": "Bearer "}),
            )
            .await
            .ok();
        assert_eq!(
            set["reference"],
            json!({"provider": "installation", "prefix": "Bearer "}),
            "{set}"
        );
        answers.push_str(&set.to_string());
        // The header reaches the server: it lists its tools only with the token.
        let discovery = client
            .post(
                &format!("/api/v1/workspaces/acme/connections/{connection}/discover"),
                json!({}),
            )
            .await
            .ok();
        assert!(
            discovery["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|tool| tool["name"] == "echo"),
            "{discovery}"
        );
        client.classify_all("acme", connection).await;
    }
    client
        .owner_profile("acme", "main", &["remote", "copy"])
        .await;

    let list = client
        .get("/api/v1/workspaces/acme/connections/remote/credentials")
        .await
        .ok();
    assert_eq!(
        list["credentials"],
        json!([{"destination": "header", "name": "Authorization", "state": "present",
                "reference": {"provider": "installation", "prefix": "Bearer "}}]),
        "{list}"
    );
    answers.push_str(&list.to_string());

    // A call is sent with it; the server echoing the token back is redacted.
    let echoed = call(&client, "remote", "echo", json!({"text": "sealed"})).await;
    assert_eq!(result_text(&echoed), "sealed", "{echoed}");
    let leak = call(&client, "remote", "env", json!({"name": "FIXTURE_TOKEN"})).await;
    assert_eq!(result_text(&leak), "[REDACTED]", "{leak}");
    answers.push_str(&leak.to_string());

    // Rotation: a new key seals every value, the old one leaves the file, the file stays
    // private, and the running server opens the re-sealed values.
    let rotate = Command::new(env!("CARGO_BIN_EXE_switchyard-server"))
        .args(["admin", "rotate-key", "--installation-key-file"])
        .arg(&key_file)
        .env("DATABASE_URL", database_url_of(&pool))
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&rotate.stdout);
    assert!(
        rotate.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&rotate.stderr)
    );
    let second_key = key_ids(&key_file);
    assert_eq!(second_key.len(), 1, "{second_key:?}");
    assert_ne!(second_key, first_key);
    assert!(
        printed.contains(&format!("re-sealed 2 value(s) with key {}", second_key[0])),
        "{printed}"
    );
    let mode = std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    for connection in ["remote", "copy"] {
        assert_eq!(stored_key_ids(&pool, connection).await, second_key);
    }
    let after = call(&client, "remote", "echo", json!({"text": "rotated"})).await;
    assert_eq!(result_text(&after), "rotated", "{after}");

    // A sealed value copied onto another row does not open there: the call fails before
    // anything is sent, with a credential error naming the destination.
    sqlx::query(
        "UPDATE central_credential_values AS copy
         SET nonce = original.nonce, ciphertext = original.ciphertext, key_id = original.key_id
         FROM central_credential_values original, connections c, connections o
         WHERE copy.connection_id = c.id AND c.name = 'copy'
           AND original.connection_id = o.id AND o.name = 'remote'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let copied = call(&client, "copy", "echo", json!({"text": "copied"})).await;
    assert_eq!(copied["state"], "failed", "{copied}");
    assert_eq!(
        copied["error"]["code"], "credential_unavailable",
        "{copied}"
    );
    let message = copied["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("Authorization") && message.contains("does not open"),
        "{message}"
    );
    let list = client
        .get("/api/v1/workspaces/acme/connections/copy/credentials")
        .await
        .ok();
    assert_eq!(list["credentials"][0]["state"], "unusable", "{list}");
    assert_eq!(
        list["credentials"][0]["code"], "credential_unavailable",
        "{list}"
    );

    // Revoking empties the connection's values and keeps the connection.
    let revoked = client
        .post(
            "/api/v1/workspaces/acme/connections/remote/credentials/revoke",
            json!({}),
        )
        .await
        .ok();
    assert_eq!(revoked["connection"], "remote", "{revoked}");
    assert_eq!(revoked["credentials"], json!([]), "{revoked}");
    assert!(stored_key_ids(&pool, "remote").await.is_empty());
    let refused = call(&client, "remote", "echo", json!({"text": "revoked"})).await;
    assert_ne!(refused["state"], "succeeded", "{refused}");

    // Retiring a connection forgets its values too.
    assert!(!stored_key_ids(&pool, "copy").await.is_empty());
    let retired = client
        .post("/api/v1/workspaces/acme/connections/copy/retire", json!({}))
        .await
        .ok();
    assert!(!retired["retired"].is_null(), "{retired}");
    assert!(stored_key_ids(&pool, "copy").await.is_empty());

    drop(server);
    assert!(
        !answers.contains(CANARY),
        "an answer held the value: {answers}"
    );
    let dump = pg_dump(&pool);
    assert!(
        dump.contains("central_credential_values"),
        "the dump should hold the sealed values"
    );
    assert!(
        !dump.contains(CANARY),
        "the value reached the database in clear"
    );
    let logs = std::fs::read_to_string(&log).unwrap();
    assert!(logs.contains("installation key loaded"), "{logs}");
    assert!(!logs.contains(CANARY), "the value reached the logs");
}
