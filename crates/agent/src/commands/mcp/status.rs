//! `switchyard mcp status WS [CALL]`: the calls you may read, a page at a time, or one call in
//! detail.

use super::view::details;
use crate::cli::CallPageArgs;
use crate::client::Client;
use crate::commands::lookup::{connection_names, name_or_id};
use crate::error::CliError;
use crate::output::{Output, Table, print_json, print_text, time};
use switchyard_protocol::api::{CallList, CallView};

/// Lists the workspace's calls, newest first: one page (with the cursor of the next), or with
/// `--all` every page.
pub async fn list(
    client: &Client,
    out: Output,
    workspace: &str,
    args: &CallPageArgs,
) -> Result<(), CliError> {
    let limit = args.limit.map(|n| n.to_string());
    let query: Vec<(&str, &str)> = [
        ("state", &args.state),
        ("tool", &args.tool),
        ("connection", &args.connection),
        ("submitter", &args.submitter),
        ("placement", &args.placement),
        ("since", &args.since),
        ("until", &args.until),
        ("limit", &limit),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.as_deref().map(|v| (name, v)))
    .collect();
    let path = ["workspaces", workspace, "calls"];
    let mut cursor = args.cursor.clone();
    let mut calls = Vec::new();
    let next = loop {
        let mut page_query = query.clone();
        if let Some(cursor) = &cursor {
            page_query.push(("cursor", cursor));
        }
        let reply = client.get_with_query(&path, &page_query).await?;
        if out.is_json() && !args.all {
            print_json(&reply);
            return Ok(());
        }
        let page = reply.parse::<CallList>()?;
        calls.extend(page.calls);
        match page.next_cursor {
            Some(next) if args.all => cursor = Some(next),
            next => break next,
        }
    };
    if out.is_json() {
        let all = CallList {
            calls,
            next_cursor: None,
        };
        println!("{}", serde_json::to_string_pretty(&all).unwrap_or_default());
        return Ok(());
    }
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
    if let Some(next) = next {
        print_text(&format!(
            "more calls: add `--cursor {next}` (same filters) for the next page, or `--all`"
        ));
    }
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
