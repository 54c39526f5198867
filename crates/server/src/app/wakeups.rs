//! Wake-ups for long-polling device runners, and for callers waiting for a call to settle.
//! One task per server process listens on `switchyard_calls` (the payload is the runner
//! reference of a new or requeued call, or `*` for any runner) and on `switchyard_settled`
//! (the id of a call a runner's report settled) and fans each notification out to the
//! long-polls waiting in this process: a call submitted to any replica wakes its runner's
//! long-poll on every replica at once, a completion recorded by any replica wakes the readers
//! waiting for that call, and waiting costs the database nothing.
//!
//! Notifications are transient: while the listener is disconnected they are lost. After every
//! reconnection all waiters are woken to look again, so a lost notification delays nothing
//! beyond that moment.

use super::App;
use sqlx::postgres::{PgListener, PgPoolOptions};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The channel `call_insert` and the sweeper notify.
const CALLS_CHANNEL: &str = "switchyard_calls";
/// The channel a recorded completion notifies, with the call's id.
const SETTLED_CHANNEL: &str = "switchyard_settled";
/// The payload that wakes every waiter.
const ANY_RUNNER: &str = "*";
/// Wake-ups buffered per waiter; a waiter that falls further behind just looks again.
const CAPACITY: usize = 256;
/// Pause before reconnecting after a listener error.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// The fan-out point of one server process.
#[derive(Debug)]
pub struct Wakeups {
    tx: broadcast::Sender<Arc<str>>,
    /// Calls settled, by id.
    settled: broadcast::Sender<Arc<str>>,
    /// Cancelled when the server shuts down: waiting long-polls answer at once, so they do
    /// not hold up the graceful shutdown.
    stopping: CancellationToken,
}

impl Default for Wakeups {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(CAPACITY).0,
            settled: broadcast::channel(CAPACITY).0,
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
    pub(crate) fn settled_waiter(&self, call: uuid::Uuid) -> Waiter {
        Waiter {
            rx: self.settled.subscribe(),
            key: call.to_string(),
            stopping: self.stopping.clone(),
        }
    }

    fn wake(&self, runner_ref: &str) {
        // No receiver means nobody is waiting: nothing to do.
        let _ = self.tx.send(Arc::from(runner_ref));
    }

    fn wake_settled(&self, call: &str) {
        let _ = self.settled.send(Arc::from(call));
    }

    /// Every waiter looks again (after the listener reconnected).
    fn wake_all(&self) {
        self.wake(ANY_RUNNER);
        self.wake_settled(ANY_RUNNER);
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
        let wakeups = Arc::clone(&app.wakeups);
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
                    Err(e) => tracing::warn!(error = %e, "cannot listen for new calls; retrying"),
                }
                continue;
            };
            let received = tokio::select! {
                _ = shutdown.cancelled() => return,
                received = active.try_recv() => received,
            };
            match received {
                Ok(Some(notification)) if notification.channel() == SETTLED_CHANNEL => {
                    wakeups.wake_settled(notification.payload())
                }
                Ok(Some(notification)) => wakeups.wake(notification.payload()),
                // The connection was lost and is back (listening again): what was announced
                // meanwhile is gone, so every waiter looks again.
                Ok(None) => wakeups.wake_all(),
                Err(e) => {
                    tracing::warn!(error = %e, "lost the listener for new calls; reconnecting");
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
