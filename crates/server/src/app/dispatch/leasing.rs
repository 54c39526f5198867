//! Leasing calls to a runner, the same way for the central runner and device runners: lease
//! queued calls under the runner's epoch and turn each into the work item the runner needs.
//!
//! One statement leases a batch, records the target each call is dispatched to and reads
//! everything else the work items and the checks below need; only a call refused here costs
//! another (its failure). It scans the runner's queue from the floor `queue_floors` keeps, so
//! its cost does not grow with the calls finished since VACUUM last could clean up.
//!
//! A runner's leases follow each other through a [`LeaseFeed`]: a lease that follows one which
//! took every queued call waits for an announcement before it looks, rather than making an
//! empty look first (one statement per call a runner runs one at a time). While a lease
//! waits, a lone submission for its runner may hand it its call, inserted already leased (see
//! [`super::handoff`]).

use super::wakeups::Waiter;
use crate::app::App;
use crate::app::reconcile::lookup_refusal;
use crate::db::LeasedRow;
use serde_json::Value;
use switchyard_protocol::runner::{ConnectionTarget, Epoch, LeasedCall, Submitter};
use switchyard_protocol::{CallState, RunnerRef};
use tokio::time::Instant;

/// What one lease attempt took.
#[derive(Debug, Default)]
pub struct LeaseBatch {
    /// The work items, ready to run.
    pub calls: Vec<LeasedCall>,
    /// Whether it leased as many calls as it was asked for (refused ones included): more may
    /// be queued. A batch that is not full took every queued call it could lock.
    pub full: bool,
}

/// What one runner's leases under one epoch carry from one to the next: its subscription to
/// the announcements of its calls (made before its first look, so it has buffered every
/// announcement since), and whether the last lease took every queued call it could lock.
#[derive(Debug)]
pub(crate) struct LeaseFeed {
    runner: RunnerRef,
    epoch: Epoch,
    waiter: Waiter,
    /// The last lease leased calls and was not full: every call queued since was announced,
    /// so the next lease waits for an announcement instead of looking at once.
    drained: bool,
}

impl LeaseFeed {
    /// Whether this feed is the one of `runner`'s leases under `epoch`.
    pub(crate) fn serves(&self, runner: RunnerRef, epoch: Epoch) -> bool {
        self.runner == runner && self.epoch == epoch
    }

    /// Waits for an announcement of a call for the runner, or `deadline`: false at the
    /// deadline or when the server stops.
    pub(crate) async fn wait(&mut self, deadline: Instant) -> bool {
        self.waiter.wait(deadline).await
    }
}

impl App {
    /// A new feed for `runner`'s leases under `epoch`; its first lease looks at once.
    pub(crate) fn lease_feed(&self, runner: RunnerRef, epoch: Epoch) -> LeaseFeed {
        LeaseFeed {
            runner,
            epoch,
            waiter: self.dispatch.announcer.local.waiter(&runner.to_string()),
            drained: false,
        }
    }

    /// Leases up to `max` calls through `feed`, waiting (without touching the database) until
    /// `deadline` for calls to be announced — or handed to it — when there are none; empty at
    /// the deadline or when the server stops. `None` (leasing nothing) unless the feed's epoch is the runner's live
    /// lease. A lease that follows a drained one waits before its first look.
    pub(crate) async fn lease_waiting(
        &self,
        feed: &mut LeaseFeed,
        max: usize,
        deadline: Instant,
    ) -> Result<Option<Vec<LeasedCall>>, sqlx::Error> {
        let mut look = !std::mem::take(&mut feed.drained);
        loop {
            if look {
                // Announcements received so far are of calls committed before this look, so
                // it sees them all: they are no reason to look again.
                feed.waiter.skip_received();
                // Boxed: a long-poll spends its life waiting, and the lease's state (a
                // query's) is larger than the waiting's; inline, every waiting long-poll
                // would hold it.
                let Some(batch) = Box::pin(self.lease_calls(feed.runner, feed.epoch, max)).await?
                else {
                    return Ok(None);
                };
                if !batch.calls.is_empty() {
                    feed.drained = !batch.full;
                    return Ok(Some(batch.calls));
                }
                if batch.full {
                    // Every call it leased was refused; more may be queued.
                    continue;
                }
            }
            look = true;
            // While it waits, a lone submission for the runner may hand it its call (see
            // `handoff`); announcements for other runners are no reason to look.
            let mut offer = self.dispatch.handoffs.offer(feed.runner, feed.epoch);
            let event = tokio::select! {
                given = offer.given() => Err(given),
                woken = feed.waiter.wait(deadline) => Ok(woken),
            };
            let woken = match event {
                Err(Some(call)) => {
                    // Every call queued since the last look was announced, and the feed keeps
                    // those announcements: it stays drained.
                    feed.drained = true;
                    return Ok(Some(vec![call]));
                }
                // The claim was dropped without a call: its submission queued it (and
                // announced it), or found its request_id taken. It looks.
                Err(None) => continue,
                Ok(woken) => woken,
            };
            if offer.withdraw() {
                if !woken {
                    // The deadline, or the server stops.
                    return Ok(Some(Vec::new()));
                }
                continue;
            }
            // Claimed: the call is one insert away. Woken by an announcement, the lease looks
            // for the rest beside that insert rather than after it, in the room the call
            // leaves.
            let room = max.saturating_sub(1);
            if !woken || room == 0 {
                let given: Vec<LeasedCall> = offer.given_soon().await.into_iter().collect();
                feed.drained = !given.is_empty();
                return Ok(Some(given));
            }
            feed.waiter.skip_received();
            let (given, looked) = tokio::join!(
                offer.given_soon(),
                Box::pin(self.lease_calls(feed.runner, feed.epoch, room))
            );
            let given: Vec<LeasedCall> = given.into_iter().collect();
            let batch = match looked {
                Ok(Some(batch)) => batch,
                // Nothing leased by the look (an error, or the lease is no longer live): the
                // handed call goes back to the queue, and the lease answers as the look did.
                failed => {
                    self.dispatch.handoffs.requeue(feed.runner, &given).await;
                    return failed.map(|_| None);
                }
            };
            feed.drained = !batch.full;
            let mut calls = batch.calls;
            calls.extend(given);
            if !calls.is_empty() {
                return Ok(Some(calls));
            }
            // Nothing given and nothing found (or every call found refused): wait again, or
            // look again if more may be queued.
            look = batch.full;
        }
    }

    /// Leases up to `max` queued calls of `runner` under `epoch`, as work items; `None`
    /// (leasing nothing) unless `epoch` is the runner's live lease. A call whose connector may
    /// no longer run, or a receipt lookup whose unknown call moved on or whose connection
    /// changed, is failed here, before anything is sent, and left out.
    pub async fn lease_calls(
        &self,
        runner: RunnerRef,
        epoch: Epoch,
        max: usize,
    ) -> Result<Option<LeaseBatch>, sqlx::Error> {
        // Only central connections have a credential binding in the target digest; a call is
        // leased by the runner its connection is placed on, so a device's lease needs none.
        let bindings = if runner.is_central() {
            self.central_bindings().await
        } else {
            Value::Null
        };
        let max_rows = i64::try_from(max).unwrap_or(i64::MAX);
        let floors = self.dispatch.announcer.local.floors();
        let runner_ref = runner.to_string();
        let scan = floors.begin(&runner_ref);
        let leased = self
            .db
            .call_lease(runner, epoch, max_rows, scan.floor.since(), &bindings)
            .await;
        let newest = match &leased {
            Ok(Some(rows)) => rows.iter().map(|row| row.created_at).max(),
            _ => None,
        };
        floors.finish(&runner_ref, scan, newest);
        let Some(rows) = leased? else {
            return Ok(None);
        };
        let full = !rows.is_empty() && rows.len() >= max;
        let mut calls = Vec::with_capacity(rows.len());
        for row in rows {
            match lease_refusal(&row) {
                None => {
                    observe_lease(&self.metrics, runner, &row);
                    calls.push(work_item(row, epoch));
                }
                Some((code, message)) => {
                    let failed = self
                        .db
                        .call_fail_leased(row.id, epoch, code, message)
                        .await?;
                    if failed {
                        self.metrics.calls_finished(CallState::Failed, 1);
                    }
                }
            }
        }
        Ok(Some(LeaseBatch { calls, full }))
    }
}

/// Counts a lease of `row` by `runner`: its wait since submission, by this process's clock,
/// also recorded as the call's `lease` span (from submission to lease) when spans are exported.
pub(crate) fn observe_lease(metrics: &crate::metrics::Metrics, runner: RunnerRef, row: &LeasedRow) {
    let waited = (chrono::Utc::now() - row.created_at)
        .to_std()
        .unwrap_or_default();
    metrics.call_leased(runner, waited);
    crate::app::call_trace::record_wait(
        "lease",
        row.id,
        row.traceparent.as_deref(),
        row.created_at,
        &[("switchyard.runner", runner.to_string())],
    );
}

/// Why a just-leased call must not run (error code and message), if it must not.
pub(crate) fn lease_refusal(row: &LeasedRow) -> Option<(&'static str, &'static str)> {
    if row.connector.retired_at.is_some() {
        return Some((
            "connector_retired",
            "not run: its connector was retired before it was sent",
        ));
    }
    if !row.connector.is_runnable() {
        return Some((
            "connector_not_approved",
            "the connector's command is no longer approved",
        ));
    }
    lookup_refusal(row)
}

/// The runner's work item for a leased call, with the connection's current target.
pub(crate) fn work_item(row: LeasedRow, epoch: Epoch) -> LeasedCall {
    LeasedCall {
        call_id: row.id,
        request_id: row.request_id,
        epoch,
        connection: ConnectionTarget {
            connection_id: row.connection_id,
            revision: row.connection_revision,
            spec: row.connector.spec(),
            accepted_spec_digest: row.accepted_spec_digest,
            auth_kind: row.auth_kind,
        },
        tool_name: row.tool_name,
        arguments: row
            .arguments
            .map(|a| a.0)
            .unwrap_or_else(|| serde_json::json!({})),
        timeout_seconds: u32::try_from(row.timeout_seconds).unwrap_or(1),
        client_session_id: row.client_session_id,
        profile_id: row.profile_id,
        // A device's call is its own, not its approver's: they never share a session.
        submitter: match row.submitted_by_device {
            Some(device) => Submitter::Device(device),
            None => Submitter::User(row.created_by),
        },
        kind: row.kind,
        traceparent: row.traceparent,
    }
}
