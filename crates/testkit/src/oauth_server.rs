//! A real OAuth 2.1 authorization server as a process: `oidc-provider` (npm, installed pinned
//! by `scripts/test.sh`, which exports where as `SWITCHYARD_TEST_OIDC_PROVIDER`) run by
//! `fixtures/oauth-server/server.mjs` with dynamic registration, PKCE (S256), resource
//! indicators, refresh-token rotation, introspection and automated consent. The script's header
//! says what it is configured with and which test controls it answers.

use crate::error::{Error, Result};
use crate::process::Process;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where `scripts/test.sh` points at `oidc-provider`'s entry module.
pub const OIDC_PROVIDER_VAR: &str = "SWITCHYARD_TEST_OIDC_PROVIDER";
/// The variable the script reads the protected server's `client_id:secret` from.
const RESOURCE_SERVER_VAR: &str = "SWITCHYARD_TEST_RESOURCE_SERVER";

/// The authorization server; killed when dropped.
#[derive(Debug)]
pub struct OAuthServer {
    issuer: String,
    resource_server: (String, String),
    http: reqwest::Client,
    _process: Process,
}

impl OAuthServer {
    /// Starts one issuing access tokens that live `access_token_ttl_secs`, with its log in
    /// `dir`. It knows one confidential client, the protected MCP server's
    /// ([`Self::resource_server`]), the only one allowed to introspect.
    pub fn start(dir: &Path, access_token_ttl_secs: u64) -> Result<OAuthServer> {
        // Its control client is a reqwest one, built without a TLS provider of its own.
        crate::api::install_tls_provider();
        let module = std::env::var(OIDC_PROVIDER_VAR).map_err(|_| {
            Error::Setup(format!(
                "{OIDC_PROVIDER_VAR} is not set: run the tests with scripts/test.sh, which \
                 installs oidc-provider"
            ))
        })?;
        let resource_server = (
            "switchyard-test-rs".to_owned(),
            uuid::Uuid::new_v4().to_string(),
        );
        let mut command = Command::new("node");
        command
            .arg(script())
            .env("OIDC_PROVIDER_MODULE", module)
            .env("ACCESS_TOKEN_TTL", access_token_ttl_secs.to_string())
            .env("RESOURCE_SERVER_ENV", RESOURCE_SERVER_VAR)
            .env(
                RESOURCE_SERVER_VAR,
                format!("{}:{}", resource_server.0, resource_server.1),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut process = Process::spawn(command, "oidc-provider", &dir.join("oauth-server.log"))?;
        let stdout = process
            .take_stdout()
            .ok_or_else(|| Error::Setup("oidc-provider's stdout is not piped".to_owned()))?;
        let mut lines = BufReader::new(stdout);
        let mut first = String::new();
        lines
            .read_line(&mut first)
            .map_err(Error::io("reading oidc-provider's first line"))?;
        let issuer = serde_json::from_str::<Value>(&first)
            .ok()
            .and_then(|line| line["issuer"].as_str().map(str::to_owned))
            .ok_or_else(|| {
                Error::Setup(format!(
                    "oidc-provider did not start (first line {first:?}); log: {}",
                    process.log_tail()
                ))
            })?;
        // Its notices go to stdout too: drained, so that a full pipe never stops it.
        std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
        Ok(OAuthServer {
            issuer,
            resource_server,
            http: reqwest::Client::new(),
            _process: process,
        })
    }

    /// Its issuer URL (`http://127.0.0.1:PORT`).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The protected MCP server's client: `(client_id, secret)`.
    pub fn resource_server(&self) -> (&str, &str) {
        (&self.resource_server.0, &self.resource_server.1)
    }

    /// Token requests it has answered or refused so far, by grant type.
    pub async fn token_requests(&self) -> Result<Value> {
        Ok(self.control("stats").await?["token_requests"].clone())
    }

    /// Makes it forget the registered client `client_id`.
    pub async fn forget_client(&self, client_id: &str) -> Result<()> {
        self.control(&format!("forget-client/{client_id}"))
            .await
            .map(drop)
    }

    /// Makes every refresh token it issued invalid (`invalid_grant` from then on).
    pub async fn revoke_refresh_tokens(&self) -> Result<()> {
        self.control("revoke-refresh").await.map(drop)
    }

    /// Makes every access token it issued inactive (introspection answers so), while the
    /// refresh tokens still renew: the protected server then refuses the tokens it holds.
    pub async fn forget_access_tokens(&self) -> Result<()> {
        self.control("forget-access").await.map(drop)
    }

    /// Makes dynamic registration answer confidential clients (`client_secret_basic`, with a
    /// `client_secret`) from now on, whatever was asked: token requests then need the secret.
    pub async fn register_confidential_clients(&self) -> Result<()> {
        self.control("confidential-registration").await.map(drop)
    }

    async fn control(&self, action: &str) -> Result<Value> {
        let what = format!("oidc-provider control {action}");
        let answer = self
            .http
            .post(format!("{}/test/{action}", self.issuer))
            .send()
            .await
            .map_err(|e| Error::Http {
                what: what.clone(),
                message: e.to_string(),
            })?;
        let status = answer.status().as_u16();
        let body = answer.text().await.unwrap_or_default();
        if status != 200 {
            return Err(Error::Api { what, status, body });
        }
        serde_json::from_str(&body).map_err(|e| Error::Setup(format!("{what}: {e}: {body}")))
    }
}

/// `fixtures/oauth-server/server.mjs` of this workspace.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/oauth-server/server.mjs")
}

/// Follows the authorization server's redirects as a browser would (keeping its cookies),
/// consent being automated, until it is sent to a URL `arrived` accepts (the client's
/// redirect URI): that URL, not yet visited.
pub async fn consent(authorization_url: &str, arrived: impl Fn(&reqwest::Url) -> bool) -> String {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client");
    let mut url = reqwest::Url::parse(authorization_url).expect("an authorization URL");
    let mut cookies: Vec<(String, String)> = Vec::new();
    for _ in 0..10 {
        if arrived(&url) {
            return url.to_string();
        }
        let cookie = cookies
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ");
        let answer = http
            .get(url.clone())
            .header("cookie", cookie)
            .send()
            .await
            .expect("the authorization server answers");
        for set in answer.headers().get_all("set-cookie") {
            let pair = set.to_str().unwrap_or_default().split(';').next();
            if let Some((name, value)) = pair.and_then(|pair| pair.split_once('=')) {
                cookies.retain(|(known, _)| known != name);
                cookies.push((name.to_owned(), value.to_owned()));
            }
        }
        let location = answer
            .headers()
            .get("location")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_else(|| panic!("no redirect from {url}: {}", answer.status()))
            .to_owned();
        url = url.join(&location).expect("a redirect URL");
    }
    panic!("the consent never reached the client's redirect; last at {url}");
}
