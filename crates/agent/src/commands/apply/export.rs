//! `switchyard config export WS`: the workspace written as a `switchyard.toml` that `apply`
//! accepts unchanged. It holds every connection in service and every agent not revoked that
//! the file can express, with defaults left out; what it cannot express is named on stderr.

use super::auth;
use super::plan::own_profile;
use super::state::{Actual, reference_text};
use crate::error::CliError;
use std::fmt::Write as _;
use switchyard_protocol::api::{AgentConnectionSettings, AgentMode, ConnectorSpec};

/// The file's text, and what was left out of it (one line each).
pub fn export(actual: &Actual) -> Result<(String, Vec<String>), CliError> {
    let mut skipped = Vec::new();
    let mut text = format!(
        "# The workspace {} as `switchyard config export` found it; `switchyard apply` this \
         file to keep it so.\nworkspace = {}\n",
        actual.workspace,
        quote(&actual.workspace)
    );
    let mut exported = Vec::new();
    for connection in &actual.connections {
        if connection.retired.is_some() {
            continue;
        }
        let name = &connection.name;
        if !crate::config::is_id(name) {
            skipped.push(format!(
                "connection {name}: its name is not a file id (a-z, 0-9, `_`, `-`)"
            ));
            continue;
        }
        let Some(connector) = actual.connector(connection.connector_id) else {
            skipped.push(format!("connection {name}: its connector is not listed"));
            continue;
        };
        let Some(spec) = connector.target.spec() else {
            return Err(CliError::Usage(format!(
                "connector {}'s command or URL is shown only to installation owners: export \
                 a workspace with an owner's token",
                connector.name
            )));
        };
        let placement = if connection.runner == "central" {
            None
        } else if let Some(device) = actual.device_name(&connection.runner) {
            Some(format!("device:{device}"))
        } else {
            skipped.push(format!(
                "connection {name}: placed on {}, not a paired device of the workspace",
                connection.runner
            ));
            continue;
        };
        write!(text, "\n[mcp.{name}]\n").expect("writing to a String");
        let http = matches!(spec, ConnectorSpec::Http { .. });
        match spec {
            ConnectorSpec::Http { url } => {
                writeln!(text, "url = {}", quote(url)).expect("writing to a String");
            }
            ConnectorSpec::Stdio { command, args, env } => {
                writeln!(text, "command = {}", quote(command)).expect("writing to a String");
                if !args.is_empty() {
                    writeln!(text, "args = {}", list(args)).expect("writing to a String");
                }
                if !env.is_empty() {
                    let bound = actual.env_bindings.get(name);
                    let mut entries = Vec::new();
                    let mut names = env.clone();
                    names.sort();
                    for variable in names {
                        // A device binds its own values: the file names the variable itself,
                        // which apply does not send for a device placement.
                        let reference = bound
                            .and_then(|b| b.get(&variable))
                            .and_then(reference_text)
                            .unwrap_or_else(|| format!("env:{variable}"));
                        entries.push(format!("{variable} = {}", quote(&reference)));
                    }
                    writeln!(text, "env = {{ {} }}", entries.join(", "))
                        .expect("writing to a String");
                }
            }
        }
        if let Some(placement) = placement {
            writeln!(text, "placement = {}", quote(&placement)).expect("writing to a String");
        }
        if !connection.prefix_tools {
            text.push_str("prefix_tools = false\n");
        }
        let (keys, left_out) = auth::export_keys(connection.auth.as_ref(), http);
        for key in keys {
            writeln!(text, "{key}").expect("writing to a String");
        }
        if !left_out.is_empty() {
            skipped.push(format!(
                "connection {name}: {}: a file gives these to an HTTP server only",
                left_out.join(", ")
            ));
        }
        exported.push(name.clone());
    }
    for detail in &actual.agents {
        let agent = &detail.agent;
        if agent.revoked_at.is_some() {
            continue;
        }
        if !crate::config::is_id(&agent.name) {
            skipped.push(format!(
                "agent {}: its name is not a file id (a-z, 0-9, `_`, `-`)",
                agent.name
            ));
            continue;
        }
        let mut entries = Vec::new();
        for (server, profiles) in actual.reach(detail) {
            if !exported.contains(&server) {
                skipped.push(format!(
                    "agent {}: mcp.{server} is not in the file",
                    agent.name
                ));
                continue;
            }
            if profiles
                .iter()
                .any(|p| *p != own_profile(&agent.name, &server))
            {
                skipped.push(format!(
                    "agent {}: reaches mcp.{server} through profile {} (apply keeps it as it \
                     is)",
                    agent.name,
                    profiles.join(", ")
                ));
            }
            let settings = detail
                .connections
                .iter()
                .find(|c| c.connection_name == server)
                .map(|c| c.settings.clone())
                .unwrap_or_default();
            entries.push(entry(&server, &settings));
        }
        write!(text, "\n[agent.{}]\n", agent.name).expect("writing to a String");
        if entries.is_empty() {
            text.push_str("mcp = []\n");
        } else {
            writeln!(text, "mcp = [\n  {},\n]", entries.join(",\n  "))
                .expect("writing to a String");
        }
        if agent.mode != AgentMode::default() {
            writeln!(text, "mode = {}", quote(agent.mode.as_str())).expect("writing to a String");
        }
        if agent.defer_all {
            text.push_str("defer_tools = true\n");
        }
    }
    Ok((text, skipped))
}

/// One server of an agent's `mcp` list: its id alone when its settings are the defaults.
fn entry(server: &str, settings: &AgentConnectionSettings) -> String {
    let id = format!("mcp.{server}");
    if *settings == AgentConnectionSettings::default() {
        return quote(&id);
    }
    let mut keys = vec![format!("id = {}", quote(&id))];
    let mut tools = Vec::new();
    if !settings.include.is_empty() {
        tools.push(format!("include = {}", list(&settings.include)));
    }
    if !settings.exclude.is_empty() {
        tools.push(format!("exclude = {}", list(&settings.exclude)));
    }
    for (key, on) in [
        ("read_only", settings.read_only),
        ("non_destructive", settings.non_destructive),
        ("idempotent", settings.idempotent),
    ] {
        if on {
            tools.push(format!("{key} = true"));
        }
    }
    if !tools.is_empty() {
        keys.push(format!("tools = {{ {} }}", tools.join(", ")));
    }
    if let Some(approve) = settings.approve {
        keys.push(format!("approve = {}", quote(approve.as_str())));
    }
    if settings.defer {
        keys.push("defer = true".to_owned());
    }
    let defaults = AgentConnectionSettings::default();
    if settings.auth_failure != defaults.auth_failure {
        keys.push(format!(
            "auth_failure = {}",
            quote(settings.auth_failure.as_str())
        ));
    }
    if settings.tool_sync_failure != defaults.tool_sync_failure {
        keys.push(format!(
            "tool_sync_failure = {}",
            quote(settings.tool_sync_failure.as_str())
        ));
    }
    if settings.announce != defaults.announce {
        keys.push(format!("announce = {}", quote(settings.announce.as_str())));
    }
    format!("{{ {} }}", keys.join(", "))
}

/// A TOML basic string.
fn quote(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// A TOML array of strings on one line.
fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| quote(item)).collect();
    format!("[{}]", quoted.join(", "))
}
