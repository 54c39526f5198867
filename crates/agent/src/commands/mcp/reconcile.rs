//! `switchyard mcp reconcile WS CALL FILE|-`: settle an unknown call by asking its connector.
//!
//! The server runs the connection's approved receipt lookup as a separate, read-only call on
//! the same runner; this command waits for it (polling 50 ms, doubling to 1 s) and shows what
//! the connector reported, recorded beside the original attempt. The file holds the lookup's
//! own fresh `request_id` (and optionally a `client_session_id`), so running the command again
//! with the same file shows the same lookup instead of asking twice.

use super::view::observation_line;
use crate::client::{Body, Client, Reply};
use crate::error::CliError;
use crate::input::{InputSource, read_json_object};
use crate::output::{Output, print_json, print_text};
use std::time::Duration;
use switchyard_protocol::CallState;
use switchyard_protocol::api::{CallView, ReconcileAnswer};

const FIRST_POLL: Duration = Duration::from_millis(50);
const MAX_POLL: Duration = Duration::from_secs(1);

/// Runs the lookup for `call`, waits for it, and reports the call as it is then.
pub async fn run(
    client: &Client,
    out: Output,
    workspace: &str,
    call: &str,
    file: &InputSource,
) -> Result<(), CliError> {
    let body = read_json_object(file)?;
    let answer: ReconcileAnswer = client
        .post(
            &["workspaces", workspace, "calls", call, "reconcile"],
            Body::Json(body),
        )
        .await?
        .parse()?;
    let lookup = wait_until_done(client, answer.lookup).await?;
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

/// Polls a call until it is no longer queued, leased or running.
async fn wait_until_done(client: &Client, mut call: CallView) -> Result<CallView, CliError> {
    let mut delay = FIRST_POLL;
    while matches!(
        call.state,
        CallState::Queued | CallState::Leased | CallState::Running
    ) {
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_POLL);
        let (workspace, id) = (call.workspace_id.to_string(), call.id.to_string());
        let reply: Reply = client
            .get(&["workspaces", &workspace, "calls", &id])
            .await?;
        call = reply.parse()?;
    }
    Ok(call)
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
