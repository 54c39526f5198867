//! rmcp's OAuth stores on PostgreSQL, sealed with the installation key.
//!
//! - [`GrantStore`] is the [`CredentialStore`] of one grant (connection, holder): it loads and
//!   saves the grant sealed in `oauth_grants` (a rotated refresh token replaces the old one in
//!   one statement; rmcp keeps the old one when none comes back), its refresh guard is the
//!   grant's PostgreSQL advisory lock, and a refresh token the authorization server rejects
//!   (`invalid_grant`) moves the connection to `auth_required`.
//! - [`PendingStore`] is the [`StateStore`] of one authorization: what rmcp saves when it
//!   builds the authorization URL is collected and stored once, sealed, with the client the
//!   flow began with ([`super::App::connection_authorize`]); at the callback it answers the
//!   state read from `oauth_pending`, so any replica can finish the flow.

use super::grant::{ClientRecord, GrantRecord, TokenFacts};
use crate::db::{Datastore, GrantFacts, grant_context};
use crate::vault::KeyFile;
use chrono::{TimeZone, Utc};
use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StateStore, StoredAuthorizationState,
    StoredCredentials,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use switchyard_protocol::ConnectionId;
use switchyard_protocol::api::{AuthState, CredentialHolder};

/// Which grant a [`GrantStore`] keeps.
#[derive(Clone, Debug)]
pub(super) struct GrantKey {
    /// The connection.
    pub(super) connection: ConnectionId,
    /// `shared` (the only holder served today).
    pub(super) holder: String,
    /// The MCP server URL the grant is for, kept beside it in clear.
    pub(super) resource: String,
}

/// The credential store of one grant.
#[derive(Clone)]
pub(super) struct GrantStore {
    db: Datastore,
    keys: Arc<KeyFile>,
    key: GrantKey,
    client: ClientRecord,
    /// This operation holds the grant's lock already (rmcp's `refresh_token` asks for it
    /// again inside a renewal that took it first).
    held: Arc<AtomicBool>,
    /// It saves what a person's authorization obtained (not a renewal).
    authorizing: bool,
    /// The generation of the grant last loaded (under the grant's lock, in a renewal): a
    /// renewal's save replaces only that one.
    loaded: Arc<Mutex<Option<i64>>>,
    /// A renewal's save found the grant revoked or replaced: the renewed token was discarded.
    superseded: Arc<AtomicBool>,
    /// Longest wait for the grant's lock.
    lock_wait: Duration,
}

/// Why [`GrantStore::lock`] took no lock.
#[derive(Debug)]
pub(super) enum LockRefusal {
    /// Another renewal held it for longer than the store waits.
    Busy(Duration),
    /// The database failed.
    Database(sqlx::Error),
}

impl GrantStore {
    /// The store of grant `key`, obtained with `client`, waiting at most `lock_wait` for the
    /// grant's lock.
    pub(super) fn new(
        db: Datastore,
        keys: Arc<KeyFile>,
        key: GrantKey,
        client: ClientRecord,
        lock_wait: Duration,
    ) -> Self {
        Self {
            db,
            keys,
            key,
            client,
            held: Arc::new(AtomicBool::new(false)),
            authorizing: false,
            loaded: Arc::default(),
            superseded: Arc::default(),
            lock_wait,
        }
    }

    /// The same store, saving what a person's authorization obtained.
    pub(super) fn authorizing(self) -> Self {
        Self {
            authorizing: true,
            ..self
        }
    }

    /// The grant as stored now (`None`: there is none), opened; its generation is what a
    /// renewal's save then expects.
    pub(super) async fn record(&self) -> Result<Option<GrantRecord>, AuthError> {
        let opened = open_grant(&self.db, &self.keys, &self.key).await?;
        *self.loaded.lock().unwrap_or_else(PoisonError::into_inner) =
            opened.as_ref().map(|(_, generation)| *generation);
        Ok(opened.map(|(record, _)| record))
    }

    /// Takes the grant's lock for this operation (`None`: it holds it already), waiting at
    /// most the store's bound.
    pub(super) async fn lock(&self) -> Result<Option<CredentialRefreshGuard>, LockRefusal> {
        if self.held.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let lock = self
            .db
            .oauth_grant_lock(self.key.connection, &self.key.holder, self.lock_wait)
            .await
            .map_err(LockRefusal::Database)?
            .ok_or(LockRefusal::Busy(self.lock_wait))?;
        self.held.store(true, Ordering::SeqCst);
        Ok(Some(CredentialRefreshGuard::new(Held {
            _lock: lock,
            held: Arc::clone(&self.held),
        })))
    }

    /// Which grant it keeps.
    pub(super) fn key(&self) -> &GrantKey {
        &self.key
    }

    /// The generation of the grant it last loaded, if it loaded one.
    pub(super) fn loaded(&self) -> Option<i64> {
        *self.loaded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a renewal's save found the grant revoked or replaced since it was read (the
    /// flag is shared by the store's clones).
    pub(super) fn superseded(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.superseded)
    }
}

/// Grant `key` as stored now (`None`: there is none), opened, with its generation.
pub(super) async fn open_grant(
    db: &Datastore,
    keys: &KeyFile,
    key: &GrantKey,
) -> Result<Option<(GrantRecord, i64)>, AuthError> {
    let Some(row) = db
        .oauth_grant_get(key.connection, &key.holder)
        .await
        .map_err(store_error)?
    else {
        return Ok(None);
    };
    let plain = keys
        .open(&grant_context(key.connection, &key.holder), &row.sealed)
        .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
    serde_json::from_slice(&plain)
        .map(|record| Some((record, row.generation)))
        .map_err(|e| AuthError::CredentialStoreError(format!("a stored grant is unreadable: {e}")))
}

/// A guard that tells its store the lock is free again when dropped.
struct Held {
    _lock: crate::db::GrantLock,
    held: Arc<AtomicBool>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.held.store(false, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl CredentialStore for GrantStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.record().await?.map(|record| record.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let expires_at = credentials.token_response.as_ref().and_then(|token| {
            let received = credentials.token_received_at?;
            let lifetime = TokenFacts::of(token).expires_in?;
            Utc.timestamp_opt(i64::try_from(received + lifetime).ok()?, 0)
                .single()
        });
        let issuer = credentials.issuer.clone();
        let record = GrantRecord {
            credentials,
            client: self.client.clone(),
        };
        let plain = serde_json::to_vec(&record)
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        let context = grant_context(self.key.connection, &self.key.holder);
        let facts = GrantFacts {
            issuer: issuer.as_deref(),
            resource: &self.key.resource,
            expires_at,
        };
        // Sealed under the sealed-write lock with the newest key in the file.
        let seal = || self.keys.reload().map(|vault| vault.seal(&context, &plain));
        if self.authorizing {
            return self
                .db
                .oauth_grant_save(self.key.connection, &self.key.holder, seal, &facts)
                .await
                .map_err(store_error)?
                .map_err(|e| AuthError::CredentialStoreError(e.to_string()));
        }
        let generation = *self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = generation.ok_or_else(|| {
            AuthError::CredentialStoreError("a renewal saved a grant it never read".to_owned())
        })?;
        let saved = self
            .db
            .oauth_grant_renewed(
                self.key.connection,
                &self.key.holder,
                generation,
                seal,
                &facts,
            )
            .await
            .map_err(store_error)?
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        if !saved {
            self.superseded.store(true, Ordering::SeqCst);
            return Err(AuthError::CredentialStoreError(
                "the grant was revoked or replaced while it was renewed; the renewed token was \
                 discarded"
                    .to_owned(),
            ));
        }
        Ok(())
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.db
            .oauth_grants_delete(self.key.connection)
            .await
            .map(drop)
            .map_err(store_error)
    }

    async fn on_refresh_token_rejected(
        &self,
        _credentials: &StoredCredentials,
    ) -> Result<(), AuthError> {
        // The shared grant's state is the connection's; a person's dead grant goes.
        if self.key.holder == CredentialHolder::Shared.as_str() {
            self.db
                .connection_auth_state_set(self.key.connection, AuthState::AuthRequired)
                .await
                .map(drop)
                .map_err(store_error)
        } else {
            self.db
                .oauth_grant_delete(self.key.connection, &self.key.holder, self.loaded())
                .await
                .map(drop)
                .map_err(store_error)
        }
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        self.lock().await.map_err(|refusal| match refusal {
            LockRefusal::Busy(wait) => AuthError::CredentialStoreError(format!(
                "another renewal held the grant's lock for more than {}s",
                wait.as_secs()
            )),
            LockRefusal::Database(error) => store_error(error),
        })
    }
}

fn store_error(error: sqlx::Error) -> AuthError {
    AuthError::CredentialStoreError(format!("database: {error}"))
}

/// The state store of one authorization (clones share what they collected).
#[derive(Clone)]
pub(super) struct PendingStore {
    db: Datastore,
    /// At authorization: what rmcp saved, collected to be stored with the client.
    collected: Arc<Mutex<Option<(String, StoredAuthorizationState)>>>,
    /// At the callback: the state read from `oauth_pending`, and its digest.
    found: Option<(Vec<u8>, StoredAuthorizationState)>,
    /// At the callback: another callback (or the clock) consumed the state first.
    lost: Arc<AtomicBool>,
}

impl PendingStore {
    /// A store collecting a new authorization's state.
    pub(super) fn collecting(db: Datastore) -> Self {
        Self {
            db,
            collected: Arc::default(),
            found: None,
            lost: Arc::default(),
        }
    }

    /// A store answering the state found under `digest`.
    pub(super) fn found(db: Datastore, digest: Vec<u8>, state: StoredAuthorizationState) -> Self {
        Self {
            db,
            collected: Arc::default(),
            found: Some((digest, state)),
            lost: Arc::default(),
        }
    }

    /// Whether the state was consumed elsewhere (or expired) before this callback could
    /// take it, shared by the store's clones.
    pub(super) fn lost(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.lost)
    }

    /// The state rmcp saved (the CSRF token and what it keeps under it).
    pub(super) fn take(&self) -> Option<(String, StoredAuthorizationState)> {
        self.collected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

#[async_trait::async_trait]
impl StateStore for PendingStore {
    async fn save(
        &self,
        csrf_token: &str,
        state: StoredAuthorizationState,
    ) -> Result<(), AuthError> {
        *self
            .collected
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((csrf_token.to_owned(), state));
        Ok(())
    }

    async fn load(&self, csrf_token: &str) -> Result<Option<StoredAuthorizationState>, AuthError> {
        Ok(self
            .found
            .as_ref()
            .filter(|(digest, _)| *digest == super::grant::state_digest(csrf_token))
            .map(|(_, state)| state.clone()))
    }

    /// Consumes the state: exactly one callback takes it, or the code is not redeemed.
    async fn delete(&self, csrf_token: &str) -> Result<(), AuthError> {
        let taken = self
            .db
            .oauth_pending_take(&super::grant::state_digest(csrf_token))
            .await
            .map_err(store_error)?;
        if !taken {
            self.lost.store(true, Ordering::SeqCst);
            return Err(AuthError::InternalError(
                "the authorization state was already used or expired".to_owned(),
            ));
        }
        Ok(())
    }
}
