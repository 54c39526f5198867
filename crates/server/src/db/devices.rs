//! Paired devices: lookup by credential hash, listing, revocation, and the housekeeping of
//! pairing attempts and device mail.

use super::{Datastore, Key, WorkspaceRow};
use chrono::{DateTime, Utc};
use std::time::Duration;
use switchyard_protocol::{DeviceId, ProfileId, RunnerRef, UserId, WorkspaceId};

/// How long an unapproved, expired pairing attempt is kept (so a late poll still reads
/// `expired`) before the sweeper deletes it.
const EXPIRED_PAIRINGS_KEPT: Duration = Duration::from_secs(3600);

/// A row of `devices`, without its credential hash.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct DeviceRow {
    /// Id; the runner reference is `device:<id>`.
    pub id: DeviceId,
    /// Workspace.
    pub workspace_id: WorkspaceId,
    /// The profile it is bound to.
    pub profile_id: ProfileId,
    /// The name the device gave when pairing.
    pub name: String,
    /// Who approved it.
    pub approved_by: UserId,
    /// Pairing time.
    pub created_at: DateTime<Utc>,
    /// Last authenticated request (recorded at most every half minute).
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Revocation time.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// `SELECT d.*, … AS runner_ref …`: the device holding the credential whose hash is the
/// placeholder `hash` (revoked or not), with its runner reference `device:<id>`. Shared by
/// the statements that check a device's credential themselves: the heartbeat's, the start
/// ack's and the upload's.
pub(super) fn device_by_credential(hash: &str) -> String {
    format!(
        "SELECT d.*, 'device:' || d.id::text AS runner_ref FROM devices d WHERE d.credential_hash = {hash}"
    )
}

impl Datastore {
    /// The device holding a collected credential with this hash (revoked or not).
    pub async fn device_by_credential(
        &self,
        credential_hash: &[u8],
    ) -> Result<Option<DeviceRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM devices WHERE credential_hash = $1")
            .bind(credential_hash)
            .fetch_optional(&self.pool)
            .await
    }

    /// Records that the device was heard from, unless that was recorded less than `every` ago
    /// (so a busy device does not write on every request).
    pub async fn device_touch(&self, id: DeviceId, every: Duration) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE devices SET last_seen_at = now()
             WHERE id = $1 AND (last_seen_at IS NULL OR last_seen_at < now() - make_interval(secs => $2))",
        )
        .bind(id)
        .bind(every.as_secs_f64())
        .execute(&self.pool)
        .await
        .map(drop)
    }

    /// Records that the devices `ids` were heard from, in one statement, except those
    /// recorded less than `every` ago (by another replica, say). Rows are locked in id order,
    /// so replicas flushing at once cannot deadlock. Returns how many were written.
    pub async fn device_touch_batch(
        &self,
        ids: &[DeviceId],
        every: Duration,
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(
            "WITH due AS (
                 SELECT id FROM devices
                 WHERE id = ANY($1) AND (last_seen_at IS NULL OR last_seen_at < now() - make_interval(secs => $2))
                 ORDER BY id
                 FOR NO KEY UPDATE
             )
             UPDATE devices d SET last_seen_at = now() FROM due WHERE d.id = due.id",
        )
        .bind(ids)
        .bind(every.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// The user who approved device `id` (the person its calls run for), if it exists.
    pub async fn device_approver(&self, id: DeviceId) -> Result<Option<UserId>, sqlx::Error> {
        sqlx::query_scalar("SELECT approved_by FROM devices WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
    }

    /// A device of a workspace.
    pub async fn device_get(
        &self,
        workspace: WorkspaceId,
        id: DeviceId,
    ) -> Result<Option<DeviceRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM devices WHERE workspace_id = $1 AND id = $2")
            .bind(workspace)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
    }

    /// The devices of a workspace, oldest first, revoked ones included.
    pub async fn device_list(&self, workspace: WorkspaceId) -> Result<Vec<DeviceRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM devices WHERE workspace_id = $1 ORDER BY created_at, id")
            .bind(workspace)
            .fetch_all(&self.pool)
            .await
    }

    /// Revokes a device and ends its runner lease now, in one transaction, so the sweeper
    /// settles what it held (leased calls back to the queue, started ones `unknown`).
    /// Revoking a revoked device changes nothing. `None` when there is no such device.
    pub async fn device_revoke(
        &self,
        workspace: WorkspaceId,
        id: DeviceId,
        by: UserId,
        runner_ref: RunnerRef,
    ) -> Result<Option<DeviceRow>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let revoked: Option<DeviceRow> = sqlx::query_as(
            "UPDATE devices SET revoked_at = now(), revoked_by = $3
             WHERE workspace_id = $1 AND id = $2 AND revoked_at IS NULL RETURNING *",
        )
        .bind(workspace)
        .bind(id)
        .bind(by)
        .fetch_optional(&mut *tx)
        .await?;
        if revoked.is_some() {
            sqlx::query("UPDATE runner_leases SET expires_at = LEAST(expires_at, now()) WHERE runner_ref = $1")
                .bind(runner_ref)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        match revoked {
            Some(device) => Ok(Some(device)),
            None => self.device_get(workspace, id).await,
        }
    }

    /// The workspace named by `key`, if it is the device's.
    pub async fn workspace_find_for_device(
        &self,
        key: &Key<'_>,
        device: DeviceId,
    ) -> Result<Option<WorkspaceRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT w.id, w.name, w.created_at FROM workspaces w JOIN devices d ON d.workspace_id = w.id
             WHERE d.id = $3 AND (w.id = $1 OR w.name = $2)",
        )
        .bind(key.id())
        .bind(key.name())
        .bind(device)
        .fetch_optional(&self.pool)
        .await
    }

    /// Deletes session releases older than `release_ttl` and unapproved pairing attempts
    /// expired long ago. Returns how many rows went.
    pub async fn device_sweep(&self, release_ttl: Duration) -> Result<u64, sqlx::Error> {
        let releases = sqlx::query(
            "DELETE FROM session_releases WHERE requested_at < now() - make_interval(secs => $1)",
        )
        .bind(release_ttl.as_secs_f64())
        .execute(&self.pool)
        .await?;
        let pairings = sqlx::query(
            "DELETE FROM pairings WHERE state = 'pending' AND expires_at < now() - make_interval(secs => $1)",
        )
        .bind(EXPIRED_PAIRINGS_KEPT.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(releases.rows_affected() + pairings.rows_affected())
    }
}
