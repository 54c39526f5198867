//! When a pooled connection is checked before it is used.
//!
//! sqlx checks every connection as it goes back to the pool (a round trip it always makes) and,
//! by default, once more before each use: a second round trip in the way of every statement,
//! about a dozen per call. A connection that passed the check on its way back can only have
//! died while it sat in the pool, so here it is checked before use only when that is likely:
//! after it sat idle for [`RECHECK_AFTER_IDLE`] or longer, or while the pool is suspect — for
//! [`SUSPECT_FOR`] after a connection of this process was found dead. The wake-up listener's
//! connection is always reading, so it is the first to hear that PostgreSQL restarted or that
//! the server's backends were terminated ([`PoolHealth::connection_lost`]); the connections
//! then waiting in the pool are checked before their next use and replaced if they are dead.

use sqlx::Connection;
use sqlx::postgres::PgPoolOptions;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A connection idle this long is checked before use.
const RECHECK_AFTER_IDLE: Duration = Duration::from_millis(250);
/// How long after a connection was found dead every connection is checked before use.
const SUSPECT_FOR: Duration = Duration::from_secs(10);

/// Whether the pool's connections may have died meanwhile. Shared by the pool's check and
/// whoever finds a connection dead.
#[derive(Debug)]
pub struct PoolHealth {
    /// The clock's zero for `suspect_until_ms`.
    origin: Instant,
    /// Until when (milliseconds after `origin`) every connection is checked before use.
    suspect_until_ms: AtomicU64,
}

impl Default for PoolHealth {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            suspect_until_ms: AtomicU64::new(0),
        }
    }
}

impl PoolHealth {
    /// Pool options that check a connection before use only when [`PoolHealth`] says so.
    pub fn pool_options(self: &Arc<Self>) -> PgPoolOptions {
        let health = Arc::clone(self);
        PgPoolOptions::new()
            .test_before_acquire(false)
            .before_acquire(move |conn, meta| {
                let check = health.needs_check(health.origin.elapsed(), meta.idle_for);
                Box::pin(async move {
                    if check {
                        // An error closes this connection; the pool takes or opens another.
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            })
    }

    /// Says that a connection of this process was found dead: for [`SUSPECT_FOR`] from now,
    /// every pooled connection is checked before use.
    pub fn connection_lost(&self) {
        let until = self.origin.elapsed() + SUSPECT_FOR;
        self.suspect_until_ms
            .fetch_max(millis(until), Ordering::Relaxed);
    }

    /// Whether a connection idle for `idle_for` is checked before use at `now` (the time since
    /// `origin`).
    fn needs_check(&self, now: Duration, idle_for: Duration) -> bool {
        idle_for >= RECHECK_AFTER_IDLE
            || millis(now) < self.suspect_until_ms.load(Ordering::Relaxed)
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUSY: Duration = Duration::from_millis(3);

    #[test]
    fn a_connection_is_checked_after_sitting_idle_or_while_the_pool_is_suspect() {
        let health = PoolHealth::default();
        let now = health.origin.elapsed();
        assert!(!health.needs_check(now, BUSY));
        assert!(health.needs_check(now, RECHECK_AFTER_IDLE));

        health.connection_lost();
        let now = health.origin.elapsed();
        assert!(health.needs_check(now, BUSY));
        assert!(health.needs_check(now + SUSPECT_FOR / 2, BUSY));
        assert!(!health.needs_check(now + SUSPECT_FOR + Duration::from_millis(1), BUSY));
    }
}
