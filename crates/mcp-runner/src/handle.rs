//! Commands into a running executor: cancel a call, release a warm session.
//!
//! An [`ExecutorHandle`] sends each command over a channel into the executor's loop, which
//! applies commands in order with everything else it does, and answers once the command has
//! taken effect. A handle outliving its executor gets the "nothing there" answer.

use switchyard_protocol::runner::Submitter;
use switchyard_protocol::{CallId, ConnectionId};
use tokio::sync::{mpsc, oneshot};

/// What [`ExecutorHandle::cancel`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The call had not been started and now never will be. Nothing is reported for it: the
    /// control plane has already settled it as cancelled.
    NotStarted,
    /// The call has been started. If its request was sent, `notifications/cancelled` goes to
    /// the MCP server; either way its completion will be reported (the server's answer if one
    /// comes within the grace period, `failed`/`cancelled` if the request was never sent,
    /// else `unknown`/`cancelled`).
    Cancelling,
    /// This executor holds no such call: never leased here, already finished, or the executor
    /// has stopped.
    NotFound,
}

/// A command for the executor loop.
#[derive(Debug)]
pub(crate) enum Command {
    /// Cancel a call.
    Cancel {
        call_id: CallId,
        reply: oneshot::Sender<CancelOutcome>,
    },
    /// Drain the sessions with this key (of this submitter, or everyone's); answers how
    /// many were affected.
    Release {
        connection_id: ConnectionId,
        client_session_id: Option<String>,
        submitter: Option<Submitter>,
        reply: oneshot::Sender<usize>,
    },
}

/// Controls a running [`crate::Executor`]; cheap to clone. Get it with
/// [`crate::Executor::handle`] before calling `run`.
#[derive(Clone, Debug)]
pub struct ExecutorHandle {
    commands: mpsc::UnboundedSender<Command>,
}

impl ExecutorHandle {
    /// A handle sending into `commands`.
    pub(crate) fn new(commands: mpsc::UnboundedSender<Command>) -> Self {
        Self { commands }
    }

    /// Cancels call `call_id`: a call not yet started is never started; a started call is
    /// cancelled at the MCP server. Returns once the executor has applied it.
    pub async fn cancel(&self, call_id: CallId) -> CancelOutcome {
        let (reply, answer) = oneshot::channel();
        if self
            .commands
            .send(Command::Cancel { call_id, reply })
            .is_err()
        {
            return CancelOutcome::NotFound;
        }
        answer.await.unwrap_or(CancelOutcome::NotFound)
    }

    /// Releases the warm sessions of `connection_id` for `client_session_id` (`None`: the
    /// default session) of `submitter` under any profile (`None`: of every submitter): they
    /// take no new calls, their active calls finish, then they close (`released`). The next
    /// call with that key opens a new session. Returns how many sessions were released, once
    /// the executor has applied it.
    pub async fn release(
        &self,
        connection_id: ConnectionId,
        client_session_id: Option<String>,
        submitter: Option<Submitter>,
    ) -> usize {
        let (reply, answer) = oneshot::channel();
        let command = Command::Release {
            connection_id,
            client_session_id,
            submitter,
            reply,
        };
        if self.commands.send(command).is_err() {
            return 0;
        }
        answer.await.unwrap_or(0)
    }
}
