//! One module per command group; [`run`] dispatches a parsed command line to it.
//!
//! Each command sends one or a few API requests through [`Client`] and prints the answer
//! through [`Output`]. `pair` talks to the server it is given, unauthenticated, `config
//! validate` reads a local file only (`config export` reads the workspace), and `mcp-runner` hands over to the runner helper; every other command authenticates as
//! [`crate::auth`] decides. `mcp reconcile|resolve` go under [`mcp`].

mod agent;
mod apply;
mod approval;
mod audit;
mod auth;
mod config;
mod connection;
mod connector;
mod credential;
mod device;
mod device_auth;
mod diagnose;
mod environment;
mod evidence;
mod lookup;
mod loopback;
mod mcp;
mod pair;
mod placements;
mod profile;
mod runner;
mod scope;
mod token;
mod tool;
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
    // Made per command: `pair` and `mcp-runner` need no credential, and must work without one.
    let client = Client::from_env;
    match cli.command {
        Command::Workspace(cmd) => workspace::run(&client()?, out, cmd).await,
        Command::Environment(cmd) => environment::run(&client()?, out, cmd).await,
        Command::Connector(cmd) => connector::run(&client()?, out, cmd).await,
        Command::Connection(cmd) => connection::run(&client()?, out, cmd).await,
        Command::Credential(cmd) => credential::run(&client()?, out, cmd).await,
        Command::Tool(cmd) => tool::run(&client()?, out, cmd).await,
        Command::Profile(cmd) => profile::run(&client()?, out, cmd).await,
        Command::Mcp(cmd) => mcp::run(&client()?, out, cmd).await,
        Command::Agent(cmd) => agent::run(&client()?, out, cmd).await,
        Command::Device(cmd) => device::run(&client()?, out, cmd).await,
        Command::Scope(cmd) => scope::run(&client()?, out, cmd).await,
        Command::Token(cmd) => token::run(&client()?, out, cmd).await,
        Command::Audit(cmd) => audit::run(&client()?, out, cmd).await,
        Command::Evidence(cmd) => evidence::run(&client()?, out, cmd).await,
        Command::Approval(cmd) => approval::run(&client()?, out, cmd).await,
        Command::Auth(args) => auth::authorize(&client()?, out, args).await,
        Command::List(args) => auth::list(&client()?, out, args).await,
        Command::Revoke(args) => auth::revoke(&client()?, out, args).await,
        Command::Config(cmd) => config::run(client, out, cmd).await,
        Command::Apply(args) => apply::run(&client()?, out, args).await,
        Command::Pair(args) => pair::run(out, args).await,
        Command::McpRunner(args) => runner::run(args),
    }
}
