//! Latency samples and their percentiles (nearest rank), in milliseconds.

use serde::Serialize;
use std::time::Duration;

/// Percentiles of one set of samples, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// How many samples.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Mean.
    pub mean: f64,
    /// Largest sample.
    pub max: f64,
}

impl Summary {
    /// Summarizes `samples` (milliseconds). Empty input gives all zeros.
    pub fn of(samples: &[f64]) -> Summary {
        if samples.is_empty() {
            return Summary::default();
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        Summary {
            count: n,
            p50: percentile(&sorted, 0.50),
            p99: percentile(&sorted, 0.99),
            p999: percentile(&sorted, 0.999),
            mean: sorted.iter().sum::<f64>() / n as f64,
            max: sorted[n - 1],
        }
    }

    /// Each percentile minus `baseline`'s (never below zero): the latency a system adds on top
    /// of a baseline measured in the same run.
    pub fn minus(&self, baseline: &Summary) -> Summary {
        let sub = |a: f64, b: f64| (a - b).max(0.0);
        Summary {
            count: self.count,
            p50: sub(self.p50, baseline.p50),
            p99: sub(self.p99, baseline.p99),
            p999: sub(self.p999, baseline.p999),
            mean: sub(self.mean, baseline.mean),
            max: sub(self.max, baseline.max),
        }
    }
}

/// The nearest-rank percentile `q` (0–1) of sorted samples.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `value` as a multiple of `baseline` (0 when the baseline is 0): a figure against its
/// baseline from the same run.
pub fn ratio(value: f64, baseline: f64) -> f64 {
    if baseline > 0.0 {
        value / baseline
    } else {
        0.0
    }
}

/// A duration in milliseconds.
pub fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<f64> = (1..=1000).map(f64::from).collect();
        let s = Summary::of(&samples);
        assert_eq!(
            (s.count, s.p50, s.p99, s.p999, s.max),
            (1000, 500.0, 990.0, 999.0, 1000.0)
        );
        assert_eq!(Summary::of(&[]).count, 0);
        let one = Summary::of(&[3.0]);
        assert_eq!((one.p50, one.p999), (3.0, 3.0));
    }

    #[test]
    fn added_latency_never_goes_negative() {
        let a = Summary::of(&[1.0, 2.0]);
        let b = Summary::of(&[5.0]);
        assert_eq!(a.minus(&b).p50, 0.0);
        assert_eq!(b.minus(&a).p50, 4.0);
    }
}
