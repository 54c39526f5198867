//! Leasing calls to a runner, the same way for the central runner and device runners: lease
//! queued calls under the runner's epoch and turn each into the work item the runner needs.

use super::App;
use crate::db::LeasedRow;
use switchyard_protocol::runner::{ConnectionTarget, Epoch, LeasedCall};

impl App {
    /// Leases up to `max` queued calls of `runner_ref` under `epoch` (nothing unless that is
    /// the runner's live lease), as work items. A call whose connector may no longer run is
    /// failed here, before anything is sent, and left out.
    pub async fn lease_calls(
        &self,
        runner_ref: &str,
        epoch: Epoch,
        max: usize,
    ) -> Result<Vec<LeasedCall>, sqlx::Error> {
        let rows = self
            .db
            .call_lease(runner_ref, epoch.0, i64::try_from(max).unwrap_or(i64::MAX))
            .await?;
        let mut calls = Vec::with_capacity(rows.len());
        for row in rows {
            if let Some(call) = self.prepare_leased(row, epoch).await? {
                calls.push(call);
            }
        }
        Ok(calls)
    }

    /// Turns a leased row into the runner's work item, with the connection's current target.
    async fn prepare_leased(
        &self,
        row: LeasedRow,
        epoch: Epoch,
    ) -> Result<Option<LeasedCall>, sqlx::Error> {
        let connection = self.db.connection_get(row.connection_id).await?;
        let connector = self.db.connector_get(connection.connector_id).await?;
        if !connector.is_runnable() {
            self.db
                .call_fail_leased(
                    row.id,
                    epoch.0,
                    "connector_not_approved",
                    "the connector's command is no longer approved",
                )
                .await?;
            return Ok(None);
        }
        // Records the target it is dispatched to; a receipt lookup whose unknown call moved on
        // or whose connection changed is failed here, before anything is sent.
        if !self
            .lease_admits(row.id, epoch, &connection, &connector)
            .await?
        {
            return Ok(None);
        }
        Ok(Some(LeasedCall {
            call_id: row.id.into(),
            request_id: row.request_id.into(),
            epoch,
            connection: ConnectionTarget {
                connection_id: row.connection_id.into(),
                revision: connection.revision,
                spec: connector.spec(),
            },
            tool_name: row.tool_name,
            arguments: row
                .arguments
                .map(|a| a.0)
                .unwrap_or_else(|| serde_json::json!({})),
            timeout_seconds: u32::try_from(row.timeout_seconds).unwrap_or(1),
            client_session_id: row.client_session_id,
        }))
    }
}
