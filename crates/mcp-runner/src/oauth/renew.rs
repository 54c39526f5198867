//! The device runner's OAuth access tokens: a [`ResolveLaunch`] around the device's own that
//! puts a connection's grant from the keyring into its `Authorization` header when the
//! connection uses OAuth, renewed before it expires and once more when the MCP server refuses
//! it.
//!
//! - Single-flight per connection in the runner: one renewal at a time, and the calls behind
//!   it use the token it obtained (a second look after the wait); for 5 s after a renewal
//!   failed for now, the calls behind it fail at once instead of each asking again.
//! - A refresh token the authorization server rejects (`invalid_grant`), or a client it forgot
//!   (`invalid_client`), marks the grant `auth_required` after that one attempt: later calls
//!   fail at once, until a person runs `switchyard auth` on the device again.
//! - A grant is sent only to the URL it was obtained for, and forgotten when the connection's
//!   URL or declared auth kind changed.
//! - Every request is bounded by the timeout and screened by the device's endpoint guard.

use super::device::{DeviceGrant, DeviceGrantStore, DeviceGrants};
use super::http::OAuthHttp;
use super::record::TokenFacts;
use super::{client_manager, now};
use crate::credentials::codes;
use crate::endpoints::EndpointGuard;
use crate::launch::{
    LaunchFuture, LaunchResolver, NoticeFuture, RenewFuture, ResolveLaunch, SessionLaunch,
};
use rmcp::transport::auth::AuthError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use switchyard_protocol::ConnectionId;
use switchyard_protocol::api::{AuthKind, AuthState, CallError, ConnectorSpec};
use switchyard_protocol::runner::{AuthStateReport, LeasedCall};
use tokio::sync::mpsc;

/// The header an access token goes in.
const AUTHORIZATION: &str = "Authorization";

/// A launch resolver that adds device OAuth grants to another's launches.
#[derive(Clone)]
pub struct DeviceOAuth {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for DeviceOAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceOAuth")
            .field("timeout", &self.shared.timeout)
            .finish_non_exhaustive()
    }
}

struct Shared {
    inner: LaunchResolver,
    grants: DeviceGrants,
    guard: EndpointGuard,
    timeout: Duration,
    lanes: Mutex<HashMap<ConnectionId, Lane>>,
    /// Where changed grant states go (to the server), if anywhere.
    reports: Option<mpsc::Sender<AuthStateReport>>,
    /// The state last sent for each connection, and when.
    reported: Mutex<HashMap<ConnectionId, (AuthState, Instant)>>,
}

/// One connection's renewals take turns here; it holds when the last one failed for now.
type Lane = Arc<tokio::sync::Mutex<Option<Instant>>>;

/// How long after a renewal failed for now (no answer in time, a passing error) the calls
/// waiting behind it fail at once instead of each asking the authorization server again.
const FAILED_RENEWAL_HOLD: Duration = Duration::from_secs(5);

/// How often an unchanged state is sent again while the connection is used: a report lost
/// on its way, or a state the server changed itself, is set right within this.
const REPORT_AGAIN_AFTER: Duration = Duration::from_secs(60);

impl DeviceOAuth {
    /// `inner`'s launches with the grants in `grants`, each OAuth request screened by `guard`
    /// and bounded by `timeout`; a grant's changed state is sent to `reports` (for the
    /// server), when given.
    pub fn wrap(
        inner: LaunchResolver,
        grants: DeviceGrants,
        guard: EndpointGuard,
        timeout: Duration,
        reports: Option<mpsc::Sender<AuthStateReport>>,
    ) -> LaunchResolver {
        Arc::new(Self {
            shared: Arc::new(Shared {
                inner,
                grants,
                guard,
                timeout,
                lanes: Mutex::default(),
                reports,
                reported: Mutex::default(),
            }),
        })
    }
}

impl ResolveLaunch for DeviceOAuth {
    fn launch(&self, call: &LeasedCall) -> LaunchFuture {
        let resolved = self.shared.inner.launch(call);
        let shared = Arc::clone(&self.shared);
        let target = Target::of(call);
        Box::pin(async move {
            let launch = resolved.await?;
            shared
                .with_token(&target, launch, None)
                .await
                .map(|(launch, _)| launch)
        })
    }

    fn renew(&self, call: &LeasedCall, refused: &SessionLaunch) -> RenewFuture {
        let Some(token) = bearer(refused) else {
            return self.shared.inner.renew(call, refused);
        };
        let shared = Arc::clone(&self.shared);
        let target = Target::of(call);
        let launch = refused.clone();
        let call = call.clone();
        Box::pin(async move {
            match shared
                .with_token(&target, launch.clone(), Some(&token))
                .await
            {
                Ok((launch, true)) => Some(Ok(launch)),
                // No grant of its own: whatever the bindings' resolver can renew.
                Ok((_, false)) => shared.inner.renew(&call, &launch).await,
                Err(error) => Some(Err(error)),
            }
        })
    }

    fn refused_renewed(&self, call: &LeasedCall) -> NoticeFuture {
        let shared = Arc::clone(&self.shared);
        let connection = call.connection.connection_id;
        let inner = self.shared.inner.refused_renewed(call);
        Box::pin(async move {
            inner.await;
            match shared
                .grants
                .set_state(connection, None, AuthState::AuthRequired)
            {
                Ok(true) => shared.report(connection, AuthState::AuthRequired),
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(%error, %connection, "cannot record that the connection needs authorization");
                }
            }
        })
    }
}

/// What of a call decides its token.
struct Target {
    connection: ConnectionId,
    kind: Option<AuthKind>,
}

impl Target {
    fn of(call: &LeasedCall) -> Self {
        Self {
            connection: call.connection.connection_id,
            kind: call.connection.auth_kind,
        }
    }
}

impl Shared {
    /// `launch` with the connection's access token when it uses a device OAuth grant (then
    /// `true`); with `refused`, the token its server refused, and a renewed one is sent.
    async fn with_token(
        &self,
        target: &Target,
        mut launch: SessionLaunch,
        refused: Option<&str>,
    ) -> Result<(SessionLaunch, bool), CallError> {
        let ConnectorSpec::Http { url } = &launch.spec else {
            return Ok((launch, false));
        };
        let connection = target.connection;
        let unavailable = |e: crate::credentials::StoreError| {
            CallError::new(
                codes::UNAVAILABLE,
                format!("connection {connection}: its OAuth grant in the keyring: {e}"),
            )
        };
        let needs = |why: &str| {
            CallError::new(
                codes::MISSING,
                format!(
                    "connection {connection} {why}: authorize it on this device (`switchyard auth \
                     WS CONNECTION`)"
                ),
            )
        };
        let found = self.grants.get(connection);
        let grant = match (target.kind, found) {
            (Some(AuthKind::None | AuthKind::Token), found) => {
                // Declared to send no OAuth token: a grant obtained before the change is not
                // what the connection now says to send. (No keyring: there is none to forget.)
                if let Ok(Some(_)) = found
                    && let Err(error) = self.grants.delete(connection)
                {
                    tracing::warn!(%error, %connection, "cannot forget a grant the connection no longer uses");
                }
                return Ok((launch, false));
            }
            (Some(AuthKind::Oauth), found) => match found.map_err(unavailable)? {
                Some(grant) => grant,
                None => {
                    self.report(connection, AuthState::NeedsAuthorization);
                    return Err(needs("is not authorized on this device"));
                }
            },
            // Not declared: a grant authorized here for this URL is sent; without a keyring,
            // or without a grant, the connection sends what its bindings say.
            (None, Ok(Some(grant))) => grant,
            (None, _) => return Ok((launch, false)),
        };
        if grant.resource != *url {
            self.grants.delete(connection).map_err(unavailable)?;
            self.report(connection, AuthState::NeedsAuthorization);
            return Err(needs("changed its URL since it was authorized"));
        }
        let token = self.token(connection, grant, refused).await?;
        self.report(connection, AuthState::Authorized);
        launch
            .headers
            .retain(|(name, _)| !name.eq_ignore_ascii_case(AUTHORIZATION));
        launch
            .headers
            .push((AUTHORIZATION.to_owned(), format!("Bearer {token}")));
        Ok((launch, true))
    }

    /// The access token of `grant`: the stored one while it is not due and not `refused`,
    /// else renewed.
    async fn token(
        &self,
        connection: ConnectionId,
        grant: DeviceGrant,
        refused: Option<&str>,
    ) -> Result<String, CallError> {
        self.check_state(connection, &grant)?;
        let standing = grant.grant.standing(now()).ok_or_else(|| {
            CallError::new(
                codes::MISSING,
                format!("connection {connection}: its grant holds no access token"),
            )
        })?;
        if !standing.due && refused != Some(standing.token.as_str()) {
            return Ok(standing.token);
        }
        let observed = refused.unwrap_or(&standing.token).to_owned();
        let lane = self.lane(connection);
        let mut failed = lane.lock().await;
        if let Some(ago) = failed
            .map(|at| at.elapsed())
            .filter(|ago| *ago < FAILED_RENEWAL_HOLD)
        {
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
        let renewed = self.renew(connection, &observed).await;
        *failed = match &renewed {
            Err(error) if error.code == codes::RENEWAL_FAILED => Some(Instant::now()),
            _ => None,
        };
        renewed
    }

    /// The lane renewals of `connection` take turns in. Lanes nobody waits on are dropped
    /// as others are made, unless they remember a recent failure.
    fn lane(&self, connection: ConnectionId) -> Lane {
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        lanes.retain(|_, lane| {
            Arc::strong_count(lane) > 1
                || lane
                    .try_lock()
                    .is_ok_and(|failed| failed.is_some_and(|at| at.elapsed() < FAILED_RENEWAL_HOLD))
        });
        Arc::clone(lanes.entry(connection).or_default())
    }

    /// Renews `connection`'s grant, unless another call renewed it since `observed` was read.
    async fn renew(&self, connection: ConnectionId, observed: &str) -> Result<String, CallError> {
        let auth_required = |why: &str| {
            CallError::new(
                codes::AUTH_REQUIRED,
                format!(
                    "connection {connection} needs authorization again: {why}; authorize it on \
                     this device (`switchyard auth WS CONNECTION`)"
                ),
            )
        };
        let unavailable = |e: String| {
            CallError::new(
                codes::UNAVAILABLE,
                format!("connection {connection}: its OAuth grant in the keyring: {e}"),
            )
        };
        // A second look after the wait: the renewal before this one may have done it.
        let grant = self
            .grants
            .get(connection)
            .map_err(|e| unavailable(e.to_string()))?
            .ok_or_else(|| {
                CallError::new(
                    codes::MISSING,
                    format!(
                        "connection {connection} is no longer authorized (its grant was revoked)"
                    ),
                )
            })?;
        self.check_state(connection, &grant)?;
        if let Some(standing) = grant.grant.standing(now()) {
            if standing.token != observed && !standing.due {
                return Ok(standing.token);
            }
            if !standing.refreshable {
                self.mark(connection, grant.generation, AuthState::Expired);
                return Err(auth_required(
                    "its access token expired and came with no refresh token",
                ));
            }
        }
        let http =
            OAuthHttp::new(&self.guard, self.timeout).map_err(|e| unavailable(e.to_string()))?;
        let store = DeviceGrantStore::renewing(self.grants.clone(), connection, &grant);
        let manager = client_manager(
            &grant.grant.client,
            Arc::clone(&http),
            grant.grant.client.registered_secret.clone(),
            store.clone(),
        )
        .await
        .map_err(|e| CallError::new(codes::RENEWAL_FAILED, e.to_string()))?;
        let renewed = manager.refresh_token().await;
        if store.superseded() {
            return Err(CallError::new(
                codes::MISSING,
                format!(
                    "connection {connection}: its grant was revoked or replaced while its token \
                     was renewed, so the renewed token was discarded; nothing was sent"
                ),
            ));
        }
        match renewed {
            Ok(token) => TokenFacts::of(&token).access_token.ok_or_else(|| {
                CallError::new(
                    codes::RENEWAL_FAILED,
                    "the authorization server answered the refresh without an access token"
                        .to_owned(),
                )
            }),
            // The store marked the grant `auth_required`.
            Err(AuthError::TokenRefreshRejected(_)) => {
                if self
                    .grants
                    .get(connection)
                    .ok()
                    .flatten()
                    .is_some_and(|now| now.state == AuthState::AuthRequired)
                {
                    self.report(connection, AuthState::AuthRequired);
                }
                Err(auth_required(
                    "the authorization server refused its refresh token",
                ))
            }
            Err(_) if http.last_error().as_deref() == Some("invalid_client") => {
                self.mark(connection, grant.generation, AuthState::AuthRequired);
                Err(auth_required(
                    "the authorization server no longer knows the client it registered \
                     (authorizing again registers a new one)",
                ))
            }
            Err(AuthError::AuthorizationRequired) => {
                self.mark(connection, grant.generation, AuthState::AuthRequired);
                Err(auth_required("its grant cannot be renewed"))
            }
            Err(error) => {
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

    /// Records `state` on the grant as renewal read it (generation `read`), logging (not failing) a keyring error: the call's own
    /// error already says what happened.
    fn mark(&self, connection: ConnectionId, read: u64, state: AuthState) {
        match self.grants.set_state(connection, Some(read), state) {
            Ok(true) => self.report(connection, state),
            // A grant written since is not this renewal's to judge.
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, %connection, %state, "cannot record the grant's state");
            }
        }
    }

    /// Sends `state` to the server unless it was sent for `connection` within
    /// [`REPORT_AGAIN_AFTER`] (a full queue drops it; it goes at the next use).
    fn report(&self, connection: ConnectionId, state: AuthState) {
        let Some(reports) = &self.reports else {
            return;
        };
        let mut reported = self.reported.lock().unwrap_or_else(PoisonError::into_inner);
        if reported
            .get(&connection)
            .is_some_and(|(sent, at)| *sent == state && at.elapsed() < REPORT_AGAIN_AFTER)
        {
            return;
        }
        if reports
            .try_send(AuthStateReport {
                connection_id: connection,
                state,
            })
            .is_ok()
        {
            reported.insert(connection, (state, Instant::now()));
        }
    }

    /// Fails the call at once when the grant can no longer be renewed (and says so to the
    /// server).
    fn check_state(&self, connection: ConnectionId, grant: &DeviceGrant) -> Result<(), CallError> {
        let checked = check_state(connection, grant);
        if checked.is_err() {
            self.report(connection, grant.state);
        }
        checked
    }
}

/// Fails the call at once when the grant can no longer be renewed.
fn check_state(connection: ConnectionId, grant: &DeviceGrant) -> Result<(), CallError> {
    match grant.state {
        state @ (AuthState::AuthRequired | AuthState::Expired) => Err(CallError::new(
            codes::AUTH_REQUIRED,
            format!(
                "connection {connection} needs authorization again ({state}): authorize it on \
                 this device (`switchyard auth WS CONNECTION`)"
            ),
        )),
        AuthState::Authorized | AuthState::NeedsAuthorization => Ok(()),
    }
}

/// The bearer token `launch` sends, if any.
pub fn bearer(launch: &SessionLaunch) -> Option<String> {
    launch
        .headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(AUTHORIZATION))
        .and_then(|(_, value)| value.strip_prefix("Bearer "))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::NoKeyring;
    use crate::executor::immediate_resolver;
    use switchyard_protocol::runner::{ConnectionTarget, Epoch, Submitter};
    use switchyard_protocol::{CallId, ProfileId, RequestId, UserId};

    fn call(auth_kind: Option<AuthKind>) -> LeasedCall {
        LeasedCall {
            traceparent: None,
            call_id: CallId::new(),
            request_id: RequestId::new(),
            epoch: Epoch(1),
            connection: ConnectionTarget {
                connection_id: ConnectionId::new(),
                revision: 1,
                spec: ConnectorSpec::Http {
                    url: "http://127.0.0.1:1/mcp".into(),
                },
                accepted_spec_digest: None,
                auth_kind,
            },
            tool_name: "echo".into(),
            arguments: serde_json::json!({}),
            timeout_seconds: 1,
            client_session_id: None,
            profile_id: ProfileId::new(),
            submitter: Submitter::User(UserId::new()),
            kind: Default::default(),
        }
    }

    /// A device runner without an OS keyring: its bindings' header, and nothing else.
    fn without_keyring() -> LaunchResolver {
        let bound = immediate_resolver(|call: &LeasedCall| {
            Ok(SessionLaunch {
                spec: call.connection.spec.clone(),
                env: Vec::new(),
                headers: vec![(AUTHORIZATION.to_owned(), "Bearer bound".to_owned())],
            })
        });
        DeviceOAuth::wrap(
            bound,
            DeviceGrants::new(Arc::new(NoKeyring)),
            EndpointGuard::device(),
            Duration::from_secs(1),
            None,
        )
    }

    #[tokio::test]
    async fn without_a_keyring_only_a_declared_oauth_connection_fails() {
        let resolver = without_keyring();
        for kind in [None, Some(AuthKind::None), Some(AuthKind::Token)] {
            let launch = resolver.launch(&call(kind)).await.expect("launches");
            assert_eq!(bearer(&launch).as_deref(), Some("bound"), "{kind:?}");
        }
        let error = resolver
            .launch(&call(Some(AuthKind::Oauth)))
            .await
            .expect_err("no grant can be read");
        assert_eq!(error.code, codes::UNAVAILABLE);
        assert!(error.message.contains("keyring"), "{}", error.message);
    }

    /// A keyring in memory.
    #[derive(Default)]
    struct MemoryKeyring(Mutex<HashMap<(String, String), String>>);

    impl crate::credentials::SecretStore for MemoryKeyring {
        fn get(
            &self,
            service: &str,
            account: &str,
        ) -> Result<Option<String>, crate::credentials::StoreError> {
            let entries = self.0.lock().unwrap();
            Ok(entries.get(&(service.into(), account.into())).cloned())
        }

        fn set(
            &self,
            service: &str,
            account: &str,
            value: &str,
        ) -> Result<(), crate::credentials::StoreError> {
            let mut entries = self.0.lock().unwrap();
            entries.insert((service.into(), account.into()), value.into());
            Ok(())
        }

        fn delete(
            &self,
            service: &str,
            account: &str,
        ) -> Result<(), crate::credentials::StoreError> {
            self.0
                .lock()
                .unwrap()
                .remove(&(service.into(), account.into()));
            Ok(())
        }
    }

    /// A grant for `url` whose access token lapsed an hour ago, renewed at an authorization
    /// server that refuses connections (nothing listens on port 1).
    fn lapsed_grant(url: &str) -> DeviceGrant {
        serde_json::from_value(serde_json::json!({
            "resource": url,
            "grant": {
                "credentials": {
                    "client_id": "device-client",
                    "token_response": {"access_token": "lapsed-token", "token_type": "Bearer",
                                       "expires_in": 60, "refresh_token": "refresh-1"},
                    "token_received_at": now() - 3600,
                },
                "client": {
                    "metadata": {"authorization_endpoint": "http://127.0.0.1:1/authorize",
                                 "token_endpoint": "http://127.0.0.1:1/token",
                                 "code_challenge_methods_supported": ["S256"]},
                    "client_id": "device-client",
                    "client_secret_env": null,
                    "redirect_uri": "http://127.0.0.1:2/callback",
                    "resource_indicator": url,
                },
            },
            "state": "authorized",
            "generation": 7,
        }))
        .expect("a grant")
    }

    #[tokio::test]
    async fn a_renewal_that_failed_for_now_holds_the_calls_behind_it() {
        crate::device::install_tls_provider();
        let call = call(Some(AuthKind::Oauth));
        let ConnectorSpec::Http { url } = &call.connection.spec else {
            unreachable!("an HTTP call")
        };
        let grants = DeviceGrants::new(Arc::new(MemoryKeyring::default()));
        grants
            .put(call.connection.connection_id, &lapsed_grant(url))
            .expect("stored");
        let bound = immediate_resolver(|call: &LeasedCall| {
            Ok(SessionLaunch {
                spec: call.connection.spec.clone(),
                env: Vec::new(),
                headers: Vec::new(),
            })
        });
        let resolver = DeviceOAuth::wrap(
            bound,
            grants.clone(),
            EndpointGuard::device(),
            Duration::from_secs(5),
            None,
        );

        let first = resolver.launch(&call).await.expect_err("nothing answers");
        assert_eq!(first.code, codes::RENEWAL_FAILED, "{}", first.message);
        assert!(
            first.message.contains("renewing its OAuth token failed"),
            "{}",
            first.message
        );
        let held = resolver.launch(&call).await.expect_err("held");
        assert_eq!(held.code, codes::RENEWAL_FAILED);
        assert!(
            held.message.contains("tried again 5s after a failure"),
            "{}",
            held.message
        );
        // A passing failure is not a dead grant: it stays as it was, to be renewed later.
        let kept = grants
            .get(call.connection.connection_id)
            .expect("readable")
            .expect("kept");
        assert_eq!((kept.state, kept.generation), (AuthState::Authorized, 7));
    }
}
