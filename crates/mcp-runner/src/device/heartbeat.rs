//! The heartbeat: renews the runner lease, reports the calls held, and forwards the server's
//! cancel and release requests to the executor. It ends the lease term when the server fences
//! the epoch, refuses the credential, or cannot be reached for a whole lease length.

use super::client::{ApiFailure, RunnerClient};
use super::state::{ActiveCalls, Halt, Stop};
use crate::handle::{CancelOutcome, ExecutorHandle};
use crate::outbox::Outbox;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use switchyard_protocol::CallId;
use switchyard_protocol::runner::{Epoch, Heartbeat, HeartbeatAnswer};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The longest time between two heartbeats.
const MAX_INTERVAL: Duration = Duration::from_secs(10);
/// The shortest, whatever the lease length.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// One lease term's heartbeat.
pub(crate) struct HeartbeatTask {
    /// Where to send it.
    pub client: RunnerClient,
    /// The term's epoch.
    pub epoch: Epoch,
    /// The lease length the server granted.
    pub ttl: Duration,
    /// The calls held, reported with each beat.
    pub active: Arc<ActiveCalls>,
    /// Where cancel and release requests go.
    pub executor: ExecutorHandle,
    /// Ends the term.
    pub halt: Arc<Halt>,
    /// The outbox, whose depth each beat reports.
    pub outbox: Arc<Outbox>,
}

impl HeartbeatTask {
    /// How often to beat: a third of the lease, between one and ten seconds.
    fn interval(&self) -> Duration {
        (self.ttl / 3).clamp(MIN_INTERVAL, MAX_INTERVAL)
    }

    /// Beats until `done` (the term is over: the executor has stopped) or the lease is lost.
    /// It keeps beating while the executor drains, so running calls finish under a live lease.
    pub(crate) async fn run(self, done: CancellationToken) {
        let interval = self.interval();
        let mut renewed = Instant::now();
        // The server repeats a cancellation until the call ends; the executor needs it once.
        let mut cancelled = HashSet::new();
        loop {
            tokio::select! {
                () = done.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
            }
            let beat = Heartbeat {
                epoch: self.epoch,
                active: self.active.list(),
                outbox: self.outbox_depth().await,
            };
            let answer = tokio::select! {
                () = done.cancelled() => return,
                answer = self.client.heartbeat(&beat) => answer,
            };
            match answer {
                Ok(answer) => {
                    renewed = Instant::now();
                    self.forward(answer, &mut cancelled);
                }
                Err(ApiFailure::Fenced { message }) => {
                    self.halt.halt(Stop::Fenced { reason: message });
                    return;
                }
                Err(ApiFailure::Revoked { code, message }) => {
                    self.halt.halt(Stop::Revoked { code, message });
                    return;
                }
                Err(failure) => {
                    let silent = renewed.elapsed();
                    if silent >= self.ttl {
                        self.halt.halt(Stop::Fenced {
                            reason: format!(
                                "the lease could not be renewed for {} s and has expired: {failure}",
                                silent.as_secs()
                            ),
                        });
                        return;
                    }
                    tracing::warn!(%failure, "cannot renew the runner lease; trying again");
                }
            }
        }
    }

    /// The receipts the server has not acknowledged, read on a blocking thread; `None` (not
    /// reported) when the outbox cannot be read — admission reports that failure itself.
    async fn outbox_depth(&self) -> Option<u32> {
        let outbox = Arc::clone(&self.outbox);
        match tokio::task::spawn_blocking(move || outbox.unacknowledged_count()).await {
            Ok(Ok(count)) => Some(u32::try_from(count).unwrap_or(u32::MAX)),
            Ok(Err(error)) => {
                tracing::debug!(%error, "cannot count the outbox's receipts for the heartbeat");
                None
            }
            Err(_) => None,
        }
    }

    /// Hands the answer's cancel and release requests to the executor, without waiting for
    /// them to take effect (the executor may be busy; the next beat must not be late).
    fn forward(&self, answer: HeartbeatAnswer, cancelled: &mut HashSet<CallId>) {
        for call_id in answer.cancel {
            if !cancelled.insert(call_id) {
                continue;
            }
            let executor = self.executor.clone();
            let active = Arc::clone(&self.active);
            tokio::spawn(async move {
                let outcome = executor.cancel(call_id).await;
                tracing::info!(%call_id, ?outcome, "cancellation requested by the server");
                // A call cancelled before its start never reports: the server settled it.
                if matches!(outcome, CancelOutcome::NotStarted | CancelOutcome::NotFound) {
                    active.remove(call_id);
                }
            });
        }
        for release in answer.release {
            let executor = self.executor.clone();
            tokio::spawn(async move {
                let released = executor
                    .release(
                        release.connection_id,
                        release.client_session_id,
                        release.submitter,
                    )
                    .await;
                tracing::info!(
                    connection_id = %release.connection_id,
                    released,
                    "session release requested by the server"
                );
            });
        }
    }
}
