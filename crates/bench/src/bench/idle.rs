//! Idle scale: many paired devices whose runners hold a lease, heartbeat at the real cadence
//! and keep a lease long-poll open — with nothing to do. Measures the server's memory and how
//! much the database works while they wait.
//!
//! Each simulated runner sends its long-polls and heartbeats through the companion's own
//! client (`RunnerClient`), so over one runner channel each, as a real runner does.

use crate::error::{Error, Result};
use crate::pg::{self, Counters};
use crate::procs::rss_bytes;
use crate::stack::{Stack, WORKSPACE, note};
use futures::StreamExt;
use serde::Serialize;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use switchyard_mcp_runner::device::{ApiFailure, Credential, RunnerClient};
use switchyard_protocol::runner::{AcquireAnswer, AcquireLease, Epoch, Heartbeat, LeaseRequest};
use switchyard_testkit::api::Api;
use switchyard_testkit::pairing;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How many pairings or acquisitions run at once while setting up.
const SETUP_CONCURRENCY: usize = 32;

/// What idle runners cost.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Idle {
    /// Runners holding a lease and a long-poll.
    pub count: usize,
    /// Server VmRSS before the devices were paired.
    pub server_rss_before_bytes: u64,
    /// Server VmRSS once they were paired and held leases, before their long-polls.
    pub server_rss_paired_bytes: u64,
    /// Highest server VmRSS seen while they idled.
    pub server_rss_bytes: u64,
    /// Pairing (start, approve, collect) plus lease acquisition, per second.
    pub setup_devices_per_s: f64,
    /// The measured idle window.
    pub window_s: f64,
    /// How long each long-poll asked to wait.
    pub long_poll_ms: u64,
    /// How often each runner heartbeats.
    pub heartbeat_every_ms: u64,
    /// Long-polls answered (empty) during the window.
    pub polls_answered: u64,
    /// Heartbeats sent during the window.
    pub heartbeats: u64,
    /// Requests (long-polls and heartbeats) that did not succeed, over the whole phase.
    pub failed_requests: u64,
    /// What the first of them got.
    pub first_failure: Option<String>,
    /// Leases taken again after a request was answered `runner_fenced` (a lease expired while
    /// the others were set up, say), as a real runner takes its lease again.
    pub leases_taken_again: u64,
    /// What the database did during the window.
    pub db: Counters,
    /// Commits per second during the window (every autocommit statement counts).
    pub commits_per_s: f64,
    /// Rows written per second during the window (heartbeats and `last_seen_at` included).
    pub rows_written_per_s: f64,
    /// Commits per answered long-poll, heartbeats included.
    pub commits_per_poll: f64,
    /// Rows written per answered long-poll, heartbeats included.
    pub rows_written_per_poll: f64,
    /// Rows written per answered long-poll besides the flushed renewals and sightings (rows of
    /// `runner_leases` and `devices`): what the polls themselves write.
    pub rows_written_per_poll_besides_liveness: f64,
    /// WAL flushes per heartbeat: well below one when renewals are flushed in batches (each
    /// heartbeat written alone would be a durable commit, a flush, of its own).
    pub wal_flushes_per_heartbeat: f64,
}

/// What a failed request got.
fn failure(what: &str, failure: &ApiFailure) -> String {
    format!("{what} failed: {failure}")
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One simulated device runner.
struct SimRunner {
    client: RunnerClient,
    holder: uuid::Uuid,
    /// The lease epoch it holds now.
    epoch: AtomicI64,
}

impl SimRunner {
    fn epoch(&self) -> Epoch {
        Epoch(self.epoch.load(Ordering::Relaxed))
    }

    /// After `fenced` answered `runner_fenced`: takes the lease again, as a real runner does
    /// (its holder resumes its epoch, or gets a new one once the lease expired), counting it
    /// in `taken`. True when it holds a lease again (taken here or by its other task).
    async fn take_lease_again(&self, fenced: Epoch, taken: &AtomicU64) -> bool {
        if self.epoch() != fenced {
            return true;
        }
        match self.client.acquire(self.holder).await {
            Ok(AcquireAnswer::Acquired { epoch, .. }) => {
                self.epoch.store(epoch.0, Ordering::Relaxed);
                taken.fetch_add(1, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }
}

/// What every runner's heartbeat task shares.
struct Beating {
    every: Duration,
    stop: CancellationToken,
    beats: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    first_failure: Arc<OnceLock<String>>,
    reacquired: Arc<AtomicU64>,
}

impl Beating {
    /// Heartbeats `runner` every period from `offset` on, until stopped.
    fn spawn(&self, runner: Arc<SimRunner>, offset: Duration) -> JoinHandle<()> {
        let (stop, beats, failed, why, reacquired) = (
            self.stop.clone(),
            self.beats.clone(),
            self.failures.clone(),
            self.first_failure.clone(),
            self.reacquired.clone(),
        );
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + offset, self.every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = ticker.tick() => {}
                }
                let beat = Heartbeat {
                    epoch: runner.epoch(),
                    active: Vec::new(),
                    outbox: None,
                };
                match runner.client.heartbeat(&beat).await {
                    Ok(_) => {
                        beats.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(other) => {
                        let _ = why.set(failure("a heartbeat", &other));
                        failed.fetch_add(1, Ordering::Relaxed);
                        if matches!(other, ApiFailure::Fenced { .. }) {
                            runner.take_lease_again(beat.epoch, &reacquired).await;
                        }
                    }
                }
            }
        })
    }
}

/// Pairs `count` devices, gives each a runner lease, keeps them idle for `window` while
/// measuring, then stops them (their leases are left to expire).
/// Each long-poll asks to wait `long_poll` (a real runner asks for 25 s, the server's cap).
pub async fn idle_runners(
    stack: &Stack,
    count: usize,
    window: Duration,
    long_poll: Duration,
    heartbeat_every: Duration,
) -> Result<Idle> {
    let server_pid = stack
        .server_pid(0)
        .ok_or_else(|| Error::Setup("replica 0 is not running".into()))?;
    let server_rss_before_bytes = rss_bytes(server_pid).unwrap_or(0);
    stack.profile("idle-bound", &[]).await?;
    // Pairing and lease acquisition: plain requests, a few at a time.
    let base = Api::new(&stack.url(0), Some(&stack.token))?;
    // The runners' clients share one HTTP client; each runner's channel is a connection of
    // its own (an upgraded connection leaves the pool).
    let runner_http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .tcp_nodelay(true)
        .build()
        .map_err(|e| Error::Setup(format!("building the runners' HTTP client: {e}")))?;
    let started = Instant::now();
    let credentials: Vec<Result<String>> = futures::stream::iter(0..count)
        .map(|i| {
            let base = base.clone();
            async move {
                let name = format!("idle-{i}");
                let paired = pairing::pair(&base, WORKSPACE, &name, "idle-bound").await?;
                Ok(paired.credential)
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .collect()
        .await;
    let credentials: Vec<String> = credentials.into_iter().collect::<Result<_>>()?;
    let stop = CancellationToken::new();
    let polls_open = Arc::new(AtomicU64::new(0));
    let polls_answered = Arc::new(AtomicU64::new(0));
    let heartbeats = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    // What the first failed request got, for the error message.
    let first_failure = Arc::new(OnceLock::<String>::new());
    // Leases taken again after a `runner_fenced` answer.
    let reacquired = Arc::new(AtomicU64::new(0));
    // Leases are taken once every device is paired, not while the others pair: pairing
    // thousands takes longer than a lease lives. Each runner heartbeats from the moment it
    // holds its lease, as a real one does.
    let beating = Beating {
        every: heartbeat_every,
        stop: stop.clone(),
        beats: heartbeats.clone(),
        failures: failures.clone(),
        first_failure: first_failure.clone(),
        reacquired: reacquired.clone(),
    };
    let runners: Vec<Result<(Arc<SimRunner>, JoinHandle<()>)>> =
        futures::stream::iter(credentials.into_iter().enumerate())
            .map(|(i, credential)| {
                let (base, runner_http, beating) = (base.clone(), runner_http.clone(), &beating);
                async move {
                    let api = base.with_token(Some(&credential));
                    let holder = uuid::Uuid::now_v7();
                    let answer = api
                        .post("/runner/lease/acquire", &AcquireLease { holder })
                        .await?;
                    match switchyard_testkit::api::from_json(answer, "acquire")? {
                        AcquireAnswer::Acquired { epoch, .. } => {
                            let client = RunnerClient::with_http(
                                runner_http,
                                &stack.url(0),
                                Credential::new(credential),
                            );
                            let runner = Arc::new(SimRunner {
                                client,
                                holder,
                                epoch: AtomicI64::new(epoch.0),
                            });
                            // Real runners started at different moments: spread the
                            // heartbeats over the period.
                            let offset = heartbeat_every.mul_f64(i as f64 / count.max(1) as f64);
                            let beats = beating.spawn(runner.clone(), offset);
                            Ok((runner, beats))
                        }
                        other => Err(Error::Setup(format!(
                            "idle runner {i} did not get its lease: {other:?}"
                        ))),
                    }
                }
            })
            .buffer_unordered(SETUP_CONCURRENCY)
            .collect()
            .await;
    let runners: Vec<(Arc<SimRunner>, JoinHandle<()>)> =
        runners.into_iter().collect::<Result<_>>()?;
    let setup_devices_per_s = count as f64 / started.elapsed().as_secs_f64();
    let server_rss_paired_bytes = rss_bytes(server_pid).unwrap_or(0);
    note(&format!(
        "idle: {count} devices paired with leases ({setup_devices_per_s:.0}/s); opening long-polls"
    ));

    let mut tasks = Vec::with_capacity(count * 2);
    for (runner, beats) in runners {
        let (r, stop2, open, answered, failed, why, reacquired) = (
            runner.clone(),
            stop.clone(),
            polls_open.clone(),
            polls_answered.clone(),
            failures.clone(),
            first_failure.clone(),
            reacquired.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut first = true;
            while !stop2.is_cancelled() {
                if first {
                    open.fetch_add(1, Ordering::Relaxed);
                    first = false;
                }
                let request = LeaseRequest {
                    epoch: r.epoch(),
                    max: 1,
                    wait_ms: millis(long_poll),
                };
                let answer = tokio::select! {
                    () = stop2.cancelled() => return,
                    answer = r.client.lease(&request) => answer,
                };
                match answer {
                    Ok(_) => {
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(other) => {
                        let _ = why.set(failure("a long-poll", &other));
                        failed.fetch_add(1, Ordering::Relaxed);
                        let again = matches!(other, ApiFailure::Fenced { .. })
                            && r.take_lease_again(request.epoch, &reacquired).await;
                        if !again {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                }
            }
        }));
        tasks.push(beats);
    }
    // Every long-poll sent, and a moment for the server to take them in.
    while polls_open.load(Ordering::Relaxed) < count as u64 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The cleanup the earlier phases (and the pairing) left is done first: autovacuum doing it
    // during the window flushes WAL for every buffer it writes back, and in a full run that
    // counted as the idle runners' (0.17 flushes per heartbeat instead of 0.005).
    pg::vacuum(&stack.pool).await?;

    let before = pg::counters(&stack.pool).await?;
    let (answered0, beats0) = (
        polls_answered.load(Ordering::Relaxed),
        heartbeats.load(Ordering::Relaxed),
    );
    let window_start = Instant::now();
    let mut server_rss_bytes = rss_bytes(server_pid).unwrap_or(0);
    while window_start.elapsed() < window {
        tokio::time::sleep(Duration::from_millis(500)).await;
        server_rss_bytes = server_rss_bytes.max(rss_bytes(server_pid).unwrap_or(0));
    }
    let after = pg::counters(&stack.pool).await?;
    let window_s = window_start.elapsed().as_secs_f64();
    let answered = polls_answered.load(Ordering::Relaxed) - answered0;
    let beats = heartbeats.load(Ordering::Relaxed) - beats0;
    stop.cancel();
    for task in tasks {
        let _ = task.await;
    }
    // Reported, not fatal: the rest of the run still measures.
    let failed_requests = failures.load(Ordering::Relaxed);
    let first_failure = first_failure.get().cloned();
    if let Some(first) = &first_failure {
        note(&format!(
            "idle: {failed_requests} idle-runner requests failed; the first: {first}"
        ));
    }
    let db = after.since(&before);
    let per_poll = |n: i64| {
        if answered == 0 {
            0.0
        } else {
            n as f64 / answered as f64
        }
    };
    Ok(Idle {
        count,
        server_rss_before_bytes,
        server_rss_paired_bytes,
        server_rss_bytes,
        setup_devices_per_s,
        window_s,
        long_poll_ms: millis(long_poll),
        heartbeat_every_ms: millis(heartbeat_every),
        polls_answered: answered,
        heartbeats: beats,
        failed_requests,
        first_failure,
        leases_taken_again: reacquired.load(Ordering::Relaxed),
        db,
        commits_per_s: db.xact_commit as f64 / window_s,
        rows_written_per_s: db.rows_written as f64 / window_s,
        commits_per_poll: per_poll(db.xact_commit),
        rows_written_per_poll: per_poll(db.rows_written),
        rows_written_per_poll_besides_liveness: per_poll(
            db.rows_written - db.liveness_rows_written,
        ),
        wal_flushes_per_heartbeat: if beats == 0 {
            0.0
        } else {
            db.wal_syncs as f64 / beats as f64
        },
    })
}
