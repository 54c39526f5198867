//! `switchyard environment create|list`.

use crate::cli::EnvironmentCommand;
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, Table};
use switchyard_protocol::api::{CreateEnvironment, EnvironmentView};

/// Runs an `environment` subcommand.
pub async fn run(client: &Client, out: Output, cmd: EnvironmentCommand) -> Result<(), CliError> {
    match cmd {
        EnvironmentCommand::Create { workspace, name } => {
            let reply = client
                .post(
                    &["workspaces", &workspace, "environments"],
                    Body::of(&CreateEnvironment { name }),
                )
                .await?;
            out.reply(&reply, |env: EnvironmentView| {
                format!("created environment {} ({})", env.name, env.id)
            })
        }
        EnvironmentCommand::List { workspace } => {
            let reply = client
                .get(&["workspaces", &workspace, "environments"])
                .await?;
            out.reply(&reply, |list: Vec<EnvironmentView>| {
                let mut table = Table::new(["NAME", "ID"]);
                for env in list {
                    table.row([env.name, env.id.to_string()]);
                }
                table.render_or("no environments")
            })
        }
    }
}
