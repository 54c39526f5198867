//! `switchyard agent create|list|show|tools|set|revoke`: agents, the principals MCP clients
//! connect to `/mcp` as.

use crate::cli::{AgentCommand, AgentSet};
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, Table, opt_time, print_json, time};
use switchyard_protocol::agents::{
    AgentConnectionSettings, AgentConnectionView, AgentCreated, AgentDetail, AgentToolsView,
    AgentView, CreateAgent, EditAgent,
};

/// Runs an `agent` subcommand.
pub async fn run(client: &Client, out: Output, cmd: AgentCommand) -> Result<(), CliError> {
    match cmd {
        AgentCommand::Create {
            workspace,
            name,
            mode,
            defer_all,
        } => {
            let reply = client
                .post(
                    &["workspaces", &workspace, "agents"],
                    Body::of(&CreateAgent {
                        name,
                        mode,
                        defer_all,
                        declared: false,
                    }),
                )
                .await?;
            if out.is_json() {
                print_json(&reply);
                return Ok(());
            }
            // The token alone on stdout, so that it can be piped into a client's secret store;
            // what it is goes to stderr.
            let created: AgentCreated = reply.parse()?;
            eprintln!(
                "created agent {} ({}); its token is shown this once and works on /mcp only",
                created.agent.name, created.agent.id
            );
            println!("{}", created.token);
            Ok(())
        }
        AgentCommand::List { workspace } => {
            let reply = client.get(&["workspaces", &workspace, "agents"]).await?;
            out.reply(&reply, |list: Vec<AgentView>| {
                let mut table =
                    Table::new(["NAME", "ID", "MODE", "DEFER_ALL", "CREATED", "REVOKED"]);
                for agent in list {
                    table.row([
                        agent.name,
                        agent.id.to_string(),
                        agent.mode.to_string(),
                        agent.defer_all.to_string(),
                        time(&agent.created_at),
                        opt_time(agent.revoked_at.as_ref()),
                    ]);
                }
                table.render_or("no agents")
            })
        }
        AgentCommand::Show { workspace, agent } => {
            let reply = client
                .get(&["workspaces", &workspace, "agents", &agent])
                .await?;
            out.reply(&reply, |detail: AgentDetail| show(&detail))
        }
        AgentCommand::Tools { workspace, agent } => {
            let reply = client
                .get(&["workspaces", &workspace, "agents", &agent, "tools"])
                .await?;
            out.reply(&reply, |tools: AgentToolsView| tool_list(&tools))
        }
        AgentCommand::Set(args) => set(client, out, args).await,
        AgentCommand::Revoke { workspace, agent } => {
            let reply = client
                .post(
                    &["workspaces", &workspace, "agents", &agent, "revoke"],
                    Body::Empty,
                )
                .await?;
            out.reply(&reply, |agent: AgentView| {
                format!(
                    "revoked agent {} ({}): its token no longer works",
                    agent.name, agent.id
                )
            })
        }
    }
}

async fn set(client: &Client, out: Output, args: AgentSet) -> Result<(), CliError> {
    let AgentSet {
        workspace,
        agent,
        connection,
        include,
        exclude,
        read_only,
        non_destructive,
        idempotent,
        defer,
        approve,
        auth_failure,
        tool_sync_failure,
        announce,
        mode,
        defer_all,
    } = args;
    match connection {
        Some(connection) => {
            let settings = AgentConnectionSettings {
                include,
                exclude,
                read_only,
                non_destructive,
                idempotent,
                defer,
                approve,
                auth_failure,
                tool_sync_failure,
                announce,
            };
            let reply = client
                .put(
                    &[
                        "workspaces",
                        &workspace,
                        "agents",
                        &agent,
                        "connections",
                        &connection,
                    ],
                    Body::of(&settings),
                )
                .await?;
            out.reply(&reply, |view: AgentConnectionView| {
                format!(
                    "agent {agent} on connection {}: {}",
                    view.connection_name,
                    settings_line(&view.settings)
                )
            })
        }
        None => {
            let reply = client
                .patch(
                    &["workspaces", &workspace, "agents", &agent],
                    Body::of(&EditAgent {
                        mode,
                        defer_all,
                        declared: None,
                    }),
                )
                .await?;
            out.reply(&reply, |view: AgentView| {
                format!(
                    "agent {}: mode {}, defer_all {}",
                    view.name, view.mode, view.defer_all
                )
            })
        }
    }
}

fn show(detail: &AgentDetail) -> String {
    let agent = &detail.agent;
    let mut text = format!(
        "agent {} ({})\nmode: {}\ndefer_all: {}\ncreated: {}\n",
        agent.name,
        agent.id,
        agent.mode,
        agent.defer_all,
        time(&agent.created_at)
    );
    if let Some(at) = agent.revoked_at {
        text.push_str(&format!("revoked: {}\n", time(&at)));
    }
    let profiles: Vec<&str> = detail.profiles.iter().map(|p| p.name.as_str()).collect();
    text.push_str(&format!(
        "use on: {}\n",
        if profiles.is_empty() {
            "no profile".to_owned()
        } else {
            profiles.join(", ")
        }
    ));
    let mut table = Table::new(["CONNECTION", "SETTINGS"]);
    for connection in &detail.connections {
        table.row([
            connection.connection_name.clone(),
            settings_line(&connection.settings),
        ]);
    }
    text.push_str(&table.render_or("no connection settings (every connection has the defaults)"));
    text
}

/// One line of settings, naming only what differs from the defaults.
fn settings_line(s: &AgentConnectionSettings) -> String {
    let defaults = AgentConnectionSettings::default();
    let mut parts = Vec::new();
    for glob in &s.include {
        parts.push(format!("include {glob}"));
    }
    for glob in &s.exclude {
        parts.push(format!("exclude {glob}"));
    }
    for (on, name) in [
        (s.read_only, "read-only"),
        (s.non_destructive, "non-destructive"),
        (s.idempotent, "idempotent"),
        (s.defer, "deferred"),
    ] {
        if on {
            parts.push(name.to_owned());
        }
    }
    if let Some(policy) = s.approve {
        parts.push(format!("approve {policy}"));
    }
    if s.auth_failure != defaults.auth_failure {
        parts.push(format!("auth_failure {}", s.auth_failure));
    }
    if s.tool_sync_failure != defaults.tool_sync_failure {
        parts.push(format!("tool_sync_failure {}", s.tool_sync_failure));
    }
    if s.announce != defaults.announce {
        parts.push(format!("announce {}", s.announce));
    }
    if parts.is_empty() {
        "defaults".to_owned()
    } else {
        parts.join(", ")
    }
}

fn tool_list(view: &AgentToolsView) -> String {
    let mut text = String::new();
    let mut table = Table::new(["NAME", "CONNECTION", "TOOL", "HOW"]);
    for (tools, how) in [(&view.tools, "listed"), (&view.deferred, "search")] {
        for tool in tools {
            table.row([
                tool.name.clone(),
                tool.connection.clone(),
                tool.tool.clone(),
                how.to_owned(),
            ]);
        }
    }
    text.push_str(&table.render_or("the agent sees no tools"));
    if !view.dropped.is_empty() {
        let mut dropped = Table::new(["DROPPED", "CONNECTION", "REASON"]);
        for tool in &view.dropped {
            dropped.row([
                tool.tool.clone(),
                tool.connection.clone(),
                tool.reason.clone(),
            ]);
        }
        text.push_str("\n\n");
        text.push_str(&dropped.render_or(""));
    }
    for connection in &view.unavailable {
        text.push_str(&format!(
            "\nconnection {} is unavailable: {}",
            connection.connection, connection.reason
        ));
    }
    text
}
