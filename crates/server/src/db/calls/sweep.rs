//! The sweeps that settle calls nobody will settle otherwise: queued too long, held under a
//! lease that expired, held by a runner that no longer holds them, and past their retention.

use crate::db::{Committed, Datastore, Wakeup};
use std::time::Duration;
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{CallId, CallState, RunnerRef};

/// Which expired runner leases a lost-lease sweep settles the calls of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpiredLeases {
    /// Every expired lease.
    All,
    /// Leases that expired in the last minute: usually none, so the sweep reads no call. Each
    /// of thousands of long-expired leases (devices gone away) costs a lookup in every sweep
    /// of all of them.
    Recent,
}

impl ExpiredLeases {
    /// The condition on the expired leases (`e`): a minute covers the sweeper's interval and
    /// any lease or start transaction still committing when the lease expired, many times
    /// over.
    fn window(self) -> &'static str {
        match self {
            ExpiredLeases::All => "",
            ExpiredLeases::Recent => " AND e.expires_at > now() - interval '60 seconds'",
        }
    }
}

/// A lost-lease sweep's statement: sets `set` on the calls in `state` of the runners whose
/// lease expired (`e`, in `leases`' window), under that lease's epoch or an earlier one. The
/// calls are looked up by those runners (an index condition on `calls_in_flight`), so that no
/// plan walks the entries of runners whose lease is live: with the xmin horizon held, the
/// central runner's dead ones (31 ms against 9 ms for 10,000 expired runners among 100,000
/// dead entries; 0.5 ms for the recent ones).
fn lost_leases(set: &str, state: CallState, leases: ExpiredLeases) -> String {
    format!(
        "UPDATE calls c SET {set}
         FROM runner_leases r
         WHERE c.runner_ref = ANY (ARRAY(
                   SELECT e.runner_ref FROM runner_leases e WHERE e.expires_at <= now(){window}))
           AND c.runner_ref = r.runner_ref AND c.state = '{state}'
           AND c.lease_epoch <= r.epoch AND c.finished_at IS NULL AND r.expires_at <= now()",
        window = leases.window(),
    )
}

/// Leased calls of a lost lease go back to the queue: nothing was sent.
const REQUEUE_LOST: &str = "state = 'queued', lease_epoch = NULL, leased_at = NULL";
/// Started calls of a lost lease become `unknown`: they may have run.
const UNKNOWN_LOST: &str = "state = 'unknown', finished_at = now(), error_code = 'runner_lost',
    error_message = 'the runner lost its lease after the call was started; it may or may not have run'";

impl Datastore {
    /// Expires calls queued longer than `max_wait`. Returns how many. A call approved after
    /// waiting for a person was queued when it was approved, not when it was submitted.
    pub async fn call_expire_queued(&self, max_wait: Duration) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE calls SET state = 'expired', finished_at = now(), error_code = 'queue_expired',
                 error_message = 'no runner took the call in time'
             WHERE state = 'queued' AND lease_epoch IS NULL AND finished_at IS NULL AND NOT approval_held
               AND created_at < now() - make_interval(secs => $1)
               AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.call_id = calls.id
                               AND a.decided_at >= now() - make_interval(secs => $1))",
        )
        .bind(max_wait.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// Settles calls held under expired runner leases — all of them, or those that expired
    /// lately: leased-but-unstarted calls go back to the queue (nothing was sent), started
    /// ones become `unknown` (they may have run). Returns (requeued, unknown).
    pub async fn call_sweep_lost_leases(
        &self,
        leases: ExpiredLeases,
    ) -> Result<Committed<(u64, u64)>, sqlx::Error> {
        let requeue = lost_leases(REQUEUE_LOST, CallState::Leased, leases);
        let unknown = lost_leases(UNKNOWN_LOST, CallState::Running, leases);
        let requeued = sqlx::query(sqlx::AssertSqlSafe(requeue))
            .execute(&self.pool)
            .await?
            .rows_affected();
        let unknown = sqlx::query(sqlx::AssertSqlSafe(unknown))
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(Committed::new((requeued, unknown)).waking_if(requeued > 0, Wakeup::Requeued(None)))
    }

    /// Erases inputs and results of calls finished longer than `retention` ago, keeping the
    /// minimal disposition (state, error code, times). Returns how many.
    pub async fn call_sweep_retention(&self, retention: Duration) -> Result<u64, sqlx::Error> {
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
        runner: RunnerRef,
        epoch: Epoch,
        held: &[CallId],
        grace: Duration,
    ) -> Result<Committed<(u64, u64)>, sqlx::Error> {
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
             WHERE runner_ref = $1 AND lease_epoch = $2 AND finished_at IS NULL AND state IN ('leased', 'running')
               AND NOT (id = ANY($3))
               AND ((state = 'leased' AND leased_at < now() - make_interval(secs => $4))
                 OR (state = 'running' AND started_at < now() - make_interval(secs => $4)))
             RETURNING state = 'queued'",
        )
        .bind(runner)
        .bind(epoch)
        .bind(held)
        .bind(grace.as_secs_f64())
        .fetch_all(&self.pool)
        .await?;
        let queued = requeued.iter().filter(|q| **q).count() as u64;
        Ok(Committed::new((queued, requeued.len() as u64 - queued))
            .waking_if(queued > 0, Wakeup::Requeued(Some(runner))))
    }

    /// Those of `ids` that are leased or running.
    ///
    /// The states are read and matched here, not in the statement: a condition on them
    /// matched `calls_in_flight`'s predicate (on `state` until migration 0011; on
    /// `finished_at IS NULL` now), and the planner then answered from that index —
    /// every call in flight and, while the xmin horizon is held, every dead entry of them
    /// (~100 ms a beat in the soak) — instead of finding each call by primary key.
    pub async fn call_in_flight_among(&self, ids: &[CallId]) -> Result<Vec<CallId>, sqlx::Error> {
        let states: Vec<(CallId, CallState)> =
            sqlx::query_as("SELECT id, state FROM calls WHERE id = ANY($1)")
                .bind(ids)
                .fetch_all(&self.pool)
                .await?;
        Ok(states
            .into_iter()
            .filter(|(_, state)| matches!(state, CallState::Leased | CallState::Running))
            .map(|(id, _)| id)
            .collect())
    }
}
