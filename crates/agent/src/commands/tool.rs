//! `switchyard tool list|classify`: a connection's tools as people govern them. Only a
//! classified tool can be called; the server's annotations are shown as hints beside the
//! classification, never in its place.

use crate::cli::ToolCommand;
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, Table};
use switchyard_protocol::api::{Risk, ToolClassification, ToolHints, ToolView};

/// Runs a `tool` subcommand.
pub async fn run(client: &Client, out: Output, cmd: ToolCommand) -> Result<(), CliError> {
    match cmd {
        ToolCommand::List {
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
                let mut table = Table::new(["NAME", "HINTS", "STATE", "CLASSIFICATION", "REVIEW"]);
                for t in tools {
                    table.row([
                        t.name,
                        hints(&t.hints),
                        t.state.to_string(),
                        t.classification
                            .map(classification)
                            .unwrap_or_else(|| "-".to_owned()),
                        if t.needs_review {
                            "needs review".to_owned()
                        } else {
                            "-".to_owned()
                        },
                    ]);
                }
                table.render_or("no tools discovered yet (run `switchyard connection discover`)")
            })
        }
        ToolCommand::Classify {
            workspace,
            connection,
            tool,
            risk,
            side_effect,
            read_only: _,
        } => {
            // clap admits exactly one of --side-effect and --read-only, and only these risks.
            let risk: Risk = risk
                .parse()
                .map_err(|e| CliError::Usage(format!("--risk: {e}")))?;
            let body = ToolClassification { side_effect, risk };
            let reply = client
                .put(
                    &[
                        "workspaces",
                        &workspace,
                        "connections",
                        &connection,
                        "tools",
                        &tool,
                        "classification",
                    ],
                    Body::of(&body),
                )
                .await?;
            out.reply(&reply, |t: ToolView| {
                format!(
                    "classified {} of {connection}: {}",
                    t.name,
                    t.classification
                        .map(classification)
                        .unwrap_or_else(|| "-".to_owned())
                )
            })
        }
    }
}

/// `side-effect/high`, `read-only/low`.
fn classification(c: ToolClassification) -> String {
    let effect = if c.side_effect {
        "side-effect"
    } else {
        "read-only"
    };
    format!("{effect}/{}", c.risk)
}

/// The hints the server gave, e.g. `read-only,closed-world`; `-` for none.
fn hints(h: &ToolHints) -> String {
    let said = [
        (h.read_only, "read-only", "writes"),
        (h.destructive, "destructive", "non-destructive"),
        (h.idempotent, "idempotent", "non-idempotent"),
        (h.open_world, "open-world", "closed-world"),
    ];
    let words: Vec<&str> = said
        .into_iter()
        .filter_map(|(hint, yes, no)| hint.map(|hint| if hint { yes } else { no }))
        .collect();
    if words.is_empty() {
        "-".to_owned()
    } else {
        words.join(",")
    }
}
