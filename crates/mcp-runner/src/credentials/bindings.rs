//! The bindings file: reading it safely, its shape, and the checks a connection's binding must
//! pass before any value is looked up.

use super::error::{BindingSite, CredentialError};
use super::reference::{Destination, Reference, Source};
use super::rules;
use crate::launch::is_reserved_env_name;
use crate::owned_file::{self, ModeRule, Refusal};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use switchyard_protocol::api::{ConnectionCredentials, CredentialReference};
use switchyard_protocol::ids::ConnectionId;

/// How a bindings file's name ends; the secrets file is the sibling with [`SECRETS_SUFFIX`].
const BINDINGS_SUFFIX: &str = ".mcp-bindings.json";
/// How the development secrets file's name ends.
const SECRETS_SUFFIX: &str = ".mcp-secrets.json";

/// A parsed bindings file.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BindingsFile {
    /// Per connection, what to bind.
    #[serde(deserialize_with = "unique_map")]
    pub bindings: BTreeMap<ConnectionId, ConnectionBinding>,
}

/// The references bound for one connection.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionBinding {
    /// A stdio server's environment variables.
    #[serde(default, deserialize_with = "unique_map")]
    pub env: BTreeMap<String, Reference>,
    /// An HTTP server's headers.
    #[serde(default, deserialize_with = "unique_map")]
    pub headers: BTreeMap<String, Reference>,
}

impl ConnectionBinding {
    /// Reads credentials given through the API (the same shape as a bindings file entry),
    /// with every reference checked against its provider. The error says what is wrong with
    /// which destination; it holds no value (references hold none).
    pub fn from_credentials(credentials: &ConnectionCredentials) -> Result<Self, String> {
        fn read(
            kind: &str,
            references: &BTreeMap<String, CredentialReference>,
        ) -> Result<BTreeMap<String, Reference>, String> {
            references
                .iter()
                .map(|(name, reference)| {
                    let json = serde_json::to_value(reference)
                        .map_err(|error| format!("{kind} `{name}`: {error}"))?;
                    let reference = serde_json::from_value(json)
                        .map_err(|error| format!("{kind} `{name}`: {error}"))?;
                    Ok((name.clone(), reference))
                })
                .collect()
        }
        Ok(Self {
            env: read("environment variable", &credentials.env)?,
            headers: read("header", &credentials.headers)?,
        })
    }

    /// Whether nothing is bound.
    pub fn is_empty(&self) -> bool {
        self.env.is_empty() && self.headers.is_empty()
    }

    /// Every binding with its destination, environment variables first.
    pub fn sites(&self, connection: ConnectionId) -> impl Iterator<Item = BindingSite> + '_ {
        let env = self.env.iter().map(move |(name, reference)| BindingSite {
            connection,
            destination: Destination::Env(name.clone()),
            reference: reference.clone(),
        });
        let headers = self
            .headers
            .iter()
            .map(move |(name, reference)| BindingSite {
                connection,
                destination: Destination::Header(name.clone()),
                reference: reference.clone(),
            });
        env.chain(headers)
    }

    /// Whether any reference needs the secrets file.
    pub fn uses_secrets_file(&self) -> bool {
        self.env
            .values()
            .chain(self.headers.values())
            .any(|reference| matches!(reference.source, Source::SecretsFile { .. }))
    }

    /// Checks what can be checked without the connector: destinations, sources and prefixes.
    pub fn check(&self, connection: ConnectionId) -> Result<(), CredentialError> {
        for site in self.sites(connection) {
            match &site.destination {
                Destination::Env(name) => {
                    if is_reserved_env_name(name) {
                        return Err(CredentialError::ReservedDestination {
                            site: Box::new(site),
                        });
                    }
                    if site.reference.prefix.is_some() {
                        return Err(CredentialError::PrefixOnEnv {
                            site: Box::new(site),
                        });
                    }
                }
                Destination::Header(name) => {
                    if !rules::is_valid_header_name(name) {
                        return Err(CredentialError::InvalidHeaderName {
                            connection,
                            name: name.clone(),
                        });
                    }
                    if rules::is_reserved_header(name) {
                        return Err(CredentialError::ReservedDestination {
                            site: Box::new(site),
                        });
                    }
                    if let Some(prefix) = &site.reference.prefix
                        && !rules::is_valid_prefix(prefix)
                    {
                        return Err(CredentialError::InvalidPrefix {
                            site: Box::new(site),
                        });
                    }
                }
            }
            if let Source::Environment { name } = &site.reference.source
                && rules::is_runner_configuration(name)
            {
                return Err(CredentialError::ReservedSource {
                    site: Box::new(site),
                });
            }
        }
        let mut header_names: Vec<&str> = Vec::new();
        for name in self.headers.keys() {
            if header_names
                .iter()
                .any(|seen| seen.eq_ignore_ascii_case(name))
            {
                return Err(CredentialError::DuplicateHeader {
                    connection,
                    name: name.clone(),
                });
            }
            header_names.push(name);
        }
        Ok(())
    }
}

/// Reads and parses the bindings file at `path` ([`crate::owned_file`]): refused when it is a
/// symbolic link, not a regular file, owned by another user, or writable by group or others.
pub(super) fn read(path: &Path) -> Result<BindingsFile, CredentialError> {
    parse(path, &read_text(path)?)
}

/// The text of the bindings file at `path`, opened with the checks [`read`] makes.
pub(super) fn read_text(path: &Path) -> Result<String, CredentialError> {
    let read_error = |source| CredentialError::BindingsRead {
        path: path.to_owned(),
        source,
    };
    let refused = |refusal| match refusal {
        Refusal::Symlink => CredentialError::BindingsSymlink {
            path: path.to_owned(),
        },
        Refusal::NotRegular => CredentialError::BindingsNotRegular {
            path: path.to_owned(),
        },
        Refusal::Foreign { owner, me } => CredentialError::BindingsForeign {
            path: path.to_owned(),
            owner,
            runner: me,
        },
        Refusal::Mode(mode) => CredentialError::BindingsWritable {
            path: path.to_owned(),
            mode,
        },
        Refusal::Io(error) => read_error(error),
    };
    let file = owned_file::open(path, ModeRule::NotWritableByOthers).map_err(refused)?;
    std::io::read_to_string(file).map_err(read_error)
}

/// Parses the text of the bindings file at `path`.
pub(super) fn parse(path: &Path, text: &str) -> Result<BindingsFile, CredentialError> {
    serde_json::from_str(text).map_err(|error| CredentialError::BindingsSyntax {
        path: path.to_owned(),
        line: error.line(),
        column: error.column(),
        message: message_without_position(&error),
    })
}

/// The development secrets file next to the bindings file at `bindings`.
pub(super) fn secrets_path(bindings: &Path) -> Result<PathBuf, CredentialError> {
    let stem = bindings
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(|name| name.strip_suffix(BINDINGS_SUFFIX))
        .filter(|stem| !stem.is_empty())
        .ok_or_else(|| CredentialError::SecretsFileName {
            path: bindings.to_owned(),
        })?;
    Ok(bindings.with_file_name(format!("{stem}{SECRETS_SUFFIX}")))
}

/// serde_json's message without the ` at line L column C` it appends, since the position is
/// reported separately.
fn message_without_position(error: &serde_json::Error) -> String {
    let message = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    match message.strip_suffix(&suffix) {
        Some(message) => message.to_owned(),
        None => message,
    }
}

/// Deserializes a JSON object into a map, refusing a key given twice: with last-one-wins, a
/// second entry would silently replace the first.
pub(super) fn unique_map<'de, D, K, V>(deserializer: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Ord + fmt::Display,
    V: Deserialize<'de>,
{
    struct UniqueMap<K, V>(PhantomData<(K, V)>);

    impl<'de, K, V> Visitor<'de> for UniqueMap<K, V>
    where
        K: Deserialize<'de> + Ord + fmt::Display,
        V: Deserialize<'de>,
    {
        type Value = BTreeMap<K, V>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
            let mut map = BTreeMap::new();
            while let Some(key) = access.next_key::<K>()? {
                if map.contains_key(&key) {
                    return Err(serde::de::Error::custom(format!("`{key}` is given twice")));
                }
                let value = access.next_value()?;
                map.insert(key, value);
            }
            Ok(map)
        }
    }

    deserializer.deserialize_map(UniqueMap(PhantomData))
}
