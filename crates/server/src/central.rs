//! The central runner: the executor inside the server, for connections whose runner reference
//! is `central`. It holds the `central` runner lease (so among several replicas exactly one
//! runs central calls at a time), renews it by heartbeat, and implements the runner's view of
//! the control plane directly on the datastore.
//!
//! - Each lease term has a fresh holder and so a new epoch; taking the lease settles what an
//!   earlier term left (leased calls requeued, started ones `unknown`).
//! - It listens for cancel and release requests (`NOTIFY` from any replica) before its
//!   executor leases anything, so none published for a call of this term goes unheard.
//! - Its leases follow each other through a `LeaseFeed`: after a lease that took every queued
//!   call, the next waits for an announcement instead of looking. Start acks that are ready at
//!   the same moment are written together, and so are completions (`Batcher`: one batch in
//!   flight while the next collects, so a lone one is written at once).
//! - A call holds one of the executor's places through three commits (lease, start,
//!   completion), so it runs [`DEFAULT_MAX_CONCURRENT`] calls at once unless configured.
//! - Its heartbeat also settles calls leased or started under its epoch that its executor
//!   does not hold: a lease or start answer lost when a connection broke after the commit.

use crate::app::Batcher;
use crate::app::{App, CompletionRecorded, LeaseFeed};
use sqlx::postgres::PgListener;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_mcp_runner::control::{ControlError, ControlPlane, StartDecision};
use switchyard_mcp_runner::executor::{Executor, ExecutorConfig};
use switchyard_mcp_runner::handle::ExecutorHandle;
use switchyard_protocol::api::CENTRAL_RUNNER;
use switchyard_protocol::runner::{Completion, Epoch, LeasedCall, LifecycleEvent, Submitter};
use switchyard_protocol::{CallId, CallState, ConnectionId, RunnerRef, UserId};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The channel `call_cancel` notifies when a running call should be cancelled.
const CANCEL_CHANNEL: &str = "switchyard_cancel";
/// The channel `session_release_notify` uses.
const RELEASE_CHANNEL: &str = "switchyard_release";
/// Pause between attempts to listen for cancel and release requests.
const LISTEN_RETRY: Duration = Duration::from_secs(1);

/// Settings of the central runner.
#[derive(Clone, Debug)]
pub struct CentralConfig {
    /// Runner lease length; renewed every third of it.
    pub lease_ttl: Duration,
    /// Executor settings.
    pub executor: ExecutorConfig,
    /// Most start acks, and most completions, written together (start acks in one
    /// transaction, completions in one statement); 1 writes each on its own (see
    /// [`crate::app::Batcher`]).
    pub batch_max: usize,
}

/// [`CentralConfig::batch_max`] unless configured.
pub const DEFAULT_BATCH_MAX: u16 = 64;
/// The central executor's most calls at once unless configured. A call holds its place while
/// its lease, start ack and completion commit, so the places must cover the rate times those
/// commits at their slowest: when the disk's WAL flushes slow to ~100 ms (a checkpoint or
/// autovacuum writing beside them), 500 calls/s hold about 150. With 32 the soak's leasing
/// stopped for up to 1.5 s at such moments, every place waiting for a commit.
pub const DEFAULT_MAX_CONCURRENT: u16 = 256;

impl Default for CentralConfig {
    fn default() -> Self {
        Self {
            lease_ttl: Duration::from_secs(30),
            executor: ExecutorConfig {
                max_concurrent: usize::from(DEFAULT_MAX_CONCURRENT),
                ..ExecutorConfig::default()
            },
            batch_max: usize::from(DEFAULT_BATCH_MAX),
        }
    }
}

/// Runs the central runner until `shutdown`: take the lease (waiting while another replica
/// holds it), run the executor under it, and on losing it stop, drain and take it again.
pub async fn run(app: App, config: CentralConfig, shutdown: CancellationToken) {
    while !shutdown.is_cancelled() {
        // A fresh holder per lease term: every term has an epoch of its own, and taking the
        // lease settles whatever an earlier term left (leased calls requeued, started ones
        // unknown), even one of this process.
        let holder = Uuid::now_v7();
        let Some(epoch) = acquire(&app, holder, &config, &shutdown).await else {
            break;
        };
        tracing::info!(
            runner = CENTRAL_RUNNER,
            epoch = epoch.0,
            "central runner lease acquired"
        );
        let lease_lost = shutdown.child_token();
        let held = Arc::new(Held::default());
        let beat = Beat {
            app: app.clone(),
            holder,
            epoch,
            ttl: config.lease_ttl,
            held: Arc::clone(&held),
        };
        let heartbeat = tokio::spawn(heartbeat(beat, lease_lost.clone()));
        let control = CentralControl::new(app.clone(), epoch, held, config.batch_max);
        let resolver = app.central_launch_resolver();
        // The app's guard is the one the connectors were screened with.
        let executor_config = ExecutorConfig {
            endpoints: app.endpoints().clone(),
            ..config.executor.clone()
        };
        let executor = Executor::new(Arc::new(control), resolver, executor_config);
        // Listening before the executor leases anything: a release or cancellation published
        // for a call this term runs must not go out before anyone hears it.
        if let Some(listener) = listen_for_commands(&app, &lease_lost).await {
            let commands = tokio::spawn(forward_commands(
                app.clone(),
                listener,
                executor.handle(),
                lease_lost.clone(),
            ));
            executor.run(lease_lost.clone()).await;
            lease_lost.cancel();
            let _ = commands.await;
        }
        lease_lost.cancel();
        let _ = heartbeat.await;
        if shutdown.is_cancelled() {
            if let Err(e) = app
                .db()
                .runner_lease_release(RunnerRef::Central, holder, epoch)
                .await
            {
                tracing::warn!(error = %e, "could not release the central runner lease");
            }
        } else {
            tracing::warn!(
                epoch = epoch.0,
                "central runner lease lost; drained, taking it again"
            );
        }
    }
}

/// A cancel or release request the API published for some runner.
#[derive(Debug, serde::Deserialize)]
struct RunnerCommand {
    runner: String,
    call_id: Option<CallId>,
    connection_id: Option<ConnectionId>,
    client_session_id: Option<String>,
    /// Whose sessions a release drains (absent from replicas that predate it: everyone's).
    user_id: Option<UserId>,
}

/// A listener on the cancel and release channels, once it listens; `None` if `stop` came
/// first. Tries again every [`LISTEN_RETRY`] while the database refuses.
async fn listen_for_commands(app: &App, stop: &CancellationToken) -> Option<PgListener> {
    loop {
        let listening = async {
            let mut listener = PgListener::connect_with(app.db().pool()).await?;
            listener
                .listen_all([CANCEL_CHANNEL, RELEASE_CHANNEL])
                .await?;
            Ok::<_, sqlx::Error>(listener)
        };
        tokio::select! {
            _ = stop.cancelled() => return None,
            listening = listening => match listening {
                Ok(listener) => return Some(listener),
                Err(e) => tracing::warn!(error = %e, "cannot listen for cancel and release requests; trying again"),
            },
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(LISTEN_RETRY) => {}
        }
    }
}

/// Forwards cancel and release requests for the central runner (published by any replica with
/// `NOTIFY`) to the executor, until `stop`. Cancellations requested before it listened are
/// picked up once at the start.
async fn forward_commands(
    app: App,
    mut listener: PgListener,
    handle: ExecutorHandle,
    stop: CancellationToken,
) {
    match app.db().call_cancel_requested(RunnerRef::Central).await {
        Ok(calls) => {
            for call in calls {
                handle.cancel(call).await;
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot read pending cancellations"),
    }
    loop {
        let notification = tokio::select! {
            _ = stop.cancelled() => return,
            received = listener.recv() => match received {
                Ok(notification) => notification,
                Err(e) => {
                    tracing::warn!(error = %e, "lost the cancel/release listener; reconnecting");
                    continue;
                }
            },
        };
        let Ok(command) = serde_json::from_str::<RunnerCommand>(notification.payload()) else {
            tracing::warn!(
                channel = notification.channel(),
                "ignoring a malformed runner command"
            );
            continue;
        };
        if command.runner != CENTRAL_RUNNER {
            continue;
        }
        match (
            notification.channel(),
            command.call_id,
            command.connection_id,
        ) {
            (CANCEL_CHANNEL, Some(call), _) => {
                let outcome = handle.cancel(call).await;
                tracing::info!(%call, ?outcome, "cancellation forwarded to the executor");
            }
            (RELEASE_CHANNEL, _, Some(connection)) => {
                let submitter = command.user_id.map(Submitter::User);
                let released = handle
                    .release(connection, command.client_session_id, submitter)
                    .await;
                tracing::info!(%connection, released, "session release forwarded to the executor");
            }
            _ => tracing::warn!(
                channel = notification.channel(),
                "ignoring an incomplete runner command"
            ),
        }
    }
}

/// Waits until this process holds the central lease, or shutdown.
async fn acquire(
    app: &App,
    holder: Uuid,
    config: &CentralConfig,
    shutdown: &CancellationToken,
) -> Option<Epoch> {
    loop {
        match app
            .db()
            .runner_lease_take(RunnerRef::Central, holder, config.lease_ttl)
            .await
            .map(|taken| app.sent(taken))
        {
            Ok(Some(taken)) => {
                app.metrics()
                    .calls_finished(CallState::Unknown, taken.unknown);
                return Some(taken.epoch);
            }
            Ok(None) => tracing::debug!("central runner lease held elsewhere; waiting"),
            Err(e) => tracing::warn!(error = %e, "cannot take the central runner lease"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(config.lease_ttl / 6) => {}
        }
    }
}

/// The calls this term's executor holds: leased to it, or started by it, and not reported yet.
/// A lease answer lost on the way (the database committed it, the connection broke before the
/// rows arrived) leases calls nobody holds, and a start ack lost the same way leaves a call
/// running that the executor then drops (its retry is refused); the heartbeat settles those,
/// and learns here when such an answer was last lost.
#[derive(Debug, Default)]
struct Held {
    calls: std::sync::Mutex<HashSet<CallId>>,
    /// When a lease or start answer last failed: whether it committed is not known.
    doubted_at: std::sync::Mutex<Option<Instant>>,
}

/// Locks `mutex`, poisoned or not (nothing held under these locks can be left half-changed).
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Held {
    fn add(&self, calls: &[LeasedCall]) {
        lock(&self.calls).extend(calls.iter().map(|c| c.call_id));
    }

    fn remove(&self, call: CallId) {
        lock(&self.calls).remove(&call);
    }

    fn snapshot(&self) -> Vec<CallId> {
        lock(&self.calls).iter().copied().collect()
    }

    /// Notes that a lease or start answer failed: the database may have leased or started
    /// calls nobody holds.
    fn doubt(&self) {
        *lock(&self.doubted_at) = Some(Instant::now());
    }

    /// [`Held::doubt`], for an answer lost to `error`; returns the error as the runner sees it.
    fn lost_answer(&self, error: impl std::fmt::Display) -> ControlError {
        self.doubt();
        unavailable(error)
    }

    /// How long ago an answer last failed, if one did this term.
    fn since_doubt(&self) -> Option<Duration> {
        lock(&self.doubted_at).map(|at| at.elapsed())
    }

    /// Forgets those of `checked` that are neither leased nor running any more (e.g. cancelled
    /// before the executor started them, which it then drops without a report). Calls added
    /// since `checked` was taken are kept.
    fn forget_settled(&self, checked: &[CallId], in_flight: &[CallId]) {
        let in_flight: HashSet<&CallId> = in_flight.iter().collect();
        let mut held = lock(&self.calls);
        for id in checked.iter().filter(|id| !in_flight.contains(id)) {
            held.remove(id);
        }
    }
}

/// Every how many beats the heartbeat settles unheld calls when no answer was lost.
const SETTLE_EVERY_BEATS: u32 = 6;

/// Whether a beat settles unheld calls, `beats_since_settle` beats after the last settle and
/// `since_doubt` after a lease or start answer was last lost. The settle walks every index
/// entry of the term's calls in flight, dead ones included — while another transaction holds
/// the xmin horizon, an entry for every call of the term (116 ms a beat in the soak) — and
/// finds work only after such a loss. So it runs in every beat for two leases after one (it
/// settles calls a lease old; the first beat past that finds them), and otherwise every
/// [`SETTLE_EVERY_BEATS`]-th beat, for what nothing here saw happen.
fn settle_due(beats_since_settle: u32, since_doubt: Option<Duration>, ttl: Duration) -> bool {
    beats_since_settle >= SETTLE_EVERY_BEATS || since_doubt.is_some_and(|ago| ago <= 2 * ttl)
}

/// What the heartbeat of one lease term works with.
struct Beat {
    app: App,
    holder: Uuid,
    epoch: Epoch,
    ttl: Duration,
    held: Arc<Held>,
}

impl Beat {
    /// Calls leased under this epoch longer than a lease ago that the executor does not hold
    /// (not in `held`) go back to the queue (nothing was sent); started ones it does not hold
    /// become unknown.
    async fn settle_unheld(&self, held: &[CallId]) {
        match self
            .app
            .db()
            .call_settle_unheld(RunnerRef::Central, self.epoch, held, self.ttl)
            .await
            .map(|settled| self.app.sent(settled))
        {
            Ok((0, 0)) => {}
            Ok((requeued, unknown)) => {
                self.app
                    .metrics()
                    .calls_finished(CallState::Unknown, unknown);
                tracing::warn!(
                    requeued,
                    unknown,
                    "settled central calls the executor does not hold (a lease or start answer was lost)"
                );
            }
            Err(e) => tracing::warn!(error = %e, "cannot settle unheld central calls"),
        }
    }

    /// Forgets those of `held` that are no longer in flight (a cheap read by primary key).
    async fn prune_held(&self, held: &[CallId]) {
        match self.app.db().call_in_flight_among(held).await {
            Ok(in_flight) => self.held.forget_settled(held, &in_flight),
            Err(e) => tracing::debug!(error = %e, "cannot prune the held calls"),
        }
    }
}

/// Renews the lease every third of its length, then settles calls nobody holds when
/// [`settle_due`] says so; cancels `lease_lost` when the lease cannot be renewed.
async fn heartbeat(beat: Beat, lease_lost: CancellationToken) {
    let Beat {
        ref app,
        holder,
        epoch,
        ttl,
        ..
    } = beat;
    let mut beats_since_settle = 0;
    loop {
        tokio::select! {
            _ = lease_lost.cancelled() => return,
            _ = tokio::time::sleep(ttl / 3) => {}
        }
        match app
            .db()
            .runner_lease_renew(RunnerRef::Central, holder, epoch, ttl)
            .await
        {
            Ok(true) => {
                beats_since_settle += 1;
                let held = beat.held.snapshot();
                if settle_due(beats_since_settle, beat.held.since_doubt(), ttl) {
                    beats_since_settle = 0;
                    beat.settle_unheld(&held).await;
                }
                beat.prune_held(&held).await;
            }
            Ok(false) => {
                tracing::warn!(
                    epoch = epoch.0,
                    "central runner lease expired or taken over"
                );
                lease_lost.cancel();
                return;
            }
            // A failed renewal is retried at the next beat; the lease fails safe by expiring.
            Err(e) => tracing::warn!(error = %e, "central runner lease renewal failed"),
        }
    }
}

/// The control plane as the central executor sees it: the datastore, under one epoch.
struct CentralControl {
    app: App,
    epoch: Epoch,
    /// What tells it to look for work (see [`LeaseFeed`]).
    feed: Mutex<LeaseFeed>,
    held: Arc<Held>,
    /// Group commit of start acks and completions; `None` writes each on its own.
    batches: Option<Batches>,
}

/// The central runner's batched writes, under one epoch.
struct Batches {
    starts: Batcher<CallId, Result<bool, ControlError>>,
    completions: Batcher<(CallId, Completion), Result<CompletionRecorded, ControlError>>,
}

impl Batches {
    fn spawn(app: &App, epoch: Epoch, held: &Arc<Held>, max: usize) -> Self {
        let starting = app.clone();
        let completing = app.clone();
        let held = Arc::clone(held);
        Self {
            starts: Batcher::spawn(max, move |calls| {
                start_batch(starting.clone(), epoch, Arc::clone(&held), calls)
            }),
            completions: Batcher::spawn(max, move |completions| {
                let app = completing.clone();
                async move {
                    app.call_record_completions(RunnerRef::Central, epoch, completions)
                        .await
                        .into_iter()
                        .map(|recorded| recorded.map_err(unavailable))
                        .collect()
                }
            }),
        }
    }
}

/// Start acks for `calls` in one transaction: whether each started. If it fails, each is
/// tried on its own (and `held` notes the doubt: the batch may have committed, and then the
/// calls it started are refused a second start and dropped).
async fn start_batch(
    app: App,
    epoch: Epoch,
    held: Arc<Held>,
    calls: Vec<CallId>,
) -> Vec<Result<bool, ControlError>> {
    let db = app.db();
    let ids = calls;
    match db.call_start_many(&ids, RunnerRef::Central, epoch).await {
        Ok(started) => {
            let started: HashSet<CallId> = started.into_iter().collect();
            ids.iter().map(|id| Ok(started.contains(id))).collect()
        }
        Err(e) => {
            tracing::debug!(error = %e, "a batch of start acks failed; starting one by one");
            held.doubt();
            let mut answers = Vec::with_capacity(ids.len());
            for id in ids {
                answers.push(
                    db.call_start(id, RunnerRef::Central, epoch)
                        .await
                        .map_err(|e| held.lost_answer(e)),
                );
            }
            answers
        }
    }
}

/// What the batcher says when its task is gone (the term is ending).
fn batcher_gone() -> ControlError {
    ControlError::Unavailable("the central runner's batched writes stopped".into())
}

impl CentralControl {
    fn new(app: App, epoch: Epoch, held: Arc<Held>, batch_max: usize) -> Self {
        let feed = app.lease_feed(RunnerRef::Central, epoch);
        let batches = (batch_max > 1).then(|| Batches::spawn(&app, epoch, &held, batch_max));
        Self {
            batches,
            app,
            epoch,
            feed: Mutex::new(feed),
            held,
        }
    }
}

fn unavailable(e: impl std::fmt::Display) -> ControlError {
    ControlError::Unavailable(e.to_string())
}

impl ControlPlane for CentralControl {
    async fn lease(&self, max: usize, wait: Duration) -> Result<Vec<LeasedCall>, ControlError> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut feed = self.feed.lock().await;
        let leased = self
            .app
            .lease_waiting(&mut feed, max, deadline)
            .await
            .map_err(|e| self.held.lost_answer(e))?;
        match leased {
            Some(calls) => {
                self.held.add(&calls);
                Ok(calls)
            }
            // Under a lease no longer live nothing is leased: the heartbeat finds out and
            // stops the executor. Until then it waits as on an empty queue.
            None => {
                feed.wait(deadline).await;
                Ok(Vec::new())
            }
        }
    }

    async fn start(&self, call_id: CallId, epoch: Epoch) -> Result<StartDecision, ControlError> {
        let db = self.app.db();
        let started = match &self.batches {
            Some(batches) if epoch == self.epoch => batches
                .starts
                .submit(call_id)
                .await
                .unwrap_or_else(|| Err(batcher_gone()))?,
            _ => db
                .call_start(call_id, RunnerRef::Central, epoch)
                .await
                .map_err(|e| self.held.lost_answer(e))?,
        };
        if started {
            return Ok(StartDecision::Proceed);
        }
        // Not started: the executor drops the call without a report. It may be running all
        // the same, started by an earlier ack whose answer was lost (retried until now).
        self.held.remove(call_id);
        self.held.doubt();
        if let Some(reason) = self
            .app
            .call_fail_retired(call_id, RunnerRef::Central, epoch)
            .await
            .map_err(unavailable)?
        {
            return Ok(StartDecision::Abandon { reason });
        }
        if db
            .runner_lease_is_current(RunnerRef::Central, epoch)
            .await
            .map_err(unavailable)?
        {
            Ok(StartDecision::Abandon {
                reason: "the call is no longer leased to this runner".into(),
            })
        } else {
            Err(ControlError::Fenced(epoch))
        }
    }

    async fn complete(
        &self,
        call_id: CallId,
        epoch: Epoch,
        completion: Completion,
    ) -> Result<(), ControlError> {
        let recorded = match &self.batches {
            Some(batches) if epoch == self.epoch => batches
                .completions
                .submit((call_id, completion))
                .await
                .unwrap_or_else(|| Err(batcher_gone())),
            _ => self
                .app
                .call_record_completion(RunnerRef::Central, call_id, epoch, completion)
                .await
                .map_err(unavailable),
        };
        if recorded.is_ok() {
            self.held.remove(call_id);
        }
        match recorded? {
            CompletionRecorded::Recorded => Ok(()),
            CompletionRecorded::Superseded => {
                tracing::info!(call = %call_id, "completion not applied: the call had moved on");
                Ok(())
            }
            CompletionRecorded::Fenced => Err(ControlError::Fenced(epoch)),
        }
    }

    async fn report_event(&self, event: LifecycleEvent) {
        if let Err(e) = self.app.event_record(RunnerRef::Central, &event).await {
            tracing::warn!(error = %e, ?event, "could not record a lifecycle event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(30);

    #[test]
    fn without_a_lost_answer_every_sixth_beat_settles() {
        let due: Vec<u32> = (1..=SETTLE_EVERY_BEATS)
            .filter(|&beats| settle_due(beats, None, TTL))
            .collect();
        assert_eq!(due, [SETTLE_EVERY_BEATS]);
    }

    #[test]
    fn after_a_lost_answer_every_beat_settles_for_two_leases() {
        for ago in [Duration::ZERO, TTL, 2 * TTL] {
            assert!(settle_due(1, Some(ago), TTL), "{ago:?} after the loss");
        }
        assert!(!settle_due(
            1,
            Some(2 * TTL + Duration::from_millis(1)),
            TTL
        ));
    }

    #[test]
    fn a_failed_answer_is_remembered_as_a_doubt() {
        let held = Held::default();
        assert_eq!(held.since_doubt(), None);
        let error = held.lost_answer("connection reset");
        assert!(matches!(error, ControlError::Unavailable(reason) if reason == "connection reset"));
        assert!(held.since_doubt().is_some());
    }
}
