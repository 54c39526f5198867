//! `switchyard mcp resolve WS CALL FILE|-`: settle an unknown call yourself, citing evidence.
//!
//! The file is the API's `ResolveCall` object (`request_id`, `outcome`, `source_version_id`,
//! `explanation`), sent as read. There is no review queue: the server records the resolution
//! beside the original attempt at once. Its `request_id` makes sending the same file again safe.

use super::action::{self, Action};
use crate::client::Client;
use crate::error::CliError;
use crate::input::{InputSource, read_json_object};
use crate::output::Output;
use switchyard_protocol::api::CallView;

/// Sends the resolution in `file` for `call` and shows the settled call.
pub async fn run(
    client: &Client,
    out: Output,
    workspace: &str,
    call: &str,
    file: &InputSource,
) -> Result<(), CliError> {
    let body = read_json_object(file)?;
    action::post_and_print(
        client,
        out,
        workspace,
        call,
        Action::Resolve(body),
        |call: CallView| {
            let outcome = call
                .resolution_outcome
                .map(|o| o.as_str().to_owned())
                .unwrap_or_else(|| call.state.to_string());
            let evidence = call
                .resolution
                .as_ref()
                .and_then(|r| r.source_version_id)
                .map(|e| format!(", citing evidence {e}"))
                .unwrap_or_default();
            format!("call {}: resolved ({outcome}){evidence}", call.id)
        },
    )
    .await
}
