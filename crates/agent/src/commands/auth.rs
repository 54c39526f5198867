//! `switchyard auth WS CONN`, `switchyard list WS` and `switchyard revoke WS CONN`: what a
//! central connection needs to be authorized, where each connection's credential stands, and
//! emptying it. `CONN` may be written as a file names it, `mcp.<id>`.
//!
//! `auth` reads what the connection declares (`PUT …/auth`, or `switchyard apply`): for
//! `token` it reads the token from a prompt without echo, or from stdin, and sends it to the
//! server as the connection's credential value (`PUT …/credentials/{header}`, sealed there),
//! in the header `--header` names, else the connection's `header`, else `Authorization`;
//! otherwise it begins an OAuth authorization (`POST …/authorize`), prints the URL to consent
//! at, and waits — polling the connection, bounded by `--wait`, Ctrl-C ends it — until the
//! server holds the new grant (the browser comes back to the server, not to this machine).
//!
//! A connection placed on this machine's device keeps its credential here, in the OS keyring
//! ([`super::device_auth`]): `auth`, `revoke` and `list` act on and read that one.

use super::credential::{Location, locate};
use super::device_auth;
use crate::cli::{AuthArgs, ListArgs, RevokeArgs};
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, Table, print_text};
use crate::secret_input::read_secret;
use std::time::{Duration, Instant};
use switchyard_protocol::api::{
    AuthKind, AuthState, AuthorizationStarted, ConnectionAuthView, ConnectionView,
    CredentialHolder, CredentialValueSet, DEFAULT_TOKEN_HEADER, SetCredentialValue,
    is_default_token_header,
};
use switchyard_protocol::credential_status::CredentialStatusList;
use tokio::signal::unix::{SignalKind, signal};

/// How often `auth` looks whether the consent landed.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// `switchyard auth WS CONN`.
pub async fn authorize(client: &Client, out: Output, args: AuthArgs) -> Result<(), CliError> {
    let connection = declared(client, &args.workspace, &args.connection).await?;
    if connection.runner != "central"
        && let Location::Here(local) =
            locate(client, &args.workspace, &connection.name, None).await?
    {
        return device_auth::authorize(out, &args, &local, &connection).await;
    }
    let kind = connection.auth.as_ref().and_then(|auth| auth.kind);
    if kind == Some(AuthKind::Token) {
        return set_token(client, out, &args, &connection).await;
    }
    // Registered before the URL is shown, so Ctrl-C at any point of the wait is ours.
    let mut interrupt = signal(SignalKind::interrupt())
        .map_err(|error| CliError::Usage(format!("cannot watch for Ctrl-C: {error}")))?;
    let before = connection.auth.as_ref().and_then(|auth| auth.authorized_at);
    let reply = client
        .post(
            &[
                "workspaces",
                &args.workspace,
                "connections",
                &connection.name,
                "authorize",
            ],
            Body::Empty,
        )
        .await?;
    let started: AuthorizationStarted = reply.parse()?;
    if out.is_json() {
        println!(
            "{}",
            serde_json::json!({"authorization_url": started.authorization_url})
        );
    } else {
        print_text(&format!(
            "Open this URL in a browser and consent; the server finishes the authorization:\n\n  {}\n\nwaiting (up to {} s, Ctrl-C to stop)…",
            started.authorization_url, args.wait
        ));
    }
    let waited = tokio::select! {
        waited = wait_for_grant(client, &args, &connection.name, before) => waited?,
        _ = interrupt.recv() => {
            return Err(CliError::Interrupted {
                detail: "; the connection was not authorized (the URL stays valid for ten minutes)",
            });
        }
    };
    if out.is_json() {
        println!(
            "{}",
            serde_json::to_string(&waited).expect("a connection view serializes")
        );
    } else {
        print_text(&format!("connection {} is authorized", waited.name));
    }
    Ok(())
}

/// Polls the connection until a person completed an authorization after `before`.
async fn wait_for_grant(
    client: &Client,
    args: &AuthArgs,
    name: &str,
    before: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<ConnectionView, CliError> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.wait);
    loop {
        let view = connection(client, &args.workspace, name).await?;
        if let Some(auth) = &view.auth
            && auth.state == AuthState::Authorized
            && auth.authorized_at.is_some()
            && auth.authorized_at > before
        {
            return Ok(view);
        }
        if Instant::now() >= deadline {
            return Err(CliError::AuthorizationPending {
                connection: name.to_owned(),
                waited_secs: args.wait,
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// A static token: read without echo (or from stdin) and kept by the server, sealed.
async fn set_token(
    client: &Client,
    out: Output,
    args: &AuthArgs,
    connection: &ConnectionView,
) -> Result<(), CliError> {
    let header = token_header(args, connection);
    let value = read_secret(&format!(
        "token for connection {} (sent in {header}): ",
        connection.name
    ))?;
    let prefix = is_default_token_header(&header).then(|| "Bearer ".to_owned());
    let body = SetCredentialValue {
        value: value.expose().to_owned(),
        prefix,
    };
    drop(value);
    let reply = client
        .put(
            &[
                "workspaces",
                &args.workspace,
                "connections",
                &connection.name,
                "credentials",
                &header,
            ],
            Body::of(&body),
        )
        .await?;
    out.reply(&reply, |set: CredentialValueSet| {
        format!(
            "connection {}: the token is kept by the server, sealed, and sent in header `{}`; \
             the next call opens a new session",
            connection.name, set.name
        )
    })
}

/// `switchyard list WS`.
pub async fn list(client: &Client, out: Output, args: ListArgs) -> Result<(), CliError> {
    let reply = client
        .get(&["workspaces", &args.workspace, "connections"])
        .await?;
    let mut connections: Vec<ConnectionView> = reply.parse()?;
    let here = device_auth::placed_here(client, &args.workspace).await;
    for connection in &mut connections {
        let Some(state) = here.get(&connection.id) else {
            continue;
        };
        match connection.auth.as_mut() {
            Some(auth) if !matches!(auth.kind, Some(AuthKind::None | AuthKind::Token)) => {
                auth.state = *state;
            }
            Some(_) => {}
            // Not declared, and authorized here: discovered on this device.
            None if *state != AuthState::NeedsAuthorization => {
                connection.auth = Some(ConnectionAuthView {
                    kind: None,
                    scopes: Vec::new(),
                    client_id_env: None,
                    client_secret_env: None,
                    header: None,
                    credential: CredentialHolder::Shared,
                    state: *state,
                    authorized_at: None,
                });
            }
            None => {}
        }
    }
    if out.is_json() {
        println!(
            "{}",
            serde_json::to_string_pretty(&connections).expect("connection views serialize")
        );
        return Ok(());
    }
    {
        let mut table = Table::new(["CONNECTION", "RUNNER", "AUTH", "STATE"]);
        for connection in connections.iter().filter(|c| c.retired.is_none()) {
            // Only an OAuth grant has a state; a static token is a credential value.
            let (kind, state) = match &connection.auth {
                Some(auth) => match auth.kind {
                    Some(kind @ (AuthKind::None | AuthKind::Token)) => (kind.as_str(), "-"),
                    kind => (
                        kind.map_or("discovered", AuthKind::as_str),
                        auth.state.as_str(),
                    ),
                },
                None => ("discovered", "-"),
            };
            table.row([
                connection.name.clone(),
                connection.runner.clone(),
                kind.to_owned(),
                state.to_owned(),
            ]);
        }
        print_text(&table.render_or("no connections"));
    }
    Ok(())
}

/// `switchyard revoke WS CONN`.
pub async fn revoke(client: &Client, out: Output, args: RevokeArgs) -> Result<(), CliError> {
    let connection = declared(client, &args.workspace, &args.connection).await?;
    if connection.runner != "central"
        && let Location::Here(local) =
            locate(client, &args.workspace, &connection.name, None).await?
    {
        return device_auth::revoke(out, &args.workspace, &local);
    }
    let reply = client
        .post(
            &[
                "workspaces",
                &args.workspace,
                "connections",
                &connection.name,
                "credentials",
                "revoke",
            ],
            Body::Empty,
        )
        .await?;
    out.reply(&reply, |list: CredentialStatusList| {
        format!(
            "connection {}: its credentials were emptied (values and OAuth grants); it needs \
             authorization again (`switchyard auth {} {}`)",
            list.connection, args.workspace, list.connection
        )
    })
}

/// The header a static token goes in: the flag, else the header the connection declares,
/// else `Authorization`.
pub(super) fn token_header(args: &AuthArgs, connection: &ConnectionView) -> String {
    args.header
        .clone()
        .or_else(|| connection.auth.as_ref()?.header.clone())
        .unwrap_or_else(|| DEFAULT_TOKEN_HEADER.to_owned())
}

/// The connection `key` of `workspace`, also written as a file names it: `mcp.<id>` is
/// connection `<id>` (the one apply made for `[mcp.<id>]`) unless a connection is named
/// `mcp.<id>` itself.
async fn declared(client: &Client, workspace: &str, key: &str) -> Result<ConnectionView, CliError> {
    match (connection(client, workspace, key).await, file_id(key)) {
        (Err(CliError::Refused { code, .. }), Some(id)) if code == "connection_not_found" => {
            connection(client, workspace, id).await
        }
        (found, _) => found,
    }
}

/// The `<id>` of `mcp.<id>`, as a file writes a server.
fn file_id(key: &str) -> Option<&str> {
    key.strip_prefix("mcp.").filter(|id| !id.is_empty())
}

/// The connection named `key` in `workspace`.
async fn connection(
    client: &Client,
    workspace: &str,
    key: &str,
) -> Result<ConnectionView, CliError> {
    client
        .get(&["workspaces", workspace, "connections", key])
        .await?
        .parse()
}

#[cfg(test)]
mod tests {
    use super::file_id;

    #[test]
    fn a_file_id_is_what_follows_mcp_dot() {
        assert_eq!(file_id("mcp.sentry"), Some("sentry"));
        assert_eq!(file_id("mcp.a.b"), Some("a.b"));
        assert_eq!(file_id("mcp."), None);
        assert_eq!(file_id("sentry"), None);
        assert_eq!(file_id("mcpsentry"), None);
    }
}
