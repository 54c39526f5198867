//! `switchyard mcp cancel WS CALL`: stop a call, and say plainly how far it had got.
//!
//! All three outcomes exit 0: the request was carried out, and what it achieved is the output
//! (or `outcome` with `--json`). A call that was already sent may still act; its answer, if
//! any, is recorded, so the hint points at `mcp status` rather than promising anything.

use super::action::{self, Action};
use crate::client::Client;
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
    action::post_and_print(
        client,
        out,
        workspace,
        call,
        Action::Cancel,
        |answer: CancelAnswer| {
            format!(
                "call {}: {}",
                answer.call.id,
                outcome_text(&answer, workspace)
            )
        },
    )
    .await
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
    use super::super::view::tests::finished_call;
    use super::*;
    use switchyard_protocol::CallState;

    fn answer(outcome: CancelOutcome, state: CallState) -> CancelAnswer {
        let mut call = finished_call();
        call.state = state;
        CancelAnswer { outcome, call }
    }

    #[test]
    fn each_outcome_says_plainly_what_happened() {
        assert_eq!(
            outcome_text(
                &answer(CancelOutcome::Cancelled, CallState::Cancelled),
                "demo"
            ),
            "cancelled (nothing was sent)"
        );
        assert_eq!(
            outcome_text(
                &answer(CancelOutcome::CancellationRequested, CallState::Running),
                "demo"
            ),
            "cancellation requested: the call was already sent; the server's answer, if any, \
             will be recorded — check `switchyard mcp status demo 0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5e`"
        );
        assert_eq!(
            outcome_text(
                &answer(CancelOutcome::AlreadyFinished, CallState::ToolError),
                "demo"
            ),
            "already finished (tool_error): nothing to cancel"
        );
    }
}
