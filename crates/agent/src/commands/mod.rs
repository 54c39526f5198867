//! One module per command group; [`run`] dispatches a parsed command line to it.
//!
//! Each command sends one or a few API requests through [`Client`] and prints the answer
//! through [`Output`]. Later groups (`pair`, `device …`, `mcp-runner DIR`) get their own
//! module here; `mcp reconcile|resolve` go under [`mcp`].

mod connection;
mod connector;
mod environment;
mod lookup;
mod mcp;
mod profile;
mod workspace;

use crate::cli::{Cli, Command};
use crate::client::Client;
use crate::error::CliError;
use crate::output::{Format, Output};

/// Runs one parsed command line.
pub async fn run(cli: Cli) -> Result<(), CliError> {
    let out = Output::new(if cli.json {
        Format::Json
    } else {
        Format::Human
    });
    let client = Client::from_env()?;
    match cli.command {
        Command::Workspace(cmd) => workspace::run(&client, out, cmd).await,
        Command::Environment(cmd) => environment::run(&client, out, cmd).await,
        Command::Connector(cmd) => connector::run(&client, out, cmd).await,
        Command::Connection(cmd) => connection::run(&client, out, cmd).await,
        Command::Profile(cmd) => profile::run(&client, out, cmd).await,
        Command::Mcp(cmd) => mcp::run(&client, out, cmd).await,
    }
}
