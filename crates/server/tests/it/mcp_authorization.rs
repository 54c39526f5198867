//! Why an `/mcp` connection is unavailable, as the connection records it: a discovery that
//! failed records its kind from the runner's typed error — a refused credential needs
//! authorization, anything else is unreachable, whatever the error's words say — a call
//! refused for its credential marks the connection too, and a discovery or a call that
//! succeeds clears the mark. What an agent then gets follows from that fact (`auth_failure`).

use crate::harness::*;
use crate::mcp_agents::{agent_in_acme, call, connect, notice_of, text};
use serde_json::{Value, json};
use sqlx::PgPool;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

/// The token the central secrets file holds for `remote`.
const TOKEN: &str = "remote-token-7d31c0";

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
}

/// An HTTP fixture on `port`, demanding `bearer` as its bearer token when given.
fn fixture_on(port: u16, bearer: Option<&str>) -> ChildGuard {
    let listen = format!("127.0.0.1:{port}");
    let mut command = std::process::Command::new(fixture_bin());
    command.args(["http", "--listen", listen.as_str()]);
    if let Some(bearer) = bearer {
        command
            .args(["--bearer-env", "FIXTURE_TOKEN"])
            .env("FIXTURE_TOKEN", bearer);
    }
    let mut fixture = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the fixture starts");
    read_announcement(&mut fixture, "listening on");
    ChildGuard(fixture)
}

/// As the owner: connector and connection `remote` at `url` (placed with `credentials` when
/// given, else discovered), its tools classified, and profile `remote-use` over it with Use for
/// the owner and agent `bot`.
async fn remote_connection(server: &TestServer, url: &str, credentials: Option<Value>) {
    let owner = &server.owner;
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": url}),
        )
        .await
        .ok();
    let mut connection = json!({"name": "remote", "connector": "remote"});
    if let Some(credentials) = credentials {
        // Placed with credentials, it is discovered in the same handshake.
        connection["credentials"] = credentials;
    }
    owner
        .post("/api/v1/workspaces/acme/connections", connection.clone())
        .await
        .ok();
    if connection.get("credentials").is_none() {
        discover(server).await.ok();
    }
    owner.classify_all("acme", "remote").await;
    owner.owner_profile("acme", "remote-use", &["remote"]).await;
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/remote-use/grants",
            json!({"agent": "bot", "use": true}),
        )
        .await
        .ok();
}

async fn discover(server: &TestServer) -> Answer {
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/connections/remote/discover",
            json!({}),
        )
        .await
}

/// The connections `agent tools` says agent `bot` cannot use, and why.
async fn unavailable(server: &TestServer) -> Value {
    server
        .owner
        .get("/api/v1/workspaces/acme/agents/bot/tools")
        .await
        .ok()["unavailable"]
        .clone()
}

fn remote_needs(reason: &str) -> Value {
    json!([{"connection": "remote", "reason": reason}])
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_failed_discovery_is_unavailable_by_its_kind_not_by_its_words(pool: PgPool) {
    let server = TestServer::start(pool).await;
    agent_in_acme(&server).await;
    let port = free_port();
    // The URL carries the words a guess from the error's text would look for.
    let url = format!("http://127.0.0.1:{port}/mcp?credential=unauthorized");
    let open = fixture_on(port, None);
    remote_connection(&server, &url, None).await;
    assert_eq!(unavailable(&server).await, json!([]));

    // Nothing answers: unreachable, although the error names a credential and `unauthorized`.
    drop(open);
    discover(&server).await.refused(502, "discovery_failed");
    let connection = server
        .owner
        .get("/api/v1/workspaces/acme/connections/remote")
        .await
        .ok();
    let error = connection["last_discovery_error"].as_str().unwrap();
    assert!(
        error.contains("credential=unauthorized"),
        "the error does not quote the URL, so this case proves nothing: {error}"
    );
    assert_eq!(unavailable(&server).await, remote_needs("unreachable"));

    // Its server refuses the credential it gets (none): needs authorization.
    let locked = fixture_on(port, Some("a-token-switchyard-does-not-hold"));
    discover(&server).await.refused(502, "discovery_failed");
    assert_eq!(
        unavailable(&server).await,
        remote_needs("needs_authorization")
    );

    // A discovery that succeeds clears it.
    drop(locked);
    let _open = fixture_on(port, None);
    discover(&server).await.ok();
    assert_eq!(unavailable(&server).await, json!([]));
}

/// Writes the central secrets file: `remote`'s token, or nothing.
fn write_secrets(path: &std::path::Path, token: Option<&str>) {
    let secrets = match token {
        Some(token) => json!({"remote": token}),
        None => json!({}),
    };
    std::fs::write(path, secrets.to_string()).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_call_refused_for_its_credential_marks_the_connection_until_one_succeeds(pool: PgPool) {
    let scratch = scratch_dir("mcp-authorization");
    let bindings = scratch.join("central.mcp-bindings.json");
    let secrets = scratch.join("central.mcp-secrets.json");
    write_secrets(&secrets, Some(TOKEN));
    std::fs::write(&bindings, json!({"bindings": {}}).to_string()).unwrap();
    std::fs::set_permissions(&bindings, std::fs::Permissions::from_mode(0o600)).unwrap();
    let file = bindings.clone();
    let server = TestServer::start_with(pool, move |c| c.app.credentials_file = Some(file)).await;
    let token = agent_in_acme(&server).await;
    let port = free_port();
    let fixture = fixture_on(port, Some(TOKEN));
    let bearer = json!({"headers": {"Authorization":
        {"provider": "secrets_file", "key": "remote", "prefix": "Bearer "}}});
    remote_connection(
        &server,
        &format!("http://127.0.0.1:{port}/mcp"),
        Some(bearer),
    )
    .await;
    let client = connect(&server, &token).await;
    let echo = json!({"text": "hello"});
    let answered = call(&client, "remote__echo", echo.clone()).await;
    assert_eq!(text(&answered), "hello", "{answered}");
    assert_eq!(unavailable(&server).await, json!([]));

    // The server stops accepting the credential: the call fails for it, certainly unsent, and
    // the connection needs authorization from then on.
    drop(fixture);
    let fixture = fixture_on(port, Some("a-token-switchyard-does-not-hold"));
    let refused = call(&client, "remote__echo", echo.clone()).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["structuredContent"]["error"]["code"], "credential_refused",
        "{refused}"
    );
    assert_eq!(refused["structuredContent"]["state"], "failed", "{refused}");
    assert_eq!(
        unavailable(&server).await,
        remote_needs("needs_authorization")
    );
    // `stop` (the default): the next call is answered so, and nothing is submitted.
    let calls_before = calls_stored(&server.pool).await;
    let stopped = call(&client, "remote__echo", echo.clone()).await;
    assert_eq!(stopped["isError"], true, "{stopped}");
    assert!(text(&stopped).contains("needs authorizing"), "{stopped}");
    assert_eq!(calls_stored(&server.pool).await, calls_before);

    // Accepted again: a person's call succeeds, which clears the mark for the agent too.
    drop(fixture);
    let _fixture = fixture_on(port, Some(TOKEN));
    let owner = &server.owner;
    let submitted = owner
        .post(
            "/api/v1/workspaces/acme/calls",
            json!({"request_id": uuid::Uuid::new_v4(), "profile_id": "remote-use",
                   "connection_id": "remote", "tool_name": "echo", "arguments": echo}),
        )
        .await
        .ok();
    let settled = owner
        .wait_call(
            "acme",
            submitted["id"].as_str().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(settled["state"], "succeeded", "{settled}");
    assert_eq!(unavailable(&server).await, json!([]));
    let answered = call(&client, "remote__echo", echo.clone()).await;
    assert_eq!(text(&answered), "hello", "{answered}");

    // A credential that cannot be resolved marks it as well; a discovery that succeeds clears it.
    write_secrets(&secrets, None);
    let missing = call(&client, "remote__echo", echo.clone()).await;
    assert_eq!(
        missing["structuredContent"]["error"]["code"], "credential_missing",
        "{missing}"
    );
    assert_eq!(
        unavailable(&server).await,
        remote_needs("needs_authorization")
    );
    write_secrets(&secrets, Some(TOKEN));
    discover(&server).await.ok();
    assert_eq!(unavailable(&server).await, json!([]));
    let answered = call(&client, "remote__echo", echo).await;
    assert_eq!(text(&answered), "hello", "{answered}");
    client.cancel().await.unwrap();
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_connection_marked_so_by_a_call_is_left_out_under_degrade(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let token = agent_in_acme(&server).await;
    let port = free_port();
    let open = fixture_on(port, None);
    remote_connection(&server, &format!("http://127.0.0.1:{port}/mcp"), None).await;
    server
        .owner
        .put(
            "/api/v1/workspaces/acme/agents/bot/connections/remote",
            json!({"auth_failure": "degrade"}),
        )
        .await
        .ok();
    let client = connect(&server, &token).await;
    assert!(
        crate::mcp_agents::names(&client)
            .await
            .contains(&"remote__echo".to_owned())
    );

    // Its server starts asking for a credential: the call that meets it fails, and from then
    // on the connection's tools are left out and it is announced unavailable.
    drop(open);
    let _locked = fixture_on(port, Some("a-token-switchyard-does-not-hold"));
    let refused = call(&client, "remote__echo", json!({"text": "x"})).await;
    assert_eq!(
        refused["structuredContent"]["error"]["code"], "credential_refused",
        "{refused}"
    );
    client.cancel().await.unwrap();
    let client = connect(&server, &token).await;
    let listed = crate::mcp_agents::names(&client).await;
    assert!(
        !listed.iter().any(|n| n.starts_with("remote__")),
        "{listed:?}"
    );
    assert!(listed.contains(&"fixture__echo".to_owned()), "{listed:?}");
    let remote = notice_of(&client, "remote");
    assert_eq!(remote["reason"], "needs_authorization", "{remote}");
    let instructions = client
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .expect("instructions");
    assert!(
        !instructions.contains("wrong bearer token"),
        "{instructions}"
    );
    client.cancel().await.unwrap();
}
