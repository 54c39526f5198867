//! `switchyard evidence show WS ID`: one evidence record, readable under Use on its call's profile.

use crate::cli::EvidenceCommand;
use crate::client::Client;
use crate::commands::mcp::result_text;
use crate::error::CliError;
use crate::output::{Output, fields, opt_time, time};
use switchyard_protocol::api::EvidenceView;

/// Runs an `evidence` subcommand.
pub async fn run(client: &Client, out: Output, cmd: EvidenceCommand) -> Result<(), CliError> {
    match cmd {
        EvidenceCommand::Show { workspace, id } => {
            let reply = client
                .get(&["workspaces", &workspace, "evidence", &id])
                .await?;
            out.reply(&reply, |e: EvidenceView| details(&e))
        }
    }
}

/// An evidence record for people: identity, scope, target, outcome, lineage and output.
fn details(e: &EvidenceView) -> String {
    let outcome = match e.resolution_outcome {
        Some(resolved) => format!("{} ({})", e.outcome, resolved.as_str()),
        None => e.outcome.to_string(),
    };
    let mut text = fields(&[
        ("evidence", e.id.to_string()),
        ("call", e.call_id.to_string()),
        ("request_id", e.request_id.to_string()),
        ("tool", e.tool_name.clone()),
        ("outcome", outcome),
        ("profile", e.profile_id.to_string()),
        ("connection", e.connection_id.to_string()),
        (
            "connector revision",
            e.connector_revision
                .map(|r| r.to_string())
                .unwrap_or_else(|| "-".to_owned()),
        ),
        ("runner", e.runner.clone()),
        ("lineage", e.lineage.to_string()),
        ("captured", time(&e.captured_at)),
        ("erased", opt_time(e.erased_at.as_ref())),
    ]);
    match &e.output {
        Some(output) => {
            text.push_str(if e.output_truncated {
                "output (truncated):\n"
            } else {
                "output:\n"
            });
            text.push_str(&result_text(output));
        }
        None => text.push_str("output: erased\n"),
    }
    text
}
