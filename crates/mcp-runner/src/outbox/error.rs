//! Why the outbox refused to open or could not record something. Every message says what to
//! fix where a person can fix it.

use super::EntryState;
use std::path::PathBuf;
use switchyard_protocol::{CallId, DeviceId};

/// An outbox failure.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// The directory or one of its files could not be created, inspected or opened.
    #[error("outbox directory `{}`: {action} failed: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The operating-system error.
        #[source]
        source: std::io::Error,
    },
    /// The path exists but is not a directory.
    #[error("outbox directory `{}` exists but is not a directory", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// Other users may read or enter the directory.
    #[error(
        "outbox directory `{path}` has mode {mode:04o}, so other users may read it; it must be \
         private to you: run `chmod 700 {path}`",
        path = path.display()
    )]
    TooOpen {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Somebody else owns the directory.
    #[error(
        "outbox directory `{}` is owned by uid {owner}, not by you (uid {you}); use a directory \
         you own",
        path.display()
    )]
    NotOwned {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The runner's effective uid.
        you: u32,
    },
    /// Another process holds the directory's lock.
    #[error(
        "outbox directory `{}` is in use by another runner process (its lock file `{}` is held); \
         stop that runner first, or give this one its own directory",
        path.display(),
        lock.display()
    )]
    Locked {
        /// The directory.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The directory belongs to another device.
    #[error(
        "outbox directory `{}` belongs to device {bound}, not to device {requested}; give each \
         device its own directory",
        path.display()
    )]
    OtherDevice {
        /// The directory.
        path: PathBuf,
        /// The device it is bound to.
        bound: DeviceId,
        /// The device that tried to open it.
        requested: DeviceId,
    },
    /// The database was written by a newer runner.
    #[error(
        "outbox database `{}` has schema version {found}; this runner understands up to \
         {supported}: run a newer switchyard-mcp-runner",
        path.display()
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
        /// What this build writes.
        supported: i64,
    },
    /// SQLite failed (disk full, I/O error, corruption).
    #[error("the outbox database failed: {0}")]
    Storage(#[from] rusqlite::Error),
    /// A stored row could not be read back.
    #[error("the outbox database holds an unreadable {what}: {detail}")]
    Corrupt {
        /// Which column.
        what: &'static str,
        /// Why.
        detail: String,
    },
    /// No room for another start ack: admission must pause until receipts are acknowledged.
    #[error(
        "the outbox holds {live} receipts, its limit; no new call may start until some are acknowledged"
    )]
    Full {
        /// Entries alive.
        live: usize,
    },
    /// The call already has an entry: it was started (or reported) by this runner before.
    #[error("call {call_id} already has an outbox entry ({state:?}); it is never started twice")]
    AlreadyRecorded {
        /// The call.
        call_id: CallId,
        /// Where its entry stands.
        state: EntryState,
    },
    /// The thread running an outbox operation ended before the operation did (it panicked, or
    /// the runtime is shutting down): whether it was recorded is not known.
    #[error("an outbox operation was interrupted: {0}")]
    Interrupted(String),
    /// An acknowledgement or quarantine for a receipt the outbox does not hold.
    #[error("the outbox holds no receipt {0}")]
    NoSuchReceipt(uuid::Uuid),
}
