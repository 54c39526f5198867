//! Following a call until it settles (terminal, or `unknown`) without polling it.
//!
//! Each read is `GET …/calls/{call}?wait_ms=N`: the server answers the moment the call settles,
//! or once N ms have passed, and then it is simply asked again. [`READ_WAIT`] stays below the
//! server's own cap (25 s) and far below the client's request timeout (60 s), so a long read is
//! never taken for a server that stopped answering. There is no overall deadline, as before: a
//! call always settles (its `timeout_seconds`, or queue expiry), and Ctrl-C ends the command at
//! once. Nothing here resubmits anything: a read is all it ever sends.

use crate::client::{Client, Reply};
use crate::error::CliError;
use std::time::Duration;
use switchyard_protocol::CallState;
use switchyard_protocol::api::CallView;
use tokio::time::Instant;

/// How long one read lets the server wait for the call to settle.
pub const READ_WAIT: Duration = Duration::from_secs(20);

// Under the server's cap (a longer wait is cut to it anyway) and well under the request timeout.
const _: () = assert!(
    READ_WAIT.as_secs() < 25 && READ_WAIT.as_secs() * 2 < crate::client::REQUEST_TIMEOUT.as_secs()
);

/// The least time between two reads, so that a server which answers at once instead of
/// waiting (one that predates `wait_ms`) is asked once a second rather than in a tight loop.
const MIN_READ_INTERVAL: Duration = Duration::from_secs(1);

/// Whether a call in `state` has settled: terminal, or `unknown` (it may never change again
/// without a reconcile or a resolution, so waiting longer would be waiting forever).
pub fn is_settled(state: CallState) -> bool {
    state.is_terminal() || state == CallState::Unknown
}

/// Reads `call` again, as often as needed, until it has settled; returns the last answer and
/// the call it holds. It always reads at least once.
pub async fn read_settled(client: &Client, call: &CallView) -> Result<(Reply, CallView), CliError> {
    // The call's own workspace id: unambiguous even if the name given was not.
    let (workspace, id) = (call.workspace_id.to_string(), call.id.to_string());
    let wait_ms = READ_WAIT.as_millis().to_string();
    loop {
        let asked = Instant::now();
        let reply = client
            .get_with_query(
                &["workspaces", &workspace, "calls", &id],
                &[("wait_ms", &wait_ms)],
            )
            .await?;
        let call: CallView = reply.parse()?;
        if is_settled(call.state) {
            return Ok((reply, call));
        }
        tokio::time::sleep_until(asked + MIN_READ_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_protocol::state::ALL_STATES;

    #[test]
    fn settled_means_terminal_or_unknown() {
        let settled: Vec<CallState> = ALL_STATES.into_iter().filter(|s| is_settled(*s)).collect();
        let waiting: Vec<CallState> = ALL_STATES.into_iter().filter(|s| !is_settled(*s)).collect();
        assert_eq!(
            waiting,
            [
                CallState::AwaitingApproval,
                CallState::Queued,
                CallState::Leased,
                CallState::Running
            ]
        );
        assert!(settled.contains(&CallState::Declined));
        assert!(settled.contains(&CallState::Unknown));
        assert!(settled.contains(&CallState::Resolved));
    }
}
