//! `switchyard connection create|list|discover|tools`: connectors placed in a workspace.

use crate::cli::ConnectionCommand;
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, Table, time};
use switchyard_protocol::api::{ConnectionView, CreateConnection, DiscoveryView, ToolView};

/// Runs a `connection` subcommand.
pub async fn run(client: &Client, out: Output, cmd: ConnectionCommand) -> Result<(), CliError> {
    match cmd {
        ConnectionCommand::Create {
            workspace,
            name,
            connector,
            runner,
        } => {
            let body = CreateConnection {
                name,
                connector,
                runner,
            };
            let reply = client
                .post(&["workspaces", &workspace, "connections"], Body::of(&body))
                .await?;
            out.reply(&reply, |c: ConnectionView| {
                format!(
                    "created connection {} ({}): connector {} on runner {}",
                    c.name, c.id, c.connector_name, c.runner
                )
            })
        }
        ConnectionCommand::List { workspace } => {
            let reply = client
                .get(&["workspaces", &workspace, "connections"])
                .await?;
            out.reply(&reply, |list: Vec<ConnectionView>| {
                let mut table = Table::new(["NAME", "CONNECTOR", "RUNNER", "ID", "DISCOVERY"]);
                for c in list {
                    let discovery = match (c.last_discovery_error, c.last_discovery_at) {
                        (Some(error), _) => format!("failed: {error}"),
                        (None, Some(at)) => time(&at),
                        (None, None) => "never".to_owned(),
                    };
                    table.row([
                        c.name,
                        c.connector_name,
                        c.runner,
                        c.id.to_string(),
                        discovery,
                    ]);
                }
                table.render_or("no connections")
            })
        }
        ConnectionCommand::Discover {
            workspace,
            connection,
        } => {
            let reply = client
                .post(
                    &[
                        "workspaces",
                        &workspace,
                        "connections",
                        &connection,
                        "discover",
                    ],
                    Body::Empty,
                )
                .await?;
            out.reply(&reply, |d: DiscoveryView| {
                if d.tools.iter().all(|t| !t.available) {
                    eprintln!("connection {connection} lists no tools");
                }
                d.tools
                    .into_iter()
                    .filter(|t| t.available)
                    .map(|t| t.name + "\n")
                    .collect()
            })
        }
        ConnectionCommand::Tools {
            workspace,
            connection,
        } => {
            let reply = client
                .get(&[
                    "workspaces",
                    &workspace,
                    "connections",
                    &connection,
                    "tools",
                ])
                .await?;
            out.reply(&reply, |tools: Vec<ToolView>| {
                let mut table = Table::new(["NAME", "AVAILABLE", "DESCRIPTION"]);
                for t in tools {
                    let available = if t.available { "yes" } else { "no" };
                    let summary = t
                        .description
                        .as_deref()
                        .and_then(|d| d.lines().next())
                        .unwrap_or("");
                    table.row([t.name, available.to_owned(), summary.to_owned()]);
                }
                table.render_or("no tools discovered yet (run `switchyard connection discover`)")
            })
        }
    }
}
