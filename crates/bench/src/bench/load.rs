//! Load: how many calls the system completes per second when kept busy (closed loop, a fixed
//! number in flight), and what a steady open-loop rate costs in queue wait and latency.
//!
//! Completions are counted from the database (`unsettled` uses the partial indexes, so it
//! stays cheap as `calls` grows); submissions go through the API like any client's.

use crate::cpu::{self, CpuTimes};
use crate::error::{Error, Result};
use crate::pg::{self, CallTimes};
use crate::stack::{Target, submit};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::PgPool;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchyard_testkit::api::Api;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How often the driver counts unsettled calls.
const COUNT_EVERY: Duration = Duration::from_millis(20);

/// What a closed-loop run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Saturation {
    /// Completed calls per second.
    pub calls_per_s: f64,
    /// What the database did per completed call (submission included).
    pub per_call: PerCall,
    /// CPU milliseconds per completed call, by component.
    pub cpu_ms_per_call: CpuTimes,
    /// The heaviest statements per completed call (empty without pg_stat_statements).
    pub statements: Vec<pg::StatementCost>,
}

/// Database work per completed call.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PerCall {
    /// Commits (every autocommit statement counts, reads included).
    pub commits: f64,
    /// WAL flushes (fsyncs).
    pub wal_syncs: f64,
    /// Rows inserted, updated or deleted.
    pub rows_written: f64,
    /// WAL bytes.
    pub wal_bytes: f64,
}

impl PerCall {
    fn of(counters: &pg::Counters, calls: i64) -> PerCall {
        let per = |n: i64| {
            if calls > 0 {
                n as f64 / calls as f64
            } else {
                0.0
            }
        };
        PerCall {
            commits: per(counters.xact_commit),
            wal_syncs: per(counters.wal_syncs),
            rows_written: per(counters.rows_written),
            wal_bytes: per(counters.wal_bytes),
        }
    }
}

/// A closed-loop run: `submitters` clients keep about `window` calls in flight for `warmup`,
/// then the completions of the next `measure` are counted.
#[allow(clippy::too_many_arguments)]
pub async fn saturate(
    api: &Api,
    pool: &PgPool,
    server_pid: Option<u32>,
    target: &Target,
    runner_ref: &str,
    submitters: usize,
    window: i64,
    warmup: Duration,
    measure: Duration,
) -> Result<Saturation> {
    let acked = Arc::new(AtomicI64::new(0));
    let in_flight = Arc::new(AtomicI64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    for _ in 0..submitters {
        let (api, target, acked, in_flight, failures, stop) = (
            api.clone(),
            target.clone(),
            acked.clone(),
            in_flight.clone(),
            failures.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.is_cancelled() {
                if in_flight.load(Ordering::Relaxed) >= window {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                }
                in_flight.fetch_add(1, Ordering::Relaxed);
                match submit(&api, &target.call("noop", json!({}))).await {
                    Ok(_) => {
                        acked.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(_) => {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    // completed = calls acknowledged before the count − calls still unsettled.
    let completed = || async {
        let before = acked.load(Ordering::Relaxed);
        let unsettled = pg::unsettled(pool, runner_ref).await?;
        let now = acked.load(Ordering::Relaxed);
        in_flight.store(unsettled + (now - before), Ordering::Relaxed);
        Ok::<i64, Error>(before - unsettled)
    };
    let started = Instant::now();
    let mut first: Option<(Instant, i64, pg::Counters, CpuTimes)> = None;
    let result = loop {
        let done = completed().await?;
        let elapsed = started.elapsed();
        match &first {
            None if elapsed >= warmup => {
                // Statistics of the table the warm-up grew, as autovacuum keeps them on a
                // database in use; plans cached before are made again.
                pg::analyze(pool).await?;
                pg::statements_reset(pool).await;
                first = Some((
                    Instant::now(),
                    done,
                    pg::counters(pool).await?,
                    cpu::sample(server_pid),
                ));
            }
            Some((at, base, counters, cpu_before)) if at.elapsed() >= measure => {
                let calls = done - base;
                let work = pg::counters(pool).await?.since(counters);
                let cpu = cpu::sample(server_pid)
                    .since(cpu_before)
                    .per_ms(calls as f64);
                break Saturation {
                    calls_per_s: calls as f64 / at.elapsed().as_secs_f64(),
                    per_call: PerCall::of(&work, calls),
                    cpu_ms_per_call: cpu,
                    statements: pg::statements_per_call(pool, calls, 25)
                        .await
                        .unwrap_or_default(),
                };
            }
            _ => {}
        }
        tokio::time::sleep(COUNT_EVERY).await;
    };
    stop.cancel();
    for task in tasks {
        let _ = task.await;
    }
    wait_drained(pool, runner_ref, Duration::from_secs(60)).await?;
    let failed = failures.load(Ordering::Relaxed);
    if failed > 0 {
        return Err(Error::Setup(format!(
            "{failed} submissions failed under load"
        )));
    }
    Ok(result)
}

/// Waits until runner `runner_ref` has no unsettled call left.
pub async fn wait_drained(pool: &PgPool, runner_ref: &str, deadline: Duration) -> Result<()> {
    let started = Instant::now();
    loop {
        let left = pg::unsettled(pool, runner_ref).await?;
        if left == 0 {
            return Ok(());
        }
        if started.elapsed() > deadline {
            return Err(Error::Setup(format!(
                "{left} calls of {runner_ref} still unsettled after {deadline:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One call of an open-loop run: when the client began submitting it, and its server times.
#[derive(Clone, Debug)]
pub struct Timed {
    /// The client's clock when it began the submission.
    pub submitted: DateTime<Utc>,
    /// The client's clock when the submission's answer arrived (after its commit).
    pub answered: DateTime<Utc>,
    /// The server's timestamps.
    pub times: CallTimes,
}

impl Timed {
    /// Queue wait: submitted (inserted) → leased, in milliseconds.
    pub fn lease_wait_ms(&self) -> Option<f64> {
        self.times
            .leased_at
            .map(|l| millis(l - self.times.created_at))
    }

    /// Submit → answered (client), in milliseconds: the submission's own time, its commit
    /// included. A queue wait this long began before the call could be seen.
    pub fn submit_ms(&self) -> f64 {
        millis(self.answered - self.submitted)
    }

    /// Submit (client) → settled (server), in milliseconds.
    pub fn end_to_end_ms(&self) -> Option<f64> {
        self.times.finished_at.map(|f| millis(f - self.submitted))
    }
}

fn millis(delta: chrono::TimeDelta) -> f64 {
    delta.num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0
}

/// Submits noop calls at `rate` per second for `duration` (open loop: the schedule does not
/// wait for answers; at most `max_outstanding` submissions are on the wire at once), waits for
/// them to settle and returns their times.
pub async fn open_loop(
    api: &Api,
    pool: &PgPool,
    target: &Target,
    runner_ref: &str,
    rate: f64,
    duration: Duration,
) -> Result<Vec<Timed>> {
    let max_outstanding = 512;
    let gate = Arc::new(Semaphore::new(max_outstanding));
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut tasks = Vec::new();
    while started.elapsed() < duration {
        ticker.tick().await;
        let permit = gate
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| Error::Setup(e.to_string()))?;
        let (api, target) = (api.clone(), target.clone());
        tasks.push(tokio::spawn(async move {
            let submitted = Utc::now();
            let answer = submit(&api, &target.call("noop", json!({}))).await;
            let answered = Utc::now();
            drop(permit);
            answer.map(|(_, call)| (call.id.0, (submitted, answered)))
        }));
    }
    let mut submitted: HashMap<Uuid, (DateTime<Utc>, DateTime<Utc>)> =
        HashMap::with_capacity(tasks.len());
    for task in tasks {
        let (id, at) = task
            .await
            .map_err(|e| Error::Setup(format!("a submission task failed: {e}")))??;
        submitted.insert(id, at);
    }
    wait_drained(pool, runner_ref, Duration::from_secs(120)).await?;
    let ids: Vec<Uuid> = submitted.keys().copied().collect();
    let mut timed = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(10_000) {
        for times in pg::call_times(pool, chunk).await? {
            let (submitted, answered) = submitted[&times.id];
            timed.push(Timed {
                submitted,
                answered,
                times,
            });
        }
    }
    Ok(timed)
}

/// The calls that did not succeed, by state.
pub fn not_succeeded(timed: &[Timed]) -> HashMap<String, usize> {
    let mut states = HashMap::new();
    for t in timed.iter().filter(|t| t.times.state != "succeeded") {
        *states.entry(t.times.state.clone()).or_insert(0) += 1;
    }
    states
}
