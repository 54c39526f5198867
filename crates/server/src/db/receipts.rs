//! Receipts device runners uploaded, kept so that a repeated upload answers what the first one
//! did; and session releases waiting for a device runner's next heartbeat.

use super::Datastore;
use chrono::{DateTime, Utc};
use std::time::Duration;
use uuid::Uuid;

/// A row of `receipts`. No result payload: what a call retains stays on the call.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ReceiptRow {
    /// The runner's receipt id.
    pub receipt_id: Uuid,
    /// Its call.
    pub call_id: Uuid,
    /// The runner that uploaded it.
    pub runner_ref: String,
    /// The epoch it was produced under.
    pub epoch: i64,
    /// `succeeded`, `tool_error`, `failed` or `unknown`.
    pub outcome: String,
    /// What the upload was answered: `recorded`, `superseded` or `fenced`.
    pub answer: String,
    /// Whether it was applied to the call.
    pub applied: bool,
    /// When it arrived.
    pub received_at: DateTime<Utc>,
}

/// A receipt to store.
#[derive(Clone, Debug)]
pub struct NewReceipt<'a> {
    /// The runner's receipt id.
    pub receipt_id: Uuid,
    /// Its call.
    pub call_id: Uuid,
    /// The uploading runner.
    pub runner_ref: &'a str,
    /// The epoch it was produced under.
    pub epoch: i64,
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

    /// Stores a session release for a device runner, to be taken by its next heartbeat.
    pub async fn session_release_store(
        &self,
        runner_ref: &str,
        connection: Uuid,
        client_session_id: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("INSERT INTO session_releases (runner_ref, connection_id, client_session_id) VALUES ($1, $2, $3)")
            .bind(runner_ref)
            .bind(connection)
            .bind(client_session_id)
            .execute(&self.pool)
            .await
            .map(drop)
    }

    /// Takes (deletes and returns) the session releases waiting for a runner that are younger
    /// than `ttl`, oldest first: (connection, client_session_id).
    pub async fn session_release_take(
        &self,
        runner_ref: &str,
        ttl: Duration,
    ) -> Result<Vec<(Uuid, Option<String>)>, sqlx::Error> {
        sqlx::query_as(
            "WITH taken AS (DELETE FROM session_releases WHERE runner_ref = $1
                            RETURNING id, connection_id, client_session_id, requested_at)
             SELECT connection_id, client_session_id FROM taken
             WHERE requested_at >= now() - make_interval(secs => $2) ORDER BY id",
        )
        .bind(runner_ref)
        .bind(ttl.as_secs_f64())
        .fetch_all(&self.pool)
        .await
    }
}
