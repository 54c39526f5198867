//! The start ack: `leased` → `running`, only under the runner's live lease epoch. Only after
//! it does a runner send the call to its MCP server.
//!
//! A call whose connection, connector or profile is retired is never started: the ack leaves
//! it leased, and the app layer fails it with the retirement's code
//! (`Datastore::call_fail_retired`) before answering `abandon`.
//!
//! A device's start ack (`call_start_by_device`) finds the device by its credential's hash in the
//! same statement and updates nothing for a revoked device: a revoked device's start changes
//! nothing, and revocation needs no cache to reach it.

use crate::db::devices::device_by_credential;
use crate::db::retire::retired_code;
use crate::db::sql::{Params, text};
use crate::db::{Datastore, DeviceRow};
use std::sync::{Arc, LazyLock};
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{CallId, RunnerRef};

/// What a device's start ack found ([`Datastore::call_start_by_device`]).
#[derive(Debug, sqlx::FromRow)]
pub struct DeviceStart {
    /// The device holding the credential (revoked or not).
    #[sqlx(flatten)]
    pub device: DeviceRow,
    /// Whether the call moved to (or already was) `running` under the epoch.
    pub started: bool,
}

/// The start ack's update of call `id` under `epoch`, for the runner `runner` names (a
/// placeholder, or a subquery). A call already running is answered again whatever was retired
/// since: it may have been sent.
fn start_update(id: &str, runner: &str, epoch: &str) -> String {
    format!(
        "UPDATE calls SET state = 'running', started_at = COALESCE(started_at, now())
         WHERE id = {id} AND state IN ('leased', 'running') AND runner_ref = {runner}
           AND lease_epoch = {epoch}
           AND EXISTS (SELECT 1 FROM runner_leases r
                       WHERE r.runner_ref = {runner} AND r.epoch = {epoch} AND r.expires_at > now())
           AND (state = 'running' OR {retired} IS NULL)",
        retired = retired_code("calls"),
    )
}

impl Datastore {
    /// The start ack. Returns whether it won. Idempotent: a runner that lost the first answer
    /// and asks again under the same epoch is told yes again (the start time is kept).
    pub async fn call_start(
        &self,
        id: CallId,
        runner: RunnerRef,
        epoch: Epoch,
    ) -> Result<bool, sqlx::Error> {
        static STATEMENT: LazyLock<Arc<str>> = LazyLock::new(|| {
            let mut params = Params::default();
            let (id, runner, epoch) = (params.next(), params.next(), params.next());
            start_update(&id, &runner, &epoch).into()
        });
        let done = sqlx::query(text(&STATEMENT))
            .bind(id)
            .bind(runner)
            .bind(epoch)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// A device's start ack in one statement: finds the device holding the credential with
    /// this hash and, unless it is revoked, makes [`Datastore::call_start`]'s update under its
    /// runner reference. `None` when no device holds the credential.
    pub async fn call_start_by_device(
        &self,
        id: CallId,
        credential_hash: &[u8],
        epoch: Epoch,
    ) -> Result<Option<DeviceStart>, sqlx::Error> {
        static STATEMENT: LazyLock<Arc<str>> = LazyLock::new(|| {
            let mut params = Params::default();
            let (id, hash, epoch) = (params.next(), params.next(), params.next());
            format!(
                "WITH device AS ({device}),
                 started AS ({start} RETURNING id)
                 SELECT d.*, EXISTS (SELECT 1 FROM started) AS started FROM device d",
                device = device_by_credential(&hash),
                start = start_update(
                    &id,
                    "(SELECT runner_ref FROM device WHERE revoked_at IS NULL)",
                    &epoch
                ),
            )
            .into()
        });
        sqlx::query_as(text(&STATEMENT))
            .bind(id)
            .bind(credential_hash)
            .bind(epoch)
            .fetch_optional(&self.pool)
            .await
    }

    /// [`Datastore::call_start`] for several calls of one runner and epoch, in one statement
    /// (one commit, one WAL flush). Returns the ids it started (again); the others were not.
    ///
    /// The states a call may leave come per row, as in the completion batch, so the statement
    /// finds each call by primary key: with the states as a constant (or a parameter, which a
    /// custom plan sees through) it matched `calls_in_flight`'s predicate (on `state` until
    /// migration 0011) and was planned on that index, and with the xmin horizon held the index
    /// fills with dead entries of the epoch — in the full benchmark's soak such a batch read
    /// 6,700 blocks (6 ms) and the held phase fell to 355 of the 500 calls/s asked. Nor does
    /// it say `finished_at IS NULL`, the index's predicate now.
    pub async fn call_start_many(
        &self,
        ids: &[CallId],
        runner: RunnerRef,
        epoch: Epoch,
    ) -> Result<Vec<CallId>, sqlx::Error> {
        if let [id] = ids {
            let started = self.call_start(*id, runner, epoch).await?;
            return Ok(if started { vec![*id] } else { Vec::new() });
        }
        // `leased`, or `running` again for a runner that lost the first answer.
        let from = vec!["leased,running"; ids.len()];
        static STATEMENT: LazyLock<Arc<str>> = LazyLock::new(|| {
            format!(
                "UPDATE calls SET state = 'running', started_at = COALESCE(started_at, now())
                 FROM unnest($1::uuid[], $4::text[]) AS i(id, from_states)
                 WHERE calls.id = ANY($1) AND calls.id = i.id
                   AND calls.state = ANY(string_to_array(i.from_states, ','))
                   AND calls.runner_ref = $2 AND calls.lease_epoch = $3
                   AND EXISTS (SELECT 1 FROM runner_leases r
                               WHERE r.runner_ref = $2 AND r.epoch = $3 AND r.expires_at > now())
                   AND (calls.state = 'running' OR {retired} IS NULL)
                 RETURNING calls.id",
                retired = retired_code("calls"),
            )
            .into()
        });
        sqlx::query_scalar(text(&STATEMENT))
            .bind(ids)
            .bind(runner)
            .bind(epoch)
            .bind(from)
            .fetch_all(&self.pool)
            .await
    }
}
