//! Pairing attempts: a short code a workspace member approves, then the device collects its
//! credential once. Only hashes of the code, the poll secret and the credential are stored;
//! each step is one guarded update that reports whether it won.

use super::{Datastore, DeviceRow};
use chrono::{DateTime, Utc};
use std::time::Duration;
use switchyard_protocol::{ProfileId, UserId, WorkspaceId};
use uuid::Uuid;

/// A row of `pairings`, without its hashes.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct PairingRow {
    /// Id.
    pub id: Uuid,
    /// The name the device gave.
    pub device_name: String,
    /// `pending`, `approved` or `collected`.
    pub state: String,
    /// When the code stops working.
    pub expires_at: DateTime<Utc>,
    /// Whether the code has expired (by the database's clock).
    pub expired: bool,
}

/// `SELECT` of a pairing, followed by the given clauses.
macro_rules! select_pairing {
    ($clauses:literal) => {
        concat!("SELECT id, device_name, state, expires_at, expires_at <= now() AS expired FROM pairings ", $clauses)
    };
}

impl Datastore {
    /// Inserts a pending pairing that expires after `ttl`. A code hash already in use fails
    /// with a unique violation (the caller draws a new code).
    pub async fn pairing_create(
        &self,
        code_hash: &[u8],
        poll_secret_hash: &[u8],
        device_name: &str,
        ttl: Duration,
    ) -> Result<PairingRow, sqlx::Error> {
        sqlx::query_as(
            "INSERT INTO pairings (id, code_hash, poll_secret_hash, device_name, expires_at)
             VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
             RETURNING id, device_name, state, expires_at, expires_at <= now() AS expired",
        )
        .bind(Uuid::now_v7())
        .bind(code_hash)
        .bind(poll_secret_hash)
        .bind(device_name)
        .bind(ttl.as_secs_f64())
        .fetch_one(&self.pool)
        .await
    }

    /// The pairing with this id, if the poll secret matches.
    pub async fn pairing_find(
        &self,
        id: Uuid,
        poll_secret_hash: &[u8],
    ) -> Result<Option<PairingRow>, sqlx::Error> {
        sqlx::query_as(select_pairing!("WHERE id = $1 AND poll_secret_hash = $2"))
            .bind(id)
            .bind(poll_secret_hash)
            .fetch_optional(&self.pool)
            .await
    }

    /// Approves the pending, unexpired pairing with this code and creates its device bound to
    /// `profile`, in one transaction. `None` when no such pairing exists: the code is unknown,
    /// expired or was used already.
    pub async fn pairing_approve(
        &self,
        code_hash: &[u8],
        workspace: WorkspaceId,
        profile: ProfileId,
        approver: UserId,
    ) -> Result<Option<DeviceRow>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let pairing: Option<(Uuid, String)> = sqlx::query_as(
            "UPDATE pairings SET state = 'approved', approved_at = now()
             WHERE code_hash = $1 AND state = 'pending' AND expires_at > now()
             RETURNING id, device_name",
        )
        .bind(code_hash)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((pairing, name)) = pairing else {
            return Ok(None);
        };
        let device: DeviceRow = sqlx::query_as(
            "INSERT INTO devices (id, workspace_id, profile_id, name, pairing_id, approved_by)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING *",
        )
        .bind(Uuid::now_v7())
        .bind(workspace)
        .bind(profile)
        .bind(name)
        .bind(pairing)
        .bind(approver)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(device))
    }

    /// Marks an approved pairing collected and stores the device's credential hash, in one
    /// transaction. Returns the device when this call won; `None` when the credential was
    /// collected before (it is handed out once).
    pub async fn pairing_collect(
        &self,
        pairing: Uuid,
        credential_hash: &[u8],
    ) -> Result<Option<DeviceRow>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let won = sqlx::query("UPDATE pairings SET state = 'collected', collected_at = now() WHERE id = $1 AND state = 'approved'")
            .bind(pairing)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            == 1;
        if !won {
            return Ok(None);
        }
        let device: DeviceRow = sqlx::query_as(
            "UPDATE devices SET credential_hash = $2 WHERE pairing_id = $1 RETURNING *",
        )
        .bind(pairing)
        .bind(credential_hash)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(device))
    }

    /// The device an approved pairing created.
    pub async fn device_by_pairing(&self, pairing: Uuid) -> Result<Option<DeviceRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM devices WHERE pairing_id = $1")
            .bind(pairing)
            .fetch_optional(&self.pool)
            .await
    }
}
