//! Announcements of new and requeued calls and of recorded completions, sent after the change committed rather
//! than with it. A `NOTIFY` inside a transaction takes one database-wide lock from before its
//! commit until after the commit's WAL flush, so every notifying transaction would commit
//! alone: no group commit for the two commits every call makes, and a queue of waiters behind
//! the lock as soon as flushes slow down. Sent afterwards, by one task, they cost a statement
//! per batch whose commit does not wait for a flush (a wake-up needs no durability), and they
//! still reach listeners only after the change they announce is visible.
//!
//! A notice that cannot be sent is lost; the next batch then also announces `*` on the calls
//! channel, which sends every runner back to look from the beginning of its queue.

use sqlx::PgPool;
use std::sync::OnceLock;
use tokio::sync::mpsc;

/// The channel of new and requeued calls (see `app::wakeups`).
pub(crate) const CALLS_CHANNEL: &str = "switchyard_calls";
/// The channel of recorded completions, with the call's id.
pub(crate) const SETTLED_CHANNEL: &str = "switchyard_settled";
/// The payload on [`CALLS_CHANNEL`] that concerns every runner.
pub(crate) const ANY_RUNNER: &str = "*";
/// Notices sent in one statement at most.
const MAX_BATCH: usize = 512;

/// One notice: its channel and payload.
type Notice = (&'static str, String);

/// The sender of one datastore (shared by its clones); its task starts with the first notice.
#[derive(Debug, Default)]
pub(crate) struct Notices {
    tx: OnceLock<mpsc::UnboundedSender<Notice>>,
}

impl Notices {
    /// Queues `payload` on `channel`, to be sent on `pool` after what it announces committed.
    pub(crate) fn send(&self, pool: &PgPool, channel: &'static str, payload: String) {
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run(pool.clone(), rx));
            tx
        });
        // The task ends only when every sender is gone.
        let _ = tx.send((channel, payload));
    }
}

/// Sends what is queued, a batch per statement, until the datastore is dropped.
async fn run(pool: PgPool, mut rx: mpsc::UnboundedReceiver<Notice>) {
    let mut lost_some = false;
    let mut batch = Vec::new();
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        if lost_some {
            batch.push((CALLS_CHANNEL, ANY_RUNNER.to_owned()));
        }
        let (channels, payloads): (Vec<&str>, Vec<String>) = batch.drain(..).unzip();
        let sent = sqlx::query(
            "SELECT set_config('synchronous_commit', 'off', true), count(pg_notify(c, p))
             FROM unnest($1::text[], $2::text[]) AS n(c, p)",
        )
        .bind(channels)
        .bind(payloads)
        .execute(&pool)
        .await;
        lost_some = match sent {
            Ok(_) => false,
            Err(e) => {
                tracing::warn!(error = %e, "cannot announce new calls and completions; runners look again once it works");
                true
            }
        };
    }
}
