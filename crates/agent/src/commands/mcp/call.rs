//! `switchyard mcp call WS FILE|- [--wait]`: submit a call and optionally wait for its outcome.
//!
//! The file is the API's `SubmitCall` object and is sent exactly as read; only its shape (one
//! JSON object) is checked locally. Its `request_id` makes resubmitting the same file safe:
//! the server answers with the existing call instead of running the tool again.
//!
//! Waiting asks the server to answer the submission once the call settles (`?wait_ms=`), and
//! then, while it has not, reads the call with long reads (see [`super::wait`]) until it is
//! terminal or `unknown`. Nothing here ever resubmits: an `unknown` call may have acted, so it is reported
//! (exit 7), not retried.

use super::view::result_text;
use super::wait;
use crate::client::{Body, Client, Reply};
use crate::error::CliError;
use crate::input::{InputSource, read_json_object};
use crate::output::{Output, print_json, print_text};
use reqwest::StatusCode;
use switchyard_protocol::CallState;
use switchyard_protocol::api::CallView;

/// How a call ended, as far as `--wait` is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Settled {
    /// `succeeded`.
    Succeeded,
    /// `tool_error`, `failed`, `cancelled` or `expired`: certainly finished, not successfully.
    NotSucceeded,
    /// `unknown`, or `resolved` from unknown: the tool may or may not have acted.
    Uncertain,
}

/// Whether `state` ends the wait, and how; `None` while the call is still on its way.
fn settled(state: CallState) -> Option<Settled> {
    match state {
        CallState::AwaitingApproval
        | CallState::Queued
        | CallState::Leased
        | CallState::Running => None,
        CallState::Succeeded => Some(Settled::Succeeded),
        CallState::ToolError
        | CallState::Failed
        | CallState::Cancelled
        | CallState::Expired
        | CallState::Declined => Some(Settled::NotSucceeded),
        CallState::Unknown | CallState::Resolved => Some(Settled::Uncertain),
    }
}

/// Submits the call in `file` to `workspace`; with `wait`, follows it to its outcome.
pub async fn run(
    client: &Client,
    out: Output,
    workspace: &str,
    file: &InputSource,
    wait: bool,
) -> Result<(), CliError> {
    let body = read_json_object(file)?;
    // Waiting starts with the submission itself: the server answers it once the call settles
    // (or after the wait), so a quick call's outcome takes one request.
    let wait_ms = wait::READ_WAIT.as_millis().to_string();
    let query: &[(&str, &str)] = if wait { &[("wait_ms", &wait_ms)] } else { &[] };
    let reply = client
        .post_with_query(&["workspaces", workspace, "calls"], query, Body::Json(body))
        .await
        .inspect_err(|err| match err {
            CliError::Unreachable { .. } => eprintln!(
                "note: resubmitting the same file is safe: its request_id prevents a second run"
            ),
            CliError::Refused { code, .. } if code == "operation_required" => eprintln!(
                "note: a device's calls run under an operation: begin one with `switchyard scope \
                 begin {workspace} --environment ENV --profile PROFILE --task TEXT` and add its id \
                 to the file as \"operation_id\""
            ),
            _ => {}
        })?;
    let call: CallView = reply.parse()?;
    if !wait {
        if out.is_json() {
            print_json(&reply);
        } else {
            let replay = if reply.status() == StatusCode::OK {
                "  (existing call for this request_id)"
            } else {
                ""
            };
            println!("{}  {}{replay}", call.id, call.state);
        }
        return Ok(());
    }

    let id = call.id;
    let (reply, call, outcome) = wait_for_outcome(client, workspace, reply, call).await.inspect_err(|_| {
        eprintln!("note: call {id} was submitted; follow it with `switchyard mcp status {workspace} {id}`");
    })?;
    if out.is_json() {
        print_json(&reply);
    } else if let Some(result) = &call.result {
        print_text(&result_text(result));
        if call.result_truncated {
            eprintln!("note: the result was cut to the retention bound");
        }
    } else if call.state == CallState::Succeeded {
        eprintln!("note: call {id} succeeded but its result is no longer retained");
    }
    let reason = call
        .error
        .as_ref()
        .map(|e| format!("[{}] {}", e.code, e.message));
    match outcome {
        Settled::Succeeded => Ok(()),
        Settled::NotSucceeded => Err(CliError::CallNotSucceeded {
            id,
            state: call.state,
            reason,
        }),
        Settled::Uncertain => Err(CliError::CallUncertain {
            id,
            state: call.state,
            reason,
            workspace: workspace.to_owned(),
        }),
    }
}

/// Follows the call until [`settled`] says it is done; returns the last reply, its call and
/// how it settled.
async fn wait_for_outcome(
    client: &Client,
    workspace: &str,
    mut reply: Reply,
    mut call: CallView,
) -> Result<(Reply, CallView, Settled), CliError> {
    let mut said_awaiting = false;
    loop {
        if let Some(outcome) = settled(call.state) {
            return Ok((reply, call, outcome));
        }
        if call.state == CallState::AwaitingApproval && !said_awaiting {
            said_awaiting = true;
            eprintln!("{}", awaiting_note(workspace, &call));
        }
        (reply, call) = wait::read_settled(client, &call).await?;
    }
}

/// What `--wait` says of a call that waits for a person: its id, and where to answer.
fn awaiting_note(workspace: &str, call: &CallView) -> String {
    format!(
        "call {id} awaits approval; still waiting. Someone holding Approve on its profile answers with `switchyard approval approve {workspace} {id}` (or `approval decline`); see it with `switchyard approval show {workspace} {id}`",
        id = call.id
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_protocol::state::ALL_STATES;

    #[test]
    fn wait_ends_exactly_at_terminal_or_unknown() {
        for state in ALL_STATES {
            let ends = settled(state).is_some();
            assert_eq!(ends, wait::is_settled(state), "{state}");
            assert_eq!(
                ends,
                state.is_terminal() || state == CallState::Unknown,
                "{state}"
            );
        }
        assert_eq!(settled(CallState::Succeeded), Some(Settled::Succeeded));
        assert_eq!(settled(CallState::ToolError), Some(Settled::NotSucceeded));
        assert_eq!(settled(CallState::Unknown), Some(Settled::Uncertain));
    }
}
