//! Liveness kept in memory: device runners' lease renewals and devices' `last_seen_at`. Each
//! server process holds the ones it received and its flusher writes them to PostgreSQL in
//! one statement each per flush, so an idle runner's heartbeat writes nothing by itself.
//!
//! # Why the sweeper never expires a runner that heartbeats
//!
//! - A heartbeat reads its lease from the database (in the one read that also answers the rest
//!   of the heartbeat) and is refused at once unless its epoch is the current one and live:
//!   fencing never waits for a flush, and needs no cache to invalidate.
//! - A renewal is kept in memory only while the lease in the database still has at least half
//!   its length to run ([`Liveness::may_defer`]); otherwise it is written at once, as before.
//! - The flusher runs every `flush_every`, which is at most a quarter of the lease
//!   ([`flush_interval`]), and writes `expires_at` = the moment of the heartbeat + the lease
//!   length: exactly the expiry an immediate write would have given.
//!
//! So from a deferred heartbeat to its flush the database lease keeps at least a quarter of
//! its length in hand (half, less at most a quarter), and the sweeper — which reads only the
//! database — never sees it expire while its holder heartbeats. The database's expiry lags the
//! last heartbeat's by at most one flush interval plus the time of the flush itself.
//!
//! A flush only ever extends a lease, and only a live one still under the renewal's epoch: a
//! lease released, revoked, taken over or already expired is never revived, and a late flush
//! of an older renewal never shortens a newer one. Replicas each flush their own renewals and
//! every heartbeat decides from the database, so they need no coordination. A replica that
//! dies with renewals unflushed leaves each of those leases at least half its length from the
//! heartbeat it answered: more than the third of a lease until the runner's next heartbeat
//! (`switchyard-mcp-runner` beats every third of the lease, at most every 10 s), which any
//! replica then writes at once, less than half being left.

use crate::app::App;
use crate::db::Datastore;
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{DeviceId, RunnerRef};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A device's `last_seen_at` is written at most this often, so a busy device does not write
/// on every request.
pub(crate) const SEEN_EVERY: Duration = Duration::from_secs(30);

/// How often the flusher writes, given the configured interval and the lease length: never
/// more than a quarter of the lease (see the module comment), never less than 10 ms.
pub(crate) fn flush_interval(configured: Duration, lease_ttl: Duration) -> Duration {
    configured.min(lease_ttl / 4).max(Duration::from_millis(10))
}

/// What one server process has received and not written yet.
#[derive(Debug)]
pub(crate) struct Liveness {
    ttl: Duration,
    pending: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    /// The latest renewal of each runner reference.
    renewals: HashMap<RunnerRef, Renewal>,
    /// Devices whose `last_seen_at` is due.
    seen: HashSet<DeviceId>,
}

/// A heartbeat that renewed the lease of `epoch` at `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Renewal {
    epoch: Epoch,
    at: Instant,
}

impl Pending {
    /// Keeps the newer of two renewals of one runner (a higher epoch, else a later beat).
    fn renew(&mut self, runner_ref: RunnerRef, renewal: Renewal) {
        self.renewals
            .entry(runner_ref)
            .and_modify(|kept| *kept = (*kept).max(renewal))
            .or_insert(renewal);
    }
}

impl Liveness {
    /// Nothing pending, for leases of length `ttl`.
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            pending: Mutex::default(),
        }
    }

    /// Whether a renewal of a lease with `left` to run in the database may wait for the
    /// flusher: only while at least half the lease is left.
    pub(crate) fn may_defer(&self, left: Duration) -> bool {
        left >= self.ttl / 2
    }

    /// Records a heartbeat that renewed `runner_ref`'s lease of `epoch` now.
    pub(crate) fn renewed(&self, runner_ref: RunnerRef, epoch: Epoch) {
        self.lock().renew(
            runner_ref,
            Renewal {
                epoch,
                at: Instant::now(),
            },
        );
    }

    /// Records that a device was heard from, if its `last_seen_at` (as read with its
    /// credential) is older than [`SEEN_EVERY`].
    pub(crate) fn device_seen(&self, device: DeviceId, last_seen_at: Option<DateTime<Utc>>) {
        let due = last_seen_at.is_none_or(|seen| {
            Utc::now()
                .signed_duration_since(seen)
                .to_std()
                .is_ok_and(|age| age >= SEEN_EVERY)
        });
        if due {
            self.lock().seen.insert(device);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        // The maps stay consistent whatever panicked while holding the lock.
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes what is pending: the renewals in one statement, the sightings in another. What a
    /// failed statement did not write is kept for the next flush (unless newer news replaced
    /// it meanwhile). A renewal older than a whole lease is dropped: its lease has expired.
    pub(crate) async fn flush(&self, db: &Datastore) -> Result<(), sqlx::Error> {
        let Pending { renewals, seen } = std::mem::take(&mut *self.lock());
        let renewed = self.write_renewals(db, &renewals).await;
        if renewed.is_err() {
            let mut pending = self.lock();
            for (runner_ref, renewal) in renewals {
                pending.renew(runner_ref, renewal);
            }
        }
        let touched = if seen.is_empty() {
            Ok(())
        } else {
            let ids: Vec<DeviceId> = seen.iter().copied().collect();
            db.device_touch_batch(&ids, SEEN_EVERY).await.map(drop)
        };
        if touched.is_err() {
            self.lock().seen.extend(seen);
        }
        renewed.and(touched)
    }

    async fn write_renewals(
        &self,
        db: &Datastore,
        renewals: &HashMap<RunnerRef, Renewal>,
    ) -> Result<(), sqlx::Error> {
        let now = Instant::now();
        let mut runner_refs = Vec::with_capacity(renewals.len());
        let mut epochs = Vec::with_capacity(renewals.len());
        let mut left = Vec::with_capacity(renewals.len());
        for (runner_ref, renewal) in renewals {
            if let Some(remaining) = self
                .ttl
                .checked_sub(now.saturating_duration_since(renewal.at))
            {
                runner_refs.push(*runner_ref);
                epochs.push(renewal.epoch);
                left.push(remaining.as_secs_f64());
            }
        }
        if runner_refs.is_empty() {
            return Ok(());
        }
        db.runner_lease_renew_batch(&runner_refs, &epochs, &left)
            .await
            .map(drop)
    }
}

impl App {
    /// Writes the renewals and sightings this process holds every `every` (see
    /// [`flush_interval`]) until `shutdown`. The last flush is the caller's, once nothing
    /// can heartbeat any more ([`App::flush_liveness`]).
    pub async fn run_liveness_flusher(self, every: Duration, shutdown: CancellationToken) {
        let every = flush_interval(every, self.config.runner_lease_ttl);
        let mut ticks = tokio::time::interval_at(Instant::now() + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            if let Err(error) = self.dispatch.liveness.flush(&self.db).await {
                tracing::warn!(%error, "writing heartbeat renewals failed; retrying at the next flush");
            }
        }
    }

    /// Writes the renewals and sightings this process holds now (at shutdown, after the last
    /// request was answered).
    pub async fn flush_liveness(&self) {
        if let Err(error) = self.dispatch.liveness.flush(&self.db).await {
            tracing::warn!(%error, "writing heartbeat renewals at shutdown failed; their leases run out on their own");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flush_interval_is_at_most_a_quarter_of_the_lease() {
        let s = Duration::from_secs;
        assert_eq!(flush_interval(s(1), s(30)), s(1));
        assert_eq!(flush_interval(s(1), s(3)), Duration::from_millis(750));
        assert_eq!(flush_interval(s(600), s(3600)), s(600));
        assert_eq!(
            flush_interval(Duration::ZERO, s(30)),
            Duration::from_millis(10)
        );
    }

    #[test]
    fn a_renewal_waits_only_while_half_the_lease_is_left() {
        let liveness = Liveness::new(Duration::from_secs(30));
        assert!(liveness.may_defer(Duration::from_secs(20)));
        assert!(liveness.may_defer(Duration::from_secs(15)));
        assert!(!liveness.may_defer(Duration::from_secs(14)));
    }

    #[test]
    fn the_newer_renewal_of_a_runner_is_kept() {
        let mut pending = Pending::default();
        let device = RunnerRef::Device(DeviceId::new());
        let early = Instant::now();
        let late = early + Duration::from_secs(1);
        pending.renew(
            device,
            Renewal {
                epoch: Epoch(2),
                at: late,
            },
        );
        pending.renew(
            device,
            Renewal {
                epoch: Epoch(2),
                at: early,
            },
        );
        assert_eq!(
            pending.renewals[&device],
            Renewal {
                epoch: Epoch(2),
                at: late
            }
        );
        // A takeover's epoch wins over a late beat of the old one.
        pending.renew(
            device,
            Renewal {
                epoch: Epoch(3),
                at: early,
            },
        );
        pending.renew(
            device,
            Renewal {
                epoch: Epoch(2),
                at: late + Duration::from_secs(1),
            },
        );
        assert_eq!(pending.renewals[&device].epoch, Epoch(3));
    }
}
