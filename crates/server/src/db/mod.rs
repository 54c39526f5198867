//! The datastore: every SQL statement the server runs lives in this module, one file per
//! resource, methods named `<resource>_<verb>`. Queries are runtime-checked (`query_as` +
//! `FromRow`), so building needs no database; the integration tests run them against a real one.

mod call_read;
mod calls;
mod connections;
mod connectors;
mod devices;
mod events;
mod evidence;
mod notices;
mod observations;
mod operations;
mod pairings;
mod pool_health;
mod profiles;
mod receipt_policies;
mod receipts;
mod resolutions;
mod runner_leases;
mod submit;
mod users;
mod web_sessions;
mod workspaces;

pub use call_read::CallRead;
pub(crate) use calls::PlainCompletion;
pub use calls::{
    CallFilter, CallOrigin, CallRow, CancelEffect, DeviceCompletion, DeviceStart, ExpiredLeases,
    HandedRow, HandedTo, LeasedRow, LookedUpCall, NewCall, PageFrom, SettledCall, StoredCompletion,
};
pub use connections::{ConnectionRow, ToolRow};
pub use connectors::ConnectorRow;
pub use devices::DeviceRow;
pub use events::{EVENTS_KEPT, EventRow};
pub use evidence::{CapturePolicyRow, Captured, EraseRefusal, Erased, EvidenceRow, QueueBounds};
pub(crate) use notices::{ANY_RUNNER, CALLS_CHANNEL, LocalDelivery, SETTLED_CHANNEL};
pub use observations::{Completed, CompletionEffects, LateReceipt, Lineage, ObservationRow};
pub use operations::{OperationOwner, OperationRow};
pub use pairings::PairingRow;
pub use pool_health::PoolHealth;
pub use profiles::{Grants, ProfileRow};
pub use receipt_policies::ReceiptPolicyRow;
pub use receipts::{NewReceipt, ReceiptRow, UploadRead};
pub use resolutions::{NewResolution, ResolutionRow};
pub use submit::{
    OperationScope, ResolveRequest, Speculated, SubmitConnection, SubmitContext, SubmitKeys,
    Submitter, SubmitterKey,
};
pub use users::UserRow;
pub use web_sessions::{SessionTimes, WebSessionRow};
pub use workspaces::{EnvironmentRow, MemberRow, WorkspaceRow};

use sqlx::PgPool;
use std::sync::Arc;
use uuid::Uuid;

/// The migrations this build expects, embedded at compile time.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// Handle to the system of record. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Datastore {
    pool: PgPool,
    /// Announcements sent after commit.
    notices: Arc<notices::Notices>,
    /// When the pool checks a connection before use (for a pool made with
    /// [`PoolHealth::pool_options`]).
    health: Arc<PoolHealth>,
}

impl Datastore {
    /// Wraps a connection pool.
    pub fn new(pool: PgPool) -> Self {
        Self::with_health(pool, Arc::default())
    }

    /// Wraps a pool made with `health`'s [`PoolHealth::pool_options`], which
    /// [`Datastore::connection_lost`] then tells.
    pub fn with_health(pool: PgPool, health: Arc<PoolHealth>) -> Self {
        Self {
            pool,
            notices: Arc::default(),
            health,
        }
    }

    /// Says that a connection to the database was found dead, so that the pool checks its
    /// connections before their next use for a while (see [`PoolHealth`]).
    pub(crate) fn connection_lost(&self) {
        self.health.connection_lost();
    }

    /// Delivers this datastore's announcements to `deliver` as well, at once (the app's
    /// wake-ups: a process does not wait for its own notifications to come back).
    pub(crate) fn deliver_notices_locally(&self, deliver: Arc<dyn notices::LocalDelivery>) {
        self.notices.deliver_locally(deliver);
    }

    /// The backend process id this datastore's announcements are sent from, which its
    /// process's listener skips (0 before the first was sent).
    pub(crate) fn notices_sender_pid(&self) -> u32 {
        self.notices.sender_pid()
    }

    /// Announces a committed new call to the runners waiting on any replica (payload: its
    /// runner and its submission time in microseconds, see `app::wakeups`).
    fn announce_queued(&self, call: &CallRow) {
        let payload = format!("{} {}", call.runner_ref, call.created_at.timestamp_micros());
        self.notices.send(&self.pool, CALLS_CHANNEL, payload);
    }

    /// Announces that committed changes put calls of `runner_ref` (or, for `*`, of any runner)
    /// back in the queue at their old submission times: every replica's lease floor for them
    /// goes back to the beginning, and their waiting runners look.
    fn announce_requeued(&self, runner_ref: &str) {
        self.notices
            .send(&self.pool, CALLS_CHANNEL, runner_ref.to_owned());
    }

    /// Announces a committed completion to the readers waiting for the call on any replica;
    /// those of this process are handed `recorded`, the call as the completion left it, when
    /// the statement that recorded it read it.
    fn announce_settled(&self, call: Uuid, recorded: Option<SettledCall>) {
        self.notices.send_settled(&self.pool, call, recorded);
    }

    /// The underlying pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Whether the database answers and every embedded migration is applied.
    pub async fn readiness(&self) -> Result<(), String> {
        let applied: Vec<i64> = sqlx::query_scalar(
            "SELECT version FROM _sqlx_migrations WHERE success ORDER BY version",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|e| format!("database not ready: {e}"))?;
        let missing: Vec<i64> = MIGRATOR
            .iter()
            .map(|m| m.version)
            .filter(|v| !applied.contains(v))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "migrations not applied: {missing:?}; run `switchyard-server migrate`"
            ))
        }
    }
}

/// A key naming an object: its UUID or its unique name.
#[derive(Clone, Debug)]
pub enum Key<'a> {
    /// The object's id.
    Id(Uuid),
    /// The object's name.
    Name(&'a str),
}

impl<'a> Key<'a> {
    /// Reads a path or body value: a UUID when it parses as one, else a name.
    pub fn parse(s: &'a str) -> Self {
        match Uuid::parse_str(s) {
            Ok(id) => Key::Id(id),
            Err(_) => Key::Name(s),
        }
    }

    /// The id to bind, or nil when the key is a name.
    fn id(&self) -> Uuid {
        match self {
            Key::Id(id) => *id,
            Key::Name(_) => Uuid::nil(),
        }
    }

    /// The name to bind, or an empty string (which no object has) when the key is an id.
    fn name(&self) -> &str {
        match self {
            Key::Id(_) => "",
            Key::Name(name) => name,
        }
    }
}

/// Whether a database error is a unique-constraint violation.
pub fn is_unique_violation(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .is_some_and(|e| e.is_unique_violation())
}
