//! What the driver reads from PostgreSQL directly: the durability settings in force, counters
//! that show how much the database worked (commits, WAL bytes, rows written), call timings
//! recorded by the server, and a transaction that holds the xmin horizon back. The driver never
//! writes call state.

use crate::error::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{Connection, PgConnection, PgPool};

/// The settings that make commits durable, as the server reports them.
#[derive(Clone, Debug, Serialize)]
pub struct Durability {
    /// `fsync`.
    pub fsync: String,
    /// `synchronous_commit`.
    pub synchronous_commit: String,
    /// `wal_sync_method`.
    pub wal_sync_method: String,
    /// `full_page_writes`.
    pub full_page_writes: String,
    /// `server_version`.
    pub server_version: String,
}

impl Durability {
    /// Whether commits wait for the WAL to be flushed to disk.
    pub fn is_durable(&self) -> bool {
        self.fsync == "on" && self.synchronous_commit == "on"
    }
}

/// Reads the durability settings.
pub async fn durability(pool: &PgPool) -> Result<Durability> {
    let show = |name: &'static str| async move {
        sqlx::query_scalar::<_, String>("SELECT current_setting($1)")
            .bind(name)
            .fetch_one(pool)
            .await
    };
    Ok(Durability {
        fsync: show("fsync").await?,
        synchronous_commit: show("synchronous_commit").await?,
        wal_sync_method: show("wal_sync_method").await?,
        full_page_writes: show("full_page_writes").await?,
        server_version: show("server_version").await?,
    })
}

/// Cumulative counters of the database; subtract two to see what happened in between.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Counters {
    /// Committed transactions (every autocommit statement counts, reads included).
    pub xact_commit: i64,
    /// Rows inserted, updated or deleted in user tables.
    pub rows_written: i64,
    /// Of those, rows of `runner_leases` and `devices`: where heartbeats' renewals and
    /// devices' sightings (`last_seen_at`) are flushed.
    pub liveness_rows_written: i64,
    /// WAL generated, in bytes.
    pub wal_bytes: i64,
    /// WAL flushes to disk (cluster-wide: the benchmark's cluster is private).
    pub wal_syncs: i64,
}

impl Counters {
    /// `self - earlier`.
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            xact_commit: self.xact_commit - earlier.xact_commit,
            rows_written: self.rows_written - earlier.rows_written,
            liveness_rows_written: self.liveness_rows_written - earlier.liveness_rows_written,
            wal_bytes: self.wal_bytes - earlier.wal_bytes,
            wal_syncs: self.wal_syncs - earlier.wal_syncs,
        }
    }
}

/// The counters now. Statistics reach the views about once a second, so compare snapshots
/// taken over several seconds.
pub async fn counters(pool: &PgPool) -> Result<Counters> {
    let (xact_commit, rows_written, liveness_rows_written, wal_bytes, wal_syncs): (
        i64,
        i64,
        i64,
        i64,
        i64,
    ) = sqlx::query_as(
        "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
                (SELECT COALESCE(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables),
                (SELECT COALESCE(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint FROM pg_stat_user_tables
                  WHERE relname IN ('runner_leases', 'devices')),
                pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
                (SELECT wal_sync FROM pg_stat_wal)",
    )
    .fetch_one(pool)
    .await?;
    Ok(Counters {
        xact_commit,
        rows_written,
        liveness_rows_written,
        wal_bytes,
        wal_syncs,
    })
}

/// The size of the `calls` table and its dead rows.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct TableHealth {
    /// Live rows.
    pub live_rows: i64,
    /// Dead rows not yet vacuumed.
    pub dead_rows: i64,
    /// Table plus indexes, in bytes.
    pub total_bytes: i64,
}

/// Gathers planner statistics for the whole database, as autovacuum would on a database in
/// use. A fresh database's first plans are made on empty tables, and the server keeps its
/// prepared plans per connection: without this, a short run measures plans no real
/// deployment runs (sequential scans of `calls` for indexed lookups).
pub async fn analyze(pool: &PgPool) -> Result<()> {
    sqlx::query("ANALYZE").execute(pool).await?;
    Ok(())
}

/// `VACUUM` of the whole database: what autovacuum would otherwise clean up later.
pub async fn vacuum(pool: &PgPool) -> Result<()> {
    sqlx::query("VACUUM").execute(pool).await?;
    Ok(())
}

/// The health of the `calls` table.
pub async fn calls_health(pool: &PgPool) -> Result<TableHealth> {
    let (live_rows, dead_rows, total_bytes): (i64, i64, i64) = sqlx::query_as(
        "SELECT n_live_tup, n_dead_tup, pg_total_relation_size('calls') FROM pg_stat_user_tables WHERE relname = 'calls'",
    )
    .fetch_one(pool)
    .await?;
    Ok(TableHealth {
        live_rows,
        dead_rows,
        total_bytes,
    })
}

/// The server's timestamps of one call.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct CallTimes {
    /// The call.
    pub id: uuid::Uuid,
    /// State now.
    pub state: String,
    /// Submitted (the insert's transaction time).
    pub created_at: DateTime<Utc>,
    /// Leased.
    pub leased_at: Option<DateTime<Utc>>,
    /// Start acknowledged.
    pub started_at: Option<DateTime<Utc>>,
    /// Settled.
    pub finished_at: Option<DateTime<Utc>>,
}

/// The timings of the calls with these ids.
pub async fn call_times(pool: &PgPool, ids: &[uuid::Uuid]) -> Result<Vec<CallTimes>> {
    Ok(sqlx::query_as("SELECT id, state, created_at, leased_at, started_at, finished_at FROM calls WHERE id = ANY($1)")
        .bind(ids)
        .fetch_all(pool)
        .await?)
}

/// How many calls of runner `runner_ref` are not settled yet (queued, leased or running).
/// Each count names its partial index's predicate, so that it reads that index only (the
/// throughput windows ask while they run).
pub async fn unsettled(pool: &PgPool, runner_ref: &str) -> Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM calls WHERE runner_ref = $1 AND state = 'queued'
                     AND lease_epoch IS NULL AND finished_at IS NULL)
              + (SELECT count(*) FROM calls WHERE runner_ref = $1 AND state IN ('leased', 'running')
                     AND lease_epoch IS NOT NULL AND finished_at IS NULL)",
    )
    .bind(runner_ref)
    .fetch_one(pool)
    .await?)
}

/// A transaction that holds a snapshot open, so that VACUUM cannot remove any row version
/// that died after it began (the xmin horizon stays put) — what a long report query or a
/// forgotten `BEGIN` in a psql session does to a production database.
pub struct XminHolder {
    connection: PgConnection,
}

impl XminHolder {
    /// Opens its own connection and begins the snapshot.
    pub async fn begin(database_url: &str) -> Result<XminHolder> {
        let mut connection = PgConnection::connect(database_url).await?;
        sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
            .execute(&mut connection)
            .await?;
        // The snapshot is taken by the first statement.
        sqlx::query("SELECT count(*) FROM calls WHERE false")
            .execute(&mut connection)
            .await?;
        Ok(XminHolder { connection })
    }

    /// Ends the transaction: the horizon may advance again.
    pub async fn release(mut self) -> Result<()> {
        sqlx::query("COMMIT").execute(&mut self.connection).await?;
        Ok(())
    }
}

/// One statement's share of the work, per completed call.
#[derive(Clone, Debug, Serialize, sqlx::FromRow)]
pub struct StatementCost {
    /// The statement (normalized by pg_stat_statements, shortened).
    pub query: String,
    /// Executions per completed call.
    pub calls_per_call: f64,
    /// Execution time per completed call, in milliseconds.
    pub ms_per_call: f64,
}

/// Starts a statement profile: clears pg_stat_statements if the extension can be used (it
/// needs `shared_preload_libraries=pg_stat_statements`, as scripts/bench.sh sets). Returns
/// whether profiling is available.
pub async fn statements_reset(pool: &PgPool) -> bool {
    if sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(pool)
        .await
        .is_err()
    {
        return false;
    }
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(pool)
        .await
        .is_ok()
}

/// One statement's time since [`statements_reset`].
#[derive(Clone, Debug, Serialize, sqlx::FromRow)]
pub struct StatementTime {
    /// The statement (normalized by pg_stat_statements, shortened).
    pub query: String,
    /// Executions.
    pub calls: i64,
    /// Mean execution time, in milliseconds.
    pub mean_ms: f64,
    /// Total execution time, in milliseconds.
    pub total_ms: f64,
    /// The longest execution, in milliseconds.
    pub max_ms: f64,
    /// Shared buffers read per execution (from cache or disk): work that grows with dead rows
    /// shows here first.
    pub blocks_per_call: f64,
}

/// The `limit` statements that took the most time since [`statements_reset`], or whose
/// longest run was long (one run counts as a hundred, so that a rare stall is listed beside
/// the hot path); empty when profiling is not available.
pub async fn statements_top(pool: &PgPool, limit: i64) -> Vec<StatementTime> {
    sqlx::query_as(
        "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 120) AS query, calls,
                mean_exec_time AS mean_ms, total_exec_time AS total_ms, max_exec_time AS max_ms,
                (shared_blks_hit + shared_blks_read)::float8 / greatest(calls, 1) AS blocks_per_call
         FROM pg_stat_statements
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND query NOT LIKE '%pg_stat_%'
         ORDER BY greatest(total_exec_time, 100 * max_exec_time) DESC LIMIT $1",
    )
    .bind(limit)
    .fetch_all(pool)
    .await
    .unwrap_or_default()
}

/// The statements run since [`statements_reset`], heaviest first, per one of `calls` completed
/// calls (the driver's own statements excluded).
pub async fn statements_per_call(
    pool: &PgPool,
    calls: i64,
    limit: i64,
) -> Result<Vec<StatementCost>> {
    let calls = calls.max(1) as f64;
    Ok(sqlx::query_as(
        "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 160) AS query,
                calls::float8 / $1 AS calls_per_call, total_exec_time / $1 AS ms_per_call
         FROM pg_stat_statements
         WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND query NOT LIKE '%pg_stat_%' AND query NOT LIKE '%pg_current_wal_lsn%' AND query NOT LIKE 'SELECT (SELECT count(*) FROM calls WHERE runner_ref%'
         ORDER BY total_exec_time DESC LIMIT $2",
    )
    .bind(calls)
    .bind(limit)
    .fetch_all(pool)
    .await?)
}
