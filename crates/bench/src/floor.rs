//! The floor under a device call's added latency, measured on the machine of the run: the six
//! durable writes the issue counts — four PostgreSQL commits (a call's insert, lease, start and
//! completion) and the receipt outbox's two synced commits (the start before dispatch, the
//! receipt) — made one after another by one process, with no server, runner, channel or wake-up
//! between them. The PostgreSQL writes go to a scratch table of the benchmark's database on a
//! connection of their own; the outbox is the runner's own ([`Outbox`]), in the run's directory,
//! so on the same disk as the device's.
//!
//! A call overlaps some of these writes (the outbox's start while the server records the start,
//! its receipt while the completion is uploaded), so its path could in principle go below this
//! sum; what it adds on top is its hops and its own work. Measured in turn with the latency
//! series, a slow spell of a shared machine raises the floor with them.

use crate::error::{Error, Result};
use crate::stats::{Summary, ms};
use serde::Serialize;
use serde_json::json;
use sqlx::{Connection, PgConnection};
use std::path::Path;
use std::time::Instant;
use switchyard_mcp_runner::outbox::{Outbox, OutboxError};
use switchyard_protocol::runner::{Completion, Epoch};
use switchyard_protocol::{CallId, DeviceId};
use uuid::Uuid;

/// The floor's own PostgreSQL connection and outbox, and the time of each write so far.
pub struct DurableFloor {
    /// A connection of its own, so no pool or other statement stands between its commits.
    db: PgConnection,
    /// An outbox like the device's, bound to a device id of its own.
    outbox: Outbox,
    /// The previous sample's receipt, acknowledged by the next start as a device's runner does.
    acknowledged: Option<Uuid>,
    /// Each PostgreSQL commit's time, in milliseconds, four per sample.
    commits: Vec<f64>,
    /// Each synced outbox commit's time, in milliseconds, two per sample.
    syncs: Vec<f64>,
}

/// What one write of the floor took, over the measured samples.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FloorParts {
    /// One PostgreSQL commit (a one-row insert or update, flushed).
    pub postgres_commit: Summary,
    /// One synced commit of the outbox (a start, or a receipt).
    pub outbox_sync: Summary,
}

impl DurableFloor {
    /// Connects to `database_url`, creates the scratch table and opens an outbox in
    /// `outbox_dir` (created, mode 0700).
    pub async fn start(database_url: &str, outbox_dir: &Path) -> Result<DurableFloor> {
        let mut db = PgConnection::connect(database_url).await?;
        // The scratch table its commits write to, dropped again by `close`.
        sqlx::raw_sql(
            "DROP TABLE IF EXISTS bench_durable_floor;
             CREATE TABLE bench_durable_floor (id uuid PRIMARY KEY, state text NOT NULL,
                                               changed_at timestamptz NOT NULL DEFAULT now())",
        )
        .execute(&mut db)
        .await?;
        let outbox = Outbox::open(outbox_dir, DeviceId::new()).map_err(|e| {
            Error::Setup(format!(
                "opening the floor's outbox in {}: {e}",
                outbox_dir.display()
            ))
        })?;
        Ok(DurableFloor {
            db,
            outbox,
            acknowledged: None,
            commits: Vec::new(),
            syncs: Vec::new(),
        })
    }

    /// One call's six durable writes in a device call's order; their time in milliseconds.
    pub async fn sample(&mut self) -> Result<f64> {
        let call = CallId::new();
        let epoch = Epoch(1);
        let receipt_id = Uuid::new_v4();
        let acknowledged: Vec<Uuid> = self.acknowledged.take().into_iter().collect();
        let completion = Completion::Succeeded {
            result: json!({ "content": [], "isError": false }),
        };
        let started = Instant::now();
        self.commit(
            sqlx::query("INSERT INTO bench_durable_floor (id, state) VALUES ($1, 'queued')")
                .bind(call.0),
        )
        .await?;
        self.commit(set_state(call, "leased")).await?;
        self.sync(|outbox| outbox.record_start_acknowledging(call, epoch, &acknowledged))?;
        self.commit(set_state(call, "running")).await?;
        self.sync(|outbox| outbox.record_receipt_with_id(receipt_id, call, epoch, &completion))?;
        self.commit(set_state(call, "succeeded")).await?;
        let elapsed = started.elapsed();
        self.acknowledged = Some(receipt_id);
        Ok(ms(elapsed))
    }

    /// Drops the scratch table; answers what each write took over the last `measured` samples
    /// (those after the warm-up).
    pub async fn close(mut self, measured: usize) -> Result<FloorParts> {
        sqlx::raw_sql("DROP TABLE bench_durable_floor")
            .execute(&mut self.db)
            .await?;
        self.db.close().await?;
        let last = |times: &[f64], per_sample: usize| {
            Summary::of(&times[times.len().saturating_sub(measured * per_sample)..])
        };
        Ok(FloorParts {
            postgres_commit: last(&self.commits, 4),
            outbox_sync: last(&self.syncs, 2),
        })
    }

    /// Runs `statement` as its own transaction (a commit), and times it.
    async fn commit(
        &mut self,
        statement: sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<()> {
        let started = Instant::now();
        statement.execute(&mut self.db).await?;
        self.commits.push(ms(started.elapsed()));
        Ok(())
    }

    /// Runs a synced outbox write on this thread (the runner hands it to its blocking pool),
    /// and times it.
    fn sync<T>(&mut self, write: impl FnOnce(&Outbox) -> Result<T, OutboxError>) -> Result<T> {
        let started = Instant::now();
        let written = tokio::task::block_in_place(|| write(&self.outbox))
            .map_err(|e| Error::Setup(format!("the floor's outbox write: {e}")))?;
        self.syncs.push(ms(started.elapsed()));
        Ok(written)
    }
}

/// The statement that moves the call's row to `state`.
fn set_state(
    call: CallId,
    state: &'static str,
) -> sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments> {
    sqlx::query("UPDATE bench_durable_floor SET state = $2, changed_at = now() WHERE id = $1")
        .bind(call.0)
        .bind(state)
}
