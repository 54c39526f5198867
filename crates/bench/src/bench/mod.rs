//! The benchmark: every figure measured side by side with its baseline in the same run, on a
//! stack the driver builds itself (see [`crate::stack`]).

pub mod idle;
pub mod latency;
pub mod load;
pub mod mcp;
pub mod mcp_report;
pub mod replay;
pub mod report;
pub mod soak;

use crate::direct::DirectFixture;
use crate::error::Result;
use crate::floor::{DurableFloor, FloorParts};
use crate::pg;
use crate::procs::rss_bytes;
use crate::rng::Rng;
use crate::stack::{Stack, Target, note};
use crate::stats::Summary;
use mcp::McpCaller;
use mcp_report::McpFigures;
use report::{CallCost, Check, Placement, Results, Steady, Throughput};
use serde::Serialize;
use std::path::Path;
use std::time::Duration;
use switchyard_testkit::bins::Binaries;
use switchyard_testkit::runner::RunnerProcess;

/// The share of the measured closed-loop throughput the soak offers when the requested rate is
/// more than the system sustains.
const SUSTAINABLE: f64 = 0.6;

/// How much of the benchmark to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Everything at full size (about 15 minutes with the default 10-minute soak).
    Full,
    /// A reduced run, under two minutes.
    Quick,
    /// A few seconds: checks that everything runs and the JSON is written, measures nothing
    /// worth quoting.
    Smoke,
}

impl Mode {
    /// The mode's name in the results.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::Quick => "quick",
            Mode::Smoke => "smoke",
        }
    }
}

/// The sizes of one run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Which mode.
    pub mode: Mode,
    /// Unmeasured calls before each latency series.
    pub warmup: usize,
    /// Measured calls per latency series (baseline, central, device).
    pub latency_samples: usize,
    /// Sequential duplicate submissions.
    pub replay_samples: usize,
    /// Identical submissions sent at once.
    pub concurrent_duplicates: usize,
    /// Closed-loop warmup and measurement.
    pub throughput_warmup: Duration,
    /// Closed-loop measurement window.
    pub throughput_measure: Duration,
    /// Concurrent submitting clients in the closed loop.
    pub submitters: usize,
    /// Calls kept in flight in the closed loop.
    pub window: i64,
    /// The steady open-loop rate.
    pub steady_rate: f64,
    /// How long the steady rate is offered.
    pub steady_duration: Duration,
    /// Idle runners.
    pub idle_count: usize,
    /// The measured idle window.
    pub idle_window: Duration,
    /// How long an idle runner's long-poll waits.
    pub idle_long_poll: Duration,
    /// How often an idle runner heartbeats (a third of the 30 s lease, like the real runner).
    pub heartbeat_every: Duration,
    /// The soak's rate.
    pub soak_rate: f64,
    /// The soak's length (three phases).
    pub soak_duration: Duration,
    /// Tools granted to the agent whose `tools/list` through `/mcp` is timed.
    pub mcp_list_tools: usize,
    /// Timed `tools/list` requests.
    pub mcp_list_samples: usize,
}

impl Plan {
    /// The plan of `mode`; `soak` overrides the soak's length.
    pub fn for_mode(mode: Mode, soak: Option<Duration>) -> Plan {
        let s = Duration::from_secs;
        let mut plan = match mode {
            Mode::Full => Plan {
                mode,
                warmup: 200,
                latency_samples: 2000,
                replay_samples: 2000,
                concurrent_duplicates: 64,
                throughput_warmup: s(5),
                throughput_measure: s(30),
                submitters: 32,
                window: 256,
                steady_rate: 500.0,
                steady_duration: s(30),
                idle_count: 10_000,
                idle_window: s(30),
                idle_long_poll: s(25),
                heartbeat_every: s(10),
                soak_rate: 500.0,
                soak_duration: s(600),
                mcp_list_tools: 500,
                mcp_list_samples: 100,
            },
            Mode::Quick => Plan {
                mode,
                warmup: 50,
                latency_samples: 300,
                replay_samples: 300,
                concurrent_duplicates: 64,
                throughput_warmup: s(2),
                throughput_measure: s(8),
                submitters: 32,
                window: 256,
                steady_rate: 500.0,
                steady_duration: s(8),
                idle_count: 2_000,
                idle_window: s(12),
                idle_long_poll: s(5),
                heartbeat_every: s(10),
                soak_rate: 500.0,
                soak_duration: s(24),
                mcp_list_tools: 500,
                mcp_list_samples: 40,
            },
            Mode::Smoke => Plan {
                mode,
                warmup: 3,
                latency_samples: 10,
                replay_samples: 10,
                concurrent_duplicates: 64,
                throughput_warmup: Duration::from_millis(200),
                throughput_measure: Duration::from_millis(500),
                submitters: 4,
                window: 32,
                steady_rate: 100.0,
                steady_duration: Duration::from_millis(500),
                idle_count: 10,
                idle_window: Duration::from_millis(1200),
                idle_long_poll: Duration::from_millis(500),
                heartbeat_every: s(1),
                soak_rate: 100.0,
                soak_duration: Duration::from_millis(1500),
                mcp_list_tools: 20,
                mcp_list_samples: 3,
            },
        };
        if let Some(soak) = soak {
            plan.soak_duration = soak;
        }
        plan
    }
}

/// Measures idle scale alone with `count` runners (the plan's window and cadences).
pub async fn idle_only(
    plan: &Plan,
    count: usize,
    bins: Binaries,
    database_url: &str,
    dir: &Path,
) -> Result<idle::Idle> {
    let mut stack = Stack::start(bins, database_url, dir, &[]).await?;
    let idle = idle::idle_runners(
        &stack,
        count,
        plan.idle_window,
        plan.idle_long_poll,
        plan.heartbeat_every,
    )
    .await;
    stack.stop_server(0, Duration::from_secs(10)).await;
    idle
}

/// The server's settings that make every write of a call a statement of its own: the
/// submission's insert, the central runner's start ack and its completion.
const PER_CALL_COMMITS: [(&str, &str); 2] = [
    ("SWITCHYARD_CENTRAL_BATCH_MAX", "1"),
    ("SWITCHYARD_SUBMIT_BATCH_MAX", "1"),
];

/// Closed-loop throughput with per-call commits, then with the central runner's batching (the
/// server's default, which `stack` is left with), each on a freshly started server.
async fn throughput(plan: &Plan, stack: &mut Stack) -> Result<Both<load::Saturation>> {
    note("throughput: closed loop, central placement, every write its own commit");
    stack.restart_server_with(0, &PER_CALL_COMMITS).await?;
    let per_call = saturate(plan, stack).await?;
    note("throughput: closed loop, central placement, inserts, start acks and completions batched");
    stack.restart_server_with(0, &[]).await?;
    let batched = saturate(plan, stack).await?;
    Ok(Both { per_call, batched })
}

/// One closed-loop run on replica 0 with central calls.
async fn saturate(plan: &Plan, stack: &Stack) -> Result<load::Saturation> {
    load::saturate(
        &stack.api,
        &stack.pool,
        stack.server_pid(0),
        &stack.central,
        "central",
        plan.submitters,
        plan.window,
        plan.throughput_warmup,
        plan.throughput_measure,
    )
    .await
}

/// A measurement with per-call commits and with batching.
#[derive(Clone, Debug, Serialize)]
pub struct Both<T> {
    /// Every start ack and completion a statement of its own.
    pub per_call: T,
    /// Start acks and completions ready at once written together.
    pub batched: T,
}

/// Measures closed-loop throughput alone, after a warm-up and ANALYZE, with its cost per call,
/// batched and per call.
pub async fn throughput_only(
    plan: &Plan,
    bins: Binaries,
    database_url: &str,
    dir: &Path,
) -> Result<Both<load::Saturation>> {
    let mut stack = Stack::start(bins, database_url, dir, &[]).await?;
    let both = async {
        latency::end_to_end(&stack.api, &stack.central, plan.warmup, 0).await?;
        pg::analyze(&stack.pool).await?;
        throughput(plan, &mut stack).await
    }
    .await;
    stack.stop_server(0, Duration::from_secs(10)).await;
    both
}

/// The direct call and the end-to-end times of each placement, measured in turn.
struct Latencies {
    /// Direct rmcp calls to a warm fixture.
    baseline: Summary,
    /// Central calls through `/mcp` by an agent, request → result.
    mcp: Summary,
    /// The protocol version of the `/mcp` session.
    mcp_protocol_version: String,
    /// A device call's durable writes alone, in sequence.
    floor: Summary,
    /// What each of those writes took.
    floor_parts: FloorParts,
    /// Central calls, submit to outcome.
    central: Summary,
    /// Device calls, submit to outcome.
    device: Summary,
    /// The device's runner, still running.
    runner: RunnerProcess,
    /// Device calls through the `--compare-runner` binary, with that runner, still running.
    compared: Option<(Summary, RunnerProcess)>,
}

/// One series of calls measured in turn with the others.
enum Series<'a> {
    /// Direct rmcp calls.
    Direct(&'a DirectFixture),
    /// A device call's durable writes with nothing between them.
    Floor(&'a mut DurableFloor),
    /// Calls submitted to the server for this placement.
    Placed(&'a Target),
    /// Central calls through `/mcp`.
    Mcp(&'a McpCaller),
}

impl Series<'_> {
    /// One call of the series, in milliseconds.
    async fn sample(&mut self, stack: &Stack) -> Result<f64> {
        match self {
            Series::Direct(direct) => direct.noop().await,
            Series::Floor(floor) => floor.sample().await,
            Series::Placed(target) => latency::one_call(&stack.api, target).await,
            Series::Mcp(caller) => caller.noop().await,
        }
    }
}

/// Pairs a device and starts its runner (and, given `compare_runner`, a second device whose
/// runner is that binary), opens an agent's `/mcp` session, warms every series up, analyzes,
/// then measures the direct call, the durable floor, each placement and the central call
/// through `/mcp` in turn, one sample of each per round in a shuffled order:
/// drift in a noisy machine's speed then shifts every series alike instead of whichever ran
/// during it, and the placements' figures differ by what their paths do.
async fn latencies(
    plan: &Plan,
    stack: &Stack,
    bins: &Binaries,
    dir: &Path,
    compare_runner: Option<&Path>,
) -> Result<Latencies> {
    note("pairing a device and starting switchyard-mcp-runner");
    let device = stack.pair_device("laptop", &stack.url(0)).await?;
    let runner = stack
        .start_runner(
            &device,
            &dir.join("laptop").join("outbox"),
            &dir.join("runner.log"),
            &[],
        )
        .await?;
    let compared = match compare_runner {
        Some(binary) => {
            note(&format!(
                "pairing a second device, its runner {}",
                binary.display()
            ));
            let device = stack.pair_device("compared", &stack.url(0)).await?;
            let runner = stack
                .start_runner_binary(
                    binary,
                    &device,
                    &dir.join("compared").join("outbox"),
                    &dir.join("compared-runner.log"),
                    &[],
                )
                .await?;
            Some((device, runner))
        }
        None => None,
    };
    let direct = DirectFixture::start(&bins.fixture).await?;
    let mut floor = DurableFloor::start(&stack.database_url, &dir.join("floor-outbox")).await?;
    note("opening an agent's session with /mcp");
    let mcp = McpCaller::start(stack).await?;
    let mcp_protocol_version = mcp.protocol_version();
    let mut series = vec![
        Series::Direct(&direct),
        Series::Floor(&mut floor),
        Series::Placed(&stack.central),
        Series::Placed(&device.target),
        Series::Mcp(&mcp),
    ];
    if let Some((device, _)) = &compared {
        series.push(Series::Placed(&device.target));
    }

    // Some calls first, then statistics, so that every measured plan is made on real ones.
    note("warming up: calls of every series, then ANALYZE");
    for one in &mut series {
        for _ in 0..plan.warmup {
            one.sample(stack).await?;
        }
    }
    pg::analyze(&stack.pool).await?;

    note("added latency: direct calls, the durable floor, central, device and /mcp calls in turn");
    let mut samples = vec![Vec::with_capacity(plan.latency_samples); series.len()];
    let mut order: Vec<usize> = (0..series.len()).collect();
    let mut rng = Rng::new(ORDER_SEED);
    for _ in 0..plan.latency_samples {
        // Each round in a new order, so that every series follows each of the others about as
        // often: what a call leaves behind (its runner's next lease request, its upload's
        // answer) weighs on the next one.
        shuffle(&mut order, &mut rng);
        for &at in &order {
            samples[at].push(series[at].sample(stack).await?);
        }
    }
    drop(series);
    direct.close().await;
    mcp.close().await;
    let floor_parts = floor.close(plan.latency_samples).await?;
    let mut summaries = samples.iter().map(|s| Summary::of(s));
    let mut next = || summaries.next().unwrap_or_default();
    let (baseline, floor, central, on_device, through_mcp) =
        (next(), next(), next(), next(), next());
    let compared = compared.map(|(_, runner)| (next(), runner));
    Ok(Latencies {
        baseline,
        mcp: through_mcp,
        mcp_protocol_version,
        floor,
        floor_parts,
        central,
        device: on_device,
        runner,
        compared,
    })
}

/// The seed of the latency rounds' orders: the same orders in every run.
const ORDER_SEED: u64 = 7;

/// Puts `items` in a random order (Fisher–Yates).
fn shuffle(items: &mut [usize], rng: &mut Rng) {
    for i in (1..items.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// What `--latency-only` measures.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyOnly {
    /// The direct call.
    pub baseline_direct_ms: Summary,
    /// A device call's durable writes alone, in sequence.
    pub floor_ms: Summary,
    /// What each of those writes took.
    pub floor_parts_ms: FloorParts,
    /// Added to it by each placement.
    pub added_latency_ms: Placement,
    /// Added by device placement through the `--compare-runner` binary, measured in turn
    /// with the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compared_runner_added_latency_ms: Option<Summary>,
    /// The `/mcp` figures: its central call measured in turn with the others, and
    /// `tools/list` for an agent granted many tools.
    #[serde(flatten)]
    pub mcp: McpFigures,
    /// The `/mcp` target against them.
    pub targets: Vec<Check>,
}

impl Latencies {
    /// The `/mcp` figures of these rounds, with `tools_list`.
    fn mcp_figures(&self, tools_list: mcp::ToolsList) -> McpFigures {
        McpFigures::new(
            self.mcp_protocol_version.clone(),
            self.mcp,
            &self.central,
            &self.baseline,
            &self.floor,
            tools_list,
        )
    }
}

/// Added latency alone, as the full run measures it (the `/mcp` call and `tools/list`
/// included); with `compare_runner`, also through a second device running that binary.
pub async fn latency_only(
    plan: &Plan,
    bins: Binaries,
    database_url: &str,
    dir: &Path,
    compare_runner: Option<&Path>,
) -> Result<LatencyOnly> {
    let mut stack = Stack::start(bins.clone(), database_url, dir, &[]).await?;
    let measured = async {
        let l = latencies(plan, &stack, &bins, dir, compare_runner).await?;
        let mcp = l.mcp_figures(mcp::tools_list(plan, &stack).await?);
        Ok(LatencyOnly {
            targets: mcp.checks(),
            mcp,
            added_latency_ms: Placement {
                central: l.central.minus(&l.baseline),
                device: l.device.minus(&l.baseline),
            },
            compared_runner_added_latency_ms: l
                .compared
                .as_ref()
                .map(|(summary, _)| summary.minus(&l.baseline)),
            baseline_direct_ms: l.baseline,
            floor_ms: l.floor,
            floor_parts_ms: l.floor_parts,
        })
    }
    .await;
    stack.stop_server(0, Duration::from_secs(10)).await;
    measured
}

/// Runs the soak alone at the plan's rate and length, after a warm-up and ANALYZE.
pub async fn soak_only(
    plan: &Plan,
    bins: Binaries,
    database_url: &str,
    dir: &Path,
) -> Result<soak::Soak> {
    let mut stack = Stack::start(bins, database_url, dir, &[]).await?;
    let soak = async {
        latency::end_to_end(&stack.api, &stack.central, plan.warmup, 0).await?;
        pg::analyze(&stack.pool).await?;
        soak::soak(
            &stack.api,
            &stack.pool,
            &stack.database_url,
            &stack.central,
            "central",
            plan.soak_rate,
            plan.soak_duration,
        )
        .await
    }
    .await;
    stack.stop_server(0, Duration::from_secs(10)).await;
    soak
}

/// Runs the whole benchmark on a fresh database at `database_url`, with binaries from `bins`,
/// scratch files under `dir`.
pub async fn run(plan: &Plan, bins: Binaries, database_url: &str, dir: &Path) -> Result<Results> {
    let started_at = chrono::Utc::now();
    let machine = report::Machine::this();
    note("starting the server on a fresh database");
    let mut stack = Stack::start(bins.clone(), database_url, dir, &[]).await?;
    let durability = pg::durability(&stack.pool).await?;
    if !durability.is_durable() {
        note(
            "WARNING: PostgreSQL is not running with fsync=on and synchronous_commit=on; the figures are not durable ones",
        );
    }

    let Latencies {
        baseline,
        mcp: through_mcp,
        mcp_protocol_version,
        floor,
        floor_parts,
        central,
        device: on_device,
        mut runner,
        compared: _,
    } = latencies(plan, &stack, &bins, dir, None).await?;

    note("idempotent replay");
    let replay = replay::replay(
        &stack.api,
        &stack.pool,
        &stack.central,
        plan.replay_samples,
        plan.concurrent_duplicates,
    )
    .await?;

    let saturation = throughput(plan, &mut stack).await?;

    note(&format!(
        "steady load: {} calls/s open loop",
        plan.steady_rate
    ));
    let timed = load::open_loop(
        &stack.api,
        &stack.pool,
        &stack.central,
        "central",
        plan.steady_rate,
        plan.steady_duration,
    )
    .await?;
    let e2e: Vec<f64> = timed
        .iter()
        .filter_map(load::Timed::end_to_end_ms)
        .collect();
    let wait: Vec<f64> = timed
        .iter()
        .filter_map(load::Timed::lease_wait_ms)
        .collect();
    let end_to_end = Summary::of(&e2e);
    let steady = Steady {
        rate_calls_per_s: plan.steady_rate,
        duration_s: plan.steady_duration.as_secs_f64(),
        calls: timed.len(),
        lease_wait_ms: Summary::of(&wait),
        added_latency_ms: end_to_end.minus(&baseline),
        end_to_end_ms: end_to_end,
        not_succeeded: load::not_succeeded(&timed),
    };

    let companion_rss_bytes = runner.pid().and_then(rss_bytes).unwrap_or(0);
    note(&format!("idle scale: {} runners", plan.idle_count));
    let mut idle = idle::idle_runners(
        &stack,
        plan.idle_count,
        plan.idle_window,
        plan.idle_long_poll,
        plan.heartbeat_every,
    )
    .await?;
    idle.count = plan.idle_count;

    // The soak asks whether a held xmin horizon slows the queue down, which only a rate the
    // system sustains can show: above its capacity the backlog grows whatever the horizon.
    let soak_rate = plan
        .soak_rate
        .min((saturation.batched.calls_per_s * SUSTAINABLE).floor())
        .max(10.0);
    note(&format!(
        "soak: {:?} at {soak_rate} calls/s",
        plan.soak_duration
    ));
    let mut soak = soak::soak(
        &stack.api,
        &stack.pool,
        &stack.database_url,
        &stack.central,
        "central",
        soak_rate,
        plan.soak_duration,
    )
    .await?;
    soak.requested_rate_calls_per_s = plan.soak_rate;

    // Last, so that the connections it places weigh on no other figure.
    let tools_list = mcp::tools_list(plan, &stack).await?;
    let mcp = McpFigures::new(
        mcp_protocol_version,
        through_mcp,
        &central,
        &baseline,
        &floor,
        tools_list,
    );

    runner.signal(nix::sys::signal::Signal::SIGTERM)?;
    let _ = runner.wait_exit(Duration::from_secs(30)).await;
    for index in 0..stack.servers.len() {
        stack.stop_server(index, Duration::from_secs(10)).await;
    }

    Ok(Results {
        mode: plan.mode.name(),
        started_at,
        machine,
        postgres: durability,
        baseline_direct_ms: baseline,
        floor_ms: floor,
        floor_parts_ms: floor_parts,
        end_to_end_ms: Placement {
            central,
            device: on_device,
        },
        added_latency_ms: Placement {
            central: central.minus(&baseline),
            device: on_device.minus(&baseline),
        },
        throughput_calls_per_s: Throughput {
            per_call: saturation.per_call.calls_per_s,
            batched: Some(saturation.batched.calls_per_s),
        },
        cost_per_call: CallCost {
            per_call: report::Cost::of(&saturation.per_call),
            batched: Some(report::Cost::of(&saturation.batched)),
        },
        steady_load: steady,
        replay_ms: replay.duplicate_ms,
        replay,
        idle_runners: report::IdleReport {
            idle,
            companion_rss_bytes,
        },
        soak,
        mcp,
        load_average_at_end: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_follows_every_other_in_the_shuffled_rounds() {
        let mut order: Vec<usize> = (0..5).collect();
        let mut rng = Rng::new(ORDER_SEED);
        let mut follows = [[0usize; 5]; 5];
        for _ in 0..2000 {
            shuffle(&mut order, &mut rng);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![0, 1, 2, 3, 4], "a round runs each series once");
            for pair in order.windows(2) {
                follows[pair[1]][pair[0]] += 1;
            }
        }
        // 2,000 rounds of 4 pairs over 20 ordered pairs: about 400 each.
        for (after, counts) in follows.iter().enumerate() {
            for (before, &n) in counts.iter().enumerate() {
                if after != before {
                    assert!(
                        (300..=500).contains(&n),
                        "{after} after {before}: {n} times"
                    );
                }
            }
        }
    }
}
