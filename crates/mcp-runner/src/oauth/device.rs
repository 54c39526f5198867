//! A device connection's OAuth grant, kept in the device's OS keyring (service
//! [`OAUTH_KEYRING_SERVICE`], the connection id as the account): written by `switchyard auth`
//! on the device, renewed by the device runner, emptied by `switchyard revoke` there.
//!
//! The keyring entry holds the whole [`DeviceGrant`] as JSON: one write replaces it, so a
//! rotated refresh token is stored with its access token at once (rmcp keeps the old refresh
//! token when none comes back). A renewal writes only over the generation it read: a revoke or
//! a new authorization meanwhile wins (the keyring has no compare-and-set; the window is the
//! time between the read and the write of one entry, inside the runner's single renewal).

use super::record::{ClientRecord, GrantRecord};
use crate::credentials::{SecretStore, StoreError};
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use switchyard_protocol::ConnectionId;
use switchyard_protocol::api::AuthState;

/// The keyring service device OAuth grants are kept under (apart from the `os_store`
/// references' service, so that no binding can name a grant).
pub const OAUTH_KEYRING_SERVICE: &str = "switchyard-oauth";

/// One connection's grant on this device.
#[derive(Clone, Serialize, Deserialize)]
pub struct DeviceGrant {
    /// The MCP server URL it was obtained for: it is sent to no other.
    pub resource: String,
    /// The grant: tokens and the client they were obtained with.
    pub grant: GrantRecord,
    /// `authorized`, or `auth_required` / `expired` once it could not be renewed.
    pub state: AuthState,
    /// Bumped at every write: a renewal writes only over the generation it read.
    pub generation: u64,
}

impl std::fmt::Debug for DeviceGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceGrant")
            .field("resource", &self.resource)
            .field("client", &self.grant.client)
            .field("state", &self.state)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

/// The grants in this device's keyring.
#[derive(Clone)]
pub struct DeviceGrants {
    store: Arc<dyn SecretStore>,
}

impl std::fmt::Debug for DeviceGrants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeviceGrants")
    }
}

impl DeviceGrants {
    /// The grants kept in `store` (the OS keyring).
    pub fn new(store: Arc<dyn SecretStore>) -> Self {
        Self { store }
    }

    /// Connection `connection`'s grant: `Ok(None)` when there is none.
    pub fn get(&self, connection: ConnectionId) -> Result<Option<DeviceGrant>, StoreError> {
        let Some(text) = self
            .store
            .get(OAUTH_KEYRING_SERVICE, &connection.to_string())?
        else {
            return Ok(None);
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|error| StoreError::Failed {
                reason: format!(
                    "the OAuth grant of connection {connection} in the keyring is unreadable \
                     ({}); authorize it again",
                    error.classify_name()
                ),
            })
    }

    /// Stores `grant` as connection `connection`'s, replacing any other.
    pub fn put(&self, connection: ConnectionId, grant: &DeviceGrant) -> Result<(), StoreError> {
        let text = serde_json::to_string(grant).map_err(|error| StoreError::Failed {
            reason: format!("a grant does not serialize: {}", error.classify_name()),
        })?;
        self.store
            .set(OAUTH_KEYRING_SERVICE, &connection.to_string(), &text)
            .map_err(|error| match error {
                StoreError::Failed { reason } => StoreError::Failed {
                    reason: format!(
                        "{reason} (a grant takes a few KB of the user's kernel keyring quota, \
                         /proc/sys/kernel/keys/maxbytes: remove grants no longer used with \
                         `switchyard revoke`)"
                    ),
                },
                other => other,
            })
    }

    /// Forgets connection `connection`'s grant (none is no error).
    pub fn delete(&self, connection: ConnectionId) -> Result<(), StoreError> {
        self.store
            .delete(OAUTH_KEYRING_SERVICE, &connection.to_string())
    }

    /// Records `state` on connection `connection`'s grant, if it has one — only on generation
    /// `read` when given (what a renewal read: a grant written since is left as it is).
    /// Answers whether it was recorded.
    pub fn set_state(
        &self,
        connection: ConnectionId,
        read: Option<u64>,
        state: AuthState,
    ) -> Result<bool, StoreError> {
        match self.get(connection)? {
            Some(mut grant) if read.is_none_or(|read| read == grant.generation) => {
                grant.state = state;
                grant.generation += 1;
                self.put(connection, &grant).map(|()| true)
            }
            _ => Ok(false),
        }
    }
}

/// Names a serde error's class without its text (which may quote the data).
trait Classify {
    fn classify_name(&self) -> &'static str;
}

impl Classify for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "input error",
            serde_json::error::Category::Syntax => "not JSON",
            serde_json::error::Category::Data => "an unexpected shape",
            serde_json::error::Category::Eof => "cut short",
        }
    }
}

/// rmcp's credential store for one device grant: what `switchyard auth` obtains, or a
/// renewal of the generation it read.
#[derive(Clone)]
pub struct DeviceGrantStore {
    grants: DeviceGrants,
    connection: ConnectionId,
    resource: String,
    client: ClientRecord,
    /// The generation a renewal read (`None`: it saves a person's authorization).
    renewing: Option<u64>,
    /// A renewal's save found the grant revoked or replaced: the renewed token was dropped.
    superseded: Arc<AtomicBool>,
}

impl DeviceGrantStore {
    /// The store of what a person's authorization of `connection` at `resource` obtains with
    /// `client`.
    pub fn authorizing(
        grants: DeviceGrants,
        connection: ConnectionId,
        resource: &str,
        client: ClientRecord,
    ) -> Self {
        Self {
            grants,
            connection,
            resource: resource.to_owned(),
            client,
            renewing: None,
            superseded: Arc::default(),
        }
    }

    /// The store renewing `grant` of `connection`, as read.
    pub fn renewing(grants: DeviceGrants, connection: ConnectionId, grant: &DeviceGrant) -> Self {
        Self {
            grants,
            connection,
            resource: grant.resource.clone(),
            client: grant.grant.client.clone(),
            renewing: Some(grant.generation),
            superseded: Arc::default(),
        }
    }

    /// Whether a renewal's save found the grant revoked or replaced.
    pub fn superseded(&self) -> bool {
        self.superseded.load(Ordering::SeqCst)
    }
}

/// A generation above `after` and every earlier authorization's: the clock's nanoseconds.
fn fresh_generation(after: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or_default();
    nanos.max(after + 1)
}

fn store_error(error: StoreError) -> AuthError {
    AuthError::CredentialStoreError(error.to_string())
}

#[async_trait::async_trait]
impl CredentialStore for DeviceGrantStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let grant = self.grants.get(self.connection).map_err(store_error)?;
        if let Some(read) = self.renewing
            && grant.as_ref().map(|grant| grant.generation) != Some(read)
        {
            // Revoked or authorized anew since the renewal read it: its refresh token is not
            // this renewal's to spend.
            self.superseded.store(true, Ordering::SeqCst);
            return Err(AuthError::CredentialStoreError(
                "the grant was revoked or replaced while it was renewed".to_owned(),
            ));
        }
        Ok(grant
            .filter(|grant| grant.resource == self.resource)
            .map(|grant| grant.grant.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let current = self.grants.get(self.connection).map_err(store_error)?;
        let generation = match (self.renewing, &current) {
            // A new authorization's generation never repeats one before it (even after a
            // revoke emptied the entry): a renewal that read an older grant never matches it.
            (None, current) => fresh_generation(current.as_ref().map_or(0, |g| g.generation)),
            (Some(read), Some(current)) if current.generation == read => read + 1,
            (Some(_), _) => {
                self.superseded.store(true, Ordering::SeqCst);
                return Err(AuthError::CredentialStoreError(
                    "the grant was revoked or replaced while it was renewed; the renewed token \
                     was discarded"
                        .to_owned(),
                ));
            }
        };
        let grant = DeviceGrant {
            resource: self.resource.clone(),
            grant: GrantRecord {
                credentials,
                client: self.client.clone(),
            },
            state: AuthState::Authorized,
            generation,
        };
        self.grants
            .put(self.connection, &grant)
            .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.grants.delete(self.connection).map_err(store_error)
    }

    async fn on_refresh_token_rejected(
        &self,
        _credentials: &StoredCredentials,
    ) -> Result<(), AuthError> {
        self.grants
            .set_state(self.connection, self.renewing, AuthState::AuthRequired)
            .map(drop)
            .map_err(store_error)
    }
}
