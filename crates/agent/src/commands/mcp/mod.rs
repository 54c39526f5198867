//! `switchyard mcp …`: submitting tool calls and following them.
//!
//! One module per verb; `reconcile` and `resolve` join them here.

mod action;
mod call;
mod cancel;
mod erase;
mod reconcile;
mod release;
mod resolve;
mod status;
mod view;
mod wait;

pub use view::result_text;

use crate::cli::McpCommand;
use crate::client::Client;
use crate::error::CliError;
use crate::output::Output;

/// Runs an `mcp` subcommand.
pub async fn run(client: &Client, out: Output, cmd: McpCommand) -> Result<(), CliError> {
    match cmd {
        McpCommand::Call {
            workspace,
            file,
            wait,
        } => call::run(client, out, &workspace, &file, wait).await,
        McpCommand::Status {
            workspace,
            call: None,
            page,
        } => status::list(client, out, &workspace, &page).await,
        McpCommand::Status {
            workspace,
            call: Some(call),
            page: _,
        } => status::show(client, out, &workspace, &call).await,
        McpCommand::Cancel { workspace, call } => cancel::run(client, out, &workspace, &call).await,
        McpCommand::Release {
            workspace,
            session,
            connection,
        } => release::run(client, out, &workspace, &session, connection).await,
        McpCommand::Reconcile {
            workspace,
            call,
            file,
        } => reconcile::run(client, out, &workspace, &call, &file).await,
        McpCommand::Resolve {
            workspace,
            call,
            file,
        } => resolve::run(client, out, &workspace, &call, &file).await,
        McpCommand::Erase { workspace, call } => erase::run(client, out, &workspace, &call).await,
    }
}
