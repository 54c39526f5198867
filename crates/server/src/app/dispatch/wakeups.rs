//! Wake-ups for runners waiting for work, and for callers waiting for a call to settle.
//! One task per server process listens on `switchyard_calls` (the payload is the runner
//! reference of a new call and its submission time in microseconds, the runner reference
//! alone for requeued calls, or `*` for any runner; all announced after their commit, see
//! [`super::notices`]) and on `switchyard_settled`
//! (the id of a call a runner's report settled) and fans each notification out to the
//! long-polls waiting in this process: a call submitted to any replica wakes its runner's
//! long-poll on every replica at once, a completion recorded by any replica wakes the readers
//! waiting for that call, and waiting costs the database nothing.
//!
//! Wake-ups this process's app sends reach the same fan-out at once, without the round trip
//! through PostgreSQL (see [`super::notices`]). A completion recorded here comes with the
//! call as its statement recorded it, which is handed to the readers waiting for that call
//! ([`SettledWaiter`]): they answer with it instead of reading the call again.
//!
//! Before waking anyone it moves the runner's lease floor (see [`QueueFloors`]), so that the
//! lease a wake-up starts scans from low enough to see the call announced.
//!
//! Notifications are transient: while the listener is disconnected they are lost. After every
//! reconnection all floors go back to the beginning and all waiters are woken to look again,
//! so a lost notification delays nothing beyond that moment.

use super::notices::{ANY_RUNNER, CALLS_CHANNEL, SETTLED_CHANNEL};
use super::queue_floors::QueueFloors;
use crate::app::App;
use crate::db::{SettledCall, Wakeup};
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgListener, PgPoolOptions};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_protocol::CallId;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Wake-ups buffered per waiter; a waiter that falls further behind just looks again.
const CAPACITY: usize = 256;
/// Pause before reconnecting after a listener error.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// The fan-out point of one server process.
#[derive(Debug)]
pub struct Wakeups {
    /// Where each runner's lease scan starts, moved by the announcements.
    floors: QueueFloors,
    tx: broadcast::Sender<Arc<str>>,
    /// Calls settled, by id.
    settled: broadcast::Sender<Arc<str>>,
    /// The readers waiting for a call to settle, by call, each to be handed the call as its
    /// completion recorded it when that happens in this process.
    readers: Mutex<HashMap<CallId, Vec<Reader>>>,
    next_reader: AtomicU64,
    /// Cancelled when the server shuts down: waiting long-polls answer at once, so they do
    /// not hold up the graceful shutdown.
    stopping: CancellationToken,
}

/// A waiting reader, as [`Wakeups::readers`] holds it.
#[derive(Debug)]
struct Reader {
    id: u64,
    to: oneshot::Sender<Arc<SettledCall>>,
}

impl Default for Wakeups {
    fn default() -> Self {
        Self {
            floors: QueueFloors::default(),
            tx: broadcast::channel(CAPACITY).0,
            settled: broadcast::channel(CAPACITY).0,
            readers: Mutex::default(),
            next_reader: AtomicU64::new(0),
            stopping: CancellationToken::new(),
        }
    }
}

impl Wakeups {
    /// A waiter for `runner_ref`. Subscribe before looking for work, so that nothing
    /// announced in between is missed.
    pub(crate) fn waiter(&self, runner_ref: &str) -> Waiter {
        Waiter {
            rx: self.tx.subscribe(),
            key: runner_ref.to_owned(),
            stopping: self.stopping.clone(),
        }
    }

    /// A waiter for call `call` to settle. Subscribe before reading the call, so that a
    /// completion recorded in between is not missed.
    pub(crate) fn settled_waiter(self: &Arc<Self>, call: CallId) -> SettledWaiter {
        let (to, recorded) = oneshot::channel();
        let id = self.next_reader.fetch_add(1, Ordering::Relaxed);
        self.lock_readers()
            .entry(call)
            .or_default()
            .push(Reader { id, to });
        SettledWaiter {
            waiter: Waiter {
                rx: self.settled.subscribe(),
                key: call.to_string(),
                stopping: self.stopping.clone(),
            },
            call,
            reader: id,
            recorded: Some(recorded),
            wakeups: Arc::clone(self),
        }
    }

    fn lock_readers(&self) -> std::sync::MutexGuard<'_, HashMap<CallId, Vec<Reader>>> {
        // A panic elsewhere while the map was held leaves it whole: every change is one call.
        self.readers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Cancelled when the process's listener stops, at shutdown.
    pub(crate) fn stopping(&self) -> &CancellationToken {
        &self.stopping
    }

    /// The lease floors this process keeps.
    pub(crate) fn floors(&self) -> &QueueFloors {
        &self.floors
    }

    fn wake(&self, runner_ref: &str) {
        // No receiver means nobody is waiting: nothing to do.
        let _ = self.tx.send(Arc::from(runner_ref));
    }

    /// Hands a call as its completion recorded it to the readers waiting for it here.
    fn hand_recorded(&self, recorded: Arc<SettledCall>) {
        let readers = self.lock_readers().remove(&recorded.call.id);
        for reader in readers.into_iter().flatten() {
            // A reader that stopped waiting meanwhile drops it.
            let _ = reader.to.send(Arc::clone(&recorded));
        }
    }

    /// A `switchyard_calls` announcement: the floor first, then the waiters.
    fn announce(&self, payload: &str) {
        let notice = CallNotice::parse(payload);
        match notice {
            CallNotice::Any => self.floors.reset_all(),
            CallNotice::Requeued(runner_ref) => self.floors.reset(runner_ref),
            CallNotice::Queued(runner_ref, at) => self.floors.queued(runner_ref, at),
        }
        self.wake(notice.runner_ref());
    }

    fn wake_settled(&self, call: &str) {
        let _ = self.settled.send(Arc::from(call));
    }

    /// Every floor back to the beginning and every waiter looks again (after the listener
    /// reconnected: announcements may have been lost).
    fn wake_all(&self) {
        self.floors.reset_all();
        self.wake(ANY_RUNNER);
        self.wake_settled(ANY_RUNNER);
    }
}

impl Wakeups {
    /// A wake-up of this process's app, whose change has committed.
    pub(crate) fn wake_up(&self, wakeup: Wakeup) {
        match wakeup {
            Wakeup::Queued { runner, at } => {
                let runner = runner.to_string();
                self.floors.queued(&runner, at);
                self.wake(&runner);
            }
            Wakeup::Requeued(Some(runner)) => {
                let runner = runner.to_string();
                self.floors.reset(&runner);
                self.wake(&runner);
            }
            Wakeup::Requeued(None) => {
                self.floors.reset_all();
                self.wake(ANY_RUNNER);
            }
            Wakeup::Settled { call, recorded } => {
                if let Some(recorded) = recorded {
                    self.hand_recorded(Arc::from(recorded));
                }
                self.wake_settled(&call.to_string());
            }
        }
    }

    /// A notification another replica sent.
    fn deliver(&self, channel: &str, payload: &str) {
        if channel == SETTLED_CHANNEL {
            self.wake_settled(payload);
        } else {
            self.announce(payload);
        }
    }

    /// Whether a reader here waits for `call` to settle: only then does the statement that
    /// settles it read it back with its lineage, to hand over.
    pub(crate) fn waited_for(&self, call: CallId) -> bool {
        self.lock_readers().contains_key(&call)
    }
}

/// What one `switchyard_calls` payload announces.
#[derive(Debug, PartialEq, Eq)]
enum CallNotice<'a> {
    /// Calls of any runner were requeued.
    Any,
    /// Calls of this runner were requeued (queued again at their old submission time).
    Requeued(&'a str),
    /// A call of this runner submitted at this time was queued.
    Queued(&'a str, DateTime<Utc>),
}

impl<'a> CallNotice<'a> {
    /// Reads a payload; one it cannot read says only which runner (or, for `*`, any).
    fn parse(payload: &'a str) -> Self {
        if payload == ANY_RUNNER {
            return CallNotice::Any;
        }
        let submitted = payload.rsplit_once(' ').and_then(|(runner_ref, micros)| {
            let at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
            Some(CallNotice::Queued(runner_ref, at))
        });
        submitted.unwrap_or(CallNotice::Requeued(payload))
    }

    /// Whose waiters to wake (`*` for all).
    fn runner_ref(&self) -> &'a str {
        match self {
            CallNotice::Any => ANY_RUNNER,
            CallNotice::Requeued(runner_ref) | CallNotice::Queued(runner_ref, _) => runner_ref,
        }
    }
}

/// A reader's subscription to one call's settling: the wake-ups of [`Waiter`], and the call
/// as recorded when its completion is recorded in this process.
#[derive(Debug)]
pub(crate) struct SettledWaiter {
    waiter: Waiter,
    call: CallId,
    reader: u64,
    /// `None` once handed (or given up by the datastore's side).
    recorded: Option<oneshot::Receiver<Arc<SettledCall>>>,
    wakeups: Arc<Wakeups>,
}

impl SettledWaiter {
    /// Waits for the call to settle, or `deadline`. `Some`: its completion was recorded in
    /// this process, and this is the call as recorded. `None`: look at the call (a wake-up
    /// from another replica or for every reader, the deadline, the server stopping).
    pub(crate) async fn wait(&mut self, deadline: Instant) -> Option<Arc<SettledCall>> {
        let waiting = self.waiter.wait(deadline);
        let Some(recorded) = self.recorded.as_mut() else {
            waiting.await;
            return None;
        };
        let handed = tokio::select! {
            biased;
            handed = recorded => Some(handed.ok()),
            _ = waiting => None,
        };
        let handed = handed?;
        self.recorded = None;
        handed
    }
}

impl Drop for SettledWaiter {
    fn drop(&mut self) {
        if self.recorded.is_none() {
            // Handed: its entry went with the handing.
            return;
        }
        let mut readers = self.wakeups.lock_readers();
        if let Some(waiting) = readers.get_mut(&self.call) {
            waiting.retain(|reader| reader.id != self.reader);
            if waiting.is_empty() {
                readers.remove(&self.call);
            }
        }
    }
}

/// One long-poll's subscription.
#[derive(Debug)]
pub(crate) struct Waiter {
    rx: broadcast::Receiver<Arc<str>>,
    /// The runner reference (or call id) this waiter waits for.
    key: String,
    stopping: CancellationToken,
}

impl Waiter {
    /// Forgets the wake-ups received so far: a look that starts now sees what they announced.
    pub(crate) fn skip_received(&mut self) {
        while !matches!(
            self.rx.try_recv(),
            Err(broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed)
        ) {}
    }

    /// Waits for a wake-up addressed to this runner (or to all), or `deadline`. Returns false
    /// when the deadline passed or the server is shutting down.
    pub(crate) async fn wait(&mut self, deadline: Instant) -> bool {
        loop {
            let received = tokio::select! {
                _ = self.stopping.cancelled() => return false,
                received = tokio::time::timeout_at(deadline, self.rx.recv()) => received,
            };
            match received {
                Err(_) => return false,
                Ok(Ok(target)) if *target == *self.key || &*target == ANY_RUNNER => return true,
                Ok(Ok(_)) => {}
                // Missed some: one of them may have been ours.
                Ok(Err(RecvError::Lagged(_))) => return true,
                Ok(Err(RecvError::Closed)) => {
                    tokio::time::sleep_until(deadline).await;
                    return false;
                }
            }
        }
    }
}

/// The listener feeding an app's [`Wakeups`]: connected before the server starts answering
/// (so a long-poll never waits on a listener that is not there yet), then run until shutdown.
pub struct WakeupFeed {
    app: App,
    listener: Option<PgListener>,
}

impl WakeupFeed {
    /// Connects the listener on a connection of its own, outside the request pool (so request
    /// handling never waits behind it). A failure is logged and retried by [`WakeupFeed::run`].
    pub async fn connect(app: App) -> Self {
        let listener = match listen(&app).await {
            Ok(listener) => Some(listener),
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for new calls yet; device long-polls wait for their deadline until it works");
                None
            }
        };
        Self { app, listener }
    }

    /// Fans notifications out until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self { app, mut listener } = self;
        let wakeups = Arc::clone(&app.dispatch.announcer.local);
        let _stop_waiters = wakeups.stopping.clone().drop_guard();
        loop {
            let Some(active) = listener.as_mut() else {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(RECONNECT_PAUSE) => {}
                }
                match listen(&app).await {
                    Ok(connected) => {
                        listener = Some(connected);
                        wakeups.wake_all();
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot listen for new calls; retrying");
                        app.db().connection_lost();
                    }
                }
                continue;
            };
            let received = tokio::select! {
                _ = shutdown.cancelled() => return,
                received = active.try_recv() => received,
            };
            match received {
                // Sent by this process's datastore, which delivered it here already.
                Ok(Some(notification))
                    if notification.process_id() == app.dispatch.announcer.remote.sender_pid() => {}
                Ok(Some(notification)) => {
                    wakeups.deliver(notification.channel(), notification.payload());
                }
                // The connection was lost and is back (listening again): what was announced
                // meanwhile is gone, so every waiter looks again. Whatever took this
                // connection (a restart, terminated backends) may have taken the pool's too.
                Ok(None) => {
                    app.db().connection_lost();
                    wakeups.wake_all();
                }
                Err(e) => {
                    tracing::warn!(error = %e, "lost the listener for new calls; reconnecting");
                    app.db().connection_lost();
                    listener = None;
                }
            }
        }
    }
}

async fn listen(app: &App) -> Result<PgListener, sqlx::Error> {
    let own = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(app.db().pool().connect_options().as_ref().clone());
    let mut listener = PgListener::connect_with(&own).await?;
    listener
        .listen_all([CALLS_CHANNEL, SETTLED_CHANNEL])
        .await?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_call_is_announced_with_its_submission_time() {
        let at = DateTime::from_timestamp_micros(1_764_460_800_123_456).unwrap();
        assert_eq!(
            CallNotice::parse("device:0193a 1764460800123456"),
            CallNotice::Queued("device:0193a", at)
        );
        assert_eq!(CallNotice::parse("central").runner_ref(), "central");
        assert_eq!(
            CallNotice::parse("central"),
            CallNotice::Requeued("central")
        );
        assert_eq!(CallNotice::parse("*"), CallNotice::Any);
        // Without a readable time it is a runner reference, announcing a requeue.
        assert_eq!(
            CallNotice::parse("central soon"),
            CallNotice::Requeued("central soon")
        );
    }
}
