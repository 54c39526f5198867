//! `switchyard mcp cancel WS CALL`: stop a call, and say plainly how far it had got.
//!
//! All three outcomes exit 0: the request was carried out, and what it achieved is the output
//! (or `outcome` with `--json`). A call that was already sent may still act; its answer, if
//! any, is recorded, so the hint points at `mcp status` rather than promising anything.

use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::Output;
use switchyard_protocol::api::{CancelAnswer, CancelOutcome};

/// Asks the server to cancel `call` in `workspace` and reports what happened.
pub async fn run(
    client: &Client,
    out: Output,
    workspace: &str,
    call: &str,
) -> Result<(), CliError> {
    let reply = client
        .post(
            &["workspaces", workspace, "calls", call, "cancel"],
            // The route takes an empty JSON object.
            Body::Json(b"{}".to_vec()),
        )
        .await?;
    out.reply(&reply, |answer: CancelAnswer| {
        format!(
            "call {}: {}",
            answer.call.id,
            outcome_text(&answer, workspace)
        )
    })
}

/// What the cancel request achieved, for people.
fn outcome_text(answer: &CancelAnswer, workspace: &str) -> String {
    match answer.outcome {
        CancelOutcome::Cancelled => "cancelled (nothing was sent)".to_owned(),
        CancelOutcome::CancellationRequested => format!(
            "cancellation requested: the call was already sent; the server's answer, if any, \
             will be recorded — check `switchyard mcp status {workspace} {}`",
            answer.call.id
        ),
        CancelOutcome::AlreadyFinished => {
            format!(
                "already finished ({}): nothing to cancel",
                answer.call.state
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(outcome: &str, state: &str) -> CancelAnswer {
        serde_json::from_value(json!({
            "outcome": outcome,
            "call": {
                "id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5e",
                "workspace_id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5f",
                "request_id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d60",
                "profile_id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d61",
                "connection_id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d62",
                "environment_id": "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d63",
                "tool_name": "slow",
                "client_session_id": null,
                "timeout_seconds": 30,
                "state": state,
                "runner": "central",
                "arguments": null,
                "result": null,
                "result_truncated": false,
                "error": null,
                "created_at": "2025-01-02T03:04:05Z",
                "leased_at": null,
                "started_at": null,
                "finished_at": null,
                "cancel_requested_at": null,
                "retention_expired_at": null
            }
        }))
        .expect("a CancelAnswer")
    }

    #[test]
    fn each_outcome_says_plainly_what_happened() {
        assert_eq!(
            outcome_text(&answer("cancelled", "cancelled"), "demo"),
            "cancelled (nothing was sent)"
        );
        assert_eq!(
            outcome_text(&answer("cancellation_requested", "running"), "demo"),
            "cancellation requested: the call was already sent; the server's answer, if any, \
             will be recorded — check `switchyard mcp status demo 0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5e`"
        );
        assert_eq!(
            outcome_text(&answer("already_finished", "tool_error"), "demo"),
            "already finished (tool_error): nothing to cancel"
        );
    }
}
