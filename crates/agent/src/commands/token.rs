//! `switchyard token create|list|revoke`: the caller's own personal API tokens.

use crate::cli::TokenCommand;
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, Table, opt_time, print_json, time};
use switchyard_protocol::api::{CreateToken, CreatedToken, TokenView};

/// Runs a `token` subcommand.
pub async fn run(client: &Client, out: Output, cmd: TokenCommand) -> Result<(), CliError> {
    match cmd {
        TokenCommand::Create { name, expires_in } => {
            let reply = client
                .post(
                    &["tokens"],
                    Body::of(&CreateToken {
                        name,
                        expires_in_seconds: expires_in,
                    }),
                )
                .await?;
            if out.is_json() {
                print_json(&reply);
                return Ok(());
            }
            // The secret alone on stdout, so that it can be piped into a secret store; what
            // it is goes to stderr.
            let created: CreatedToken = reply.parse()?;
            eprintln!(
                "created token {} ({}), {}; its secret is shown this once",
                created.token.name,
                created.token.id,
                match created.token.expires_at {
                    Some(at) => format!("expires {}", time(&at)),
                    None => "works until revoked".to_owned(),
                }
            );
            println!("{}", created.secret);
            Ok(())
        }
        TokenCommand::List => {
            let reply = client.get(&["tokens"]).await?;
            out.reply(&reply, |list: Vec<TokenView>| {
                let mut table = Table::new(["NAME", "ID", "CREATED", "EXPIRES", "REVOKED"]);
                for token in list {
                    table.row([
                        token.name,
                        token.id.to_string(),
                        time(&token.created_at),
                        opt_time(token.expires_at.as_ref()),
                        opt_time(token.revoked_at.as_ref()),
                    ]);
                }
                table.render_or("no tokens")
            })
        }
        TokenCommand::Revoke { token } => {
            let reply = client
                .post(&["tokens", &token, "revoke"], Body::Empty)
                .await?;
            out.reply(&reply, |token: TokenView| {
                format!("revoked token {} ({})", token.name, token.id)
            })
        }
    }
}
