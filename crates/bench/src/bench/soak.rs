//! The soak: a steady open-loop rate for a long time, in three equal phases — normal, with
//! another transaction holding the xmin horizon (so VACUUM can remove nothing that dies
//! meanwhile), and after it ends. A queue that keeps its finished rows in the hot path slows
//! down in the second phase; the figures say whether this one does.

use super::load::{Timed, open_loop};
use crate::error::Result;
use crate::pg::{self, StatementTime, TableHealth, XminHolder};
use crate::stack::{Target, note};
use crate::stats::{Summary, ratio};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use std::time::Duration;
use switchyard_testkit::api::Api;

/// One phase of the soak.
#[derive(Clone, Debug, Serialize)]
pub struct Phase {
    /// `normal`, `xmin_held` or `after`.
    pub name: &'static str,
    /// Calls completed per second within the phase.
    pub throughput_calls_per_s: f64,
    /// Submit (client) → settled (server) of the calls submitted in the phase.
    pub end_to_end_ms: Summary,
    /// Queue wait of those calls.
    pub lease_wait_ms: Summary,
    /// Submit → answered (client) of those calls: their inserts and commits.
    pub submit_ms: Summary,
    /// The `calls` table at the end of the phase.
    pub calls_table: TableHealth,
    /// The statements that took the database the most time in the phase (empty without
    /// pg_stat_statements): what grows when the horizon is held.
    pub statements: Vec<StatementTime>,
    /// The call that waited longest for its lease: a tail made of one stall shows here.
    pub longest_lease_wait: Option<LongestWait>,
}

/// The call of a phase that waited longest for its lease.
#[derive(Clone, Debug, Serialize)]
pub struct LongestWait {
    /// Seconds into the phase it was submitted.
    pub submitted_after_s: f64,
    /// Its wait, in milliseconds.
    pub lease_wait_ms: f64,
    /// Its submission's own time (submit → answered), in milliseconds: a wait no longer than
    /// this was spent before the call could be seen (its insert or commit), not in the queue.
    pub submit_ms: f64,
}

/// What the control task saw at the end of one phase.
#[derive(Default)]
struct PhaseEnd {
    calls_table: TableHealth,
    statements: Vec<StatementTime>,
}

/// The statements shown per phase.
const TOP_STATEMENTS: i64 = 8;

/// Ends a phase: the table's health and the phase's statement profile, then a fresh profile
/// and fresh statistics for the next phase.
async fn phase_end(pool: &PgPool) -> Result<PhaseEnd> {
    let end = PhaseEnd {
        calls_table: pg::calls_health(pool).await?,
        statements: pg::statements_top(pool, TOP_STATEMENTS).await,
    };
    phase_start(pool).await?;
    Ok(end)
}

/// Starts a phase on current statistics, as autovacuum keeps them on a database in use (its
/// first pass over a fast-growing table can be a minute away, and until then plans made for a
/// small table scan it whole), with a fresh statement profile.
async fn phase_start(pool: &PgPool) -> Result<()> {
    pg::analyze(pool).await?;
    pg::statements_reset(pool).await;
    Ok(())
}

/// The soak's result.
#[derive(Clone, Debug, Serialize)]
pub struct Soak {
    /// The rate asked for (500/s).
    pub requested_rate_calls_per_s: f64,
    /// The rate offered: the requested one, or 60% of the measured closed-loop throughput when
    /// that is lower (an overloaded queue grows whatever the horizon does).
    pub rate_calls_per_s: f64,
    /// Total length.
    pub duration_s: f64,
    /// The phases, in order.
    pub phases: Vec<Phase>,
    /// Throughput with the horizon held ÷ before (1.0 = no drop).
    pub throughput_ratio: f64,
    /// End-to-end p99 with the horizon held ÷ before.
    pub p99_ratio: f64,
    /// Calls that did not succeed.
    pub not_succeeded: usize,
}

/// Runs the soak at `rate` for `duration` (three equal phases).
pub async fn soak(
    api: &Api,
    pool: &PgPool,
    database_url: &str,
    target: &Target,
    runner_ref: &str,
    rate: f64,
    duration: Duration,
) -> Result<Soak> {
    let phase = duration / 3;
    phase_start(pool).await?;
    let start = Utc::now();
    let load = open_loop(api, pool, target, runner_ref, rate, duration);
    let control = async {
        let mut ends = Vec::new();
        tokio::time::sleep(phase).await;
        ends.push(phase_end(pool).await?);
        note("soak: holding the xmin horizon");
        let holder = XminHolder::begin(database_url).await?;
        tokio::time::sleep(phase).await;
        ends.push(phase_end(pool).await?);
        holder.release().await?;
        note("soak: horizon released");
        tokio::time::sleep(phase).await;
        ends.push(phase_end(pool).await?);
        Ok::<_, crate::error::Error>(ends)
    };
    let (timed, ends) = tokio::join!(load, control);
    let (timed, mut ends) = (timed?, ends?);
    let names = ["normal", "xmin_held", "after"];
    let mut phases = Vec::new();
    for (i, name) in names.into_iter().enumerate() {
        let from = start + chrono::Duration::from_std(phase * i as u32).unwrap_or_default();
        let to = from + chrono::Duration::from_std(phase).unwrap_or_default();
        phases.push(summarize(
            name,
            &timed,
            from,
            to,
            phase,
            ends.get_mut(i).map(std::mem::take).unwrap_or_default(),
        ));
    }
    Ok(Soak {
        requested_rate_calls_per_s: rate,
        rate_calls_per_s: rate,
        duration_s: duration.as_secs_f64(),
        throughput_ratio: ratio(
            phases[1].throughput_calls_per_s,
            phases[0].throughput_calls_per_s,
        ),
        p99_ratio: ratio(phases[1].end_to_end_ms.p99, phases[0].end_to_end_ms.p99),
        not_succeeded: timed
            .iter()
            .filter(|t| t.times.state != "succeeded")
            .count(),
        phases,
    })
}

fn summarize(
    name: &'static str,
    timed: &[Timed],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    length: Duration,
    end: PhaseEnd,
) -> Phase {
    let finished = timed
        .iter()
        .filter(|t| t.times.finished_at.is_some_and(|f| f >= from && f < to))
        .count();
    let submitted: Vec<&Timed> = timed
        .iter()
        .filter(|t| t.submitted >= from && t.submitted < to)
        .collect();
    let e2e: Vec<f64> = submitted.iter().filter_map(|t| t.end_to_end_ms()).collect();
    let wait: Vec<f64> = submitted.iter().filter_map(|t| t.lease_wait_ms()).collect();
    let submit: Vec<f64> = submitted.iter().map(|t| t.submit_ms()).collect();
    let longest_lease_wait = submitted
        .iter()
        .filter_map(|t| Some((t, t.lease_wait_ms()?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(t, wait)| LongestWait {
            submitted_after_s: (t.submitted - from).num_milliseconds() as f64 / 1000.0,
            lease_wait_ms: wait,
            submit_ms: t.submit_ms(),
        });
    Phase {
        name,
        throughput_calls_per_s: finished as f64 / length.as_secs_f64(),
        end_to_end_ms: Summary::of(&e2e),
        lease_wait_ms: Summary::of(&wait),
        submit_ms: Summary::of(&submit),
        calls_table: end.calls_table,
        statements: end.statements,
        longest_lease_wait,
    }
}
