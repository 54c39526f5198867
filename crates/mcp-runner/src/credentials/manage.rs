//! Managing one connection's credentials on this machine (`switchyard credential set|rotate|
//! list`): storing a value with its provider and binding a destination to it, and saying for
//! each destination where its value resolves and whether it is there — never the value.
//!
//! Guarantees:
//! - A value is checked (length, NUL, CR/LF for headers) and its destination against the
//!   connector (declared environment variables of a stdio server, headers of an HTTP one, no
//!   reserved name) before anything is written.
//! - The value is stored first, then the binding: a process killed in between leaves the old
//!   binding in force and the files whole (each is replaced atomically, see [`super::writer`]).
//! - A new value changes the session's launch, so the runner's next call on the connection
//!   opens a new session and drains the warm ones that hold the old value (a new credential
//!   generation, [`crate::pool`]).

use super::KEYRING_SERVICE;
use super::bindings::{self, ConnectionBinding};
use super::error::{BindingSite, CredentialError};
use super::location::prepare_directory;
use super::reference::{Destination, Reference, Source};
use super::resolver::{CredentialResolver, Lookup, Values};
use super::rules;
use super::stored::StoredValues;
use super::writer;
use std::io::ErrorKind;
use std::path::Path;
use switchyard_protocol::api::{ConnectorSpec, CredentialProvider, CredentialReference};
use switchyard_protocol::ids::ConnectionId;

/// Where `credential set` stores a new value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueStore {
    /// The OS keyring (service [`KEYRING_SERVICE`]).
    OsKeyring,
    /// The development secrets file next to the bindings file (0600).
    SecretsFile,
}

/// Which binding a new value goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueTarget {
    /// Bind the destination to a new entry in `store` (replacing any earlier binding), with
    /// `prefix` before the value (headers only; `None` keeps an existing binding's prefix).
    New {
        /// Where the value is stored.
        store: ValueStore,
        /// Text put before the value, e.g. `Bearer `.
        prefix: Option<String>,
    },
    /// Replace the value the destination is bound to now, where it is (a rotation).
    Bound,
}

/// Whether a destination's value can be found where it is bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueState {
    /// Nothing is bound to the destination (a declared environment variable without binding).
    Unbound,
    /// The value is there and follows the value rules.
    Present,
    /// The referenced variable, keyring entry or secrets-file key does not exist.
    Missing,
    /// The value cannot be read or breaks the rules: the reason, with its `credential_*` code.
    Unusable {
        /// The stable code (`credential_unavailable`, `credential_invalid`, …).
        code: &'static str,
        /// Why, naming no value.
        reason: String,
    },
}

/// One destination of a connection, where its value resolves and whether it is there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CredentialStatus {
    /// Where the value goes.
    pub destination: Destination,
    /// What it is bound to, if anything.
    pub reference: Option<Reference>,
    /// Whether the value is there.
    pub state: ValueState,
}

impl CredentialResolver {
    /// Empties `connection`'s credentials on this machine: removes its binding, and the
    /// keyring entries `credential set` made for it (accounts `<connection>/<name>`, never an
    /// entry another binding may share). Answers how many destinations were bound.
    pub fn forget(&self, connection: ConnectionId) -> Result<usize, CredentialError> {
        let binding = match self.lookup(connection)? {
            Lookup::Bound { binding, .. } => binding,
            Lookup::Unbound { .. } => return Ok(0),
        };
        let own = format!("{connection}/");
        for reference in binding.env.values().chain(binding.headers.values()) {
            if let Source::OsStore { account } = &reference.source
                && account.starts_with(&own)
            {
                // A keyring that cannot be reached keeps the value, but nothing binds it.
                if let Err(error) = self.store.delete(KEYRING_SERVICE, account) {
                    tracing::warn!(%error, %connection, "cannot delete a keyring entry");
                }
            }
        }
        self.unbind(connection)?;
        Ok(binding.env.len() + binding.headers.len())
    }

    /// Stores `value` for destination `name` of `connection` (placed from connector `spec`) and
    /// binds the destination to it as `target` says; returns the binding. `name` must be an
    /// environment variable `spec` declares (stdio) or a header (HTTP), not a reserved one.
    pub fn set_value(
        &self,
        connection: ConnectionId,
        spec: &ConnectorSpec,
        name: &str,
        value: &str,
        target: &ValueTarget,
    ) -> Result<BindingSite, CredentialError> {
        let path = self
            .bindings_file
            .as_deref()
            .ok_or(CredentialError::NoBindingsFile { connection })?;
        let destination = match spec {
            ConnectorSpec::Stdio { .. } => Destination::Env(name.to_owned()),
            ConnectorSpec::Http { .. } => Destination::Header(name.to_owned()),
        };
        let current = current_reference(path, connection, &destination)?;
        let reference = match target {
            ValueTarget::New { store, prefix } => Reference {
                source: match store {
                    ValueStore::OsKeyring => Source::OsStore {
                        account: entry_name(connection, name),
                    },
                    ValueStore::SecretsFile => Source::SecretsFile {
                        key: entry_name(connection, name),
                    },
                },
                prefix: prefix
                    .clone()
                    .or_else(|| current.and_then(|reference| reference.prefix)),
            },
            ValueTarget::Bound => current.ok_or_else(|| CredentialError::NotBound {
                connection,
                names: vec![name.to_owned()],
                where_: format!(
                    "credential bindings file `{}`; set a value with `switchyard credential set` \
                     first",
                    path.display()
                ),
            })?,
        };
        let site = BindingSite {
            connection,
            destination,
            reference,
        };
        check_site(spec, &site)?;
        match &site.destination {
            Destination::Env(_) => rules::check_value(&site, value)?,
            Destination::Header(_) => {
                rules::header_value(&site, site.reference.prefix.as_deref(), value)?;
            }
        }
        prepare_directory(path)?;
        match &site.reference.source {
            Source::Environment { .. } | Source::Installation => {
                return Err(CredentialError::NotWritable {
                    site: Box::new(site),
                });
            }
            Source::OsStore { account } => self
                .store
                .set(KEYRING_SERVICE, account, value)
                .map_err(|error| CredentialError::ValueNotStored {
                    site: Box::new(site.clone()),
                    reason: error.to_string(),
                })?,
            Source::SecretsFile { key } => {
                writer::set_secret(&bindings::secrets_path(path)?, key, value)?;
            }
        }
        if matches!(target, ValueTarget::New { .. }) {
            writer::bind_destination(
                path,
                connection,
                &site.destination,
                &wire_reference(&site.reference),
            )?;
        }
        Ok(site)
    }

    /// Every destination of `connection` (placed from connector `spec`): the environment
    /// variables it declares or has bound, or its bound headers, each with where its value
    /// resolves and whether the value is there. Values are read to check them and dropped.
    pub fn statuses(
        &self,
        connection: ConnectionId,
        spec: &ConnectorSpec,
    ) -> Result<Vec<CredentialStatus>, CredentialError> {
        self.statuses_with(connection, spec, &StoredValues::default())
    }

    /// [`Self::statuses`] with the values the host keeps for `connection` (`stored`), each
    /// binding its destination over what the bindings file says.
    pub fn statuses_with(
        &self,
        connection: ConnectionId,
        spec: &ConnectorSpec,
        stored: &StoredValues,
    ) -> Result<Vec<CredentialStatus>, CredentialError> {
        let (path, mut binding) = match self.lookup(connection)? {
            Lookup::Bound { path, binding } => (Some(path), binding),
            Lookup::Unbound { .. } => (None, ConnectionBinding::default()),
        };
        stored.overlay(&mut binding);
        let mut statuses = Vec::new();
        if let ConnectorSpec::Stdio { env, .. } = spec {
            for name in env.iter().filter(|name| !binding.env.contains_key(*name)) {
                statuses.push(CredentialStatus {
                    destination: Destination::Env(name.clone()),
                    reference: None,
                    state: ValueState::Unbound,
                });
            }
        }
        {
            let mut values = Values::new(self.store.as_ref(), path, stored);
            for site in binding.sites(connection) {
                let state = match check_site(spec, &site).and_then(|()| values.fetch(&site)) {
                    Ok(value) => match value_rules(&site, &value) {
                        Ok(()) => ValueState::Present,
                        Err(error) => unusable(&error),
                    },
                    Err(CredentialError::ValueMissing { .. }) => ValueState::Missing,
                    Err(error) => unusable(&error),
                };
                statuses.push(CredentialStatus {
                    destination: site.destination,
                    reference: Some(site.reference),
                    state,
                });
            }
        }
        Ok(statuses)
    }
}

/// Checks `value` for destination `name` of `connection` (placed from connector `spec`) as
/// the value the host stores itself (an `installation` reference with `prefix`), before the
/// host seals and stores it: the destination against the connector, then the value rules.
/// Answers the binding the value will have.
pub fn check_stored_value(
    connection: ConnectionId,
    spec: &ConnectorSpec,
    name: &str,
    value: &str,
    prefix: Option<String>,
) -> Result<BindingSite, CredentialError> {
    let destination = match spec {
        ConnectorSpec::Stdio { .. } => Destination::Env(name.to_owned()),
        ConnectorSpec::Http { .. } => Destination::Header(name.to_owned()),
    };
    let site = BindingSite {
        connection,
        destination,
        reference: Reference {
            source: Source::Installation,
            prefix,
        },
    };
    check_site(spec, &site)?;
    value_rules(&site, value)?;
    Ok(site)
}

/// The keyring account or secrets-file key `credential set` stores a value under.
fn entry_name(connection: ConnectionId, name: &str) -> String {
    format!("{connection}/{name}")
}

/// What `destination` of `connection` is bound to in the file at `path` now (a missing file
/// binds nothing).
fn current_reference(
    path: &Path,
    connection: ConnectionId,
    destination: &Destination,
) -> Result<Option<Reference>, CredentialError> {
    let mut file = match bindings::read(path) {
        Ok(file) => file,
        Err(CredentialError::BindingsRead { source, .. })
            if source.kind() == ErrorKind::NotFound =>
        {
            return Ok(None);
        }
        Err(error) => return Err(error),
    };
    let Some(mut binding) = file.bindings.remove(&connection) else {
        return Ok(None);
    };
    Ok(match destination {
        Destination::Env(name) => binding.env.remove(name),
        Destination::Header(name) => binding.headers.remove(name),
    })
}

/// Checks `site` against connector `spec`: a stdio server takes the environment variables it
/// declares, an HTTP server headers; neither a reserved name nor a bad header name or prefix.
fn check_site(spec: &ConnectorSpec, site: &BindingSite) -> Result<(), CredentialError> {
    let mut binding = ConnectionBinding::default();
    match (&site.destination, spec) {
        (Destination::Env(name), ConnectorSpec::Stdio { env: declared, .. }) => {
            if !declared.contains(name) {
                return Err(CredentialError::UndeclaredEnv {
                    site: Box::new(site.clone()),
                });
            }
            binding.env.insert(name.clone(), site.reference.clone());
        }
        (Destination::Header(name), ConnectorSpec::Http { .. }) => {
            binding.headers.insert(name.clone(), site.reference.clone());
        }
        (_, ConnectorSpec::Stdio { .. }) => {
            return Err(CredentialError::WrongTransport {
                site: Box::new(site.clone()),
                transport: "a stdio server",
                accepted: "environment variables",
            });
        }
        (_, ConnectorSpec::Http { .. }) => {
            return Err(CredentialError::WrongTransport {
                site: Box::new(site.clone()),
                transport: "an HTTP server",
                accepted: "headers",
            });
        }
    }
    binding.check(site.connection)
}

/// The value rules for `site`'s destination.
fn value_rules(site: &BindingSite, value: &str) -> Result<(), CredentialError> {
    match &site.destination {
        Destination::Env(_) => rules::check_value(site, value),
        Destination::Header(_) => {
            rules::header_value(site, site.reference.prefix.as_deref(), value).map(|_| ())
        }
    }
}

fn unusable(error: &CredentialError) -> ValueState {
    ValueState::Unusable {
        code: error.code(),
        reason: error.to_string(),
    }
}

/// `reference` in the bindings file's (and the API's) form.
fn wire_reference(reference: &Reference) -> CredentialReference {
    let (provider, name, account, key) = match &reference.source {
        Source::Environment { name } => (CredentialProvider::Environment, Some(name), None, None),
        Source::OsStore { account } => (CredentialProvider::OsStore, None, Some(account), None),
        Source::SecretsFile { key } => (CredentialProvider::SecretsFile, None, None, Some(key)),
        Source::Installation => (CredentialProvider::Installation, None, None, None),
    };
    CredentialReference {
        provider,
        name: name.cloned(),
        account: account.cloned(),
        key: key.cloned(),
        prefix: reference.prefix.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::{NoKeyring, codes};
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;
    use std::sync::Arc;

    const CANARY: &str = "canary-set-8e21";

    /// A fresh directory (removed after) and a resolver for its default-named bindings file.
    fn fixture(label: &str) -> (PathBuf, CredentialResolver) {
        let dir = std::env::temp_dir().join(format!("manage-{label}-{}", uuid::Uuid::new_v4()));
        let path = dir.join("private").join("dev.mcp-bindings.json");
        let resolver = CredentialResolver::new(Some(path), Arc::new(NoKeyring));
        (dir, resolver)
    }

    fn stdio(env: &[&str]) -> ConnectorSpec {
        ConnectorSpec::Stdio {
            command: "server".to_owned(),
            args: Vec::new(),
            env: env.iter().map(|name| (*name).to_owned()).collect(),
        }
    }

    fn to_file() -> ValueTarget {
        ValueTarget::New {
            store: ValueStore::SecretsFile,
            prefix: None,
        }
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_value_set_in_the_secrets_file_resolves_and_its_files_are_private() {
        let (dir, resolver) = fixture("set");
        let connection = ConnectionId::new();
        let spec = stdio(&["API_TOKEN", "OTHER"]);
        let site = resolver
            .set_value(connection, &spec, "API_TOKEN", CANARY, &to_file())
            .unwrap();
        assert_eq!(
            site.reference.source,
            Source::SecretsFile {
                key: format!("{connection}/API_TOKEN")
            }
        );
        let private = dir.join("private");
        assert_eq!(mode(&private), 0o700);
        assert_eq!(mode(&private.join("dev.mcp-bindings.json")), 0o600);
        assert_eq!(mode(&private.join("dev.mcp-secrets.json")), 0o600);
        // No temporary file is left beside them.
        assert_eq!(std::fs::read_dir(&private).unwrap().count(), 2);

        let statuses = resolver.statuses(connection, &spec).unwrap();
        let states: Vec<(String, ValueState)> = statuses
            .iter()
            .map(|status| (status.destination.to_string(), status.state.clone()))
            .collect();
        assert_eq!(
            states,
            [
                (
                    "environment variable `OTHER`".to_owned(),
                    ValueState::Unbound
                ),
                (
                    "environment variable `API_TOKEN`".to_owned(),
                    ValueState::Present
                ),
            ]
        );
        assert!(!format!("{statuses:?}").contains(CANARY));

        // A rotation replaces the value where it is; the launch carries the new one.
        resolver
            .set_value(
                connection,
                &stdio(&["API_TOKEN"]),
                "API_TOKEN",
                "rotated-value",
                &ValueTarget::Bound,
            )
            .unwrap();
        let launch = resolver
            .resolve(connection, &stdio(&["API_TOKEN"]))
            .unwrap();
        assert_eq!(
            launch.env,
            [("API_TOKEN".to_owned(), "rotated-value".to_owned())]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refused_values_and_destinations_write_nothing() {
        let (dir, resolver) = fixture("refused");
        let connection = ConnectionId::new();
        let spec = stdio(&["API_TOKEN", "PATH"]);
        let http = ConnectorSpec::Http {
            url: "https://mcp.example/mcp".to_owned(),
        };
        let cases: [(&ConnectorSpec, &str, &str, &str); 6] = [
            (&spec, "API_TOKEN", "zq9", codes::INVALID),
            (&spec, "API_TOKEN", "with\0nul", codes::INVALID),
            (&spec, "UNDECLARED", CANARY, codes::CONFIG_INVALID),
            (&spec, "PATH", CANARY, codes::RESERVED),
            (&http, "Host", CANARY, codes::RESERVED),
            (&http, "Authorization", "line\r\nbreak", codes::INVALID),
        ];
        for (spec, name, value, code) in cases {
            let error = resolver
                .set_value(connection, spec, name, value, &to_file())
                .unwrap_err();
            assert_eq!(error.code(), code, "{name}: {error}");
            assert!(!error.to_string().contains(value), "{error}");
        }
        let error = resolver
            .set_value(connection, &spec, "API_TOKEN", CANARY, &ValueTarget::Bound)
            .unwrap_err();
        assert_eq!(error.code(), codes::MISSING, "{error}");
        let error = resolver
            .set_value(
                connection,
                &spec,
                "API_TOKEN",
                CANARY,
                &ValueTarget::New {
                    store: ValueStore::OsKeyring,
                    prefix: None,
                },
            )
            .unwrap_err();
        assert_eq!(error.code(), codes::UNAVAILABLE, "{error}");
        assert!(!dir.join("private").join("dev.mcp-bindings.json").exists());
        assert!(!dir.join("private").join("dev.mcp-secrets.json").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        let (dir, resolver) = fixture("open-dir");
        let private = dir.join("private");
        std::fs::create_dir_all(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = resolver
            .set_value(
                ConnectionId::new(),
                &stdio(&["API_TOKEN"]),
                "API_TOKEN",
                CANARY,
                &to_file(),
            )
            .unwrap_err();
        assert!(
            matches!(error, CredentialError::DirectoryUnsafe { .. }),
            "{error}"
        );
        assert_eq!(std::fs::read_dir(&private).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
