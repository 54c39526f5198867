//! The app's in-process scheduling machinery, behind one handle ([`Dispatch`]): what moves a
//! call between the resources' operations without being a resource itself. Nothing here is
//! the system of record; losing it (a restart) costs waiting, never a call.
//!
//! - [`notices`]: the wake-ups of committed changes, sent here at once and to the other
//!   replicas through PostgreSQL ([`notices::Announcer`]).
//! - [`wakeups`] and [`queue_floors`]: the fan-out to waiting runners and readers, and where
//!   each runner's lease scan starts.
//! - [`leasing`]: a runner's leases, waiting for announcements between looks.
//! - [`handoff`]: a lone new call handed straight to a lease that waits for it.
//! - [`submissions`] and [`batcher`]: submit reads and inserts, batched when they wait at the
//!   same moment (group commit).
//! - [`call_wait`]: a reader waiting for a call to settle.
//! - [`liveness`]: heartbeat renewals and device sightings held in memory until flushed.

pub(crate) mod batcher;
pub(crate) mod call_wait;
pub(crate) mod handoff;
pub(crate) mod leasing;
pub(crate) mod liveness;
pub(crate) mod notices;
pub(crate) mod queue_floors;
pub(crate) mod submissions;
pub(crate) mod wakeups;

use super::AppConfig;
use crate::db::{Committed, Datastore};
use handoff::Handoffs;
use liveness::Liveness;
use notices::{Announcer, Notices};
use std::sync::Arc;
use submissions::Submissions;
use tokio::sync::Semaphore;

/// The scheduling machinery of one server process.
pub(crate) struct Dispatch {
    /// Sends the wake-ups of committed changes.
    pub(crate) announcer: Arc<Announcer>,
    /// The leases of this process waiting for a call, to which a lone submission hands its own.
    pub(crate) handoffs: Arc<Handoffs>,
    /// Where submitted calls are read and inserted.
    pub(crate) submissions: Submissions,
    /// Heartbeat renewals and device sightings not written yet.
    pub(crate) liveness: Liveness,
    /// Turns at the database for device requests' first read, one per pooled connection: in a
    /// burst (thousands of runners coming back at once) a request waits for its turn holding a
    /// few bytes, not the state of a query waiting for a connection (about 8 KiB).
    pub(crate) device_reads: Semaphore,
}

impl Dispatch {
    /// The machinery of an app over `db`.
    pub(crate) fn new(
        db: &Datastore,
        config: &AppConfig,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Self {
        let announcer = Arc::new(Announcer {
            local: Arc::default(),
            remote: Notices::new(db.pool().clone()),
        });
        let handoffs = Arc::new(Handoffs::new(db.clone(), Arc::clone(&announcer)));
        let submissions = Submissions::new(
            db,
            Arc::clone(&announcer),
            Arc::clone(&handoffs),
            config.submit_batch_max,
            config.credentials_file.clone(),
            metrics,
        );
        Self {
            announcer,
            handoffs,
            submissions,
            liveness: Liveness::new(config.runner_lease_ttl),
            device_reads: Semaphore::new(db.pool().options().get_max_connections() as usize),
        }
    }

    /// Sends the wake-ups of a committed change and gives back what it committed.
    pub(crate) fn sent<T>(&self, committed: Committed<T>) -> T {
        self.announcer.send(committed.wakeups);
        committed.value
    }
}
