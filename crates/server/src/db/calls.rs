//! Calls. Every state change is one guarded update (`WHERE state = … AND lease_epoch = …`)
//! that reports whether it won; nothing here reads, decides, then writes.

use super::Datastore;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use switchyard_protocol::CallState;
use uuid::Uuid;

/// A row of `calls`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct CallRow {
    /// Id.
    pub id: Uuid,
    /// Workspace.
    pub workspace_id: Uuid,
    /// Client idempotency key.
    pub request_id: Uuid,
    /// SHA-256 of the canonical payload.
    pub payload_digest: Vec<u8>,
    /// Profile.
    pub profile_id: Uuid,
    /// Connection.
    pub connection_id: Uuid,
    /// Connection revision at submission.
    pub connection_revision: i64,
    /// Environment.
    pub environment_id: Uuid,
    /// Tool.
    pub tool_name: String,
    /// Arguments, until they expire.
    pub arguments: Option<Json<Value>>,
    /// Warm-session key.
    pub client_session_id: Option<String>,
    /// Timeout.
    pub timeout_seconds: i32,
    /// State name (see [`CallState`]).
    pub state: String,
    /// Selected runner.
    pub runner_ref: String,
    /// Epoch of the lease it was last leased under.
    pub lease_epoch: Option<i64>,
    /// Retained result.
    pub result: Option<Json<Value>>,
    /// Whether the result was cut.
    pub result_truncated: bool,
    /// Failure or uncertainty code.
    pub error_code: Option<String>,
    /// Failure or uncertainty explanation.
    pub error_message: Option<String>,
    /// Submitter.
    pub created_by: Uuid,
    /// Submission time.
    pub created_at: DateTime<Utc>,
    /// Lease time.
    pub leased_at: Option<DateTime<Utc>>,
    /// Start-ack time.
    pub started_at: Option<DateTime<Utc>>,
    /// End time.
    pub finished_at: Option<DateTime<Utc>>,
    /// When cancellation of the dispatched call was requested.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// When retention erased inputs and results.
    pub retention_expired_at: Option<DateTime<Utc>>,
    /// `tool`, or `lookup` for a receipt lookup run for `parent_call_id`.
    pub kind: String,
    /// For a lookup: the unknown call it looks up.
    pub parent_call_id: Option<Uuid>,
    /// The connector revision the call was dispatched to (recorded when leased).
    pub connector_revision: Option<i64>,
    /// For a `resolved` call: `succeeded`, `not_applied` or `failed`.
    pub resolution_outcome: Option<String>,
    /// When the call's evidence was erased.
    pub evidence_erased_at: Option<DateTime<Utc>>,
}

/// A call to insert.
#[derive(Clone, Debug)]
pub struct NewCall {
    /// Workspace.
    pub workspace_id: Uuid,
    /// Client idempotency key.
    pub request_id: Uuid,
    /// SHA-256 of the canonical payload.
    pub payload_digest: Vec<u8>,
    /// Profile.
    pub profile_id: Uuid,
    /// Connection.
    pub connection_id: Uuid,
    /// Connection revision now.
    pub connection_revision: i64,
    /// Environment.
    pub environment_id: Uuid,
    /// Tool.
    pub tool_name: String,
    /// Arguments (an object).
    pub arguments: Value,
    /// Warm-session key.
    pub client_session_id: Option<String>,
    /// Timeout.
    pub timeout_seconds: i32,
    /// Runner that will run it.
    pub runner_ref: String,
    /// Submitter.
    pub created_by: Uuid,
}

/// Where a call came from beyond its submitter: the operation it runs under and the device
/// that submitted it, when there are.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallOrigin {
    /// The operation.
    pub operation_id: Option<Uuid>,
    /// The submitting device.
    pub device_id: Option<Uuid>,
}

/// A call just leased, with what the runner needs to run it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct LeasedRow {
    /// Call id.
    pub id: Uuid,
    /// Client idempotency key.
    pub request_id: Uuid,
    /// Connection.
    pub connection_id: Uuid,
    /// Tool.
    pub tool_name: String,
    /// Arguments.
    pub arguments: Option<Json<Value>>,
    /// Timeout.
    pub timeout_seconds: i32,
    /// Warm-session key.
    pub client_session_id: Option<String>,
}

/// A completion ready to store: already redacted and bounded by the app layer.
#[derive(Clone, Debug)]
pub struct StoredCompletion {
    /// The state it moves the call to.
    pub state: CallState,
    /// Retained result.
    pub result: Option<Value>,
    /// Whether the result was cut.
    pub result_truncated: bool,
    /// Failure or uncertainty code.
    pub error_code: Option<String>,
    /// Failure or uncertainty explanation.
    pub error_message: Option<String>,
}

impl Datastore {
    /// Inserts a call unless one with the same (workspace, request_id) exists. Returns the
    /// inserted row, or `None` when the request_id was taken (by an earlier or concurrent
    /// submission).
    pub async fn call_insert(&self, call: &NewCall) -> Result<Option<CallRow>, sqlx::Error> {
        self.call_insert_from(call, CallOrigin::default()).await
    }

    /// [`Datastore::call_insert`], recording the operation the call runs under and the device
    /// that submitted it.
    pub async fn call_insert_from(
        &self,
        call: &NewCall,
        origin: CallOrigin,
    ) -> Result<Option<CallRow>, sqlx::Error> {
        // One statement, one commit: the notification that wakes the call's runner is sent
        // when the insert commits, and only if it inserted.
        sqlx::query_as(
            "WITH inserted AS (
                 INSERT INTO calls (id, workspace_id, request_id, payload_digest, profile_id, connection_id,
                     connection_revision, environment_id, tool_name, arguments, client_session_id,
                     timeout_seconds, state, runner_ref, created_by, operation_id, submitted_by_device)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'queued', $13, $14, $15, $16)
                 ON CONFLICT (workspace_id, request_id) DO NOTHING
                 RETURNING *)
             SELECT inserted.*, pg_notify('switchyard_calls', inserted.runner_ref) AS wake_notice FROM inserted",
        )
        .bind(Uuid::now_v7())
        .bind(call.workspace_id)
        .bind(call.request_id)
        .bind(&call.payload_digest)
        .bind(call.profile_id)
        .bind(call.connection_id)
        .bind(call.connection_revision)
        .bind(call.environment_id)
        .bind(&call.tool_name)
        .bind(Json(&call.arguments))
        .bind(&call.client_session_id)
        .bind(call.timeout_seconds)
        .bind(&call.runner_ref)
        .bind(call.created_by)
        .bind(origin.operation_id)
        .bind(origin.device_id)
        .fetch_optional(&self.pool)
        .await
    }

    /// The call with this request_id in a workspace.
    pub async fn call_find_by_request(
        &self,
        workspace: Uuid,
        request_id: Uuid,
    ) -> Result<Option<CallRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM calls WHERE workspace_id = $1 AND request_id = $2")
            .bind(workspace)
            .bind(request_id)
            .fetch_optional(&self.pool)
            .await
    }

    /// A call of a workspace.
    pub async fn call_get(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> Result<Option<CallRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM calls WHERE workspace_id = $1 AND id = $2")
            .bind(workspace)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
    }

    /// The newest calls of a workspace on profiles the user currently holds Use on.
    pub async fn call_list_usable(
        &self,
        workspace: Uuid,
        user: Uuid,
        limit: i64,
    ) -> Result<Vec<CallRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT c.* FROM calls c WHERE c.workspace_id = $1 AND EXISTS (
                 SELECT 1 FROM profile_grants g
                 WHERE g.profile_id = c.profile_id AND g.user_id = $2 AND g.grant_kind = 'use')
             ORDER BY c.created_at DESC LIMIT $3",
        )
        .bind(workspace)
        .bind(user)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
    }

    /// Leases up to `max` queued calls of a runner under `epoch`, oldest first, skipping rows
    /// other transactions hold. Leases nothing unless `epoch` is the runner's live lease.
    pub async fn call_lease(
        &self,
        runner_ref: &str,
        epoch: i64,
        max: i64,
    ) -> Result<Vec<LeasedRow>, sqlx::Error> {
        sqlx::query_as(
            "WITH picked AS (
                 SELECT id FROM calls
                 WHERE runner_ref = $1 AND state = 'queued'
                   AND EXISTS (SELECT 1 FROM runner_leases r
                               WHERE r.runner_ref = $1 AND r.epoch = $2 AND r.expires_at > now())
                 ORDER BY created_at LIMIT $3
                 FOR UPDATE SKIP LOCKED)
             UPDATE calls c SET state = 'leased', lease_epoch = $2, leased_at = now()
             FROM picked WHERE c.id = picked.id
             RETURNING c.id, c.request_id, c.connection_id, c.tool_name, c.arguments,
                       c.timeout_seconds, c.client_session_id",
        )
        .bind(runner_ref)
        .bind(epoch)
        .bind(max)
        .fetch_all(&self.pool)
        .await
    }

    /// The start ack: `leased` → `running`, only under the runner's live lease epoch.
    /// Returns whether it won. Idempotent: a runner that lost the first answer and asks again
    /// under the same epoch is told yes again (the start time is kept).
    pub async fn call_start(
        &self,
        id: Uuid,
        runner_ref: &str,
        epoch: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE calls SET state = 'running', started_at = COALESCE(started_at, now())
             WHERE id = $1 AND state IN ('leased', 'running') AND runner_ref = $2 AND lease_epoch = $3
               AND EXISTS (SELECT 1 FROM runner_leases r
                           WHERE r.runner_ref = $2 AND r.epoch = $3 AND r.expires_at > now())",
        )
        .bind(id)
        .bind(runner_ref)
        .bind(epoch)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records a completion reported under `epoch`, moving the call from one of `from` to
    /// `completion.state`, on `conn` (inside the caller's transaction, which records what
    /// the completion implies beside it). Returns the updated call, or `None` when a stale
    /// epoch or a call that moved on recorded nothing. Readers waiting for the call are
    /// notified (`switchyard_settled`) when the transaction commits.
    pub(super) async fn call_complete_on(
        conn: &mut sqlx::PgConnection,
        id: Uuid,
        runner_ref: &str,
        epoch: i64,
        from: &[CallState],
        completion: &StoredCompletion,
    ) -> Result<Option<CallRow>, sqlx::Error> {
        let from: Vec<&str> = from.iter().map(|s| s.as_str()).collect();
        sqlx::query_as(
            "UPDATE calls SET state = $5, result = $6, result_truncated = $7, error_code = $8,
                 error_message = $9, finished_at = now()
             WHERE id = $1 AND runner_ref = $2 AND lease_epoch = $3 AND state = ANY($4)
               AND EXISTS (SELECT 1 FROM runner_leases r WHERE r.runner_ref = $2 AND r.epoch = $3)
             RETURNING *, pg_notify('switchyard_settled', id::text) AS settled_notice",
        )
        .bind(id)
        .bind(runner_ref)
        .bind(epoch)
        .bind(&from)
        .bind(completion.state.as_str())
        .bind(completion.result.as_ref().map(Json))
        .bind(completion.result_truncated)
        .bind(&completion.error_code)
        .bind(&completion.error_message)
        .fetch_optional(conn)
        .await
    }

    /// Fails a call that was leased but can certainly not run (e.g. its connector lost its
    /// approval): `leased` → `failed`, nothing was sent.
    pub async fn call_fail_leased(
        &self,
        id: Uuid,
        epoch: i64,
        code: &str,
        message: &str,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE calls SET state = 'failed', error_code = $3, error_message = $4, finished_at = now()
             WHERE id = $1 AND state = 'leased' AND lease_epoch = $2",
        )
        .bind(id)
        .bind(epoch)
        .bind(code)
        .bind(message)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

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
    /// Cancels a call as far as its state allows, each step one guarded update.
    pub async fn call_cancel(
        &self,
        workspace: Uuid,
        id: Uuid,
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
        let runner: Option<String> = sqlx::query_scalar(
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

    /// Expires calls queued longer than `max_wait`. Returns how many.
    pub async fn call_expire_queued(
        &self,
        max_wait: std::time::Duration,
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE calls SET state = 'expired', finished_at = now(), error_code = 'queue_expired',
                 error_message = 'no runner took the call in time'
             WHERE state = 'queued' AND created_at < now() - make_interval(secs => $1)",
        )
        .bind(max_wait.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// Settles calls held under expired runner leases: leased-but-unstarted calls go back to
    /// the queue (nothing was sent), started ones become `unknown` (they may have run).
    /// Returns (requeued, unknown).
    pub async fn call_sweep_lost_leases(&self) -> Result<(u64, u64), sqlx::Error> {
        let requeued = sqlx::query(
            "UPDATE calls c SET state = 'queued', lease_epoch = NULL, leased_at = NULL
             FROM runner_leases r
             WHERE c.runner_ref = r.runner_ref AND c.state = 'leased' AND c.lease_epoch <= r.epoch
               AND r.expires_at <= now()",
        )
        .execute(&self.pool)
        .await?;
        let unknown = sqlx::query(
            "UPDATE calls c SET state = 'unknown', finished_at = now(), error_code = 'runner_lost',
                 error_message = 'the runner lost its lease after the call was started; it may or may not have run'
             FROM runner_leases r
             WHERE c.runner_ref = r.runner_ref AND c.state = 'running' AND c.lease_epoch <= r.epoch
               AND r.expires_at <= now()",
        )
        .execute(&self.pool)
        .await?;
        if requeued.rows_affected() > 0 {
            sqlx::query("SELECT pg_notify('switchyard_calls', '*')")
                .execute(&self.pool)
                .await?;
        }
        Ok((requeued.rows_affected(), unknown.rows_affected()))
    }

    /// Erases inputs and results of calls finished longer than `retention` ago, keeping the
    /// minimal disposition (state, error code, times). Returns how many.
    pub async fn call_sweep_retention(
        &self,
        retention: std::time::Duration,
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE calls SET arguments = NULL, result = NULL, error_message = NULL, retention_expired_at = now()
             WHERE retention_expired_at IS NULL AND finished_at IS NOT NULL
               AND finished_at < now() - make_interval(secs => $1)",
        )
        .bind(retention.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}

impl Datastore {
    /// Running calls of a runner whose cancellation was requested.
    pub async fn call_cancel_requested(&self, runner_ref: &str) -> Result<Vec<Uuid>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT id FROM calls WHERE runner_ref = $1 AND state = 'running' AND cancel_requested_at IS NOT NULL",
        )
        .bind(runner_ref)
        .fetch_all(&self.pool)
        .await
    }
}

/// Which calls a page of the calls list shows (all conditions must hold).
#[derive(Clone, Debug, Default)]
pub struct CallFilter {
    /// Only calls in this state.
    pub state: Option<CallState>,
    /// Only calls on this connection.
    pub connection: Option<Uuid>,
    /// Only calls placed on this runner.
    pub runner: Option<String>,
    /// Only calls submitted at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only calls submitted before this time.
    pub until: Option<DateTime<Utc>>,
}

/// Where a page of calls starts (keyset pagination on `(created_at, id)`, newest first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PageFrom {
    /// The newest calls.
    #[default]
    Newest,
    /// Calls older than this one.
    Before(Uuid),
    /// Calls newer than this one.
    After(Uuid),
}

/// The filtered calls of a workspace on profiles the user holds Use on, then `$8`-cursor
/// condition and order appended.
macro_rules! select_call_page {
    ($cursor:literal) => {
        concat!(
            "SELECT c.* FROM calls c WHERE c.workspace_id = $1 AND EXISTS (
                 SELECT 1 FROM profile_grants g
                 WHERE g.profile_id = c.profile_id AND g.user_id = $2 AND g.grant_kind = 'use')
               AND ($3::text IS NULL OR c.state = $3)
               AND ($4::uuid IS NULL OR c.connection_id = $4)
               AND ($5::text IS NULL OR c.runner_ref = $5)
               AND ($6::timestamptz IS NULL OR c.created_at >= $6)
               AND ($7::timestamptz IS NULL OR c.created_at < $7) ",
            $cursor
        )
    };
}

impl Datastore {
    /// Up to `limit` calls matching `filter` from `from`, newest first, among those the user
    /// may read (current Use on their profile). A cursor that names no call of the workspace
    /// gives an empty page.
    pub async fn call_list_page(
        &self,
        workspace: Uuid,
        user: Uuid,
        filter: &CallFilter,
        from: PageFrom,
        limit: i64,
    ) -> Result<Vec<CallRow>, sqlx::Error> {
        let (sql, cursor) = match from {
            // $8 (the cursor) is bound as NULL here so that every variant takes the same parameters.
            PageFrom::Newest => (select_call_page!("AND $8::uuid IS NULL ORDER BY c.created_at DESC, c.id DESC LIMIT $9"), None),
            PageFrom::Before(id) => (
                select_call_page!(
                    "AND (c.created_at, c.id) < (SELECT created_at, id FROM calls WHERE id = $8 AND workspace_id = $1)
                     ORDER BY c.created_at DESC, c.id DESC LIMIT $9"
                ),
                Some(id),
            ),
            PageFrom::After(id) => (
                select_call_page!(
                    "AND (c.created_at, c.id) > (SELECT created_at, id FROM calls WHERE id = $8 AND workspace_id = $1)
                     ORDER BY c.created_at ASC, c.id ASC LIMIT $9"
                ),
                Some(id),
            ),
        };
        let mut rows: Vec<CallRow> = sqlx::query_as(sql)
            .bind(workspace)
            .bind(user)
            .bind(filter.state.map(CallState::as_str))
            .bind(filter.connection)
            .bind(&filter.runner)
            .bind(filter.since)
            .bind(filter.until)
            .bind(cursor)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        if matches!(from, PageFrom::After(_)) {
            rows.reverse();
        }
        Ok(rows)
    }
}

impl Datastore {
    /// Settles the calls a runner holds under `epoch` in the database but no longer holds
    /// itself (not in `held`), in one statement. Calls leased more than `grace` ago go back to
    /// the queue: a restarted device process resumes its lease but not the calls its
    /// predecessor leased and never started, and a lease answer can be lost on the way;
    /// nothing was sent for a leased call, and a late start for one requeued here is refused.
    /// Calls started more than `grace` ago become `unknown`: a process that resumed its
    /// predecessor's lease knows only the starts its outbox recorded, and one acknowledged by
    /// the server but cut off before the outbox recorded it would otherwise stay `running` for
    /// as long as the lease lives; the server cannot tell whether it was sent, so it is
    /// uncertain, never retried. The grace covers a lease or start answer still on its way.
    /// Returns (requeued, unknown).
    pub async fn call_settle_unheld(
        &self,
        runner_ref: &str,
        epoch: i64,
        held: &[Uuid],
        grace: std::time::Duration,
    ) -> Result<(u64, u64), sqlx::Error> {
        // SET expressions read the row as it was; RETURNING reads it as it became.
        let requeued: Vec<bool> = sqlx::query_scalar(
            "UPDATE calls SET
                 state = CASE WHEN state = 'leased' THEN 'queued' ELSE 'unknown' END,
                 lease_epoch = CASE WHEN state = 'leased' THEN NULL ELSE lease_epoch END,
                 leased_at = CASE WHEN state = 'leased' THEN NULL ELSE leased_at END,
                 finished_at = CASE WHEN state = 'leased' THEN finished_at ELSE now() END,
                 error_code = CASE WHEN state = 'leased' THEN error_code ELSE 'runner_restarted' END,
                 error_message = CASE WHEN state = 'leased' THEN error_message
                     ELSE 'the runner that started this call restarted without a record of it; it may or may not have run' END
             WHERE runner_ref = $1 AND lease_epoch = $2 AND state IN ('leased', 'running') AND NOT (id = ANY($3))
               AND ((state = 'leased' AND leased_at < now() - make_interval(secs => $4))
                 OR (state = 'running' AND started_at < now() - make_interval(secs => $4)))
             RETURNING state = 'queued'",
        )
        .bind(runner_ref)
        .bind(epoch)
        .bind(held)
        .bind(grace.as_secs_f64())
        .fetch_all(&self.pool)
        .await?;
        let queued = requeued.iter().filter(|q| **q).count() as u64;
        if queued > 0 {
            sqlx::query("SELECT pg_notify('switchyard_calls', $1)")
                .bind(runner_ref)
                .execute(&self.pool)
                .await?;
        }
        Ok((queued, requeued.len() as u64 - queued))
    }

    /// Those of `ids` that are leased or running.
    pub async fn call_in_flight_among(&self, ids: &[Uuid]) -> Result<Vec<Uuid>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT id FROM calls WHERE id = ANY($1) AND state IN ('leased', 'running')",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await
    }
}
