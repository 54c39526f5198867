//! `switchyard credential set|rotate|list WS CONN …`: the credential values of a connection
//! placed on this machine's paired device, kept where that device's runner resolves them.
//!
//! A central connection's value goes to the server instead
//! (`PUT …/connections/{connection}/credentials/{name}`), which keeps it in PostgreSQL sealed
//! with its installation key (and refuses it when it has none); its listing is the server's
//! (`GET …/connections/{connection}/credentials`: references and presence, never a value).
//!
//! The command finds the connection among the placements on the caller's devices (which also
//! gives the connector's spec: the environment variables it declares, or that it speaks HTTP)
//! and checks that the device is the one paired on this machine under the profile. The value
//! then goes to the OS keyring or the 0600 secrets file beside the device's bindings file
//! (`switchyard_mcp_runner::credentials::device_bindings_file`), and the destination's binding
//! into that bindings file — both replaced atomically. Nothing about the value is sent to the
//! server, printed or logged.

use crate::cli::{CredentialCommand, CredentialTarget, StoreChoice};
use crate::client::{Body, Client};
use crate::error::CliError;
use crate::output::{Output, Table, print_text};
use crate::secret_input::read_secret;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use switchyard_mcp_runner::credentials::{
    BindingSite, CredentialResolver, CredentialStatus, Destination, NoKeyring, OsKeyring,
    SecretStore, Source, ValueState, ValueStore, ValueTarget, device_bindings_file,
};
use switchyard_mcp_runner::identity::{IdentityStore, KeyringChoice, select_profile};
use switchyard_protocol::api::{
    ConnectionView, ConnectorSpec, CredentialProvider, CredentialReference, CredentialValueSet,
    PlacementView, SetCredentialValue,
};
use switchyard_protocol::credential_status::CredentialStatusList;
use switchyard_protocol::{ConnectionId, DeviceId};

/// Runs a `credential` subcommand.
pub async fn run(client: &Client, out: Output, cmd: CredentialCommand) -> Result<(), CliError> {
    match cmd {
        CredentialCommand::Set {
            target,
            store,
            prefix,
        } => {
            let store = match store {
                StoreChoice::Keyring => ValueStore::OsKeyring,
                StoreChoice::File => ValueStore::SecretsFile,
            };
            write(client, out, &target, &ValueTarget::New { store, prefix }).await
        }
        CredentialCommand::Rotate { target } => {
            write(client, out, &target, &ValueTarget::Bound).await
        }
        CredentialCommand::List {
            workspace,
            connection,
            profile,
        } => list(client, out, &workspace, &connection, profile.as_deref()).await,
    }
}

/// A connection placed on this machine's device, with where its credentials live.
pub(crate) struct LocalConnection {
    /// The connection.
    pub(crate) id: ConnectionId,
    /// Its name.
    pub(crate) name: String,
    /// The spec its placement runs.
    pub(crate) spec: ConnectorSpec,
    /// The device runner's bindings file.
    pub(crate) bindings_file: PathBuf,
}

/// `credential set` and `credential rotate`.
async fn write(
    client: &Client,
    out: Output,
    target: &CredentialTarget,
    value_target: &ValueTarget,
) -> Result<(), CliError> {
    let local = match locate(
        client,
        &target.workspace,
        &target.connection,
        target.profile.as_deref(),
    )
    .await?
    {
        Location::Here(local) => local,
        // A new value replaces the one the server keeps, under the same key.
        Location::Central { name } => {
            let prefix = match value_target {
                ValueTarget::New { prefix, .. } => prefix.clone(),
                ValueTarget::Bound => None,
            };
            return set_central(client, out, target, &name, prefix).await;
        }
    };
    let store: Arc<dyn SecretStore> = match (value_target, OsKeyring::new()) {
        (_, Ok(keyring)) => Arc::new(keyring),
        (
            ValueTarget::New {
                store: ValueStore::OsKeyring,
                ..
            },
            Err(error),
        ) => return Err(CliError::KeyringUnavailable(error)),
        (_, Err(_)) => Arc::new(NoKeyring),
    };
    let resolver = CredentialResolver::new(Some(local.bindings_file.clone()), store);
    let value = read_secret(&format!(
        "value for {} of connection {}: ",
        target.name, local.name
    ))?;
    let site = resolver
        .set_value(
            local.id,
            &local.spec,
            &target.name,
            value.expose(),
            value_target,
        )
        .map_err(CliError::Credential)?;
    drop(value);
    let stored = StoredLine::new(&local, &site);
    if out.is_json() {
        print_json_value(&stored);
    } else {
        print_text(&format!(
            "{} of connection {}: value stored in {}; bound in {}\nthe runner's next call on {} \
             opens a new session, and warm sessions holding the old value drain",
            site.destination,
            local.name,
            site.reference.source,
            local.bindings_file.display(),
            local.name
        ));
    }
    Ok(())
}

/// `credential list`.
async fn list(
    client: &Client,
    out: Output,
    workspace: &str,
    connection: &str,
    profile: Option<&str>,
) -> Result<(), CliError> {
    let local = match locate(client, workspace, connection, profile).await? {
        Location::Here(local) => local,
        Location::Central { name } => return list_central(client, out, workspace, &name).await,
    };
    let store: Arc<dyn SecretStore> = match OsKeyring::new() {
        Ok(keyring) => Arc::new(keyring),
        Err(_) => Arc::new(NoKeyring),
    };
    let resolver = CredentialResolver::new(Some(local.bindings_file.clone()), store);
    let statuses = resolver
        .statuses(local.id, &local.spec)
        .map_err(CliError::Credential)?;
    if out.is_json() {
        let lines: Vec<StatusLine<'_>> = statuses.iter().map(StatusLine::new).collect();
        print_json_value(&ListAnswer {
            connection_id: local.id,
            connection: &local.name,
            bindings_file: local.bindings_file.display().to_string(),
            credentials: lines,
        });
        return Ok(());
    }
    let mut table = Table::new(["DESTINATION", "NAME", "PROVIDER", "WHERE", "VALUE"]);
    for status in &statuses {
        let line = StatusLine::new(status);
        table.row([
            line.kind.to_owned(),
            line.name.to_owned(),
            line.provider.unwrap_or("-").to_owned(),
            line.location.unwrap_or_else(|| "-".to_owned()),
            match &line.reason {
                Some(reason) => format!("{} ({reason})", line.state),
                None => line.state.to_owned(),
            },
        ]);
    }
    print_text(&format!(
        "connection {} ({}), bindings file {}\n{}",
        local.name,
        local.id,
        local.bindings_file.display(),
        table
            .render_or("no credential destinations: the connector declares none and none is bound")
    ));
    Ok(())
}

/// `credential list` for a central connection: the server's answer
/// (`GET …/connections/{connection}/credentials`), in the device listing's table.
async fn list_central(
    client: &Client,
    out: Output,
    workspace: &str,
    name: &str,
) -> Result<(), CliError> {
    let reply = client
        .get(&["workspaces", workspace, "connections", name, "credentials"])
        .await?;
    out.reply(&reply, |list: CredentialStatusList| {
        let mut table = Table::new(["DESTINATION", "NAME", "PROVIDER", "WHERE", "VALUE"]);
        for status in &list.credentials {
            let reference = status.reference.as_ref();
            table.row([
                status.destination.clone(),
                status.name.clone(),
                reference.map_or("-", |r| r.provider.as_str()).to_owned(),
                reference.map_or_else(|| "-".to_owned(), reference_location),
                match &status.reason {
                    Some(reason) => format!("{} ({reason})", status.state.as_str()),
                    None => status.state.as_str().to_owned(),
                },
            ]);
        }
        format!(
            "connection {} ({}), on the central runner: values kept by the server\n{}",
            list.connection,
            list.connection_id,
            table.render_or(
                "no credential destinations: the connector declares none and none is bound"
            )
        )
    })
}

/// A reference's entry as the device listing names it: `$VAR`, the account or the key.
fn reference_location(reference: &CredentialReference) -> String {
    let entry = match reference.provider {
        CredentialProvider::Environment => reference.name.as_deref().map(|n| format!("${n}")),
        CredentialProvider::OsStore => reference.account.clone(),
        CredentialProvider::SecretsFile => reference.key.clone(),
        CredentialProvider::Installation => None,
    };
    entry.unwrap_or_else(|| "-".to_owned())
}

/// Where a connection's credential values are kept.
pub(crate) enum Location {
    /// On this machine: the connection is placed on the device paired here.
    Here(LocalConnection),
    /// On the server: a central connection (its values are set through the API and kept
    /// sealed by the server).
    Central {
        /// The connection's name.
        name: String,
    },
}

/// Finds `connection` of `workspace`: among the placements on the caller's devices, on the
/// device paired on this machine under `profile`; else a central connection.
pub(crate) async fn locate(
    client: &Client,
    workspace: &str,
    connection: &str,
    profile: Option<&str>,
) -> Result<Location, CliError> {
    let placements: Vec<PlacementView> = client
        .get(&["workspaces", workspace, "devices", "placements"])
        .await?
        .parse()?;
    let placed: Vec<&PlacementView> = placements
        .iter()
        .filter(|p| p.connection_name == connection || p.connection_id.to_string() == connection)
        .collect();
    if placed.is_empty() {
        let view: ConnectionView = client
            .get(&["workspaces", workspace, "connections", connection])
            .await?
            .parse()?;
        if view.runner == "central" {
            return Ok(Location::Central { name: view.name });
        }
    }
    let (profile, device_id) = paired_here(profile)?;
    let config_dir = IdentityStore::default_location();
    if let Some(placement) = placed.iter().find(|p| p.device_id == device_id) {
        return Ok(Location::Here(LocalConnection {
            id: placement.connection_id,
            name: placement.connection_name.clone(),
            spec: placement.spec.clone(),
            bindings_file: device_bindings_file(&config_dir, &profile),
        }));
    }
    Err(CliError::NotPlacedHere {
        connection: connection.to_owned(),
        profile,
        device: device_id.to_string(),
        elsewhere: placed
            .first()
            .map(|p| format!("device {} ({})", p.device_name, p.device_id))
            .unwrap_or_else(|| "a device that is not yours".to_owned()),
    })
}

/// The device paired on this machine under `profile` (default: `SWITCHYARD_DEVICE_PROFILE`,
/// else `default`): the profile's name and the device's id.
pub(crate) fn paired_here(profile: Option<&str>) -> Result<(String, DeviceId), CliError> {
    let profile = select_profile(profile).map_err(CliError::DeviceIdentity)?;
    // Only the non-secret record is needed: the device's id.
    let identities = IdentityStore::open(IdentityStore::default_location(), KeyringChoice::Off)
        .map_err(CliError::DeviceIdentity)?;
    let device = identities
        .list()
        .map_err(CliError::DeviceIdentity)?
        .into_iter()
        .find(|record| record.profile == profile)
        .ok_or_else(|| CliError::NoLocalDevice {
            profile: profile.clone(),
        })?;
    Ok((profile, device.device_id))
}

/// `credential set` for a central connection: the value goes to the server, which keeps it
/// sealed with its installation key, or refuses it when it has none.
async fn set_central(
    client: &Client,
    out: Output,
    target: &CredentialTarget,
    name: &str,
    prefix: Option<String>,
) -> Result<(), CliError> {
    let value = read_secret(&format!(
        "value for {} of connection {name} (kept by the server): ",
        target.name
    ))?;
    let body = SetCredentialValue {
        value: value.expose().to_owned(),
        prefix,
    };
    drop(value);
    let reply = client
        .put(
            &[
                "workspaces",
                &target.workspace,
                "connections",
                name,
                "credentials",
                &target.name,
            ],
            Body::of(&body),
        )
        .await?;
    out.reply(&reply, |set: CredentialValueSet| {
        format!(
            "{} `{}` of connection {name}: value kept by the server, sealed with its \
             installation key; the next call opens a new session, and warm sessions holding the \
             old value drain",
            if set.destination == "env" {
                "environment variable"
            } else {
                "header"
            },
            set.name,
        )
    })
}

/// What `credential set|rotate --json` prints.
#[derive(Serialize)]
struct StoredLine<'a> {
    connection_id: ConnectionId,
    connection: &'a str,
    destination: &'static str,
    name: &'a str,
    provider: &'static str,
    location: String,
    bindings_file: String,
}

impl<'a> StoredLine<'a> {
    fn new(local: &'a LocalConnection, site: &'a BindingSite) -> Self {
        let (destination, name) = destination_parts(&site.destination);
        let (provider, location) = source_parts(&site.reference.source);
        StoredLine {
            connection_id: local.id,
            connection: &local.name,
            destination,
            name,
            provider,
            location,
            bindings_file: local.bindings_file.display().to_string(),
        }
    }
}

/// What `credential list --json` prints.
#[derive(Serialize)]
struct ListAnswer<'a> {
    connection_id: ConnectionId,
    connection: &'a str,
    bindings_file: String,
    credentials: Vec<StatusLine<'a>>,
}

/// One destination in `credential list`.
#[derive(Serialize)]
struct StatusLine<'a> {
    #[serde(rename = "destination")]
    kind: &'static str,
    name: &'a str,
    provider: Option<&'static str>,
    location: Option<String>,
    prefix: Option<&'a str>,
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl<'a> StatusLine<'a> {
    fn new(status: &'a CredentialStatus) -> Self {
        let (kind, name) = destination_parts(&status.destination);
        let source = status.reference.as_ref().map(|r| source_parts(&r.source));
        let (state, code, reason) = match &status.state {
            ValueState::Unbound => ("unbound", None, None),
            ValueState::Present => ("present", None, None),
            ValueState::Missing => ("missing", None, None),
            ValueState::Unusable { code, reason } => {
                ("unusable", Some(*code), Some(reason.clone()))
            }
        };
        StatusLine {
            kind,
            name,
            provider: source.as_ref().map(|(provider, _)| *provider),
            location: source.map(|(_, location)| location),
            prefix: status
                .reference
                .as_ref()
                .and_then(|reference| reference.prefix.as_deref()),
            state,
            code,
            reason,
        }
    }
}

/// `env` or `header`, and the name.
fn destination_parts(destination: &Destination) -> (&'static str, &str) {
    match destination {
        Destination::Env(name) => ("env", name),
        Destination::Header(name) => ("header", name),
    }
}

/// The provider's name in a bindings file, and the entry's name there.
fn source_parts(source: &Source) -> (&'static str, String) {
    match source {
        Source::Environment { name } => ("environment", format!("${name}")),
        Source::OsStore { account } => ("os_store", account.clone()),
        Source::SecretsFile { key } => ("secrets_file", key.clone()),
        Source::Installation => ("installation", "-".to_owned()),
    }
}

/// Prints a locally made answer as pretty JSON.
fn print_json_value(value: &impl Serialize) {
    // Structs of strings and ids: serializing cannot fail.
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}
