//! `switchyard config …`: the declarative configuration file.

use clap::{Args, Subcommand};
use std::path::PathBuf;

/// `switchyard config …`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Check a `switchyard.toml` without contacting a server: every literal secret, unknown
    /// key and misplaced setting is reported with its line and column (exit 2).
    Validate {
        /// The file to check.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Write a workspace as a `switchyard.toml` on stdout: every connection in service and
    /// every agent not revoked that the file can express (others are named on stderr).
    /// `switchyard apply` of the output changes nothing. Connectors' commands and URLs are
    /// shown only to installation owners, so an owner exports.
    Export {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
    },
}

/// `switchyard apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The `switchyard.toml` to apply.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The workspace (id or name), when the file has no `workspace = "…"` key; if it has one,
    /// they must agree.
    #[arg(long, value_name = "WS")]
    pub workspace: Option<String>,
    /// Print the plan and stop: nothing is changed.
    #[arg(long)]
    pub dry_run: bool,
}
