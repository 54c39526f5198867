//! `switchyard mcp status WS [CALL]`: the calls you may read, or one call in detail.

use super::view::details;
use crate::client::Client;
use crate::commands::lookup::{connection_names, name_or_id};
use crate::error::CliError;
use crate::output::{Output, Table, print_json, print_text, time};
use switchyard_protocol::api::{CallList, CallView};

/// Lists the workspace's calls, newest first.
pub async fn list(client: &Client, out: Output, workspace: &str) -> Result<(), CliError> {
    let reply = client.get(&["workspaces", workspace, "calls"]).await?;
    if out.is_json() {
        print_json(&reply);
        return Ok(());
    }
    let mut calls = reply.parse::<CallList>()?.calls;
    // The server already answers newest first; sorting again keeps the promise locally.
    calls.sort_by_key(|call| std::cmp::Reverse(call.created_at));
    let connections = connection_names(client, workspace).await?;
    let mut table = Table::new(["ID", "STATE", "TOOL", "CONNECTION", "RUNNER", "CREATED"]);
    for call in calls {
        table.row([
            call.id.to_string(),
            call.state.to_string(),
            call.tool_name,
            name_or_id(&connections, &call.connection_id),
            call.runner,
            time(&call.created_at),
        ]);
    }
    print_text(&table.render_or("no calls"));
    Ok(())
}

/// Shows one call: state, runner, timestamps, error and result text.
pub async fn show(
    client: &Client,
    out: Output,
    workspace: &str,
    call: &str,
) -> Result<(), CliError> {
    let reply = client
        .get(&["workspaces", workspace, "calls", call])
        .await?;
    if out.is_json() {
        print_json(&reply);
        return Ok(());
    }
    let call: CallView = reply.parse()?;
    let connections = connection_names(client, workspace).await?;
    print_text(&details(
        &call,
        &name_or_id(&connections, &call.connection_id),
    ));
    Ok(())
}
