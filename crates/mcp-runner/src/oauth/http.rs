//! The HTTP client of every OAuth request a host makes — the server for its central
//! connections, this machine for its device's (discovery, registration, token requests, and
//! the probe that asks an MCP server whether it wants OAuth): each request is bounded by the
//! configured timeout, screened by the host's endpoint guard like any HTTP connector (names resolve only to admitted addresses, literal addresses and redirects
//! are checked), and its answer bounded to 1 MiB.
//!
//! It also remembers the OAuth `error` code of the last refused answer (RFC 6749 §5.2), read
//! from the protocol's JSON field, so that a token request refused for `invalid_client` (the
//! authorization server forgot the registration) is told apart from a passing failure.

use crate::endpoints::EndpointGuard;
use rmcp::transport::auth::{
    AuthError, OAuthHttpClient, OAuthHttpClientError, OAuthHttpClientFuture,
    OAuthHttpRedirectPolicy, OAuthHttpRequest,
};
use serde_json::Value;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// Largest OAuth answer read.
const MAX_BODY: usize = 1024 * 1024;
/// Most redirects followed where following is allowed (discovery, registration).
const MAX_REDIRECTS: usize = 10;

/// What an MCP server answered an `initialize` sent without a credential.
#[derive(Clone, Debug)]
pub struct Probe {
    /// The HTTP status.
    pub status: u16,
    /// Its `WWW-Authenticate` challenge with the `Bearer` scheme, if any.
    pub bearer_challenge: Option<String>,
}

/// One operation's OAuth HTTP client (build one per authorization or renewal, so that the
/// error it remembers is that operation's).
pub struct OAuthHttp {
    follow: reqwest::Client,
    stop: reqwest::Client,
    guard: EndpointGuard,
    last_error: Mutex<Option<String>>,
    registration: Mutex<Registration>,
}

/// The dynamic registration (RFC 7591) an authorization watches: rmcp keeps the answer's
/// `client_secret` to itself, so it is read here as it passes.
#[derive(Default)]
struct Registration {
    endpoint: Option<String>,
    secret: Option<String>,
}

impl OAuthHttp {
    /// A client screened by `guard`, each request bounded by `timeout`.
    pub fn new(guard: &EndpointGuard, timeout: Duration) -> Result<Arc<Self>, AuthError> {
        let policy_guard = guard.clone();
        let follow = reqwest::redirect::Policy::custom(move |attempt| {
            if let Some(refusal) = policy_guard.redirect_refusal(attempt.url()) {
                attempt.error(refusal)
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error("too many redirects")
            } else {
                attempt.follow()
            }
        });
        let build = |redirect| {
            reqwest::Client::builder()
                .timeout(timeout)
                .connect_timeout(timeout)
                .redirect(redirect)
                .dns_resolver(guard.resolver())
                .build()
                .map_err(|error| AuthError::InternalError(error.to_string()))
        };
        Ok(Arc::new(OAuthHttp {
            follow: build(follow)?,
            stop: build(reqwest::redirect::Policy::none())?,
            guard: guard.clone(),
            last_error: Mutex::new(None),
            registration: Mutex::default(),
        }))
    }

    /// Keeps the `client_secret` of a registration answered at `endpoint` (despite asking for
    /// a public client, a server may register a confidential one).
    pub fn watch_registration(&self, endpoint: &str) {
        self.registration
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .endpoint = Some(endpoint.to_owned());
    }

    /// The `client_secret` the watched registration answered, if any.
    pub fn registered_secret(&self) -> Option<String> {
        self.registration
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .secret
            .take()
    }

    /// The OAuth `error` code of the last answer that carried one.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sends the MCP server at `url` an `initialize` without a credential, as a client that
    /// knows nothing of it would: a 401 with a `Bearer` challenge says it wants OAuth.
    pub async fn probe(&self, url: &str) -> Result<Probe, String> {
        self.guard.screen(url).await.map_err(|e| e.to_string())?;
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "switchyard", "version": env!("CARGO_PKG_VERSION")}}
        });
        let answer = self
            .stop
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .json(&body)
            .send()
            .await
            .map_err(|e| describe(&e))?;
        let bearer_challenge = answer
            .headers()
            .get_all("www-authenticate")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find(|value| {
                value
                    .split_whitespace()
                    .next()
                    .is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer"))
            })
            .map(str::to_owned);
        Ok(Probe {
            status: answer.status().as_u16(),
            bearer_challenge,
        })
    }

    async fn run(&self, request: OAuthHttpRequest) -> Result<http::Response<Vec<u8>>, String> {
        let client = match request.redirect_policy {
            OAuthHttpRedirectPolicy::Stop => &self.stop,
            _ => &self.follow,
        };
        let request = reqwest::Request::try_from(request.request).map_err(|e| e.to_string())?;
        let registering = request.method() == reqwest::Method::POST
            && self
                .registration
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .endpoint
                .as_deref()
                == Some(request.url().as_str());
        self.guard
            .screen(request.url().as_str())
            .await
            .map_err(|e| e.to_string())?;
        let answer = client.execute(request).await.map_err(|e| describe(&e))?;
        let mut response = http::Response::builder()
            .status(answer.status())
            .version(answer.version());
        for (name, value) in answer.headers() {
            response = response.header(name, value);
        }
        let status = answer.status();
        let mut body = Vec::new();
        let mut answer = answer;
        while let Some(chunk) = answer.chunk().await.map_err(|e| describe(&e))? {
            if chunk.len() > MAX_BODY - body.len() {
                return Err(format!("the answer is longer than {MAX_BODY} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        if registering
            && status.is_success()
            && let Some(secret) = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|answer| answer["client_secret"].as_str().map(str::to_owned))
                .filter(|secret| !secret.is_empty())
        {
            self.registration
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .secret = Some(secret);
        }
        if !status.is_success()
            && let Some(code) = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|answer| answer["error"].as_str().map(str::to_owned))
        {
            *self
                .last_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(code);
        }
        response.body(body).map_err(|e| e.to_string())
    }
}

impl OAuthHttpClient for OAuthHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move { self.run(request).await.map_err(OAuthHttpClientError::from) })
    }
}

/// A request failure, saying plainly when it was the time bound.
fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "no answer within the OAuth request timeout".to_owned()
    } else if error.is_connect() {
        format!("cannot connect: {error}")
    } else {
        error.to_string()
    }
}
