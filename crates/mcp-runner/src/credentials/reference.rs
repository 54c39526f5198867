//! What a binding points at (a [`Reference`]) and where the value goes (a [`Destination`]).
//!
//! A reference is parsed from its flat JSON form (`{"provider": "...", <field>, "prefix"?}`),
//! with unknown and misplaced fields refused, so that a typo such as `"prefx"` is an error
//! instead of a silently ignored setting.

use super::KEYRING_SERVICE;
use serde::Deserialize;
use std::fmt;

/// Where a resolved value is delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// An environment variable of a stdio server.
    Env(String),
    /// A request header of an HTTP server.
    Header(String),
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::Env(name) => write!(f, "environment variable `{name}`"),
            Destination::Header(name) => write!(f, "header `{name}`"),
        }
    }
}

/// Which provider holds a value, and under which name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A variable of the runner process's environment.
    Environment {
        /// The variable's name.
        name: String,
    },
    /// An entry of the OS keyring, under service [`KEYRING_SERVICE`].
    OsStore {
        /// The entry's account.
        account: String,
    },
    /// A key of the development secrets file next to the bindings file.
    SecretsFile {
        /// The key.
        key: String,
    },
    /// The value the server keeps for this destination, sealed with its installation key
    /// (central connections only; supplied to the resolver as [`super::StoredValues`]).
    Installation,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Environment { name } => write!(f, "runner environment variable `{name}`"),
            Source::OsStore { account } => {
                write!(
                    f,
                    "OS keyring entry `{account}` (service `{KEYRING_SERVICE}`)"
                )
            }
            Source::SecretsFile { key } => write!(f, "secrets file key `{key}`"),
            Source::Installation => f.write_str("the server's sealed value"),
        }
    }
}

/// A reference to a secret value: its source and an optional prefix (headers only, e.g.
/// `Bearer `) put in front of the value.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawReference")]
pub struct Reference {
    /// Where the value lives.
    pub source: Source,
    /// Text prepended to the value (not secret; headers only).
    pub prefix: Option<String>,
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.source.fmt(f)?;
        if let Some(prefix) = &self.prefix {
            write!(f, " with prefix {prefix:?}")?;
        }
        Ok(())
    }
}

/// The provider names of the file format.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Provider {
    Environment,
    OsStore,
    SecretsFile,
    Installation,
}

/// A reference as written in the file, before its fields are checked against its provider.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReference {
    provider: Provider,
    name: Option<String>,
    account: Option<String>,
    key: Option<String>,
    prefix: Option<String>,
}

impl TryFrom<RawReference> for Reference {
    type Error = String;

    fn try_from(raw: RawReference) -> Result<Self, String> {
        let RawReference {
            provider,
            name,
            account,
            key,
            prefix,
        } = raw;
        let (provider_name, field, value, misplaced) = match provider {
            Provider::Environment => (
                "environment",
                "name",
                name,
                [("account", account), ("key", key)],
            ),
            Provider::OsStore => (
                "os_store",
                "account",
                account,
                [("name", name), ("key", key)],
            ),
            Provider::SecretsFile => (
                "secrets_file",
                "key",
                key,
                [("name", name), ("account", account)],
            ),
            Provider::Installation => {
                return installation_reference(
                    [("name", name), ("account", account), ("key", key)],
                    prefix,
                );
            }
        };
        if let Some((other, _)) = misplaced.iter().find(|(_, value)| value.is_some()) {
            return Err(format!(
                "provider `{provider_name}` takes `{field}`, not `{other}`"
            ));
        }
        let value = match value {
            Some(value) if !value.is_empty() => value,
            _ => {
                return Err(format!(
                    "provider `{provider_name}` needs a non-empty `{field}`"
                ));
            }
        };
        let source = match provider {
            Provider::Environment => Source::Environment { name: value },
            Provider::OsStore => Source::OsStore { account: value },
            Provider::SecretsFile => Source::SecretsFile { key: value },
            Provider::Installation => Source::Installation,
        };
        Ok(Reference { source, prefix })
    }
}

/// An `installation` reference: it names nothing, since the server keeps one value per
/// destination.
fn installation_reference(
    fields: [(&str, Option<String>); 3],
    prefix: Option<String>,
) -> Result<Reference, String> {
    if let Some((other, _)) = fields.iter().find(|(_, value)| value.is_some()) {
        return Err(format!(
            "provider `installation` takes no `{other}`: the server keeps one value per destination"
        ));
    }
    Ok(Reference {
        source: Source::Installation,
        prefix,
    })
}
