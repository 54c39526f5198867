//! `switchyard config …`: the declarative configuration file.

use clap::Subcommand;
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
}
