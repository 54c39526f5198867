//! [`DeviceControl`]: the device runner's [`ControlPlane`], over the server's runner API, with
//! every start and completion recorded in the outbox first.
//!
//! - `lease` long-polls for at most as many calls as both the executor and the outbox have room
//!   for; while admission is paused it waits a moment and returns nothing.
//! - `start` records the start in the outbox while it asks the server, and the executor may
//!   send the request only when both succeeded. A start the server refuses (or cannot be asked
//!   about) is taken back out of the outbox. A call the outbox holds already is abandoned
//!   whatever the server answered. If the record fails after a `proceed`, the request is not
//!   sent: the call is reported `failed` with code `outbox_unavailable` (the server has marked
//!   it running, and `failed` is the truth — nothing was sent) and the executor is told to
//!   abandon it. Side by side is as safe as one after the other: nothing is sent before both,
//!   and a crash between the record and the server's answer leaves a `started` entry for a
//!   call the server may never have marked running. Recovery asks the server which such starts
//!   it never acknowledged and takes those back (the server leases the call again); the rest
//!   it reports `unknown`, as before.
//! - `complete` records the receipt while it uploads it, then records the acknowledgement (or
//!   the quarantine, when the server refuses the receipt for good). Side by side is as safe as
//!   one after the other: a crash before the receipt is recorded loses it either way (the call
//!   then turns `unknown`, as its started entry is reported at the next start), and a receipt
//!   the server took before the crash settles the call whatever the outbox holds. If the receipt
//!   cannot be recorded it is still uploaded, from memory, and admission pauses.
//! - An acknowledgement is recorded by the next start's transaction, or on its own
//!   [`ACKNOWLEDGE_DELAY`] later when no start comes, and at the end of the lease term: it
//!   needs no disk sync, and a write of its own right after the upload competed for the CPU
//!   with the server answering the caller. Until it is recorded, a crash leaves the receipt
//!   `recorded`, so it is uploaded again after the restart and answered as before (the server
//!   records a receipt id once), as for an acknowledgement lost to a power loss.
//! - A refused device credential or a fenced epoch ends the lease term (see [`super::state`]).

use super::client::{ApiFailure, RunnerClient};
use super::retry::until_answered;
use super::state::{ActiveCalls, Admission, Halt, Pause, Stop, lock};
use crate::control::{ControlError, ControlPlane, StartDecision};
use crate::outbox::{Capacity, EntryState, Outbox, OutboxError, Receipt};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_protocol::CallId;
use switchyard_protocol::api::CallError;
use switchyard_protocol::runner::{
    CompleteAnswer, CompleteRequest, Completion, Epoch, LeaseRequest, LeasedCall, LifecycleEvent,
    StartAnswer,
};

/// How long `lease` waits before answering "nothing" while admission is paused.
const PAUSED_WAIT: Duration = Duration::from_secs(1);
/// The error code of a call the server does not know (erased, or never this device's).
const CALL_NOT_FOUND: &str = "call_not_found";
/// The error code a call is failed with when its start could not be recorded.
const OUTBOX_UNAVAILABLE: &str = "outbox_unavailable";
/// How long a receipt's acknowledgement waits for a start to record it before it is recorded
/// on its own.
const ACKNOWLEDGE_DELAY: Duration = Duration::from_millis(500);

/// The device runner's control plane for one lease term (one epoch).
pub(crate) struct DeviceControl {
    client: RunnerClient,
    outbox: Arc<Outbox>,
    epoch: Epoch,
    /// The executor's `max_concurrent`: how many leased calls may be in flight at once.
    max_concurrent: usize,
    admission: Arc<Admission>,
    halt: Arc<Halt>,
    active: Arc<ActiveCalls>,
    /// The receipts of reports the server has not answered yet, so that a retried report
    /// uploads the same receipt id.
    reports: Mutex<HashMap<CallId, Receipt>>,
    /// Receipts the server acknowledged that the outbox does not hold as acknowledged yet.
    acknowledged: Arc<Acknowledged>,
}

/// The receipt ids the server acknowledged whose acknowledgement the outbox has not recorded
/// yet, and whether a delayed write of them is due.
#[derive(Debug, Default)]
struct Acknowledged {
    receipts: Mutex<Vec<uuid::Uuid>>,
    write_due: AtomicBool,
}

impl Acknowledged {
    /// Takes every pending acknowledgement, to be recorded by the caller.
    fn take(&self) -> Vec<uuid::Uuid> {
        std::mem::take(&mut *lock(&self.receipts))
    }

    /// Puts back acknowledgements taken but not recorded.
    fn put_back(&self, receipts: Vec<uuid::Uuid>) {
        lock(&self.receipts).extend(receipts);
    }

    /// Records every pending acknowledgement in `outbox`, each on its own (unsynced). Those
    /// the outbox cannot record (its disk full, say) are kept for the next start or the end of
    /// the term; one never recorded leaves its receipt `recorded`, to be uploaded again after a
    /// restart and answered as before.
    async fn write(&self, outbox: &Arc<Outbox>) {
        let receipts = self.take();
        if receipts.is_empty() {
            return;
        }
        let written = on_outbox(outbox, move |outbox| {
            for (at, receipt_id) in receipts.iter().enumerate() {
                match outbox.acknowledge(*receipt_id) {
                    // Pruned by a start meanwhile, or never recorded (uploaded from memory).
                    Ok(()) | Err(OutboxError::NoSuchReceipt(_)) => {}
                    Err(error) => return Ok(Some((receipts[at..].to_vec(), error))),
                }
            }
            Ok(None)
        })
        .await;
        let error = match written {
            Ok(None) => return,
            Ok(Some((left, error))) => {
                self.put_back(left);
                error
            }
            Err(error) => error,
        };
        tracing::warn!(
            %error,
            "the outbox could not record the server's acknowledgements of some receipts; a later start tries again, and failing that they are uploaded again after a restart"
        );
    }
}

/// Where a receipt upload left the receipt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    /// The server took it (applied, or kept as a late receipt).
    Acknowledged,
    /// The server does not know the call; kept in quarantine.
    Quarantined,
    /// The server fenced the receipt's epoch (it is not the runner's current lease); kept in
    /// quarantine. Uploading it again would get the same answer.
    Fenced,
}

impl DeviceControl {
    /// A control plane for the lease term under `epoch`.
    pub(crate) fn new(
        client: RunnerClient,
        outbox: Arc<Outbox>,
        epoch: Epoch,
        max_concurrent: usize,
        admission: Arc<Admission>,
        halt: Arc<Halt>,
        active: Arc<ActiveCalls>,
    ) -> Self {
        Self {
            client,
            outbox,
            epoch,
            max_concurrent: max_concurrent.max(1),
            admission,
            halt,
            active,
            reports: Mutex::new(HashMap::new()),
            acknowledged: Arc::default(),
        }
    }

    /// Records the acknowledgements still pending in the outbox: at the end of the lease term.
    pub(crate) async fn write_acknowledgements(&self) {
        self.acknowledged.write(&self.outbox).await;
    }

    /// Keeps the server's acknowledgement of `receipt_id` for the next start to record, and
    /// makes sure it is recorded within [`ACKNOWLEDGE_DELAY`] should no start come.
    fn acknowledge_later(&self, receipt_id: uuid::Uuid) {
        lock(&self.acknowledged.receipts).push(receipt_id);
        if self.acknowledged.write_due.swap(true, Ordering::AcqRel) {
            return;
        }
        let acknowledged = Arc::clone(&self.acknowledged);
        let outbox = Arc::clone(&self.outbox);
        tokio::spawn(async move {
            tokio::time::sleep(ACKNOWLEDGE_DELAY).await;
            acknowledged.write_due.store(false, Ordering::Release);
            acknowledged.write(&outbox).await;
        });
    }

    /// How many more calls the outbox has room for; pauses or resumes admission accordingly.
    async fn outbox_room(&self) -> usize {
        let retry_storage = self.admission.storage_failed();
        let capacity = on_outbox(&self.outbox, move |outbox| {
            // After a storage failure, only a successful write proves storage works again.
            if retry_storage {
                outbox.probe()?;
            }
            outbox.capacity()
        })
        .await;
        match capacity {
            Ok(Capacity::Open { free }) => {
                self.admission.resume();
                free
            }
            Ok(Capacity::Full { live }) => {
                self.admission.pause(Pause::Full { live });
                0
            }
            Ok(Capacity::Stale {
                unacknowledged,
                oldest,
            }) => {
                self.admission.pause(Pause::Stale {
                    unacknowledged,
                    oldest,
                });
                0
            }
            Err(error) => {
                self.admission.pause(Pause::Storage {
                    error: error.to_string(),
                });
                0
            }
        }
    }

    /// Sorts a failure of the server into the executor's terms, ending the lease term when the
    /// credential is refused or the epoch fenced.
    fn failure(&self, failure: ApiFailure) -> ControlError {
        match failure {
            ApiFailure::Revoked { code, message } => {
                self.halt.halt(Stop::Revoked { code, message });
                ControlError::Fenced(self.epoch)
            }
            ApiFailure::Fenced { message } => {
                self.halt.halt(Stop::Fenced { reason: message });
                ControlError::Fenced(self.epoch)
            }
            refused @ ApiFailure::Refused { .. } => ControlError::Unavailable(refused.to_string()),
            ApiFailure::Unavailable(reason) => ControlError::Unavailable(reason),
        }
    }

    /// Ends the lease term after the server fenced a receipt of this term's epoch: the epoch
    /// is not the runner's current lease any more.
    fn fenced_receipt(&self) -> ControlError {
        self.halt.halt(Stop::Fenced {
            reason: format!(
                "the server refused a receipt of epoch {}: it is no longer this runner's lease",
                self.epoch.0
            ),
        });
        ControlError::Fenced(self.epoch)
    }

    /// Reports `completion` and records what the server said about it. The first report of a
    /// call makes a new receipt and records it in the outbox while it is uploaded; a retry
    /// uploads the same receipt again.
    async fn report(
        &self,
        call_id: CallId,
        epoch: Epoch,
        completion: Completion,
    ) -> Result<Settled, ApiFailure> {
        let pending = lock(&self.reports).get(&call_id).cloned();
        let settled = match pending {
            Some(receipt) => upload(&self.client, &self.outbox, &receipt).await?,
            None => {
                let receipt = Receipt {
                    receipt_id: uuid::Uuid::new_v4(),
                    call_id,
                    epoch,
                    completion,
                };
                lock(&self.reports).insert(call_id, receipt.clone());
                // The upload first, as the start's request goes before its record.
                let (sent, ()) = tokio::join!(send(&self.client, &receipt), self.record(&receipt));
                let settled = sent?;
                if settled == Settled::Acknowledged {
                    self.acknowledge_later(receipt.receipt_id);
                } else {
                    settle(&self.outbox, &receipt, settled).await;
                }
                settled
            }
        };
        lock(&self.reports).remove(&call_id);
        self.active.remove(call_id);
        Ok(settled)
    }

    /// Records a new receipt in the outbox; when it cannot, pauses admission (the receipt is
    /// uploaded from memory).
    async fn record(&self, receipt: &Receipt) {
        let new = receipt.clone();
        let recorded = on_outbox(&self.outbox, move |outbox| {
            outbox.record_receipt_with_id(new.receipt_id, new.call_id, new.epoch, &new.completion)
        })
        .await;
        match recorded {
            Ok(stored) if stored.receipt_id == receipt.receipt_id => {}
            // The executor starts a call once and reports it through here only: the outbox
            // cannot hold another receipt for it. Should it, that one stays for the next start.
            Ok(stored) => tracing::error!(
                call_id = %receipt.call_id,
                receipt_id = %receipt.receipt_id,
                stored = %stored.receipt_id,
                "the outbox holds another receipt for this call; that one is offered at the next start"
            ),
            Err(error) => {
                tracing::error!(
                    call_id = %receipt.call_id,
                    %error,
                    "cannot record the receipt in the outbox; uploading it from memory"
                );
                self.admission.pause(Pause::Storage {
                    error: error.to_string(),
                });
            }
        }
    }

    /// Reports a call whose start the server acknowledged but the outbox could not record:
    /// nothing was sent, so it is `failed`. Retries an unavailable server until the
    /// report is taken or the lease term ends; then the executor is told to abandon the call.
    async fn fail_unrecorded_start(
        &self,
        call_id: CallId,
        epoch: Epoch,
        error: OutboxError,
    ) -> Result<StartDecision, ControlError> {
        tracing::error!(
            %call_id,
            %error,
            "cannot record the start in the outbox; the request is not sent"
        );
        self.admission.pause(pause_for(&error));
        let completion = Completion::Failed {
            error: CallError {
                code: OUTBOX_UNAVAILABLE.to_owned(),
                message: format!(
                    "the device runner could not record the start in its receipt outbox \
                     ({error}); the request was not sent"
                ),
            },
        };
        let answered = until_answered(self.halt.token(), "report the unsent call", || {
            self.report(call_id, epoch, completion.clone())
        })
        .await;
        match answered {
            Some(Ok(Settled::Acknowledged | Settled::Quarantined)) | None => {
                Ok(StartDecision::Abandon {
                    reason: format!("the start could not be recorded: {error}"),
                })
            }
            Some(Ok(Settled::Fenced)) => Err(self.fenced_receipt()),
            Some(Err(failure)) => Err(self.failure(failure)),
        }
    }

    /// Takes back a start recorded for a call whose request will not be sent. Should that
    /// fail, the entry stays `started` (the next recovery asks the server about it) and
    /// admission pauses.
    async fn withdraw_start(&self, call_id: CallId, epoch: Epoch) {
        let withdrawn = on_outbox(&self.outbox, move |outbox| {
            outbox.withdraw_start(call_id, epoch)
        })
        .await;
        if let Err(error) = withdrawn {
            tracing::warn!(%call_id, %error, "cannot take back the start recorded in the outbox");
            self.admission.pause(Pause::Storage {
                error: error.to_string(),
            });
        }
    }
}

impl ControlPlane for DeviceControl {
    async fn lease(&self, max: usize, wait: Duration) -> Result<Vec<LeasedCall>, ControlError> {
        // Each call in flight may still need an entry, and each leased call needs one.
        let in_flight = self.max_concurrent.saturating_sub(max);
        let room = self.outbox_room().await.saturating_sub(in_flight);
        let max = max.min(room);
        if max == 0 || self.halt.is_halted() {
            tokio::select! {
                () = tokio::time::sleep(PAUSED_WAIT) => {}
                () = self.halt.token().cancelled() => {}
            }
            return Ok(Vec::new());
        }
        let request = LeaseRequest {
            epoch: self.epoch,
            max: u32::try_from(max).unwrap_or(u32::MAX),
            wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        };
        let answer = self
            .client
            .lease(&request)
            .await
            .map_err(|failure| self.failure(failure))?;
        self.active
            .add(answer.calls.iter().map(|call| call.call_id));
        Ok(answer.calls)
    }

    async fn start(&self, call_id: CallId, epoch: Epoch) -> Result<StartDecision, ControlError> {
        // The start is recorded while the server is asked; the request is sent only when both
        // succeeded. A call the outbox holds already was started (or reported) by this runner
        // before: it is never started twice, whatever the server answers.
        let acknowledged = self.acknowledged.take();
        let recording = acknowledged.clone();
        // The request first: it is the longer way, and handing the record to a blocking
        // thread (a wake-up of another thread) need not come before it.
        let (answer, recorded) = tokio::join!(
            self.client.start(call_id, epoch),
            on_outbox(&self.outbox, move |outbox| {
                outbox.record_start_acknowledging(call_id, epoch, &recording)
            }),
        );
        if recorded.is_err() {
            self.acknowledged.put_back(acknowledged);
        }
        // Why the server will not have the call sent, unless it answered `proceed`.
        let refusal = match answer {
            Ok(StartAnswer::Proceed) => None,
            Ok(StartAnswer::Abandon { reason }) => Some(Ok(reason)),
            Err(ApiFailure::Refused {
                status: 404,
                code,
                message,
            }) => Some(Ok(format!("{code}: {message}"))),
            Err(failure) => Some(Err(failure)),
        };
        match (recorded, refusal) {
            (Ok(()), None) => Ok(StartDecision::Proceed),
            (Err(OutboxError::AlreadyRecorded { state, .. }), refusal) => {
                // A started entry is a start of this lease term (recovery reported every
                // earlier one): that start goes on and reports. Any other entry is a call
                // this runner no longer holds.
                if state != EntryState::Started {
                    self.active.remove(call_id);
                }
                if let Some(Err(failure)) = refusal {
                    return Err(self.failure(failure));
                }
                Ok(StartDecision::Abandon {
                    reason: format!("the outbox already holds this call ({state:?})"),
                })
            }
            // The server marked the call running and nothing was sent: it is reported failed.
            (Err(error), None) => self.fail_unrecorded_start(call_id, epoch, error).await,
            (Err(error), Some(refusal)) => {
                // Nothing started, nothing sent: the call's lease expires and it is queued again.
                self.admission.pause(pause_for(&error));
                match refusal {
                    Err(failure @ (ApiFailure::Revoked { .. } | ApiFailure::Fenced { .. })) => {
                        Err(self.failure(failure))
                    }
                    _ => {
                        self.active.remove(call_id);
                        Ok(StartDecision::Abandon {
                            reason: format!("the receipt outbox cannot record the start: {error}"),
                        })
                    }
                }
            }
            (Ok(()), Some(refusal)) => {
                // Not sent after all: the call may be started again (a retried start, a lease).
                self.withdraw_start(call_id, epoch).await;
                match refusal {
                    Ok(reason) => {
                        self.active.remove(call_id);
                        Ok(StartDecision::Abandon { reason })
                    }
                    Err(failure) => Err(self.failure(failure)),
                }
            }
        }
    }

    async fn complete(
        &self,
        call_id: CallId,
        epoch: Epoch,
        completion: Completion,
    ) -> Result<(), ControlError> {
        match self.report(call_id, epoch, completion).await {
            Ok(Settled::Acknowledged | Settled::Quarantined) => Ok(()),
            Ok(Settled::Fenced) => Err(self.fenced_receipt()),
            Err(failure) => Err(self.failure(failure)),
        }
    }

    async fn report_event(&self, event: LifecycleEvent) {
        match self.client.event(&event).await {
            Ok(()) => {}
            Err(ApiFailure::Revoked { code, message }) => {
                self.halt.halt(Stop::Revoked { code, message });
            }
            Err(failure) => {
                tracing::warn!(%failure, "a session lifecycle event could not be delivered");
            }
        }
    }
}

/// The pause an outbox that cannot record a start calls for.
fn pause_for(error: &OutboxError) -> Pause {
    match error {
        OutboxError::Full { live } => Pause::Full { live: *live },
        error => Pause::Storage {
            error: error.to_string(),
        },
    }
}

/// Uploads `receipt` once; records the server's acknowledgement in the outbox, or the
/// quarantine when the server refuses the receipt for good (its epoch fenced, or a call it does
/// not know).
pub(crate) async fn upload(
    client: &RunnerClient,
    outbox: &Arc<Outbox>,
    receipt: &Receipt,
) -> Result<Settled, ApiFailure> {
    let settled = send(client, receipt).await?;
    settle(outbox, receipt, settled).await;
    Ok(settled)
}

/// Uploads `receipt` once: where the server's answer leaves it.
async fn send(client: &RunnerClient, receipt: &Receipt) -> Result<Settled, ApiFailure> {
    let request = CompleteRequest {
        receipt_id: receipt.receipt_id,
        epoch: receipt.epoch,
        completion: receipt.completion.clone(),
    };
    match client.complete(receipt.call_id, &request).await {
        Ok(CompleteAnswer::Recorded | CompleteAnswer::Superseded) => Ok(Settled::Acknowledged),
        // The server answers a fenced receipt with 409 `runner_fenced` (and the same again for
        // a repeated upload); the answer body form means the same.
        Ok(CompleteAnswer::Fenced) | Err(ApiFailure::Fenced { .. }) => Ok(Settled::Fenced),
        Err(ApiFailure::Refused { code, .. }) if code == CALL_NOT_FOUND => Ok(Settled::Quarantined),
        Err(failure) => Err(failure),
    }
}

/// Records in the outbox what the server said about `receipt`: acknowledged, or quarantined.
async fn settle(outbox: &Arc<Outbox>, receipt: &Receipt, settled: Settled) {
    let receipt_id = receipt.receipt_id;
    let recorded = if settled == Settled::Acknowledged {
        on_outbox(outbox, move |outbox| outbox.acknowledge(receipt_id)).await
    } else {
        tracing::warn!(
            call_id = %receipt.call_id,
            %receipt_id,
            epoch = receipt.epoch.0,
            ?settled,
            "the server refused the receipt for good; it stays quarantined in the outbox"
        );
        on_outbox(outbox, move |outbox| outbox.quarantine(receipt_id)).await
    };
    match recorded {
        Ok(()) => {}
        // Uploaded from memory: the outbox never held it.
        Err(OutboxError::NoSuchReceipt(_)) => {}
        // The server has its answer stored; at the next start the receipt is offered again
        // and gets the same answer.
        Err(error) => tracing::warn!(
            %receipt_id,
            %error,
            "the server answered the receipt but the outbox could not record that"
        ),
    }
}

/// Runs an outbox operation on a blocking thread: every commit waits for the disk.
pub(crate) async fn on_outbox<T, F>(outbox: &Arc<Outbox>, operation: F) -> Result<T, OutboxError>
where
    T: Send + 'static,
    F: FnOnce(&Outbox) -> Result<T, OutboxError> + Send + 'static,
{
    let outbox = Arc::clone(outbox);
    tokio::task::spawn_blocking(move || operation(&outbox))
        .await
        .unwrap_or_else(|error| Err(OutboxError::Interrupted(error.to_string())))
}
