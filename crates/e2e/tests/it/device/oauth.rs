//! `switchyard auth` for a connection placed on this machine's device, end to end: consent in
//! a browser comes back to the CLI's loopback port, the grant goes to the OS keyring (never to
//! the server, which holds no installation key here), and the device runner sends it, renews
//! it when the MCP server refuses it, and stops at `auth_required` after one refused refresh.
//! Against `oidc-provider` and the fixture as the OAuth-protected MCP server.

use super::credentials::{assert_in_no_argv, cli, run_with_value, succeeded};
use super::harness::{DEADLINE, Paired, Server, WORKSPACE};
use crate::cli::harness::HttpFixture;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;
use std::time::Duration;
use switchyard_mcp_runner::credentials::{KEYRING_SERVICE, OsKeyring, SecretStore};
use switchyard_mcp_runner::oauth::{DeviceGrants, now};
use switchyard_protocol::ConnectionId;
use switchyard_protocol::api::{AuthState, ConnectorSpec};
use switchyard_testkit::oauth_server::{OAuthServer, consent};
use switchyard_testkit::poll::{Bound, Check};

/// A device grant removed from the keyring when dropped, so the test leaves the user's keyring
/// as it found it.
struct GrantCleanup(DeviceGrants, ConnectionId);

impl Drop for GrantCleanup {
    fn drop(&mut self) {
        let _ = self.0.delete(self.1);
    }
}

/// A `switchyard-mcp` keyring entry removed when dropped (a failed test leaves no token).
struct EntryCleanup(String);

impl Drop for EntryCleanup {
    fn drop(&mut self) {
        if let Ok(keyring) = OsKeyring::new() {
            let _ = keyring.delete(KEYRING_SERVICE, &self.0);
        }
    }
}

/// `switchyard --json list demo`: the auth state it shows for `dfx`.
fn listed_state(server: &Server, paired: &Paired) -> Value {
    let output = cli(server, &paired.config_dir, &["--json", "list", WORKSPACE])
        .output()
        .expect("run switchyard list");
    assert!(output.status.success(), "{output:?}");
    let listed: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    listed
        .as_array()
        .and_then(|all| all.iter().find(|c| c["name"] == "dfx"))
        .map(|c| c["auth"]["state"].clone())
        .unwrap_or_else(|| panic!("dfx is listed: {listed}"))
}

/// Waits, bounded, until the server shows `state` for `dfx` (its device's runner reports it).
async fn server_shows(paired: &Paired, state: &str) {
    let path = format!("/workspaces/{WORKSPACE}/connections/dfx");
    Bound::new(DEADLINE, Duration::from_millis(100))
        .until(async || {
            let shown = paired.api.get(&path).await?["auth"]["state"].clone();
            Ok(if shown == state {
                Check::Done(())
            } else {
                Check::NotYet(format!("the server shows {shown}"))
            })
        })
        .await
        .unwrap_or_else(|e| panic!("the server never showed {state}: {e}"));
}

/// The text of a call's first result content.
fn result_text(call: &Value) -> &str {
    call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text result: {call}"))
}

async fn token_requests(auth: &OAuthServer, grant: &str) -> u64 {
    auth.token_requests().await.expect("stats")[grant]
        .as_u64()
        .unwrap_or(0)
}

#[sqlx::test(migrations = false)]
async fn a_device_connection_authorized_here_calls_with_its_token_and_renews_it(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let dir = super::harness::scratch("device-oauth-as");
    let auth = OAuthServer::start(&dir, 3600).expect("oidc-provider starts");
    let remote = HttpFixture::protected_by(&auth);
    let spec = ConnectorSpec::Http {
        url: remote.url.clone(),
    };
    let paired = Paired::set_up(&server, "device-oauth", spec).await;
    let connection: ConnectionId = paired.connection_id.parse().expect("a connection id");
    let grants = DeviceGrants::new(Arc::new(OsKeyring::new().expect("the kernel keyring")));
    let _cleanup = GrantCleanup(grants.clone(), connection);
    paired
        .api
        .put(
            &format!("/workspaces/{WORKSPACE}/connections/dfx/auth"),
            &json!({"kind": "oauth"}),
        )
        .await
        .expect("declare dfx an OAuth connection");
    assert_eq!(listed_state(&server, &paired), "needs_authorization");

    // `auth` prints the URL; the browser consents and comes back to the CLI's loopback port.
    let mut child = cli(
        &server,
        &paired.config_dir,
        &["auth", WORKSPACE, "dfx", "--wait", "60"],
    )
    .spawn()
    .expect("start switchyard auth");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let authorization_url = loop {
        let mut line = String::new();
        let read = stdout.read_line(&mut line).expect("read the CLI's output");
        assert!(read > 0, "the CLI printed no authorization URL");
        if line.trim().starts_with(auth.issuer()) {
            break line.trim().to_owned();
        }
    };
    let parsed = reqwest::Url::parse(&authorization_url).expect("a URL");
    let param = |name: &str| {
        parsed
            .query_pairs()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
            .unwrap_or_default()
    };
    let redirect = param("redirect_uri");
    assert!(
        redirect.starts_with("http://127.0.0.1:") && redirect.ends_with("/callback"),
        "a loopback redirect: {redirect}"
    );
    assert_eq!(param("code_challenge_method"), "S256");
    assert_eq!(param("resource"), remote.url);
    // Another local request to the port is not an answer: it neither ends nor declines it.
    let stray = reqwest::get(format!("{redirect}?error=access_denied&state=not-this-one"))
        .await
        .expect("the CLI answers a stray request");
    assert_eq!(stray.status().as_u16(), 400);
    let callback = consent(&authorization_url, |url| {
        url.as_str().starts_with(&redirect)
    })
    .await;
    let answer = reqwest::get(&callback).await.expect("the CLI answers");
    assert_eq!(answer.status().as_u16(), 200);
    assert!(
        answer
            .text()
            .await
            .unwrap_or_default()
            .contains("is authorized")
    );
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read the rest");
    let output = child.wait_with_output().expect("the CLI exits");
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(rest.contains("dfx is authorized on this device"), "{rest}");
    assert_eq!(token_requests(&auth, "authorization_code").await, 1);

    // The grant is in this device's keyring, for this URL.
    let grant = grants.get(connection).expect("keyring").expect("a grant");
    assert_eq!(grant.resource, remote.url);
    assert_eq!(grant.state, AuthState::Authorized);
    let first = grant.grant.standing(now()).expect("an access token").token;
    assert!(!rest.contains(&first), "the CLI printed the token");
    assert_in_no_argv(&first);
    assert_eq!(listed_state(&server, &paired), "authorized");

    // The device runner sends it: discovery and a call reach the protected server.
    let outbox = paired.dir.join("outbox");
    let mut runner = paired.runner(&outbox, "runner.log", &[]);
    runner.wait_for_log("lease epoch").await;
    paired.discover_classified().await;
    let call = paired
        .submit("echo", json!({"text": "with a device token"}), 30)
        .await;
    let view = paired.wait_for_state(&call, "succeeded").await;
    assert_eq!(result_text(&view), "with a device token");
    assert_eq!(token_requests(&auth, "refresh_token").await, 0);
    // The runner told the server where the grant stands (the grant itself stays here).
    server_shows(&paired, "authorized").await;

    // The protected server refuses the token: renewed once, and the call goes through.
    auth.forget_access_tokens()
        .await
        .expect("forget access tokens");
    let call = paired
        .submit("echo", json!({"text": "after a refusal"}), 30)
        .await;
    let view = paired.wait_for_state(&call, "succeeded").await;
    assert_eq!(result_text(&view), "after a refusal");
    assert_eq!(token_requests(&auth, "refresh_token").await, 1);
    let renewed = grants.get(connection).expect("keyring").expect("a grant");
    let second = renewed.grant.standing(now()).expect("a token").token;
    assert_ne!(second, first, "a renewed token is stored");
    assert!(renewed.generation > grant.generation);

    // The refresh token is refused: one attempt, then `auth_required` without asking again.
    auth.revoke_refresh_tokens()
        .await
        .expect("revoke refresh tokens");
    auth.forget_access_tokens()
        .await
        .expect("forget access tokens");
    for text in ["refused once", "refused again"] {
        let call = paired.submit("echo", json!({"text": text}), 30).await;
        let view = paired.wait_for_state(&call, "failed").await;
        assert_eq!(view["error"]["code"], "credential_auth_required", "{view}");
    }
    assert_eq!(token_requests(&auth, "refresh_token").await, 2);
    let dead = grants.get(connection).expect("keyring").expect("a grant");
    assert_eq!(dead.state, AuthState::AuthRequired);
    assert_eq!(listed_state(&server, &paired), "auth_required");
    server_shows(&paired, "auth_required").await;

    // `revoke` empties the keyring entry; the declaration stays.
    let revoked = cli(&server, &paired.config_dir, &["revoke", WORKSPACE, "dfx"])
        .output()
        .expect("run switchyard revoke");
    assert!(revoked.status.success(), "{revoked:?}");
    assert!(grants.get(connection).expect("keyring").is_none());
    assert_eq!(listed_state(&server, &paired), "needs_authorization");
    let call = paired.submit("echo", json!({"text": "revoked"}), 30).await;
    let view = paired.wait_for_state(&call, "failed").await;
    assert_eq!(view["error"]["code"], "credential_missing", "{view}");
    server_shows(&paired, "needs_authorization").await;

    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
    let log = runner.log_text();
    for token in [&first, &second] {
        assert!(!log.contains(token.as_str()), "the runner logged a token");
    }
}

#[sqlx::test(migrations = false)]
async fn a_device_token_connection_keeps_its_token_in_the_keyring_until_revoked(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let token = "device-static-7d1c40ae";
    let remote = HttpFixture::start(
        &["--bearer-env", "FIXTURE_TOKEN"],
        &[("FIXTURE_TOKEN", token)],
    );
    let spec = ConnectorSpec::Http {
        url: remote.url.clone(),
    };
    let paired = Paired::set_up(&server, "device-token", spec).await;
    paired
        .api
        .put(
            &format!("/workspaces/{WORKSPACE}/connections/dfx/auth"),
            &json!({"kind": "token"}),
        )
        .await
        .expect("declare dfx a token connection");

    // The token is read from stdin, never the command line, into this device's keyring.
    let set = run_with_value(
        &server,
        &paired.config_dir,
        &["auth", WORKSPACE, "dfx"],
        token,
    );
    let said = succeeded(&set);
    assert!(
        said.contains("OS keyring") && said.contains("Authorization"),
        "{said}"
    );
    assert!(!said.contains(token));
    let entry = format!("{}/Authorization", paired.connection_id);
    let _cleanup = EntryCleanup(entry.clone());

    let outbox = paired.dir.join("outbox");
    let mut runner = paired.runner(&outbox, "runner.log", &[]);
    runner.wait_for_log("lease epoch").await;
    paired.discover_classified().await;
    let call = paired
        .submit("echo", json!({"text": "with a token"}), 30)
        .await;
    let view = paired.wait_for_state(&call, "succeeded").await;
    assert_eq!(result_text(&view), "with a token");

    // `revoke` removes the token's binding and its keyring entry: the next call sends none.
    let revoked = cli(&server, &paired.config_dir, &["revoke", WORKSPACE, "dfx"])
        .output()
        .expect("run switchyard revoke");
    assert!(revoked.status.success(), "{revoked:?}");
    assert!(
        String::from_utf8_lossy(&revoked.stdout).contains("1 bound value(s)"),
        "{revoked:?}"
    );
    let keyring = OsKeyring::new().expect("the kernel keyring");
    assert_eq!(
        keyring.get(KEYRING_SERVICE, &entry).expect("readable"),
        None,
        "the token's keyring entry is gone"
    );
    let call = paired.submit("echo", json!({"text": "revoked"}), 30).await;
    let view = paired.wait_for_state(&call, "failed").await;
    assert!(!view.to_string().contains(token), "{view}");
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
    assert!(
        !runner.log_text().contains(token),
        "the runner logged the token"
    );
}
