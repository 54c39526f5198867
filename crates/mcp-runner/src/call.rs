//! One leased call, from launch to completion report, as its own task.
//!
//! Per call: resolve the launch, get a session from the executor loop (a warm one, or one the
//! loop opens), ask the control plane to start the call, and only on
//! [`StartDecision::Proceed`] send `tools/call`; then give the session back with a verdict on
//! its health and report the redacted completion. What goes wrong before the request may have
//! left is `failed` (certainly no effect); what goes wrong after is `unknown`, never retried —
//! except a request that certainly never left a dead warm session, which is sent once more on
//! a fresh one.

use crate::backoff::Backoff;
use crate::control::{ControlError, ControlPlane, StartDecision};
use crate::credentials::codes;
use crate::launch::LaunchResolver;
use crate::launch::SessionLaunch;
use crate::pool::{CloseReason, SessionKey, SessionSlot, Verdict};
use crate::redact::Redactor;
use crate::session::{CallCancellation, Dispatch, McpSession, SessionError};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use switchyard_protocol::CallId;
use switchyard_protocol::api::{CallError, CallKind};
use switchyard_protocol::runner::{Completion, LeasedCall};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

/// What every call task shares.
pub(crate) struct CallContext<C> {
    /// Where starts and completions go.
    pub(crate) control: Arc<C>,
    /// Turns a leased call into a launch.
    pub(crate) resolver: LaunchResolver,
    /// Requests to the executor loop.
    pub(crate) to_loop: mpsc::UnboundedSender<ToLoop>,
    /// How long a cancelled call may still be answered.
    pub(crate) cancel_grace: Duration,
    /// Which endpoints a session may reach (a discovery opens its own).
    pub(crate) endpoints: crate::endpoints::EndpointGuard,
    /// The executor is shutting down: calls not yet started give up their start.
    pub(crate) shutdown: CancellationToken,
    /// The control plane fenced this runner: start nothing, stop reporting.
    pub(crate) fenced: CancellationToken,
}

/// A call task's request to the executor loop. (Sent and matched at once, never stored: its
/// variants are not boxed.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum ToLoop {
    /// A session for `key`, opened from `launch` if none is ready.
    Acquire {
        call_id: CallId,
        key: SessionKey,
        launch: SessionLaunch,
        redactor: Arc<Redactor>,
        reply: oneshot::Sender<Acquired>,
    },
    /// The call has finished with the session in `slot`.
    Checkin {
        call_id: CallId,
        slot: SessionSlot,
        verdict: Verdict,
    },
}

/// The loop's answer to [`ToLoop::Acquire`].
pub(crate) enum Acquired {
    /// A session to send the call on.
    Session(SessionLease),
    /// The call was cancelled before it was started: drop it without a report.
    Withdrawn,
    /// No session could be opened; nothing was sent.
    Failed(CallError),
}

/// A session lent to one call; give it back with [`CallContext::checkin`].
pub(crate) struct SessionLease {
    /// The pool entry.
    pub(crate) slot: SessionSlot,
    /// The session.
    pub(crate) session: Arc<McpSession>,
}

impl<C: ControlPlane> CallContext<C> {
    /// Asks the loop for a session for `key`.
    async fn acquire(
        &self,
        call_id: CallId,
        key: &SessionKey,
        launch: &SessionLaunch,
        redactor: &Arc<Redactor>,
    ) -> Acquired {
        let (reply, answer) = oneshot::channel();
        let request = ToLoop::Acquire {
            call_id,
            key: key.clone(),
            launch: launch.clone(),
            redactor: Arc::clone(redactor),
            reply,
        };
        let stopped = || {
            Acquired::Failed(CallError::new(
                "runner_stopped",
                "the executor stopped before the call got an MCP session",
            ))
        };
        if self.to_loop.send(request).is_err() {
            return stopped();
        }
        answer.await.unwrap_or_else(|_| stopped())
    }

    /// Asks the loop for a session for `key` from the call's launch; when the MCP server
    /// refuses the launch's credential (nothing was processed), asks the resolver once per
    /// call for a renewed one and tries again with it. A credential that cannot be renewed,
    /// or that is refused renewed, fails the call (`credential_refused`).
    async fn acquire_renewing(
        &self,
        call: &LeasedCall,
        key: &SessionKey,
        launched: &mut Launched,
    ) -> Acquired {
        let acquired = self
            .acquire(call.call_id, key, &launched.launch, &launched.redactor)
            .await;
        match acquired {
            Acquired::Failed(error) if error.code == codes::REFUSED && !launched.renewed => {
                launched.renewed = true;
                match self.resolver.renew(call, &launched.launch).await {
                    None => Acquired::Failed(error),
                    Some(Err(renewal)) => Acquired::Failed(renewal),
                    Some(Ok(launch)) => {
                        tracing::info!(
                            "the MCP server refused the credential; renewed it, trying once more"
                        );
                        launched.redactor = Arc::new(Redactor::for_launch(&launch));
                        launched.launch = launch;
                        let again = self
                            .acquire(call.call_id, key, &launched.launch, &launched.redactor)
                            .await;
                        if matches!(&again, Acquired::Failed(error) if error.code == codes::REFUSED)
                        {
                            self.resolver.refused_renewed(call).await;
                        }
                        again
                    }
                }
            }
            acquired => acquired,
        }
    }

    /// Gives a session back with what this call says about its health.
    fn checkin(&self, call_id: CallId, lease: SessionLease, verdict: Verdict) {
        let SessionLease { slot, session } = lease;
        // The pool closes a session only once no call holds it.
        drop(session);
        // The loop outlives every call task, so this send only fails if the loop panicked.
        let _ = self.to_loop.send(ToLoop::Checkin {
            call_id,
            slot,
            verdict,
        });
    }
}

/// Runs one leased call from launch to completion report. `cancel` is cancelled by the loop
/// when the user cancels the call.
pub(crate) async fn run_call<C: ControlPlane>(
    context: Arc<CallContext<C>>,
    call: LeasedCall,
    cancel: CancellationToken,
) {
    if call.kind == CallKind::Discovery {
        return run_discovery(context, call, cancel).await;
    }
    let arguments = match &call.arguments {
        Value::Object(arguments) => arguments.clone(),
        _ => {
            let error = CallError::new("invalid_arguments", "tool arguments must be a JSON object");
            fail_before_start(&context, &call, &cancel, error).await;
            return;
        }
    };
    let launch = match context.resolver.launch(&call).await {
        Ok(launch) => launch,
        Err(error) => {
            tracing::warn!(code = %error.code, "cannot prepare the MCP session; failing the call");
            fail_before_start(&context, &call, &cancel, error).await;
            return;
        }
    };
    let key = SessionKey {
        connection_id: call.connection.connection_id,
        profile_id: call.profile_id,
        submitter: call.submitter,
        client_session_id: call.client_session_id.clone(),
    };
    let mut launched = Launched {
        redactor: Arc::new(Redactor::for_launch(&launch)),
        launch,
        renewed: false,
    };
    let mut lease = match context.acquire_renewing(&call, &key, &mut launched).await {
        Acquired::Session(lease) => lease,
        Acquired::Withdrawn => {
            tracing::info!("cancelled before it was started; the call is not sent");
            return;
        }
        Acquired::Failed(error) => {
            let redactor = &launched.redactor;
            report(&context, &call, redactor, Completion::Failed { error }).await;
            return;
        }
    };

    if !start(&context, &call).await {
        context.checkin(call.call_id, lease, Verdict::Keep);
        return;
    }

    let cancellation = CallCancellation {
        token: cancel,
        grace: context.cancel_grace,
    };
    let timeout = Duration::from_secs(u64::from(call.timeout_seconds));
    let meta = crate::meta::call_meta(&call);
    let mut retried = false;
    let dispatch = loop {
        if cancellation.token.is_cancelled() {
            context.checkin(call.call_id, lease, Verdict::Keep);
            let error = CallError::new("cancelled", "cancelled before the request was sent");
            let redactor = &launched.redactor;
            report(&context, &call, redactor, Completion::Failed { error }).await;
            return;
        }
        let dispatch = lease
            .session
            .call_tool_until_cancelled(
                &call.tool_name,
                arguments.clone(),
                meta.clone(),
                timeout,
                &cancellation,
            )
            .await;
        context.checkin(call.call_id, lease, verdict_for(&dispatch));
        match dispatch {
            // Nothing reached the server, so sending again cannot run the tool twice.
            Dispatch::NotSent { message } if !retried => {
                retried = true;
                tracing::info!(
                    reason = %launched.redactor.redact(&message),
                    "the MCP session had ended before the request was sent; trying a fresh one"
                );
                // A session whose token the server refused opens no fresh one with it either:
                // the credential is renewed then (`acquire_renewing`).
                lease = match context.acquire_renewing(&call, &key, &mut launched).await {
                    Acquired::Session(lease) => lease,
                    Acquired::Failed(error) => {
                        let redactor = &launched.redactor;
                        report(&context, &call, redactor, Completion::Failed { error }).await;
                        return;
                    }
                    // The loop withdraws only calls that were never started; should it ever
                    // answer so here, the request has still not been sent.
                    Acquired::Withdrawn => {
                        let error = CallError::new("not_sent", message);
                        let redactor = &launched.redactor;
                        report(&context, &call, redactor, Completion::Failed { error }).await;
                        return;
                    }
                };
            }
            dispatch => break dispatch,
        }
    };
    let completion = completion_for(dispatch, call.timeout_seconds);
    report(&context, &call, &launched.redactor, completion).await;
}

/// A call's launch, the redactor of its secrets, and whether its credential was renewed.
struct Launched {
    launch: SessionLaunch,
    redactor: Arc<Redactor>,
    renewed: bool,
}

/// Runs a leased discovery: `tools/list` on a fresh session of the connection (launched
/// through the same resolver, so the accepted spec digest is checked before any credential is
/// resolved), sent only once the start is acknowledged, and reported as
/// `{"tools": [...], "about": …}`, redacted like any result. It never uses a warm session: it is nobody's
/// call, and listing tools has no effect, so any failure is `failed`.
async fn run_discovery<C: ControlPlane>(
    context: Arc<CallContext<C>>,
    call: LeasedCall,
    cancel: CancellationToken,
) {
    let launch = match context.resolver.launch(&call).await {
        Ok(launch) => launch,
        Err(error) => {
            tracing::warn!(code = %error.code, "cannot prepare the discovery; failing it");
            fail_before_start(&context, &call, &cancel, error).await;
            return;
        }
    };
    let redactor = Redactor::for_launch(&launch);
    if cancel.is_cancelled() || !start(&context, &call).await {
        return;
    }
    let deadline = Duration::from_secs(u64::from(call.timeout_seconds));
    let completion = tokio::select! {
        listed = crate::session::discover(&launch, &context.endpoints, deadline) => match listed {
            Ok(found) => Completion::Succeeded {
                result: json!({ "tools": found.tools, "about": found.about }),
            },
            Err(error) => Completion::Failed {
                // The code is the failure's class, which a diagnosis reports; a refused
                // credential keeps the credential code, which the server records as the
                // connection needing authorization (anything else: unreachable).
                error: CallError::new(
                    if matches!(error, SessionError::Unauthorized { .. }) {
                        codes::REFUSED
                    } else {
                        error.failure_class().as_str()
                    },
                    error.to_string(),
                ),
            },
        },
        () = cancel.cancelled() => Completion::Failed {
            error: CallError::new("cancelled", "the discovery was cancelled"),
        },
    };
    report(&context, &call, &redactor, completion).await;
}

/// Reports a failure found before the call asked for a session, unless the call has been
/// cancelled meanwhile (then the control plane has settled it and wants no report).
async fn fail_before_start<C: ControlPlane>(
    context: &CallContext<C>,
    call: &LeasedCall,
    cancel: &CancellationToken,
    error: CallError,
) {
    if cancel.is_cancelled() {
        tracing::info!(code = %error.code, "cancelled before it was started; nothing to report");
        return;
    }
    report(
        context,
        call,
        &Redactor::default(),
        Completion::Failed { error },
    )
    .await;
}

/// Asks the control plane to start the call; true only when the request may now be sent.
/// An unavailable control plane is retried until it answers, the runner is fenced or the
/// executor shuts down (giving up is safe: nothing was sent, and the lease will expire).
async fn start<C: ControlPlane>(context: &CallContext<C>, call: &LeasedCall) -> bool {
    // The start acknowledgement's round trip, a span of the call's trace.
    let span = tracing::info_span!("start", otel.name = "start call");
    acknowledge_start(context, call).instrument(span).await
}

/// [`start`] inside its span.
async fn acknowledge_start<C: ControlPlane>(context: &CallContext<C>, call: &LeasedCall) -> bool {
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

/// Reports `completion`, redacted with the call's secrets, retrying an unavailable control
/// plane until it accepts the report or fences the runner.
async fn report<C: ControlPlane>(
    context: &CallContext<C>,
    call: &LeasedCall,
    redactor: &Redactor,
    completion: Completion,
) {
    let completion = redactor.redact_completion(completion);
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

/// What a dispatch says about the session it went over.
fn verdict_for(dispatch: &Dispatch) -> Verdict {
    match dispatch {
        Dispatch::Answered { .. } | Dispatch::Rejected { .. } => Verdict::Keep,
        // The server may still be busy with the call: end it with its session.
        Dispatch::TimedOut => Verdict::Evict(CloseReason::Timeout),
        Dispatch::Cancelled => Verdict::Evict(CloseReason::Cancelled),
        Dispatch::Lost { .. } | Dispatch::NotSent { .. } | Dispatch::Oversized { .. } => {
            Verdict::Evict(CloseReason::TransportClosed)
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
            error: CallError::new(
                "timeout",
                format!("no answer within {timeout_seconds} s; the call was cancelled"),
            ),
        },
        Dispatch::Cancelled => Completion::Unknown {
            error: CallError::new(
                "cancelled",
                "cancelled after dispatch; the server did not answer, so the effect is uncertain",
            ),
        },
        Dispatch::Lost { message } => Completion::Unknown {
            error: CallError::new("transport_closed", message),
        },
        Dispatch::NotSent { message } => Completion::Failed {
            error: CallError::new("not_sent", message),
        },
        // The server ran the call and answered, but whether it succeeded is in the answer
        // that was not read: uncertain, never retried (a receipt lookup can settle it).
        Dispatch::Oversized { message } => Completion::Unknown {
            error: CallError::new("answer_too_large", message),
        },
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

#[cfg(test)]
mod tests {
    use super::*;

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
            code(completion_for(Dispatch::Cancelled, 5)),
            "unknown/cancelled"
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

    #[test]
    fn only_answers_keep_a_session() {
        let keep = Dispatch::Answered {
            result: json!({}),
            is_error: true,
        };
        assert_eq!(verdict_for(&keep), Verdict::Keep);
        assert_eq!(
            verdict_for(&Dispatch::TimedOut),
            Verdict::Evict(CloseReason::Timeout)
        );
        assert_eq!(
            verdict_for(&Dispatch::Cancelled),
            Verdict::Evict(CloseReason::Cancelled)
        );
        assert_eq!(
            verdict_for(&Dispatch::NotSent {
                message: "gone".to_owned()
            }),
            Verdict::Evict(CloseReason::TransportClosed)
        );
    }
}
