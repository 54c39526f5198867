//! Where each runner's lease scan starts. Every state change of a call leaves a dead entry in
//! the `calls_queued` index, and while some transaction holds the xmin horizon back VACUUM can
//! remove none of them: a lease that scans the runner's queue from its oldest entry walks
//! every call leased since the horizon stopped, and slows down with each one. So the process
//! remembers, per runner, the submission time below which it knows no call of that runner is
//! queued (its *floor*), and the lease scans from there.
//!
//! The floor rises to the newest call a lease took. It falls when something may have queued
//! a call below it: every new call is announced with its submission time (a transaction that
//! began earlier can commit later), and an announcement without one (a requeue, or the
//! listener reconnecting after notifications may have been lost) sends the runner's floor, or
//! every runner's, back to the beginning. An announcement that arrives while a lease is
//! looking is applied after it, so a lease never raises the floor over a call it could not
//! see. Announcements are fed here before the waiters are woken, so a lease that a wake-up
//! starts always scans from low enough.
//!
//! One case no announcement covers: a lease skips rows another transaction has locked, and
//! if that one fails (a lease of the same runner on another replica whose connection died)
//! they stay queued below the floor. So every [`FULL_SCAN_EVERY`] a lease scans from the
//! beginning anyway; that bounds how long such a call waits, and the dead entries it walks
//! cost one scan a minute instead of one per lease.

use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a lease scans a runner's whole queue whatever the floor says.
pub(crate) const FULL_SCAN_EVERY: Duration = Duration::from_secs(60);

/// Where a lease scan may start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Floor {
    /// From the runner's oldest queued call.
    Start,
    /// From calls submitted at or after this time.
    From(DateTime<Utc>),
}

impl Floor {
    /// The submission time the scan starts at (`None`: the beginning).
    pub(crate) fn since(self) -> Option<DateTime<Utc>> {
        match self {
            Floor::Start => None,
            Floor::From(at) => Some(at),
        }
    }
}

/// One runner's floor, and what was announced while a lease of this process was looking.
#[derive(Debug)]
struct RunnerFloor {
    floor: Floor,
    /// Whether a lease of this process is looking now.
    leasing: bool,
    /// The lowest floor announced while it looks (`None`: nothing announced).
    lowered: Option<Floor>,
    /// When a lease last scanned from the beginning.
    full_scan_at: Instant,
}

impl RunnerFloor {
    fn lower(&mut self, to: Floor) {
        self.floor = self.floor.min(to);
        if self.leasing {
            self.lowered = Some(self.lowered.map_or(to, |l| l.min(to)));
        }
    }
}

/// The floors of the runners this process leases for.
#[derive(Debug, Default)]
pub(crate) struct QueueFloors {
    runners: Mutex<HashMap<String, RunnerFloor>>,
}

/// A lease looking from a floor; give it back with [`QueueFloors::finish`].
#[derive(Debug)]
#[must_use]
pub(crate) struct Scan {
    /// Where the lease scans from.
    pub(crate) floor: Floor,
    /// Whether this scan may move the floor (false for a second lease of the same runner
    /// looking at the same time, which scans from the beginning).
    owns: bool,
}

impl QueueFloors {
    fn runners(&self) -> std::sync::MutexGuard<'_, HashMap<String, RunnerFloor>> {
        // A panic elsewhere cannot leave a floor too high: every update is one assignment.
        self.runners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A lease of `runner_ref` begins: where it scans from.
    pub(crate) fn begin(&self, runner_ref: &str) -> Scan {
        let now = Instant::now();
        let mut runners = self.runners();
        let runner = runners.entry(runner_ref.to_owned()).or_insert(RunnerFloor {
            floor: Floor::Start,
            leasing: false,
            lowered: None,
            full_scan_at: now,
        });
        if runner.leasing {
            return Scan {
                floor: Floor::Start,
                owns: false,
            };
        }
        if now.duration_since(runner.full_scan_at) >= FULL_SCAN_EVERY {
            runner.floor = Floor::Start;
        }
        if runner.floor == Floor::Start {
            runner.full_scan_at = now;
        }
        runner.leasing = true;
        runner.lowered = None;
        Scan {
            floor: runner.floor,
            owns: true,
        }
    }

    /// The lease of `scan` ended; `newest` is the submission time of the newest call it took
    /// (`None` when it took none or failed). No queued call it could see is older: it took
    /// the oldest ones first.
    pub(crate) fn finish(&self, runner_ref: &str, scan: Scan, newest: Option<DateTime<Utc>>) {
        if !scan.owns {
            return;
        }
        let mut runners = self.runners();
        let Some(runner) = runners.get_mut(runner_ref) else {
            return;
        };
        runner.leasing = false;
        let risen = newest.map_or(runner.floor, |at| runner.floor.max(Floor::From(at)));
        runner.floor = runner.lowered.take().map_or(risen, |l| risen.min(l));
    }

    /// A call of `runner_ref` submitted at `created_at` was queued.
    pub(crate) fn queued(&self, runner_ref: &str, created_at: DateTime<Utc>) {
        if let Some(runner) = self.runners().get_mut(runner_ref) {
            runner.lower(Floor::From(created_at));
        }
    }

    /// Calls of `runner_ref` may have been queued at any time: scan from the beginning.
    pub(crate) fn reset(&self, runner_ref: &str) {
        if let Some(runner) = self.runners().get_mut(runner_ref) {
            runner.lower(Floor::Start);
        }
    }

    /// Calls of any runner may have been queued at any time.
    pub(crate) fn reset_all(&self) {
        for runner in self.runners().values_mut() {
            runner.lower(Floor::Start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).unwrap()
    }

    #[test]
    fn a_new_runner_scans_from_the_start_and_rises_to_the_newest_call_taken() {
        let floors = QueueFloors::default();
        let scan = floors.begin("central");
        assert_eq!(scan.floor, Floor::Start);
        floors.finish("central", scan, Some(at(10)));
        let scan = floors.begin("central");
        assert_eq!(scan.floor, Floor::From(at(10)));
        // Taking nothing leaves it where it was.
        floors.finish("central", scan, None);
        assert_eq!(floors.begin("central").floor, Floor::From(at(10)));
    }

    #[test]
    fn a_call_announced_below_the_floor_lowers_it() {
        let floors = QueueFloors::default();
        let scan = floors.begin("central");
        floors.finish("central", scan, Some(at(10)));
        floors.queued("central", at(7));
        floors.queued("central", at(12));
        assert_eq!(floors.begin("central").floor, Floor::From(at(7)));
    }

    #[test]
    fn an_announcement_during_a_lease_is_applied_after_it() {
        let floors = QueueFloors::default();
        let scan = floors.begin("central");
        floors.finish("central", scan, Some(at(10)));
        let scan = floors.begin("central");
        // Committed after the lease's snapshot, submitted before what it takes.
        floors.queued("central", at(11));
        floors.finish("central", scan, Some(at(20)));
        assert_eq!(floors.begin("central").floor, Floor::From(at(11)));
    }

    #[test]
    fn a_reset_during_a_lease_wins_over_what_it_took() {
        let floors = QueueFloors::default();
        let scan = floors.begin("device:a");
        floors.reset_all();
        floors.finish("device:a", scan, Some(at(20)));
        assert_eq!(floors.begin("device:a").floor, Floor::Start);
    }

    #[test]
    fn a_second_lease_at_once_scans_everything_and_moves_nothing() {
        let floors = QueueFloors::default();
        let first = floors.begin("central");
        floors.finish("central", first, Some(at(10)));
        let first = floors.begin("central");
        let second = floors.begin("central");
        assert_eq!(second.floor, Floor::Start);
        floors.finish("central", second, Some(at(30)));
        floors.finish("central", first, Some(at(15)));
        assert_eq!(floors.begin("central").floor, Floor::From(at(15)));
    }

    #[test]
    fn a_reset_of_one_runner_leaves_the_others() {
        let floors = QueueFloors::default();
        for runner in ["device:a", "device:b"] {
            let scan = floors.begin(runner);
            floors.finish(runner, scan, Some(at(10)));
        }
        floors.reset("device:a");
        assert_eq!(floors.begin("device:a").floor, Floor::Start);
        assert_eq!(floors.begin("device:b").floor, Floor::From(at(10)));
    }
}
