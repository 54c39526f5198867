//! Values a host keeps for the resolver itself: the server's central connections' values,
//! sealed in its database and opened for one resolution ([`super::Source::Installation`]).
//!
//! Each stored value binds its destination (with its prefix), over what the bindings file
//! says for the same destination: the value set last through the server is the one used.
//! A value that could not be opened is kept as the reason, so the call fails closed with a
//! credential error that names the destination and not the value. `Debug` names destinations
//! only.

use super::bindings::ConnectionBinding;
use super::reference::{Destination, Reference, Source};
use std::collections::BTreeMap;
use std::fmt;

/// A connection's stored values, by destination.
#[derive(Default)]
pub struct StoredValues {
    env: BTreeMap<String, StoredValue>,
    headers: BTreeMap<String, StoredValue>,
}

/// One stored value: its prefix and the value, or why it could not be opened.
struct StoredValue {
    prefix: Option<String>,
    value: Result<String, String>,
}

impl StoredValues {
    /// Binds `destination` to `value` (or to the reason it cannot be opened), with `prefix`.
    pub fn insert(
        &mut self,
        destination: Destination,
        prefix: Option<String>,
        value: Result<String, String>,
    ) {
        let stored = StoredValue { prefix, value };
        match destination {
            Destination::Env(name) => self.env.insert(name, stored),
            Destination::Header(name) => self.headers.insert(name, stored),
        };
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.env.is_empty() && self.headers.is_empty()
    }

    /// The value stored for `destination`: `None` when nothing is, else the value or why it
    /// cannot be opened.
    pub(super) fn get(&self, destination: &Destination) -> Option<Result<&str, &str>> {
        let stored = match destination {
            Destination::Env(name) => self.env.get(name),
            Destination::Header(name) => self.headers.get(name),
        }?;
        Some(stored.value.as_deref().map_err(String::as_str))
    }

    /// `binding` with every stored destination bound to its stored value.
    pub(super) fn overlay(&self, binding: &mut ConnectionBinding) {
        let reference = |stored: &StoredValue| Reference {
            source: Source::Installation,
            prefix: stored.prefix.clone(),
        };
        for (name, stored) in &self.env {
            binding.env.insert(name.clone(), reference(stored));
        }
        for (name, stored) in &self.headers {
            binding.headers.insert(name.clone(), reference(stored));
        }
    }
}

impl fmt::Debug for StoredValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredValues")
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}
