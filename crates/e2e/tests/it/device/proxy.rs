//! An HTTP proxy in front of the server that forwards every request as a plain one and drops
//! `Connection` and `Upgrade` on the way, as some proxies do: a runner channel cannot open
//! through it. It remembers each request's method and path.

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::header::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HOST, UPGRADE};
use axum::response::Response;
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

/// A running proxy; it stops when dropped.
pub struct PlainProxy {
    /// The URL to reach the server through.
    pub url: String,
    seen: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

/// Where requests go, and what has passed.
#[derive(Clone)]
struct Upstream {
    url: String,
    http: reqwest::Client,
    seen: Arc<Mutex<Vec<String>>>,
}

impl PlainProxy {
    /// Listens on a free loopback port and forwards to `upstream` (a base URL).
    pub async fn start(upstream: &str) -> PlainProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let url = format!("http://{}", listener.local_addr().expect("proxy address"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let upstream = Upstream {
            url: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            seen: Arc::clone(&seen),
        };
        let app = axum::Router::new().fallback(forward).with_state(upstream);
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("serve the proxy");
        });
        PlainProxy { url, seen, task }
    }

    /// `METHOD /path` of every request forwarded so far, in order.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().expect("proxy log").clone()
    }
}

impl Drop for PlainProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Forwards `request` without its hop-by-hop headers and answers what the server answered.
async fn forward(State(upstream): State<Upstream>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = to_bytes(body, usize::MAX).await.expect("read the request");
    upstream
        .seen
        .lock()
        .expect("proxy log")
        .push(format!("{} {}", parts.method, parts.uri.path()));
    let mut headers = parts.headers;
    for name in [HOST, CONNECTION, UPGRADE, CONTENT_LENGTH] {
        headers.remove(name);
    }
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let answer = upstream
        .http
        .request(parts.method, format!("{}{target}", upstream.url))
        .headers(headers)
        .body(body)
        .send()
        .await
        .expect("forward to the server");
    let status = answer.status();
    let content_type = answer.headers().get(CONTENT_TYPE).cloned();
    let body = answer.bytes().await.expect("read the answer");
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    if let Some(content_type) = content_type {
        response.headers_mut().insert(CONTENT_TYPE, content_type);
    }
    response
}
