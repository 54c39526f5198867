//! `switchyard scope begin`: begin an operation, the immutable scope (workspace, environment,
//! profile, task) a device's calls run under.
//!
//! Human output is the operation id alone, so a script can capture it
//! (`OP=$(switchyard scope begin …)`) and put it in call files as `operation_id`.

use crate::cli::ScopeCommand;
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::Output;
use switchyard_protocol::api::{BeginOperation, OperationView};

/// Runs a `scope` subcommand.
pub async fn run(client: &Client, out: Output, cmd: ScopeCommand) -> Result<(), CliError> {
    match cmd {
        ScopeCommand::Begin {
            workspace,
            environment,
            profile,
            task,
        } => {
            let body = BeginOperation {
                environment,
                profile,
                task,
            };
            let reply = client
                .post(&["workspaces", &workspace, "operations"], Body::of(&body))
                .await?;
            out.reply(&reply, |op: OperationView| op.id.to_string())
        }
    }
}
