//! The chaos cases: set up a stack for a case, run its rounds (load, one fault at a random
//! moment, recovery, invariants) and report what happened.

use super::invariants::{self, Tally, Timing};
use super::pgctl::PgControl;
use super::proxy::Proxy;
use super::workload::{self, Submitted};
use crate::error::{Error, Result};
use crate::rng::Rng;
use crate::stack::{Device, Stack, Target, fresh_database, note, read_call, submit};
use chrono::{DateTime, Utc};
use nix::sys::signal::Signal;
use serde::Serialize;
use serde_json::json;
use sqlx::PgPool;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use switchyard_mcp_runner::outbox::Outbox;
use switchyard_protocol::runner::Completion;
use switchyard_testkit::api::Api;
use switchyard_testkit::bins::Binaries;
use switchyard_testkit::runner::RunnerProcess;
use uuid::Uuid;

/// The runner lease used by chaos stacks: short, so that lost leases expire quickly.
pub const LEASE_TTL: Duration = Duration::from_secs(3);
/// How long a round's calls may take to settle after the fault was healed.
const SETTLE_DEADLINE: Duration = Duration::from_secs(90);
/// The size of the tmpfs holding the outbox in `disk-full`.
const OUTBOX_FS_BYTES: u64 = 4 * 1024 * 1024;

/// One fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Case {
    /// SIGKILL the device runner mid-stream.
    RunnerKill,
    /// Restart PostgreSQL under load.
    PgRestart,
    /// Terminate PostgreSQL backends serving long-poll listeners.
    PgBackendKill,
    /// Restart one of two server replicas under load.
    ReplicaRestart,
    /// Reset every connection between the device runner and the server.
    ProxyCut,
    /// Stall the connections between the device runner and the server.
    ProxyStall,
    /// Fill the filesystem holding the outbox.
    DiskFull,
}

impl Case {
    /// Every case, in the order the suite runs them.
    pub const ALL: [Case; 7] = [
        Case::RunnerKill,
        Case::PgBackendKill,
        Case::ProxyCut,
        Case::ProxyStall,
        Case::ReplicaRestart,
        Case::DiskFull,
        Case::PgRestart,
    ];

    /// The case's name.
    pub fn name(self) -> &'static str {
        match self {
            Case::RunnerKill => "runner-kill",
            Case::PgRestart => "pg-restart",
            Case::PgBackendKill => "pg-backend-kill",
            Case::ReplicaRestart => "replica-restart",
            Case::ProxyCut => "proxy-cut",
            Case::ProxyStall => "proxy-stall",
            Case::DiskFull => "disk-full",
        }
    }

    fn two_replicas(self) -> bool {
        self == Case::ReplicaRestart
    }

    fn behind_proxy(self) -> bool {
        matches!(self, Case::ProxyCut | Case::ProxyStall)
    }
}

/// How to run the suite.
#[derive(Clone, Debug)]
pub struct ChaosConfig {
    /// A PostgreSQL URL whose role may create databases (each case gets a fresh one).
    pub admin_url: String,
    /// The binaries under test.
    pub bins: Binaries,
    /// Scratch directory (logs, outboxes, count files).
    pub work_dir: PathBuf,
    /// Rounds per case (one fault each).
    pub rounds: usize,
    /// Calls submitted per round and stream.
    pub calls_per_round: usize,
    /// Their rate, per second.
    pub rate: f64,
    /// The random seed (print it; pass it again to repeat a run).
    pub seed: u64,
    /// The cluster to restart, for `pg-restart`.
    pub pg: Option<PgControl>,
}

/// What one case found.
#[derive(Clone, Debug, Serialize)]
pub struct CaseReport {
    /// The case.
    pub case: &'static str,
    /// Faults injected.
    pub faults: usize,
    /// What the calls came to.
    pub tally: Tally,
    /// Outbox entries (recorded receipts, or starts without a receipt) whose call the server
    /// still shows unsettled after the runner's clean stop: reports that never arrived.
    pub receipts_lost: usize,
    /// Outbox entries left unacknowledged after the clean stop whose call the server did
    /// settle (e.g. uploaded from memory while the disk was full): not lost, offered again at
    /// the next start.
    pub outbox_left: usize,
    /// Timing invariants.
    pub timings: Vec<Timing>,
    /// Why the case did not run, if it did not.
    pub skipped: Option<String>,
    /// How long the case took.
    pub seconds: f64,
}

impl CaseReport {
    /// Whether every invariant held (a skipped case is not clean).
    pub fn clean(&self) -> bool {
        self.skipped.is_none()
            && self.tally.clean()
            && self.receipts_lost == 0
            && self.timings.iter().all(|t| t.violations == 0)
    }
}

/// The running system of one case.
struct Env {
    stack: Stack,
    device: Device,
    runner: Option<RunnerProcess>,
    proxy: Option<Proxy>,
    outbox: PathBuf,
    runner_log: PathBuf,
    /// The tmpfs mounted for the outbox, unmounted at the end.
    mount: Option<PathBuf>,
}

impl Env {
    async fn start_runner(&mut self) -> Result<DateTime<Utc>> {
        let runner = self
            .stack
            .start_runner(
                &self.device,
                &self.outbox,
                &self.runner_log,
                &[("SWITCHYARD_LOG", "info")],
            )
            .await?;
        self.runner = Some(runner);
        Ok(Utc::now())
    }

    /// Stops the runner gracefully and looks at what its outbox still holds: returns (entries
    /// whose call the server still shows unsettled, entries left whose call is settled).
    async fn stop_runner_and_count_unreported(&mut self) -> Result<(usize, usize)> {
        if let Some(mut runner) = self.runner.take() {
            runner.signal(Signal::SIGTERM)?;
            if runner.wait_exit(Duration::from_secs(60)).await.is_err() {
                runner.kill();
            }
        }
        let outbox = Outbox::open(&self.outbox, self.device.device_id)
            .map_err(|e| Error::Setup(format!("opening the outbox: {e}")))?;
        let mut calls: Vec<Uuid> = outbox
            .unacknowledged()
            .map_err(|e| Error::Setup(e.to_string()))?
            .iter()
            .map(|r| r.call_id.0)
            .collect();
        calls.extend(
            outbox
                .unfinished()
                .map_err(|e| Error::Setup(e.to_string()))?
                .iter()
                .map(|s| s.call_id.0),
        );
        let states = states_of(&self.stack.pool, &calls).await?;
        let lost = states
            .iter()
            .filter(|(_, state, _)| !invariants::is_settled(state))
            .count();
        Ok((lost, calls.len() - lost))
    }

    fn apis(&self) -> Vec<Api> {
        (0..self.stack.servers.len())
            .map(|i| self.stack.api.with_url(&self.stack.url(i)))
            .collect()
    }
}

/// Runs `case` for `config.rounds` rounds on a fresh stack.
pub async fn run_case(case: Case, config: &ChaosConfig, rng: &mut Rng) -> Result<CaseReport> {
    let started = Instant::now();
    let mut report = CaseReport {
        case: case.name(),
        faults: 0,
        tally: Tally::default(),
        receipts_lost: 0,
        outbox_left: 0,
        timings: Vec::new(),
        skipped: None,
        seconds: 0.0,
    };
    if case == Case::PgRestart && config.pg.is_none() {
        report.skipped =
            Some("needs the cluster's data directory (--pg-data) to restart it".into());
        return Ok(report);
    }
    let mut env = match set_up(case, config).await {
        Ok(env) => env,
        Err(Error::Setup(reason)) if reason.starts_with("mount:") => {
            report.skipped = Some(reason);
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    let result = run_rounds(case, config, rng, &mut env, &mut report).await;
    let unreported = env.stop_runner_and_count_unreported().await;
    for index in 0..env.stack.servers.len() {
        env.stack.stop_server(index, Duration::from_secs(10)).await;
    }
    if let Some(mount) = env.mount.take() {
        unmount(&mount).await;
    }
    result?;
    (report.receipts_lost, report.outbox_left) = unreported?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

async fn set_up(case: Case, config: &ChaosConfig) -> Result<Env> {
    let name = case.name().replace('-', "_");
    let database_url = fresh_database(&config.admin_url, &format!("chaos_{name}")).await?;
    let dir = std::path::absolute(config.work_dir.join(case.name()))
        .map_err(Error::io("resolving the work directory"))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let ttl = LEASE_TTL.as_secs().to_string();
    let env = [
        ("SWITCHYARD_LEASE_TTL_SECONDS", ttl.as_str()),
        ("SWITCHYARD_LOG", "info"),
    ];
    let mut stack = Stack::start(config.bins.clone(), &database_url, &dir, &env).await?;
    if case.two_replicas() {
        stack.add_replica().await?;
    }
    // The device runner talks to the last replica (the second one when there are two), through
    // the proxy when the case cuts its network.
    let home = stack.servers.len() - 1;
    let proxy = if case.behind_proxy() {
        Some(Proxy::start(stack.addrs[home]).await?)
    } else {
        None
    };
    let server_url = proxy
        .as_ref()
        .map(Proxy::url)
        .unwrap_or_else(|| stack.url(home));
    let device = stack.pair_device("edge", &server_url).await?;
    let mount = if case == Case::DiskFull {
        let mount = dir.join("outbox-fs");
        mount_tmpfs(&mount).await?;
        Some(mount)
    } else {
        None
    };
    let outbox = mount.as_ref().unwrap_or(&dir).join("outbox");
    let mut env = Env {
        stack,
        device,
        runner: None,
        proxy,
        outbox,
        runner_log: dir.join("runner.log"),
        mount,
    };
    env.start_runner().await?;
    Ok(env)
}

async fn run_rounds(
    case: Case,
    config: &ChaosConfig,
    rng: &mut Rng,
    env: &mut Env,
    report: &mut CaseReport,
) -> Result<()> {
    let mut unknown_in = Timing::new(
        "dispatched calls of a lost runner turn unknown (from the kill)",
        UNKNOWN_WITHIN.as_secs_f64() * 1000.0,
    );
    let mut released_in = Timing::new(
        "undispatched calls re-leased (from lease expiry or runner return)",
        1_000.0,
    );
    let mut receipts_in = Timing::new(
        "a returning runner's receipts settle its unknown calls",
        1_000.0,
    );
    let mut takeover_in = Timing::new(
        "central calls leased again after the holder died (from lease expiry)",
        1_000.0,
    );
    let mut woken_in = Timing::new(
        "device call after its listener's backend was killed (end to end)",
        5_000.0,
    );
    let stream_time = Duration::from_secs_f64(config.calls_per_round as f64 / config.rate);
    for round in 0..config.rounds {
        let streams = streams(case, env);
        let loads: Vec<_> = streams
            .iter()
            .map(|(apis, target)| {
                workload::stream(
                    apis.clone(),
                    target.clone(),
                    config.rate,
                    config.calls_per_round,
                )
            })
            .collect();
        let at = rng.between(
            Duration::from_millis(100),
            stream_time.mul_f64(0.8).max(Duration::from_millis(150)),
        );
        tokio::time::sleep(at).await;
        match case {
            Case::RunnerKill => {
                runner_kill(
                    env,
                    rng,
                    &mut unknown_in,
                    &mut released_in,
                    &mut receipts_in,
                )
                .await?;
            }
            Case::PgRestart => {
                let immediate = rng.chance(0.5);
                if let Some(pg) = &config.pg {
                    pg.restart(immediate).await?;
                }
            }
            Case::PgBackendKill => {
                kill_backends(&env.stack.pool, rng.chance(0.5)).await?;
            }
            Case::ReplicaRestart => replica_restart(env, rng, &mut takeover_in).await?,
            Case::ProxyCut => {
                let proxy = env
                    .proxy
                    .as_ref()
                    .ok_or_else(|| Error::Setup("no proxy".into()))?;
                for _ in 0..=rng.below(3) {
                    proxy.cut();
                    tokio::time::sleep(
                        rng.between(Duration::from_millis(10), Duration::from_millis(400)),
                    )
                    .await;
                }
            }
            Case::ProxyStall => {
                let proxy = env
                    .proxy
                    .as_ref()
                    .ok_or_else(|| Error::Setup("no proxy".into()))?;
                proxy.stall(true);
                tokio::time::sleep(rng.between(Duration::from_millis(300), LEASE_TTL * 2)).await;
                proxy.stall(false);
            }
            Case::DiskFull => {
                let mount = env
                    .mount
                    .clone()
                    .ok_or_else(|| Error::Setup("no outbox filesystem".into()))?;
                let filler = mount.join("filler");
                fill(&filler)?;
                tokio::time::sleep(rng.between(Duration::from_millis(300), Duration::from_secs(3)))
                    .await;
                std::fs::remove_file(&filler)
                    .map_err(Error::io("freeing the outbox filesystem"))?;
            }
        }
        report.faults += 1;
        let mut submitted: Vec<Submitted> = Vec::new();
        for load in loads {
            submitted.extend(
                load.await
                    .map_err(|e| Error::Setup(format!("the workload failed: {e}")))?,
            );
        }
        let tally = invariants::check(
            &env.stack.pool,
            &env.stack.count_file,
            &submitted,
            SETTLE_DEADLINE,
        )
        .await?;
        if case == Case::PgBackendKill {
            woken_in.record(probe_after_listener_kill(env).await?);
        }
        note(&format!(
            "{} round {}: {} calls, {} succeeded, {} not run, {} uncertain, {} lost, {} duplicated, {} mislabelled",
            case.name(),
            round + 1,
            tally.calls,
            tally.succeeded,
            tally.not_run,
            tally.uncertain,
            tally.lost,
            tally.duplicated,
            tally.mislabelled
        ));
        report.tally.add(&tally);
    }
    report.timings = [unknown_in, released_in, receipts_in, takeover_in, woken_in]
        .into_iter()
        .filter(|t| t.samples > 0)
        .collect();
    Ok(())
}

/// The streams of calls a case's rounds submit: (replicas to spread over, target).
fn streams(case: Case, env: &Env) -> Vec<(Vec<Api>, Target)> {
    let all = env.apis();
    match case {
        Case::PgRestart | Case::ReplicaRestart => vec![
            (all.clone(), env.stack.central.clone()),
            (all, env.device.target.clone()),
        ],
        _ => vec![(all, env.device.target.clone())],
    }
}

/// A call a runner held (leased or running) when it was lost.
#[derive(Debug, sqlx::FromRow)]
struct Held {
    id: Uuid,
    state: String,
}

async fn held_by(pool: &PgPool, runner_ref: &str) -> Result<Vec<Held>> {
    Ok(sqlx::query_as(
        "SELECT id, state FROM calls WHERE runner_ref = $1 AND state IN ('leased', 'running')",
    )
    .bind(runner_ref)
    .fetch_all(pool)
    .await?)
}

async fn lease_of(pool: &PgPool, runner_ref: &str) -> Result<Option<(i64, DateTime<Utc>)>> {
    Ok(
        sqlx::query_as("SELECT epoch, expires_at FROM runner_leases WHERE runner_ref = $1")
            .bind(runner_ref)
            .fetch_optional(pool)
            .await?,
    )
}

fn ms_between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0
}

/// How soon a lost runner's dispatched calls must be `unknown`, from the kill.
const UNKNOWN_WITHIN: Duration = Duration::from_secs(60);

/// SIGKILL the device runner; restart it at once (the same holder resumes its live lease) or
/// after its lease expired (a lost runner coming back).
async fn runner_kill(
    env: &mut Env,
    rng: &mut Rng,
    unknown_in: &mut Timing,
    released_in: &mut Timing,
    receipts_in: &mut Timing,
) -> Result<()> {
    let runner_ref = format!("device:{}", env.device.device_id);
    if let Some(mut runner) = env.runner.take() {
        runner.kill();
    }
    let killed = Utc::now();
    let held = held_by(&env.stack.pool, &runner_ref).await?;
    let expiry = lease_of(&env.stack.pool, &runner_ref)
        .await?
        .map(|(_, e)| e)
        .unwrap_or(killed);
    let late = rng.chance(0.5);
    if !late {
        tokio::time::sleep(rng.between(Duration::ZERO, Duration::from_millis(500))).await;
        env.start_runner().await?;
        return Ok(());
    }
    // Lost: wait until the lease expired and the sweeper settled what the runner held. A
    // renewal the server answered just before the kill may be written after it (renewals are
    // flushed in batches), moving the expiry read above later: the wait ends when the calls
    // it ran are settled, or at the limit they must be settled by.
    let pool = env.stack.pool.clone();
    let running: Vec<Uuid> = held
        .iter()
        .filter(|h| h.state == "running")
        .map(|h| h.id)
        .collect();
    let leased: Vec<&Held> = held.iter().filter(|h| h.state == "leased").collect();
    let deadline = Instant::now() + UNKNOWN_WITHIN;
    let states = loop {
        let states = states_of(&pool, &running).await?;
        let expired = Utc::now() >= expiry + chrono::Duration::milliseconds(1500);
        let settled = states.iter().all(|(_, state, _)| state != "running");
        if (expired && settled) || Instant::now() >= deadline {
            break states;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for (_, state, finished) in &states {
        match (state.as_str(), finished) {
            ("unknown" | "resolved", Some(f)) => unknown_in.record(ms_between(killed, *f)),
            _ => unknown_in.record(f64::INFINITY),
        }
    }
    // Undispatched calls are the ones the sweeper put back in the queue at expiry (a call
    // whose start reached the server just before the kill is unknown instead).
    let requeued: Vec<Uuid> = states_of(&pool, &leased.iter().map(|h| h.id).collect::<Vec<_>>())
        .await?
        .into_iter()
        .filter(|(_, state, _)| state == "queued")
        .map(|(id, _, _)| id)
        .collect();
    // Receipts the dead runner recorded but never uploaded: its return must deliver them.
    let pending: Vec<Uuid> = {
        let outbox = Outbox::open(&env.outbox, env.device.device_id)
            .map_err(|e| Error::Setup(format!("opening the outbox: {e}")))?;
        let receipts = outbox
            .unacknowledged()
            .map_err(|e| Error::Setup(e.to_string()))?;
        receipts
            .iter()
            .filter(|r| {
                running.contains(&r.call_id.0)
                    && !matches!(r.completion, Completion::Unknown { .. })
            })
            .map(|r| r.call_id.0)
            .collect()
    };
    tokio::time::sleep(rng.between(Duration::ZERO, Duration::from_secs(1))).await;
    let back = env.start_runner().await?;
    let due = back.max(expiry);
    for id in requeued {
        match wait_for(&pool, id, |state, leased_at| {
            state != "queued" && leased_at.is_some()
        })
        .await?
        {
            Some((_, Some(l))) => released_in.record(ms_between(due, l).max(0.0)),
            _ => released_in.record(f64::INFINITY),
        }
    }
    for call in pending {
        let settled_at = wait_until_state(&pool, call, "resolved", Duration::from_secs(10)).await?;
        receipts_in.record(
            settled_at
                .map(|at| ms_between(back, at).max(0.0))
                .unwrap_or(f64::INFINITY),
        );
    }
    Ok(())
}

async fn states_of(
    pool: &PgPool,
    ids: &[Uuid],
) -> Result<Vec<(Uuid, String, Option<DateTime<Utc>>)>> {
    Ok(
        sqlx::query_as("SELECT id, state, finished_at FROM calls WHERE id = ANY($1)")
            .bind(ids)
            .fetch_all(pool)
            .await?,
    )
}

/// Polls a call (every 10 ms, up to 10 s) until `done(state, leased_at)`; its last state and
/// lease time, or `None` when it never got there.
async fn wait_for(
    pool: &PgPool,
    id: Uuid,
    done: impl Fn(&str, Option<DateTime<Utc>>) -> bool,
) -> Result<Option<(String, Option<DateTime<Utc>>)>> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        let row: Option<(String, Option<DateTime<Utc>>)> =
            sqlx::query_as("SELECT state, leased_at FROM calls WHERE id = $1")
                .bind(id)
                .fetch_optional(pool)
                .await?;
        if let Some((state, leased_at)) = row
            && done(&state, leased_at)
        {
            return Ok(Some((state, leased_at)));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(None)
}

/// Polls a call (every 10 ms) until it is in `state`; when the driver saw it there.
async fn wait_until_state(
    pool: &PgPool,
    id: Uuid,
    state: &str,
    limit: Duration,
) -> Result<Option<DateTime<Utc>>> {
    let started = Instant::now();
    while started.elapsed() < limit {
        let now: Option<String> = sqlx::query_scalar("SELECT state FROM calls WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await?;
        if now.as_deref() == Some(state) {
            return Ok(Some(Utc::now()));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(None)
}

/// Terminates the backends listening for notifications (`LISTEN`), or every backend of the
/// database but the driver's own.
pub async fn kill_backends(pool: &PgPool, all: bool) -> Result<u64> {
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name <> $2 AND backend_type = 'client backend'
           AND ($1 OR query ILIKE 'LISTEN%')",
    )
    .bind(all)
    .bind(crate::stack::DRIVER_APPLICATION)
    .fetch_all(pool)
    .await?;
    Ok(killed.len() as u64)
}

/// After the round: let the device runner idle in its long-poll, kill the listeners'
/// backends, then time one device call end to end (a missed wake-up would cost the rest of
/// the 25-second long-poll).
async fn probe_after_listener_kill(env: &mut Env) -> Result<f64> {
    tokio::time::sleep(Duration::from_millis(500)).await;
    kill_backends(&env.stack.pool, false).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let (_, call) = submit(
        &env.stack.api,
        &env.device.target.call("count", json!({ "label": "probe" })),
    )
    .await?;
    let id = call.id.to_string();
    loop {
        let call = read_call(&env.stack.api, &id).await?;
        if invariants::is_settled(call.state.as_str())
            || started.elapsed() > Duration::from_secs(60)
        {
            return Ok(started.elapsed().as_secs_f64() * 1000.0);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Crash (SIGKILL) or stop (SIGTERM) one replica, start it again after a moment, and time how
/// soon central calls were leased again when the central lease holder died.
async fn replica_restart(env: &mut Env, rng: &mut Rng, takeover_in: &mut Timing) -> Result<()> {
    let pool = env.stack.pool.clone();
    let before = lease_of(&pool, "central").await?;
    let victim = rng.below(env.stack.servers.len() as u64) as usize;
    if rng.chance(0.5) {
        env.stack.crash_server(victim).await;
    } else {
        env.stack.stop_server(victim, Duration::from_secs(10)).await;
    }
    // The victim's last renewal (or its release) is final now.
    let after_kill = lease_of(&pool, "central").await?;
    tokio::time::sleep(rng.between(Duration::from_millis(100), Duration::from_secs(2))).await;
    env.stack.restart_server(victim).await?;
    let (Some((epoch, _)), Some((same_epoch, expiry))) = (before, after_kill) else {
        return Ok(());
    };
    if same_epoch != epoch {
        return Ok(());
    }
    // Did the victim hold the central lease? Then another process takes it after expiry.
    let started = Instant::now();
    while started.elapsed() < LEASE_TTL * 4 {
        let first: Option<DateTime<Utc>> = sqlx::query_scalar(
            "SELECT min(leased_at) FROM calls WHERE runner_ref = 'central' AND lease_epoch > $1",
        )
        .bind(epoch)
        .fetch_one(&pool)
        .await?;
        if let Some(first) = first {
            takeover_in.record(ms_between(expiry, first).max(0.0));
            return Ok(());
        }
        let now = lease_of(&pool, "central").await?;
        if now.is_some_and(|(e, _)| e == epoch)
            && Utc::now() > expiry + chrono::Duration::seconds(2)
        {
            // The lease was renewed under the old epoch: the victim did not hold it.
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Mounts a small tmpfs at `dir` (needs root; the case is skipped otherwise).
async fn mount_tmpfs(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let output = tokio::process::Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={OUTBOX_FS_BYTES},mode=0755"),
            "tmpfs",
        ])
        .arg(dir)
        .output()
        .await
        .map_err(|e| Error::Setup(format!("mount: cannot run mount: {e}")))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(Error::Setup(format!(
            "mount: cannot mount a tmpfs for the outbox ({}); run as root",
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

async fn unmount(dir: &Path) {
    let _ = tokio::process::Command::new("umount")
        .arg(dir)
        .output()
        .await;
}

/// Writes `path` until the filesystem is full.
fn fill(path: &Path) -> Result<()> {
    use std::io::Write as _;
    let mut file = std::fs::File::create(path).map_err(Error::io("creating the filler"))?;
    let block = vec![0u8; 64 * 1024];
    loop {
        match file.write(&block) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => return Ok(()),
            Err(e) => return Err(Error::io("filling the outbox filesystem")(e)),
        }
    }
}

/// The summary table: one row per case.
pub fn summary_table(reports: &[CaseReport]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<16} {:>6} {:>6} {:>9} {:>7} {:>9} {:>5} {:>10} {:>11} {:>13} {:>11} {:>7}",
        "case",
        "faults",
        "calls",
        "succeeded",
        "not run",
        "uncertain",
        "lost",
        "duplicated",
        "mislabelled",
        "receipts lost",
        "outbox left",
        "result"
    );
    for r in reports {
        if let Some(reason) = &r.skipped {
            let _ = writeln!(out, "{:<16} skipped: {reason}", r.case);
            continue;
        }
        let t = &r.tally;
        let _ = writeln!(
            out,
            "{:<16} {:>6} {:>6} {:>9} {:>7} {:>9} {:>5} {:>10} {:>11} {:>13} {:>11} {:>7}",
            r.case,
            r.faults,
            t.calls,
            t.succeeded,
            t.not_run,
            t.uncertain,
            t.lost,
            t.duplicated,
            t.mislabelled,
            r.receipts_lost,
            r.outbox_left,
            if r.clean() { "ok" } else { "FAILED" }
        );
    }
    let timings: Vec<(&str, &Timing)> = reports
        .iter()
        .flat_map(|r| r.timings.iter().map(move |t| (r.case, t)))
        .collect();
    if !timings.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<16} {:<70} {:>7} {:>10} {:>9} {:>5}",
            "case", "timing", "samples", "worst ms", "limit ms", "over"
        );
        for (case, t) in timings {
            let worst = if t.worst_ms.is_finite() {
                format!("{:.0}", t.worst_ms)
            } else {
                "never".into()
            };
            let _ = writeln!(
                out,
                "{case:<16} {:<70} {:>7} {:>10} {:>9.0} {:>5}",
                t.name, t.samples, worst, t.limit_ms, t.violations
            );
        }
    }
    let violations: Vec<String> = reports
        .iter()
        .flat_map(|r| {
            r.tally
                .violations
                .iter()
                .map(move |v| format!("{}: {v}", r.case))
        })
        .collect();
    if !violations.is_empty() {
        let _ = writeln!(out, "\nviolations:");
        for v in violations.iter().take(30) {
            let _ = writeln!(out, "  {v}");
        }
    }
    out
}
