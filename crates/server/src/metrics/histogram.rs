//! A histogram of durations with fixed buckets: recording one is two atomic additions, with no
//! allocation, no lock and nothing to drain, so its memory never grows between scrapes.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Buckets of the call path's durations, in seconds: 5 ms to the longest timeout (an hour).
pub const CALL_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
    1800.0, 3600.0,
];

/// Buckets of approval waits, in seconds: a person answers in seconds to a day.
pub const APPROVAL_BUCKETS: &[f64] = &[
    1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 14_400.0, 43_200.0, 86_400.0,
];

/// Durations counted into the buckets of `bounds` (upper bounds in seconds, ascending), and
/// their sum.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One count per bound, then the count above the last (`+Inf`); not cumulative.
    counts: Box<[AtomicU64]>,
    /// The sum of the durations, in nanoseconds (585 years fit).
    sum_nanos: AtomicU64,
}

/// What a histogram held when it was read: cumulative counts, as the text format wants them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Observations at most each bound, then all of them (`+Inf`).
    pub cumulative: Vec<u64>,
    /// Their sum, in nanoseconds.
    pub sum_nanos: u64,
}

impl Snapshot {
    /// How many observations.
    pub fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }

    /// Adds `other`'s observations (of the same buckets) to these: two series that render
    /// with the same labels are one.
    pub fn add(&mut self, other: &Snapshot) {
        if self.cumulative.is_empty() {
            self.cumulative = vec![0; other.cumulative.len()];
        }
        for (mine, theirs) in self.cumulative.iter_mut().zip(&other.cumulative) {
            *mine += theirs;
        }
        self.sum_nanos = self.sum_nanos.saturating_add(other.sum_nanos);
    }
}

impl Histogram {
    /// An empty histogram over `bounds`.
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_nanos: AtomicU64::new(0),
        }
    }

    /// Counts `value` in the first bucket whose bound is at least it.
    pub fn record(&self, value: Duration) {
        let seconds = value.as_secs_f64();
        let bucket = self.bounds.partition_point(|bound| *bound < seconds);
        self.counts[bucket].fetch_add(1, Relaxed);
        let nanos = u64::try_from(value.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Relaxed);
    }

    /// The counts now. Concurrent recordings may be seen in the counts before the sum or the
    /// other way round; the count is the buckets', so `+Inf` and `_count` always agree.
    pub fn snapshot(&self) -> Snapshot {
        let mut total = 0;
        let cumulative = self
            .counts
            .iter()
            .map(|count| {
                total += count.load(Relaxed);
                total
            })
            .collect();
        Snapshot {
            cumulative,
            sum_nanos: self.sum_nanos.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_counts_in_the_first_bucket_whose_bound_is_at_least_it() {
        let histogram = Histogram::new(&[1.0, 5.0]);
        histogram.record(Duration::from_millis(500));
        histogram.record(Duration::from_secs(1));
        histogram.record(Duration::from_secs(3));
        histogram.record(Duration::from_secs(60));
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.cumulative, vec![2, 3, 4]);
        assert_eq!(snapshot.count(), 4);
        assert_eq!(snapshot.sum_nanos, 64_500_000_000);
    }

    #[test]
    fn snapshots_add_up() {
        let histogram = Histogram::new(&[1.0]);
        histogram.record(Duration::from_secs(2));
        let mut total = Snapshot::default();
        total.add(&histogram.snapshot());
        total.add(&histogram.snapshot());
        assert_eq!(total.cumulative, vec![0, 2]);
        assert_eq!(total.sum_nanos, 4_000_000_000);
    }
}
