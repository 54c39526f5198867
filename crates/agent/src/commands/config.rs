//! `switchyard config validate`: reads a `switchyard.toml` locally (see [`crate::config`]) and
//! prints what it asks for, every default filled in. `config export` is [`super::apply`]'s.

use crate::cli::ConfigCommand;
use crate::client::Client;
use crate::config::{self, Desired, Placement, Transport};
use crate::error::CliError;
use crate::output::{Output, pretty, print_text};
use std::path::Path;

/// Runs one `config` subcommand; only `export` needs a client (made by `client`).
pub async fn run(
    client: impl FnOnce() -> Result<Client, CliError>,
    out: Output,
    cmd: ConfigCommand,
) -> Result<(), CliError> {
    match cmd {
        ConfigCommand::Export { workspace } => super::apply::export(&client()?, &workspace).await,
        ConfigCommand::Validate { file } => {
            let desired = config::desired(&read(&file)?);
            if out.is_json() {
                let json = serde_json::to_string(&desired).expect("the desired state serializes");
                print_text(&pretty(&json));
            } else {
                print_text(&format!(
                    "{}: valid\n{}",
                    file.display(),
                    describe(&desired)
                ));
            }
            Ok(())
        }
    }
}

/// Reads and checks the file at `path`.
pub(super) fn read(path: &Path) -> Result<config::Document, CliError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| CliError::ReadInput {
        name: name.clone(),
        source,
    })?;
    config::parse(&text).map_err(|issues| CliError::InvalidConfig { name, issues })
}

/// One line per server and per agent's server: what `apply` will set.
fn describe(desired: &Desired) -> String {
    let mut lines = Vec::new();
    for (id, server) in &desired.mcp {
        let reach = match &server.transport {
            Transport::Http { url } => format!("http {url}"),
            Transport::Stdio { command, args, .. } => {
                format!(
                    "stdio {}",
                    [command.as_str()]
                        .into_iter()
                        .chain(args.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            }
        };
        let auth = server.auth.map_or("discovered", |auth| auth.as_str());
        let placement = match &server.placement {
            Placement::Central => "central".to_owned(),
            Placement::Device(name) => format!("device {name}"),
        };
        lines.push(format!(
            "mcp.{id}: {reach}; auth {auth}; {placement}; prefix_tools {}",
            if server.prefix_tools { "on" } else { "off" }
        ));
    }
    for (id, agent) in &desired.agents {
        lines.push(format!(
            "agent.{id}: mode {}; defer_tools {}",
            agent.mode,
            if agent.defer_all { "on" } else { "off" }
        ));
        for (server, settings) in &agent.mcp {
            let approve = settings
                .approve
                .map_or("profile's".to_owned(), |p| p.to_string());
            lines.push(format!(
                "  mcp.{server}: approve {approve}; defer {}; auth_failure {}",
                if settings.defer { "on" } else { "off" },
                settings.auth_failure
            ));
        }
    }
    lines.join("\n")
}
