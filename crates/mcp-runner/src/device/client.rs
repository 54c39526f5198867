//! The device runner API: one method per `/api/v1/runner/...` route, authenticated with the
//! device credential, each answer sorted into what the runner must do about it. The long-poll,
//! the heartbeat, starts and receipt uploads go over the runner channel when the server opens
//! one.

use super::channel::{self, Channel};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use switchyard_protocol::CallId;
use switchyard_protocol::runner::{
    AcquireAnswer, AcquireLease, AuthStateReport, ChannelCall, ChannelComplete, ChannelError,
    ChannelReply, ChannelStart, CompleteAnswer, CompleteRequest, Epoch, Heartbeat, HeartbeatAnswer,
    LeaseAnswer, LeaseRequest, LifecycleEvent, ReceiptCheck, ReceiptCheckAnswer, StartAnswer,
    StartCheck, StartCheckAnswer, StartRequest,
};

/// How long to wait for a TCP/TLS connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an ordinary request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How much longer than its own wait a long poll may take before it counts as lost.
const LONG_POLL_SLACK: Duration = Duration::from_secs(15);

/// The error code of a stale epoch or a lost lease (HTTP 409).
const RUNNER_FENCED: &str = "runner_fenced";
/// The error code of a request the server cannot read (HTTP 400): on the runner channel, what
/// an older server answers a start or an upload with.
const INVALID_REQUEST: &str = "invalid_request";
/// The error code of a runner channel answer that would be longer than a line: the request is
/// to be sent again over its HTTP route.
const ANSWER_TOO_LONG: &str = "answer_too_long";

/// Installs the process-wide TLS crypto provider (ring). reqwest is built without one, so this
/// must run before the first HTTP client is built; calling it again is harmless.
pub fn install_tls_provider() {
    // Err only means a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Why a runner API request did not get the answer it asked for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiFailure {
    /// 401: the device credential is refused (`device_revoked`, or not valid at all). Nothing
    /// this runner sends will be accepted again.
    #[error("the server refused the device credential ({code}): {message}")]
    Revoked {
        /// The error code (`device_revoked`, `unauthenticated`).
        code: String,
        /// The server's message.
        message: String,
    },
    /// 409 `runner_fenced`: this runner's epoch is stale or its lease is lost.
    #[error("the runner lease was lost ({RUNNER_FENCED}): {message}")]
    Fenced {
        /// The server's message.
        message: String,
    },
    /// Any other 4xx: the server understood and refused this request.
    #[error("the server refused the request (HTTP {status}, {code}): {message}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// The error code.
        code: String,
        /// The server's message.
        message: String,
    },
    /// The server could not be reached, failed (5xx) or answered something unreadable; asking
    /// again later may work.
    #[error("the server is unavailable: {0}")]
    Unavailable(String),
}

/// The body of `POST /runner/lease/release`.
#[derive(Serialize)]
struct ReleaseLease {
    epoch: Epoch,
}

/// A device credential: sent as a bearer token, never printed.
#[derive(Clone)]
pub struct Credential(String);

impl Credential {
    /// Wraps a credential (`sy_dev_…`).
    pub fn new(value: String) -> Self {
        Self(value)
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential(<redacted>)")
    }
}

/// A client of one server's device runner API. The lease long-poll, the heartbeat, starts and
/// receipt uploads go over the runner channel (one upgraded connection, see [`channel`]) when
/// the server has one, the rest as plain HTTP requests.
#[derive(Clone)]
pub struct RunnerClient {
    http: reqwest::Client,
    /// `<server>/api/v1/runner`.
    base: String,
    credential: Credential,
    channel: Arc<Channel>,
}

impl fmt::Debug for RunnerClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunnerClient")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl RunnerClient {
    /// A client for the server at `server_url`. [`install_tls_provider`] must have run.
    pub fn new(server_url: &str, credential: Credential) -> Result<Self, ApiFailure> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            // Idle connections are dropped before the server's 30-second header timeout
            // closes them, so no request goes out on a connection being closed.
            .pool_idle_timeout(Duration::from_secs(20))
            // The runner API never redirects; following one could send the credential to
            // another server than the identity's.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| {
                ApiFailure::Unavailable(format!("cannot build the HTTP client: {error}"))
            })?;
        Ok(Self::with_http(http, server_url, credential))
    }

    /// A client for the server at `server_url` sending through `http` (which must not follow
    /// redirects), for a process that runs many device runners' clients on one HTTP client.
    pub fn with_http(http: reqwest::Client, server_url: &str, credential: Credential) -> Self {
        Self {
            http,
            base: format!("{}/api/v1/runner", server_url.trim_end_matches('/')),
            credential,
            channel: Arc::new(Channel::new()),
        }
    }

    /// Takes (or, for the same holder, resumes) the device's runner lease.
    pub async fn acquire(&self, holder: uuid::Uuid) -> Result<AcquireAnswer, ApiFailure> {
        self.post("lease/acquire", &AcquireLease { holder }, REQUEST_TIMEOUT)
            .await
    }

    /// Renews the lease; learns what to cancel and release.
    pub async fn heartbeat(&self, beat: &Heartbeat) -> Result<HeartbeatAnswer, ApiFailure> {
        let call = ChannelCall::Heartbeat(beat.clone());
        match self.on_channel(call, REQUEST_TIMEOUT).await {
            Some(Ok(ChannelReply::Heartbeat(answer))) => Ok(answer),
            Some(other) => Err(unexpected("heartbeat", other)),
            None => self.post("heartbeat", beat, REQUEST_TIMEOUT).await,
        }
    }

    /// Long-polls for work.
    pub async fn lease(&self, request: &LeaseRequest) -> Result<LeaseAnswer, ApiFailure> {
        let timeout = Duration::from_millis(request.wait_ms) + LONG_POLL_SLACK;
        let call = ChannelCall::Lease(request.clone());
        match self.on_channel(call, timeout).await {
            Some(Ok(ChannelReply::Lease(answer))) => Ok(answer),
            Some(other) => Err(unexpected("lease", other)),
            None => self.post("lease", request, timeout).await,
        }
    }

    /// Sends `call` on the runner channel; `None` when it is to go over its HTTP route: the
    /// server has no channel, the request is longer than a channel line, or its answer would
    /// be (the server answered `answer_too_long`, having handed nothing out).
    async fn on_channel(
        &self,
        call: ChannelCall,
        timeout: Duration,
    ) -> Option<Result<ChannelReply, ApiFailure>> {
        let open = || {
            let request = self
                .http
                .get(format!("{}/channel", self.base))
                .bearer_auth(&self.credential.0);
            channel::upgrade(request, REQUEST_TIMEOUT)
        };
        match self.channel.call(call, timeout, open).await? {
            Ok(ChannelReply::Error(ChannelError { code, .. })) if code == ANSWER_TOO_LONG => {
                tracing::debug!("an answer too long for the runner channel; asking over HTTP");
                None
            }
            answered => Some(answered),
        }
    }

    /// Asks to start a leased call.
    pub async fn start(&self, call: CallId, epoch: Epoch) -> Result<StartAnswer, ApiFailure> {
        let start = StartRequest { epoch };
        if self.channel.takes_reports() {
            let on_channel = ChannelCall::Start(ChannelStart {
                call,
                start: start.clone(),
            });
            match self.report_on_channel(on_channel).await {
                Some(Ok(ChannelReply::Start(answer))) => return Ok(answer),
                Some(other) => return Err(unexpected("start", other)),
                None => {}
            }
        }
        let path = format!("calls/{call}/start");
        self.post(&path, &start, REQUEST_TIMEOUT).await
    }

    /// Uploads a receipt.
    pub async fn complete(
        &self,
        call: CallId,
        request: &CompleteRequest,
    ) -> Result<CompleteAnswer, ApiFailure> {
        if self.channel.takes_reports() {
            let on_channel = ChannelCall::Complete(ChannelComplete {
                call,
                receipt: request.clone(),
            });
            match self.report_on_channel(on_channel).await {
                Some(Ok(ChannelReply::Complete(answer))) => return Ok(answer),
                Some(other) => return Err(unexpected("upload", other)),
                None => {}
            }
        }
        let path = format!("calls/{call}/complete");
        self.post(&path, request, REQUEST_TIMEOUT).await
    }

    /// Sends a start or an upload on the runner channel; `None` when it is to go as plain
    /// HTTP: no channel, too long for one, or a channel that does not take it (an older
    /// server's refuses it unread, so nothing was done).
    async fn report_on_channel(
        &self,
        call: ChannelCall,
    ) -> Option<Result<ChannelReply, ApiFailure>> {
        match self.on_channel(call, REQUEST_TIMEOUT).await? {
            Ok(ChannelReply::Error(ChannelError {
                status: 400, code, ..
            })) if code == INVALID_REQUEST => {
                self.channel.refuses_reports();
                None
            }
            answered => Some(answered),
        }
    }

    /// Asks which of these receipts must stay quarantined.
    pub async fn check_receipts(
        &self,
        check: &ReceiptCheck,
    ) -> Result<ReceiptCheckAnswer, ApiFailure> {
        self.post("receipts/check", check, REQUEST_TIMEOUT).await
    }

    /// Asks which of these recorded starts the server never acknowledged.
    pub async fn check_starts(&self, check: &StartCheck) -> Result<StartCheckAnswer, ApiFailure> {
        self.post("starts/check", check, REQUEST_TIMEOUT).await
    }

    /// Records a session lifecycle event.
    pub async fn event(&self, event: &LifecycleEvent) -> Result<(), ApiFailure> {
        self.post_no_content("events", event).await
    }

    /// Reports where a connection's device-held OAuth grant stands.
    pub async fn auth_state(&self, report: &AuthStateReport) -> Result<(), ApiFailure> {
        self.post_no_content("auth-state", report).await
    }

    /// Gives the lease up, so the next runner need not wait for it to expire.
    pub async fn release(&self, epoch: Epoch) -> Result<(), ApiFailure> {
        self.post_no_content("lease/release", &ReleaseLease { epoch })
            .await
    }

    async fn post<B: Serialize + ?Sized, A: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<A, ApiFailure> {
        let response = self.send(path, body, timeout).await?;
        response.json::<A>().await.map_err(|error| {
            ApiFailure::Unavailable(format!("unreadable answer from /runner/{path}: {error}"))
        })
    }

    async fn post_no_content<B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<(), ApiFailure> {
        self.send(path, body, REQUEST_TIMEOUT).await.map(drop)
    }

    /// Sends one request; a success status comes back as the response, anything else as a
    /// sorted failure.
    async fn send<B: Serialize + ?Sized>(
        &self,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<reqwest::Response, ApiFailure> {
        let response = self
            .http
            .post(format!("{}/{path}", self.base))
            .bearer_auth(&self.credential.0)
            .timeout(timeout)
            .json(body)
            .send()
            .await
            // Without the URL: reqwest's message is enough, and shorter in logs.
            .map_err(|error| {
                ApiFailure::Unavailable(format!("/runner/{path}: {}", error.without_url()))
            })?;
        if response.status().is_success() {
            return Ok(response);
        }
        Err(sorted_failure(path, response).await)
    }
}

/// What a runner channel's answer other than the one asked for means: the error it carries,
/// or (any other answer) a server that is not speaking the protocol.
fn unexpected(asked: &str, reply: Result<ChannelReply, ApiFailure>) -> ApiFailure {
    match reply {
        Err(failure) => failure,
        Ok(ChannelReply::Error(ChannelError {
            status,
            code,
            message,
        })) => failure_of(status, code, message, asked),
        Ok(other) => ApiFailure::Unavailable(format!(
            "the runner channel answered a {asked} request with {other:?}"
        )),
    }
}

/// The failure an unsuccessful answer from `/runner/{path}` stands for.
pub(super) async fn sorted_failure(path: &str, response: reqwest::Response) -> ApiFailure {
    let status = response.status().as_u16();
    let (code, message) = error_body(response).await;
    failure_of(status, code, message, path)
}

/// Sorts an error answer (HTTP status, code, message) from `/runner/{path}`.
fn failure_of(status: u16, code: String, message: String, path: &str) -> ApiFailure {
    match status {
        401 => ApiFailure::Revoked { code, message },
        409 if code == RUNNER_FENCED => ApiFailure::Fenced { message },
        status @ 400..=499 => ApiFailure::Refused {
            status,
            code,
            message,
        },
        status => ApiFailure::Unavailable(format!(
            "/runner/{path} answered HTTP {status} ({code}): {message}"
        )),
    }
}

/// The code and message of an error answer (`{"error":{"code":…,"message":…}}`), read loosely
/// so that a code this build does not know still comes through.
async fn error_body(response: reqwest::Response) -> (String, String) {
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    let field = |name: &str| {
        body.pointer(&format!("/error/{name}"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    (
        field("code").unwrap_or_else(|| "unknown".to_owned()),
        field("message").unwrap_or_else(|| status.to_string()),
    )
}
