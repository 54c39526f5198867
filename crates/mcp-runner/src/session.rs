//! One MCP client session: open it (spawn or connect, then `initialize`), list tools, call a
//! tool, close it.
//!
//! A stdio server is started contained ([`crate::contain`]: no capabilities, a scratch `HOME`
//! and working directory, killed with the runner) in its own process group
//! ([`ProcessGroup`]); closing the session closes
//! stdin, allows a short grace, sends SIGTERM to the group, waits up to a second for the server
//! to exit and then sends SIGKILL to whatever is left. A session dropped without
//! [`McpSession::close`] kills its group at once. The server's stderr is kept as a bounded tail
//! for diagnostics and never reaches a result.
//!
//! [`McpSession::call_tool`] reports what is known about the request's fate as a [`Dispatch`]:
//! whether the request certainly never left, was answered, or may have reached the server
//! without an answer. [`McpSession::call_tool_until_cancelled`] can also be cancelled by the
//! runner: it sends `notifications/cancelled` and still records an answer that arrives within
//! a grace period.
//!
//! The session owns its stdio child (rmcp only gets the pipes), so closing it can report how
//! the process ended.
//!
//! No message from the server is read past [`MAX_MCP_MESSAGE_BYTES`] (see [`message_bound`]):
//! a longer one ends the session, and the calls waiting on it are [`Dispatch::Oversized`].
//!
//! [`message_bound`]: crate::message_bound

use crate::contain::{self, ScratchDir};
use crate::endpoints::{EndpointError, EndpointGuard};
use crate::failure::InitializeFault;
use crate::launch::{SessionLaunch, child_environment, is_reserved_env_name};
use crate::message_bound::{
    BoundedLines, MAX_MCP_MESSAGE_BYTES, Overflow, WatchedHttp, overflow_message,
};
use crate::process_group::ProcessGroup;
use crate::tail::PipeTail;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientNotification,
    ClientRequest, CustomNotification, Implementation, MetaObject, PaginatedRequestParams,
    RequestId, RequestMetaObject, ServerResult, Tool,
};
use rmcp::service::{ClientInitializeError, PeerRequestOptions, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};
use std::process::{ExitStatus, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};
use switchyard_protocol::api::ConnectorSpec;
use tokio::process::Child;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// How long a stdio server may take to exit on its own once stdin is closed.
const STDIN_GRACE: Duration = Duration::from_millis(100);
/// How long a stdio server may take to exit after SIGTERM before the group is killed.
const TERMINATE_WAIT: Duration = Duration::from_secs(1);
/// How long to wait for the client to finish reaping a killed server.
const KILLED_WAIT: Duration = Duration::from_secs(1);
/// How long the client may take to stop its I/O loop (which closes the child's stdin).
const CLIENT_STOP_WAIT: Duration = Duration::from_secs(1);
/// How long an HTTP session may take to end (it tells the server to drop the session).
const HTTP_CLOSE_WAIT: Duration = Duration::from_secs(2);
/// How long to keep reading a failed server's stderr after killing it, so its last words
/// (usually the reason it failed) are in the error.
const STDERR_DRAIN_WAIT: Duration = Duration::from_millis(500);
/// More `tools/list` pages than any sane server sends: beyond this the server is looping.
const MAX_TOOL_PAGES: usize = 1000;

/// A tool as the MCP server describes it. Its JSON (a device discovery's result) uses the
/// MCP names: `name`, `description`, `inputSchema`, `annotations`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredTool {
    /// Tool name.
    pub name: String,
    /// Description, as the server gave it.
    pub description: Option<String>,
    /// JSON schema of the arguments.
    pub input_schema: Value,
    /// Server annotations (`ToolAnnotations` JSON): hints, never trusted.
    pub annotations: Option<Value>,
}

impl From<Tool> for DiscoveredTool {
    fn from(tool: Tool) -> Self {
        Self {
            name: tool.name.into_owned(),
            description: tool.description.map(|text| text.into_owned()),
            input_schema: Value::Object((*tool.input_schema).clone()),
            // Annotations are plain data; failing to serialize them would be an rmcp bug, and
            // they are only hints, so such a tool is listed without them.
            annotations: tool
                .annotations
                .and_then(|annotations| serde_json::to_value(annotations).ok()),
        }
    }
}

/// What became of one `tools/call` request.
#[derive(Clone, Debug, PartialEq)]
pub enum Dispatch {
    /// The server answered with a `CallToolResult`.
    Answered {
        /// The `CallToolResult` JSON.
        result: Value,
        /// Its `isError`.
        is_error: bool,
    },
    /// The server answered with a JSON-RPC error.
    Rejected {
        /// JSON-RPC error code.
        code: i64,
        /// JSON-RPC error message.
        message: String,
    },
    /// No answer within the timeout; `notifications/cancelled` was sent.
    TimedOut,
    /// The runner cancelled the call after sending it (`notifications/cancelled` was sent) and
    /// no answer came within the grace period: the effect is uncertain.
    Cancelled,
    /// The request was sent (or may have been) but the session ended without an answer, or the
    /// answer was not a `CallToolResult`.
    Lost {
        /// What happened.
        message: String,
    },
    /// The request certainly never reached the server: the session was already dead, or the
    /// server refused it before processing (HTTP authentication).
    NotSent {
        /// What happened.
        message: String,
    },
    /// The server sent a message longer than [`MAX_MCP_MESSAGE_BYTES`] (the answer, as a
    /// rule): the runner stopped reading it and the session ended without an answer read. The
    /// request reached the server, which answered; what it answered is not known.
    Oversized {
        /// What happened.
        message: String,
    },
}

/// Why a session could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The launch would set a variable the runner reserves for itself or the loader.
    #[error(
        "environment variable `{name}` is reserved by the runner and cannot be passed to an MCP \
         server; bind the credential to another variable name"
    )]
    ReservedEnv {
        /// The variable.
        name: String,
    },
    /// The stdio server's program could not be started.
    #[error(
        "cannot start MCP server `{command}`: {source}; check that the program exists on the \
         runner (looked up on the runner's PATH) and is executable"
    )]
    Spawn {
        /// The program.
        command: String,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// A launch header is not a valid HTTP header (the value is not printed: it may be secret).
    #[error(
        "HTTP header `{name}` has an invalid name or value; header values must be visible ASCII \
         without line breaks"
    )]
    InvalidHeader {
        /// The header name, as given.
        name: String,
    },
    /// The HTTP server refused the credentials.
    #[error(
        "the MCP server refused the request as unauthorized ({reason}); check the credential \
         bound to this connection"
    )]
    Unauthorized {
        /// The transport's explanation.
        reason: String,
    },
    /// The HTTP endpoint is refused by the runner's [`EndpointGuard`] (or does not resolve):
    /// nothing was sent to it.
    #[error("{0}")]
    Endpoint(#[from] EndpointError),
    /// The server started (or was reached) but the MCP handshake failed.
    #[error(
        "the MCP server did not complete initialization: {reason}; check that the connector's \
         command or URL points at an MCP server and that it starts without interactive input"
    )]
    Initialize {
        /// The handshake error.
        reason: String,
        /// What kind of failure it was, read from the error's types.
        fault: InitializeFault,
        /// The last of the server's stderr (stdio only). May hold secret values: redact before
        /// keeping it.
        stderr_tail: Option<String>,
    },
    /// A step did not finish within its deadline.
    #[error(
        "MCP {stage} did not finish within {after:?}; the server may be hung or too slow to start"
    )]
    Timeout {
        /// The step (`initialize`, `tools/list`).
        stage: &'static str,
        /// The deadline.
        after: Duration,
        /// The last of the server's stderr (stdio only). May hold secret values: redact before
        /// keeping it.
        stderr_tail: Option<String>,
    },
    /// The server answered a request with a JSON-RPC error.
    #[error("the MCP server answered {method} with error {code}: {message}")]
    Rejected {
        /// The MCP method.
        method: &'static str,
        /// JSON-RPC error code.
        code: i64,
        /// JSON-RPC error message.
        message: String,
    },
    /// The session broke or the server answered nonsense.
    #[error("MCP {method} failed: {reason}")]
    Transport {
        /// The MCP method.
        method: &'static str,
        /// What went wrong.
        reason: String,
    },
}

impl SessionError {
    /// The last of the server's stderr, when the error carries it. May hold secret values.
    pub fn stderr_tail(&self) -> Option<&str> {
        match self {
            Self::Initialize { stderr_tail, .. } | Self::Timeout { stderr_tail, .. } => {
                stderr_tail.as_deref()
            }
            _ => None,
        }
    }
}

/// How the runner may cancel a call it has sent.
#[derive(Clone, Debug)]
pub struct CallCancellation {
    /// Cancelled by the runner to cancel the call.
    pub token: CancellationToken,
    /// How long to wait for the server's answer after `notifications/cancelled`.
    pub grace: Duration,
}

/// The transport-specific part of a session.
#[derive(Debug)]
enum Transport {
    /// A local child in its own process group. rmcp only has its stdin and stdout, so the
    /// session alone reaps it and learns how it ended.
    Stdio {
        group: ProcessGroup,
        child: Box<Child>,
        stderr: Option<PipeTail>,
        /// Its `HOME` and working directory. Declared after `group`, so that a dropped session
        /// kills the group before removing it.
        scratch: ScratchDir,
    },
    /// A remote server over streamable HTTP.
    Http,
}

/// An initialized MCP client session.
#[derive(Debug)]
pub struct McpSession {
    client: RunningService<RoleClient, ClientConfig>,
    transport: Transport,
    /// Set when the server sent a message longer than the bound.
    overflow: Overflow,
}

impl McpSession {
    /// Starts (stdio) or connects to (HTTP) the server and completes the MCP handshake within
    /// `deadline`. An HTTP server is reached only at addresses `guard` admits.
    pub async fn open(
        launch: &SessionLaunch,
        guard: &EndpointGuard,
        deadline: Duration,
    ) -> Result<Self, SessionError> {
        match &launch.spec {
            ConnectorSpec::Stdio { command, args, .. } => {
                open_stdio(command, args, &launch.env, deadline).await
            }
            ConnectorSpec::Http { url } => open_http(url, &launch.headers, guard, deadline).await,
        }
    }

    /// What the server said about itself at `initialize`: its instructions, else its
    /// description, on one line and bounded to [`MAX_ABOUT`] characters.
    pub fn about(&self) -> Option<String> {
        let info = self.client.peer_info()?;
        let said = info.instructions.as_deref().or(info
            .server_info
            .as_ref()
            .and_then(|server| server.description.as_deref()))?;
        bounded_about(said)
    }

    /// Lists every tool, following `nextCursor` pages. Has no deadline of its own: bound it
    /// with a timeout (as [`discover`] does).
    pub async fn list_tools(&self) -> Result<Vec<DiscoveredTool>, SessionError> {
        let mut tools = Vec::new();
        let mut seen_cursors = HashSet::new();
        let mut cursor = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = PaginatedRequestParams::default().with_cursor(cursor);
            let page = self
                .client
                .list_tools(Some(params))
                .await
                .map_err(|error| request_error("tools/list", error))?;
            tools.extend(page.tools.into_iter().map(DiscoveredTool::from));
            match page.next_cursor {
                None => return Ok(tools),
                Some(next) if !seen_cursors.insert(next.clone()) => {
                    return Err(SessionError::Transport {
                        method: "tools/list",
                        reason: "the server repeated a pagination cursor".to_owned(),
                    });
                }
                Some(next) => cursor = Some(next),
            }
        }
        Err(SessionError::Transport {
            method: "tools/list",
            reason: format!("the server sent more than {MAX_TOOL_PAGES} pages"),
        })
    }

    /// Calls tool `name` with `arguments`, adding `meta` to the request's `_meta`, and waits up
    /// to `timeout` for the answer. On timeout `notifications/cancelled` is sent.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        timeout: Duration,
    ) -> Dispatch {
        let never = CallCancellation {
            token: CancellationToken::new(),
            grace: Duration::ZERO,
        };
        self.call_tool_until_cancelled(name, arguments, meta, timeout, &never)
            .await
    }

    /// Like [`McpSession::call_tool`], and cancellable: once `cancel.token` is cancelled,
    /// `notifications/cancelled` is sent for the request and an answer arriving within
    /// `cancel.grace` is still returned as it is; without one the call is
    /// [`Dispatch::Cancelled`].
    ///
    /// rmcp writes each message from its own task, so a cancellation made in the very instant
    /// the request is sent may reach the server first and be ignored. The call then ends as
    /// [`Dispatch::Cancelled`] all the same (uncertain), and its session should be closed.
    pub async fn call_tool_until_cancelled(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        timeout: Duration,
        cancel: &CallCancellation,
    ) -> Dispatch {
        let mut meta = meta;
        let span = crate::call_span::open(name, self.network_transport(), &mut meta);
        let dispatch = self
            .send_tool_call(name, arguments, meta, timeout, cancel)
            .instrument(span.clone())
            .await;
        crate::call_span::record_outcome(&span, &dispatch);
        dispatch
    }

    /// [`McpSession::call_tool_until_cancelled`] inside its span.
    async fn send_tool_call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        meta: Map<String, Value>,
        timeout: Duration,
        cancel: &CallCancellation,
    ) -> Dispatch {
        if self.client.is_transport_closed() {
            return Dispatch::NotSent {
                message: "the MCP session had already ended".to_owned(),
            };
        }
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = Some(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // No rmcp timeout: the deadline is kept below, next to cancellation.
        let options =
            PeerRequestOptions::no_options().with_meta(RequestMetaObject(MetaObject(meta)));
        let handle = match self.client.send_request_with_option(request, options).await {
            Ok(handle) => handle,
            // The session loop is gone: the request was never queued for writing.
            Err(error) => {
                return Dispatch::NotSent {
                    message: error.to_string(),
                };
            }
        };
        let request_id = handle.id.clone();
        tracing::Span::current().record("jsonrpc.request.id", tracing::field::display(&request_id));
        let mut answer = handle.rx;
        tokio::select! {
            answered = &mut answer => self.dispatch_for(answered),
            () = tokio::time::sleep(timeout) => {
                self.notify_cancelled(&request_id, "request timeout").await;
                Dispatch::TimedOut
            }
            () = cancel.token.cancelled() => {
                self.notify_cancelled(&request_id, "cancelled by the user").await;
                match tokio::time::timeout(cancel.grace, &mut answer).await {
                    Ok(answered) => self.dispatch_for(answered),
                    Err(_) => Dispatch::Cancelled,
                }
            }
        }
    }

    /// Tells the server to stop working on request `request_id`.
    ///
    /// rmcp's typed `CancelledNotification` would also resolve the pending request locally as
    /// cancelled and drop a later answer; an answer that still arrives must be recorded, so the
    /// same wire message is sent as a custom notification, which rmcp passes through.
    async fn notify_cancelled(&self, request_id: &RequestId, reason: &str) {
        let notification = CustomNotification::new(
            "notifications/cancelled",
            Some(json!({ "requestId": request_id, "reason": reason })),
        );
        if let Err(error) = self
            .client
            .send_notification(ClientNotification::CustomNotification(notification))
            .await
        {
            // The session is ending: the server gets no cancellation but no more work either.
            tracing::debug!(%error, "could not send notifications/cancelled");
        }
    }

    /// What an answer (or the lack of one) to `tools/call` means.
    fn dispatch_for(
        &self,
        answered: Result<Result<ServerResult, ServiceError>, oneshot::error::RecvError>,
    ) -> Dispatch {
        // rmcp drops the responder when the session loop ends without an answer.
        let answered = answered.unwrap_or(Err(ServiceError::TransportClosed));
        match answered {
            Ok(ServerResult::CallToolResult(result)) => {
                let is_error = result.is_error == Some(true);
                match serde_json::to_value(result) {
                    Ok(result) => Dispatch::Answered { result, is_error },
                    Err(error) => Dispatch::Lost {
                        message: format!("the answer could not be re-encoded: {error}"),
                    },
                }
            }
            Ok(_) => Dispatch::Lost {
                message: "the server answered tools/call with something other than a \
                          CallToolResult"
                    .to_owned(),
            },
            Err(ServiceError::McpError(error)) => Dispatch::Rejected {
                code: i64::from(error.code.0),
                message: error.message.into_owned(),
            },
            Err(_) if self.overflow.happened() => Dispatch::Oversized {
                message: overflow_message(),
            },
            Err(error) if self.refused_before_processing(&error) => Dispatch::NotSent {
                message: error.to_string(),
            },
            Err(error) => Dispatch::Lost {
                message: error.to_string(),
            },
        }
    }

    /// Whether a failed request certainly had no effect on the server.
    fn refused_before_processing(&self, error: &ServiceError) -> bool {
        match self.transport {
            // Writing a line to the child's stdin failed, so the child never read a complete
            // request (it had closed its end of the pipe).
            Transport::Stdio { .. } => matches!(error, ServiceError::TransportSend(_)),
            // An HTTP send error may come after the server received the request, unless it is
            // an authentication refusal, which happens before any processing.
            Transport::Http => error.auth_challenge().is_some(),
        }
    }

    /// The semantic conventions' `network.transport` of the session: `pipe` for stdio, `tcp`
    /// for streamable HTTP.
    fn network_transport(&self) -> &'static str {
        match self.transport {
            Transport::Stdio { .. } => "pipe",
            Transport::Http => "tcp",
        }
    }

    /// The last 256 KiB of a stdio server's stderr; `None` for HTTP. May hold secret values.
    pub fn stderr_tail(&self) -> Option<String> {
        match &self.transport {
            Transport::Stdio {
                stderr: Some(stderr),
                ..
            } => Some(stderr.snapshot()),
            Transport::Stdio { stderr: None, .. } | Transport::Http => None,
        }
    }

    /// Whether the session has ended on its own (the server exited or hung up): a call on it
    /// would not be sent.
    pub fn is_closed(&self) -> bool {
        self.client.is_transport_closed()
    }

    /// The process group id of a stdio server (its PID); `None` for HTTP.
    pub fn process_group_id(&self) -> Option<u32> {
        match &self.transport {
            Transport::Stdio { group, .. } => Some(group.id()),
            Transport::Http => None,
        }
    }

    /// Ends the session. For stdio: close stdin, a short grace, SIGTERM to the group, up to a
    /// second for the server to exit, then SIGKILL to the group. Returns how a stdio server
    /// ended, once reaped (`None` for HTTP, or when it could not be reaped in time).
    pub async fn close(self) -> Option<ExitStatus> {
        let Self {
            mut client,
            transport,
            ..
        } = self;
        match transport {
            Transport::Http => {
                if tokio::time::timeout(HTTP_CLOSE_WAIT, client.close())
                    .await
                    .is_err()
                {
                    tracing::warn!("MCP HTTP session did not close in time; abandoned it");
                }
                None
            }
            Transport::Stdio {
                mut group,
                mut child,
                stderr,
                scratch,
            } => {
                // Stopping the client's I/O loop drops the child's stdin: a well-behaved server
                // exits on EOF. The group signals below make sure it does, and reach anything it
                // left behind in its group.
                if tokio::time::timeout(CLIENT_STOP_WAIT, client.close())
                    .await
                    .is_err()
                {
                    tracing::debug!(pgid = group.id(), "MCP client loop did not stop in time");
                }
                let mut status = tokio::time::timeout(STDIN_GRACE, child.wait())
                    .await
                    .ok()
                    .and_then(Result::ok);
                group.terminate();
                if status.is_none() {
                    status = tokio::time::timeout(TERMINATE_WAIT, child.wait())
                        .await
                        .ok()
                        .and_then(Result::ok);
                }
                group.kill();
                if status.is_none() {
                    status = tokio::time::timeout(KILLED_WAIT, child.wait())
                        .await
                        .ok()
                        .and_then(Result::ok);
                }
                if status.is_none() {
                    tracing::warn!(
                        pgid = group.id(),
                        "killed MCP server was not reaped in time"
                    );
                }
                drop(stderr);
                // The group was killed: nothing uses the scratch directory any more.
                drop(scratch);
                status
            }
        }
    }
}

/// What a discovery read from a server: its tools, and what it says it is for.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Discovery {
    /// Every tool it listed.
    pub tools: Vec<DiscoveredTool>,
    /// What it said about itself at `initialize` (its instructions, else its description),
    /// bounded to [`MAX_ABOUT`] characters.
    #[serde(default)]
    pub about: Option<String>,
}

/// The longest `about` kept from a server.
pub const MAX_ABOUT: usize = 500;

/// What a server `said` about itself as [`Discovery::about`] keeps it: on one line, cut to
/// [`MAX_ABOUT`] characters (ending in `…`); `None` when it said nothing but whitespace.
pub fn bounded_about(said: &str) -> Option<String> {
    let line = said.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() {
        return None;
    }
    Some(match line.char_indices().nth(MAX_ABOUT) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    })
}

/// Opens a session (HTTP: to an address `guard` admits), lists its tools and closes it, all
/// within `deadline`.
pub async fn discover(
    launch: &SessionLaunch,
    guard: &EndpointGuard,
    deadline: Duration,
) -> Result<Discovery, SessionError> {
    initialize_then_discover(launch, guard, deadline).await?
}

/// [`discover`], telling the two steps apart: the outer error is the handshake's (the server
/// could not be reached or started, refused the credentials, or is not an MCP server), the
/// inner one the tool listing's, after a handshake that passed.
pub async fn initialize_then_discover(
    launch: &SessionLaunch,
    guard: &EndpointGuard,
    deadline: Duration,
) -> Result<Result<Discovery, SessionError>, SessionError> {
    let started = Instant::now();
    let session = McpSession::open(launch, guard, deadline).await?;
    let about = session.about();
    let listed = tokio::time::timeout(
        deadline.saturating_sub(started.elapsed()),
        session.list_tools(),
    )
    .await;
    let stderr_tail = session.stderr_tail();
    // A close cut short by the deadline still kills the group when the session is dropped.
    let _ = tokio::time::timeout(deadline.saturating_sub(started.elapsed()), session.close()).await;
    let listed = listed.unwrap_or(Err(SessionError::Timeout {
        stage: "tools/list",
        after: deadline,
        stderr_tail,
    }));
    Ok(listed.map(|tools| Discovery { tools, about }))
}

/// What this runner tells servers about itself.
fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("switchyard-mcp-runner", env!("CARGO_PKG_VERSION")),
    )
}

async fn open_stdio(
    command: &str,
    args: &[String],
    env: &[(String, String)],
    deadline: Duration,
) -> Result<McpSession, SessionError> {
    if let Some((name, _)) = env.iter().find(|(name, _)| is_reserved_env_name(name)) {
        return Err(SessionError::ReservedEnv { name: name.clone() });
    }
    let spawn_error = |source| SessionError::Spawn {
        command: command.to_owned(),
        source,
    };
    let scratch = ScratchDir::create().map_err(spawn_error)?;
    let env = child_environment(std::env::vars_os(), env);
    let mut cmd = contain::stdio_command(command, args, env, &scratch).map_err(spawn_error)?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(spawn_error)?;
    let Some(mut group) = child.id().and_then(ProcessGroup::adopt) else {
        // Not a group we may signal: stop the child itself.
        let _ = child.start_kill();
        return Err(spawn_error(std::io::Error::other(
            "the started process has no usable process id",
        )));
    };
    let stderr = child.stderr.take().map(PipeTail::spawn);
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        group.kill();
        return Err(spawn_error(std::io::Error::other(
            "the started process has no stdin or stdout pipe",
        )));
    };
    tracing::debug!(pgid = group.id(), command, "started stdio MCP server");

    let overflow = Overflow::default();
    let stdout = BoundedLines::new(stdout, MAX_MCP_MESSAGE_BYTES, overflow.clone());
    let initialized = tokio::time::timeout(deadline, client_config().serve((stdout, stdin))).await;
    match initialized {
        Ok(Ok(client)) => Ok(McpSession {
            client,
            transport: Transport::Stdio {
                group,
                child: Box::new(child),
                stderr,
                scratch,
            },
            overflow,
        }),
        Ok(Err(error)) => {
            group.kill();
            Err(SessionError::Initialize {
                reason: error.to_string(),
                fault: InitializeFault::NotMcp,
                stderr_tail: drained(stderr).await,
            })
        }
        Err(_) => {
            group.kill();
            Err(SessionError::Timeout {
                stage: "initialize",
                after: deadline,
                stderr_tail: drained(stderr).await,
            })
        }
    }
}

/// The stderr of a killed server, once its pipe has been read to the end (or a short wait).
async fn drained(stderr: Option<PipeTail>) -> Option<String> {
    let stderr = stderr?;
    Some(stderr.finish(STDERR_DRAIN_WAIT).await)
}

async fn open_http(
    url: &str,
    headers: &[(String, String)],
    guard: &EndpointGuard,
    deadline: Duration,
) -> Result<McpSession, SessionError> {
    install_crypto_provider();
    // A literal address is never resolved, so it is screened here; a name is screened here
    // for a clear refusal, and again by the client's resolver at every connect.
    tokio::time::timeout(deadline, guard.screen(url))
        .await
        .map_err(|_| SessionError::Timeout {
            stage: "initialize",
            after: deadline,
            stderr_tail: None,
        })??;
    let mut custom_headers = HashMap::new();
    for (name, value) in headers {
        let invalid = || SessionError::InvalidHeader { name: name.clone() };
        let header_name = HeaderName::try_from(name.as_str()).map_err(|_| invalid())?;
        let mut header_value = HeaderValue::try_from(value.as_str()).map_err(|_| invalid())?;
        // Keeps the value out of reqwest's and rmcp's Debug output.
        header_value.set_sensitive(true);
        custom_headers.insert(header_name, header_value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(custom_headers)
        .max_json_response_size(MAX_MCP_MESSAGE_BYTES)
        .max_sse_event_size(MAX_MCP_MESSAGE_BYTES);
    let overflow = Overflow::default();
    let http =
        WatchedHttp::new(overflow.clone(), guard).map_err(|error| SessionError::Initialize {
            reason: format!("cannot build the HTTP client: {error}"),
            fault: InitializeFault::Unreachable,
            stderr_tail: None,
        })?;
    let watched = http.clone();
    let transport = StreamableHttpClientTransport::with_client(http, config);

    match tokio::time::timeout(deadline, client_config().serve(transport)).await {
        Ok(Ok(client)) => Ok(McpSession {
            client,
            transport: Transport::Http,
            overflow,
        }),
        // A redirect the guard refused fails the handshake: say why, with the guard's code.
        Ok(Err(error)) => Err(watched
            .refused_redirect()
            .map_or_else(|| initialize_error(error), SessionError::Endpoint)),
        Err(_) => Err(SessionError::Timeout {
            stage: "initialize",
            after: deadline,
            stderr_tail: None,
        }),
    }
}

fn initialize_error(error: ClientInitializeError) -> SessionError {
    if error.is_authorization_required() || error.auth_challenge().is_some() {
        SessionError::Unauthorized {
            reason: error.to_string(),
        }
    } else {
        SessionError::Initialize {
            fault: InitializeFault::of_http(&error),
            reason: error.to_string(),
            stderr_tail: None,
        }
    }
}

fn request_error(method: &'static str, error: ServiceError) -> SessionError {
    match error {
        ServiceError::McpError(error) => SessionError::Rejected {
            method,
            code: i64::from(error.code.0),
            message: error.message.into_owned(),
        },
        error if error.auth_challenge().is_some() => SessionError::Unauthorized {
            reason: error.to_string(),
        },
        error => SessionError::Transport {
            method,
            reason: error.to_string(),
        },
    }
}

/// reqwest is built without a TLS provider; rmcp's HTTP transport builds a client that panics
/// unless the process has installed one.
fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error means another part of the process installed a provider first: that one
        // serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
