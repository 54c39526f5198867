//! A central connection's OAuth access token when a session opens: the stored one while it is
//! not due, else renewed — before it expires, and once more when the MCP server refuses one.
//!
//! Renewal is single-flight across replicas: the renewing replica takes the grant's advisory
//! lock, then looks again, and uses a token another renewed meanwhile instead of asking the
//! authorization server (so 20 calls at the moment of expiry on two replicas make one token
//! request). The lock is waited for at most the OAuth timeout, and only a quarter of the
//! database pool's renewals run at once in a process ([`Flights`]): renewals never take the
//! pool from everything else, nor wait forever. A refresh token the authorization server rejects (`invalid_grant`), or a client
//! it forgot (`invalid_client`), moves the connection to `auth_required` after that one
//! attempt; from then on calls fail at once without asking it again, until a person
//! authorizes the connection anew (which registers a new client if it forgot the old one).

use super::grant::{GrantRecord, TokenFacts};
use super::manager_for;
use super::store::{GrantKey, GrantStore, LockRefusal, open_grant};
use crate::app::App;
use crate::metrics::Renewal;
use rmcp::transport::auth::AuthError;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_mcp_runner::credentials::codes;
use switchyard_mcp_runner::launch::{
    LaunchFuture, NoticeFuture, RenewFuture, ResolveLaunch, SessionLaunch,
};
use switchyard_mcp_runner::oauth::{OAuthHttp, bearer, now};
use switchyard_protocol::ConnectionId;
use switchyard_protocol::UserId;
use switchyard_protocol::api::{AuthKind, AuthState, CallError, ConnectorSpec, CredentialHolder};
use switchyard_protocol::runner::{LeasedCall, Submitter};

/// The header an access token goes in.
const AUTHORIZATION: &str = "Authorization";

/// The central runner's launch resolver: the connection's bound credentials, and its OAuth
/// access token for a connection of kind `oauth`.
#[derive(Clone, Debug)]
pub struct CentralLaunch {
    app: App,
}

impl CentralLaunch {
    /// The resolver of `app`'s central runner.
    pub fn new(app: App) -> Self {
        Self { app }
    }
}

impl ResolveLaunch for CentralLaunch {
    fn launch(&self, call: &LeasedCall) -> LaunchFuture {
        let app = self.app.clone();
        let call = call.clone();
        Box::pin(async move {
            let launch = app.central_call_launch(&call).await?;
            app.with_oauth_token(
                call.connection.connection_id,
                launch,
                None,
                Some(call.submitter),
            )
            .await
            .map(|(launch, _)| launch)
        })
    }

    fn renew(&self, call: &LeasedCall, refused: &SessionLaunch) -> RenewFuture {
        let Some(token) = bearer(refused) else {
            return Box::pin(async { None });
        };
        let app = self.app.clone();
        let connection = call.connection.connection_id;
        let launch = refused.clone();
        let caller = call.submitter;
        Box::pin(async move {
            match app
                .with_oauth_token(connection, launch, Some(&token), Some(caller))
                .await
            {
                Ok((launch, true)) => Some(Ok(launch)),
                // Not an OAuth connection: a static credential has nothing to renew.
                Ok((_, false)) => None,
                Err(error) => Some(Err(error)),
            }
        })
    }

    fn refused_renewed(&self, call: &LeasedCall) -> NoticeFuture {
        let app = self.app.clone();
        let connection = call.connection.connection_id;
        let submitter = call.submitter;
        Box::pin(async move {
            let personal = matches!(
                app.db.connection_auth_get(connection).await,
                Ok(Some(settings)) if settings.credential == CredentialHolder::User
            );
            let holder = if personal {
                match app.person(submitter).await {
                    Ok(Some(person)) => person.to_string(),
                    _ => return,
                }
            } else {
                CredentialHolder::Shared.as_str().to_owned()
            };
            let key = GrantKey {
                connection,
                holder,
                resource: String::new(),
            };
            app.grant_dead(&key, None, AuthState::AuthRequired).await;
        })
    }
}

impl App {
    /// `launch` with connection `connection`'s OAuth access token in its `Authorization`
    /// header when the connection is of kind `oauth` (then `true`), else unchanged. With
    /// `refused`, the token the MCP server refused: a renewed one is answered.
    pub(crate) async fn with_oauth_token(
        &self,
        connection: ConnectionId,
        mut launch: SessionLaunch,
        refused: Option<&str>,
        caller: Option<Submitter>,
    ) -> Result<(SessionLaunch, bool), CallError> {
        let ConnectorSpec::Http { url } = &launch.spec else {
            return Ok((launch, false));
        };
        let Some(token) = self
            .oauth_bearer_for(connection, url, refused, caller)
            .await?
        else {
            return Ok((launch, false));
        };
        launch
            .headers
            .retain(|(name, _)| !name.eq_ignore_ascii_case(AUTHORIZATION));
        launch
            .headers
            .push((AUTHORIZATION.to_owned(), format!("Bearer {token}")));
        Ok((launch, true))
    }

    /// The access token to send to connection `connection`'s MCP server at `url`, or `None`
    /// when the connection is not of kind `oauth`. The stored token while it is not due; else
    /// (or when `refused` is the stored token) a renewed one. Fails the call with a
    /// `credential_*` code when there is no usable grant, and `credential_renewal_failed`
    /// when the authorization server could not renew it for now.
    pub async fn oauth_bearer(
        &self,
        connection: ConnectionId,
        url: &str,
        refused: Option<&str>,
    ) -> Result<Option<String>, CallError> {
        self.oauth_bearer_for(connection, url, refused, None).await
    }

    /// The person a call runs for: its submitter, or the user who approved the device that
    /// submitted it (whose per-person grants it uses).
    async fn person(&self, submitter: Submitter) -> Result<Option<UserId>, CallError> {
        match submitter {
            Submitter::User(user) => Ok(Some(user)),
            Submitter::Device(device) => match self.db.device_approver(device).await {
                Ok(user) => Ok(user),
                Err(error) => {
                    tracing::error!(%error, %device, "reading a call's device failed");
                    Err(CallError::new(
                        codes::UNAVAILABLE,
                        "the call's device could not be read (database error)".to_owned(),
                    ))
                }
            },
        }
    }

    /// [`App::oauth_bearer`] for `caller`: with `credential = user`, the calling person's own
    /// grant (none without a caller); else the one every caller shares.
    pub async fn oauth_bearer_for(
        &self,
        connection: ConnectionId,
        url: &str,
        refused: Option<&str>,
        caller: Option<Submitter>,
    ) -> Result<Option<String>, CallError> {
        let internal = |e: sqlx::Error| {
            tracing::error!(error = %e, %connection, "reading an OAuth grant failed");
            CallError::new(
                codes::UNAVAILABLE,
                "the connection's OAuth grant could not be read (database error)".to_owned(),
            )
        };
        let Some(settings) = self
            .db
            .connection_auth_get(connection)
            .await
            .map_err(internal)?
        else {
            return Ok(None);
        };
        if settings.kind != Some(AuthKind::Oauth) {
            return Ok(None);
        }
        let needs = |why: &str| {
            CallError::new(
                codes::MISSING,
                format!(
                    "connection {connection} {why}: authorize it (`switchyard auth WS CONNECTION`)"
                ),
            )
        };
        let Some(vault) = self.config.installation_key.clone() else {
            return Err(needs(
                "has no OAuth grant here (the server holds no installation key)",
            ));
        };
        let personal = settings.credential == CredentialHolder::User;
        let holder = if personal {
            let person = match caller {
                Some(submitter) => self.person(submitter).await?,
                None => None,
            };
            person
                .ok_or_else(|| {
                    CallError::new(
                        codes::CALLER_UNAUTHORIZED,
                        format!(
                            "connection {connection} is authorized per person, and nobody's \
                             grant applies here"
                        ),
                    )
                })?
                .to_string()
        } else {
            CredentialHolder::Shared.as_str().to_owned()
        };
        let Some(row) = self
            .db
            .oauth_grant_get(connection, &holder)
            .await
            .map_err(internal)?
        else {
            return Err(if personal {
                CallError::new(
                    codes::CALLER_UNAUTHORIZED,
                    format!(
                        "connection {connection} is authorized per person, and not by the person \
                         this call runs for: they authorize it (`switchyard auth WS CONNECTION`)"
                    ),
                )
            } else {
                needs("is not authorized")
            });
        };
        if row.resource != url {
            // Obtained for another URL: not what this connection now points at.
            self.db
                .oauth_grants_delete(connection)
                .await
                .map_err(internal)?;
            return Err(needs("changed its URL since it was authorized"));
        }
        // A person's grant that cannot be renewed is deleted (see [`App::grant_dead`]); the
        // shared grant's state is the connection's.
        match settings.state {
            AuthState::AuthRequired | AuthState::Expired if !personal => {
                return Err(CallError::new(
                    codes::AUTH_REQUIRED,
                    format!(
                        "connection {connection} needs authorization again ({}): authorize it \
                         (`switchyard auth WS CONNECTION`)",
                        settings.state
                    ),
                ));
            }
            _ => {}
        }
        let key = GrantKey {
            connection,
            holder,
            resource: url.to_owned(),
        };
        let (record, _) = open_grant(&self.db, &vault, &key)
            .await
            .map_err(|e| CallError::new(codes::UNAVAILABLE, e.to_string()))?
            .ok_or_else(|| needs("is not authorized"))?;
        let standing = record
            .standing(now())
            .ok_or_else(|| needs("holds no access token"))?;
        let renew = standing.due || refused == Some(standing.token.as_str());
        if !renew {
            return Ok(Some(standing.token));
        }
        let observed = refused.unwrap_or(&standing.token).to_owned();
        let store = GrantStore::new(
            self.db.clone(),
            vault,
            key,
            record.client,
            self.config.oauth_timeout,
        );
        self.oauth_renew(connection, store, &observed)
            .await
            .map(Some)
    }

    /// Renews the grant in `store` under its lock, unless another renewed it since `observed`
    /// was read.
    async fn oauth_renew(
        &self,
        connection: ConnectionId,
        store: GrantStore,
        observed: &str,
    ) -> Result<String, CallError> {
        let unavailable = |e: AuthError| CallError::new(codes::UNAVAILABLE, e.to_string());
        // One renewal of a grant at a time in this process, before the advisory lock: the
        // others wait here without holding a database connection.
        let key = store.key().clone();
        let personal = key.holder != CredentialHolder::Shared.as_str();
        let mut flight = self
            .oauth_flights
            .enter((connection, key.holder.clone()))
            .await;
        if let Some(ago) = flight.failed_within(FAILED_RENEWAL_HOLD) {
            // The renewal just before failed for now: its waiters do not each ask again.
            return Err(CallError::new(
                codes::RENEWAL_FAILED,
                format!(
                    "connection {connection}: renewing its OAuth token failed {}s ago; it is \
                     tried again {}s after a failure, nothing was sent",
                    ago.as_secs(),
                    FAILED_RENEWAL_HOLD.as_secs()
                ),
            ));
        }
        // A renewal holds pooled connections throughout (the lock's, and rmcp's load and save):
        // only a few at once, so that renewals never take the pool from everything else.
        let bound = self.config.oauth_timeout;
        let busy = |what: String| {
            CallError::new(
                codes::RENEWAL_FAILED,
                format!(
                    "connection {connection}: renewing its OAuth token failed: {what}; nothing was sent"
                ),
            )
        };
        let _slot = tokio::time::timeout(bound, self.oauth_flights.slots.acquire())
            .await
            .map_err(|_| {
                busy(format!(
                    "{} other renewals kept this server busy for {}s",
                    self.oauth_flights.size,
                    bound.as_secs()
                ))
            })?
            .expect("the renewal slots are never closed");
        let _lock = match store.lock().await {
            Ok(lock) => lock,
            Err(LockRefusal::Busy(wait)) => {
                flight.failed = Some(Instant::now());
                self.metrics.oauth_renewal(Renewal::Failed);
                return Err(busy(format!(
                    "another renewal (on this or another replica) held its grant for more than \
                     {}s",
                    wait.as_secs()
                )));
            }
            Err(LockRefusal::Database(error)) => {
                tracing::error!(%error, %connection, "taking an OAuth grant's lock failed");
                return Err(CallError::new(
                    codes::UNAVAILABLE,
                    "the connection's OAuth grant could not be locked (database error)".to_owned(),
                ));
            }
        };
        // A person's dead grant is that person's to authorize anew, not the connection's.
        let dead_code = if personal {
            codes::CALLER_UNAUTHORIZED
        } else {
            codes::AUTH_REQUIRED
        };
        let auth_required = |why: &str| {
            CallError::new(
                dead_code,
                format!(
                    "connection {connection} needs authorization again: {why}; authorize it \
                     (`switchyard auth WS CONNECTION`)"
                ),
            )
        };
        // The renewal before this one (here or on another replica) may have found the grant
        // dead: its rejected refresh token is still stored, and must not be sent again.
        let settings = self.db.connection_auth_get(connection).await.map_err(|e| {
            tracing::error!(error = %e, %connection, "reading a connection's auth state failed");
            CallError::new(
                codes::UNAVAILABLE,
                "the connection's auth state could not be read (database error)".to_owned(),
            )
        })?;
        if let Some(state @ (AuthState::AuthRequired | AuthState::Expired)) = settings
            .map(|settings| settings.state)
            .filter(|_| !personal)
        {
            return Err(auth_required(&format!("it is `{state}`")));
        }
        // A second look under the lock: another replica may have renewed it meanwhile.
        let record: GrantRecord = store.record().await.map_err(unavailable)?.ok_or_else(|| {
            CallError::new(
                codes::MISSING,
                format!("connection {connection} is no longer authorized (its grant was revoked)"),
            )
        })?;
        let store_read = store.loaded();
        if let Some(standing) = record.standing(now()) {
            if standing.token != observed && !standing.due {
                return Ok(standing.token);
            }
            if !standing.refreshable {
                self.grant_dead(&key, store_read, AuthState::Expired).await;
                return Err(auth_required(
                    "its access token expired and came with no refresh token",
                ));
            }
        }
        let http = OAuthHttp::new(&self.config.endpoints, self.config.oauth_timeout)
            .map_err(unavailable)?;
        let superseded = store.superseded();
        let manager = manager_for(&record.client, Arc::clone(&http), store)
            .await
            .map_err(|e| CallError::new(codes::RENEWAL_FAILED, e.to_string()))?;
        let renewed = manager.refresh_token().await;
        if superseded.load(std::sync::atomic::Ordering::SeqCst) {
            self.metrics.oauth_renewal(Renewal::Failed);
            return Err(CallError::new(
                codes::MISSING,
                format!(
                    "connection {connection}: its grant was revoked or replaced while its token \
                     was renewed, so the renewed token was discarded; nothing was sent"
                ),
            ));
        }
        match renewed {
            Ok(token) => {
                flight.failed = None;
                self.metrics.oauth_renewal(Renewal::Ok);
                TokenFacts::of(&token).access_token.ok_or_else(|| {
                    CallError::new(
                        codes::RENEWAL_FAILED,
                        "the authorization server answered the refresh without an access token"
                            .to_owned(),
                    )
                })
            }
            Err(AuthError::TokenRefreshRejected(_)) => {
                // The store moved the connection to `auth_required` before the lock went.
                self.metrics.oauth_renewal(Renewal::Rejected);
                Err(auth_required(
                    "the authorization server refused its refresh token",
                ))
            }
            Err(_) if http.last_error().as_deref() == Some("invalid_client") => {
                self.metrics.oauth_renewal(Renewal::Rejected);
                self.grant_dead(&key, store_read, AuthState::AuthRequired)
                    .await;
                Err(auth_required(
                    "the authorization server no longer knows the client it registered \
                     (authorizing again registers a new one)",
                ))
            }
            Err(AuthError::AuthorizationRequired) => {
                self.metrics.oauth_renewal(Renewal::Rejected);
                self.grant_dead(&key, store_read, AuthState::AuthRequired)
                    .await;
                Err(auth_required("its grant cannot be renewed"))
            }
            Err(error) => {
                flight.failed = Some(Instant::now());
                self.metrics.oauth_renewal(Renewal::Failed);
                tracing::warn!(%connection, %error, "renewing an OAuth token failed");
                Err(CallError::new(
                    codes::RENEWAL_FAILED,
                    format!(
                        "connection {connection}: renewing its OAuth token failed: {error}; \
                         nothing was sent"
                    ),
                ))
            }
        }
    }

    /// Records that grant `key` can no longer be renewed (`state`): the shared grant's state
    /// is the connection's; a person's grant is deleted, so that person authorizes anew and
    /// nothing asks the authorization server again meanwhile.
    /// `read` is the generation the renewal read, if any: a grant obtained anew since stays.
    pub(super) async fn grant_dead(&self, key: &GrantKey, read: Option<i64>, state: AuthState) {
        if key.holder == CredentialHolder::Shared.as_str() {
            self.set_auth_state(key.connection, state).await;
        } else if let Err(error) = self
            .db
            .oauth_grant_delete(key.connection, &key.holder, read)
            .await
        {
            tracing::warn!(%error, connection = %key.connection, "cannot delete a person's dead grant");
        }
    }

    /// Records `state` for `connection`, logging (not failing) a database error: the call's
    /// own error already says what happened.
    async fn set_auth_state(&self, connection: ConnectionId, state: AuthState) {
        if let Err(error) = self.db.connection_auth_state_set(connection, state).await {
            tracing::warn!(%error, %connection, %state, "cannot record the connection's auth state");
        }
    }
}

/// How long after a renewal failed for now (no answer in time, a passing error) the calls
/// waiting behind it fail at once instead of each asking the authorization server again.
const FAILED_RENEWAL_HOLD: Duration = Duration::from_secs(5);

/// One connection's lane: held by the renewal in flight, it remembers when the last one
/// failed for now.
#[derive(Debug, Default)]
struct Lane {
    failed: Option<Instant>,
}

impl Lane {
    /// How long ago the last renewal failed, if within `hold`.
    fn failed_within(&self, hold: Duration) -> Option<Duration> {
        self.failed.map(|at| at.elapsed()).filter(|ago| *ago < hold)
    }
}

/// One grant: its connection and its holder (`shared`, or a person's user id).
type GrantId = (ConnectionId, String);

/// The renewals in flight in this process: one lane per connection's grant, and a few slots
/// for renewals at once.
#[derive(Debug)]
pub struct Flights {
    lanes: std::sync::Mutex<HashMap<GrantId, Arc<tokio::sync::Mutex<Lane>>>>,
    /// A renewal holds one while it runs.
    slots: tokio::sync::Semaphore,
    /// How many there are.
    size: usize,
}

/// How many renewals may run at once on a database pool of `pool` connections: a quarter of
/// it, at least one (each holds up to two connections: its lock's, and one to load or save).
fn renewal_slots(pool: u32) -> usize {
    usize::try_from(pool / 4).unwrap_or(usize::MAX).max(1)
}

impl Flights {
    /// The renewals of a process whose database pool holds `pool` connections.
    pub fn new(pool: u32) -> Self {
        let size = renewal_slots(pool);
        Self {
            lanes: std::sync::Mutex::default(),
            slots: tokio::sync::Semaphore::new(size),
            size,
        }
    }

    /// Waits for the lane of `grant` (connection, holder); renewing holds it until the guard
    /// drops.
    async fn enter(&self, grant: GrantId) -> tokio::sync::OwnedMutexGuard<Lane> {
        let lane = {
            let mut lanes = self
                .lanes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Lanes nobody waits on are dropped as others are made, unless they remember a
            // recent failure: the map stays as small as the connections renewing at once.
            lanes.retain(|_, lane| {
                Arc::strong_count(lane) > 1
                    || lane
                        .try_lock()
                        .is_ok_and(|lane| lane.failed_within(FAILED_RENEWAL_HOLD).is_some())
            });
            Arc::clone(lanes.entry(grant).or_default())
        };
        lane.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::renewal_slots;

    #[test]
    fn renewals_take_a_quarter_of_the_pool_and_at_least_one_slot() {
        assert_eq!(renewal_slots(16), 4);
        assert_eq!(renewal_slots(10), 2);
        assert_eq!(renewal_slots(3), 1);
        assert_eq!(renewal_slots(0), 1);
    }
}
