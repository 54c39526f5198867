//! `POST …/connections/{c}/diagnose`: the checks in order, and each failure class produced by
//! a real fault — a program that does not exist or cannot be executed, a process that never
//! answers or answers garbage, a server refusing the bound credential, a closed port, a TLS
//! handshake with a plain HTTP port, a page that is not MCP and an address the endpoint guard
//! refuses — while a healthy connection passes every check; a device's connection is checked
//! live by its device's runner, which reports its failure's class.

use crate::devices::{acquire_lease, run_discovery, setup_device_placement};
use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::os::unix::fs::PermissionsExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const TOKEN: &str = "diagnose-token-7f3b21";
const WRONG: &str = "wrong-token-value-9d4e";

/// Every check, in the order a diagnosis runs them.
const ORDER: [&str; 7] = [
    "enabled",
    "approved",
    "transport",
    "credentials",
    "catalog",
    "grants",
    "handshake",
];

/// Diagnoses connection `connection` of `acme` with the handshake bounded by `timeout_ms`.
async fn diagnose(owner: &Client, connection: &str, timeout_ms: u64) -> Value {
    owner
        .post(
            &format!("/api/v1/workspaces/acme/connections/{connection}/diagnose"),
            json!({"timeout_ms": timeout_ms}),
        )
        .await
        .ok()
}

/// The status and detail of check `name`, after checking every check is there in order.
#[track_caller]
fn check<'a>(diagnosis: &'a Value, name: &str) -> (&'a str, &'a str) {
    let checks = diagnosis["checks"].as_array().expect("checks");
    let order: Vec<&str> = checks
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(order, ORDER, "{diagnosis}");
    let found = checks.iter().find(|c| c["check"] == name).unwrap();
    (
        found["status"].as_str().unwrap(),
        found["detail"].as_str().unwrap(),
    )
}

/// Asserts the handshake failed with `class`, and so did the diagnosis.
#[track_caller]
fn failed_with(diagnosis: &Value, class: &str) {
    let (status, detail) = check(diagnosis, "handshake");
    assert_eq!(status, "failed", "{diagnosis}");
    assert!(detail.starts_with(class), "{detail}");
    assert_eq!(diagnosis["failure"], class, "{diagnosis}");
    assert_eq!(diagnosis["passed"], false, "{diagnosis}");
}

/// An approved stdio connector `name` running `command args` and its connection `name` in
/// `acme`, in profile `main`.
async fn stdio_connection(owner: &Client, name: &str, command: &str, args: &[&str]) {
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": name, "transport": "stdio", "command": command, "args": args}),
        )
        .await
        .ok();
    owner
        .post(&format!("/api/v1/connectors/{name}/approve"), json!({}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": name, "connector": name}),
        )
        .await
        .ok();
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_healthy_connection_passes_every_check(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;

    let diagnosis = diagnose(&server.owner, "fixture", 20_000).await;

    assert_eq!(diagnosis["passed"], true, "{diagnosis}");
    for name in ORDER {
        assert_eq!(check(&diagnosis, name).0, "passed", "{name}: {diagnosis}");
    }
    assert!(diagnosis["failure"].is_null(), "{diagnosis}");
    assert_eq!(diagnosis["live_check"], "central");
    assert!(
        check(&diagnosis, "grants").1.contains("profile `main`"),
        "{diagnosis}"
    );
    assert!(
        check(&diagnosis, "handshake").1.contains("tools"),
        "{diagnosis}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn stdio_faults_are_classified(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let owner = &server.owner;
    owner
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    let scratch = scratch_dir("diagnose-stdio");
    let not_executable = scratch.join("server.sh");
    std::fs::write(&not_executable, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o644)).unwrap();

    stdio_connection(
        owner,
        "missing",
        "/nonexistent/switchyard-no-such-server",
        &[],
    )
    .await;
    stdio_connection(owner, "unrunnable", not_executable.to_str().unwrap(), &[]).await;
    // Reads every request and never answers.
    stdio_connection(owner, "silent", "/bin/sh", &["-c", "cat > /dev/null"]).await;
    // Prints something that is not JSON-RPC, says why on stderr, and exits.
    stdio_connection(
        owner,
        "garbage",
        "/bin/sh",
        &[
            "-c",
            "echo 'hello, I am not an MCP server'; echo 'fatal: no config at /etc/tool.conf' >&2; exit 3",
        ],
    )
    .await;

    let missing = diagnose(owner, "missing", 5_000).await;
    failed_with(&missing, "executable_not_found");
    // Static checks still ran: approved, never discovered, in no profile.
    assert_eq!(check(&missing, "approved").0, "passed");
    assert_eq!(check(&missing, "catalog").0, "failed");
    assert_eq!(check(&missing, "grants").0, "failed");

    failed_with(&diagnose(owner, "unrunnable", 5_000).await, "spawn_failed");

    let started = std::time::Instant::now();
    let silent = diagnose(owner, "silent", 1_500).await;
    failed_with(&silent, "handshake_timeout");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "the time bound was not kept: {:?}",
        started.elapsed()
    );

    let garbage = diagnose(owner, "garbage", 10_000).await;
    failed_with(&garbage, "not_mcp");
    let tail = garbage["stderr_tail"].as_str().expect("a stderr tail");
    assert!(tail.contains("fatal: no config"), "{garbage}");

    // Nothing was recorded: diagnosing is read-only.
    let connection = owner
        .get("/api/v1/workspaces/acme/connections/garbage")
        .await
        .ok();
    assert!(connection["last_discovery_at"].is_null(), "{connection}");
}

/// A plain web server that answers every request with an HTML page: not MCP.
async fn html_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let page = "<html><body><h1>Welcome</h1></body></html>";
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/mcp")
}

/// A server whose central bindings file sits next to a secrets file holding `token` (0600).
async fn server_with_secrets(pool: PgPool, scratch: &Scratch) -> (TestServer, std::path::PathBuf) {
    let bindings = scratch.join("central.mcp-bindings.json");
    let secrets = scratch.join("central.mcp-secrets.json");
    std::fs::write(&secrets, json!({"token": TOKEN}).to_string()).unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    let file = bindings.clone();
    let server = TestServer::start_with(pool, move |c| c.app.credentials_file = Some(file)).await;
    (server, secrets)
}

/// An HTTP connector `name` added while `url` answered MCP, and its connection `name`.
async fn http_connection(owner: &Client, name: &str, url: &str, credentials: Option<Value>) {
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": name, "transport": "http", "url": url}),
        )
        .await
        .ok();
    let mut place = json!({"name": name, "connector": name});
    if let Some(credentials) = credentials {
        place["credentials"] = credentials;
    }
    owner
        .post("/api/v1/workspaces/acme/connections", place)
        .await
        .ok();
}

/// Points connector `name` at `url`, as when its endpoint moved after it was added (adding or
/// editing it there would be refused by the handshake).
async fn endpoint_moved(pool: &PgPool, name: &str, url: &str) {
    sqlx::query("UPDATE connectors SET url = $1 WHERE name = $2")
        .bind(url)
        .bind(name)
        .execute(pool)
        .await
        .unwrap();
}

#[sqlx::test(migrations = "../../migrations")]
async fn http_faults_are_classified(pool: PgPool) {
    let scratch = scratch_dir("diagnose-http");
    let (server, secrets) = server_with_secrets(pool.clone(), &scratch).await;
    let owner = &server.owner;
    owner
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    let (locked, _locked) = http_fixture(
        &["--bearer-env", "FIXTURE_TOKEN"],
        &[("FIXTURE_TOKEN", TOKEN)],
    );
    let bearer = json!({"headers": {"Authorization":
        {"provider": "secrets_file", "key": "token", "prefix": "Bearer "}}});
    http_connection(owner, "locked", &locked, Some(bearer)).await;
    let healthy = diagnose(owner, "locked", 10_000).await;
    assert_eq!(check(&healthy, "handshake").0, "passed", "{healthy}");
    assert_eq!(
        check(&healthy, "credentials"),
        ("passed", "header Authorization: present")
    );

    // The credential's value changes to one the server refuses: named, never shown.
    std::fs::write(&secrets, json!({"token": WRONG}).to_string()).unwrap();
    let refused = diagnose(owner, "locked", 10_000).await;
    failed_with(&refused, "auth_refused");
    assert_eq!(check(&refused, "credentials").0, "passed");
    assert!(!refused.to_string().contains(WRONG), "{refused}");
    assert!(!refused.to_string().contains(TOKEN), "{refused}");
    // And one the store does not hold: the credentials check fails and skips the handshake.
    std::fs::write(&secrets, json!({"other": TOKEN}).to_string()).unwrap();
    let missing = diagnose(owner, "locked", 10_000).await;
    let (status, detail) = check(&missing, "credentials");
    assert_eq!(status, "failed", "{missing}");
    assert!(detail.contains("Authorization"), "{detail}");
    assert_eq!(check(&missing, "handshake").0, "skipped", "{missing}");
    assert!(missing["failure"].is_null(), "{missing}");

    // A server that went away: its port is closed.
    let (gone, fixture) = http_fixture(&[], &[]);
    http_connection(owner, "gone", &gone, None).await;
    drop(fixture);
    failed_with(&diagnose(owner, "gone", 10_000).await, "unreachable");

    // TLS spoken to a plain HTTP port.
    let (plain, _plain) = http_fixture(&[], &[]);
    http_connection(owner, "tls", &plain, None).await;
    endpoint_moved(&pool, "tls", &plain.replacen("http://", "https://", 1)).await;
    failed_with(&diagnose(owner, "tls", 10_000).await, "tls_failed");

    // A web page, not an MCP server.
    http_connection(owner, "page", &plain, None).await;
    endpoint_moved(&pool, "page", &html_url().await).await;
    failed_with(&diagnose(owner, "page", 10_000).await, "not_mcp");

    // A cloud metadata address: the guard refuses it before anything is sent.
    http_connection(owner, "metadata", &plain, None).await;
    endpoint_moved(&pool, "metadata", "http://169.254.169.254/mcp").await;
    let blocked = diagnose(owner, "metadata", 10_000).await;
    failed_with(&blocked, "endpoint_blocked");
    assert!(
        check(&blocked, "handshake").1.contains("169.254.169.254"),
        "{blocked}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_bad_time_bound_is_refused_and_members_may_not_diagnose(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let owner = &server.owner;
    for bad in [json!({"timeout_ms": 0}), json!({"timeout_ms": 60_001})] {
        let message = owner
            .post("/api/v1/workspaces/acme/connections/fixture/diagnose", bad)
            .await
            .refused(400, "invalid_request");
        assert!(message.contains("timeout_ms"), "{message}");
    }
    let bob = server.member("acme", "bob", "member").await;
    bob.post(
        "/api/v1/workspaces/acme/connections/fixture/diagnose",
        json!({}),
    )
    .await
    .refused(403, "forbidden");
}

/// Diagnoses `local` while playing its device's runner (holding `epoch`): leases the check,
/// starts it and completes it with the two tools, or failed with `code`.
async fn answered_by_the_device(
    owner: &Client,
    device: &crate::devices::Device,
    epoch: i64,
    code: Option<&str>,
) -> Value {
    let waiting = tokio::spawn({
        let owner = owner.clone();
        async move { diagnose(&owner, "local", 5_000).await }
    });
    match code {
        None => {
            run_discovery(device, epoch, &["count", "echo"]).await;
        }
        Some(code) => {
            let leased = device
                .client
                .post(
                    "/api/v1/runner/lease",
                    json!({"epoch": epoch, "max": 8, "wait_ms": 20_000}),
                )
                .await
                .ok();
            let call = leased["calls"][0]["call_id"].as_str().unwrap().to_owned();
            let started = device
                .client
                .post(
                    &format!("/api/v1/runner/calls/{call}/start"),
                    json!({"epoch": epoch}),
                )
                .await
                .ok();
            assert_eq!(started["decision"], "proceed", "{started}");
            let completion = json!({"outcome": "failed", "error": {"code": code, "message": "as the runner saw it"}});
            let answer = device
                .client
                .post(
                    &format!("/api/v1/runner/calls/{call}/complete"),
                    json!({"receipt_id": uuid::Uuid::new_v4(), "epoch": epoch, "completion": completion}),
                )
                .await
                .ok();
            assert_eq!(answer["status"], "recorded", "{answer}");
        }
    }
    waiting.await.unwrap()
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_device_connection_is_checked_live_on_its_device(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device =
        setup_device_placement(&server, &scratch_dir("diagnose-device").path("count")).await;
    let owner = &server.owner;

    // No runner takes the check: the handshake fails, without a class, and says why.
    let unanswered = diagnose(owner, "local", 1_000).await;
    assert_eq!(unanswered["live_check"], "on_device", "{unanswered}");
    assert!(
        check(&unanswered, "transport")
            .1
            .contains("accepted there by the device's owner"),
        "{unanswered}"
    );
    assert_eq!(check(&unanswered, "credentials").0, "skipped");
    let (status, detail) = check(&unanswered, "handshake");
    assert_eq!(status, "failed", "{unanswered}");
    assert!(
        detail.contains("did not finish the check") && detail.contains("switchyard runner"),
        "{detail}"
    );
    assert!(unanswered["failure"].is_null(), "{unanswered}");

    // The device's runner takes the queued check and lists the tools: the diagnosis waiting
    // for it passes its handshake (its catalog check was read before the listing).
    let epoch = acquire_lease(&device, uuid::Uuid::new_v4()).await;
    let listed = answered_by_the_device(owner, &device, epoch, None).await;
    let (status, detail) = check(&listed, "handshake");
    assert_eq!(status, "passed", "{listed}");
    assert!(detail.contains("2 tools"), "{detail}");
    let after = answered_by_the_device(owner, &device, epoch, None).await;
    assert_eq!(check(&after, "catalog").0, "passed", "{after}");
    assert_eq!(after["passed"], true, "{after}");

    // The runner reports its failure's class as the discovery's code: the diagnosis shows it.
    let missing = answered_by_the_device(owner, &device, epoch, Some("executable_not_found")).await;
    failed_with(&missing, "executable_not_found");
    // A credential the device could not use is the credential's failure.
    let refused = answered_by_the_device(owner, &device, epoch, Some("credential_refused")).await;
    failed_with(&refused, "auth_refused");

    // A connector changed since the owner accepted it runs nothing there: the placement fails.
    owner
        .send(
            reqwest::Method::PATCH,
            "/api/v1/connectors/counted",
            Some(json!({"transport": "stdio", "command": fixture_bin(), "args": ["stdio"]})),
        )
        .await
        .ok();
    let changed = diagnose(owner, "local", 5_000).await;
    let (status, detail) = check(&changed, "transport");
    assert_eq!(status, "failed", "{changed}");
    assert!(detail.contains("switchyard device accept"), "{detail}");
}
