//! The Prometheus text exposition format (0.0.4): families with their HELP and TYPE lines,
//! samples with escaped label values, histograms as cumulative buckets with `_sum` and `_count`.

use super::histogram::Snapshot;
use std::fmt::{Display, Write};

/// The type of a family, as its TYPE line names it.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// Only ever goes up (until the process restarts).
    Counter,
    /// A value now.
    Gauge,
    /// Buckets, sum and count.
    Histogram,
}

/// A scrape's text, written family by family.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// Starts the family `name`: its HELP and TYPE lines. Its samples follow.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample of the family begun last.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{key}=\"");
                escape_into(&mut self.out, value);
                self.out.push('"');
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// The samples of one histogram series of the family `name` begun last: a `_bucket` per
    /// bound and `+Inf`, `_sum` (seconds) and `_count`.
    pub fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        bounds: &[f64],
        snapshot: &Snapshot,
    ) {
        let bucket = format!("{name}_bucket");
        let les = bounds.iter().map(ToString::to_string);
        for (le, count) in les
            .chain(std::iter::once("+Inf".to_owned()))
            .zip(&snapshot.cumulative)
        {
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, count);
        }
        #[allow(clippy::cast_precision_loss)]
        let sum = snapshot.sum_nanos as f64 / 1e9;
        self.sample(&format!("{name}_sum"), labels, sum);
        self.sample(&format!("{name}_count"), labels, snapshot.count());
    }

    /// The text.
    pub fn finish(self) -> String {
        self.out
    }
}

/// A label value escaped as the format wants: backslash, double quote, newline.
fn escape_into(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::histogram::Histogram;
    use std::time::Duration;

    #[test]
    fn a_family_renders_its_help_type_and_escaped_samples() {
        let mut text = Exposition::default();
        text.family("g", Kind::Gauge, "A gauge");
        text.sample("g", &[("a", "x\"y\\\n"), ("b", "z")], 1.5);
        text.sample("g", &[], 2);
        assert_eq!(
            text.finish(),
            "# HELP g A gauge\n# TYPE g gauge\ng{a=\"x\\\"y\\\\\\n\",b=\"z\"} 1.5\ng 2\n"
        );
    }

    #[test]
    fn a_histogram_renders_cumulative_buckets_sum_and_count() {
        const BOUNDS: &[f64] = &[0.5, 2.0];
        let histogram = Histogram::new(BOUNDS);
        histogram.record(Duration::from_millis(250));
        histogram.record(Duration::from_secs(1));
        histogram.record(Duration::from_secs(10));
        let mut text = Exposition::default();
        text.histogram("h_seconds", &[("k", "v")], BOUNDS, &histogram.snapshot());
        assert_eq!(
            text.finish(),
            "h_seconds_bucket{k=\"v\",le=\"0.5\"} 1\n\
             h_seconds_bucket{k=\"v\",le=\"2\"} 2\n\
             h_seconds_bucket{k=\"v\",le=\"+Inf\"} 3\n\
             h_seconds_sum{k=\"v\"} 11.25\n\
             h_seconds_count{k=\"v\"} 3\n"
        );
    }
}
