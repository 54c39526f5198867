//! Cancelling a call as far as its state allows: before it was sent it is cancelled at once;
//! once running, its runner is asked to cancel it (MCP `notifications/cancelled`).

use crate::db::Datastore;
use switchyard_protocol::{CallId, RunnerRef, WorkspaceId};

/// What a cancel request changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelEffect {
    /// `queued`/`leased` → `cancelled`: nothing had been sent.
    Cancelled,
    /// The call is running: cancellation was requested from its runner.
    Requested,
    /// The call was already finished (or unknown); nothing changed.
    Nothing,
}

impl Datastore {
    /// Cancels a call as far as its state allows, each step one guarded update. A running
    /// call's runner hears of it on `switchyard_cancel` (sent by the statement: a request
    /// rare enough that its commit may wait for the notification's lock).
    pub async fn call_cancel(
        &self,
        workspace: WorkspaceId,
        id: CallId,
    ) -> Result<CancelEffect, sqlx::Error> {
        let cancelled = sqlx::query(
            "UPDATE calls SET state = 'cancelled', finished_at = now(), error_code = 'cancelled',
                 error_message = 'cancelled before it was sent'
             WHERE workspace_id = $1 AND id = $2 AND state IN ('queued', 'leased')",
        )
        .bind(workspace)
        .bind(id)
        .execute(&self.pool)
        .await?;
        if cancelled.rows_affected() == 1 {
            return Ok(CancelEffect::Cancelled);
        }
        let runner: Option<RunnerRef> = sqlx::query_scalar(
            "UPDATE calls SET cancel_requested_at = COALESCE(cancel_requested_at, now())
             WHERE workspace_id = $1 AND id = $2 AND state = 'running' RETURNING runner_ref",
        )
        .bind(workspace)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        match runner {
            Some(runner) => {
                sqlx::query("SELECT pg_notify('switchyard_cancel', $1)")
                    .bind(serde_json::json!({"runner": runner, "call_id": id}).to_string())
                    .execute(&self.pool)
                    .await?;
                Ok(CancelEffect::Requested)
            }
            None => Ok(CancelEffect::Nothing),
        }
    }

    /// Running calls of a runner whose cancellation was requested.
    pub async fn call_cancel_requested(
        &self,
        runner: RunnerRef,
    ) -> Result<Vec<CallId>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT id FROM calls WHERE runner_ref = $1 AND state = 'running' AND cancel_requested_at IS NOT NULL
               AND lease_epoch IS NOT NULL AND finished_at IS NULL",
        )
        .bind(runner)
        .fetch_all(&self.pool)
        .await
    }
}
