//! Agents as principals: what creates, shows and configures one, and the tool list an agent
//! sees through `/mcp`. An agent belongs to one workspace, holds Use on profiles as a person
//! does, and has settings per connection (a filter, deferral, an approval policy, and what
//! to do when the connection fails). Re-exported from [`crate::api`].

use crate::approval::ApprovalPolicy;
use crate::ids::{ConnectionId, ProfileId, UserId, WorkspaceId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A text enum's wire and database names, `Display` and `FromStr`.
macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire and database name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|value| value.as_str() == s)
                    .ok_or_else(|| UnknownValue {
                        what: $what,
                        value: s.to_owned(),
                        expected: Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", "),
                    })
            }
        }
    };
}

pub(crate) use named_enum;

/// A name that is none of an enum's values.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{value}`; expected one of: {expected}")]
pub struct UnknownValue {
    pub(crate) what: &'static str,
    pub(crate) value: String,
    pub(crate) expected: String,
}

named_enum!(
    /// What kind of principal a user row is.
    PrincipalKind, "principal kind" {
        /// A person, with personal API tokens.
        #[default]
        Person = "person",
        /// An agent: its token is accepted on `/mcp` only.
        Agent = "agent",
    }
);

named_enum!(
    /// How an agent sees tools.
    AgentMode, "agent mode" {
        /// The granted tools themselves (a deferred connection's behind `tool_search`).
        #[default]
        Tools = "tools",
        /// Three stable tools: `mcp_providers`, `mcp_capabilities`, `mcp_call`.
        Menu = "menu",
    }
);

named_enum!(
    /// What a call on a connection whose credential was refused gets.
    AuthFailure, "auth_failure" {
        /// A tool error saying the connection needs authorizing.
        #[default]
        Stop = "stop",
        /// The connection's tools are left out and it is announced unavailable.
        Degrade = "degrade",
    }
);

named_enum!(
    /// Whether a failed tool listing is reported to the agent.
    ToolSyncFailure, "tool_sync_failure" {
        /// Announced as unavailable.
        #[default]
        Warn = "warn",
        /// Only logged.
        Silent = "silent",
    }
);

named_enum!(
    /// Whether the connection is announced in the endpoint's instructions.
    Announce, "announce" {
        /// Announced while it answers.
        #[default]
        Auto = "auto",
        /// Never announced.
        Never = "never",
    }
);

named_enum!(
    /// Why a connection's tools are not offered on `/mcp`, as its clients are told: what its
    /// latest discovery — or a call refused for its credential — recorded on the connection
    /// (`connections.unavailable`).
    UnavailableReason, "unavailable reason" {
        /// It could not be reached, or did not answer its discovery.
        #[default]
        Unreachable = "unreachable",
        /// Its credential was refused by its server, or could not be resolved.
        NeedsAuthorization = "needs_authorization",
    }
);

/// `POST /api/v1/workspaces/{ws}/agents`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateAgent {
    /// The agent's name, unique in the workspace.
    pub name: String,
    /// How it sees tools; `tools` when omitted.
    #[serde(default)]
    pub mode: AgentMode,
    /// Every connection's tools through search.
    #[serde(default)]
    pub defer_all: bool,
    /// Created by a declarative file (`switchyard apply`), which may revoke it when its
    /// section is removed; `false` when omitted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub declared: bool,
}

/// `PATCH /api/v1/workspaces/{ws}/agents/{agent}`: what is given changes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditAgent {
    /// How it sees tools.
    #[serde(default)]
    pub mode: Option<AgentMode>,
    /// Every connection's tools through search.
    #[serde(default)]
    pub defer_all: Option<bool>,
    /// Whether a declarative file owns it (`switchyard apply` adopts an agent by setting it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<bool>,
}

/// A new agent and its token, shown once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentCreated {
    /// The agent.
    pub agent: AgentView,
    /// Its token (`sy_…`), for `/mcp` only; never shown again.
    pub token: String,
}

/// An agent, as its workspace's members see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentView {
    /// The agent's principal id (the submitter of its calls).
    pub id: UserId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// Its name in the workspace.
    pub name: String,
    /// How it sees tools.
    pub mode: AgentMode,
    /// Every connection's tools through search.
    pub defer_all: bool,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was revoked: its token no longer works.
    pub revoked_at: Option<DateTime<Utc>>,
    /// Whether a declarative file created or adopted it (`switchyard apply`).
    #[serde(default)]
    pub declared: bool,
}

/// An agent with its grants and per-connection settings (`agent show`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentDetail {
    /// The agent.
    pub agent: AgentView,
    /// Profiles it holds Use on.
    pub profiles: Vec<AgentProfileView>,
    /// Connections with settings of their own; the others have the defaults.
    pub connections: Vec<AgentConnectionView>,
}

/// A profile an agent holds Use on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentProfileView {
    /// The profile.
    pub id: ProfileId,
    /// Its name.
    pub name: String,
}

/// One connection's settings for an agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentConnectionView {
    /// The connection.
    pub connection_id: ConnectionId,
    /// Its name.
    pub connection_name: String,
    /// The settings.
    #[serde(flatten)]
    pub settings: AgentConnectionSettings,
}

/// Per agent × connection settings (`PUT …/agents/{agent}/connections/{connection}` replaces
/// them whole). Every filter can only remove tools: the capability keys apply first, then
/// `include`, then `exclude`; a tool without the annotation a key reads does not pass it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentConnectionSettings {
    /// Globs (`*`, `?`) over the tool's name on the connection; when any, a tool must match one.
    #[serde(default)]
    pub include: Vec<String>,
    /// Globs over the tool's name; a match removes the tool.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Only tools annotated `readOnlyHint: true`.
    #[serde(default)]
    pub read_only: bool,
    /// Only tools annotated `destructiveHint: false`.
    #[serde(default)]
    pub non_destructive: bool,
    /// Only tools annotated `idempotentHint: true`.
    #[serde(default)]
    pub idempotent: bool,
    /// The connection's tools reach the model through `tool_search`.
    #[serde(default)]
    pub defer: bool,
    /// The approval policy for this agent's calls on the connection, applied beside the
    /// profile's (a call needs a person when either asks, and is refused when either says
    /// `never` to a call that needs one).
    #[serde(default)]
    pub approve: Option<ApprovalPolicy>,
    /// A refused credential: a tool error, or the connection left out.
    #[serde(default)]
    pub auth_failure: AuthFailure,
    /// A failed tool listing: announced, or only logged.
    #[serde(default)]
    pub tool_sync_failure: ToolSyncFailure,
    /// Whether the connection is announced in the instructions.
    #[serde(default)]
    pub announce: Announce,
}

/// The tool list an agent sees, with every tool it does not see and why (`agent tools`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentToolsView {
    /// How the agent sees tools.
    pub mode: AgentMode,
    /// The tools it sees, in the order `tools/list` gives them.
    pub tools: Vec<AgentToolView>,
    /// Tools it reaches only through `tool_search`.
    pub deferred: Vec<AgentToolView>,
    /// Tools of its connections it does not see.
    pub dropped: Vec<DroppedToolView>,
    /// Connections it can use that did not answer.
    pub unavailable: Vec<UnavailableConnectionView>,
}

/// One tool as an agent sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentToolView {
    /// The name the model calls.
    pub name: String,
    /// The connection's namespace.
    pub connection: String,
    /// The tool's own name on the connection.
    pub tool: String,
}

/// A tool an agent does not see.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DroppedToolView {
    /// The connection's namespace.
    pub connection: String,
    /// The tool's own name.
    pub tool: String,
    /// A stable reason code (`unclassified`, `not_read_only`, `excluded`, `name_collision`, …).
    pub reason: String,
}

/// A connection an agent could use that is not available now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnavailableConnectionView {
    /// The connection's namespace.
    pub connection: String,
    /// `unreachable`, `needs_authorization` or `conflicting_routes`.
    pub reason: String,
}
