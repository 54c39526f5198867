//! The `tools/call` requests `/mcp` sessions hold open, by session and JSON-RPC id, and their
//! calls: a client's `notifications/cancelled` reaching any replica finds the call it means.
//! A cancellation that arrives before its request's call is recorded is kept as a mark,
//! which the request finds when it records the call.

use super::Datastore;
use std::time::Duration;
use switchyard_protocol::{CallId, WorkspaceId};

/// Rows older than this are swept: a cancellation no request claimed, or a request whose
/// replica stopped before forgetting it. No request is held nearly this long.
const MCP_REQUEST_KEPT: Duration = Duration::from_secs(10 * 60);

/// What a session's request id stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InFlight {
    /// The request's call.
    Call {
        /// Its workspace.
        workspace: WorkspaceId,
        /// The call.
        call: CallId,
    },
    /// The client cancelled the request before its call was recorded.
    CancelledEarly,
}

impl Datastore {
    /// Records that request `request_id` of `session` is `call`. False when the client
    /// already cancelled the request (the mark is left for [`Datastore::mcp_request_forget`]).
    pub async fn mcp_request_record(
        &self,
        session: &str,
        request_id: &str,
        workspace: WorkspaceId,
        call: CallId,
    ) -> Result<bool, sqlx::Error> {
        // One statement: a cancellation mark (no call) is left as it is and nothing is
        // returned; a row of a call (an id the client reused) is replaced.
        let recorded: Option<i32> = sqlx::query_scalar(
            "INSERT INTO mcp_requests_in_flight (session_id, request_id, workspace_id, call_id)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (session_id, request_id) DO UPDATE
                 SET workspace_id = EXCLUDED.workspace_id, call_id = EXCLUDED.call_id,
                     recorded_at = now()
                 WHERE mcp_requests_in_flight.call_id IS NOT NULL
             RETURNING 1",
        )
        .bind(session)
        .bind(request_id)
        .bind(workspace)
        .bind(call)
        .fetch_optional(&self.pool)
        .await?;
        Ok(recorded.is_some())
    }

    /// The client cancelled request `request_id` of `session`: its call, if recorded; else a
    /// mark is left for the request to find when it records its call.
    pub async fn mcp_request_cancel(
        &self,
        session: &str,
        request_id: &str,
    ) -> Result<InFlight, sqlx::Error> {
        let (workspace, call): (Option<WorkspaceId>, Option<CallId>) = sqlx::query_as(
            "INSERT INTO mcp_requests_in_flight (session_id, request_id) VALUES ($1, $2)
             ON CONFLICT (session_id, request_id) DO UPDATE
                 SET recorded_at = mcp_requests_in_flight.recorded_at
             RETURNING workspace_id, call_id",
        )
        .bind(session)
        .bind(request_id)
        .fetch_one(&self.pool)
        .await?;
        Ok(match (workspace, call) {
            (Some(workspace), Some(call)) => InFlight::Call { workspace, call },
            _ => InFlight::CancelledEarly,
        })
    }

    /// Forgets request `request_id` of `session` if it still stands for `call` (or, with no
    /// call, for a cancellation mark).
    pub async fn mcp_request_forget(
        &self,
        session: &str,
        request_id: &str,
        call: Option<CallId>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "DELETE FROM mcp_requests_in_flight
             WHERE session_id = $1 AND request_id = $2 AND call_id IS NOT DISTINCT FROM $3",
        )
        .bind(session)
        .bind(request_id)
        .bind(call)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Deletes rows older than [`MCP_REQUEST_KEPT`]; how many.
    pub async fn mcp_request_sweep(&self) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(
            "DELETE FROM mcp_requests_in_flight WHERE recorded_at < now() - make_interval(secs => $1)",
        )
        .bind(MCP_REQUEST_KEPT.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}
