//! The datastore: every SQL statement the server runs lives in this module, one file per
//! resource, methods named `<resource>_<verb>`. Queries are runtime-checked (`query_as` +
//! `FromRow`), so building needs no database; the integration tests run them against a real one.
//! Nothing here keeps state or runs in the background: a method runs its statements and
//! returns what it committed, with the wake-ups that calls for ([`Committed`]).

mod access_changes;
mod agents;
mod approvals;
mod audit;
mod audit_calls;
mod call_read;
mod calls;
mod capture_exclusions;
mod committed;
mod connections;
mod connectors;
mod credential_values;
mod devices;
mod events;
mod evidence;
mod mcp_requests;
mod mcp_routes;
mod mcp_sessions;
mod metrics;
mod oauth;
mod observations;
mod operations;
mod pairings;
mod placements;
mod pool_health;
mod profiles;
mod receipt_policies;
mod receipts;
mod resolutions;
mod retire;
mod runner_leases;
mod sealed;
mod sql;
mod submit;
mod tokens;
mod users;
mod web_sessions;
mod workspaces;

pub use agents::{AgentConnectionRow, AgentRow, NewAgent};
pub use approvals::{Answered, ApprovalPolicyRow, ApprovalRow, ExpiredApproval};
pub use audit::{
    AuditFilter, AuditHead, AuditRow, EntryFields, INSTALLATION_CHAIN, NewAuditEntry, chain_of,
    entry_hash,
};
pub use call_read::CallRead;
pub(crate) use calls::PlainCompletion;
pub use calls::{
    CallFilter, CallOrigin, CallRow, CancelEffect, DeviceCompletion, DeviceStart, ExpiredLeases,
    FinishedCall, HandedRow, Kept, LeasedRow, LookedUpCall, NewCall, PageFrom, SettledCall,
    StoredCompletion, TraceParent,
};
pub use capture_exclusions::{CaptureExclusionRow, NewCaptureExclusion};
pub use committed::{Committed, Wakeup};
pub use connections::{
    CatalogChanges, ConnectionAuthColumns, ConnectionRow, ConnectionToolRow, Reclassified, ToolRow,
};
pub use connectors::ConnectorRow;
pub use credential_values::{CredentialValueRow, credential_context};
pub use devices::DeviceRow;
pub use events::{EVENTS_KEPT, EventRow};
pub use evidence::{CapturePolicyRow, Captured, EraseRefusal, Erased, EvidenceRow, QueueBounds};
pub use mcp_requests::InFlight;
pub use mcp_routes::McpRouteRow;
pub use mcp_sessions::MCP_SESSION_IDLE;
pub use metrics::{ActiveCalls, ConnectionName, DeviceSeen};
pub use oauth::{
    ConnectionAuthRow, GrantFacts, GrantLock, GrantRow, PendingRow, grant_context, pending_context,
};
pub use observations::{Completed, CompletionEffects, LateReceipt, Lineage, ObservationRow};
pub use operations::{OperationOwner, OperationRow};
pub use pairings::PairingRow;
pub use placements::{Consent, Decision, PlacementRow, SpecColumns};
pub use pool_health::PoolHealth;
pub use profiles::{Grants, NewProfile, ProfileRow};
pub use receipt_policies::ReceiptPolicyRow;
pub use receipts::{NewReceipt, ReceiptRow, UploadRead};
pub use resolutions::{NewResolution, ResolutionRow};
pub use retire::{Retirable, Retired};
pub use runner_leases::TakenLease;
pub use sealed::{ResealError, SealedExclusive, SealedTable};
pub use submit::{
    CallQuotas, OperationScope, SubmitConnection, SubmitContext, SubmitKeys, SubmitRead, Submitter,
    SubmitterKey,
};
pub use tokens::TokenRow;
pub use users::{McpPrincipalRow, UserRow};
pub use web_sessions::{SessionTimes, WebSessionRow};
pub use workspaces::{EnvironmentRow, MemberRemoval, MemberRow, WorkspaceRow};

use sqlx::PgPool;
use std::sync::Arc;
use uuid::Uuid;

/// The migrations this build expects, embedded at compile time.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// Handle to the system of record: stateless SQL over a pool. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Datastore {
    pool: PgPool,
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
        Self { pool, health }
    }

    /// Says that a connection to the database was found dead, so that the pool checks its
    /// connections before their next use for a while (see [`PoolHealth`]).
    pub(crate) fn connection_lost(&self) {
        self.health.connection_lost();
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
