//! Which server and credential API commands use.
//!
//! `SWITCHYARD_TOKEN` (a personal API token) wins when set, with `SWITCHYARD_URL` or the
//! default URL. Otherwise the command authenticates as the paired device whose identity is
//! stored under `SWITCHYARD_DEVICE_PROFILE` (default `default`), at the server it was paired
//! with; a `SWITCHYARD_URL` naming another server is refused rather than silently ignored, so a
//! device credential is never sent anywhere but where it was issued.

use crate::client::{UrlOrigin, parse_base, same_server};
use crate::error::CliError;
use reqwest::Url;
use switchyard_mcp_runner::identity::{IdentityStore, KeyringChoice, select_profile};

/// The server used when `SWITCHYARD_URL` is not set.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8787";
/// Environment variable naming the server's base URL.
pub const URL_VAR: &str = "SWITCHYARD_URL";
/// Environment variable holding the personal API token.
pub const TOKEN_VAR: &str = "SWITCHYARD_TOKEN";

/// A server and the bearer credential to present to it. Deliberately not `Debug`.
pub struct Auth {
    /// The API's base URL.
    pub base: Url,
    /// A personal API token or a device credential.
    pub token: String,
}

/// The server and credential the environment selects.
pub fn from_env() -> Result<Auth, CliError> {
    let set = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
    let url = set(URL_VAR);
    if let Some(token) = set(TOKEN_VAR) {
        let base = parse_base(url.as_deref().unwrap_or(DEFAULT_URL), UrlOrigin::Env)?;
        return Ok(Auth { base, token });
    }
    let profile = select_profile(None).map_err(CliError::DeviceIdentity)?;
    let keyring = KeyringChoice::from_env().map_err(CliError::DeviceIdentity)?;
    let store = IdentityStore::open(IdentityStore::default_location(), keyring)
        .map_err(CliError::DeviceIdentity)?;
    let identity = store
        .load(&profile)
        .map_err(CliError::DeviceIdentity)?
        .ok_or_else(|| CliError::NoToken {
            profile: profile.clone(),
        })?;
    let paired = parse_base(&identity.server_url, UrlOrigin::Profile)?;
    if let Some(url) = url {
        let wanted = parse_base(&url, UrlOrigin::Env)?;
        if !same_server(&wanted, &paired) {
            return Err(CliError::ServerMismatch {
                url,
                profile,
                paired: identity.server_url,
            });
        }
    }
    Ok(Auth {
        base: paired,
        token: identity.credential,
    })
}
