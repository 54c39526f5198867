//! The results of a run: the JSON written to `target/bench/results.json` and the table printed
//! for people, each figure beside its baseline and its target.

use super::idle::Idle;
use super::load::PerCall;
use super::mcp_report::McpFigures;
use super::replay::Replay;
use super::soak::Soak;
use crate::cpu::CpuTimes;
use crate::floor::FloorParts;
use crate::pg::Durability;
use crate::pg::StatementCost;
use crate::stats::{Summary, ratio};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write;

/// A figure per placement.
#[derive(Clone, Debug, Serialize)]
pub struct Placement {
    /// Central placement (the runner inside the server).
    pub central: Summary,
    /// Device placement (`switchyard-mcp-runner`).
    pub device: Summary,
}

/// Completed calls per second, kept busy.
#[derive(Clone, Debug, Serialize)]
pub struct Throughput {
    /// Every start and completion its own commit.
    pub per_call: f64,
    /// Starts and completions grouped into shared commits (several calls per statement).
    pub batched: Option<f64>,
}

/// What one completed call cost, in each throughput configuration.
#[derive(Clone, Debug, Serialize)]
pub struct CallCost {
    /// With per-call commits.
    pub per_call: Cost,
    /// With batching, when measured.
    pub batched: Option<Cost>,
}

/// The cost of one completed call while the system was kept busy.
#[derive(Clone, Debug, Serialize)]
pub struct Cost {
    /// Database work.
    pub db: PerCall,
    /// CPU milliseconds, by component.
    pub cpu_ms: CpuTimes,
    /// The heaviest statements, per completed call (from pg_stat_statements, when loaded).
    pub statements: Vec<StatementCost>,
}

impl Cost {
    /// What a closed-loop run measured per call.
    pub fn of(saturation: &super::load::Saturation) -> Self {
        Self {
            db: saturation.per_call,
            cpu_ms: saturation.cpu_ms_per_call,
            statements: saturation.statements.clone(),
        }
    }
}

/// The steady open-loop load.
#[derive(Clone, Debug, Serialize)]
pub struct Steady {
    /// Offered rate.
    pub rate_calls_per_s: f64,
    /// How long.
    pub duration_s: f64,
    /// Calls submitted.
    pub calls: usize,
    /// Submitted → leased (server clock).
    pub lease_wait_ms: Summary,
    /// Submit (client) → settled (server), minus the direct baseline.
    pub added_latency_ms: Summary,
    /// Submit (client) → settled (server).
    pub end_to_end_ms: Summary,
    /// Calls that did not succeed, by state.
    pub not_succeeded: HashMap<String, usize>,
}

/// Idle scale plus the companion's own footprint.
#[derive(Clone, Debug, Serialize)]
pub struct IdleReport {
    /// The simulated idle runners.
    #[serde(flatten)]
    pub idle: Idle,
    /// VmRSS of an idle `switchyard-mcp-runner` with one warm MCP session.
    pub companion_rss_bytes: u64,
}

/// The machine the run was on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPUs online.
    pub cpus: usize,
    /// CPU model.
    pub cpu_model: String,
    /// Memory, in bytes.
    pub memory_bytes: u64,
    /// Kernel release.
    pub kernel: String,
    /// /proc/loadavg when the run began: other work on the machine skews every figure.
    pub load_average_at_start: String,
}

impl Machine {
    /// This machine, from /proc.
    pub fn this() -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .and_then(|r| r.split_once(':'))
                    .map(|(_, m)| m.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        let memory_bytes = read("/proc/meminfo")
            .lines()
            .find_map(|l| {
                l.strip_prefix("MemTotal:")
                    .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
            })
            .unwrap_or(0)
            * 1024;
        Machine {
            cpus: std::thread::available_parallelism()
                .map(usize::from)
                .unwrap_or(1),
            cpu_model,
            memory_bytes,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            load_average_at_start: read("/proc/loadavg").trim().to_owned(),
        }
    }
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Results {
    /// `full`, `quick` or `smoke`.
    pub mode: &'static str,
    /// When the run began.
    pub started_at: DateTime<Utc>,
    /// Where it ran.
    pub machine: Machine,
    /// PostgreSQL's durability settings during the run.
    pub postgres: Durability,
    /// Direct rmcp call to a warm fixture over stdio.
    pub baseline_direct_ms: Summary,
    /// The durable floor: a device call's four PostgreSQL commits and two synced outbox
    /// commits, one after another with nothing between them (`crate::floor`).
    pub floor_ms: Summary,
    /// What each of the floor's writes took.
    pub floor_parts_ms: FloorParts,
    /// Submit → result visible to the caller, one call at a time.
    pub end_to_end_ms: Placement,
    /// `end_to_end_ms` minus the baseline, percentile by percentile.
    pub added_latency_ms: Placement,
    /// Closed-loop throughput.
    pub throughput_calls_per_s: Throughput,
    /// Database work and CPU per completed call during the throughput runs.
    pub cost_per_call: CallCost,
    /// The steady open-loop load.
    pub steady_load: Steady,
    /// Answering a duplicate request_id.
    pub replay_ms: Summary,
    /// Replay details (concurrent duplicates).
    pub replay: Replay,
    /// Idle scale.
    pub idle_runners: IdleReport,
    /// The soak.
    pub soak: Soak,
    /// `/mcp`: its call beside the REST API's and the direct call, `tools/list` with many
    /// tools (keys `mcp_…`).
    #[serde(flatten)]
    pub mcp: McpFigures,
    /// /proc/loadavg when the run ended.
    pub load_average_at_end: String,
}

/// One target and whether the run met it.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// What is measured.
    pub figure: String,
    /// The target.
    pub target: String,
    /// The measurement.
    pub measured: String,
    /// Met?
    pub met: bool,
}

impl Results {
    /// Every target of issues #7 and #44 against this run's figures.
    pub fn checks(&self) -> Vec<Check> {
        let mut checks = Vec::new();
        let mut check = |figure: &str, target: &str, measured: String, met: bool| {
            checks.push(Check {
                figure: figure.into(),
                target: target.into(),
                measured,
                met,
            });
        };
        for (name, added) in [
            ("central", &self.added_latency_ms.central),
            ("device", &self.added_latency_ms.device),
        ] {
            check(
                &format!("added latency p50, {name}"),
                "≤ 3 ms",
                format!("{:.2} ms", added.p50),
                added.p50 <= 3.0,
            );
            check(
                &format!("added latency p99, {name}"),
                "≤ 10 ms",
                format!("{:.2} ms", added.p99),
                added.p99 <= 10.0,
            );
        }
        let t = &self.throughput_calls_per_s;
        check(
            "throughput, per-call commits",
            "≥ 1,000 calls/s",
            format!("{:.0} calls/s", t.per_call),
            t.per_call >= 1000.0,
        );
        match t.batched {
            Some(b) => check(
                "throughput, batched",
                "≥ 2,500 calls/s",
                format!("{b:.0} calls/s"),
                b >= 2500.0,
            ),
            None => check(
                "throughput, batched",
                "≥ 2,500 calls/s",
                "not measured".into(),
                false,
            ),
        }
        let s = &self.steady_load;
        check(
            &format!("lease wait p99 at {:.0} calls/s", s.rate_calls_per_s),
            "≤ 5 ms",
            format!("{:.2} ms", s.lease_wait_ms.p99),
            s.lease_wait_ms.p99 <= 5.0,
        );
        check(
            &format!("added latency p99 at {:.0} calls/s", s.rate_calls_per_s),
            "≤ 25 ms",
            format!("{:.2} ms", s.added_latency_ms.p99),
            s.added_latency_ms.p99 <= 25.0,
        );
        check(
            "replay p50",
            "≤ 1 ms",
            format!("{:.2} ms", self.replay_ms.p50),
            self.replay_ms.p50 <= 1.0,
        );
        let r = &self.replay;
        check(
            &format!("{} concurrent duplicates", r.concurrent_duplicates),
            "exactly one call",
            format!(
                "{} call(s), {} distinct answer(s)",
                r.calls_created, r.distinct_answers
            ),
            r.calls_created == 1 && r.distinct_answers == 1,
        );
        let i = &self.idle_runners.idle;
        let mb = i.server_rss_bytes as f64 / 1e6;
        check(
            &format!("server RSS, {} idle runners", i.count),
            "≤ 150 MB at 10,000",
            format!("{mb:.1} MB, {} failed requests", i.failed_requests),
            mb <= 150.0 && i.count >= 10_000 && i.failed_requests == 0,
        );
        check(
            "idle polls' writes; heartbeats batched",
            "0 rows per poll; < 0.1 WAL flush per heartbeat",
            format!(
                "{:.2} rows/poll besides heartbeats ({:.2} with them); {:.4} flushes/heartbeat",
                i.rows_written_per_poll_besides_liveness,
                i.rows_written_per_poll,
                i.wal_flushes_per_heartbeat
            ),
            i.rows_written_per_poll_besides_liveness == 0.0 && i.wal_flushes_per_heartbeat < 0.1,
        );
        let k = &self.soak;
        let at = format!(" at {:.0}/s", k.rate_calls_per_s);
        check(
            &format!("soak throughput with xmin held{at}"),
            "drop ≤ 10%",
            format!("{:.1}% of before", k.throughput_ratio * 100.0),
            k.throughput_ratio >= 0.9,
        );
        check(
            &format!("soak p99 with xmin held{at}"),
            "≤ 2× before",
            format!("{:.2}×", k.p99_ratio),
            k.p99_ratio <= 2.0 && k.p99_ratio > 0.0,
        );
        checks.extend(self.mcp.checks());
        checks
    }

    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let row = |out: &mut String, name: &str, s: &Summary| {
            let _ = writeln!(
                out,
                "  {name:<34} {:>9.3} {:>9.3} {:>9.3} {:>7}",
                s.p50, s.p99, s.p999, s.count
            );
        };
        let _ = writeln!(
            out,
            "Switchyard benchmark ({} mode) on {} CPUs ({}), PostgreSQL {} fsync={} synchronous_commit={}\n  load average at start: {}; at end: {}",
            self.mode,
            self.machine.cpus,
            self.machine.cpu_model,
            self.postgres.server_version,
            self.postgres.fsync,
            self.postgres.synchronous_commit,
            self.machine.load_average_at_start,
            self.load_average_at_end
        );
        let _ = writeln!(
            out,
            "\n  {:<34} {:>9} {:>9} {:>9} {:>7}",
            "latency (ms)", "p50", "p99", "p99.9", "n"
        );
        row(
            &mut out,
            "direct rmcp call (baseline)",
            &self.baseline_direct_ms,
        );
        row(
            &mut out,
            "durable floor (4 commits, 2 syncs)",
            &self.floor_ms,
        );
        row(
            &mut out,
            "  one PostgreSQL commit",
            &self.floor_parts_ms.postgres_commit,
        );
        row(
            &mut out,
            "  one synced outbox commit",
            &self.floor_parts_ms.outbox_sync,
        );
        row(
            &mut out,
            "central: submit → visible",
            &self.end_to_end_ms.central,
        );
        row(&mut out, "central: added", &self.added_latency_ms.central);
        row(
            &mut out,
            "device: submit → visible",
            &self.end_to_end_ms.device,
        );
        row(&mut out, "device: added", &self.added_latency_ms.device);
        let _ = writeln!(
            out,
            "  added p50 over the durable floor's p50: central {:.2}×, device {:.2}×",
            ratio(self.added_latency_ms.central.p50, self.floor_ms.p50),
            ratio(self.added_latency_ms.device.p50, self.floor_ms.p50)
        );
        self.mcp.write_rows(&mut out, row);
        row(
            &mut out,
            "replay of a duplicate request_id",
            &self.replay_ms,
        );
        let s = &self.steady_load;
        row(
            &mut out,
            &format!("{:.0}/s: lease wait", s.rate_calls_per_s),
            &s.lease_wait_ms,
        );
        row(
            &mut out,
            &format!("{:.0}/s: added (submit → settled)", s.rate_calls_per_s),
            &s.added_latency_ms,
        );
        let t = &self.throughput_calls_per_s;
        write_throughput(
            &mut out,
            "per-call commits",
            Some(t.per_call),
            Some(&self.cost_per_call.per_call),
        );
        write_throughput(
            &mut out,
            "batched",
            t.batched,
            self.cost_per_call.batched.as_ref(),
        );
        let i = &self.idle_runners;
        let _ = writeln!(
            out,
            "\n  idle: {} runners (one runner channel each), server RSS {:.1} MB (before pairing {:.1} MB, paired {:.1} MB), {:.0} commits/s, {:.0} rows written/s, {:.2} rows/poll; companion RSS {:.1} MB",
            i.idle.count,
            i.idle.server_rss_bytes as f64 / 1e6,
            i.idle.server_rss_before_bytes as f64 / 1e6,
            i.idle.server_rss_paired_bytes as f64 / 1e6,
            i.idle.commits_per_s,
            i.idle.rows_written_per_s,
            i.idle.rows_written_per_poll,
            i.companion_rss_bytes as f64 / 1e6
        );
        let _ = writeln!(
            out,
            "\n  soak at {:.0}/s (asked {:.0}/s) for {:.0} s:",
            self.soak.rate_calls_per_s, self.soak.requested_rate_calls_per_s, self.soak.duration_s
        );
        for p in &self.soak.phases {
            let _ = writeln!(
                out,
                "    {:<10} {:>7.0} calls/s  p50 {:>7.2} ms  p99 {:>7.2} ms  lease wait p99 {:>6.2} ms  submit p99 {:>6.2} ms  dead rows {}",
                p.name,
                p.throughput_calls_per_s,
                p.end_to_end_ms.p50,
                p.end_to_end_ms.p99,
                p.lease_wait_ms.p99,
                p.submit_ms.p99,
                p.calls_table.dead_rows
            );
            if let Some(w) = &p.longest_lease_wait {
                let _ = writeln!(
                    out,
                    "               longest lease wait {:.2} ms at {:.1} s (its submission took {:.2} ms)",
                    w.lease_wait_ms, w.submitted_after_s, w.submit_ms
                );
            }
            for st in p.statements.iter().take(2) {
                let _ = writeln!(
                    out,
                    "               {:>8.3} ms × {:<8} {:.80}",
                    st.mean_ms, st.calls, st.query
                );
            }
        }
        let _ = writeln!(
            out,
            "\n  {:<46} {:<32} {:<28} met",
            "target", "goal", "measured"
        );
        for c in self.checks() {
            let _ = writeln!(
                out,
                "  {:<46} {:<32} {:<28} {}",
                c.figure,
                c.target,
                c.measured,
                if c.met { "yes" } else { "NO" }
            );
        }
        out
    }
}

/// One throughput line of the table and what a call cost in it.
fn write_throughput(out: &mut String, mode: &str, calls_per_s: Option<f64>, cost: Option<&Cost>) {
    let (Some(calls_per_s), Some(c)) = (calls_per_s, cost) else {
        let _ = writeln!(out, "\n  throughput, {mode:<22} not measured");
        return;
    };
    let _ = writeln!(
        out,
        "\n  throughput, {mode:<22} {calls_per_s:>9.0} calls/s   ({:.1} commits, {:.2} WAL flushes, {:.1} rows written per call)",
        c.db.commits, c.db.wal_syncs, c.db.rows_written
    );
    let _ = writeln!(
        out,
        "    CPU ms per call: server {:.2}, PostgreSQL {:.2}, MCP server {:.2}, device runners {:.2}, driver (the clients) {:.2}",
        c.cpu_ms.server,
        c.cpu_ms.postgres,
        c.cpu_ms.mcp_servers,
        c.cpu_ms.device_runners,
        c.cpu_ms.driver
    );
    for st in c.statements.iter().take(12) {
        let _ = writeln!(
            out,
            "      {:>5.2}×  {:>6.3} ms  {}",
            st.calls_per_call,
            st.ms_per_call,
            st.query.chars().take(100).collect::<String>()
        );
    }
}
