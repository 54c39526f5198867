//! Recovery at the start of every lease term, before any new call is admitted: calls a previous
//! process started but never finished are reported `unknown` (their request may have reached
//! the MCP server), and receipts the server never acknowledged are checked and uploaded. A
//! start is recorded while the server is asked to acknowledge it, so the server is asked first
//! which of the unfinished starts it never acknowledged: those were never sent, and are taken
//! back (the server leases such a call again).

use super::client::{ApiFailure, RunnerClient};
use super::control::{Settled, on_outbox, upload};
use super::retry::until_answered;
use super::state::{Halt, Stop};
use crate::outbox::{Outbox, OutboxError, StartedCall};
use std::collections::HashSet;
use std::sync::Arc;
use switchyard_protocol::CallId;
use switchyard_protocol::api::CallError;
use switchyard_protocol::runner::{Completion, ReceiptCheck, ReceiptRef, StartCheck, StartRef};

/// The error code of a call cut off by a runner restart.
const RUNNER_RESTARTED: &str = "runner_restarted";

/// What recovery did.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    /// Unfinished calls now reported `unknown`.
    pub unknown: usize,
    /// Starts the server never acknowledged, taken back: nothing was sent.
    pub withdrawn: usize,
    /// Receipts uploaded and acknowledged.
    pub uploaded: usize,
    /// Receipts the server refused for good, now quarantined.
    pub quarantined: usize,
    /// Receipts the server refused this time; offered again at the next start.
    pub left: usize,
}

/// Recovers the outbox. `None` when the lease term ended meanwhile (shutdown, fencing, a
/// refused credential: the reason is in `halt`); what was not done yet is done at the next start.
pub(crate) async fn recover(
    client: &RunnerClient,
    outbox: &Arc<Outbox>,
    halt: &Halt,
) -> Result<Option<Recovered>, OutboxError> {
    let mut recovered = Recovered::default();

    let unfinished = on_outbox(outbox, Outbox::unfinished).await?;
    let Some(unacknowledged) = unacknowledged_starts(client, halt, &unfinished).await else {
        return Ok(None);
    };
    // The receipt is recorded first, like any completion, and uploaded with the others below.
    for call in unfinished {
        if unacknowledged.contains(&call.call_id) {
            tracing::info!(
                call_id = %call.call_id,
                epoch = call.epoch.0,
                "the server never acknowledged this start; it is taken back (nothing was sent)"
            );
            on_outbox(outbox, move |outbox| {
                outbox.withdraw_start(call.call_id, call.epoch)
            })
            .await?;
            recovered.withdrawn += 1;
            continue;
        }
        tracing::warn!(
            call_id = %call.call_id,
            epoch = call.epoch.0,
            "the call was running when the runner stopped; reporting it unknown"
        );
        let completion = Completion::Unknown {
            error: CallError {
                code: RUNNER_RESTARTED.to_owned(),
                message: "the device runner stopped while the call was running; the request \
                          may have reached the MCP server, so whether the tool acted is unknown"
                    .to_owned(),
            },
        };
        on_outbox(outbox, move |outbox| {
            outbox.record_receipt(call.call_id, call.epoch, &completion)
        })
        .await?;
        recovered.unknown += 1;
    }

    let receipts = on_outbox(outbox, Outbox::unacknowledged).await?;
    if receipts.is_empty() {
        return Ok(Some(recovered));
    }
    let check = ReceiptCheck {
        receipts: receipts
            .iter()
            .map(|receipt| ReceiptRef {
                receipt_id: receipt.receipt_id,
                call_id: receipt.call_id,
                epoch: receipt.epoch,
            })
            .collect(),
    };
    let fenced: HashSet<uuid::Uuid> = match until_answered(
        halt.token(),
        "check unacknowledged receipts with the server",
        || client.check_receipts(&check),
    )
    .await
    {
        None => return Ok(None),
        Some(Ok(answer)) => answer.fenced.into_iter().collect(),
        Some(Err(failure)) => {
            if let Some(refused) = end_term(halt, failure) {
                tracing::error!(
                    %refused,
                    receipts = receipts.len(),
                    "cannot check the unacknowledged receipts; they are offered again at the next start"
                );
                recovered.left = receipts.len();
                return Ok(Some(recovered));
            }
            return Ok(None);
        }
    };

    for receipt in receipts {
        if fenced.contains(&receipt.receipt_id) {
            let receipt_id = receipt.receipt_id;
            tracing::warn!(
                call_id = %receipt.call_id,
                %receipt_id,
                "the server says this receipt must not be uploaded; it stays quarantined"
            );
            on_outbox(outbox, move |outbox| outbox.quarantine(receipt_id)).await?;
            recovered.quarantined += 1;
            continue;
        }
        match until_answered(halt.token(), "upload a receipt", || {
            upload(client, outbox, &receipt)
        })
        .await
        {
            None => return Ok(None),
            Some(Ok(Settled::Acknowledged)) => recovered.uploaded += 1,
            // A receipt of an earlier epoch the check let through may still be fenced by the
            // time it arrives; that says nothing about the current lease.
            Some(Ok(Settled::Quarantined | Settled::Fenced)) => recovered.quarantined += 1,
            Some(Err(failure)) => match end_term(halt, failure) {
                Some(refused) => {
                    tracing::error!(
                        call_id = %receipt.call_id,
                        receipt_id = %receipt.receipt_id,
                        %refused,
                        "the server refused the receipt; it is offered again at the next start"
                    );
                    recovered.left += 1;
                }
                None => return Ok(None),
            },
        }
    }
    Ok(Some(recovered))
}

/// Which of the `unfinished` starts the server never acknowledged. `None` when the lease term
/// ended meanwhile. When the server refuses the check (a server without it answers 404), every
/// start counts as acknowledged: each is reported `unknown`, which is never wrong about a
/// request that may have been sent.
async fn unacknowledged_starts(
    client: &RunnerClient,
    halt: &Halt,
    unfinished: &[StartedCall],
) -> Option<HashSet<CallId>> {
    if unfinished.is_empty() {
        return Some(HashSet::new());
    }
    let check = StartCheck {
        starts: unfinished
            .iter()
            .map(|call| StartRef {
                call_id: call.call_id,
                epoch: call.epoch,
            })
            .collect(),
    };
    match until_answered(halt.token(), "check cut-off starts with the server", || {
        client.check_starts(&check)
    })
    .await?
    {
        Ok(answer) => Some(answer.unacknowledged.into_iter().collect()),
        Err(failure) => {
            let refused = end_term(halt, failure)?;
            tracing::error!(
                %refused,
                starts = unfinished.len(),
                "cannot check the cut-off starts; they are reported unknown"
            );
            Some(HashSet::new())
        }
    }
}

/// Ends the lease term for a refused credential or a fenced epoch; any other failure is given
/// back.
fn end_term(halt: &Halt, failure: ApiFailure) -> Option<ApiFailure> {
    match failure {
        ApiFailure::Revoked { code, message } => {
            halt.halt(Stop::Revoked { code, message });
            None
        }
        ApiFailure::Fenced { message } => {
            halt.halt(Stop::Fenced { reason: message });
            None
        }
        other => Some(other),
    }
}
