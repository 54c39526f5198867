//! What a host keeps of an OAuth grant ([`GrantRecord`]: rmcp's stored credentials — the
//! token response with its refresh token — and the client it was obtained with), and where its
//! access token stands. The server seals it in PostgreSQL; a device keeps it in its OS keyring
//! ([`super::DeviceGrants`]).

use rmcp::transport::auth::{AuthorizationMetadata, OAuthTokenResponse, StoredCredentials};
use std::collections::HashMap;

/// The metadata fields beyond the typed ones that token requests read (how the client
/// authenticates, whether `iss` comes back).
const KEPT_FIELDS: &[&str] = &[
    "token_endpoint_auth_methods_supported",
    "token_endpoint_auth_signing_alg_values_supported",
    "authorization_response_iss_parameter_supported",
];

/// `metadata` with only what token requests need: a grant kept in a small store (a device's
/// kernel keyring, with its per-user quota) does not carry the whole discovery document.
pub fn compact_metadata(metadata: &AuthorizationMetadata) -> AuthorizationMetadata {
    let mut kept = metadata.clone();
    kept.scopes_supported = None;
    kept.response_types_supported = None;
    kept.jwks_uri = None;
    kept.additional_fields = metadata
        .additional_fields
        .iter()
        .filter(|(name, _)| KEPT_FIELDS.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect::<HashMap<String, Value>>();
    kept
}
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The OAuth client a grant was obtained with, and where its authorization server is.
#[derive(Clone, Serialize, Deserialize)]
pub struct ClientRecord {
    /// The authorization server's metadata, as discovered when the flow began.
    pub metadata: AuthorizationMetadata,
    /// The client id (registered, a metadata document URL, or declared by the operator).
    pub client_id: String,
    /// The server-side variable holding the client's secret, read at every token request;
    /// never the secret itself (a device keeps a declared secret as `registered_secret`).
    pub client_secret_env: Option<String>,
    /// The secret dynamic registration answered (a confidential client, though a public one
    /// was asked for), sent at every token request; kept only with the grant (sealed on the
    /// server, in the keyring on a device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered_secret: Option<String>,
    /// The redirect URI the flow used.
    pub redirect_uri: String,
    /// The resource indicator (RFC 8707) the flow asked for, sent on every token request.
    pub resource_indicator: String,
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

/// A grant, as a host keeps it (sealed on the server, in the keyring on a device).
#[derive(Clone, Serialize, Deserialize)]
pub struct GrantRecord {
    /// rmcp's stored credentials: client id, token response, granted scopes, issuer.
    pub credentials: StoredCredentials,
    /// The client it was obtained with.
    pub client: ClientRecord,
}

/// What a host needs of a token response, read from its standard JSON fields.
#[derive(Clone, Default)]
pub struct TokenFacts {
    /// The access token.
    pub access_token: Option<String>,
    /// Its lifetime in seconds, if the server said.
    pub expires_in: Option<u64>,
    /// Whether a refresh token came with it.
    pub refreshable: bool,
}

impl TokenFacts {
    /// The facts of `token`.
    pub fn of(token: &OAuthTokenResponse) -> Self {
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
#[derive(Clone)]
pub struct Standing {
    /// The access token.
    pub token: String,
    /// Whether it is expired or about to be (renew before using it).
    pub due: bool,
    /// Whether a refresh token can renew it.
    pub refreshable: bool,
}

/// Most seconds before expiry a token is renewed; a short-lived token is renewed once half
/// its lifetime is left, and an expired one always (rmcp's rule).
const RENEW_AHEAD_SECS: u64 = 30;

impl GrantRecord {
    /// Where its access token stands at `now` (seconds since the epoch); `None` without one.
    pub fn standing(&self, now: u64) -> Option<Standing> {
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

impl std::fmt::Debug for TokenFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFacts")
            .field(
                "access_token",
                &self.access_token.as_ref().map(|_| "<token>"),
            )
            .field("expires_in", &self.expires_in)
            .field("refreshable", &self.refreshable)
            .finish()
    }
}

impl std::fmt::Debug for Standing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Standing")
            .field("due", &self.due)
            .field("refreshable", &self.refreshable)
            .finish_non_exhaustive()
    }
}
