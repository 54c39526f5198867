//! The runner's view of the control plane: lease work, ask to start it, report how it ended.
//!
//! The central executor implements this directly on the server's datastore; the device
//! companion implements it over authenticated HTTP. The executor only ever talks to this trait,
//! so both placements run the same execution code.

use std::future::Future;
use std::time::Duration;
use switchyard_protocol::CallId;
use switchyard_protocol::runner::{Completion, Epoch, LeasedCall, LifecycleEvent};

/// What the control plane says when a runner asks to start a leased call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartDecision {
    /// The start is recorded: the runner may now send the request to the MCP server.
    Proceed,
    /// The call must not be sent (cancelled, or no longer leased to this runner).
    Abandon {
        /// Why, for the log.
        reason: String,
    },
}

/// Why the control plane refused or could not answer.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The runner's epoch is stale: another process owns the runner now. Stop sending.
    #[error("lease epoch {0:?} is stale")]
    Fenced(Epoch),
    /// The control plane could not be reached or failed; the runner may try again later.
    #[error("control plane unavailable: {0}")]
    Unavailable(String),
}

/// The control-plane side of a runner.
pub trait ControlPlane: Send + Sync + 'static {
    /// Leases up to `max` queued calls for this runner, waiting up to `wait` for work to arrive.
    /// An empty answer means nothing arrived in time.
    fn lease(
        &self,
        max: usize,
        wait: Duration,
    ) -> impl Future<Output = Result<Vec<LeasedCall>, ControlError>> + Send;

    /// Asks to start a leased call. Only after [`StartDecision::Proceed`] may the request be sent.
    fn start(
        &self,
        call_id: CallId,
        epoch: Epoch,
    ) -> impl Future<Output = Result<StartDecision, ControlError>> + Send;

    /// Reports how a started (or abandoned-before-send) call ended.
    fn complete(
        &self,
        call_id: CallId,
        epoch: Epoch,
        completion: Completion,
    ) -> impl Future<Output = Result<(), ControlError>> + Send;

    /// Records a sanitized session lifecycle event. Best effort: an event that cannot be
    /// delivered is logged and dropped, and never holds up a call.
    fn report_event(&self, event: LifecycleEvent) -> impl Future<Output = ()> + Send;
}
