//! `switchyard mcp release WS SESSION [--connection C]`: let a warm session key go.
//!
//! The server drains every warm MCP session with that key on the named connection, or on every
//! connection the caller may use: active calls finish, then the sessions close. It lists the
//! connections it asked, whether or not a session with that key was open there.

use crate::client::{Body, Client};
use crate::commands::lookup::{connection_names, name_or_id};
use crate::error::CliError;
use crate::output::{Output, print_json, print_text};
use switchyard_protocol::api::{ReleaseAnswer, ReleaseSession};

/// Releases `session` in `workspace`, on `connection` only when given.
pub async fn run(
    client: &Client,
    out: Output,
    workspace: &str,
    session: &str,
    connection: Option<String>,
) -> Result<(), CliError> {
    let body = ReleaseSession {
        connection_id: connection,
    };
    let reply = client
        .post(
            &["workspaces", workspace, "sessions", session, "release"],
            Body::of(&body),
        )
        .await?;
    if out.is_json() {
        print_json(&reply);
        return Ok(());
    }
    let answer: ReleaseAnswer = reply.parse()?;
    if answer.connection_ids.is_empty() {
        print_text(&format!(
            "session {}: no connection you may use, nothing to release",
            answer.client_session_id
        ));
        return Ok(());
    }
    let names = connection_names(client, workspace).await?;
    let draining: Vec<String> = answer
        .connection_ids
        .iter()
        .map(|id| name_or_id(&names, id))
        .collect();
    print_text(&format!(
        "session {}: draining on {} (active calls finish, then the sessions close)",
        answer.client_session_id,
        draining.join(", ")
    ));
    Ok(())
}
