//! `switchyard connection diagnose WS CONN`: the connection's checks in order, one line each,
//! then the handshake's failure class and the server's stderr tail; exit 9 when one failed.

use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, print_json, print_text};
use switchyard_protocol::diagnose::{CheckStatus, DiagnoseRequest, DiagnosisView, LiveCheck};

/// Asks the server to diagnose the connection at `path` and prints what it found.
pub async fn run(
    client: &Client,
    out: Output,
    path: &[&str],
    timeout_ms: Option<u64>,
) -> Result<(), CliError> {
    let reply = client
        .post(path, Body::of(&DiagnoseRequest { timeout_ms }))
        .await?;
    let diagnosis: DiagnosisView = reply.parse()?;
    if out.is_json() {
        print_json(&reply);
    } else {
        print_text(&human(&diagnosis));
    }
    if diagnosis.passed {
        return Ok(());
    }
    let failed: Vec<&str> = diagnosis
        .checks
        .iter()
        .filter(|c| c.status == CheckStatus::Failed)
        .map(|c| c.check.as_str())
        .collect();
    let class = diagnosis
        .failure
        .map(|class| format!(" ({class})"))
        .unwrap_or_default();
    Err(CliError::DiagnoseFailed {
        connection: diagnosis.connection,
        failed: format!("failed: {}{class}", failed.join(", ")),
    })
}

/// The diagnosis for people: a line per check, then what the handshake's failure was.
fn human(diagnosis: &DiagnosisView) -> String {
    let mut text = format!(
        "connection {} ({})\n",
        diagnosis.connection, diagnosis.runner
    );
    for check in &diagnosis.checks {
        text.push_str(&format!(
            "{:<7} {:<11} {}\n",
            check.status.as_str(),
            check.check.as_str(),
            check.detail
        ));
    }
    if let Some(class) = diagnosis.failure {
        text.push_str(&format!("failure: {class}\n"));
    }
    if let Some(tail) = &diagnosis.stderr_tail {
        text.push_str("stderr (last lines):\n");
        for line in tail.lines() {
            text.push_str(&format!("  | {line}\n"));
        }
    }
    if diagnosis.live_check == LiveCheck::OnDevice {
        text.push_str("the live check ran on the device, by its runner, with its credentials\n");
    }
    text
}
