//! `switchyard`: the public Switchyard CLI.
//!
//! `main` only parses the command line, runs it and turns the outcome into a stable exit code
//! (see `EXIT_CODES.md` and [`error::CliError`]). Errors go to stderr, results to stdout.

mod auth;
mod cli;
mod client;
mod commands;
mod config;
mod error;
mod input;
mod output;
mod secret_input;

use clap::Parser;
use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // clap prints usage errors itself and exits 2 (0 for --help and --version).
    let cli = cli::Cli::parse();
    match commands::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{err}");
            ExitCode::from(err.exit_code())
        }
    }
}
