//! Wake-ups sent to the other replicas, after the change they announce committed rather than
//! with it. A `NOTIFY` inside a transaction takes one database-wide lock from before its
//! commit until after the commit's WAL flush, so every notifying transaction would commit
//! alone: no group commit for the two commits every call makes, and a queue of waiters behind
//! the lock as soon as flushes slow down. Sent afterwards, by one task on a connection of its
//! own, they cost a statement per batch whose commit does not wait for a flush (a wake-up needs
//! no durability), and they still reach listeners only after the change they announce is
//! visible.
//!
//! This process does not wait for its own notifications: [`Announcer::send`] wakes its waiters
//! at once (handing a settled call to its readers as recorded), and its listener skips
//! notifications sent from [`Notices::sender_pid`].
//!
//! A notice that cannot be sent is lost for the other replicas; the next batch then also
//! announces `*` on the calls channel, which sends every runner back to look from the
//! beginning of its queue.

use super::wakeups::Wakeups;
use crate::db::Wakeup;
use sqlx::postgres::PgConnection;
use sqlx::{Connection, PgPool};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::mpsc;

/// The channel of new and requeued calls (see `app::wakeups`).
pub(crate) const CALLS_CHANNEL: &str = "switchyard_calls";
/// The channel of recorded completions, with the call's id.
pub(crate) const SETTLED_CHANNEL: &str = "switchyard_settled";
/// The payload on [`CALLS_CHANNEL`] that concerns every runner.
pub(crate) const ANY_RUNNER: &str = "*";
/// Notices sent in one statement at most.
const MAX_BATCH: usize = 512;
/// Pause before connecting again after the connection failed.
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);

/// One notice: its channel and payload.
type Notice = (&'static str, String);

/// The sender of one app (shared by its clones); its task starts with the first notice.
#[derive(Debug)]
pub(crate) struct Notices {
    pool: PgPool,
    tx: OnceLock<mpsc::UnboundedSender<Notice>>,
    /// The backend process id of the connection notices are sent on (0 before it connects).
    pid: Arc<AtomicU32>,
}

impl Notices {
    /// A sender on `pool`'s database (a connection of its own, opened with the first notice).
    pub(crate) fn new(pool: PgPool) -> Self {
        Self {
            pool,
            tx: OnceLock::new(),
            pid: Arc::default(),
        }
    }

    /// The backend process id notices are sent from (0 before the first is sent).
    pub(crate) fn sender_pid(&self) -> u32 {
        self.pid.load(Ordering::Relaxed)
    }

    /// Announces `payload` on `channel` to the other processes.
    fn send(&self, channel: &'static str, payload: String) {
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run(self.pool.clone(), Arc::clone(&self.pid), rx));
            tx
        });
        // The task ends only when every sender is gone.
        let _ = tx.send((channel, payload));
    }
}

/// Sends the wake-ups of committed changes: to this process's waiters at once, to the other
/// replicas through PostgreSQL.
#[derive(Debug)]
pub(crate) struct Announcer {
    /// This process's waiters.
    pub(crate) local: Arc<Wakeups>,
    /// The other replicas'.
    pub(crate) remote: Notices,
}

impl Announcer {
    /// Sends `wakeups`, whose change has committed.
    pub(crate) fn send(&self, wakeups: Vec<Wakeup>) {
        for wakeup in wakeups {
            let (channel, payload) = match &wakeup {
                Wakeup::Queued { runner, at } => {
                    (CALLS_CHANNEL, format!("{runner} {}", at.timestamp_micros()))
                }
                Wakeup::Requeued(Some(runner)) => (CALLS_CHANNEL, runner.to_string()),
                Wakeup::Requeued(None) => (CALLS_CHANNEL, ANY_RUNNER.to_owned()),
                Wakeup::Settled { call, .. } => (SETTLED_CHANNEL, call.to_string()),
            };
            self.local.wake_up(wakeup);
            self.remote.send(channel, payload);
        }
    }
}

/// Sends what is queued, a batch per statement, until the app is dropped.
async fn run(pool: PgPool, pid: Arc<AtomicU32>, mut rx: mpsc::UnboundedReceiver<Notice>) {
    let mut connection: Option<PgConnection> = None;
    let mut lost_some = false;
    let mut batch = Vec::new();
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        if lost_some {
            batch.push((CALLS_CHANNEL, ANY_RUNNER.to_owned()));
        }
        let (channels, payloads): (Vec<&str>, Vec<String>) = batch.drain(..).unzip();
        let sent = match connection.as_mut() {
            Some(conn) => send_batch(conn, &channels, &payloads).await,
            None => match connect(&pool, &pid).await {
                Ok(mut conn) => {
                    let sent = send_batch(&mut conn, &channels, &payloads).await;
                    connection = Some(conn);
                    sent
                }
                Err(e) => Err(e),
            },
        };
        lost_some = match sent {
            Ok(()) => false,
            Err(e) => {
                tracing::warn!(error = %e, "cannot announce new calls and completions to other replicas; their runners look again once it works");
                if let Some(conn) = connection.take() {
                    let _ = conn.close().await;
                }
                tokio::time::sleep(RECONNECT_PAUSE).await;
                true
            }
        };
    }
}

/// A connection of the sender's own, opened with the pool's options but outside it (a pool
/// connection detached for good would keep its place in the pool), whose process id the
/// datastore's listener recognizes.
async fn connect(pool: &PgPool, sender_pid: &AtomicU32) -> Result<PgConnection, sqlx::Error> {
    let mut conn = PgConnection::connect_with(&pool.connect_options()).await?;
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut conn)
        .await?;
    sender_pid.store(u32::try_from(pid).unwrap_or(0), Ordering::Relaxed);
    Ok(conn)
}

async fn send_batch(
    conn: &mut PgConnection,
    channels: &[&str],
    payloads: &[String],
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "SELECT set_config('synchronous_commit', 'off', true), count(pg_notify(c, p))
         FROM unnest($1::text[], $2::text[]) AS n(c, p)",
    )
    .bind(channels)
    .bind(payloads)
    .execute(conn)
    .await?;
    Ok(())
}
