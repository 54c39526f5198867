//! Authorizing a device connection on this machine (what `switchyard auth` does for a
//! connection placed on the device): ask the MCP server (a 401 with a `Bearer` challenge
//! means OAuth), discover its authorization server (RFC 9728, then RFC 8414 / OpenID
//! discovery), refuse one without PKCE S256, obtain a client identity (the declared one, else
//! dynamic registration as a `native` client for the loopback redirect), and build the URL a
//! person consents at ([`begin`]). The browser comes back to a loopback port the caller
//! listens on; [`Started::finish`] checks the answer's `iss` (RFC 9207) before the code is
//! redeemed, redeems it with the PKCE verifier and the resource indicator (RFC 8707), and
//! writes the grant to the device's keyring.

use super::device::{DeviceGrantStore, DeviceGrants};
use super::http::OAuthHttp;
use super::record::{ClientRecord, compact_metadata};
use super::resource::{ResourceProblem, check_resource};
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadataSource, AuthorizationRequest,
    AuthorizationSession,
};
use std::sync::Arc;
use switchyard_protocol::ConnectionId;

/// The name a device registers its OAuth clients under.
const CLIENT_NAME: &str = "Switchyard (device)";

/// What the connection declares for its authorization.
#[derive(Clone, Debug, Default)]
pub struct Declared {
    /// The scopes to ask for; empty: what the server advertises.
    pub scopes: Vec<String>,
    /// A client registered by hand (id, then its secret if it has one), read from this
    /// machine's environment by the caller; `None`: dynamic registration.
    pub client: Option<DeclaredClient>,
}

/// A client registered by hand at the authorization server.
#[derive(Clone)]
pub struct DeclaredClient {
    /// Its id.
    pub id: String,
    /// Its secret, for a confidential client.
    pub secret: Option<String>,
}

impl std::fmt::Debug for DeclaredClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeclaredClient")
            .field("id", &self.id)
            .field("secret", &self.secret.as_ref().map(|_| "<secret>"))
            .finish()
    }
}

/// Why nothing was authorized.
#[derive(Debug, thiserror::Error)]
pub enum AuthorizeError {
    /// The MCP server did not ask for OAuth.
    #[error(
        "its MCP server answered {status} without a `Bearer` challenge, so it asks for no OAuth \
         authorization"
    )]
    NotRequested {
        /// The status it answered.
        status: u16,
    },
    /// The server cannot be authorized as the MCP spec says.
    #[error("{0}")]
    Unsupported(String),
    /// The resource indicator could not be sent the same in every request.
    #[error("its resource indicator cannot be sent unchanged")]
    Resource(ResourceProblem),
    /// The answer came from another authorization server than the flow began with.
    #[error(
        "{0}; the code was not redeemed (RFC 9207). Start the authorization again and make sure \
         the browser comes back from the same authorization server"
    )]
    IssuerMismatch(String),
    /// The person declined consent.
    #[error("consent was declined at the authorization server (`access_denied`)")]
    Declined,
    /// The authorization or MCP server failed or refused.
    #[error("{0}")]
    Failed(String),
}

/// An authorization waiting for its redirect.
pub struct Started {
    /// The URL a person consents at.
    pub authorization_url: String,
    /// The `state` it was sent with: only a redirect carrying it is this authorization's.
    state: String,
    session: AuthorizationSession,
    client: ClientRecord,
    resource: String,
    http: Arc<OAuthHttp>,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("client", &self.client)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

/// What the redirect to the loopback port carries (RFC 6749 §4.1.2, RFC 9207).
#[derive(Clone, Default)]
pub struct Redirect {
    /// The authorization code.
    pub code: Option<String>,
    /// The state the flow began with.
    pub state: Option<String>,
    /// The issuer that answered.
    pub iss: Option<String>,
    /// The authorization server's refusal, when it refused.
    pub error: Option<String>,
}

impl std::fmt::Debug for Redirect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redirect")
            .field("code", &self.code.as_ref().map(|_| "<code>"))
            .field("iss", &self.iss)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

/// Begins authorizing the MCP server at `url`, the browser to come back to `redirect_uri` (a
/// loopback URL the caller listens on).
pub async fn begin(
    url: &str,
    redirect_uri: &str,
    declared: &Declared,
    http: Arc<OAuthHttp>,
) -> Result<Started, AuthorizeError> {
    let probe = http
        .probe(url)
        .await
        .map_err(|e| AuthorizeError::Failed(format!("its MCP server at {url}: {e}")))?;
    let Some(challenge) = probe.bearer_challenge.filter(|_| probe.status == 401) else {
        return Err(AuthorizeError::NotRequested {
            status: probe.status,
        });
    };
    let failed = |e: AuthError| refusal(e, http.last_error());
    let mut manager = AuthorizationManager::new_with_oauth_http_client(url, http.clone())
        .await
        .map_err(failed)?;
    let resolution = manager
        .resolve_metadata_from_challenge(Some(&challenge))
        .await
        .map_err(failed)?;
    if resolution.source == AuthorizationMetadataSource::LegacyEndpointFallback {
        return Err(refusal(AuthError::NoAuthorizationSupport, None));
    }
    let metadata = resolution.metadata;
    let s256 = metadata
        .code_challenge_methods_supported
        .as_ref()
        .is_some_and(|methods| methods.iter().any(|method| method == "S256"));
    if !s256 {
        return Err(refusal(AuthError::PkceUnsupported, None));
    }
    manager.set_metadata(metadata.clone());
    let mut request = AuthorizationRequest::new(redirect_uri)
        .with_client_name(CLIENT_NAME)
        .with_application_type("native");
    if !declared.scopes.is_empty() {
        request = request.with_scopes(declared.scopes.iter().cloned());
    }
    match &declared.client {
        Some(client) => {
            request = request.with_preregistered_client(client.id.clone());
            if let Some(secret) = &client.secret {
                request = request.with_client_secret(secret.clone());
            }
        }
        None => match &metadata.registration_endpoint {
            Some(endpoint) => http.watch_registration(endpoint),
            None => {
                return Err(AuthorizeError::Unsupported(
                    "the authorization server registers no clients and the connection declares \
                     none: set its `client_id_env` (and `client_secret_env`) to a client you \
                     registered there, with those variables set on this machine"
                        .to_owned(),
                ));
            }
        },
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| failed(e))?;
    let authorization_url = session.get_authorization_url().to_owned();
    let parsed = url::Url::parse(&authorization_url)
        .map_err(|e| AuthorizeError::Failed(format!("the authorization URL: {e}")))?;
    let param = |name: &str| {
        parsed
            .query_pairs()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    };
    let (client_id, resource_indicator) =
        param("client_id").zip(param("resource")).ok_or_else(|| {
            AuthorizeError::Failed("the authorization URL lacks client_id or resource".to_owned())
        })?;
    let state = param("state")
        .ok_or_else(|| AuthorizeError::Failed("the authorization URL lacks state".to_owned()))?;
    check_resource(&resource_indicator).map_err(AuthorizeError::Resource)?;
    let registered_secret = match &declared.client {
        Some(client) => client.secret.clone(),
        None => http.registered_secret(),
    };
    Ok(Started {
        authorization_url,
        state,
        session,
        client: ClientRecord {
            metadata: compact_metadata(&metadata),
            client_id,
            client_secret_env: None,
            registered_secret,
            redirect_uri: redirect_uri.to_owned(),
            resource_indicator,
        },
        resource: url.to_owned(),
        http,
    })
}

impl Started {
    /// Whether `redirect` belongs to this authorization: it carries its `state` (compared in
    /// constant time). Any other request to the redirect URI is not an answer to it.
    pub fn is_answered_by(&self, redirect: &Redirect) -> bool {
        redirect
            .state
            .as_deref()
            .is_some_and(|state| same_secret(state.as_bytes(), self.state.as_bytes()))
    }

    /// Finishes the authorization with the `redirect` the browser brought back: checks its
    /// `iss`, redeems its code, and keeps the grant in `grants` as `connection`'s.
    pub async fn finish(
        mut self,
        grants: DeviceGrants,
        connection: ConnectionId,
        redirect: Redirect,
    ) -> Result<(), AuthorizeError> {
        if !self.is_answered_by(&redirect) {
            return Err(AuthorizeError::Failed(
                "the redirect does not carry this authorization's state".to_owned(),
            ));
        }
        if let Some(error) = redirect.error {
            return Err(if error == "access_denied" {
                AuthorizeError::Declined
            } else {
                AuthorizeError::Failed(format!(
                    "the authorization server refused the authorization (`{error}`)"
                ))
            });
        }
        let code = redirect
            .code
            .filter(|code| !code.is_empty())
            .ok_or_else(|| AuthorizeError::Failed("the redirect carries no `code`".to_owned()))?;
        let state = redirect.state.unwrap_or_default();
        let store =
            DeviceGrantStore::authorizing(grants, connection, &self.resource, self.client.clone());
        self.session.auth_manager.set_credential_store(store);
        self.session
            .handle_callback_with_issuer(&code, &state, redirect.iss.as_deref())
            .await
            .map(drop)
            .map_err(|e| refusal(e, self.http.last_error()))
    }
}

/// Whether `a` equals `b`, in time that depends only on their lengths.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

impl AuthorizeError {
    /// What rmcp's `error` means for whoever authorizes, with the OAuth error code the last
    /// answer carried (the server's and a device's flows say the same).
    pub fn from_auth(error: &AuthError, oauth_error: Option<String>) -> Self {
        match error {
            AuthError::AuthorizationServerMismatch { .. }
            | AuthError::AuthorizationServerMissingIssuer { .. } => {
                Self::IssuerMismatch(error.to_string())
            }
            AuthError::PkceUnsupported => Self::Failed(
                "its authorization server does not advertise PKCE with S256, which the MCP \
                 authorization spec requires; nothing was registered"
                    .to_owned(),
            ),
            AuthError::NoAuthorizationSupport => Self::Unsupported(
                "its server publishes no OAuth metadata (RFC 9728 / RFC 8414), so it cannot be \
                 authorized as the MCP spec says"
                    .to_owned(),
            ),
            error => {
                let code = oauth_error
                    .map(|code| format!(" (`{code}`)"))
                    .unwrap_or_default();
                Self::Failed(format!("{error}{code}"))
            }
        }
    }
}

/// [`AuthorizeError::from_auth`], for an error this module owns.
fn refusal(error: AuthError, oauth_error: Option<String>) -> AuthorizeError {
    AuthorizeError::from_auth(&error, oauth_error)
}
