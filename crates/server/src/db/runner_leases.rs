//! Runner leases: one live owner per runner reference, with a monotonically increasing epoch
//! that every start and completion is fenced by.
//!
//! Taking a lease (`runner_lease_acquire`) raises the epoch for a new holder and, in the same
//! transaction, settles what earlier epochs left: leased calls go back to the queue (nothing was
//! sent), started ones become `unknown`. The last holder instead resumes its lease under the
//! same epoch unless another holder took the runner over meanwhile, so a restarted device runner
//! does not race itself: the receipts in its outbox stay valid and no start repeats. The
//! central runner takes a fresh holder per term, so each of its terms gets a new epoch.
//!
//! A device heartbeat is one statement (`runner_lease_heartbeat`): it checks the credential,
//! reads the lease of the heartbeat's epoch, and returns the running calls whose cancellation
//! was requested, whether calls the runner does not hold are due to be settled, and the session
//! releases addressed to it (taken, so each is delivered once). A running call's cancellation
//! and a session release reach a device runner only this way. The renewal itself is kept in
//! memory while half the lease is left and written in a batch (`runner_lease_renew_batch`; why
//! the sweeper never sees such a lease expire: `app::dispatch::liveness`).

use super::{Committed, Datastore, DeviceRow, Wakeup};
use std::time::Duration;
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{CallId, ConnectionId, RunnerRef, UserId};
use uuid::Uuid;

fn interval(ttl: Duration) -> f64 {
    ttl.as_secs_f64()
}

/// A runner lease taken or resumed ([`Datastore::runner_lease_take`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TakenLease {
    /// Its epoch.
    pub epoch: Epoch,
    /// Calls that earlier epochs started and never reported, made `unknown` by taking it.
    pub unknown: u64,
}

/// What a device heartbeat reads ([`Datastore::runner_lease_heartbeat`]): the device and,
/// when it is not revoked, its lease and what to tell its runner.
#[derive(Debug, sqlx::FromRow)]
pub struct DeviceHeartbeat {
    /// The device holding the credential (revoked or not).
    #[sqlx(flatten)]
    pub device: DeviceRow,
    /// Its lease, cancellations and releases.
    #[sqlx(flatten)]
    pub beat: LeaseHeartbeat,
}

/// The runner's side of [`DeviceHeartbeat`].
#[derive(Debug, sqlx::FromRow)]
pub struct LeaseHeartbeat {
    /// Seconds the lease of the heartbeat's epoch has left; `None` unless that epoch is the
    /// runner's current one and live.
    pub lease_left_secs: Option<f64>,
    /// Running calls of the runner whose cancellation was requested.
    pub cancel: Vec<CallId>,
    /// Whether calls leased or started under the epoch and not held by the runner are due to
    /// be settled.
    pub unheld: bool,
    /// The connections of the session releases taken, oldest first.
    pub release_connections: Vec<ConnectionId>,
    /// Their client session ids (`None`: every session of the connection), in the same order.
    pub release_sessions: Vec<Option<String>>,
    /// The users who released them (`None`: a release recorded before releases named one), in
    /// the same order.
    pub release_users: Vec<Option<UserId>>,
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
        runner_ref: RunnerRef,
        holder: Uuid,
        ttl: Duration,
    ) -> Result<Committed<Option<Epoch>>, sqlx::Error> {
        let taken = self.runner_lease_take(runner_ref, holder, ttl).await?;
        Ok(Committed {
            value: taken.value.map(|taken| taken.epoch),
            wakeups: taken.wakeups,
        })
    }

    /// [`Datastore::runner_lease_acquire`], saying also how many calls it made `unknown`.
    pub async fn runner_lease_take(
        &self,
        runner_ref: RunnerRef,
        holder: Uuid,
        ttl: Duration,
    ) -> Result<Committed<Option<TakenLease>>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let epoch: Option<Epoch> = sqlx::query_scalar(
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
        let (mut requeued, mut unknown) = (0, 0);
        if let Some(epoch) = epoch {
            requeued = sqlx::query(
                "UPDATE calls SET state = 'queued', lease_epoch = NULL, leased_at = NULL
                 WHERE runner_ref = $1 AND state = 'leased' AND lease_epoch < $2 AND finished_at IS NULL",
            )
            .bind(runner_ref)
            .bind(epoch)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            unknown = sqlx::query(
                "UPDATE calls SET state = 'unknown', error_code = 'runner_lost',
                     error_message = 'the runner that started this call lost its lease before reporting; the call may or may not have run',
                     finished_at = now()
                 WHERE runner_ref = $1 AND state = 'running' AND lease_epoch < $2 AND finished_at IS NULL",
            )
            .bind(runner_ref)
            .bind(epoch)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        let taken = epoch.map(|epoch| TakenLease { epoch, unknown });
        Ok(Committed::new(taken).waking_if(requeued > 0, Wakeup::Requeued(Some(runner_ref))))
    }

    /// Extends a live lease. Returns false when the lease expired or passed to another epoch:
    /// the holder must stop sending and drain.
    pub async fn runner_lease_renew(
        &self,
        runner_ref: RunnerRef,
        holder: Uuid,
        epoch: Epoch,
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
        runner_ref: RunnerRef,
        holder: Uuid,
        epoch: Epoch,
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
        runner_ref: RunnerRef,
        epoch: Epoch,
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
        runner_ref: RunnerRef,
        epoch: Epoch,
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

    /// Writes heartbeat renewals kept in memory, in one statement: the lease of
    /// `runner_refs[i]`, if it is still under `epochs[i]` and live, is extended to expire
    /// `left_secs[i]` seconds from now — never shortened, and a lease released, revoked, taken
    /// over or expired is never revived. Rows are locked in `runner_ref` order, so replicas
    /// flushing at once cannot deadlock. Returns how many leases were extended.
    pub async fn runner_lease_renew_batch(
        &self,
        runner_refs: &[RunnerRef],
        epochs: &[Epoch],
        left_secs: &[f64],
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(
            "WITH due AS (
                 SELECT r.runner_ref, b.left_secs FROM runner_leases r
                 JOIN unnest($1::text[], $2::bigint[], $3::float8[]) AS b(runner_ref, epoch, left_secs)
                   ON r.runner_ref = b.runner_ref AND r.epoch = b.epoch
                 WHERE r.expires_at > now() AND r.expires_at < now() + make_interval(secs => b.left_secs)
                 ORDER BY r.runner_ref
                 FOR NO KEY UPDATE OF r
             )
             UPDATE runner_leases r SET expires_at = now() + make_interval(secs => due.left_secs)
             FROM due WHERE r.runner_ref = due.runner_ref",
        )
        .bind(runner_refs)
        .bind(epochs)
        .bind(left_secs)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// Everything a device heartbeat needs, in one statement that writes nothing when there is
    /// nothing to deliver: the device holding the credential with this hash (`None` when there
    /// is none), how long its lease of `epoch` has left (`None` unless that is the runner's
    /// current epoch and live, and the device is not revoked), the running calls whose
    /// cancellation was requested, whether any call leased or started under `epoch` that the
    /// runner does not list in `held` is older than `grace` (so that `call_settle_unheld` has
    /// something to do), and — taken, only under the live lease — the session releases
    /// addressed to the runner, those older than `release_ttl` dropped.
    pub async fn runner_lease_heartbeat(
        &self,
        credential_hash: &[u8],
        epoch: Epoch,
        held: &[CallId],
        grace: Duration,
        release_ttl: Duration,
    ) -> Result<Option<DeviceHeartbeat>, sqlx::Error> {
        static STATEMENT: std::sync::LazyLock<std::sync::Arc<str>> = std::sync::LazyLock::new(
            || {
                let mut params = super::sql::Params::default();
                let [hash, epoch, held, grace, release] = std::array::from_fn(|_| params.next());
                format!(
                "WITH device AS ({device}),
             lease AS (
                 SELECT EXTRACT(EPOCH FROM r.expires_at - now())::float8 AS left_secs
                 FROM runner_leases r JOIN device d ON r.runner_ref = d.runner_ref
                 WHERE d.revoked_at IS NULL AND r.epoch = {epoch} AND r.expires_at > now()
             ),
             taken AS (
                 DELETE FROM session_releases
                 WHERE runner_ref = (SELECT runner_ref FROM device) AND EXISTS (SELECT 1 FROM lease)
                 RETURNING id, connection_id, client_session_id, user_id, requested_at
             ),
             delivered AS (
                 SELECT id, connection_id, client_session_id, user_id FROM taken
                 WHERE requested_at >= now() - make_interval(secs => {release})
             ),
             in_flight AS (
                 SELECT id, state, lease_epoch, leased_at, started_at, cancel_requested_at FROM calls
                 WHERE runner_ref = (SELECT runner_ref FROM device) AND state IN ('leased', 'running')
                   AND lease_epoch IS NOT NULL AND finished_at IS NULL
             )
             SELECT d.*,
                 (SELECT left_secs FROM lease) AS lease_left_secs,
                 ARRAY(SELECT id FROM in_flight WHERE state = 'running' AND cancel_requested_at IS NOT NULL ORDER BY id) AS cancel,
                 EXISTS (SELECT 1 FROM in_flight
                         WHERE lease_epoch = {epoch} AND NOT (id = ANY({held}))
                           AND ((state = 'leased' AND leased_at < now() - make_interval(secs => {grace}))
                             OR (state = 'running' AND started_at < now() - make_interval(secs => {grace})))) AS unheld,
                 ARRAY(SELECT connection_id FROM delivered ORDER BY id) AS release_connections,
                 ARRAY(SELECT client_session_id FROM delivered ORDER BY id) AS release_sessions,
                 ARRAY(SELECT user_id FROM delivered ORDER BY id) AS release_users
             FROM device d",
                device = super::devices::device_by_credential(&hash),
            )
            .into()
            },
        );
        sqlx::query_as(super::sql::text(&STATEMENT))
            .bind(credential_hash)
            .bind(epoch)
            .bind(held)
            .bind(interval(grace))
            .bind(interval(release_ttl))
            .fetch_optional(&self.pool)
            .await
    }

    /// Gives up the lease of `epoch` at once (clean shutdown of a device runner).
    pub async fn runner_lease_release_epoch(
        &self,
        runner_ref: RunnerRef,
        epoch: Epoch,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE runner_leases SET expires_at = LEAST(expires_at, now()) WHERE runner_ref = $1 AND epoch = $2")
            .bind(runner_ref)
            .bind(epoch)
            .execute(&self.pool)
            .await
            .map(drop)
    }

    /// The runner's current epoch (live or not), if it ever held a lease.
    pub async fn runner_lease_epoch(
        &self,
        runner_ref: RunnerRef,
    ) -> Result<Option<Epoch>, sqlx::Error> {
        sqlx::query_scalar("SELECT epoch FROM runner_leases WHERE runner_ref = $1")
            .bind(runner_ref)
            .fetch_optional(&self.pool)
            .await
    }
}
