//! Receipts device runners uploaded, kept so that a repeated upload answers what the first one
//! did; and session releases waiting for a device runner's next heartbeat.
//!
//! Session releases are rows rather than notifications: a `NOTIFY` reaches only the server
//! processes listening at that moment, and a device runner learns of a release later, from a
//! heartbeat that any replica may answer. A release is taken by one heartbeat (so delivered
//! once), and delivered only within `RELEASE_TTL` (five minutes) of its request; the sweeper
//! removes older ones.
//!
//! A receipt is answered once: its answer (`recorded`, `superseded` or `fenced`) is stored with
//! it. A fenced receipt (an old epoch whose call moved on, an erased call) stays quarantined in
//! the device's outbox and is not uploaded again (`App::runner_check_receipts` lists them).

use super::Datastore;
use chrono::{DateTime, Utc};
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{CallId, ConnectionId, RunnerRef, UserId, WorkspaceId};
use uuid::Uuid;

/// A row of `receipts`. No result payload: what a call retains stays on the call.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ReceiptRow {
    /// The runner's receipt id.
    pub receipt_id: Uuid,
    /// Its call.
    pub call_id: CallId,
    /// The runner that uploaded it.
    pub runner_ref: RunnerRef,
    /// The epoch it was produced under.
    pub epoch: Epoch,
    /// `succeeded`, `tool_error`, `failed` or `unknown`.
    pub outcome: String,
    /// What the upload was answered: `recorded`, `superseded` or `fenced`.
    pub answer: String,
    /// Whether it was applied to the call.
    pub applied: bool,
    /// When it arrived.
    pub received_at: DateTime<Utc>,
}

/// What is read for an upload that its completion statement did not record
/// ([`Datastore::receipt_upload_read`]).
#[derive(Clone, Debug)]
pub struct UploadRead {
    /// The runner the call is placed on; `None` when the device's workspace has no such call.
    pub placed_on: Option<RunnerRef>,
    /// The receipt stored under the uploaded receipt id, if one is.
    pub stored: Option<ReceiptRow>,
}

/// A receipt to store.
#[derive(Clone, Debug)]
pub struct NewReceipt<'a> {
    /// The runner's receipt id.
    pub receipt_id: Uuid,
    /// Its call.
    pub call_id: CallId,
    /// The uploading runner.
    pub runner_ref: RunnerRef,
    /// The epoch it was produced under.
    pub epoch: Epoch,
    /// The completion's outcome name.
    pub outcome: &'a str,
    /// The answer given: `recorded`, `superseded` or `fenced`.
    pub answer: &'a str,
    /// Whether it was applied to the call.
    pub applied: bool,
}

impl Datastore {
    /// A stored receipt.
    pub async fn receipt_get(&self, receipt_id: Uuid) -> Result<Option<ReceiptRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM receipts WHERE receipt_id = $1")
            .bind(receipt_id)
            .fetch_optional(&self.pool)
            .await
    }

    /// Where an upload stands that its completion statement did not record, in one read: the
    /// runner `call` is placed on if it is a call of `workspace`, and the receipt stored under
    /// `receipt_id` if there is one.
    pub async fn receipt_upload_read(
        &self,
        workspace: WorkspaceId,
        call: CallId,
        receipt_id: Uuid,
    ) -> Result<UploadRead, sqlx::Error> {
        use sqlx::{FromRow, Row};
        let row = sqlx::query(
            "SELECT c.runner_ref AS call_runner_ref, r.*
             FROM (VALUES (1)) AS one (x)
             LEFT JOIN calls c ON c.workspace_id = $1 AND c.id = $2
             LEFT JOIN receipts r ON r.receipt_id = $3",
        )
        .bind(workspace)
        .bind(call)
        .bind(receipt_id)
        .fetch_one(&self.pool)
        .await?;
        let stored = match row.try_get::<Option<Uuid>, _>("receipt_id")? {
            Some(_) => Some(ReceiptRow::from_row(&row)?),
            None => None,
        };
        Ok(UploadRead {
            placed_on: row.try_get("call_runner_ref")?,
            stored,
        })
    }

    /// Stores a receipt unless one with its id exists. Returns whether it was stored.
    pub async fn receipt_insert(&self, receipt: &NewReceipt<'_>) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "INSERT INTO receipts (receipt_id, call_id, runner_ref, epoch, outcome, answer, applied)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (receipt_id) DO NOTHING",
        )
        .bind(receipt.receipt_id)
        .bind(receipt.call_id)
        .bind(receipt.runner_ref)
        .bind(receipt.epoch)
        .bind(receipt.outcome)
        .bind(receipt.answer)
        .bind(receipt.applied)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Stores a session release of `user`'s sessions for a device runner, to be taken by its
    /// next heartbeat.
    pub async fn session_release_store(
        &self,
        runner_ref: RunnerRef,
        connection: ConnectionId,
        client_session_id: &str,
        user: UserId,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO session_releases (runner_ref, connection_id, client_session_id, user_id) VALUES ($1, $2, $3, $4)")
            .bind(runner_ref)
            .bind(connection)
            .bind(client_session_id)
            .bind(user)
            .execute(&self.pool)
            .await
            .map(drop)
    }
}
