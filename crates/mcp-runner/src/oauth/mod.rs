//! OAuth 2.1 as the MCP authorization spec says, on rmcp's `auth` client: the parts the server
//! (central connections, sealed in PostgreSQL) and a device (its connections, in its OS
//! keyring) share, and the device's own.
//!
//! - [`OAuthHttp`]: every OAuth request, bounded in time and screened by the endpoint guard.
//! - [`GrantRecord`] / [`ClientRecord`]: what a host keeps of a grant, and when its token is
//!   due.
//! - [`check_resource`]: the resource indicator must be one string in every request.
//! - [`DeviceGrants`], [`authorize`] and [`DeviceOAuth`]: a device connection's grant in the
//!   OS keyring, obtained by `switchyard auth` on the device (consent in a browser, the
//!   redirect received on a fresh loopback port), and sent and renewed by the device runner.
//!
//! No token, refresh token, verifier or client secret is logged or printed: records print
//! names only, and errors carry OAuth error codes, never values.

pub mod authorize;
mod device;
mod http;
mod record;
mod renew;
mod resource;

pub use device::{DeviceGrant, DeviceGrantStore, DeviceGrants, OAUTH_KEYRING_SERVICE};
pub use http::{OAuthHttp, Probe};
pub use record::{ClientRecord, GrantRecord, Standing, TokenFacts, compact_metadata};
pub use renew::{DeviceOAuth, bearer};
pub use resource::{ResourceProblem, check_resource};

use rmcp::transport::auth::{AuthError, AuthorizationManager, CredentialStore, OAuthClientConfig};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// An authorization manager for the client of a grant, its tokens in `store`, without
/// discovery (the metadata was kept with the grant). `secret` is the client's secret, if it
/// has one.
pub async fn client_manager<S: CredentialStore + 'static>(
    client: &ClientRecord,
    http: Arc<OAuthHttp>,
    secret: Option<String>,
    store: S,
) -> Result<AuthorizationManager, AuthError> {
    let mut manager =
        AuthorizationManager::new_with_oauth_http_client(client.resource_indicator.as_str(), http)
            .await?;
    manager.set_metadata(client.metadata.clone());
    let mut config = OAuthClientConfig::new(client.client_id.clone(), client.redirect_uri.clone());
    if let Some(secret) = secret {
        config = config.with_client_secret(secret);
    }
    manager.configure_client(config)?;
    manager.set_credential_store(store);
    Ok(manager)
}

/// Seconds since the Unix epoch (what rmcp stamps a token's receipt with).
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default()
}
