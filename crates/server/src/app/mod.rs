//! The app layer: every operation the API offers, with its authorization decided here.
//! Handlers call exactly one function of this module; this module calls the datastore.

mod admission;
pub mod agent_catalog;
mod agents;
mod approvals;
mod audit;
mod auth;
mod call_history;
mod call_trace;
mod calls;
mod capture;
mod central_credentials;
mod connections;
mod connector_edit;
mod connectors;
mod credential_values;
mod device_discovery;
mod devices;
mod diagnose;
mod dispatch;
mod evidence;
mod handshake;
mod mcp_access;
mod mcp_calls;
mod mcp_catalog;
mod mcp_catalog_cache;
mod metrics;
pub(crate) mod names;
pub mod oauth;
mod operations;
mod pairing;
mod placements;
mod principal;
mod profiles;
mod reconcile;
mod resolve;
mod results;
mod retire;
mod rotate_key;
mod runner_api;
mod sessions;
mod tokens;
mod views;
mod web_sessions;
mod workspaces;

pub(crate) use audit::Audit;
pub use audit::{AuditQuery, MAX_AUDIT_PAGE, REQUEST, RequestContext};
pub use auth::{Actor, hash_token, new_token};
pub use call_history::{CallHistoryQuery, DEFAULT_HISTORY_PAGE, HISTORY_FILTERS, MAX_HISTORY_PAGE};
pub(crate) use calls::PendingCheck;
pub use calls::{CallPage, CallQuery, CompletionRecorded, MAX_PAGE};
pub use connectors::{ConnectorInspection, ImportFormat, InspectedTool};
pub use credential_values::Emptied;
pub use device_discovery::DISCOVERY_WAIT;
pub(crate) use dispatch::batcher::Batcher;
pub use dispatch::leasing::LeaseBatch;
pub(crate) use dispatch::leasing::LeaseFeed;
pub(crate) use dispatch::wakeups::SettledWaiter;
pub use dispatch::wakeups::WakeupFeed;
pub use evidence::ERASURE_NOTICE;
pub use mcp_catalog::{McpCatalog, McpConnectionNotice, McpRefusal, McpRoute, McpTool};
pub use mcp_catalog_cache::CatalogGeneration;
pub use principal::{
    DEVICE_CREDENTIAL_PREFIX, DeviceActor, Principal, device_runner_ref, expect_device_credential,
};
pub use rotate_key::{RotateError, Rotated};
pub use runner_api::RELEASE_TTL;
pub use web_sessions::{NewWebSession, WebSession, random_secret};

/// The view of an authenticated user.
pub fn views_user(actor: &Actor) -> switchyard_protocol::api::UserView {
    views::user(&actor.user)
}

use crate::db::Datastore;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use switchyard_mcp_runner::credentials::{CredentialResolver, NoKeyring, OsKeyring, SecretStore};

/// Settings the app layer needs.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// Deadline for tool discovery (initialize + tools/list).
    pub discovery_deadline: Duration,
    /// The central runner's credential bindings file (references only), if any.
    pub credentials_file: Option<PathBuf>,
    /// The installation key file (`--installation-key-file`): what seals the credential
    /// values workspace admins set for central connections and the OAuth grants the server
    /// obtains. None: values are not set through the API, stored ones do not open, and
    /// authorizing a connection is refused (`vault_not_configured`).
    pub installation_key: Option<Arc<crate::vault::KeyFile>>,
    /// Length of device runners' leases (the central runner's is set on its own, normally to
    /// the same value).
    pub runner_lease_ttl: Duration,
    /// Bounds of each workspace's pending-evidence queue.
    pub evidence_queue: crate::db::QueueBounds,
    /// Most submitted calls inserted together (one statement, one commit) when several wait
    /// at once; 1 inserts each on its own. (Their submit reads are made together regardless.)
    pub submit_batch_max: usize,
    /// Most calls a workspace may have queued, and leased or running, when it submits more.
    pub quotas: crate::db::CallQuotas,
    /// Which addresses HTTP connectors may point at: checked when one is added or edited, at
    /// discovery and by the central runner at every connect (`--allow-endpoint`).
    pub endpoints: switchyard_mcp_runner::endpoints::EndpointGuard,
    /// How long `/mcp` holds a `tools/call` for its call to settle (with progress
    /// notifications) before answering that it awaits approval or still runs; below common
    /// MCP clients' 60 s request timeout.
    pub mcp_call_hold: Duration,
    /// The server's public base URL (`--public-url`), where browsers come back to
    /// `/mcp/callback`; [`crate::serve::start`] sets `http://<listen address>` when empty.
    pub public_url: String,
    /// The time bound of every OAuth request the server makes (discovery, registration,
    /// token requests).
    pub oauth_timeout: Duration,
}

/// [`AppConfig::oauth_timeout`] unless configured.
pub const DEFAULT_OAUTH_TIMEOUT: Duration = Duration::from_secs(10);

/// [`AppConfig::mcp_call_hold`] unless configured.
pub const DEFAULT_MCP_CALL_HOLD: Duration = Duration::from_secs(55);

/// [`AppConfig::submit_batch_max`] unless configured.
pub const DEFAULT_SUBMIT_BATCH_MAX: u16 = 64;

impl Default for AppConfig {
    fn default() -> Self {
        Self {
            discovery_deadline: Duration::from_secs(20),
            credentials_file: None,
            installation_key: None,
            runner_lease_ttl: Duration::from_secs(30),
            evidence_queue: crate::db::QueueBounds::default(),
            submit_batch_max: usize::from(DEFAULT_SUBMIT_BATCH_MAX),
            quotas: crate::db::CallQuotas::default(),
            endpoints: switchyard_mcp_runner::endpoints::EndpointGuard::default(),
            mcp_call_hold: DEFAULT_MCP_CALL_HOLD,
            public_url: String::new(),
            oauth_timeout: DEFAULT_OAUTH_TIMEOUT,
        }
    }
}

/// The app: the datastore, the central credential resolver, settings, and the in-process
/// scheduling machinery ([`dispatch`]). Shared by handlers and the central runner.
#[derive(Clone)]
pub struct App {
    db: Datastore,
    credentials: Arc<CredentialResolver>,
    config: AppConfig,
    dispatch: Arc<dispatch::Dispatch>,
    /// The `/mcp` catalogs this replica built ([`mcp_catalog_cache`]).
    mcp_catalogs: Arc<mcp_catalog_cache::CatalogCache>,
    metrics: Arc<crate::metrics::Metrics>,
    /// The OAuth renewals in flight in this process ([`oauth::Flights`]).
    oauth_flights: Arc<oauth::Flights>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl App {
    /// Builds the app over a datastore. Central `os_store` references use the OS keyring when
    /// one can be opened, else they fail with a clear error at resolution.
    pub fn new(db: Datastore, config: AppConfig) -> Self {
        let store: Arc<dyn SecretStore> = match OsKeyring::new() {
            Ok(keyring) => Arc::new(keyring),
            Err(e) => {
                tracing::info!(error = %e, "no OS keyring for central credentials; os_store references will fail");
                Arc::new(NoKeyring)
            }
        };
        let credentials = Arc::new(CredentialResolver::new(
            config.credentials_file.clone(),
            store,
        ));
        let metrics = Arc::new(crate::metrics::Metrics::default());
        let dispatch = Arc::new(dispatch::Dispatch::new(&db, &config, Arc::clone(&metrics)));
        let oauth_flights = Arc::new(oauth::Flights::new(
            db.pool().options().get_max_connections(),
        ));
        Self {
            db,
            credentials,
            config,
            dispatch,
            mcp_catalogs: Arc::default(),
            metrics,
            oauth_flights,
        }
    }

    /// Sends the wake-ups of a committed change (see [`crate::db::Committed`]) and gives back
    /// what it committed.
    pub fn sent<T>(&self, committed: crate::db::Committed<T>) -> T {
        self.dispatch.sent(committed)
    }

    /// The central runner's credential resolver.
    pub fn credentials(&self) -> &Arc<CredentialResolver> {
        &self.credentials
    }

    /// Which addresses HTTP MCP servers may be reached at (the central runner uses it too).
    pub fn endpoints(&self) -> &switchyard_mcp_runner::endpoints::EndpointGuard {
        &self.config.endpoints
    }

    /// The datastore.
    pub fn db(&self) -> &Datastore {
        &self.db
    }

    /// Cancelled when the server shuts down (its wake-up listener has stopped): connections
    /// that outlive a request, such as runner channels, close then.
    pub fn stopping(&self) -> &tokio_util::sync::CancellationToken {
        self.dispatch.announcer.local.stopping()
    }
}
