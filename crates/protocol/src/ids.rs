//! Newtype identifiers. Every id on the wire is a UUID; the newtype says which kind.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use uuid::Uuid;

macro_rules! id_type {
    ($(#[$doc:meta] $name:ident),* $(,)?) => {$(
        #[$doc]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A fresh, time-ordered id (UUIDv7).
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }
    )*};
}

id_type! {
    /// A user of the installation.
    UserId,
    /// A workspace: the tenant boundary.
    WorkspaceId,
    /// A named environment (e.g. `prod`) inside a workspace.
    EnvironmentId,
    /// An installation-wide connector definition.
    ConnectorId,
    /// A connector placed in a workspace.
    ConnectionId,
    /// An execution profile: which connections and tools may run, in one environment.
    ProfileId,
    /// A call, as the server names it.
    CallId,
    /// The client's idempotency key for a call; unique per workspace.
    RequestId,
    /// A paired device (its runner reference is `device:<id>`).
    DeviceId,
    /// An operation: the immutable scope device calls run under.
    OperationId,
    /// A retained evidence record (a `source_version_id` a resolution cites).
    EvidenceId,
    /// An observation recorded beside an unknown call (a lookup's answer or a late receipt).
    ObservationId,
    /// A personal API token (its id, never its secret).
    TokenId,
}
