//! The invariants every chaos round is judged by, read from the system of record and the
//! fixture's own count file (one line per real execution, with the call's request_id):
//!
//! - every submitted call reaches a terminal state or `unknown` (else it is *lost*);
//! - no request_id is executed twice (else *duplicated*);
//! - no call is labelled more certain than it is (*mislabelled*): `succeeded` means it ran
//!   exactly once; `failed`, `cancelled` and `expired` mean it certainly did not run.
//!   `unknown` (and `resolved`, an unknown settled later) may go either way.

use super::workload::Submitted;
use crate::error::Result;
use serde::Serialize;
use sqlx::PgPool;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How many times each request_id was executed, from the fixture's count file.
pub fn executions(count_file: &Path) -> HashMap<Uuid, usize> {
    let mut seen = HashMap::new();
    for line in std::fs::read_to_string(count_file)
        .unwrap_or_default()
        .lines()
    {
        let id = serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|v| {
                v["request_id"]
                    .as_str()
                    .and_then(|s| Uuid::parse_str(s).ok())
            });
        if let Some(id) = id {
            *seen.entry(id).or_insert(0) += 1;
        }
    }
    seen
}

/// States that end a call (terminal, or `unknown`).
pub fn is_settled(state: &str) -> bool {
    !matches!(state, "queued" | "leased" | "running")
}

/// What one set of calls came to.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Tally {
    /// Calls submitted.
    pub calls: usize,
    /// Succeeded (and executed exactly once).
    pub succeeded: usize,
    /// Certainly not run (`failed`, `cancelled`, `expired`).
    pub not_run: usize,
    /// `unknown`, or `resolved` from unknown.
    pub uncertain: usize,
    /// Never settled, or never stored although the client was answered.
    pub lost: usize,
    /// Executed more than once.
    pub duplicated: usize,
    /// Labelled more certain than they are.
    pub mislabelled: usize,
    /// What the violations were, one line each (capped).
    pub violations: Vec<String>,
}

impl Tally {
    /// Adds another tally to this one.
    pub fn add(&mut self, other: &Tally) {
        self.calls += other.calls;
        self.succeeded += other.succeeded;
        self.not_run += other.not_run;
        self.uncertain += other.uncertain;
        self.lost += other.lost;
        self.duplicated += other.duplicated;
        self.mislabelled += other.mislabelled;
        for v in &other.violations {
            if self.violations.len() < 50 {
                self.violations.push(v.clone());
            }
        }
    }

    /// Whether every invariant held.
    pub fn clean(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.mislabelled == 0
    }

    fn violation(&mut self, text: String) {
        if self.violations.len() < 50 {
            self.violations.push(text);
        }
    }
}

/// Waits (up to `deadline`) for every submitted call to settle, then checks the invariants.
pub async fn check(
    pool: &PgPool,
    count_file: &Path,
    submitted: &[Submitted],
    deadline: Duration,
) -> Result<Tally> {
    let ids: Vec<Uuid> = submitted.iter().map(|s| s.request_id).collect();
    let started = Instant::now();
    let rows: Vec<(Uuid, Uuid, String)> = loop {
        let rows: Vec<(Uuid, Uuid, String)> =
            sqlx::query_as("SELECT request_id, id, state FROM calls WHERE request_id = ANY($1)")
                .bind(&ids)
                .fetch_all(pool)
                .await?;
        if rows.iter().all(|(_, _, state)| is_settled(state)) || started.elapsed() > deadline {
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let executed = executions(count_file);
    let stored: HashMap<Uuid, (Uuid, String)> =
        rows.into_iter().map(|(r, id, s)| (r, (id, s))).collect();
    let mut tally = Tally {
        calls: submitted.len(),
        ..Tally::default()
    };
    for s in submitted {
        let runs = executed.get(&s.request_id).copied().unwrap_or(0);
        if runs > 1 {
            tally.duplicated += 1;
            tally.violation(format!("request {} executed {runs} times", s.request_id));
        }
        let Some((call, state)) = stored.get(&s.request_id) else {
            if s.answered {
                tally.lost += 1;
                tally.violation(format!(
                    "request {} was answered but no call is stored",
                    s.request_id
                ));
            } else if runs > 0 {
                tally.lost += 1;
                tally.violation(format!(
                    "request {} ran without a stored call",
                    s.request_id
                ));
            }
            // Never answered and never stored: the client knows it was not accepted.
            continue;
        };
        match state.as_str() {
            "succeeded" if runs == 1 => tally.succeeded += 1,
            "succeeded" => {
                tally.mislabelled += 1;
                tally.violation(format!("call {call} is succeeded but ran {runs} times"));
            }
            "failed" | "cancelled" | "expired" if runs == 0 => tally.not_run += 1,
            "failed" | "cancelled" | "expired" => {
                tally.mislabelled += 1;
                tally.violation(format!(
                    "call {call} is {state} (certainly not run) but ran {runs} times"
                ));
            }
            "unknown" | "resolved" => tally.uncertain += 1,
            "tool_error" => {
                tally.mislabelled += 1;
                tally.violation(format!(
                    "call {call} is tool_error; the count tool never answers an error"
                ));
            }
            other => {
                tally.lost += 1;
                tally.violation(format!("call {call} is still {other} after {deadline:?}"));
            }
        }
    }
    Ok(tally)
}

/// A timing invariant: how many samples, the worst, the limit and how many exceeded it.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    /// What is timed.
    pub name: String,
    /// The limit, in milliseconds.
    pub limit_ms: f64,
    /// Samples taken.
    pub samples: usize,
    /// The worst sample.
    pub worst_ms: f64,
    /// Samples over the limit.
    pub violations: usize,
}

impl Timing {
    /// An empty timing with `limit_ms`.
    pub fn new(name: &str, limit_ms: f64) -> Timing {
        Timing {
            name: name.to_owned(),
            limit_ms,
            samples: 0,
            worst_ms: 0.0,
            violations: 0,
        }
    }

    /// Records one sample.
    pub fn record(&mut self, ms: f64) {
        self.samples += 1;
        self.worst_ms = self.worst_ms.max(ms);
        if ms > self.limit_ms {
            self.violations += 1;
        }
    }
}
