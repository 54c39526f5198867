//! What is sealed: an OAuth grant ([`GrantRecord`]: rmcp's stored credentials — the token
//! response with its refresh token — and the client it was obtained with) and an
//! authorization waiting for its callback ([`PendingRecord`]). Each is sealed for a context
//! that binds it to its row ([`crate::db::grant_context`], [`crate::db::pending_context`]),
//! so that `admin rotate-key` re-seals either from the row alone.

use rmcp::transport::auth::{
    AuthorizationMetadata, OAuthTokenResponse, StoredAuthorizationState, StoredCredentials,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The key an authorization's `state` is stored under: its SHA-256 (the state itself is the
/// callback's capability, never stored).
pub(super) fn state_digest(state: &str) -> Vec<u8> {
    Sha256::digest(state.as_bytes()).to_vec()
}

/// The OAuth client a grant was obtained with, and where its authorization server is.
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct ClientRecord {
    /// The authorization server's metadata, as discovered when the flow began.
    pub(super) metadata: AuthorizationMetadata,
    /// The client id (registered, a metadata document URL, or read from the server's
    /// environment).
    pub(super) client_id: String,
    /// The server-side variable holding the client's secret, read at every token request;
    /// never the secret itself.
    pub(super) client_secret_env: Option<String>,
    /// The secret dynamic registration answered (a confidential client, though a public one
    /// was asked for), sent at every token request; kept only sealed, with the grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) registered_secret: Option<String>,
    /// The redirect URI the flow used.
    pub(super) redirect_uri: String,
    /// The resource indicator (RFC 8707) the flow asked for, sent on every token request.
    pub(super) resource_indicator: String,
}

impl std::fmt::Debug for ClientRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientRecord")
            .field("issuer", &self.metadata.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret_env", &self.client_secret_env)
            .field(
                "registered_secret",
                &self.registered_secret.as_ref().map(|_| "<sealed>"),
            )
            .field("redirect_uri", &self.redirect_uri)
            .field("resource_indicator", &self.resource_indicator)
            .finish()
    }
}

/// A sealed grant.
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct GrantRecord {
    /// rmcp's stored credentials: client id, token response, granted scopes, issuer.
    pub(super) credentials: StoredCredentials,
    /// The client it was obtained with.
    pub(super) client: ClientRecord,
}

/// A sealed authorization waiting for its callback.
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct PendingRecord {
    /// What rmcp keeps under the state: the PKCE verifier, the expected issuer.
    pub(super) state: StoredAuthorizationState,
    /// The client the flow began with.
    pub(super) client: ClientRecord,
    /// The connector URL the flow was for.
    pub(super) resource: String,
}

/// What the server needs of a token response, read from its standard JSON fields.
#[derive(Clone, Debug, Default)]
pub(super) struct TokenFacts {
    /// The access token.
    pub(super) access_token: Option<String>,
    /// Its lifetime in seconds, if the server said.
    pub(super) expires_in: Option<u64>,
    /// Whether a refresh token came with it.
    pub(super) refreshable: bool,
}

impl TokenFacts {
    /// The facts of `token`.
    pub(super) fn of(token: &OAuthTokenResponse) -> Self {
        let Ok(json) = serde_json::to_value(token) else {
            return Self::default();
        };
        Self {
            access_token: json["access_token"].as_str().map(str::to_owned),
            expires_in: json["expires_in"].as_u64(),
            refreshable: matches!(&json["refresh_token"], Value::String(token) if !token.is_empty()),
        }
    }
}

/// A grant's access token as it stands: the token, and whether it is due for renewal.
#[derive(Clone, Debug)]
pub(super) struct Standing {
    /// The access token.
    pub(super) token: String,
    /// Whether it is expired or about to be (renew before using it).
    pub(super) due: bool,
    /// Whether a refresh token can renew it.
    pub(super) refreshable: bool,
}

/// Most seconds before expiry a token is renewed; a short-lived token is renewed once half
/// its lifetime is left, and an expired one always (rmcp's rule).
const RENEW_AHEAD_SECS: u64 = 30;

impl GrantRecord {
    /// Where its access token stands at `now` (seconds since the epoch); `None` without one.
    pub(super) fn standing(&self, now: u64) -> Option<Standing> {
        let facts = TokenFacts::of(self.credentials.token_response.as_ref()?);
        let token = facts.access_token?;
        let due = match (facts.expires_in, self.credentials.token_received_at) {
            (Some(lifetime), Some(received)) => {
                let left = lifetime.saturating_sub(now.saturating_sub(received));
                left < RENEW_AHEAD_SECS.min(lifetime / 2).max(1)
            }
            _ => false,
        };
        Some(Standing {
            token,
            due,
            refreshable: facts.refreshable,
        })
    }
}
