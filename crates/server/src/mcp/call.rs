//! One `tools/call`: the listed tool's call submitted as an ordinary Switchyard call, held
//! while it awaits approval or runs (progress notifications when the client asked for them),
//! and answered as the MCP server answered — or as a tool error that says what happened and
//! what to do next.

use crate::app::{Actor, App, SettledWaiter};
use crate::db::TraceParent;
use crate::error::AppError;
use rmcp::model::{
    CallToolResult, ContentBlock, ProgressNotificationParam, ProgressToken, RequestMetaObject,
    ResultType,
};
use rmcp::{ErrorData, Peer, RoleServer};
use serde_json::json;
use std::time::Duration;
use switchyard_protocol::api::CallView;
use switchyard_protocol::{CallState, RequestId};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The `_meta` key of the client's idempotency key (the same key the runner sends on).
pub(super) const REQUEST_ID_META_KEY: &str = switchyard_mcp_runner::meta::REQUEST_ID_META_KEY;
/// How often a held call's client hears progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The request_id of a call: the client's `_meta["io.switchyard/request_id"]` (a UUID), else
/// a fresh one.
pub(super) fn request_id(meta: &RequestMetaObject) -> Result<RequestId, ErrorData> {
    let Some(value) = meta.get(REQUEST_ID_META_KEY) else {
        return Ok(RequestId::new());
    };
    value
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!(
                    "`_meta[\"{REQUEST_ID_META_KEY}\"]` must be a UUID string (e.g. \"{}\"), the same for every retry of one call; omit it to have a fresh one chosen",
                    RequestId::new()
                ),
                None,
            )
        })
}

/// The client's trace context (`_meta.traceparent`), carried to the MCP server; a malformed
/// one is left out (tracing never fails a call).
pub(super) fn trace(meta: &RequestMetaObject) -> Option<TraceParent> {
    let text = meta.get_traceparent()?;
    let trace = TraceParent::parse(text);
    if trace.is_none() {
        tracing::debug!(traceparent = text, "a malformed traceparent was left out");
    }
    trace
}

/// What a call's client is told, and how it reaches it.
pub(super) struct Waiting<'a> {
    /// The app.
    pub app: &'a App,
    /// The principal.
    pub actor: &'a Actor,
    /// The client, for progress notifications.
    pub peer: &'a Peer<RoleServer>,
    /// The client's progress token, if it sent one.
    pub progress: Option<ProgressToken>,
    /// Cancelled when the request ends without an answer (the client went away, the server
    /// stops): the wait ends, the call stays.
    pub gone: &'a CancellationToken,
}

impl Waiting<'_> {
    /// Holds `call` until it settles or the hold ends, and answers it; `waiter` is the one its
    /// submission handed back, if any.
    pub(super) async fn answer(
        &self,
        mut call: CallView,
        mut waiter: Option<SettledWaiter>,
    ) -> Result<CallToolResult, ErrorData> {
        let deadline = Instant::now() + self.app.mcp_call_hold();
        let mut progress = 0.0;
        loop {
            if settled(call.state) {
                return Ok(settled_result(&call));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(pending_result(&call));
            }
            self.notify(&call, &mut progress).await;
            let wait = (deadline - now).min(PROGRESS_EVERY);
            call = tokio::select! {
                read = self.app.mcp_call_wait(self.actor, call.workspace_id, call.id, waiter.take(), wait) => {
                    read.map_err(internal)?
                }
                () = self.gone.cancelled() => return Ok(pending_result(&call)),
            };
        }
    }

    /// A progress notification saying where the call stands, if the client asked for them.
    async fn notify(&self, call: &CallView, progress: &mut f64) {
        let Some(token) = &self.progress else {
            return;
        };
        *progress += 1.0;
        let param = ProgressNotificationParam::new(token.clone(), *progress)
            .with_message(state_message(call));
        if let Err(error) = self.peer.notify_progress(param).await {
            tracing::debug!(%error, "a progress notification was not delivered");
        }
    }
}

/// Where a call stands, in words.
pub(super) fn state_message(call: &CallView) -> String {
    match call.state {
        CallState::AwaitingApproval => format!("call {} awaits a person's approval", call.id),
        state if settled(state) => format!("call {} ended {}", call.id, state.as_str()),
        state => format!("call {} is {}", call.id, state.as_str()),
    }
}

/// Whether the client's answer is final: terminal, or `unknown`.
pub(super) fn settled(state: CallState) -> bool {
    state.is_terminal() || state == CallState::Unknown
}

/// The answer for a settled call: the MCP server's own result when it answered, else a tool
/// error saying what became of the call.
pub(super) fn settled_result(call: &CallView) -> CallToolResult {
    if matches!(call.state, CallState::Succeeded | CallState::ToolError)
        && let Some(result) = &call.result
        && let Ok(mut result) = serde_json::from_value::<CallToolResult>(result.clone())
    {
        // An MCP server of the older era sends no `resultType`; the 2026-07-28 era requires
        // it (rmcp clears it again for a peer of the older era).
        result.result_type = Some(ResultType::COMPLETE);
        return result;
    }
    let (code, detail) = call.error.as_ref().map_or_else(
        || (call.state.as_str().to_owned(), String::new()),
        |e| (e.code.clone(), e.message.clone()),
    );
    let text = match call.state {
        CallState::Declined => format!(
            "A person declined this call (Switchyard call {}): {}. It did not run. Do not retry it; answer from that, or ask the user.",
            call.id,
            declined_reason(call)
        ),
        CallState::Failed | CallState::Cancelled | CallState::Expired => format!(
            "Switchyard call {} ended `{}` and certainly had no effect ({code}: {detail}).",
            call.id,
            call.state.as_str()
        ),
        _ => format!(
            "Switchyard call {} ended `{}` ({code}: {detail}): it may or may not have taken effect; do not retry it blindly, a person settles it (`switchyard mcp status`).",
            call.id,
            call.state.as_str()
        ),
    };
    tool_error(
        text,
        json!({"call_id": call.id, "state": call.state, "error": call.error}),
    )
}

/// What the person who declined a call said.
fn declined_reason(call: &CallView) -> String {
    call.result
        .as_ref()
        .and_then(|r| r["content"][0]["text"].as_str())
        .unwrap_or("no reason given")
        .to_owned()
}

/// The answer for a call that has not settled when the hold ends.
fn pending_result(call: &CallView) -> CallToolResult {
    let retry = format!(
        "A retry of this tools/call with the same arguments and `_meta[\"{REQUEST_ID_META_KEY}\"]` = \"{}\" returns its result once it has one; it will not run twice.",
        call.request_id
    );
    let text = match call.state {
        CallState::AwaitingApproval => format!(
            "Switchyard call {} awaits a person's approval: someone holding Approve on its profile answers it with `switchyard approval approve|decline {} {}` or on the inspector's Approvals page. {retry}",
            call.id, call.workspace_id, call.id
        ),
        state => format!(
            "Switchyard call {} is still {} (nothing is lost). {retry}",
            call.id,
            state.as_str()
        ),
    };
    tool_error(
        text,
        json!({"call_id": call.id, "state": call.state, "request_id": call.request_id}),
    )
}

/// The answer to a call Switchyard refused (nothing was queued), or a JSON-RPC error for an
/// internal failure.
pub(super) fn refused(error: AppError) -> Result<CallToolResult, ErrorData> {
    match error {
        AppError::Refused { code, message } => Ok(tool_error(
            format!("Switchyard refused this call ({code}): {message}"),
            json!({"error": {"code": code, "message": message}}),
        )),
        other => Err(internal(other)),
    }
}

/// An `isError: true` result with a text and structured content.
fn tool_error(text: String, structured: serde_json::Value) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}

/// A JSON-RPC internal error; the cause goes to the log only.
pub(super) fn internal(error: AppError) -> ErrorData {
    tracing::error!(%error, "an /mcp request failed");
    ErrorData::internal_error("internal error; see the server log", None)
}

/// The exposed tool a `tools/call` names, or invalid params naming it.
pub(super) fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("no tool `{name}` is listed for you; call tools/list for the tools you may use"),
        None,
    )
}
