//! Credential references: how a runner turns a connection's *bindings* into the secret values a
//! session needs, without any secret value ever being stored outside its provider.
//!
//! A bindings file (`X.mcp-bindings.json`) maps, per connection id, a stdio server's environment
//! variables and an HTTP server's headers to *references*:
//!
//! ```json
//! {
//!   "bindings": {
//!     "0192f0c4-7d4e-7a10-9c1e-3f1a2b3c4d5e": {
//!       "env":     { "API_TOKEN": {"provider": "environment", "name": "MY_TOKEN"} },
//!       "headers": { "Authorization": {"provider": "os_store", "account": "github", "prefix": "Bearer "} }
//!     }
//!   }
//! }
//! ```
//!
//! Providers: `environment` (the runner's own environment), `os_store` (the OS keyring, service
//! [`KEYRING_SERVICE`]), `secrets_file` (the development provider: the sibling
//! `X.mcp-secrets.json`, which must be a 0600 regular file owned by the runner's user) and
//! `installation` (a central connection's value sealed in the server's database, which the
//! server opens and hands to the resolver as [`StoredValues`]; a stored value binds its
//! destination even where the bindings file says nothing).
//!
//! Guarantees:
//! - The bindings file is read again at every resolution, so a changed reference or value takes
//!   effect at the next call.
//! - Anything unsafe or unclear fails closed: a group/other-writable bindings file, a secrets
//!   file with loose permissions, a reserved destination, a missing, locked or malformed value.
//! - Errors and `Debug` output name connections, destinations and references, never a value.
//! - Values set from this machine ([`CredentialResolver::set_value`]) are checked before they
//!   are stored, and go to the OS keyring or the 0600 secrets file, never anywhere else.

mod bindings;
mod error;
mod location;
mod manage;
mod os_keyring;
mod reference;
mod resolver;
mod rules;
mod secrets_file;
mod store;
mod stored;
mod summary;
mod writer;

pub use bindings::ConnectionBinding;
pub use error::{BindingSite, CredentialError, codes};
pub use location::{CREDENTIALS_FILE_VAR, device_bindings_file};
pub use manage::{CredentialStatus, ValueState, ValueStore, ValueTarget, check_stored_value};
pub use os_keyring::OsKeyring;
pub use reference::{Destination, Reference, Source};
pub use resolver::CredentialResolver;
pub use store::{NoKeyring, SecretStore, StoreError};
pub use stored::StoredValues;
pub use summary::{BindingsSummary, BoundName, ConnectionSummary, validate_file};

/// The keyring service every `os_store` reference is looked up under.
pub const KEYRING_SERVICE: &str = "switchyard-mcp";
