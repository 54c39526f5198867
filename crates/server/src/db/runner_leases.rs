//! Runner leases: one live owner per runner reference, with a monotonically increasing epoch
//! that every start and completion is fenced by.

use super::Datastore;
use std::time::Duration;
use uuid::Uuid;

fn interval(ttl: Duration) -> f64 {
    ttl.as_secs_f64()
}

impl Datastore {
    /// Takes the runner lease for `holder` if it is free or expired, with a new epoch.
    /// In the same transaction, calls the previous owner leased but never started go back to
    /// the queue (nothing was sent), and calls it started become `unknown` (they may have run).
    ///
    /// The last holder resumes its lease under the same epoch, live or expired, as long as no
    /// other holder took the runner over in between: a restarted device runner keeps its
    /// holder id (and its receipts, stamped with that epoch) in its outbox, so nothing it holds
    /// is fenced, and the receipts of calls that turned `unknown` while it was away are late
    /// receipts that settle them. (Its outbox records each start once, so two terms of one
    /// holder never both send a call.) The central runner uses a fresh holder per lease term,
    /// so for it a live lease always means "wait" and every term gets a new epoch.
    ///
    /// Returns the epoch, or `None` while another holder's lease is live.
    pub async fn runner_lease_acquire(
        &self,
        runner_ref: &str,
        holder: Uuid,
        ttl: Duration,
    ) -> Result<Option<i64>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let epoch: Option<i64> = sqlx::query_scalar(
            "INSERT INTO runner_leases (runner_ref, epoch, holder, expires_at)
             VALUES ($1, 1, $2, now() + make_interval(secs => $3))
             ON CONFLICT (runner_ref) DO UPDATE
                 SET epoch = CASE WHEN runner_leases.holder = EXCLUDED.holder
                                  THEN runner_leases.epoch ELSE runner_leases.epoch + 1 END,
                     holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
                 WHERE runner_leases.expires_at <= now() OR runner_leases.holder = EXCLUDED.holder
             RETURNING epoch",
        )
        .bind(runner_ref)
        .bind(holder)
        .bind(interval(ttl))
        .fetch_optional(&mut *tx)
        .await?;
        // On a resume these settle nothing: older epochs were settled when this one began.
        if let Some(epoch) = epoch {
            sqlx::query(
                "UPDATE calls SET state = 'queued', lease_epoch = NULL, leased_at = NULL
                 WHERE runner_ref = $1 AND state = 'leased' AND lease_epoch < $2",
            )
            .bind(runner_ref)
            .bind(epoch)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE calls SET state = 'unknown', error_code = 'runner_lost',
                     error_message = 'the runner that started this call lost its lease before reporting; the call may or may not have run',
                     finished_at = now()
                 WHERE runner_ref = $1 AND state = 'running' AND lease_epoch < $2",
            )
            .bind(runner_ref)
            .bind(epoch)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(epoch)
    }

    /// Extends a live lease. Returns false when the lease expired or passed to another epoch:
    /// the holder must stop sending and drain.
    pub async fn runner_lease_renew(
        &self,
        runner_ref: &str,
        holder: Uuid,
        epoch: i64,
        ttl: Duration,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE runner_leases SET expires_at = now() + make_interval(secs => $4)
             WHERE runner_ref = $1 AND holder = $2 AND epoch = $3 AND expires_at > now()",
        )
        .bind(runner_ref)
        .bind(holder)
        .bind(epoch)
        .bind(interval(ttl))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives a lease up at once (clean shutdown), so a successor need not wait for expiry.
    pub async fn runner_lease_release(
        &self,
        runner_ref: &str,
        holder: Uuid,
        epoch: i64,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE runner_leases SET expires_at = now() WHERE runner_ref = $1 AND holder = $2 AND epoch = $3",
        )
        .bind(runner_ref)
        .bind(holder)
        .bind(epoch)
        .execute(&self.pool)
        .await
        .map(drop)
    }

    /// Whether `epoch` is the runner's current epoch (live or not).
    pub async fn runner_lease_is_current(
        &self,
        runner_ref: &str,
        epoch: i64,
    ) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM runner_leases WHERE runner_ref = $1 AND epoch = $2)",
        )
        .bind(runner_ref)
        .bind(epoch)
        .fetch_one(&self.pool)
        .await
    }

    /// Extends the live lease of `epoch` (whoever holds it: the epoch names one acquisition).
    /// Returns false when the lease expired or passed to another epoch.
    pub async fn runner_lease_renew_epoch(
        &self,
        runner_ref: &str,
        epoch: i64,
        ttl: Duration,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE runner_leases SET expires_at = now() + make_interval(secs => $3)
             WHERE runner_ref = $1 AND epoch = $2 AND expires_at > now()",
        )
        .bind(runner_ref)
        .bind(epoch)
        .bind(interval(ttl))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives up the lease of `epoch` at once (clean shutdown of a device runner).
    pub async fn runner_lease_release_epoch(
        &self,
        runner_ref: &str,
        epoch: i64,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE runner_leases SET expires_at = LEAST(expires_at, now()) WHERE runner_ref = $1 AND epoch = $2")
            .bind(runner_ref)
            .bind(epoch)
            .execute(&self.pool)
            .await
            .map(drop)
    }

    /// Whether `epoch` is the runner's current epoch and its lease is live.
    pub async fn runner_lease_is_live(
        &self,
        runner_ref: &str,
        epoch: i64,
    ) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM runner_leases WHERE runner_ref = $1 AND epoch = $2 AND expires_at > now())",
        )
        .bind(runner_ref)
        .bind(epoch)
        .fetch_one(&self.pool)
        .await
    }

    /// The runner's current epoch (live or not), if it ever held a lease.
    pub async fn runner_lease_epoch(&self, runner_ref: &str) -> Result<Option<i64>, sqlx::Error> {
        sqlx::query_scalar("SELECT epoch FROM runner_leases WHERE runner_ref = $1")
            .bind(runner_ref)
            .fetch_optional(&self.pool)
            .await
    }
}
