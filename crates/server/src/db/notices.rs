//! Announcements of new and requeued calls and of recorded completions, sent after the change committed rather
//! than with it. A `NOTIFY` inside a transaction takes one database-wide lock from before its
//! commit until after the commit's WAL flush, so every notifying transaction would commit
//! alone: no group commit for the two commits every call makes, and a queue of waiters behind
//! the lock as soon as flushes slow down. Sent afterwards, by one task on a connection of its
//! own, they cost a statement per batch whose commit does not wait for a flush (a wake-up needs
//! no durability), and they still reach listeners only after the change they announce is
//! visible.
//!
//! The process that made the change does not wait for its own notification: the app installs
//! a local delivery ([`Notices::deliver_locally`]) that hears every notice as soon as it is
//! queued — a completion with the call as its statement recorded it, when it read it — and
//! its listener skips notifications sent from [`Notices::sender_pid`]. Other replicas hear
//! them through PostgreSQL.
//!
//! A notice that cannot be sent is lost for the other replicas; the next batch then also
//! announces `*` on the calls channel, which sends every runner back to look from the
//! beginning of its queue.

use super::SettledCall;
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

/// Where notices go inside this process.
pub(crate) trait LocalDelivery: Send + Sync {
    /// A notice on `channel`, with the call as its completion recorded it when it was read.
    fn deliver(&self, channel: &str, payload: &str, recorded: Option<Arc<SettledCall>>);
    /// Whether a reader here waits for `call` to settle: only then does its completion read
    /// the call's lineage to hand over.
    fn waited_for(&self, call: uuid::Uuid) -> bool;
}

/// The sender of one datastore (shared by its clones); its task starts with the first notice.
#[derive(Default)]
pub(crate) struct Notices {
    tx: OnceLock<mpsc::UnboundedSender<Notice>>,
    local: OnceLock<Arc<dyn LocalDelivery>>,
    /// The backend process id of the connection notices are sent on (0 before it connects).
    pid: AtomicU32,
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notices")
            .field("local", &self.local.get().is_some())
            .field("pid", &self.pid)
            .finish()
    }
}

impl Notices {
    /// Delivers every notice to `deliver` too, as soon as it is queued. Only the first
    /// delivery installed counts.
    pub(crate) fn deliver_locally(&self, deliver: Arc<dyn LocalDelivery>) {
        let _ = self.local.set(deliver);
    }

    /// Whether a reader in this process waits for `call` to settle.
    pub(crate) fn waited_for(&self, call: uuid::Uuid) -> bool {
        self.local.get().is_some_and(|local| local.waited_for(call))
    }

    /// The backend process id notices are sent from (0 before the first is sent).
    pub(crate) fn sender_pid(&self) -> u32 {
        self.pid.load(Ordering::Relaxed)
    }

    /// Announces `payload` on `channel`, after what it announces committed: here at once, to
    /// other processes through `pool`'s database.
    pub(crate) fn send(self: &Arc<Self>, pool: &PgPool, channel: &'static str, payload: String) {
        self.send_with(pool, channel, payload, None);
    }

    /// Announces the committed completion of `call` on [`SETTLED_CHANNEL`]; this process's
    /// delivery is handed `recorded` as well.
    pub(crate) fn send_settled(
        self: &Arc<Self>,
        pool: &PgPool,
        call: uuid::Uuid,
        recorded: Option<SettledCall>,
    ) {
        self.send_with(
            pool,
            SETTLED_CHANNEL,
            call.to_string(),
            recorded.map(Arc::new),
        );
    }

    fn send_with(
        self: &Arc<Self>,
        pool: &PgPool,
        channel: &'static str,
        payload: String,
        recorded: Option<Arc<SettledCall>>,
    ) {
        if let Some(local) = self.local.get() {
            local.deliver(channel, &payload, recorded);
        }
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run(pool.clone(), Arc::downgrade(self), rx));
            tx
        });
        // The task ends only when every sender is gone.
        let _ = tx.send((channel, payload));
    }
}

/// Sends what is queued, a batch per statement, until the datastore is dropped.
async fn run(
    pool: PgPool,
    notices: std::sync::Weak<Notices>,
    mut rx: mpsc::UnboundedReceiver<Notice>,
) {
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
            None => match connect(&pool, &notices).await {
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
async fn connect(
    pool: &PgPool,
    notices: &std::sync::Weak<Notices>,
) -> Result<PgConnection, sqlx::Error> {
    let mut conn = PgConnection::connect_with(&pool.connect_options()).await?;
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut conn)
        .await?;
    if let Some(notices) = notices.upgrade() {
        notices
            .pid
            .store(u32::try_from(pid).unwrap_or(0), Ordering::Relaxed);
    }
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
