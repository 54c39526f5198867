//! `switchyard mcp erase WS CALL`: erase a finished or unknown call's evidence.
//!
//! The server removes what it retained about the call and fences receipts that arrive for it
//! later, keeping only a minimal disposition. What the tool did outside Switchyard is not
//! undone, and the output says so every time.

use super::action::{self, Action};
use crate::client::Client;
use crate::error::CliError;
use crate::output::Output;
use switchyard_protocol::api::EraseAnswer;

/// Erases `call`'s evidence in `workspace`.
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
        Action::Erase,
        |answer: EraseAnswer| {
            format!(
                "call {}: evidence erased ({} observation outputs, {} evidence records, {} \
                 pending)\n{}",
                answer.call.id,
                answer.observations_erased,
                answer.evidence_erased,
                answer.pending_evidence_dropped,
                answer.notice
            )
        },
    )
    .await
}
