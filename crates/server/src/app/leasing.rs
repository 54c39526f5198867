//! Leasing calls to a runner, the same way for the central runner and device runners: lease
//! queued calls under the runner's epoch and turn each into the work item the runner needs.
//!
//! One statement leases a batch, records the target each call is dispatched to and reads
//! everything else the work items and the checks below need; only a call refused here costs
//! another (its failure). It scans the runner's queue from the floor `queue_floors` keeps, so
//! its cost does not grow with the calls finished since VACUUM last could clean up.

use super::App;
use super::reconcile::lookup_refusal;
use crate::db::LeasedRow;
use serde_json::Value;
use switchyard_protocol::api::CENTRAL_RUNNER;
use switchyard_protocol::runner::{ConnectionTarget, Epoch, LeasedCall};

/// What one lease attempt took.
#[derive(Debug, Default)]
pub struct LeaseBatch {
    /// The work items, ready to run.
    pub calls: Vec<LeasedCall>,
    /// Whether it leased as many calls as it was asked for (refused ones included): more may
    /// be queued. A batch that is not full took every queued call it could lock.
    pub full: bool,
}

impl App {
    /// Leases up to `max` queued calls of `runner_ref` under `epoch`, as work items; `None`
    /// (leasing nothing) unless `epoch` is the runner's live lease. A call whose connector may
    /// no longer run, or a receipt lookup whose unknown call moved on or whose connection
    /// changed, is failed here, before anything is sent, and left out.
    pub async fn lease_calls(
        &self,
        runner_ref: &str,
        epoch: Epoch,
        max: usize,
    ) -> Result<Option<LeaseBatch>, sqlx::Error> {
        // Only central connections have a credential binding in the target digest; a call is
        // leased by the runner its connection is placed on, so a device's lease needs none.
        let bindings = if runner_ref == CENTRAL_RUNNER {
            self.central_bindings()
        } else {
            Value::Null
        };
        let max_rows = i64::try_from(max).unwrap_or(i64::MAX);
        let floors = self.wakeups.floors();
        let scan = floors.begin(runner_ref);
        let leased = self
            .db
            .call_lease(runner_ref, epoch.0, max_rows, scan.floor.since(), &bindings)
            .await;
        let newest = match &leased {
            Ok(Some(rows)) => rows.iter().map(|row| row.created_at).max(),
            _ => None,
        };
        floors.finish(runner_ref, scan, newest);
        let Some(rows) = leased? else {
            return Ok(None);
        };
        let full = !rows.is_empty() && rows.len() >= max;
        let mut calls = Vec::with_capacity(rows.len());
        for row in rows {
            match lease_refusal(&row) {
                None => calls.push(work_item(row, epoch)),
                Some((code, message)) => {
                    self.db
                        .call_fail_leased(row.id, epoch.0, code, message)
                        .await?;
                }
            }
        }
        Ok(Some(LeaseBatch { calls, full }))
    }
}

/// Why a just-leased call must not run (error code and message), if it must not.
fn lease_refusal(row: &LeasedRow) -> Option<(&'static str, &'static str)> {
    if !row.connector.is_runnable() {
        return Some((
            "connector_not_approved",
            "the connector's command is no longer approved",
        ));
    }
    lookup_refusal(row)
}

/// The runner's work item for a leased call, with the connection's current target.
fn work_item(row: LeasedRow, epoch: Epoch) -> LeasedCall {
    LeasedCall {
        call_id: row.id.into(),
        request_id: row.request_id.into(),
        epoch,
        connection: ConnectionTarget {
            connection_id: row.connection_id.into(),
            revision: row.connection_revision,
            spec: row.connector.spec(),
        },
        tool_name: row.tool_name,
        arguments: row
            .arguments
            .map(|a| a.0)
            .unwrap_or_else(|| serde_json::json!({})),
        timeout_seconds: u32::try_from(row.timeout_seconds).unwrap_or(1),
        client_session_id: row.client_session_id,
    }
}
