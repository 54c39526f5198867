//! The outbox database: opening it durably (WAL, `synchronous=FULL`) with its WAL kept small
//! (a checkpoint every 256 pages, about 1 MB; a file grown past 2 MB while checkpoints could
//! not run is cut back), its schema, and the binding row that ties a directory to one device
//! and keeps the runner's holder id.
//!
//! The bundled SQLite is built to sync with `fdatasync` (`.cargo/config.toml` says why): with
//! `fsync` every synced commit also wrote the file's times, a journal commit that a
//! PostgreSQL on the same disk then waited behind.

use super::error::OutboxError;
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::path::Path;
use switchyard_protocol::DeviceId;
use uuid::Uuid;

/// The schema version this build writes (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 1;

/// WAL pages after which a commit checkpoints (SQLite's default is 1,000: 4 MB of WAL), so the
/// WAL file peaks near 1.07 MB. On a nearly full disk a WAL at the default size took all the
/// space a freed disk had, and its checkpoint, which had to grow the database by a page, could
/// then never run: every write failed for good.
const WAL_CHECKPOINT_PAGES: i64 = 256;

/// The size, in bytes, a WAL file is cut back to when it is reset after a checkpoint: above the
/// peak of [`WAL_CHECKPOINT_PAGES`], so that a normal cycle never truncates (a size change is a
/// journal commit of the file system), while space taken when checkpoints could not run (a
/// reader holding an old snapshot) is given back.
pub(super) const WAL_SIZE_LIMIT: i64 = 2 << 20;

/// Tables. `entries` holds one row per call, moving `started` → `recorded` → `acknowledged`
/// (or `quarantined`); a call failed before its start enters as `recorded`. `spec_pins` holds,
/// per connection, the digest of the launch spec this device last ran (`outbox::pins`).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS binding (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    device_id TEXT NOT NULL,
    holder TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    checked_at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    call_id TEXT NOT NULL UNIQUE,
    epoch INTEGER NOT NULL,
    state TEXT NOT NULL
        CHECK (state IN ('started', 'recorded', 'acknowledged', 'quarantined')),
    started_at_ms INTEGER,
    receipt_id TEXT UNIQUE,
    completion TEXT,
    recorded_at_ms INTEGER,
    settled_at_ms INTEGER,
    CHECK ((state = 'started') = (receipt_id IS NULL)),
    CHECK ((receipt_id IS NULL) = (completion IS NULL))
);
CREATE TABLE IF NOT EXISTS spec_pins (
    connection_id TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    pinned_at_ms INTEGER NOT NULL
);
";

/// Opens the database file at `path` (already created with mode 0600), in WAL mode with every
/// commit fsync'd, and brings its schema up to date.
pub(super) fn open(path: &Path) -> Result<Connection, OutboxError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NOFOLLOW
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut connection = Connection::open_with_flags(path, flags)?;
    let mode: String =
        connection.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(OutboxError::Corrupt {
            what: "journal mode",
            detail: format!("SQLite kept journal mode `{mode}` instead of WAL"),
        });
    }
    // FULL: a receipt the outbox said it recorded survives a power loss, not only a crash.
    connection.pragma_update(None, "synchronous", "FULL")?;
    let pages: i64 = connection.pragma_update_and_check(
        None,
        "wal_autocheckpoint",
        WAL_CHECKPOINT_PAGES,
        |row| row.get(0),
    )?;
    let limit: i64 =
        connection.pragma_update_and_check(None, "journal_size_limit", WAL_SIZE_LIMIT, |row| {
            row.get(0)
        })?;
    if (pages, limit) != (WAL_CHECKPOINT_PAGES, WAL_SIZE_LIMIT) {
        return Err(OutboxError::Corrupt {
            what: "WAL bounds",
            detail: format!(
                "SQLite kept a checkpoint every {pages} pages and a WAL limit of {limit} bytes"
            ),
        });
    }
    let found: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if found > SCHEMA_VERSION {
        return Err(OutboxError::NewerSchema {
            path: path.to_owned(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    transaction.execute_batch(SCHEMA)?;
    transaction.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    transaction.commit()?;
    Ok(connection)
}

/// Binds the database to `device_id` on first use, refuses another device, and returns the
/// runner's holder id (created once, kept for good).
pub(super) fn bind(
    connection: &mut Connection,
    dir: &Path,
    device_id: DeviceId,
    now_ms: i64,
) -> Result<Uuid, OutboxError> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let existing: Option<(String, String)> = transaction
        .query_row(
            "SELECT device_id, holder FROM binding WHERE singleton = 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?;
    let holder = match existing {
        Some((bound, holder)) => {
            let bound: DeviceId = parse_uuid("device id", &bound)?.into();
            if bound != device_id {
                return Err(OutboxError::OtherDevice {
                    path: dir.to_owned(),
                    bound,
                    requested: device_id,
                });
            }
            parse_uuid("holder id", &holder)?
        }
        None => {
            let holder = Uuid::new_v4();
            transaction.execute(
                "INSERT INTO binding (singleton, device_id, holder, created_at_ms, checked_at_ms)
                 VALUES (1, ?1, ?2, ?3, ?3)",
                params![device_id.to_string(), holder.to_string(), now_ms],
            )?;
            holder
        }
    };
    transaction.commit()?;
    Ok(holder)
}

/// Parses a UUID stored in column `what`.
pub(super) fn parse_uuid(what: &'static str, text: &str) -> Result<Uuid, OutboxError> {
    Uuid::parse_str(text).map_err(|error| OutboxError::Corrupt {
        what,
        detail: error.to_string(),
    })
}
