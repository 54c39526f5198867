//! `switchyard mcp reconcile WS CALL FILE|-`: settle an unknown call by asking its connector.
//!
//! The server runs the connection's approved receipt lookup as a separate, read-only call on
//! the same runner; this command waits for it (long reads, see [`super::wait`]) and shows what
//! the connector reported, recorded beside the original attempt. The file holds the lookup's
//! own fresh `request_id` (and optionally a `client_session_id`), so running the command again
//! with the same file shows the same lookup instead of asking twice.

use super::action::{self, Action};
use super::view::observation_line;
use super::wait;
use crate::client::Client;
use crate::error::CliError;
use crate::input::{InputSource, read_json_object};
use crate::output::{Output, print_json, print_text};
use switchyard_protocol::CallState;
use switchyard_protocol::api::{CallView, ReconcileAnswer};

/// Runs the lookup for `call`, waits for it, and reports the call as it is then.
pub async fn run(
    client: &Client,
    out: Output,
    workspace: &str,
    call: &str,
    file: &InputSource,
) -> Result<(), CliError> {
    let body = read_json_object(file)?;
    let answer: ReconcileAnswer = action::post(client, workspace, call, Action::Reconcile(body))
        .await?
        .parse()?;
    let mut lookup = answer.lookup;
    if !wait::is_settled(lookup.state) {
        (_, lookup) = wait::read_settled(client, &lookup).await?;
    }
    let reply = client
        .get(&["workspaces", workspace, "calls", call])
        .await?;
    let settled: CallView = reply.parse()?;
    if out.is_json() {
        print_json(&reply);
    } else {
        print_text(&summary(&lookup, &settled));
    }
    if settled.state == CallState::Unknown {
        return Err(CliError::CallUncertain {
            id: settled.id,
            state: settled.state,
            reason: Some(format!(
                "the lookup ({}) settled nothing",
                lookup_outcome(&lookup)
            )),
            workspace: workspace.to_owned(),
        });
    }
    Ok(())
}

/// How the lookup call itself ended, e.g. `succeeded` or `failed [mcp_reconcile_config_changed]`.
fn lookup_outcome(lookup: &CallView) -> String {
    match &lookup.error {
        Some(error) => format!("{} [{}]", lookup.state, error.code),
        None => lookup.state.to_string(),
    }
}

/// What the lookup found and where the call stands now, for people.
fn summary(lookup: &CallView, call: &CallView) -> String {
    let mut text = format!(
        "lookup {} ({}): {}\n",
        lookup.id,
        lookup.tool_name,
        lookup_outcome(lookup)
    );
    if let Some(observation) = call
        .observations
        .iter()
        .rev()
        .find(|o| o.lookup_call_id == Some(lookup.id))
    {
        text.push_str(&format!("reported: {}\n", observation_line(observation)));
    }
    match (&call.state, &call.resolution_outcome) {
        (CallState::Resolved, Some(outcome)) => {
            text.push_str(&format!(
                "call {}: resolved ({})\n",
                call.id,
                outcome.as_str()
            ));
        }
        (state, _) => text.push_str(&format!("call {}: still {state}\n", call.id)),
    }
    text
}
