//! Cancelling a call as far as its state allows: before it was sent — while it awaits
//! approval, is queued or leased — it is cancelled at once (a held call's question closed
//! `cancelled` in the same statement); once running, its runner is asked to cancel it (MCP
//! `notifications/cancelled`).

use crate::db::{Committed, Datastore, Wakeup};
use switchyard_protocol::{CallId, RunnerRef, WorkspaceId};

/// What a cancel request changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelEffect {
    /// `awaiting_approval`/`queued`/`leased` → `cancelled`: nothing had been sent.
    Cancelled {
        /// It awaited approval: its question was closed `cancelled`.
        question_closed: bool,
    },
    /// The call is running: cancellation was requested from its runner.
    Requested,
    /// The call was already finished (or unknown); nothing changed.
    Nothing,
}

impl Datastore {
    /// Cancels a call as far as its state allows, each step one guarded update; a call
    /// cancelled now wakes its waiting readers. A held call's question is closed in the same
    /// statement, so an answer racing the cancel changes the call once. A running call's
    /// runner hears of it on `switchyard_cancel` (sent by the statement: a request rare enough
    /// that its commit may wait for the notification's lock).
    pub async fn call_cancel(
        &self,
        workspace: WorkspaceId,
        id: CallId,
    ) -> Result<Committed<CancelEffect>, sqlx::Error> {
        let cancelled: Option<(CallId, bool)> = sqlx::query_as(
            "WITH cancelled AS (
                 UPDATE calls SET state = 'cancelled', approval_held = false, finished_at = now(),
                     error_code = 'cancelled',
                     error_message = CASE WHEN state = 'awaiting_approval'
                         THEN 'cancelled while it awaited approval; it was never sent'
                         ELSE 'cancelled before it was sent' END
                 WHERE workspace_id = $1 AND id = $2
                   AND state IN ('awaiting_approval', 'queued', 'leased')
                 RETURNING id),
             closed AS (
                 UPDATE approvals a SET state = 'cancelled', decided_at = now()
                 FROM cancelled WHERE a.call_id = cancelled.id AND a.state = 'pending'
                 RETURNING a.call_id)
             SELECT id, EXISTS (SELECT 1 FROM closed) FROM cancelled",
        )
        .bind(workspace)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        if let Some((call, question_closed)) = cancelled {
            return Ok(
                Committed::new(CancelEffect::Cancelled { question_closed }).waking(
                    Wakeup::Settled {
                        call,
                        recorded: None,
                    },
                ),
            );
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
                Ok(Committed::new(CancelEffect::Requested))
            }
            None => Ok(Committed::new(CancelEffect::Nothing)),
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
