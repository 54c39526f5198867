//! The device runner API: what the central runner does on the datastore, a device runner asks
//! for over HTTP with its device credential, under the runner reference `device:<id>` and the
//! same rules — one live lease per runner, every start, heartbeat and completion fenced by its
//! epoch, the server the only writer of call state.
//!
//! Two additions serve the device's restarts. A restarted process that kept its holder id
//! resumes its live lease under the same epoch (`runner_lease_acquire`), so the receipts in its
//! outbox stay valid; and each heartbeat lists the calls the runner holds, so calls leased to a
//! predecessor (or whose lease answer was lost) and never started go back to the queue; and a
//! restarted process asks which of the starts its outbox recorded were never acknowledged
//! (`runner_check_starts`), since it records a start while it asks for the ack. Uploaded
//! receipts are stored, so a repeated upload answers what the first one did.
//!
//! A device's start and upload check its credential in their own statement (`db::calls::start`,
//! `db::calls::complete`), so a revoked device's change nothing. Its heartbeat is one read
//! (`db::runner_leases`) that also carries the cancellations and session releases for it. A
//! receipt the server fenced (an old epoch whose call moved on, an erased call) is answered
//! `fenced` again on every upload, and `runner_check_receipts` tells a restarted runner to keep
//! it quarantined. The routes are `http::runner`, and the same requests as JSON lines on one
//! upgraded connection in `http::runner_channel` (so an idle device costs the server a socket,
//! not an HTTP connection).

use super::App;
use super::calls::{CompletionRecorded, from_states, stored_completion};
use super::dispatch::leasing::LeaseFeed;
use super::principal::DeviceActor;
use super::sessions::parse_call_id;
use crate::db::{Key, NewReceipt};
use crate::error::{AppError, AppResult};
use std::time::Duration;
use switchyard_protocol::runner::*;
use switchyard_protocol::{CallId, CallState, ConnectionId, ErrorCode, RunnerRef};
use tokio::time::Instant;

/// The longest a lease request waits for work.
const MAX_LEASE_WAIT: Duration = Duration::from_secs(25);
/// The most calls one lease request takes.
const MAX_LEASE_BATCH: u32 = 64;
/// The most receipts, or starts, one check may name (an outbox holds at most 64 starts).
const MAX_CHECK: usize = 256;
/// How long a session release waits for the device's next heartbeat.
pub const RELEASE_TTL: Duration = Duration::from_secs(300);

impl App {
    /// Takes the device's runner lease, or resumes it for the same holder. Another holder's
    /// live lease answers `held`.
    pub async fn runner_acquire(
        &self,
        device: &DeviceActor,
        req: AcquireLease,
    ) -> AppResult<AcquireAnswer> {
        let ttl = self.config.runner_lease_ttl;
        let taken = self
            .db
            .runner_lease_take(device.runner_ref(), req.holder, ttl)
            .await?;
        match self.sent(taken) {
            Some(taken) => {
                self.metrics
                    .calls_finished(CallState::Unknown, taken.unknown);
                Ok(AcquireAnswer::Acquired {
                    epoch: taken.epoch,
                    ttl_seconds: ttl.as_secs(),
                })
            }
            None => Ok(AcquireAnswer::Held {
                retry_after_ms: millis(ttl / 6),
            }),
        }
    }

    /// Renews the lease and tells the runner what to cancel and which sessions to release.
    /// Calls leased under this epoch that the runner does not hold any more, and that were
    /// leased longer than a lease ago, go back to the queue (nothing was sent for them); calls
    /// started under it that it does not hold, longer than a lease ago, become `unknown`.
    ///
    /// One read checks the device credential (refused as any device request is) and answers
    /// the rest; it writes nothing unless there is something to deliver or settle. A stale or
    /// expired epoch is refused at once. The renewal is kept in memory and written by the
    /// flusher in a batch while the lease has at least half its length left, else written now
    /// (see `liveness` for why the sweeper never sees a lease expire while its holder beats).
    pub async fn runner_heartbeat(
        &self,
        credential: &str,
        req: Heartbeat,
    ) -> AppResult<HeartbeatAnswer> {
        let hash = super::principal::device_credential_hash(credential)?;
        let ttl = self.config.runner_lease_ttl;
        let read = self
            .by_credential(self.db.runner_lease_heartbeat(
                &hash,
                req.epoch,
                &req.active,
                ttl,
                RELEASE_TTL,
            ))
            .await?;
        let (device, beat) = (self.admit_device(read.device).await?, read.beat);
        self.metrics.device_polled(device.device.id, req.outbox);
        let runner = device.runner_ref();
        let Some(left) = beat.lease_left_secs else {
            return Err(fenced(req.epoch));
        };
        if self
            .dispatch
            .liveness
            .may_defer(Duration::from_secs_f64(left.max(0.0)))
        {
            self.dispatch.liveness.renewed(runner, req.epoch);
        } else if !self
            .db
            .runner_lease_renew_epoch(runner, req.epoch, ttl)
            .await?
        {
            return Err(fenced(req.epoch));
        }
        if beat.unheld {
            let settled = self
                .db
                .call_settle_unheld(runner, req.epoch, &req.active, ttl)
                .await?;
            let (requeued, orphaned) = self.sent(settled);
            self.metrics.calls_finished(CallState::Unknown, orphaned);
            if requeued > 0 {
                tracing::info!(%runner, requeued, "requeued calls leased to the runner that it no longer holds");
            }
            if orphaned > 0 {
                tracing::warn!(%runner, orphaned, "calls started under the runner's lease that it no longer holds are unknown");
            }
        }
        let cancel = beat.cancel;
        let release = beat
            .release_connections
            .into_iter()
            .zip(beat.release_sessions)
            .zip(beat.release_users)
            .map(
                |((connection_id, client_session_id), user)| SessionRelease {
                    connection_id,
                    client_session_id,
                    submitter: user.map(Submitter::User),
                },
            )
            .collect();
        Ok(HeartbeatAnswer { cancel, release })
    }

    /// Long-polls for work: leases what is queued for the device, else waits (without touching
    /// the database) until a call for it is announced or the wait ends, and looks again. A
    /// stale epoch answers 409 `runner_fenced` at once.
    pub async fn runner_lease(
        &self,
        device: &DeviceActor,
        req: LeaseRequest,
    ) -> AppResult<LeaseAnswer> {
        self.runner_lease_fed(device, req, &mut None).await
    }

    /// [`App::runner_lease`] through the feed a runner channel keeps from one lease to the
    /// next (see [`LeaseFeed`]): a lease that follows a drained one waits before it looks. A
    /// feed of another runner or epoch, or none, is replaced by a new one.
    pub(crate) async fn runner_lease_fed(
        &self,
        device: &DeviceActor,
        req: LeaseRequest,
        feed: &mut Option<LeaseFeed>,
    ) -> AppResult<LeaseAnswer> {
        self.metrics.device_polled(device.device.id, None);
        let runner = device.runner_ref();
        let deadline = Instant::now() + Duration::from_millis(req.wait_ms).min(MAX_LEASE_WAIT);
        let max = req.max.clamp(1, MAX_LEASE_BATCH) as usize;
        if !feed
            .as_ref()
            .is_some_and(|feed| feed.serves(runner, req.epoch))
        {
            *feed = None;
        }
        let feed = feed.get_or_insert_with(|| self.lease_feed(runner, req.epoch));
        match self.lease_waiting(feed, max, deadline).await? {
            Some(calls) => Ok(LeaseAnswer { calls }),
            None => Err(fenced(req.epoch)),
        }
    }

    /// Queues again `calls`, leased to the device but never handed to it (their lease answer
    /// was too long for the runner channel), so that its next lease takes them. A call that
    /// moved on meanwhile stays as it is; one that cannot be queued now is found unheld by the
    /// runner's next heartbeat.
    pub(crate) async fn runner_lease_withdraw(&self, device: &DeviceActor, calls: &[LeasedCall]) {
        let runner = device.runner_ref();
        for call in calls {
            match self
                .db
                .call_requeue_handed(call.call_id, runner, call.epoch)
                .await
            {
                Ok(requeued) => drop(self.sent(requeued)),
                Err(error) => tracing::warn!(
                    %error,
                    call = %call.call_id,
                    "a leased call its runner never received could not be queued again; the runner's heartbeat will"
                ),
            }
        }
        tracing::info!(
            %runner,
            calls = calls.len(),
            "a lease answer too long for the runner channel: its calls are queued again for an HTTP lease"
        );
    }

    /// The start ack: `proceed` when the call moved to running under this epoch, `abandon`
    /// when it is no longer leased to this runner, 409 `runner_fenced` for a stale epoch.
    ///
    /// One statement checks the device credential (refused as any device request is) and
    /// makes the start; a revoked device's start changes nothing.
    pub async fn runner_start(
        &self,
        credential: &str,
        call: &str,
        req: StartRequest,
    ) -> AppResult<StartAnswer> {
        let hash = super::principal::device_credential_hash(credential)?;
        let id = self.device_call_id(credential, call).await?;
        let read = self
            .by_credential(self.db.call_start_by_device(id, &hash, req.epoch))
            .await?;
        let device = self.admit_device(read.device).await?;
        if read.started {
            return Ok(StartAnswer::Proceed);
        }
        let runner = device.runner_ref();
        if let Some(reason) = self.call_fail_retired(id, runner, req.epoch).await? {
            return Ok(StartAnswer::Abandon { reason });
        }
        if self.db.runner_lease_is_current(runner, req.epoch).await? {
            Ok(StartAnswer::Abandon {
                reason:
                    "the call is no longer leased to this runner (cancelled, expired or requeued)"
                        .into(),
            })
        } else {
            Err(fenced(req.epoch))
        }
    }

    /// Records an uploaded receipt, once per receipt id: a repeated upload answers what the
    /// first one did. A stale epoch answers 409 `runner_fenced`.
    ///
    /// Most uploads are one statement: it checks the device credential (refused as any device
    /// request is) and records a completion that implies nothing beside its state change
    /// with its receipt, under a receipt id not seen before. Any other upload then reads
    /// whether the call is placed on the device and whether the receipt was uploaded before.
    pub async fn runner_complete(
        &self,
        credential: &str,
        call: &str,
        req: CompleteRequest,
    ) -> AppResult<CompleteAnswer> {
        let hash = super::principal::device_credential_hash(credential)?;
        let id = self.device_call_id(credential, call).await?;
        let outcome = outcome_name(&req.completion);
        let completion = stored_completion(req.completion);
        let state = completion.state;
        let from = from_states(state);
        // A reader waiting here is handed the call as recorded, read by the statement that
        // records it.
        let read_lineage = self.dispatch.announcer.local.waited_for(id);
        let plain = self
            .by_credential(self.db.call_complete_plain_by_device(
                id,
                &hash,
                req.epoch,
                &from,
                &completion,
                req.receipt_id,
                read_lineage,
            ))
            .await?;
        let plain = self.sent(plain);
        if let Some(finished) = &plain.finished {
            self.metrics.call_completed(finished);
        }
        let device = self.admit_device(plain.device).await?;
        if plain.completed {
            return Ok(CompleteAnswer::Recorded);
        }
        let runner = device.runner_ref();
        let read = self
            .db
            .receipt_upload_read(device.device.workspace_id, id, req.receipt_id)
            .await?;
        // The call must be placed on this device; an upload of this receipt before is
        // answered as it was.
        if read.placed_on != Some(runner) {
            return Err(AppError::refused(
                ErrorCode::CallNotFound,
                format!("no call `{call}` placed on this device"),
            ));
        }
        if let Some(stored) = read.stored {
            return stored_answer(&stored, id, runner, req.epoch);
        }
        let (recorded, receipt_stored) = self
            .call_record_receipt(runner, id, req.epoch, completion, req.receipt_id)
            .await?;
        if receipt_stored {
            // Recorded, and the receipt with it in the same statement.
            return Ok(CompleteAnswer::Recorded);
        }
        let answer = match recorded {
            CompletionRecorded::Recorded => CompleteAnswer::Recorded,
            CompletionRecorded::Fenced => CompleteAnswer::Fenced,
            // Applied before under another receipt id (a retry after a lost answer): the call
            // already holds exactly this outcome from this runner and epoch.
            CompletionRecorded::Superseded
                if self
                    .holds_outcome(&device, id, runner, req.epoch, state)
                    .await? =>
            {
                CompleteAnswer::Recorded
            }
            CompletionRecorded::Superseded => CompleteAnswer::Superseded,
        };
        let receipt = NewReceipt {
            receipt_id: req.receipt_id,
            call_id: id,
            runner_ref: runner,
            epoch: req.epoch,
            outcome,
            answer: answer_name(&answer),
            applied: answer == CompleteAnswer::Recorded,
        };
        if !self.db.receipt_insert(&receipt).await? {
            // A concurrent upload of the same receipt stored its answer first.
            let stored = self
                .db
                .receipt_get(req.receipt_id)
                .await?
                .ok_or_else(|| AppError::Internal("receipt vanished".into()))?;
            return stored_answer(&stored, id, runner, req.epoch);
        }
        match answer {
            CompleteAnswer::Fenced => Err(fenced(req.epoch)),
            answer => Ok(answer),
        }
    }

    /// Which of the runner's unacknowledged receipts must stay quarantined: those of another
    /// epoch than the current one whose call is no longer running under their epoch, those of
    /// calls whose evidence was erased, and those of calls that are not this runner's.
    pub async fn runner_check_receipts(
        &self,
        device: &DeviceActor,
        req: ReceiptCheck,
    ) -> AppResult<ReceiptCheckAnswer> {
        check_size(req.receipts.len(), "receipts")?;
        let runner = device.runner_ref();
        let current = self.db.runner_lease_epoch(runner).await?;
        let mut fenced = Vec::new();
        for receipt in req.receipts {
            let call = self
                .db
                .call_get(device.device.workspace_id, receipt.call_id)
                .await?;
            let quarantined = match call {
                Some(call) if call.runner_ref == runner => {
                    let still_running =
                        call.state == CallState::Running && call.lease_epoch == Some(receipt.epoch);
                    // A receipt of a call whose evidence was erased is fenced too.
                    !still_running
                        && (current != Some(receipt.epoch) || call.evidence_erased_at.is_some())
                }
                _ => true,
            };
            if quarantined {
                fenced.push(receipt.receipt_id);
            }
        }
        Ok(ReceiptCheckAnswer { fenced })
    }

    /// Which of the starts a runner recorded before it stopped the server never acknowledged
    /// to it: calls of its workspace that were never started, or not under that epoch by this
    /// runner. (A started call is never leased again, so a start acknowledged to the runner
    /// leaves the call started under its runner reference and epoch.) A call the server does
    /// not find is not listed: whether it was sent is not known here.
    pub async fn runner_check_starts(
        &self,
        device: &DeviceActor,
        req: StartCheck,
    ) -> AppResult<StartCheckAnswer> {
        check_size(req.starts.len(), "starts")?;
        let runner = device.runner_ref();
        let mut unacknowledged = Vec::new();
        for start in req.starts {
            let call = self
                .db
                .call_get(device.device.workspace_id, start.call_id)
                .await?;
            let Some(call) = call else { continue };
            let acknowledged = call.started_at.is_some()
                && call.runner_ref == runner
                && call.lease_epoch == Some(start.epoch);
            if !acknowledged {
                unacknowledged.push(start.call_id);
            }
        }
        Ok(StartCheckAnswer { unacknowledged })
    }

    /// Records a lifecycle event the device reports, for a connection placed on it.
    pub async fn runner_event(&self, device: &DeviceActor, event: LifecycleEvent) -> AppResult<()> {
        self.placed_on(device, event.connection_id()).await?;
        self.event_record(device.runner_ref(), &event).await
    }

    /// Records where the OAuth grant of a connection placed on this device stands (the grant
    /// itself stays in the device's keyring), so that `switchyard list` anywhere, the
    /// inspector and the agent endpoint show it.
    pub async fn runner_auth_state(
        &self,
        device: &DeviceActor,
        report: AuthStateReport,
    ) -> AppResult<()> {
        let connection = report.connection_id;
        self.placed_on(device, connection).await?;
        if self
            .db
            .connection_auth_state_reported(connection, report.state)
            .await?
        {
            tracing::info!(%connection, state = %report.state, device = %device.device.id, "a device reported its grant's state");
        }
        Ok(())
    }

    /// Refuses a connection that is not placed on `device` (`connection_not_found`).
    async fn placed_on(&self, device: &DeviceActor, connection: ConnectionId) -> AppResult<()> {
        let placed_here = self
            .db
            .connection_find(device.device.workspace_id, &Key::Id(connection.0))
            .await?
            .is_some_and(|c| c.runner_ref == device.runner_ref());
        if placed_here {
            Ok(())
        } else {
            Err(AppError::refused(
                ErrorCode::ConnectionNotFound,
                format!("no connection `{connection}` placed on this device"),
            ))
        }
    }

    /// Gives the lease of `epoch` up at once (clean shutdown), so a successor need not wait.
    pub async fn runner_release(&self, device: &DeviceActor, epoch: Epoch) -> AppResult<()> {
        Ok(self
            .db
            .runner_lease_release_epoch(device.runner_ref(), epoch)
            .await?)
    }

    /// The call id in a device request's path. A malformed one is refused after the
    /// credential is checked, so that an unauthenticated request is told that first.
    async fn device_call_id(&self, credential: &str, call: &str) -> AppResult<CallId> {
        match parse_call_id(call) {
            Ok(id) => Ok(id),
            Err(error) => {
                self.authenticate_device(credential).await?;
                Err(error)
            }
        }
    }

    /// Whether the call ended with `outcome`, reported by this runner under `epoch`.
    async fn holds_outcome(
        &self,
        device: &DeviceActor,
        call: CallId,
        runner: RunnerRef,
        epoch: Epoch,
        outcome: CallState,
    ) -> AppResult<bool> {
        Ok(self
            .db
            .call_get(device.device.workspace_id, call)
            .await?
            .is_some_and(|c| {
                c.runner_ref == runner && c.lease_epoch == Some(epoch) && c.state == outcome
            }))
    }
}

/// The answer a stored receipt was given, for a repeated upload of it.
fn stored_answer(
    stored: &crate::db::ReceiptRow,
    call: CallId,
    runner: RunnerRef,
    epoch: Epoch,
) -> AppResult<CompleteAnswer> {
    if stored.call_id != call || stored.runner_ref != runner || stored.epoch != epoch {
        return Err(AppError::refused(
            ErrorCode::InvalidRequest,
            format!(
                "receipt `{}` was uploaded before for another call or epoch; receipt ids must be unique",
                stored.receipt_id
            ),
        ));
    }
    match stored.answer.as_str() {
        "recorded" => Ok(CompleteAnswer::Recorded),
        "superseded" => Ok(CompleteAnswer::Superseded),
        _ => Err(fenced(epoch)),
    }
}

fn fenced(epoch: Epoch) -> AppError {
    AppError::refused(
        ErrorCode::RunnerFenced,
        format!(
            "lease epoch {} is not this runner's current lease: another process owns the runner now; stop sending and drain",
            epoch.0
        ),
    )
}

/// Refuses a receipt or start check naming more than [`MAX_CHECK`] `what`.
fn check_size(len: usize, what: &str) -> AppResult<()> {
    if len > MAX_CHECK {
        return Err(AppError::refused(
            ErrorCode::InvalidRequest,
            format!("check at most {MAX_CHECK} {what} at once"),
        ));
    }
    Ok(())
}

/// The call state name a completion moves the call to.
fn outcome_name(completion: &Completion) -> &'static str {
    match completion {
        Completion::Succeeded { .. } => "succeeded",
        Completion::ToolError { .. } => "tool_error",
        Completion::Failed { .. } => "failed",
        Completion::Unknown { .. } => "unknown",
    }
}

fn answer_name(answer: &CompleteAnswer) -> &'static str {
    match answer {
        CompleteAnswer::Recorded => "recorded",
        CompleteAnswer::Superseded => "superseded",
        CompleteAnswer::Fenced => "fenced",
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
