//! OAuth 2.1 for central HTTP connections against a real authorization server nobody here
//! wrote (`oidc-provider`, `switchyard_testkit::oauth_server`) and the fixture as the protected
//! MCP server (`--oauth-issuer`, which validates tokens by introspection): the whole flow with
//! consent automated, then calls with the token, its renewal, and the refusals.

mod personal;
mod refusals;
mod renewal;

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use switchyard_server::app::{App, AppConfig};
use switchyard_server::db::Datastore;
use switchyard_server::serve::ServeConfig;
use switchyard_server::vault::KeyFile;
use switchyard_testkit::oauth_server::{self, OAuthServer};

/// The connection every test authorizes.
pub const CONNECTION: &str = "/api/v1/workspaces/acme/connections/remote";

/// A server with an installation key, the authorization server, and connection `remote` of
/// workspace `acme` at the protected fixture.
pub struct Stack {
    pub server: TestServer,
    pub auth: OAuthServer,
    /// The fixture's MCP URL.
    pub url: String,
    pub vault: Arc<KeyFile>,
    /// The installation key file.
    pub key_path: std::path::PathBuf,
    /// Where the key file and the authorization server's log are (kept while the stack is).
    _dir: Scratch,
    _fixture: ChildGuard,
}

/// [`Stack`] with access tokens living `access_ttl` seconds.
pub async fn stack(pool: PgPool, access_ttl: u64) -> Stack {
    stack_with(pool, access_ttl, |_| {}).await
}

/// Workspace `acme` with connection `remote` to the fixture at `url`, made by `owner`; the
/// connection as created.
pub async fn add_remote(owner: &Client, url: &str) -> Value {
    owner
        .post("/api/v1/workspaces", json!({"name": "acme"}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": url}),
        )
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "remote", "connector": "remote"}),
        )
        .await
        .ok()
}

/// [`stack`] with the server's settings changed by `tweak`.
pub async fn stack_with(
    pool: PgPool,
    access_ttl: u64,
    tweak: impl FnOnce(&mut ServeConfig),
) -> Stack {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = scratch_dir("oauth");
    let auth = OAuthServer::start(dir.dir(), access_ttl).expect("oidc-provider starts");
    let (id, secret) = auth.resource_server();
    let introspection = format!("{id}:{secret}");
    let (url, fixture) = http_fixture(
        &[
            "--oauth-issuer",
            auth.issuer(),
            "--oauth-client-env",
            "FIXTURE_INTROSPECTION_CLIENT",
        ],
        &[("FIXTURE_INTROSPECTION_CLIENT", introspection.as_str())],
    );
    let key_path = dir.join("installation.key");
    let vault = Arc::new(KeyFile::load_or_create(&key_path).unwrap());
    let server = TestServer::start_with(pool, |config| {
        config.app.installation_key = Some(Arc::clone(&vault));
        tweak(config);
    })
    .await;
    let owner = &server.owner;
    add_remote(owner, &url).await;
    Stack {
        server,
        auth,
        url,
        vault,
        key_path,
        _dir: dir,
        _fixture: fixture,
    }
}

impl Stack {
    /// Another app on the same database and installation key (what another replica runs).
    pub fn replica_app(&self) -> App {
        App::new(
            Datastore::new(self.server.pool.clone()),
            AppConfig {
                installation_key: Some(Arc::clone(&self.vault)),
                ..test_app_config()
            },
        )
    }

    /// `POST …/authorize`: the answer.
    pub async fn start_authorization(&self) -> Value {
        self.server
            .owner
            .post(&format!("{CONNECTION}/authorize"), json!({}))
            .await
            .ok()
    }

    /// The callback URL the authorization server sends the browser to for `started`.
    pub async fn consent(&self, started: &Value) -> String {
        let url = started["authorization_url"].as_str().expect("a URL");
        consent(url, &format!("http://{}/mcp/callback", self.server.addr)).await
    }

    /// The whole flow, consent automated: authorized.
    pub async fn authorize(&self) {
        let started = self.start_authorization().await;
        let callback = self.consent(&started).await;
        let (status, page) = get_page(&callback).await;
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("is authorized"), "{page}");
    }

    /// The connection's view.
    pub async fn connection(&self) -> Value {
        self.server.owner.get(CONNECTION).await.ok()
    }

    /// The connection's id.
    pub async fn connection_id(&self) -> switchyard_protocol::ConnectionId {
        self.connection().await["id"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// The connection's auth state.
    pub async fn auth_state(&self) -> String {
        self.connection().await["auth"]["state"]
            .as_str()
            .unwrap_or("<none>")
            .to_owned()
    }

    /// Token requests the authorization server answered or refused so far, by grant type.
    pub async fn token_requests(&self, grant: &str) -> u64 {
        self.auth.token_requests().await.unwrap()[grant]
            .as_u64()
            .unwrap_or(0)
    }

    /// Calls `echo` on `remote` with `text`; the settled call.
    pub async fn echo(&self, text: &str) -> Value {
        let owner = &self.server.owner;
        let call = owner
            .post(
                "/api/v1/workspaces/acme/calls",
                json!({"request_id": uuid::Uuid::new_v4(), "profile_id": "main",
                       "connection_id": "remote", "tool_name": "echo",
                       "arguments": {"text": text}}),
            )
            .await
            .ok();
        owner
            .wait_call(
                "acme",
                call["id"].as_str().unwrap(),
                Duration::from_secs(60),
            )
            .await
    }

    /// The access token the server holds for `remote` now (read as a replica would).
    pub async fn held_token(&self) -> String {
        let id = self.connection_id().await;
        self.replica_app()
            .oauth_bearer(id, &self.url, None)
            .await
            .expect("a token")
            .expect("an OAuth connection")
    }
}

/// GETs `url` without following redirects: status and body.
pub async fn get_page(url: &str) -> (u16, String) {
    let answer = reqwest::Client::new()
        .get(url)
        .send()
        .await
        .expect("answers");
    (
        answer.status().as_u16(),
        answer.text().await.unwrap_or_default(),
    )
}

/// Follows the authorization server's redirects as a browser would, consent being
/// automated, until it sends the browser to `redirect`: that URL.
pub async fn consent(authorization_url: &str, redirect: &str) -> String {
    oauth_server::consent(authorization_url, |url| url.as_str().starts_with(redirect)).await
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_connection_authorized_in_a_browser_calls_its_server_with_the_token(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    let owner = &stack.server.owner;
    // Nothing held yet: discovery is refused by the server, and nothing says it is OAuth.
    owner
        .post(&format!("{CONNECTION}/discover"), json!({}))
        .await
        .refused(502, "discovery_failed");
    assert_eq!(stack.connection().await["auth"], Value::Null);

    let started = stack.start_authorization().await;
    let url = reqwest::Url::parse(started["authorization_url"].as_str().unwrap()).unwrap();
    let param = |name: &str| {
        url.query_pairs()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    };
    assert!(url.as_str().starts_with(stack.auth.issuer()));
    assert_eq!(param("code_challenge_method").as_deref(), Some("S256"));
    assert_eq!(param("resource").as_deref(), Some(stack.url.as_str()));
    assert_eq!(
        param("redirect_uri"),
        Some(format!("http://{}/mcp/callback", stack.server.addr))
    );
    assert_eq!(param("state").as_deref(), started["state"].as_str());
    // The kind was discovered from the server's challenge.
    let auth = &stack.connection().await["auth"];
    assert_eq!(
        (auth["kind"].as_str(), auth["state"].as_str()),
        (Some("oauth"), Some("needs_authorization"))
    );

    let callback = stack.consent(&started).await;
    let (status, page) = get_page(&callback).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<b>remote</b> is authorized"), "{page}");
    assert_eq!(stack.auth_state().await, "authorized");
    assert_eq!(stack.token_requests("authorization_code").await, 1);

    // The same callback again finds nothing to redeem.
    let (status, page) = get_page(&callback).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("authorization_state_invalid"), "{page}");

    owner.make_callable("acme", "remote", "main").await;
    let call = stack.echo("with a token").await;
    assert_eq!(
        (call["state"].as_str(), result_text(&call).as_str()),
        (Some("succeeded"), "with a token"),
        "{call}"
    );
    assert_eq!(stack.token_requests("refresh_token").await, 0);
}

#[sqlx::test(migrations = "../../migrations")]
async fn rotating_the_key_reseals_the_grant_and_revoking_empties_it(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    stack.authorize().await;
    let owner = &stack.server.owner;
    owner.make_callable("acme", "remote", "main").await;

    let rotated = stack
        .replica_app()
        .installation_key_rotate(&stack.key_path)
        .await
        .expect("rotation");
    assert!(rotated.resealed >= 1, "the grant was re-sealed");
    let key: String = sqlx::query_scalar("SELECT key_id FROM oauth_grants")
        .fetch_one(&stack.server.pool)
        .await
        .unwrap();
    assert_eq!(key, rotated.key_id);
    // A lost key file is not silently made anew while the grant needs it.
    let sealed = Datastore::new(stack.server.pool.clone())
        .sealed_values_count()
        .await
        .unwrap();
    assert!(sealed >= 1, "the grant is counted");
    let lost = stack.key_path.with_file_name("lost.key");
    let Err(refusal) = KeyFile::load_or_create_for(&lost, sealed) else {
        panic!("refused");
    };
    let refusal = refusal.to_string();
    assert!(refusal.contains("restore it from backup"), "{refusal}");
    assert!(!lost.exists());
    let call = stack.echo("after rotation").await;
    assert_eq!(result_text(&call), "after rotation", "{call}");

    owner
        .post(&format!("{CONNECTION}/credentials/revoke"), json!({}))
        .await
        .ok();
    assert_eq!(stack.auth_state().await, "needs_authorization");
    let grants: i64 = sqlx::query_scalar("SELECT count(*) FROM oauth_grants")
        .fetch_one(&stack.server.pool)
        .await
        .unwrap();
    assert_eq!(grants, 0);
    let call = stack.echo("revoked").await;
    assert_eq!(call["error"]["code"], "credential_missing", "{call}");
    let audit = owner.get("/api/v1/workspaces/acme/audit").await.ok();
    assert!(
        audit.to_string().contains("\"oauth_grants_deleted\":1"),
        "{audit}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn retiring_an_authorized_connection_forgets_its_grant(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    stack.authorize().await;
    let owner = &stack.server.owner;

    owner
        .post(&format!("{CONNECTION}/retire"), json!({}))
        .await
        .ok();
    let grants: i64 = sqlx::query_scalar("SELECT count(*) FROM oauth_grants")
        .fetch_one(&stack.server.pool)
        .await
        .unwrap();
    assert_eq!(grants, 0);
    // Restored, it keeps its settings and needs authorization again.
    owner
        .post(&format!("{CONNECTION}/restore"), json!({}))
        .await
        .ok();
    let auth = &stack.connection().await["auth"];
    assert_eq!(
        (auth["kind"].as_str(), auth["state"].as_str()),
        (Some("oauth"), Some("needs_authorization")),
        "{auth}"
    );
    let audit = owner.get("/api/v1/workspaces/acme/audit").await.ok();
    let retired = audit
        .as_array()
        .expect("a list")
        .iter()
        .find(|entry| entry["action"] == "connection.retired")
        .unwrap_or_else(|| panic!("no connection.retired entry: {audit}"));
    assert_eq!(retired["after"]["oauth_grants_deleted"], 1, "{retired}");
}

#[sqlx::test(migrations = "../../migrations")]
async fn diagnosing_an_authorized_connection_sends_its_token(pool: PgPool) {
    let stack = stack(pool, 3600).await;
    stack.authorize().await;
    let owner = &stack.server.owner;
    owner.make_callable("acme", "remote", "main").await;

    let diagnosis = owner
        .post(&format!("{CONNECTION}/diagnose"), json!({}))
        .await
        .ok();
    let checks = diagnosis["checks"].as_array().expect("checks");
    let status = |name: &str| {
        checks
            .iter()
            .find(|check| check["check"] == name)
            .map(|check| check["status"].as_str().unwrap_or_default().to_owned())
    };
    assert_eq!(
        status("handshake").as_deref(),
        Some("passed"),
        "{diagnosis}"
    );
    assert_eq!(diagnosis["passed"], true, "{diagnosis}");
    let token = stack.held_token().await;
    assert!(
        !diagnosis.to_string().contains(&token),
        "the token is not answered"
    );
}
