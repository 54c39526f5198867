//! A small client for the Switchyard HTTP API, as a user (personal API token), as a device
//! (device credential) or as nobody. JSON in, JSON out; an unexpected status is an
//! [`Error::Api`]. The benchmark measures through it, so it keeps a large idle pool and sends
//! without Nagle's delay.

use crate::error::{Error, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;

/// One answer: its status and JSON body (`null` when empty).
#[derive(Clone, Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// JSON body, or a string when the body is not JSON.
    pub body: Value,
}

impl Answer {
    /// The body as `T`.
    pub fn parse<T: DeserializeOwned>(&self, what: &str) -> Result<T> {
        from_json(self.body.clone(), what)
    }

    /// The answer if its status is 2xx, else an [`Error::Api`] naming the request `what`.
    pub fn successful(self, what: &str) -> Result<Answer> {
        if (200..300).contains(&self.status) {
            Ok(self)
        } else {
            Err(Error::Api {
                what: what.to_owned(),
                status: self.status,
                body: self.body.to_string(),
            })
        }
    }
}

/// A JSON answer as `T`; `what` names it in the error.
pub fn from_json<T: DeserializeOwned>(body: Value, what: &str) -> Result<T> {
    serde_json::from_value(body.clone())
        .map_err(|e| Error::Setup(format!("{what}: unexpected answer ({e}): {body}")))
}

/// The API of one server, with one bearer token (or none).
#[derive(Clone, Debug)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// Installs the TLS provider reqwest needs (it is built without one); call before any client.
pub fn install_tls_provider() {
    // Err only means a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl Api {
    /// A client for the server at `url` (e.g. `http://127.0.0.1:8787`).
    pub fn new(url: &str, token: Option<&str>) -> Result<Api> {
        Api::with_idle_pool(url, token, 1024)
    }

    /// [`Api::new`] keeping up to `max_idle` idle connections (one per concurrent request that
    /// should not reconnect next time).
    pub fn with_idle_pool(url: &str, token: Option<&str>, max_idle: usize) -> Result<Api> {
        install_tls_provider();
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(max_idle)
            // Idle connections are dropped before the server's 30-second header timeout
            // closes them, so no request goes out on a connection being closed.
            .pool_idle_timeout(Duration::from_secs(20))
            .tcp_nodelay(true)
            // A long-poll waits at most ~25 s: anything longer is a hang.
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| Error::Http {
                what: "building the HTTP client".into(),
                message: e.to_string(),
            })?;
        Ok(Api {
            http,
            base: format!("{}/api/v1", url.trim_end_matches('/')),
            token: token.map(str::to_owned),
        })
    }

    /// The same server with another bearer token (or none); shares the connection pool.
    pub fn with_token(&self, token: Option<&str>) -> Api {
        Api {
            token: token.map(str::to_owned),
            ..self.clone()
        }
    }

    /// The same token against another base URL (e.g. another replica); shares the pool.
    pub fn with_url(&self, url: &str) -> Api {
        Api {
            base: format!("{}/api/v1", url.trim_end_matches('/')),
            ..self.clone()
        }
    }

    /// `POST path` with a JSON body; any status.
    pub async fn try_post(&self, path: &str, body: &impl Serialize) -> Result<Answer> {
        let mut request = self.http.post(format!("{}{path}", self.base)).json(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        answer(format!("POST {path}"), request.send().await).await
    }

    /// `GET path`; any status.
    pub async fn try_get(&self, path: &str) -> Result<Answer> {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        answer(format!("GET {path}"), request.send().await).await
    }

    /// `POST path`, expecting a 2xx answer; its body.
    pub async fn post(&self, path: &str, body: &impl Serialize) -> Result<Value> {
        let answer = self.try_post(path, body).await?;
        Ok(answer.successful(&format!("POST {path}"))?.body)
    }

    /// `PATCH path` with a JSON body, expecting a 2xx answer; its body.
    pub async fn patch(&self, path: &str, body: &impl Serialize) -> Result<Value> {
        let mut request = self.http.patch(format!("{}{path}", self.base)).json(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let answer = answer(format!("PATCH {path}"), request.send().await).await?;
        Ok(answer.successful(&format!("PATCH {path}"))?.body)
    }

    /// `PUT path` with a JSON body, expecting a 2xx answer; its body.
    pub async fn put(&self, path: &str, body: &impl Serialize) -> Result<Value> {
        let mut request = self.http.put(format!("{}{path}", self.base)).json(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let answer = answer(format!("PUT {path}"), request.send().await).await?;
        Ok(answer.successful(&format!("PUT {path}"))?.body)
    }

    /// `GET path`, expecting a 2xx answer; its body.
    pub async fn get(&self, path: &str) -> Result<Value> {
        let answer = self.try_get(path).await?;
        Ok(answer.successful(&format!("GET {path}"))?.body)
    }
}

async fn answer(what: String, sent: reqwest::Result<reqwest::Response>) -> Result<Answer> {
    let response = sent.map_err(|e| Error::Http {
        what: what.clone(),
        message: e.to_string(),
    })?;
    let status = response.status().as_u16();
    let text = response.text().await.map_err(|e| Error::Http {
        what,
        message: e.to_string(),
    })?;
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Ok(Answer { status, body })
}
