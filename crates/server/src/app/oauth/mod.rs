//! OAuth 2.1 for central HTTP connections, as the MCP authorization spec says, on rmcp's
//! `auth` client: a connection's auth settings, authorizing it (discovery from the server's
//! 401 challenge, a client identity, PKCE S256, the resource indicator, the callback's `iss`
//! checked before the code is redeemed) and its tokens, sealed in PostgreSQL and renewed
//! before they expire or when the server refuses one ([`renew`]).
//!
//! Guarantees:
//! - No token, refresh token, PKCE verifier or client secret is stored in clear, logged or
//!   answered: grants and pending flows are sealed with the installation key
//!   ([`crate::vault`]); declared client secrets are read from the server's environment
//!   when used, and one dynamic registration answered is sealed with the flow and the grant.
//! - Any replica can answer the callback (the flow's state is in `oauth_pending`), and
//!   renewal is single-flight across replicas (the grant's advisory lock, then a second look).
//! - Every OAuth request is bounded by [`super::AppConfig::oauth_timeout`].
//! - Changing the auth kind, or the connector's URL, empties the credential: a grant is sent
//!   only to the URL it was obtained for.
//! - A renewal stores its token only over the grant generation it read under the grant's
//!   lock: a revoke or a new authorization meanwhile wins, and the renewed token is dropped.
//!
//! - `credential = user`: each person authorizes their own grant (a member may, for
//!   themselves; the shared grant is an admin's), and a call sends the grant of the person it
//!   runs for (its submitter, or the user who approved the submitting device). A person's
//!   grant that cannot be renewed is deleted rather than marked, so the connection's state
//!   stays the shared grant's; views show each caller their own.
//!
//! Device connections' grants live on the device (`switchyard_mcp_runner::oauth`).

mod grant;
mod renew;
mod store;

pub use crate::db::{grant_context, pending_context};
pub use renew::{CentralLaunch, Flights};

use self::grant::{ClientRecord, PendingRecord, state_digest};
use self::store::{GrantKey, GrantStore, PendingStore};
use super::audit::Audit;
use super::{Actor, App};
use crate::db::ConnectionRow;
use crate::error::{AppError, AppResult};
use crate::vault::KeyFile;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadataSource, AuthorizationRequest,
    AuthorizationSession,
};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use switchyard_mcp_runner::oauth::authorize::AuthorizeError;
use switchyard_mcp_runner::oauth::{OAuthHttp, ResourceProblem, check_resource, client_manager};
use switchyard_protocol::ErrorCode;
use switchyard_protocol::api::{
    AuthKind, AuthorizationStarted, ClientVariableProblem, ConnectionView, ConnectorSpec,
    CredentialHolder, OAUTH_ENV_PREFIX, SetConnectionAuth, TokenHeaderProblem,
    check_client_variable, check_token_header, is_default_token_header,
};

/// How long an authorization waits for its callback.
const PENDING_TTL: Duration = Duration::from_secs(600);
/// The name the server registers its OAuth clients under.
const CLIENT_NAME: &str = "Switchyard";
/// Where the authorization server sends the browser back, under the server's base URL.
pub const CALLBACK_PATH: &str = "/mcp/callback";

/// What the callback's query carries (RFC 6749 §4.1.2, RFC 9207).
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct CallbackQuery {
    /// The authorization code.
    pub code: Option<String>,
    /// The state the flow began with.
    pub state: Option<String>,
    /// The issuer that answered (RFC 9207).
    pub iss: Option<String>,
    /// The authorization server's refusal, when it refused.
    pub error: Option<String>,
}

impl App {
    /// Replaces connection `connection`'s auth settings (workspace admins). Changing its kind
    /// empties the credential it holds. `oauth` is refused for a stdio connection
    /// (`authorization_unsupported`), a `header` unless its kind is `token`
    /// (`invalid_request`).
    pub async fn connection_auth_set(
        &self,
        actor: &Actor,
        ws: &str,
        connection: &str,
        mut settings: SetConnectionAuth,
    ) -> AppResult<ConnectionView> {
        let membership = self.admin_membership(actor, ws).await?;
        let row = self
            .find_connection(membership.workspace.id, connection)
            .await?;
        check_settings(&row, &settings)?;
        // The default header is kept as none, so that a file need not say it to match.
        settings.header = settings
            .header
            .filter(|header| !is_default_token_header(header));
        if settings.kind == Some(AuthKind::Oauth) {
            let connector = self.db.connector_get(row.connector_id).await?;
            if !matches!(connector.spec(), ConnectorSpec::Http { .. }) {
                return Err(AppError::refused(
                    ErrorCode::AuthorizationUnsupported,
                    format!(
                        "connection `{}` runs a stdio server: OAuth is for HTTP connections; use \
                         `token` with a credential binding instead",
                        row.name
                    ),
                ));
            }
        }
        let before = super::views::connection_auth(&row.auth);
        let after = self.db.connection_auth_set(row.id, &settings).await?;
        self.audit(
            Audit::by(actor, "connection.auth_changed")
                .workspace(row.workspace_id)
                .connection(row.id)
                .object("connection", Some(row.id.0), &row.name)
                .before(json!(before))
                .after(json!({"kind": after.kind, "scopes": after.scopes,
                    "client_id_env": after.client_id_env,
                    "client_secret_env": after.client_secret_env,
                    "credential": after.credential, "state": after.state,
                    "header": after.header})),
        )
        .await;
        let view = self.db.connection_get(row.id).await?;
        Ok(super::views::connection(&view))
    }

    /// Begins authorizing central HTTP connection `connection` (workspace admins): asks its
    /// server (a 401 with a `Bearer` challenge means OAuth), discovers its authorization
    /// server, obtains a client identity (the declared `client_id_env`; else a Client ID
    /// Metadata Document where supported; else dynamic registration), and answers the URL a
    /// person consents at. The browser then comes back to `<base_url>/mcp/callback`.
    pub async fn connection_authorize(
        &self,
        actor: &Actor,
        ws: &str,
        connection: &str,
    ) -> AppResult<AuthorizationStarted> {
        let membership = self.membership(actor, ws).await?;
        let row = self
            .find_connection(membership.workspace.id, connection)
            .await?;
        let settings = self.db.connection_auth_get(row.id).await?;
        // A person's own grant is theirs to obtain; the one every caller shares, an admin's.
        let holder = match settings.as_ref().map(|settings| settings.credential) {
            Some(CredentialHolder::User) => actor.user.id.to_string(),
            _ => {
                membership.require_admin()?;
                CredentialHolder::Shared.as_str().to_owned()
            }
        };
        let vault = self.vault()?;
        let url = self.oauth_target(&row).await?;
        let declared = settings.as_ref().and_then(|settings| settings.kind);
        if let Some(kind @ (AuthKind::None | AuthKind::Token)) = declared {
            return Err(AppError::refused(
                ErrorCode::AuthorizationUnsupported,
                format!(
                    "connection `{}` is declared `auth = {kind}`: nothing to authorize with OAuth \
                     (set a token with `switchyard auth` for `token`)",
                    row.name
                ),
            ));
        }
        let http = self.oauth_http()?;
        let probe = http
            .probe(&url)
            .await
            .map_err(|e| failed(&row.name, &format!("its MCP server at {url}: {e}")))?;
        let Some(challenge) = probe.bearer_challenge.filter(|_| probe.status == 401) else {
            if declared.is_none() && (200..300).contains(&probe.status) {
                self.db
                    .connection_auth_discovered(row.id, AuthKind::None)
                    .await?;
            }
            return Err(AppError::refused(
                ErrorCode::AuthorizationUnsupported,
                format!(
                    "connection `{}`: its MCP server answered {} without a `Bearer` challenge, so \
                     it asks for no OAuth authorization",
                    row.name, probe.status
                ),
            ));
        };
        if declared.is_none() {
            self.db
                .connection_auth_discovered(row.id, AuthKind::Oauth)
                .await?;
        }
        let settings = self
            .db
            .connection_auth_get(row.id)
            .await?
            .unwrap_or_else(|| {
                unreachable!("a connection's auth row exists once its kind was discovered")
            });
        // Re-checked here: settings stored before the namespace existed may name any variable.
        let preregistered = match &settings.client_id_env {
            Some(id) => Some(Preregistered {
                client_id: server_env(id, "client_id_env", &row.name)?,
                client_secret: settings
                    .client_secret_env
                    .as_deref()
                    .map(|secret| server_env(secret, "client_secret_env", &row.name))
                    .transpose()?,
            }),
            None => None,
        };
        let begun = self
            .begin_flow(
                &url,
                &challenge,
                &settings,
                preregistered,
                Arc::clone(&http),
            )
            .await
            .map_err(|e| match e {
                FlowError::Auth(e) => refusal_of(&row.name, &e, http.last_error()),
                FlowError::Resource(problem) => resource_refusal(&problem, &row.name),
            })?;
        let digest = state_digest(&begun.csrf);
        let plain = serde_json::to_vec(&begun.record)
            .map_err(|e| AppError::Internal(format!("an OAuth flow does not serialize: {e}")))?;
        let context = pending_context(&digest);
        let seal = || vault.reload().map(|keys| keys.seal(&context, &plain));
        let expires = chrono::Utc::now()
            + chrono::Duration::from_std(PENDING_TTL).expect("ten minutes is a duration");
        self.db
            .oauth_pending_put(&digest, row.id, &holder, seal, expires)
            .await?
            .map_err(|e| AppError::Internal(format!("sealing an OAuth flow: {e}")))?;
        self.audit(
            Audit::by(actor, "connection.authorization_started")
                .workspace(row.workspace_id)
                .connection(row.id)
                .object("connection", Some(row.id.0), &row.name)
                .after(json!({"issuer": begun.record.client.metadata.issuer})),
        )
        .await;
        Ok(AuthorizationStarted {
            authorization_url: begun.authorization_url,
            state: begun.csrf,
        })
    }

    /// Finishes an authorization at its callback (no API authentication: the state is the
    /// capability): checks the answer's `iss` against the issuer the flow began with before
    /// the code is redeemed (`issuer_mismatch`), redeems it, stores the grant sealed and marks
    /// the connection `authorized`. Answers the connection's name.
    pub async fn oauth_callback(&self, query: CallbackQuery) -> AppResult<String> {
        let state = query.state.as_deref().unwrap_or_default();
        let digest = state_digest(state);
        let invalid = || {
            AppError::refused(
                ErrorCode::AuthorizationStateInvalid,
                "this authorization is unknown, expired (after ten minutes) or already used: \
                 start it again with `switchyard auth`",
            )
        };
        let pending = self
            .db
            .oauth_pending_get(&digest)
            .await?
            .ok_or_else(invalid)?;
        let vault = self.vault()?;
        let plain = vault
            .open(&pending_context(&digest), &pending.sealed)
            .map_err(|_| invalid())?;
        let record: PendingRecord = serde_json::from_slice(&plain).map_err(|_| invalid())?;
        let row = self.db.connection_get(pending.connection_id).await?;
        if let Some(refusal) = callback_refusal(&row) {
            self.db.oauth_pending_delete(&digest).await?;
            return Err(refusal);
        }
        if let Some(error) = &query.error {
            self.db.oauth_pending_delete(&digest).await?;
            if error == "access_denied" {
                return Err(AppError::refused(
                    ErrorCode::AuthorizationDeclined,
                    format!(
                        "connection `{}`: consent was declined at the authorization server \
                         (`access_denied`), nothing was granted; start it again with \
                         `switchyard auth` to consent",
                        row.name
                    ),
                ));
            }
            return Err(AppError::refused(
                ErrorCode::AuthorizationFailed,
                format!(
                    "connection `{}`: the authorization server refused the authorization \
                     (`{error}`); start it again with `switchyard auth`",
                    row.name
                ),
            ));
        }
        let code = query
            .code
            .as_deref()
            .filter(|code| !code.is_empty())
            .ok_or_else(|| {
                AppError::refused(
                    ErrorCode::InvalidRequest,
                    "the callback carries no `code`: open the authorization URL again",
                )
            })?;
        let http = self.oauth_http()?;
        let key = GrantKey {
            connection: row.id,
            holder: pending.holder.clone(),
            resource: record.resource.clone(),
        };
        let store = GrantStore::new(
            self.db.clone(),
            Arc::clone(&vault),
            key,
            record.client.clone(),
            self.config.oauth_timeout,
        )
        .authorizing();
        let mut manager = manager_for(&record.client, Arc::clone(&http), store).await?;
        let pending = PendingStore::found(self.db.clone(), digest, record.state);
        let lost = pending.lost();
        manager.set_state_store(pending);
        manager
            .exchange_code_for_token_with_issuer(code, state, query.iss.as_deref())
            .await
            .map_err(|e| {
                // Another callback took the state first: this one redeems nothing.
                if lost.load(std::sync::atomic::Ordering::SeqCst) {
                    invalid()
                } else {
                    refusal_of(&row.name, &e, http.last_error())
                }
            })?;
        self.audit(
            Audit::by_system("oauth", "connection.authorized")
                .workspace(row.workspace_id)
                .connection(row.id)
                .object("connection", Some(row.id.0), &row.name)
                .after(json!({"issuer": record.client.metadata.issuer})),
        )
        .await;
        Ok(row.name)
    }

    /// Forgets every OAuth grant of `connection` (every holder's) and moves it to
    /// `needs_authorization`; answers how many there were. What revoking a connection's
    /// credentials does for its OAuth half.
    pub async fn oauth_grants_forget(
        &self,
        connection: switchyard_protocol::ConnectionId,
    ) -> AppResult<u64> {
        Ok(self.db.oauth_grants_delete(connection).await?)
    }

    /// The installation key, or the refusal that says how to configure one.
    fn vault(&self) -> AppResult<Arc<KeyFile>> {
        self.config.installation_key.clone().ok_or_else(|| {
            AppError::refused(
                ErrorCode::VaultNotConfigured,
                "this server holds no installation key, so it cannot keep an OAuth grant: start \
                 it with `--installation-key-file PATH` (SWITCHYARD_INSTALLATION_KEY_FILE)",
            )
        })
    }

    /// A fresh OAuth HTTP client under the installation's endpoint guard and time bound.
    fn oauth_http(&self) -> AppResult<Arc<OAuthHttp>> {
        OAuthHttp::new(&self.config.endpoints, self.config.oauth_timeout)
            .map_err(|e| AppError::Internal(format!("the OAuth HTTP client: {e}")))
    }

    /// The MCP URL of central HTTP connection `row`, or the refusal saying why it cannot be
    /// authorized here.
    async fn oauth_target(&self, row: &ConnectionRow) -> AppResult<String> {
        if !row.runner_ref.is_central() {
            return Err(AppError::refused(
                ErrorCode::ConnectionNotCentral,
                format!(
                    "connection `{}` runs on {}: its credentials live on that device, and the \
                     server does not authorize it",
                    row.name, row.runner_ref
                ),
            ));
        }
        match self.db.connector_get(row.connector_id).await?.spec() {
            ConnectorSpec::Http { url } => Ok(url),
            ConnectorSpec::Stdio { .. } => Err(AppError::refused(
                ErrorCode::AuthorizationUnsupported,
                format!(
                    "connection `{}` runs a stdio server: OAuth is for HTTP connections",
                    row.name
                ),
            )),
        }
    }

    /// Discovery, the client identity and the authorization URL, each request bounded.
    async fn begin_flow(
        &self,
        url: &str,
        challenge: &str,
        settings: &crate::db::ConnectionAuthRow,
        preregistered: Option<Preregistered>,
        http: Arc<OAuthHttp>,
    ) -> Result<Begun, FlowError> {
        let mut manager =
            AuthorizationManager::new_with_oauth_http_client(url, http.clone()).await?;
        let resolution = manager
            .resolve_metadata_from_challenge(Some(challenge))
            .await?;
        if resolution.source == AuthorizationMetadataSource::LegacyEndpointFallback {
            return Err(AuthError::NoAuthorizationSupport.into());
        }
        let metadata = resolution.metadata;
        let s256 = metadata
            .code_challenge_methods_supported
            .as_ref()
            .is_some_and(|methods| methods.iter().any(|method| method == "S256"));
        if !s256 {
            return Err(AuthError::PkceUnsupported.into());
        }
        manager.set_metadata(metadata.clone());
        let redirect_uri = format!("{}{CALLBACK_PATH}", self.public_url());
        let mut request = AuthorizationRequest::new(&redirect_uri)
            .with_client_name(CLIENT_NAME)
            .with_application_type("web");
        if !settings.scopes.is_empty() {
            request = request.with_scopes(settings.scopes.iter().cloned());
        }
        if let Some(client) = preregistered {
            request = request.with_preregistered_client(client.client_id);
            if let Some(secret) = client.client_secret {
                request = request.with_client_secret(secret);
            }
        } else {
            if let Some(endpoint) = &metadata.registration_endpoint {
                http.watch_registration(endpoint);
            }
            if self.public_url().starts_with("https://") {
                request = request.with_client_metadata_url(format!(
                    "{}{}",
                    self.public_url(),
                    CLIENT_METADATA_PATH
                ));
            } else if metadata.registration_endpoint.is_none() {
                return Err(AuthError::RegistrationFailed(
                    "the authorization server registers no clients and the connection declares \
                     none: set its `client_id_env` (and `client_secret_env`) to a client you \
                     registered there"
                        .to_owned(),
                )
                .into());
            }
        }
        let pending = PendingStore::collecting(self.db.clone());
        manager.set_state_store(pending.clone());
        let session = AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, error)| error)?;
        let authorization_url = session.get_authorization_url().to_owned();
        let parsed = reqwest::Url::parse(&authorization_url).map_err(AuthError::from)?;
        let param = |name: &str| {
            parsed
                .query_pairs()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.into_owned())
        };
        let (client_id, resource_indicator) =
            param("client_id").zip(param("resource")).ok_or_else(|| {
                AuthError::InternalError(
                    "the authorization URL lacks client_id or resource".to_owned(),
                )
            })?;
        // rmcp sends the resource as published at authorize, but as its parsed `Url` in token
        // requests ([`manager_for`]): both must be one string (RFC 8707). Checked after the
        // URL is built, the first place rmcp shows the resource it will send.
        check_resource(&resource_indicator).map_err(FlowError::Resource)?;
        let (csrf, state) = pending.take().ok_or_else(|| {
            AuthError::InternalError("no authorization state was saved".to_owned())
        })?;
        Ok(Begun {
            authorization_url,
            csrf,
            record: PendingRecord {
                state,
                client: ClientRecord {
                    metadata,
                    client_id,
                    client_secret_env: settings
                        .client_id_env
                        .as_ref()
                        .and(settings.client_secret_env.clone()),
                    registered_secret: http.registered_secret(),
                    redirect_uri,
                    resource_indicator,
                },
                resource: url.to_owned(),
            },
        })
    }

    /// The server's public base URL, without a trailing slash.
    pub(crate) fn public_url(&self) -> &str {
        self.config.public_url.trim_end_matches('/')
    }
}

/// Where the server publishes its OAuth Client ID Metadata Document (when its base URL is
/// https, as the document's URL must be).
pub const CLIENT_METADATA_PATH: &str = "/mcp/oauth-client.json";

/// The Client ID Metadata Document of a server whose base URL is `public_url`.
pub fn client_metadata(public_url: &str) -> serde_json::Value {
    let base = public_url.trim_end_matches('/');
    json!({
        "client_id": format!("{base}{CLIENT_METADATA_PATH}"),
        "client_name": CLIENT_NAME,
        "redirect_uris": [format!("{base}{CALLBACK_PATH}")],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "web",
    })
}

/// A client registered by hand, read from the server's environment ([`OAUTH_ENV_PREFIX`]).
struct Preregistered {
    client_id: String,
    client_secret: Option<String>,
}

/// What [`App::begin_flow`] answers.
struct Begun {
    authorization_url: String,
    csrf: String,
    record: PendingRecord,
}

/// Why [`App::begin_flow`] began no authorization.
enum FlowError {
    /// rmcp's discovery, registration or authorization URL failed.
    Auth(AuthError),
    /// The resource indicator could not be sent the same in every request.
    Resource(ResourceProblem),
}

impl From<AuthError> for FlowError {
    fn from(error: AuthError) -> Self {
        Self::Auth(error)
    }
}

/// The refusal of a resource indicator that token requests would send differently.
fn resource_refusal(problem: &ResourceProblem, name: &str) -> AppError {
    AppError::refused(ErrorCode::AuthorizationUnsupported, problem.explain(name))
}

/// An authorization manager for the client of a grant, its tokens in `store`, without
/// discovery (the metadata was kept from the flow); a declared client secret is read from the
/// server's environment now.
async fn manager_for(
    client: &ClientRecord,
    http: Arc<OAuthHttp>,
    store: GrantStore,
) -> Result<AuthorizationManager, AppError> {
    let secret = match &client.client_secret_env {
        Some(variable) => Some(oauth_env(variable).map_err(|refusal| match refusal {
            EnvRefusal::Outside => env_outside("client_secret_env", variable),
            EnvRefusal::Unset => AppError::refused(
                ErrorCode::AuthorizationFailed,
                format!(
                    "the server's environment variable `{variable}` (the OAuth client secret) is \
                     not set"
                ),
            ),
        })?),
        None => client.registered_secret.clone(),
    };
    client_manager(client, http, secret, store)
        .await
        .map_err(|e| AppError::Internal(format!("OAuth client setup: {e}")))
}

/// Why [`oauth_env`] read no value.
#[derive(Debug)]
enum EnvRefusal {
    /// The name lies outside [`OAUTH_ENV_PREFIX`]; nothing was read.
    Outside,
    /// It is not set on this server.
    Unset,
}

/// The value of the server's environment variable `variable`, read only when it lies in the
/// OAuth namespace ([`OAUTH_ENV_PREFIX`]).
fn oauth_env(variable: &str) -> Result<String, EnvRefusal> {
    if !variable.starts_with(OAUTH_ENV_PREFIX) {
        return Err(EnvRefusal::Outside);
    }
    std::env::var(variable).map_err(|_| EnvRefusal::Unset)
}

/// The refusal of a variable name outside [`OAUTH_ENV_PREFIX`].
fn env_outside(field: &str, variable: &str) -> AppError {
    AppError::refused(
        ErrorCode::OauthEnvRefused,
        format!(
            "`{field}` = `{variable}`: OAuth clients are read only from server environment \
             variables named `{OAUTH_ENV_PREFIX}*` (e.g. `{OAUTH_ENV_PREFIX}SENTRY_CLIENT_ID`); \
             rename the variable on the server and name it here"
        ),
    )
}

/// The value of the server's environment variable `variable`, named by connection `name`'s
/// settings as its `field`.
fn server_env(variable: &str, field: &str, name: &str) -> Result<String, AppError> {
    oauth_env(variable).map_err(|refusal| match refusal {
        EnvRefusal::Outside => env_outside(field, variable),
        EnvRefusal::Unset => AppError::refused(
            ErrorCode::AuthorizationFailed,
            format!(
                "connection `{name}` names the server's environment variable `{variable}` as \
                 its `{field}`, which is not set on this server"
            ),
        ),
    })
}

/// Why connection `row` can no longer complete an authorization begun for it (retired, no
/// longer of kind `oauth`, no longer central), if it cannot.
fn callback_refusal(row: &ConnectionRow) -> Option<AppError> {
    let name = &row.name;
    if row.retired_at.is_some() {
        return Some(AppError::refused(
            ErrorCode::ConnectionRetired,
            format!(
                "connection `{name}` was retired after this authorization began: nothing was granted"
            ),
        ));
    }
    if row.auth.auth_kind != Some(AuthKind::Oauth) {
        return Some(AppError::refused(
            ErrorCode::AuthorizationUnsupported,
            format!(
                "connection `{name}` is no longer of auth kind `oauth` (its settings changed after \
                 this authorization began): nothing was granted"
            ),
        ));
    }
    if !row.runner_ref.is_central() {
        return Some(AppError::refused(
            ErrorCode::ConnectionNotCentral,
            format!(
                "connection `{name}` now runs on {}: its credentials live on that device, and \
                 nothing was granted here",
                row.runner_ref
            ),
        ));
    }
    None
}

/// Refuses settings a connection cannot take.
fn check_settings(row: &ConnectionRow, settings: &SetConnectionAuth) -> AppResult<()> {
    for (field, variable) in [
        ("client_id_env", &settings.client_id_env),
        ("client_secret_env", &settings.client_secret_env),
    ]
    .into_iter()
    .filter_map(|(field, variable)| Some((field, variable.as_ref()?)))
    {
        match check_client_variable(variable) {
            Ok(()) => {}
            Err(ClientVariableProblem::NotAName) => {
                return Err(AppError::refused(
                    ErrorCode::InvalidRequest,
                    format!(
                        "`{variable}` is not an environment variable name: use capitals, digits \
                         and `_` (e.g. {OAUTH_ENV_PREFIX}SENTRY_CLIENT_ID)"
                    ),
                ));
            }
            Err(ClientVariableProblem::OutsideNamespace) => {
                return Err(env_outside(field, variable));
            }
        }
    }
    if let Some(header) = &settings.header {
        check_header(row, settings, header)?;
    }
    if settings.client_secret_env.is_some() && settings.client_id_env.is_none() {
        return Err(AppError::refused(
            ErrorCode::InvalidRequest,
            "`client_secret_env` needs `client_id_env`: a secret belongs to a client you name",
        ));
    }
    if settings.kind != Some(AuthKind::Oauth)
        && (settings.client_id_env.is_some() || !settings.scopes.is_empty())
        && settings.kind.is_some()
    {
        return Err(AppError::refused(
            ErrorCode::InvalidRequest,
            "`scopes`, `client_id_env` and `client_secret_env` are OAuth settings: they need \
             `kind` `oauth` (or no kind, to discover it)",
        ));
    }
    Ok(())
}

/// Refuses a token `header` unless the connection's kind (as set, else as it is) is `token`
/// and it names a header a token may be sent in.
fn check_header(row: &ConnectionRow, settings: &SetConnectionAuth, header: &str) -> AppResult<()> {
    let kind = settings.kind.or(row.auth.auth_kind);
    if kind != Some(AuthKind::Token) {
        return Err(AppError::refused(
            ErrorCode::InvalidRequest,
            format!(
                "`header` is the header a static token is sent in: it needs `kind` `token`, \
                 and connection `{}` is {}; set `\"kind\": \"token\"` with it, or leave it out",
                row.name,
                kind.map_or("of a kind not known yet", AuthKind::as_str)
            ),
        ));
    }
    check_token_header(header).map_err(|problem| {
        let why = match problem {
            TokenHeaderProblem::NotAName => {
                "is not an HTTP header name (letters, digits and ``!#$%&'*+-.^_`|~``)"
            }
            TokenHeaderProblem::Reserved => "is owned by HTTP or the MCP transport",
        };
        AppError::refused(
            ErrorCode::InvalidRequest,
            format!(
                "`header` `{header}` {why}: name the header the server expects the token in, \
                 such as `Authorization` (the default) or `X-Api-Key`"
            ),
        )
    })
}

/// An authorization that failed at `name`'s authorization or MCP server.
fn failed(name: &str, what: &str) -> AppError {
    AppError::refused(
        ErrorCode::AuthorizationFailed,
        format!("authorizing connection `{name}` failed: {what}"),
    )
}

/// The refusal for rmcp's `error`, with the OAuth error code the last answer carried.
fn refusal_of(name: &str, error: &AuthError, oauth_error: Option<String>) -> AppError {
    let refusal = AuthorizeError::from_auth(error, oauth_error);
    match refusal {
        AuthorizeError::IssuerMismatch(_) => AppError::refused(
            ErrorCode::IssuerMismatch,
            format!("connection `{name}`: {refusal}"),
        ),
        AuthorizeError::Unsupported(why) => AppError::refused(
            ErrorCode::AuthorizationUnsupported,
            format!("connection `{name}`: {why}"),
        ),
        refusal => failed(name, &refusal.to_string()),
    }
}
