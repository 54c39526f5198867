//! The startup check of a bindings file: everything that can be checked without a call, and a
//! report of what is bound, by name only.

use super::bindings::{self, ConnectionBinding};
use super::error::CredentialError;
use super::reference::{Destination, Reference};
use super::secrets_file;
use std::fmt;
use std::path::{Path, PathBuf};
use switchyard_protocol::ids::ConnectionId;

/// What a bindings file binds. Holds names and references, never values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingsSummary {
    /// The file checked.
    pub path: PathBuf,
    /// One entry per bound connection, ordered by connection id.
    pub connections: Vec<ConnectionSummary>,
}

/// What is bound for one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionSummary {
    /// The connection.
    pub connection: ConnectionId,
    /// Bound destinations (environment variables, then headers), ordered by name.
    pub bound: Vec<BoundName>,
}

/// One bound destination and the reference it is bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundName {
    /// Where the value goes.
    pub destination: Destination,
    /// Where it comes from.
    pub reference: Reference,
}

impl fmt::Display for BindingsSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "credential bindings file `{}`:", self.path.display())?;
        if self.connections.is_empty() {
            return write!(f, " no bindings");
        }
        for connection in &self.connections {
            for bound in &connection.bound {
                write!(
                    f,
                    "\n  connection {}: {} <- {}",
                    connection.connection, bound.destination, bound.reference
                )?;
            }
        }
        Ok(())
    }
}

/// Checks the bindings file at `path` as a runner would at startup: the file itself (safe
/// permissions, valid shape), every binding's destinations, sources and prefixes, and the
/// secrets file's safety when a binding uses it. Values are not looked up: they may be set
/// later, and each call checks its own.
pub fn validate_file(path: &Path) -> Result<BindingsSummary, CredentialError> {
    let file = bindings::read(path)?;
    for (connection, binding) in &file.bindings {
        binding.check(*connection)?;
    }
    if file
        .bindings
        .values()
        .any(ConnectionBinding::uses_secrets_file)
    {
        secrets_file::load(&bindings::secrets_path(path)?)?;
    }
    let connections = file
        .bindings
        .iter()
        .map(|(connection, binding)| ConnectionSummary {
            connection: *connection,
            bound: binding
                .sites(*connection)
                .map(|site| BoundName {
                    destination: site.destination,
                    reference: site.reference,
                })
                .collect(),
        })
        .collect();
    Ok(BindingsSummary {
        path: path.to_owned(),
        connections,
    })
}
