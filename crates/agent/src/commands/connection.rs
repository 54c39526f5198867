//! `switchyard connection create|list|retire|restore|discover|diagnose|tools|events|
//! receipt-policy|capture-exclusions`: connectors placed in a workspace.

use crate::cli::ConnectionCommand;
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::input::read_json_object;
use crate::output::{Output, Table, retired_state, time};
use serde_json::Value;
use switchyard_protocol::api::{
    CaptureExclusion, CaptureExclusionsView, ConnectionCredentials, ConnectionEventView,
    ConnectionView, CreateConnection, DiscoveryView, ReceiptPolicyView, SetCaptureExclusions,
    SetPrefixTools, SetReceiptPolicy, ToolView,
};

/// Runs a `connection` subcommand.
pub async fn run(client: &Client, out: Output, cmd: ConnectionCommand) -> Result<(), CliError> {
    match cmd {
        ConnectionCommand::Create {
            workspace,
            name,
            connector,
            runner,
            namespace,
            credentials,
        } => {
            let credentials = match credentials {
                Some(source) => {
                    let bytes = read_json_object(&source)?;
                    Some(
                        serde_json::from_slice::<ConnectionCredentials>(&bytes).map_err(
                            |error| CliError::InvalidJson {
                                name: source.to_string(),
                                source: error,
                            },
                        )?,
                    )
                }
                None => None,
            };
            let body = CreateConnection {
                name,
                connector,
                runner,
                namespace,
                credentials,
                declared: false,
            };
            let reply = client
                .post(&["workspaces", &workspace, "connections"], Body::of(&body))
                .await?;
            out.reply(&reply, |c: ConnectionView| {
                let mut line = format!(
                    "created connection {} ({}, namespace {}): connector {} on runner {}",
                    c.name, c.id, c.namespace, c.connector_name, c.runner
                );
                if let Some(error) = &c.last_discovery_error {
                    line.push_str(&format!(
                        "\ntool discovery failed: {error}\nretry with `switchyard connection discover {workspace} {}`",
                        c.name
                    ));
                } else if c.last_discovery_at.is_some() {
                    line.push_str("; tools discovered (classify them with `switchyard tool classify`)");
                }
                line
            })
        }
        ConnectionCommand::List { workspace } => {
            let reply = client
                .get(&["workspaces", &workspace, "connections"])
                .await?;
            out.reply(&reply, |list: Vec<ConnectionView>| {
                let mut table = Table::new([
                    "NAME",
                    "NAMESPACE",
                    "CONNECTOR",
                    "RUNNER",
                    "STATE",
                    "ID",
                    "DISCOVERY",
                ]);
                for c in list {
                    let discovery = match (c.last_discovery_error, c.last_discovery_at) {
                        (Some(error), _) => format!("failed: {error}"),
                        (None, Some(at)) => time(&at),
                        (None, None) => "never".to_owned(),
                    };
                    table.row([
                        c.name,
                        c.namespace,
                        c.connector_name,
                        c.runner,
                        retired_state(c.retired.as_ref()),
                        c.id.to_string(),
                        discovery,
                    ]);
                }
                table.render_or("no connections")
            })
        }
        ConnectionCommand::Retire {
            workspace,
            connection,
        } => retire(client, out, &workspace, &connection, "retire").await,
        ConnectionCommand::Restore {
            workspace,
            connection,
        } => retire(client, out, &workspace, &connection, "restore").await,
        ConnectionCommand::PrefixTools {
            workspace,
            connection,
            setting,
        } => {
            let body = SetPrefixTools {
                prefix_tools: setting == "on",
            };
            let reply = client
                .put(
                    &connection_path(&workspace, &connection, "prefix-tools"),
                    Body::of(&body),
                )
                .await?;
            out.reply(&reply, |c: ConnectionView| {
                if c.prefix_tools {
                    format!(
                        "connection {}: tools reach agents as {}__<tool>",
                        c.name, c.namespace
                    )
                } else {
                    format!(
                        "connection {}: tools reach agents by their own names",
                        c.name
                    )
                }
            })
        }
        ConnectionCommand::Discover {
            workspace,
            connection,
        } => {
            let reply = client
                .post(
                    &connection_path(&workspace, &connection, "discover"),
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
        ConnectionCommand::Diagnose {
            workspace,
            connection,
            timeout_ms,
        } => {
            let path = connection_path(&workspace, &connection, "diagnose");
            super::diagnose::run(client, out, &path, timeout_ms).await
        }
        ConnectionCommand::Tools {
            workspace,
            connection,
        } => {
            let reply = client
                .get(&connection_path(&workspace, &connection, "tools"))
                .await?;
            out.reply(&reply, |tools: Vec<ToolView>| {
                let mut table = Table::new(["NAME", "AVAILABLE", "DESCRIPTION"]);
                for t in tools {
                    let available = match (t.retired, t.available) {
                        (true, _) => "retired",
                        (false, true) => "yes",
                        (false, false) => "no",
                    };
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
        ConnectionCommand::Events {
            workspace,
            connection,
        } => {
            let reply = client
                .get(&connection_path(&workspace, &connection, "events"))
                .await?;
            out.reply(&reply, |events: Vec<ConnectionEventView>| {
                let mut table = Table::new(["TIME", "KIND", "DETAILS", "RUNNER"]);
                for e in events {
                    table.row([
                        time(&e.at),
                        e.kind,
                        compact_detail(&e.detail),
                        e.runner.unwrap_or_else(|| "-".to_owned()),
                    ]);
                }
                table.render_or("no events")
            })
        }
        ConnectionCommand::ReceiptPolicy {
            workspace,
            connection,
            tool,
            arguments,
        } => {
            let path = connection_path(&workspace, &connection, "receipt-policy");
            let reply = match (tool, arguments) {
                (Some(tool), Some(arguments)) => {
                    let arguments =
                        serde_json::from_str::<Value>(&arguments).map_err(|source| {
                            CliError::InvalidJson {
                                name: "--arguments".to_owned(),
                                source,
                            }
                        })?;
                    client
                        .put(&path, Body::of(&SetReceiptPolicy { tool, arguments }))
                        .await?
                }
                // clap requires both or neither.
                _ => client.get(&path).await?,
            };
            out.reply(&reply, |p: ReceiptPolicyView| {
                format!(
                    "receipt policy of connection {connection}: tool {} with arguments {} (approved {})",
                    p.tool,
                    p.arguments,
                    time(&p.approved_at)
                )
            })
        }
        ConnectionCommand::CaptureExclusions {
            workspace,
            connection,
            tool,
            capture_nothing,
            drop_argument,
            drop_result,
            remove,
        } => {
            let changing =
                capture_nothing || remove || !drop_argument.is_empty() || !drop_result.is_empty();
            let change = changing.then(|| {
                let exclusion = (!remove).then(|| CaptureExclusion {
                    tool: tool.clone(),
                    capture_nothing,
                    drop_argument_fields: drop_argument,
                    drop_result_fields: drop_result,
                });
                (tool, exclusion)
            });
            capture_exclusions(client, out, &workspace, &connection, change).await
        }
    }
}

/// `connection capture-exclusions`: shows them, or changes the one of `tool` (the
/// connection-wide one without it) and sends them all back.
async fn capture_exclusions(
    client: &Client,
    out: Output,
    workspace: &str,
    connection: &str,
    change: Option<(Option<String>, Option<CaptureExclusion>)>,
) -> Result<(), CliError> {
    let path = connection_path(workspace, connection, "capture-exclusions");
    let reply = match change {
        None => client.get(&path).await?,
        Some((tool, exclusion)) => {
            let current: CaptureExclusionsView = client.get(&path).await?.parse()?;
            let mut exclusions: Vec<CaptureExclusion> = current
                .exclusions
                .into_iter()
                .filter(|e| e.tool != tool)
                .collect();
            exclusions.extend(exclusion);
            client
                .put(&path, Body::of(&SetCaptureExclusions { exclusions }))
                .await?
        }
    };
    out.reply(&reply, |view: CaptureExclusionsView| {
        let mut table = Table::new(["TOOL", "KEEPS"]);
        for e in view.exclusions {
            let keeps = if e.capture_nothing {
                "nothing but the disposition".to_owned()
            } else {
                let list = |fields: &[String]| {
                    if fields.is_empty() {
                        "-".to_owned()
                    } else {
                        fields.join(",")
                    }
                };
                format!(
                    "all but arguments {} and result fields {}",
                    list(&e.drop_argument_fields),
                    list(&e.drop_result_fields)
                )
            };
            table.row([e.tool.unwrap_or_else(|| "(every tool)".to_owned()), keeps]);
        }
        table.render_or(&format!(
            "connection {connection} keeps everything it is given"
        ))
    })
}

/// `connection retire` or `connection restore` (`action`): answers the connection as it is now.
async fn retire(
    client: &Client,
    out: Output,
    workspace: &str,
    connection: &str,
    action: &str,
) -> Result<(), CliError> {
    let reply = client
        .post(&connection_path(workspace, connection, action), Body::Empty)
        .await?;
    out.reply(&reply, |c: ConnectionView| {
        let state = retired_state(c.retired.as_ref());
        if action == "restore" {
            format!(
                "connection {}: {state}; its tools are granted by no profile until `switchyard profile set-tools`",
                c.name
            )
        } else {
            format!("connection {}: {state}", c.name)
        }
    })
}

/// The path of one of a connection's resources: `workspaces/{workspace}/connections/{connection}/{leaf}`.
fn connection_path<'a>(workspace: &'a str, connection: &'a str, leaf: &'a str) -> [&'a str; 5] {
    ["workspaces", workspace, "connections", connection, leaf]
}

/// An event's detail object as `key=value` pairs on one line, e.g. `pid=4242 reason=released`.
/// Null values are left out; a string that is empty or holds spaces, quotes, `=` or control
/// characters is shown as a JSON string, so one event never spans lines or splits ambiguously.
fn compact_detail(detail: &Value) -> String {
    let Value::Object(map) = detail else {
        return detail.to_string();
    };
    map.iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(key, value)| {
            let shown = match value {
                Value::String(text) if plain(text) => text.clone(),
                other => other.to_string(),
            };
            format!("{key}={shown}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `text` can be shown unquoted in a `key=value` list.
fn plain(text: &str) -> bool {
    !text.is_empty()
        && !text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '='))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn detail_is_compact_key_value() {
        assert_eq!(compact_detail(&json!({"tools": 4})), "tools=4");
        assert_eq!(
            compact_detail(&json!({"pid": 42, "status": null, "signal": 9})),
            "pid=42 signal=9"
        );
        assert_eq!(
            compact_detail(&json!({"client_session_id": "s1", "reason": "idle"})),
            "client_session_id=s1 reason=idle"
        );
        assert_eq!(
            compact_detail(&json!({"error": "spawn failed:\nno such file", "x": ""})),
            r#"error="spawn failed:\nno such file" x="""#
        );
        assert_eq!(compact_detail(&json!({"a": [1, 2]})), "a=[1,2]");
        assert_eq!(compact_detail(&json!({})), "");
        assert_eq!(compact_detail(&json!("odd")), r#""odd""#);
    }
}
