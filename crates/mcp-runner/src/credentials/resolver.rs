//! Turning a leased call's connection into a [`SessionLaunch`] with every bound value resolved.
//!
//! Each resolution reads the bindings file again, checks the connection's binding against its
//! connector (declared environment names, transport), then fetches each value from its provider
//! and checks it. Any failure fails the call before anything is sent.

use super::KEYRING_SERVICE;
use super::bindings::{self, ConnectionBinding};
use super::error::{BindingSite, CredentialError};
use super::reference::{Destination, Source};
use super::rules;
use super::secrets_file::{self, Secrets};
use super::store::{SecretStore, StoreError};
use super::stored::StoredValues;
use super::writer;
use crate::launch::SessionLaunch;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use switchyard_protocol::api::{CallError, ConnectionCredentials, ConnectorSpec};
use switchyard_protocol::ids::ConnectionId;
use switchyard_protocol::runner::LeasedCall;

/// Resolves credential references for sessions, from an optional bindings file and a secret
/// store (the OS keyring or [`super::NoKeyring`]).
pub struct CredentialResolver {
    pub(super) bindings_file: Option<PathBuf>,
    pub(super) store: Arc<dyn SecretStore>,
}

/// What the bindings file says about one connection.
pub(super) enum Lookup<'a> {
    /// The connection has a binding in the file at `path`.
    Bound {
        path: &'a Path,
        binding: ConnectionBinding,
    },
    /// Nothing is bound; `consulted` says where that was found out, for the error message.
    Unbound { consulted: String },
}

impl CredentialResolver {
    /// A resolver reading `bindings_file` (none: nothing is bound) and looking `os_store`
    /// references up in `store`.
    pub fn new(bindings_file: Option<PathBuf>, store: Arc<dyn SecretStore>) -> Self {
        Self {
            bindings_file,
            store,
        }
    }

    /// The session launch for `call`: its connector spec with the bound environment values
    /// (stdio) or headers (HTTP) resolved. The error is the call's `failed` error, with a
    /// `credential_*` code and a message that names no value.
    pub fn launch_for(&self, call: &LeasedCall) -> Result<SessionLaunch, CallError> {
        let target = &call.connection;
        self.resolve(target.connection_id, &target.spec)
            .map_err(CallError::from)
    }

    /// The session launch for connector `spec` placed as `connection` (what [`Self::launch_for`]
    /// does, for callers without a leased call, such as tool discovery).
    pub fn resolve(
        &self,
        connection: ConnectionId,
        spec: &ConnectorSpec,
    ) -> Result<SessionLaunch, CredentialError> {
        self.resolve_with(connection, spec, &StoredValues::default())
    }

    /// [`Self::resolve`] with the values the host keeps for `connection` (`stored`), each
    /// binding its destination over what the bindings file says.
    pub fn resolve_with(
        &self,
        connection: ConnectionId,
        spec: &ConnectorSpec,
        stored: &StoredValues,
    ) -> Result<SessionLaunch, CredentialError> {
        let (path, mut binding) = match self.lookup(connection)? {
            Lookup::Bound { path, binding } => (Some(path), binding),
            Lookup::Unbound { consulted } if stored.is_empty() => {
                return match spec {
                    ConnectorSpec::Stdio { env, .. } if !env.is_empty() => {
                        Err(CredentialError::NotBound {
                            connection,
                            names: env.clone(),
                            where_: consulted,
                        })
                    }
                    _ => Ok(SessionLaunch {
                        spec: spec.clone(),
                        env: Vec::new(),
                        headers: Vec::new(),
                    }),
                };
            }
            Lookup::Unbound { .. } => (None, ConnectionBinding::default()),
        };
        stored.overlay(&mut binding);
        resolve_binding(
            Values::new(self.store.as_ref(), path, stored),
            connection,
            spec,
            &binding,
        )
    }

    /// The session launch for connector `spec` placed as `connection` with `binding` (given
    /// through the API, not yet in the bindings file), resolved as [`Self::resolve`] would once
    /// it is written there: `secrets_file` references read the configured file's sibling.
    pub fn resolve_supplied(
        &self,
        connection: ConnectionId,
        spec: &ConnectorSpec,
        binding: &ConnectionBinding,
    ) -> Result<SessionLaunch, CredentialError> {
        let path = self
            .bindings_file
            .as_deref()
            .ok_or(CredentialError::NoBindingsFile { connection })?;
        let stored = StoredValues::default();
        resolve_binding(
            Values::new(self.store.as_ref(), Some(path), &stored),
            connection,
            spec,
            binding,
        )
    }

    /// Writes `credentials` into the bindings file as `connection`'s binding (see
    /// [`super::writer`]), replacing any it had.
    pub fn bind(
        &self,
        connection: ConnectionId,
        credentials: &ConnectionCredentials,
    ) -> Result<(), CredentialError> {
        let path = self
            .bindings_file
            .as_deref()
            .ok_or(CredentialError::NoBindingsFile { connection })?;
        writer::update(path, connection, Some(credentials))
    }

    /// Removes `connection`'s binding from the bindings file, if it has one.
    pub fn unbind(&self, connection: ConnectionId) -> Result<(), CredentialError> {
        match self.bindings_file.as_deref() {
            Some(path) => writer::update(path, connection, None),
            None => Ok(()),
        }
    }

    /// Whether a bindings file is configured (credentials can be bound through the API).
    pub fn has_bindings_file(&self) -> bool {
        self.bindings_file.is_some()
    }

    /// Reads the bindings file (again) and takes `connection`'s binding out of it.
    pub(super) fn lookup(&self, connection: ConnectionId) -> Result<Lookup<'_>, CredentialError> {
        let Some(path) = self.bindings_file.as_deref() else {
            return Ok(Lookup::Unbound {
                consulted: "no credential bindings file is configured".to_owned(),
            });
        };
        match bindings::read(path) {
            Ok(mut file) => Ok(match file.bindings.remove(&connection) {
                Some(binding) => Lookup::Bound { path, binding },
                None => Lookup::Unbound {
                    consulted: format!(
                        "credential bindings file `{}` has no binding for it",
                        path.display()
                    ),
                },
            }),
            // A file not created yet binds nothing: what needs a binding fails as missing.
            Err(CredentialError::BindingsRead { source, .. })
                if source.kind() == ErrorKind::NotFound =>
            {
                Ok(Lookup::Unbound {
                    consulted: format!(
                        "credential bindings file `{}` does not exist",
                        path.display()
                    ),
                })
            }
            Err(error) => Err(error),
        }
    }
}

/// `binding` (from the bindings file, or about to be written there, with the stored values
/// over it) checked against `spec` and resolved into a launch with `values`.
fn resolve_binding(
    mut values: Values<'_>,
    connection: ConnectionId,
    spec: &ConnectorSpec,
    binding: &ConnectionBinding,
) -> Result<SessionLaunch, CredentialError> {
    binding.check(connection)?;
    let mut launch = SessionLaunch {
        spec: spec.clone(),
        env: Vec::new(),
        headers: Vec::new(),
    };
    match spec {
        ConnectorSpec::Stdio { env: declared, .. } => {
            launch.env = stdio_env(connection, declared, binding, &mut values)?;
        }
        ConnectorSpec::Http { url } => {
            if !binding.headers.is_empty() {
                refuse_cleartext(connection, url)?;
            }
            launch.headers = http_headers(connection, binding, &mut values)?;
        }
    }
    Ok(launch)
}

/// A stdio server's environment: only declared variables may be bound, and all of them must be.
fn stdio_env(
    connection: ConnectionId,
    declared: &[String],
    binding: &ConnectionBinding,
    values: &mut Values<'_>,
) -> Result<Vec<(String, String)>, CredentialError> {
    for site in binding.sites(connection) {
        let Destination::Env(name) = &site.destination else {
            return Err(CredentialError::WrongTransport {
                site: Box::new(site),
                transport: "a stdio server",
                accepted: "environment variables",
            });
        };
        if !declared.contains(name) {
            return Err(CredentialError::UndeclaredEnv {
                site: Box::new(site),
            });
        }
    }
    let unbound: Vec<String> = declared
        .iter()
        .filter(|name| !binding.env.contains_key(*name))
        .cloned()
        .collect();
    if !unbound.is_empty() {
        return Err(CredentialError::NotBound {
            connection,
            names: unbound,
            where_: match values.bindings_path {
                Some(path) => format!("checked credential bindings file `{}`", path.display()),
                None => "no credential bindings file binds it and no value is stored".to_owned(),
            },
        });
    }
    let mut env = Vec::with_capacity(binding.env.len());
    for site in binding.sites(connection) {
        let value = values.fetch(&site)?;
        rules::check_value(&site, &value)?;
        if let Destination::Env(name) = site.destination {
            env.push((name, value));
        }
    }
    Ok(env)
}

/// Refuses header credentials for a plain `http://` URL to another machine; `https://` and
/// the loopback interface (`localhost`, 127.0.0.0/8, `::1`) are fine.
fn refuse_cleartext(connection: ConnectionId, url: &str) -> Result<(), CredentialError> {
    let Ok(parsed) = url::Url::parse(url) else {
        // The server checked the URL when the connector was made; the session reports it.
        return Ok(());
    };
    let loopback = match parsed.host() {
        Some(url::Host::Domain(name)) => name == "localhost" || name.ends_with(".localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if parsed.scheme() == "http" && !loopback {
        return Err(CredentialError::CleartextHeaders {
            connection,
            host: parsed.host_str().unwrap_or_default().to_owned(),
        });
    }
    Ok(())
}

/// An HTTP server's headers, each with its prefix.
fn http_headers(
    connection: ConnectionId,
    binding: &ConnectionBinding,
    values: &mut Values<'_>,
) -> Result<Vec<(String, String)>, CredentialError> {
    let mut headers = Vec::with_capacity(binding.headers.len());
    for site in binding.sites(connection) {
        let Destination::Header(name) = &site.destination else {
            return Err(CredentialError::WrongTransport {
                site: Box::new(site),
                transport: "an HTTP server",
                accepted: "headers",
            });
        };
        let value = values.fetch(&site)?;
        let value = rules::header_value(&site, site.reference.prefix.as_deref(), &value)?;
        headers.push((name.clone(), value));
    }
    Ok(headers)
}

/// Fetches values for one resolution, reading the secrets file at most once.
pub(super) struct Values<'a> {
    store: &'a dyn SecretStore,
    bindings_path: Option<&'a Path>,
    stored: &'a StoredValues,
    secrets: Option<Secrets>,
}

impl<'a> Values<'a> {
    /// Fetches values for the bindings file at `bindings_path` (if one binds anything), from
    /// `store`, the file's secrets file and the host's `stored` values.
    pub(super) fn new(
        store: &'a dyn SecretStore,
        bindings_path: Option<&'a Path>,
        stored: &'a StoredValues,
    ) -> Self {
        Self {
            store,
            bindings_path,
            stored,
            secrets: None,
        }
    }

    /// The value `site`'s reference points at.
    pub(super) fn fetch(&mut self, site: &BindingSite) -> Result<String, CredentialError> {
        let missing = || CredentialError::ValueMissing {
            site: Box::new(site.clone()),
        };
        match &site.reference.source {
            Source::Environment { name } => match std::env::var_os(name) {
                None => Err(missing()),
                Some(value) => value
                    .into_string()
                    .map_err(|_| CredentialError::ValueCharacters {
                        site: Box::new(site.clone()),
                        problem: "is not valid UTF-8",
                    }),
            },
            Source::OsStore { account } => match self.store.get(KEYRING_SERVICE, account) {
                Ok(Some(value)) => Ok(value),
                Ok(None) => Err(missing()),
                Err(StoreError::NotText) => Err(CredentialError::ValueCharacters {
                    site: Box::new(site.clone()),
                    problem: "is not valid UTF-8",
                }),
                Err(error) => Err(CredentialError::ValueUnavailable {
                    site: Box::new(site.clone()),
                    reason: error.to_string(),
                }),
            },
            Source::SecretsFile { key } => self
                .secrets(site.connection)?
                .get(key)
                .map(str::to_owned)
                .ok_or_else(missing),
            Source::Installation => match self.stored.get(&site.destination) {
                None => Err(missing()),
                Some(Ok(value)) => Ok(value.to_owned()),
                Some(Err(reason)) => Err(CredentialError::ValueUnavailable {
                    site: Box::new(site.clone()),
                    reason: reason.to_owned(),
                }),
            },
        }
    }

    /// The secrets file's values, loaded on first use.
    fn secrets(&mut self, connection: ConnectionId) -> Result<&Secrets, CredentialError> {
        let secrets = match self.secrets.take() {
            Some(secrets) => secrets,
            None => {
                // A secrets-file reference comes from a bindings file.
                let path = self
                    .bindings_path
                    .ok_or(CredentialError::NoBindingsFile { connection })?;
                secrets_file::load(&bindings::secrets_path(path)?)?
            }
        };
        Ok(self.secrets.insert(secrets))
    }
}
