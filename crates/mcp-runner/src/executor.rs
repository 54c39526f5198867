//! The executor loop: lease calls from a [`ControlPlane`], run each in its own task and report
//! how each ended.
//!
//! Per call: resolve the launch, open a session, ask the control plane to start the call, and
//! only on [`StartDecision::Proceed`] send `tools/call`; then report the completion and close
//! the session. What can go wrong before the start is a `failed` completion (certainly no
//! effect); what goes wrong after the request may have left is `unknown`, never retried.
//!
//! Guarantees:
//! - No request is sent without a `Proceed` for the call under its lease epoch.
//! - A completion is never dropped: an unavailable control plane is retried with backoff until
//!   it accepts the report or fences the runner.
//! - Once fenced, the executor leases nothing more, starts nothing more, and returns when its
//!   running calls have ended.
//! - Arguments, results and secret values are never logged.

use crate::control::{ControlError, ControlPlane, StartDecision};
use crate::launch::SessionLaunch;
use crate::session::{Dispatch, McpSession, SessionError};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;
use switchyard_protocol::api::CallError;
use switchyard_protocol::runner::{Completion, LeasedCall};
use tokio::task::{JoinError, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The `_meta` key carrying the call's request id to the MCP server (for receipt lookups).
pub const REQUEST_ID_META_KEY: &str = "io.switchyard/request_id";

/// First delay before retrying an unavailable control plane.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
/// Longest delay between retries.
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Turns a leased call into a session launch (connector spec plus resolved secrets). An error
/// fails the call before anything is sent.
pub type LaunchResolver =
    Arc<dyn Fn(&LeasedCall) -> Result<SessionLaunch, CallError> + Send + Sync>;

/// How an executor runs.
#[derive(Clone, Debug)]
pub struct ExecutorConfig {
    /// Most calls running at once (at least one is always allowed).
    pub max_concurrent: usize,
    /// How long one lease request may wait for work (a long poll).
    pub lease_wait: Duration,
    /// Deadline for starting and initializing an MCP session.
    pub open_deadline: Duration,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            max_concurrent: 8,
            lease_wait: Duration::from_secs(25),
            open_deadline: Duration::from_secs(30),
        }
    }
}

/// Runs leased calls against MCP servers until shut down or fenced.
pub struct Executor<C: ControlPlane> {
    control: Arc<C>,
    resolver: LaunchResolver,
    config: ExecutorConfig,
}

impl<C: ControlPlane> Executor<C> {
    /// An executor leasing from `control` and launching sessions through `resolver`.
    pub fn new(control: Arc<C>, resolver: LaunchResolver, config: ExecutorConfig) -> Self {
        Self {
            control,
            resolver,
            config,
        }
    }

    /// Leases and runs calls until `shutdown` is cancelled or the control plane fences this
    /// runner; then leases nothing more and returns once every running call has ended.
    ///
    /// A lease request still waiting when shutdown comes is dropped: calls it may have leased
    /// were never started, so their leases expire and they are queued again.
    pub async fn run(self, shutdown: CancellationToken) {
        let fenced = CancellationToken::new();
        let context = Arc::new(CallContext {
            control: Arc::clone(&self.control),
            resolver: self.resolver,
            sessions: Sessions {
                open_deadline: self.config.open_deadline,
            },
            shutdown: shutdown.clone(),
            fenced: fenced.clone(),
        });
        let max_concurrent = self.config.max_concurrent.max(1);
        let mut calls = JoinSet::new();
        let mut backoff = Backoff::default();

        loop {
            while let Some(ended) = calls.try_join_next() {
                log_task_end(ended);
            }
            if shutdown.is_cancelled() || fenced.is_cancelled() {
                break;
            }
            let free = max_concurrent.saturating_sub(calls.len());
            if free == 0 {
                tokio::select! {
                    Some(ended) = calls.join_next() => log_task_end(ended),
                    () = shutdown.cancelled() => {}
                    () = fenced.cancelled() => {}
                }
                continue;
            }
            let leased = tokio::select! {
                leased = self.control.lease(free, self.config.lease_wait) => leased,
                () = shutdown.cancelled() => break,
                () = fenced.cancelled() => break,
            };
            match leased {
                Ok(leased) => {
                    backoff.reset();
                    for call in leased {
                        let span = tracing::info_span!(
                            "call",
                            call_id = %call.call_id,
                            connection_id = %call.connection.connection_id,
                            tool = %call.tool_name,
                        );
                        calls.spawn(run_call(Arc::clone(&context), call).instrument(span));
                    }
                }
                Err(ControlError::Fenced(epoch)) => {
                    tracing::warn!(?epoch, "lease refused: runner fenced; stopping");
                    fenced.cancel();
                }
                Err(ControlError::Unavailable(reason)) => {
                    let delay = backoff.next_delay();
                    tracing::warn!(%reason, retry_in = ?delay, "cannot lease calls");
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = shutdown.cancelled() => {}
                        () = fenced.cancelled() => {}
                    }
                }
            }
        }

        tracing::info!(
            active = calls.len(),
            "executor stopping; waiting for running calls"
        );
        while let Some(ended) = calls.join_next().await {
            log_task_end(ended);
        }
        tracing::info!("executor stopped");
    }
}

/// What every call task shares.
struct CallContext<C> {
    control: Arc<C>,
    resolver: LaunchResolver,
    sessions: Sessions,
    /// The executor is shutting down: calls not yet started give up their start.
    shutdown: CancellationToken,
    /// The control plane fenced this runner: start nothing, stop reporting.
    fenced: CancellationToken,
}

/// Where calls get their MCP sessions and give them back. Today every call opens a fresh
/// session and closes it afterwards; warm session reuse belongs here.
struct Sessions {
    open_deadline: Duration,
}

impl Sessions {
    async fn acquire(&self, launch: &SessionLaunch) -> Result<McpSession, SessionError> {
        McpSession::open(launch, self.open_deadline).await
    }

    async fn release(&self, session: McpSession) {
        session.close().await;
    }
}

/// Runs one leased call from launch to completion report.
async fn run_call<C: ControlPlane>(context: Arc<CallContext<C>>, call: LeasedCall) {
    let arguments = match &call.arguments {
        Value::Object(arguments) => arguments.clone(),
        _ => {
            let error = call_error("invalid_arguments", "tool arguments must be a JSON object");
            report(&context, &call, Completion::Failed { error }).await;
            return;
        }
    };
    let launch = match (context.resolver)(&call) {
        Ok(launch) => launch,
        Err(error) => {
            tracing::warn!(code = %error.code, "cannot prepare the MCP session; failing the call");
            report(&context, &call, Completion::Failed { error }).await;
            return;
        }
    };
    let opened = context.sessions.acquire(&launch).await;
    // The launch holds secret values; the session no longer needs them.
    drop(launch);
    let session = match opened {
        Ok(session) => session,
        Err(error) => {
            tracing::warn!(%error, "cannot open the MCP session; failing the call");
            let error = call_error("spawn_failed", error.to_string());
            report(&context, &call, Completion::Failed { error }).await;
            return;
        }
    };

    if !start(&context, &call).await {
        context.sessions.release(session).await;
        return;
    }

    let timeout = Duration::from_secs(u64::from(call.timeout_seconds));
    let mut meta = Map::new();
    meta.insert(
        REQUEST_ID_META_KEY.to_owned(),
        Value::String(call.request_id.to_string()),
    );
    let dispatch = session
        .call_tool(&call.tool_name, arguments, meta, timeout)
        .await;
    let completion = completion_for(dispatch, call.timeout_seconds);
    // Reporting need not wait for the server's grace period, and closing must not wait for an
    // unavailable control plane.
    tokio::join!(
        report(&context, &call, completion),
        context.sessions.release(session)
    );
}

/// Asks the control plane to start the call; true only when the request may now be sent.
/// An unavailable control plane is retried until it answers, the runner is fenced or the
/// executor shuts down (giving up is safe: nothing was sent, and the lease will expire).
async fn start<C: ControlPlane>(context: &CallContext<C>, call: &LeasedCall) -> bool {
    let mut backoff = Backoff::default();
    loop {
        if context.fenced.is_cancelled() {
            return false;
        }
        match context.control.start(call.call_id, call.epoch).await {
            Ok(StartDecision::Proceed) => return true,
            Ok(StartDecision::Abandon { reason }) => {
                tracing::info!(%reason, "start refused; the call is not sent");
                return false;
            }
            Err(ControlError::Fenced(epoch)) => {
                tracing::warn!(?epoch, "start refused: runner fenced; the call is not sent");
                context.fenced.cancel();
                return false;
            }
            Err(ControlError::Unavailable(reason)) => {
                let delay = backoff.next_delay();
                tracing::warn!(%reason, retry_in = ?delay, "cannot start the call");
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = context.shutdown.cancelled() => {
                        tracing::info!("shutting down before the start was acknowledged; the call is not sent");
                        return false;
                    }
                    () = context.fenced.cancelled() => return false,
                }
            }
        }
    }
}

/// Reports `completion`, retrying an unavailable control plane until it accepts the report or
/// fences the runner.
async fn report<C: ControlPlane>(
    context: &CallContext<C>,
    call: &LeasedCall,
    completion: Completion,
) {
    let outcome = outcome_name(&completion);
    let mut backoff = Backoff::default();
    loop {
        match context
            .control
            .complete(call.call_id, call.epoch, completion.clone())
            .await
        {
            Ok(()) => {
                tracing::info!(outcome, "call completed");
                return;
            }
            Err(ControlError::Fenced(epoch)) => {
                tracing::warn!(?epoch, outcome, "completion refused: runner fenced");
                context.fenced.cancel();
                return;
            }
            Err(ControlError::Unavailable(reason)) => {
                let delay = backoff.next_delay();
                tracing::warn!(%reason, outcome, retry_in = ?delay, "cannot report the completion");
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// What a dispatch means for the call.
fn completion_for(dispatch: Dispatch, timeout_seconds: u32) -> Completion {
    match dispatch {
        Dispatch::Answered {
            result,
            is_error: false,
        } => Completion::Succeeded { result },
        Dispatch::Answered {
            result,
            is_error: true,
        } => Completion::ToolError { result },
        // A JSON-RPC error is the server's answer too: shown like an error result.
        Dispatch::Rejected { code, message } => {
            tracing::info!(code, "the MCP server answered with a JSON-RPC error");
            Completion::ToolError {
                result: json!({
                    "content": [{ "type": "text", "text": message }],
                    "isError": true,
                }),
            }
        }
        Dispatch::TimedOut => Completion::Unknown {
            error: call_error(
                "timeout",
                format!("no answer within {timeout_seconds} s; the call was cancelled"),
            ),
        },
        Dispatch::Lost { message } => Completion::Unknown {
            error: call_error("transport_closed", message),
        },
        Dispatch::NotSent { message } => Completion::Failed {
            error: call_error("not_sent", message),
        },
    }
}

fn call_error(code: &str, message: impl Into<String>) -> CallError {
    CallError {
        code: code.to_owned(),
        message: message.into(),
    }
}

fn outcome_name(completion: &Completion) -> &'static str {
    match completion {
        Completion::Succeeded { .. } => "succeeded",
        Completion::ToolError { .. } => "tool_error",
        Completion::Failed { .. } => "failed",
        Completion::Unknown { .. } => "unknown",
    }
}

fn log_task_end(ended: Result<(), JoinError>) {
    if let Err(error) = ended {
        // The call's session was dropped with the task, which killed its process group; the
        // control plane will treat the call as lost with its runner.
        tracing::error!(%error, "call task failed without reporting");
    }
}

/// Exponential backoff between retries of an unavailable control plane.
#[derive(Debug)]
struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            next: BACKOFF_FIRST,
        }
    }
}

impl Backoff {
    fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (delay * 2).min(BACKOFF_MAX);
        delay
    }

    fn reset(&mut self) {
        self.next = BACKOFF_FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_limit_and_resets() {
        let mut backoff = Backoff::default();
        let delays: Vec<u128> = (0..7).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 2000, 2000]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), BACKOFF_FIRST);
    }

    #[test]
    fn dispatches_map_to_completions() {
        let answered = json!({ "content": [], "isError": false });
        assert_eq!(
            completion_for(
                Dispatch::Answered {
                    result: answered.clone(),
                    is_error: false
                },
                5
            ),
            Completion::Succeeded { result: answered }
        );
        assert!(matches!(
            completion_for(
                Dispatch::Answered {
                    result: json!({}),
                    is_error: true
                },
                5
            ),
            Completion::ToolError { .. }
        ));
        assert_eq!(
            completion_for(
                Dispatch::Rejected {
                    code: -32602,
                    message: "unknown tool".to_owned()
                },
                5
            ),
            Completion::ToolError {
                result: json!({
                    "content": [{ "type": "text", "text": "unknown tool" }],
                    "isError": true,
                })
            }
        );
        let code = |completion: Completion| match completion {
            Completion::Unknown { error } => format!("unknown/{}", error.code),
            Completion::Failed { error } => format!("failed/{}", error.code),
            other => format!("{other:?}"),
        };
        assert_eq!(
            code(completion_for(Dispatch::TimedOut, 5)),
            "unknown/timeout"
        );
        assert_eq!(
            code(completion_for(
                Dispatch::Lost {
                    message: "closed".to_owned()
                },
                5
            )),
            "unknown/transport_closed"
        );
        assert_eq!(
            code(completion_for(
                Dispatch::NotSent {
                    message: "dead".to_owned()
                },
                5
            )),
            "failed/not_sent"
        );
    }
}
