//! The HTTP client for the Switchyard API under `/api/v1`.
//!
//! It holds the base URL and the credential [`crate::auth`] chose (a personal API token or a
//! device credential; none for pairing) and turns every answer into either a [`Reply`]
//! holding the server's JSON text or a [`CliError`] with the right exit code. It never retries:
//! a request that may have reached the server is reported, not repeated.

use crate::error::CliError;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::error::Error as _;
use std::sync::Once;
use std::time::Duration;

/// Discovery may take the server up to 20 s, and a waiting call read up to 25 s; leave room
/// beyond that.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An authenticated client for one Switchyard server.
pub struct Client {
    http: reqwest::Client,
    base: Url,
    /// `Authorization` header; `None` for the unauthenticated pairing requests.
    auth: Option<HeaderValue>,
}

/// Where a base URL came from, named in errors about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlOrigin {
    /// `SWITCHYARD_URL`.
    Env,
    /// `switchyard pair --server`.
    ServerFlag,
    /// A saved device identity.
    Profile,
}

impl UrlOrigin {
    fn name(self) -> &'static str {
        match self {
            UrlOrigin::Env => "SWITCHYARD_URL",
            UrlOrigin::ServerFlag => "--server",
            UrlOrigin::Profile => "the paired device's server URL",
        }
    }
}

/// A request body.
pub enum Body {
    /// No body.
    Empty,
    /// JSON bytes, sent as they are.
    Json(Vec<u8>),
}

impl Body {
    /// An empty JSON object, `{}`: for routes that take a JSON body but nothing in it.
    pub fn empty_object() -> Body {
        Body::Json(b"{}".to_vec())
    }

    /// Serializes a protocol request type.
    pub fn of<T: serde::Serialize>(value: &T) -> Body {
        // Protocol request types are plain structs with string keys: serializing cannot fail.
        Body::Json(serde_json::to_vec(value).expect("protocol request types serialize"))
    }
}

/// A successful (2xx) answer whose body is valid JSON.
#[derive(Debug)]
pub struct Reply {
    status: StatusCode,
    url: Url,
    text: String,
}

impl Reply {
    /// The HTTP status (e.g. 201 for a new call, 200 for a replayed one).
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The body, exactly as the server sent it.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Reads the body as a protocol type.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, CliError> {
        serde_json::from_str(&self.text).map_err(|err| CliError::BadResponse {
            url: self.url.to_string(),
            detail: format!("the body does not match the API's shape: {err}"),
        })
    }
}

/// An error body read leniently: a code this CLI does not know yet is still shown as sent.
#[derive(Deserialize)]
struct WireErrorBody {
    error: WireError,
}

#[derive(Deserialize)]
struct WireError {
    code: String,
    message: String,
}

impl Client {
    /// A client for the server and credential the environment selects (see [`crate::auth`]):
    /// `SWITCHYARD_TOKEN` when set, otherwise the paired device identity.
    pub fn from_env() -> Result<Client, CliError> {
        let auth = crate::auth::from_env()?;
        Client::build(auth.base, Some(&auth.token))
    }

    /// A client for `server` (given with `--server`) that sends no credential: for pairing.
    pub fn anonymous(server: &str) -> Result<Client, CliError> {
        Client::build(parse_base(server, UrlOrigin::ServerFlag)?, None)
    }

    /// The server's base URL without a trailing slash, e.g. `http://127.0.0.1:8787`.
    pub fn server_url(&self) -> String {
        self.base.as_str().trim_end_matches('/').to_owned()
    }

    fn build(base: Url, token: Option<&str>) -> Result<Client, CliError> {
        let auth = match token {
            None => None,
            Some(token) => {
                let mut auth = HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| CliError::BadToken)?;
                // Keeps the token out of any debug output of the request.
                auth.set_sensitive(true);
                Some(auth)
            }
        };
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            // Idle connections are dropped before the server's 30-second header timeout
            // closes them, so no request goes out on a connection being closed.
            .pool_idle_timeout(Duration::from_secs(20))
            // The API never redirects; following one could turn a POST into a GET.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("switchyard/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(CliError::HttpClient)?;
        Ok(Client { http, base, auth })
    }

    /// `GET /api/v1/<segments…>`.
    pub async fn get(&self, segments: &[&str]) -> Result<Reply, CliError> {
        self.send(Method::GET, self.url(segments)?, Body::Empty)
            .await
    }

    /// `GET /api/v1/<segments…>?<query>`, each name and value percent-encoded.
    pub async fn get_with_query(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
    ) -> Result<Reply, CliError> {
        self.send(
            Method::GET,
            self.url_with_query(segments, query)?,
            Body::Empty,
        )
        .await
    }

    /// `POST /api/v1/<segments…>` with `body`.
    pub async fn post(&self, segments: &[&str], body: Body) -> Result<Reply, CliError> {
        self.send(Method::POST, self.url(segments)?, body).await
    }

    /// `POST /api/v1/<segments…>?<query>` with `body`, each name and value percent-encoded.
    pub async fn post_with_query(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
        body: Body,
    ) -> Result<Reply, CliError> {
        self.send(Method::POST, self.url_with_query(segments, query)?, body)
            .await
    }

    /// `PUT /api/v1/<segments…>` with `body`.
    pub async fn put(&self, segments: &[&str], body: Body) -> Result<Reply, CliError> {
        self.send(Method::PUT, self.url(segments)?, body).await
    }

    /// `PATCH /api/v1/<segments…>` with `body`.
    pub async fn patch(&self, segments: &[&str], body: Body) -> Result<Reply, CliError> {
        self.send(Method::PATCH, self.url(segments)?, body).await
    }

    /// The URL of `/api/v1/<segments…>`, each segment percent-encoded.
    fn url(&self, segments: &[&str]) -> Result<Url, CliError> {
        // URLs normalize `.` and `..` away (even percent-encoded), so such a name would silently
        // address a different resource.
        if let Some(dots) = segments.iter().find(|s| matches!(**s, "." | "..")) {
            return Err(CliError::Usage(format!(
                "`{dots}` cannot be used as a name in a request path"
            )));
        }
        let mut url = self.base.clone();
        // `parse_base` rejected URLs that cannot have a path, so this always succeeds.
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["api", "v1"]).extend(segments);
        }
        Ok(url)
    }

    /// The URL of `/api/v1/<segments…>?<query>`.
    fn url_with_query(&self, segments: &[&str], query: &[(&str, &str)]) -> Result<Url, CliError> {
        let mut url = self.url(segments)?;
        // No pairs, no `?`.
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    async fn send(&self, method: Method, url: Url, body: Body) -> Result<Reply, CliError> {
        let mut request = self
            .http
            .request(method, url.clone())
            .header(ACCEPT, "application/json");
        if let Some(auth) = &self.auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        if let Body::Json(bytes) = body {
            request = request.header(CONTENT_TYPE, "application/json").body(bytes);
        }
        let response = request.send().await.map_err(|err| self.unreachable(&err))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|err| self.unreachable(&err))?;
        classify(status, url, text)
    }

    fn unreachable(&self, err: &reqwest::Error) -> CliError {
        let mut shown = self.base.clone();
        let _ = shown.set_password(None);
        CliError::Unreachable {
            url: shown.to_string(),
            detail: error_chain(err),
        }
    }
}

/// Parses and checks a base URL taken from `origin`.
pub fn parse_base(base: &str, origin: UrlOrigin) -> Result<Url, CliError> {
    let bad = |reason: &str| CliError::BadUrl {
        origin: origin.name(),
        url: base.to_owned(),
        reason: reason.to_owned(),
    };
    let url = Url::parse(base).map_err(|err| bad(&err.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if url.cannot_be_a_base() || url.query().is_some() || url.fragment().is_some() {
        return Err(bad(
            "give the server's base URL, e.g. http://127.0.0.1:8787",
        ));
    }
    Ok(url)
}

/// Whether two base URLs name the same server (a trailing slash does not matter).
pub fn same_server(a: &Url, b: &Url) -> bool {
    a.as_str().trim_end_matches('/') == b.as_str().trim_end_matches('/')
}

/// Sorts an answer into a [`Reply`] or the error its status means.
fn classify(status: StatusCode, url: Url, text: String) -> Result<Reply, CliError> {
    if status.is_success() {
        return match serde_json::from_str::<serde::de::IgnoredAny>(&text) {
            Ok(_) => Ok(Reply { status, url, text }),
            Err(err) => Err(CliError::BadResponse {
                url: url.to_string(),
                detail: format!("HTTP {status} with a body that is not JSON: {err}"),
            }),
        };
    }
    let (code, message) = match serde_json::from_str::<WireErrorBody>(&text) {
        Ok(body) => (body.error.code, body.error.message),
        // Not an API error body (a proxy, or an older server): show what there is.
        Err(_) => (
            format!("http_{}", status.as_u16()),
            format!(
                "{} from {url}{}",
                status.canonical_reason().unwrap_or("error"),
                snippet(&text).map(|s| format!(": {s}")).unwrap_or_default()
            ),
        ),
    };
    Err(match status {
        StatusCode::UNAUTHORIZED => CliError::Unauthenticated { code, message },
        s if s.is_client_error() => CliError::Refused { code, message },
        s if s.is_server_error() => CliError::Server {
            status: s.as_u16(),
            code,
            message,
        },
        s => CliError::BadResponse {
            url: url.to_string(),
            detail: format!("unexpected HTTP {s}"),
        },
    })
}

/// The start of a non-JSON error body, for context.
fn snippet(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.chars().take(200).collect())
}

/// `err` and its causes, e.g. "error sending request: connection refused".
fn error_chain(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// reqwest is built without a TLS crypto provider; one must be installed before any client
/// exists, even for `http://` URLs, or building the client panics.
fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error only means a provider is already installed, which is all we need.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(base: &str) -> Client {
        Client::build(
            parse_base(base, UrlOrigin::Env).expect("url"),
            Some("t0ken"),
        )
        .expect("client")
    }

    #[test]
    fn segments_are_percent_encoded() {
        let c = client("http://127.0.0.1:8787");
        assert_eq!(
            c.url(&["workspaces", "a b/c?d#e%", "calls"])
                .expect("url")
                .as_str(),
            "http://127.0.0.1:8787/api/v1/workspaces/a%20b%2Fc%3Fd%23e%25/calls"
        );
        assert_eq!(
            c.url(&["workspaces", ".."])
                .map_err(|e| e.exit_code())
                .err(),
            Some(2)
        );
    }

    #[test]
    fn query_pairs_are_percent_encoded() {
        let c = client("http://127.0.0.1:8787");
        assert_eq!(
            c.url_with_query(
                &["workspaces", "demo", "calls", "c 1"],
                &[("wait_ms", "20000"), ("a&b", "=")]
            )
            .expect("url")
            .as_str(),
            "http://127.0.0.1:8787/api/v1/workspaces/demo/calls/c%201?wait_ms=20000&a%26b=%3D"
        );
        assert_eq!(
            c.url_with_query(&["workspaces", "demo", "calls"], &[])
                .expect("url")
                .as_str(),
            "http://127.0.0.1:8787/api/v1/workspaces/demo/calls"
        );
    }

    #[test]
    fn base_path_prefix_is_kept() {
        let c = client("https://example.test/switchyard/");
        assert_eq!(
            c.url(&["me"]).expect("url").as_str(),
            "https://example.test/switchyard/api/v1/me"
        );
    }

    #[test]
    fn unusable_base_urls_are_usage_errors() {
        for base in ["not a url", "ftp://host", "mailto:x@y", "http://h/?q=1"] {
            let err = Client::anonymous(base).err().expect(base);
            assert_eq!(err.exit_code(), 2, "{base}");
            assert!(err.to_string().contains("--server"), "{err}");
        }
    }

    #[test]
    fn a_trailing_slash_names_the_same_server() {
        let url = |s: &str| parse_base(s, UrlOrigin::Env).expect("url");
        assert!(same_server(&url("http://h:8787"), &url("http://h:8787/")));
        assert!(same_server(&url("HTTP://H:80/x/"), &url("http://h/x")));
        assert!(!same_server(&url("http://h:8787"), &url("http://h:8788")));
        assert!(!same_server(&url("http://h/a"), &url("http://h/b")));
        assert_eq!(client("http://h:1/").server_url(), "http://h:1");
    }

    #[test]
    fn statuses_map_to_exit_codes() {
        let url = Url::parse("http://h/api/v1/x").expect("url");
        let body = r#"{"error":{"code":"workspace_not_found","message":"no such workspace"}}"#;
        let code = |status: u16, text: &str| {
            classify(
                StatusCode::from_u16(status).expect("status"),
                url.clone(),
                text.to_owned(),
            )
            .err()
            .map(|e| (e.exit_code(), e.to_string()))
        };
        assert_eq!(
            code(404, body),
            Some((4, "error[workspace_not_found]: no such workspace".into()))
        );
        assert_eq!(code(401, body).map(|c| c.0), Some(3));
        assert_eq!(code(500, body).map(|c| c.0), Some(5));
        assert_eq!(code(502, "bad gateway").map(|c| c.0), Some(5));
        assert_eq!(
            code(404, "").map(|c| c.1),
            Some("error[http_404]: Not Found from http://h/api/v1/x".into())
        );
        assert_eq!(code(200, "not json").map(|c| c.0), Some(5));
        assert_eq!(code(201, "{}"), None);
    }
}
