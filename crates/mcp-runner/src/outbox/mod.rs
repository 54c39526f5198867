//! The receipt outbox: a private SQLite database in which a device runner records, per call and
//! in this order, the start (while the server is asked to acknowledge it, and always before the
//! request is sent), the completion receipt (while it is uploaded) and the upload
//! acknowledgement. After a crash it says which calls were started but never finished and which
//! receipts the server has not acknowledged.
//!
//! Guarantees:
//! - The directory is created with mode 0700, and refused when it is wider, owned by someone
//!   else, bound to another device, or locked by another process. Its files are 0600.
//! - Every write is one transaction, in WAL mode. Starts, receipts and withdrawals are
//!   committed with `synchronous=FULL`: when the method returns `Ok`, what it recorded
//!   survives a crash or power loss. A settlement ([`Outbox::acknowledge`],
//!   [`Outbox::quarantine`]) does not wait for the disk (`synchronous=NORMAL`): it survives a
//!   crash of the process, and the next synced commit makes it durable. One lost to a power
//!   loss leaves its receipt `recorded`, so it is uploaded again and answered as before (the
//!   server records a receipt id once).
//! - At most [`CAPACITY`] entries live (started, recorded but unacknowledged, or quarantined);
//!   a start beyond that is refused with [`OutboxError::Full`]. A receipt is never refused and
//!   never dropped before the server has acknowledged it. Acknowledged entries are pruned, and
//!   quarantined ones after [`RETENTION`].
//! - Each call has at most one entry: a call can be started at most once through one outbox
//!   (a start taken back with [`Outbox::withdraw_start`] was never sent).
//! - A receipt the server refuses for good (its epoch fenced while the call moved on, an erased
//!   call, a call it does not know) is quarantined: kept for inspection until it expires, never
//!   uploaded again. Recovery asks the server which unacknowledged receipts those are
//!   (`device::recovery`).

mod dir;
mod error;
mod pins;
mod schema;

pub use error::OutboxError;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use switchyard_protocol::runner::{Completion, Epoch};
use switchyard_protocol::{CallId, DeviceId};
use uuid::Uuid;

/// Most entries alive at once.
pub const CAPACITY: usize = 64;
/// How long a quarantined receipt is kept, and how old an unacknowledged receipt may grow
/// before admission pauses.
pub const RETENTION: Duration = Duration::from_secs(60 * 60);

/// The database file inside the outbox directory.
const DATABASE_FILE: &str = "outbox.sqlite3";

/// An open, locked outbox. Methods block on disk I/O (each commit is fsync'd): call them from
/// blocking threads in async code.
#[derive(Debug)]
pub struct Outbox {
    dir: PathBuf,
    device_id: DeviceId,
    holder: Uuid,
    db: Mutex<Connection>,
    // Declared last so that it is released after the database is closed.
    _lock: dir::DirLock,
}

/// A completion receipt: what the runner reports for one call.
#[derive(Clone, Debug, PartialEq)]
pub struct Receipt {
    /// The receipt's id; uploading it twice records it once.
    pub receipt_id: Uuid,
    /// The call.
    pub call_id: CallId,
    /// The epoch the call was started (or, if never started, leased) under.
    pub epoch: Epoch,
    /// How the call ended, already redacted.
    pub completion: Completion,
}

/// A call whose start was recorded but whose receipt never was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartedCall {
    /// The call.
    pub call_id: CallId,
    /// The epoch it was started under.
    pub epoch: Epoch,
}

/// Where one call's entry stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryState {
    /// The start is recorded; the request may have been sent (once the server acknowledged
    /// the start).
    Started,
    /// The receipt is recorded and not yet acknowledged by the server.
    Recorded,
    /// The server acknowledged the receipt; the entry is deleted by the next start.
    Acknowledged,
    /// The server refused the receipt for good (stale epoch, erased call); kept, never
    /// uploaded, until it expires.
    Quarantined,
}

/// Whether the outbox can take another start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capacity {
    /// Room for `free` more starts.
    Open {
        /// Free entries.
        free: usize,
    },
    /// [`CAPACITY`] entries live: no start until some are acknowledged or expire.
    Full {
        /// Entries alive.
        live: usize,
    },
    /// A receipt has waited longer than [`RETENTION`] for its acknowledgement: the server is
    /// not taking receipts, so no new work starts until it does.
    Stale {
        /// Receipts waiting.
        unacknowledged: usize,
        /// Age of the oldest.
        oldest: Duration,
    },
}

impl Outbox {
    /// Opens the outbox in `dir` for `device_id`: creates the directory (0700) if missing,
    /// refuses one that is too open, not ours, in use by another process or bound to another
    /// device, and binds a new one to `device_id`.
    pub fn open(dir: impl AsRef<Path>, device_id: DeviceId) -> Result<Outbox, OutboxError> {
        let dir = dir.as_ref().to_owned();
        dir::prepare(&dir)?;
        let lock = dir::lock(&dir)?;
        let path = dir.join(DATABASE_FILE);
        // Created here with 0600 so SQLite never creates it with its default mode; the
        // write-ahead log and shared-memory files copy the database file's mode.
        drop(dir::create_private_file(&path)?);
        for suffix in ["-wal", "-shm"] {
            let mut name = path.clone().into_os_string();
            name.push(suffix);
            dir::restrict_if_present(Path::new(&name))?;
        }
        let mut connection = schema::open(&path)?;
        let holder = schema::bind(&mut connection, &dir, device_id, now_ms())?;
        Ok(Outbox {
            dir,
            device_id,
            holder,
            db: Mutex::new(connection),
            _lock: lock,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The device this outbox is bound to.
    pub fn device_id(&self) -> DeviceId {
        self.device_id
    }

    /// The runner's holder id for its runner lease, the same every time this directory is
    /// opened, so a restarted runner resumes its own lease.
    pub fn holder(&self) -> Uuid {
        self.holder
    }

    /// Says whether another start fits, counting neither acknowledged entries nor expired
    /// quarantined ones. It only reads, so asking before every lease costs no disk sync; those
    /// entries are deleted by the next start, whose commit is synced anyway.
    pub fn capacity(&self) -> Result<Capacity, OutboxError> {
        let now = now_ms();
        let mut db = self.db();
        let transaction = db.transaction_with_behavior(TransactionBehavior::Deferred)?;
        let live = live_entries(&transaction, now)?;
        let (unacknowledged, oldest): (i64, Option<i64>) = transaction
            .prepare_cached(
                "SELECT COUNT(*), MIN(recorded_at_ms) FROM entries WHERE state = 'recorded'",
            )?
            .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        transaction.commit()?;
        if live >= CAPACITY {
            return Ok(Capacity::Full { live });
        }
        if let Some(oldest) = oldest
            && now - oldest > retention_ms()
        {
            return Ok(Capacity::Stale {
                unacknowledged: usize::try_from(unacknowledged).unwrap_or(usize::MAX),
                oldest: Duration::from_millis(u64::try_from(now - oldest).unwrap_or(0)),
            });
        }
        Ok(Capacity::Open {
            free: CAPACITY - live,
        })
    }

    /// How many receipts wait for the server's acknowledgement (recorded, not yet answered):
    /// what the heartbeat reports as the outbox's depth. It only reads.
    pub fn unacknowledged_count(&self) -> Result<usize, OutboxError> {
        let count: i64 = self
            .db()
            .prepare_cached("SELECT COUNT(*) FROM entries WHERE state = 'recorded'")?
            .query_row([], |row| row.get(0))?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// Checkpoints the WAL and cuts its file to nothing (when no other connection reads it),
    /// then writes and syncs a small change: whether storage works again after a failure. The
    /// checkpoint comes first because the failed writes may have left the WAL holding the space
    /// a freed disk has again.
    pub fn probe(&self) -> Result<(), OutboxError> {
        let db = self.db();
        db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        db.prepare_cached("UPDATE binding SET checked_at_ms = ?1 WHERE singleton = 1")?
            .execute(params![now_ms()])?;
        Ok(())
    }

    /// Records the start of `call_id` under `epoch`. Must return `Ok` before the request is
    /// sent. Refused when the outbox is full or the call already has an entry.
    pub fn record_start(&self, call_id: CallId, epoch: Epoch) -> Result<(), OutboxError> {
        self.record_start_acknowledging(call_id, epoch, &[])
    }

    /// [`Outbox::record_start`] that also records, in the same transaction, that the server
    /// acknowledged the receipts `acknowledged` (their entries are deleted, as the start deletes
    /// every acknowledged entry): a device runner's acknowledgements wait for its next start
    /// instead of each taking a commit of its own. On an error nothing is recorded, neither.
    pub fn record_start_acknowledging(
        &self,
        call_id: CallId,
        epoch: Epoch,
        acknowledged: &[Uuid],
    ) -> Result<(), OutboxError> {
        let mut db = self.db();
        let transaction = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some(state) = entry_state(&transaction, call_id)? {
            return Err(OutboxError::AlreadyRecorded { call_id, state });
        }
        for receipt_id in acknowledged {
            transaction
                .prepare_cached("DELETE FROM entries WHERE receipt_id = ?1 AND state = 'recorded'")?
                .execute(params![receipt_id.to_string()])?;
        }
        let now = now_ms();
        transaction
            .prepare_cached(
                "DELETE FROM entries WHERE state = 'acknowledged'
                 OR (state = 'quarantined' AND settled_at_ms <= ?1)",
            )?
            .execute(params![now - retention_ms()])?;
        let live = live_entries(&transaction, now)?;
        if live >= CAPACITY {
            return Err(OutboxError::Full { live });
        }
        transaction
            .prepare_cached(
                "INSERT INTO entries (call_id, epoch, state, started_at_ms)
             VALUES (?1, ?2, 'started', ?3)",
            )?
            .execute(params![call_id.to_string(), epoch.0, now])?;
        transaction.commit()?;
        Ok(())
    }

    /// Takes back the start recorded for `call_id` under `epoch` when its request will not be
    /// sent after all (the server refused the start, or could not be asked): the call may be
    /// started again. An entry that has moved on (its receipt recorded) stays as it is.
    pub fn withdraw_start(&self, call_id: CallId, epoch: Epoch) -> Result<(), OutboxError> {
        self.db()
            .prepare_cached(
                "DELETE FROM entries WHERE call_id = ?1 AND epoch = ?2 AND state = 'started'",
            )?
            .execute(params![call_id.to_string(), epoch.0])?;
        Ok(())
    }

    /// Records the receipt for `call_id` under a new receipt id. A started call's entry moves
    /// to `recorded`; a call failed before its start gets a new entry (never refused, even when
    /// full). If the call already has a receipt, that receipt is returned unchanged, so a
    /// retried report uploads the same receipt.
    pub fn record_receipt(
        &self,
        call_id: CallId,
        epoch: Epoch,
        completion: &Completion,
    ) -> Result<Receipt, OutboxError> {
        self.record_receipt_with_id(Uuid::new_v4(), call_id, epoch, completion)
    }

    /// [`Outbox::record_receipt`] under the receipt id `receipt_id`, for a receipt that is
    /// uploaded while it is recorded. A receipt the call already has is returned unchanged.
    pub fn record_receipt_with_id(
        &self,
        receipt_id: Uuid,
        call_id: CallId,
        epoch: Epoch,
        completion: &Completion,
    ) -> Result<Receipt, OutboxError> {
        let now = now_ms();
        let mut db = self.db();
        let transaction = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let existing: Option<(i64, Option<String>, Option<String>)> = transaction
            .prepare_cached("SELECT epoch, receipt_id, completion FROM entries WHERE call_id = ?1")?
            .query_row(params![call_id.to_string()], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .optional()?;
        let receipt = match existing {
            Some((stored_epoch, Some(receipt_id), Some(completion))) => Receipt {
                receipt_id: schema::parse_uuid("receipt id", &receipt_id)?,
                call_id,
                epoch: Epoch(stored_epoch),
                completion: parse_completion(&completion)?,
            },
            Some((started_epoch, _, _)) => {
                let receipt = Receipt {
                    receipt_id,
                    call_id,
                    epoch: Epoch(started_epoch),
                    completion: completion.clone(),
                };
                transaction
                    .prepare_cached(
                        "UPDATE entries SET state = 'recorded', receipt_id = ?2, completion = ?3,
                         recorded_at_ms = ?4
                     WHERE call_id = ?1 AND state = 'started'",
                    )?
                    .execute(params![
                        call_id.to_string(),
                        receipt.receipt_id.to_string(),
                        completion_json(completion)?,
                        now
                    ])?;
                receipt
            }
            None => {
                let receipt = Receipt {
                    receipt_id,
                    call_id,
                    epoch,
                    completion: completion.clone(),
                };
                transaction
                    .prepare_cached(
                        "INSERT INTO entries (call_id, epoch, state, receipt_id, completion,
                         recorded_at_ms)
                     VALUES (?1, ?2, 'recorded', ?3, ?4, ?5)",
                    )?
                    .execute(params![
                        call_id.to_string(),
                        epoch.0,
                        receipt.receipt_id.to_string(),
                        completion_json(completion)?,
                        now
                    ])?;
                receipt
            }
        };
        transaction.commit()?;
        Ok(receipt)
    }

    /// Records that the server acknowledged `receipt_id` (applied it, or kept it as a late
    /// receipt). Acknowledging twice is fine.
    pub fn acknowledge(&self, receipt_id: Uuid) -> Result<(), OutboxError> {
        self.settle(receipt_id, "acknowledged")
    }

    /// Quarantines `receipt_id`: the server refused it for good, so it is never uploaded again;
    /// it is kept until it expires, for inspection.
    pub fn quarantine(&self, receipt_id: Uuid) -> Result<(), OutboxError> {
        self.settle(receipt_id, "quarantined")
    }

    /// Moves a recorded receipt to `state`, committed without a disk sync (see the module
    /// docs): a device's every upload settles its receipt, and a sync there would only make
    /// the server's next commit wait behind it on the same disk.
    fn settle(&self, receipt_id: Uuid, state: &'static str) -> Result<(), OutboxError> {
        let db = self.db();
        db.pragma_update(None, "synchronous", "NORMAL")?;
        let changed = db
            .prepare_cached(
                "UPDATE entries SET state = ?2, settled_at_ms = ?3
                 WHERE receipt_id = ?1 AND state IN ('recorded', ?2)",
            )
            .and_then(|mut update| {
                update.execute(params![receipt_id.to_string(), state, now_ms()])
            });
        // Every other write syncs: restored whatever the update did.
        db.pragma_update(None, "synchronous", "FULL")?;
        if changed? == 0 {
            return Err(OutboxError::NoSuchReceipt(receipt_id));
        }
        Ok(())
    }

    /// Calls started but without a receipt, oldest first: after a restart, these were cut off
    /// mid-call.
    pub fn unfinished(&self) -> Result<Vec<StartedCall>, OutboxError> {
        let db = self.db();
        let mut statement =
            db.prepare("SELECT call_id, epoch FROM entries WHERE state = 'started' ORDER BY seq")?;
        let rows = statement.query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
        })?;
        let mut calls = Vec::new();
        for row in rows {
            let (call_id, epoch) = row?;
            calls.push(StartedCall {
                call_id: schema::parse_uuid("call id", &call_id)?.into(),
                epoch: Epoch(epoch),
            });
        }
        Ok(calls)
    }

    /// Receipts recorded but not acknowledged (nor quarantined), oldest first.
    pub fn unacknowledged(&self) -> Result<Vec<Receipt>, OutboxError> {
        let db = self.db();
        let mut statement = db.prepare(
            "SELECT receipt_id, call_id, epoch, completion FROM entries
             WHERE state = 'recorded' ORDER BY seq",
        )?;
        let rows = statement.query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, String>(3)?,
            ))
        })?;
        let mut receipts = Vec::new();
        for row in rows {
            let (receipt_id, call_id, epoch, completion) = row?;
            receipts.push(Receipt {
                receipt_id: schema::parse_uuid("receipt id", &receipt_id)?,
                call_id: schema::parse_uuid("call id", &call_id)?.into(),
                epoch: Epoch(epoch),
                completion: parse_completion(&completion)?,
            });
        }
        Ok(receipts)
    }

    /// Where `call_id`'s entry stands; `None` when it has none (never started here, or pruned).
    pub fn entry_state(&self, call_id: CallId) -> Result<Option<EntryState>, OutboxError> {
        entry_state(&self.db(), call_id)
    }

    fn db(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave the database half-written: every change
        // is one transaction, rolled back when dropped uncommitted.
        self.db.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn entry_state(db: &Connection, call_id: CallId) -> Result<Option<EntryState>, OutboxError> {
    let state: Option<String> = db
        .prepare_cached("SELECT state FROM entries WHERE call_id = ?1")?
        .query_row(params![call_id.to_string()], |row| row.get(0))
        .optional()?;
    state
        .map(|state| match state.as_str() {
            "started" => Ok(EntryState::Started),
            "recorded" => Ok(EntryState::Recorded),
            "acknowledged" => Ok(EntryState::Acknowledged),
            "quarantined" => Ok(EntryState::Quarantined),
            other => Err(OutboxError::Corrupt {
                what: "entry state",
                detail: format!("unknown state `{other}`"),
            }),
        })
        .transpose()
}

/// Entries alive at `now`: started, recorded, or quarantined and not yet expired.
fn live_entries(db: &Connection, now: i64) -> Result<usize, OutboxError> {
    let count: i64 = db
        .prepare_cached(
            "SELECT COUNT(*) FROM entries WHERE state IN ('started', 'recorded')
             OR (state = 'quarantined' AND settled_at_ms > ?1)",
        )?
        .query_row(params![now - retention_ms()], |row| row.get(0))?;
    Ok(usize::try_from(count).unwrap_or(0))
}

fn completion_json(completion: &Completion) -> Result<String, OutboxError> {
    serde_json::to_string(completion).map_err(|error| OutboxError::Corrupt {
        what: "completion",
        detail: error.to_string(),
    })
}

fn parse_completion(text: &str) -> Result<Completion, OutboxError> {
    serde_json::from_str(text).map_err(|error| OutboxError::Corrupt {
        what: "completion",
        detail: error.to_string(),
    })
}

fn retention_ms() -> i64 {
    i64::try_from(RETENTION.as_millis()).unwrap_or(i64::MAX)
}

/// Milliseconds since the Unix epoch (0 for a clock set before 1970).
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_protocol::api::CallError;

    /// The WAL file's length, 0 when there is none.
    fn wal_len(dir: &Path) -> u64 {
        std::fs::metadata(dir.join("outbox.sqlite3-wal"))
            .map(|m| m.len())
            .unwrap_or(0)
    }

    /// One call's start, receipt and acknowledgement: seven WAL pages in three commits.
    fn one_call(outbox: &Outbox) {
        let failed = Completion::Failed {
            error: CallError::new("tool_error", "no"),
        };
        let call = CallId::new();
        outbox.record_start(call, Epoch(1)).expect("start");
        let receipt = outbox
            .record_receipt(call, Epoch(1), &failed)
            .expect("receipt");
        outbox.acknowledge(receipt.receipt_id).expect("acknowledge");
    }

    /// The connection's `synchronous` setting: 2 is FULL.
    fn synchronous(outbox: &Outbox) -> i64 {
        outbox
            .db()
            .pragma_query_value(None, "synchronous", |row| row.get(0))
            .expect("read synchronous")
    }

    #[test]
    fn every_write_after_a_settlement_is_synced_again() {
        let dir = std::env::temp_dir().join(format!("switchyard-outbox-{}", Uuid::new_v4()));
        let outbox = Outbox::open(&dir, DeviceId::new()).expect("open");
        assert_eq!(
            synchronous(&outbox),
            2,
            "an opened outbox syncs every commit"
        );
        let call = CallId::new();
        outbox.record_start(call, Epoch(1)).expect("start");
        let failed = Completion::Failed {
            error: CallError {
                code: "tool_error".to_owned(),
                message: "no".to_owned(),
            },
        };
        let receipt = outbox
            .record_receipt(call, Epoch(1), &failed)
            .expect("receipt");
        outbox.acknowledge(receipt.receipt_id).expect("acknowledge");
        assert_eq!(synchronous(&outbox), 2, "synced again after a settlement");
        assert!(matches!(
            outbox.quarantine(Uuid::new_v4()),
            Err(OutboxError::NoSuchReceipt(_))
        ));
        assert_eq!(
            synchronous(&outbox),
            2,
            "synced again after a refused settlement"
        );
        drop(outbox);
        std::fs::remove_dir_all(&dir).expect("remove the outbox");
    }

    #[test]
    fn the_depth_counts_receipts_waiting_for_their_answer_only() {
        let dir = std::env::temp_dir().join(format!("switchyard-outbox-{}", Uuid::new_v4()));
        let outbox = Outbox::open(&dir, DeviceId::new()).expect("open");
        let failed = Completion::Failed {
            error: CallError {
                code: "tool_error".to_owned(),
                message: "no".to_owned(),
            },
        };
        let [started, waiting, answered] = [CallId::new(), CallId::new(), CallId::new()];
        for call in [started, waiting, answered] {
            outbox.record_start(call, Epoch(1)).expect("start");
        }
        outbox
            .record_receipt(waiting, Epoch(1), &failed)
            .expect("receipt");
        let receipt = outbox
            .record_receipt(answered, Epoch(1), &failed)
            .expect("receipt");
        assert_eq!(outbox.unacknowledged_count().expect("count"), 2);
        outbox.acknowledge(receipt.receipt_id).expect("acknowledge");
        assert_eq!(outbox.unacknowledged_count().expect("count"), 1);
        drop(outbox);
        std::fs::remove_dir_all(&dir).expect("remove the outbox");
    }

    #[test]
    fn the_wal_stays_near_one_megabyte_and_a_probe_gives_its_space_back() {
        let dir = std::env::temp_dir().join(format!("switchyard-outbox-{}", Uuid::new_v4()));
        let outbox = Outbox::open(&dir, DeviceId::new()).expect("open");
        let mut largest = 0;
        // About 2,800 WAL pages: past SQLite's default of 1,000 before a checkpoint.
        for _ in 0..400 {
            one_call(&outbox);
            largest = largest.max(wal_len(&dir));
        }
        // 256 pages and the commit that crossed them, at 4,120 bytes a page.
        let peak = 1_100_000;
        assert!(largest <= peak, "the WAL reached {largest} bytes");
        outbox.probe().expect("probe");
        assert!(
            wal_len(&dir) <= 64 * 1024,
            "after a probe the WAL holds {} bytes",
            wal_len(&dir)
        );
        drop(outbox);
        std::fs::remove_dir_all(&dir).expect("remove the outbox");
    }

    #[test]
    fn a_wal_grown_while_a_reader_held_it_is_cut_back_once_it_can_restart() {
        let dir = std::env::temp_dir().join(format!("switchyard-outbox-{}", Uuid::new_v4()));
        let outbox = Outbox::open(&dir, DeviceId::new()).expect("open");
        one_call(&outbox);
        // Another connection's read snapshot keeps every checkpoint from restarting the WAL.
        let reader = Connection::open(dir.join("outbox.sqlite3")).expect("reader");
        reader.execute_batch("BEGIN").expect("begin");
        let _: i64 = reader
            .query_row("SELECT COUNT(*) FROM entries", [], |row| row.get(0))
            .expect("read");
        for _ in 0..150 {
            one_call(&outbox);
        }
        let limit = u64::try_from(schema::WAL_SIZE_LIMIT).expect("a positive limit");
        assert!(wal_len(&dir) > limit, "the WAL grew to {}", wal_len(&dir));
        reader.execute_batch("COMMIT").expect("end the read");
        drop(reader);
        for _ in 0..100 {
            one_call(&outbox);
        }
        assert!(
            wal_len(&dir) <= limit,
            "the WAL still holds {} bytes",
            wal_len(&dir)
        );
        drop(outbox);
        std::fs::remove_dir_all(&dir).expect("remove the outbox");
    }
}
