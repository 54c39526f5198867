//! `PUT …/connections/{connection}/credentials/{name}`: a central connection's credential value
//! set through the API — sealed with the installation key into the database, used by the next
//! call, and in clear nowhere: not the answer, the audit log or the database.
//! `GET …/connections/{connection}/credentials` lists where each destination resolves and
//! whether its value is there, never the value.

use crate::devices::setup_device_placement;
use crate::evidence::run_to_end;
use crate::harness::*;
use serde_json::json;
use sqlx::PgPool;

pub const CANARY: &str = "canary-central-7b2f90";

/// As the owner: workspace `acme` with connection `fixture` of an approved stdio connector that
/// declares `API_TOKEN`, on the central runner, nothing bound yet.
pub async fn declared_connection(server: &TestServer) {
    let owner = &server.owner;
    owner
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "envfix", "transport": "stdio", "command": fixture_bin(),
                   "args": ["stdio"], "env": ["API_TOKEN"]}),
        )
        .await
        .ok();
    owner
        .post("/api/v1/connectors/envfix/approve", json!({}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "fixture", "connector": "envfix"}),
        )
        .await
        .ok();
}

const PATH: &str = "/api/v1/workspaces/acme/connections/fixture/credentials/API_TOKEN";
const LIST: &str = "/api/v1/workspaces/acme/connections/fixture/credentials";

#[sqlx::test(migrations = "../../migrations")]
async fn a_value_is_sealed_in_the_database_and_used_by_the_next_call(pool: PgPool) {
    let scratch = scratch_dir("credential-values");
    let bindings = scratch.join("central.mcp-bindings.json");
    let file = bindings.clone();
    let keys = installation_key(&scratch);
    let server = TestServer::start_with(pool.clone(), move |c| {
        c.app.credentials_file = Some(file);
        c.app.installation_key = Some(keys);
    })
    .await;
    declared_connection(&server).await;
    let owner = &server.owner;

    // Declared, nothing bound yet; values may be set here.
    let before = owner.get(LIST).await.ok();
    assert_eq!(before["values_settable"], true, "{before}");
    assert_eq!(
        before["credentials"],
        json!([{"destination": "env", "name": "API_TOKEN", "state": "unbound"}]),
        "{before}"
    );

    // Bad values are refused with the reason's code, and nothing is written.
    for value in ["zq9", "with\0nul"] {
        let message = owner
            .put(PATH, json!({"value": value}))
            .await
            .refused(422, "invalid_credentials");
        assert!(message.contains("credential_invalid"), "{message}");
    }
    assert!(!bindings.exists());

    let set = owner.put(PATH, json!({"value": CANARY})).await.ok();
    assert_eq!(set["destination"], "env", "{set}");
    assert_eq!(
        set["reference"],
        json!({"provider": "installation"}),
        "{set}"
    );
    assert!(!set.to_string().contains(CANARY), "{set}");
    // No file is written: the bindings file stays as it was, and there is no secrets file.
    assert!(!bindings.exists());
    assert!(!scratch.join("central.mcp-secrets.json").exists());
    let sealed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM central_credential_values WHERE name = 'API_TOKEN'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(sealed, 1);

    // Listed as bound to the server's sealed value and present; the value is nowhere in the
    // answer.
    let after = owner.get(LIST).await.ok();
    assert_eq!(
        after["credentials"],
        json!([{"destination": "env", "name": "API_TOKEN", "state": "present",
                "reference": {"provider": "installation"}}]),
        "{after}"
    );
    assert!(!after.to_string().contains(CANARY), "{after}");

    // The runner uses it: discovery starts the server with it, and a call sees it (redacted).
    owner.make_callable("acme", "fixture", "main").await;
    let call = run_to_end(&server, "acme", "env", json!({"name": "API_TOKEN"})).await;
    assert_eq!(call["state"], "succeeded", "{call}");
    assert_eq!(result_text(&call), "[REDACTED]", "{call}");

    // The audit entry names the destination and its provider only.
    let audit = owner.get("/api/v1/workspaces/acme/audit").await.ok();
    let entry = audit
        .as_array()
        .and_then(|entries| {
            entries
                .iter()
                .find(|entry| entry["action"] == "connection.credential_set")
        })
        .unwrap_or_else(|| panic!("no connection.credential_set entry: {audit}"))
        .clone();
    assert_eq!(
        entry["after"],
        json!({"destination": "env", "name": "API_TOKEN", "provider": "installation"}),
        "{entry}"
    );
    assert!(!audit.to_string().contains(CANARY));
    assert!(!dump_database(&pool).await.contains(CANARY));
}

#[sqlx::test(migrations = "../../migrations")]
async fn values_are_refused_by_a_server_without_an_installation_key(pool: PgPool) {
    let scratch = scratch_dir("credential-values-off");
    let file = scratch.join("central.mcp-bindings.json");
    let server =
        TestServer::start_with(pool.clone(), move |c| c.app.credentials_file = Some(file)).await;
    declared_connection(&server).await;
    let message = server
        .owner
        .put(PATH, json!({"value": CANARY}))
        .await
        .refused(409, "credential_values_disabled");
    assert!(message.contains("--installation-key-file"), "{message}");
    assert!(!scratch.join("central.mcp-secrets.json").exists());
    assert!(!dump_database(&pool).await.contains(CANARY));
}

#[sqlx::test(migrations = "../../migrations")]
async fn statuses_are_listed_for_admins_of_central_connections_only(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_device_placement(&server, &scratch_dir("credential-list").path("count")).await;
    let owner = &server.owner;

    // Central, bound to nothing, no bindings file: no destination; values not settable here.
    let list = owner.get(LIST).await.ok();
    assert_eq!(list["connection"], "fixture", "{list}");
    assert_eq!(list["values_settable"], false, "{list}");
    assert_eq!(list["credentials"], json!([]), "{list}");

    let message = owner
        .get("/api/v1/workspaces/acme/connections/local/credentials")
        .await
        .refused(409, "connection_not_central");
    assert!(message.contains("switchyard credential list"), "{message}");

    let member = server.member("acme", "bob", "member").await;
    member.get(LIST).await.refused(403, "forbidden");
}
