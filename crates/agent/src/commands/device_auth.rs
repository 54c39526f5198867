//! `switchyard auth`, `list` and `revoke` for a connection placed on this machine's device:
//! its credential lives here, in the OS keyring, and never reaches the server.
//!
//! - `oauth`: consent in a browser, the redirect received on a fresh loopback port, the grant
//!   written to the keyring ([`switchyard_mcp_runner::oauth::authorize`]); the device runner
//!   sends and renews it.
//! - `token`: read without echo (or from stdin) into the keyring and bound to its header, as
//!   `switchyard credential set` does.
//! - `revoke` forgets the grant; `list` reads where it stands.

use super::credential::LocalConnection;
use super::loopback::Loopback;
use crate::cli::AuthArgs;
use crate::error::CliError;
use crate::output::{Output, print_text};
use crate::secret_input::read_secret;
use std::sync::Arc;
use std::time::Duration;
use switchyard_mcp_runner::credentials::{
    CredentialResolver, OsKeyring, SecretStore, ValueStore, ValueTarget,
};
use switchyard_mcp_runner::endpoints::EndpointGuard;
use switchyard_mcp_runner::oauth::authorize::{
    self, AuthorizeError, Declared, DeclaredClient, Started,
};
use switchyard_mcp_runner::oauth::{DeviceGrants, OAuthHttp};
use switchyard_protocol::api::{
    AuthKind, AuthState, ConnectionView, ConnectorSpec, OAUTH_ENV_PREFIX, PlacementView,
    check_client_variable, is_default_token_header,
};
use switchyard_protocol::{ConnectionId, ErrorCode};
use tokio::signal::unix::{SignalKind, signal};

/// The time bound of each OAuth request made from here when
/// `SWITCHYARD_AUTHORIZATION_TIMEOUT_SECONDS` (the server's and the device runner's variable)
/// does not say.
const OAUTH_TIMEOUT: Duration = Duration::from_secs(10);

/// Each OAuth request's time bound.
fn oauth_timeout() -> Duration {
    std::env::var("SWITCHYARD_AUTHORIZATION_TIMEOUT_SECONDS")
        .ok()
        .and_then(|seconds| seconds.parse::<u64>().ok())
        .map_or(OAUTH_TIMEOUT, |seconds| Duration::from_secs(seconds.max(1)))
}

/// The OS keyring, or why it cannot hold a credential.
fn keyring() -> Result<Arc<dyn SecretStore>, CliError> {
    OsKeyring::new()
        .map(|keyring| Arc::new(keyring) as Arc<dyn SecretStore>)
        .map_err(CliError::KeyringUnavailable)
}

/// `switchyard auth WS CONN` for connection `local`, placed here, as `view` declares it.
pub(crate) async fn authorize(
    out: Output,
    args: &AuthArgs,
    local: &LocalConnection,
    view: &ConnectionView,
) -> Result<(), CliError> {
    let kind = view.auth.as_ref().and_then(|auth| auth.kind);
    match kind {
        Some(AuthKind::Token) => {
            return set_token(out, &super::auth::token_header(args, view), local);
        }
        Some(AuthKind::None) => {
            return Err(refused(
                local,
                ErrorCode::AuthorizationUnsupported.as_str(),
                "it is declared `auth = none`: nothing to authorize".to_owned(),
            ));
        }
        Some(AuthKind::Oauth) | None => {}
    }
    let ConnectorSpec::Http { url } = &local.spec else {
        return Err(refused(
            local,
            ErrorCode::AuthorizationUnsupported.as_str(),
            "it runs a stdio server: OAuth is for HTTP connections; bind its variables with \
             `switchyard credential set`"
                .to_owned(),
        ));
    };
    let declared = declared(local, view)?;
    let grants = DeviceGrants::new(keyring()?);
    // Registered before the URL is shown, so Ctrl-C at any point of the wait is ours.
    let mut interrupt = signal(SignalKind::interrupt())
        .map_err(|error| CliError::Usage(format!("cannot watch for Ctrl-C: {error}")))?;
    let loopback = Loopback::bind()
        .await
        .map_err(|e| CliError::Usage(format!("cannot listen on a loopback port: {e}")))?;
    let http = OAuthHttp::new(&EndpointGuard::device(), oauth_timeout()).map_err(|e| {
        refused(
            local,
            ErrorCode::AuthorizationFailed.as_str(),
            e.to_string(),
        )
    })?;
    let started = authorize::begin(url, &loopback.redirect_uri(), &declared, http)
        .await
        .map_err(|e| authorize_refusal(local, e))?;
    if out.is_json() {
        println!(
            "{}",
            serde_json::json!({"authorization_url": started.authorization_url})
        );
    } else {
        print_text(&format!(
            "Open this URL in a browser and consent; it comes back to this machine:\n\n  {}\n\n\
             waiting (up to {} s, Ctrl-C to stop)…",
            started.authorization_url, args.wait
        ));
    }
    tokio::select! {
        done = finish(started, &loopback, grants, local) => done?,
        _ = tokio::time::sleep(Duration::from_secs(args.wait)) => {
            return Err(CliError::AuthorizationPending {
                connection: local.name.clone(),
                waited_secs: args.wait,
            });
        }
        _ = interrupt.recv() => {
            return Err(CliError::Interrupted {
                detail: "; the connection was not authorized",
            });
        }
    }
    if out.is_json() {
        println!(
            "{}",
            serde_json::json!({"connection": local.name, "state": AuthState::Authorized,
                "kept": "os_keyring"})
        );
    } else {
        print_text(&format!(
            "connection {} is authorized on this device; its tokens are in the OS keyring, and \
             the device runner renews them",
            local.name
        ));
    }
    Ok(())
}

/// Waits for the browser's redirect, finishes the authorization, and tells the browser how
/// it ended.
async fn finish(
    started: Started,
    loopback: &Loopback,
    grants: DeviceGrants,
    local: &LocalConnection,
) -> Result<(), CliError> {
    let arrived = loopback
        .arrival(|redirect| started.is_answered_by(redirect))
        .await
        .map_err(|e| CliError::Usage(format!("the loopback port failed: {e}")))?;
    let redirect = arrived.redirect.clone();
    match started.finish(grants, local.id, redirect).await {
        Ok(()) => {
            arrived
                .answer(
                    true,
                    "Switchyard: the connection is authorized. You can close this window.",
                )
                .await;
            Ok(())
        }
        Err(error) => {
            arrived
                .answer(
                    false,
                    &format!("Switchyard: the connection was not authorized: {error}"),
                )
                .await;
            Err(authorize_refusal(local, error))
        }
    }
}

/// The scopes and client identity the connection declares, the client's values read from
/// this machine's environment (`SWITCHYARD_OAUTH_*` only).
fn declared(local: &LocalConnection, view: &ConnectionView) -> Result<Declared, CliError> {
    let Some(auth) = &view.auth else {
        return Ok(Declared::default());
    };
    let read = |field: &str, variable: &str| {
        if check_client_variable(variable).is_err() {
            return Err(refused(
                local,
                ErrorCode::OauthEnvRefused.as_str(),
                format!(
                    "`{field}` = `{variable}`: OAuth clients are read only from environment \
                     variables named `{OAUTH_ENV_PREFIX}*`"
                ),
            ));
        }
        std::env::var(variable).map_err(|_| {
            refused(
                local,
                ErrorCode::AuthorizationFailed.as_str(),
                format!(
                    "it names `{variable}` as its `{field}`, which is not set on this machine; \
                     set it and run `switchyard auth` again"
                ),
            )
        })
    };
    let client = match &auth.client_id_env {
        Some(id) => Some(DeclaredClient {
            id: read("client_id_env", id)?,
            secret: auth
                .client_secret_env
                .as_deref()
                .map(|secret| read("client_secret_env", secret))
                .transpose()?,
        }),
        None => None,
    };
    Ok(Declared {
        scopes: auth.scopes.clone(),
        client,
    })
}

/// A static token: read without echo (or from stdin) into the keyring, bound to its header.
fn set_token(out: Output, header: &str, local: &LocalConnection) -> Result<(), CliError> {
    let resolver = CredentialResolver::new(Some(local.bindings_file.clone()), keyring()?);
    let value = read_secret(&format!(
        "token for connection {} (sent in {header}): ",
        local.name
    ))?;
    let prefix = is_default_token_header(header).then(|| "Bearer ".to_owned());
    resolver
        .set_value(
            local.id,
            &local.spec,
            header,
            value.expose(),
            &ValueTarget::New {
                store: ValueStore::OsKeyring,
                prefix,
            },
        )
        .map_err(CliError::Credential)?;
    drop(value);
    if out.is_json() {
        println!(
            "{}",
            serde_json::json!({"connection": local.name, "header": header,
                "kept": "os_keyring"})
        );
    } else {
        print_text(&format!(
            "connection {}: the token is in this device's OS keyring and sent in header `{header}`; \
             the runner's next call opens a new session",
            local.name
        ));
    }
    Ok(())
}

/// `switchyard revoke WS CONN` for connection `local`, placed here: forgets its OAuth grant
/// and its bound values (their keyring entries included); the declaration stays.
pub(crate) fn revoke(
    out: Output,
    workspace: &str,
    local: &LocalConnection,
) -> Result<(), CliError> {
    let keyring = keyring()?;
    DeviceGrants::new(Arc::clone(&keyring))
        .delete(local.id)
        .map_err(CliError::KeyringUnavailable)?;
    let unbound = CredentialResolver::new(Some(local.bindings_file.clone()), keyring)
        .forget(local.id)
        .map_err(CliError::Credential)?;
    if out.is_json() {
        println!(
            "{}",
            serde_json::json!({"connection": local.name, "state": AuthState::NeedsAuthorization,
                "unbound": unbound})
        );
    } else {
        print_text(&format!(
            "connection {}: its OAuth grant and {unbound} bound value(s) were removed from this \
             device; it needs authorization again (`switchyard auth {workspace} {}`)",
            local.name, local.name
        ));
    }
    Ok(())
}

/// Where the grant in `grants` of `connection`, placed here, stands (`None`: the keyring
/// cannot be read).
fn grant_state(grants: &DeviceGrants, connection: ConnectionId) -> Option<AuthState> {
    match grants.get(connection) {
        Ok(Some(grant)) => Some(match grant.state {
            AuthState::Authorized | AuthState::NeedsAuthorization => {
                let lapsed = grant
                    .grant
                    .standing(switchyard_mcp_runner::oauth::now())
                    .is_none_or(|standing| standing.due && !standing.refreshable);
                if lapsed {
                    AuthState::Expired
                } else {
                    AuthState::Authorized
                }
            }
            state => state,
        }),
        Ok(None) => Some(AuthState::NeedsAuthorization),
        Err(_) => None,
    }
}

/// The keyring's grants, when it can be read.
fn local_grants() -> Option<DeviceGrants> {
    OsKeyring::new()
        .ok()
        .map(|keyring| DeviceGrants::new(Arc::new(keyring)))
}

fn refused(local: &LocalConnection, code: &'static str, message: String) -> CliError {
    CliError::DeviceAuthorization {
        connection: local.name.clone(),
        code,
        message,
    }
}

/// The CLI error of an authorization that failed.
fn authorize_refusal(local: &LocalConnection, error: AuthorizeError) -> CliError {
    let code = match &error {
        AuthorizeError::NotRequested { .. }
        | AuthorizeError::Unsupported(_)
        | AuthorizeError::Resource(_) => ErrorCode::AuthorizationUnsupported.as_str(),
        AuthorizeError::IssuerMismatch(_) => ErrorCode::IssuerMismatch.as_str(),
        AuthorizeError::Declined => ErrorCode::AuthorizationDeclined.as_str(),
        AuthorizeError::Failed(_) => ErrorCode::AuthorizationFailed.as_str(),
    };
    let message = match &error {
        AuthorizeError::Resource(problem) => problem.explain(&local.name),
        error => format!("{error}; nothing was kept"),
    };
    refused(local, code, message)
}

/// Where the grants of the workspace's connections placed on this machine's device stand,
/// read from the keyring; empty when no device is paired here or the keyring cannot be read
/// (the server's view is shown then).
pub(crate) async fn placed_here(
    client: &crate::client::Client,
    workspace: &str,
) -> std::collections::HashMap<ConnectionId, AuthState> {
    let mut states = std::collections::HashMap::new();
    let Ok((_, device)) = super::credential::paired_here(None) else {
        return states;
    };
    let Ok(reply) = client
        .get(&["workspaces", workspace, "devices", "placements"])
        .await
    else {
        return states;
    };
    let Ok(placements) = reply.parse::<Vec<PlacementView>>() else {
        return states;
    };
    let Some(grants) = local_grants() else {
        return states;
    };
    for placement in placements.iter().filter(|p| p.device_id == device) {
        if let Some(state) = grant_state(&grants, placement.connection_id) {
            states.insert(placement.connection_id, state);
        }
    }
    states
}
