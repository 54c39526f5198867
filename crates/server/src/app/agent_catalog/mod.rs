//! The tool list an MCP client sees through `/mcp`: which of its principal's tools it gets, under
//! which names, which are listed and which wait behind search, and why every other one is left
//! out. Pure: no I/O, no `App`; the caller gathers routes, tools and settings
//! ([`CatalogInput`]) and [`Catalog::build`] decides. The same [`Catalog`] answers
//! `tools/list` ([`Catalog::listed`]), `tools/call` and `call_tool` ([`Catalog::lookup`]),
//! `tool_search` ([`Catalog::search`]), the provider menu ([`Catalog::providers`],
//! [`Catalog::capabilities`], [`Catalog::mcp_call`]) and `agent tools` ([`Catalog::dropped`]).
//!
//! The rules, in the order a tool meets them (the first that fails is its [`DropReason`]):
//!
//! 1. **The route.** A connection reached through two profiles that disagree loses every tool
//!    (`conflicting_routes`); one that did not answer discovery loses every tool
//!    (`connection_unavailable`).
//! 2. **The tool.** Only a [`ToolState::Classified`] tool (`unclassified`, `unavailable`,
//!    `retired`) the route's profile grants (`not_granted`).
//! 3. **The filter** ([`RouteSettings`], `filter.rs`), each step only removing tools: the
//!    capability keys on the server's *explicit* hints — `read_only` wants `readOnlyHint: true`,
//!    `non_destructive` wants `destructiveHint: false`, `idempotent` wants
//!    `idempotentHint: true`; a tool without the hint does not pass (`not_read_only`,
//!    `destructive`, `not_idempotent`) — then the `include` globs (if any, one must match:
//!    `not_included`), then the `exclude` globs (`excluded`). Globs are `*` and `?` over the
//!    tool's own name, case-sensitive.
//! 4. **The name** (`names.rs`). `namespace__tool`, or the tool's own name where the connection's
//!    `prefix_tools` is off. A name with a character outside `[A-Za-z0-9_.-]` or longer than
//!    [`NAME_BUDGET`] (52, leaving a client room for its own prefix under the 64 MCP clients
//!    accept) is shortened: its head, other characters turned into `_`, then `_` and 8 hex
//!    digits of SHA-256 over the connection id and the tool's own name. Names map back through
//!    the catalog, never by parsing. Two tools that pass the rules above and end with the same
//!    name both lose it (`name_collision`), as does one named like the endpoint's own tools
//!    ([`RESERVED_NAMES`]); a tool that was removed earlier never takes a name from another.
//!
//! What passes is **listed** (`tools/list`) or, when its connection has `defer` or the agent
//! has `defer_all`, **deferred** (reached through `tool_search` and `call_tool`). Both sorted by
//! name, descriptions bounded to [`MAX_DESCRIPTION`] characters: the same input gives the same
//! output, byte for byte, whatever order it came in.
//!
//! Invariants:
//! - **Visibility is the only door**: [`Catalog::lookup`] finds exactly the listed and deferred
//!   tools, [`Catalog::mcp_call`] exactly the tools that pass rules 1–3 (a collision is a matter
//!   of names, which the menu does not use); the menu may *show* a classified tool that does not
//!   pass, with `granted: false`, but never resolves a call to it.
//! - A search only ever sees deferred tools, so it never shows a removed one.

mod build;
mod filter;
mod menu;
mod names;
mod search;
#[cfg(test)]
mod tests;

pub use build::{Catalog, ConnectionSummary, DroppedTool, ExposedTool, ToolRoute};
pub use menu::{
    CapabilitiesPage, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MAX_PROVIDERS, MenuTool, Provider,
    ProviderError, ProviderList,
};
pub use names::{MAX_DESCRIPTION, MAX_NAME, NAME_BUDGET};
pub use search::{
    DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, SearchAnswer, SearchHit, UnavailableConnection,
};

use serde_json::Value;
use switchyard_protocol::api::{ToolHints, ToolState};
use switchyard_protocol::ids::ConnectionId;

/// The endpoint's deferred search tool.
pub const TOOL_SEARCH: &str = "tool_search";
/// The endpoint's tool that calls a deferred tool by name.
pub const CALL_TOOL: &str = "call_tool";
/// The provider menu's list of providers.
pub const MCP_PROVIDERS: &str = "mcp_providers";
/// The provider menu's page of one provider's tools.
pub const MCP_CAPABILITIES: &str = "mcp_capabilities";
/// The provider menu's call of one provider's tool.
pub const MCP_CALL: &str = "mcp_call";
/// Names the endpoint's own tools use: no connection's tool is exposed under one of them.
pub const RESERVED_NAMES: [&str; 5] = [
    TOOL_SEARCH,
    CALL_TOOL,
    MCP_PROVIDERS,
    MCP_CAPABILITIES,
    MCP_CALL,
];

/// Everything the tool list is decided from: one principal's routes.
#[derive(Clone, Debug, Default)]
pub struct CatalogInput {
    /// Each connection the principal reaches, in any order.
    pub connections: Vec<ConnectionInput>,
    /// The agent's `defer_all`: every connection's tools go behind search.
    pub defer_all: bool,
}

/// One connection the principal reaches, with its route's settings and its whole catalog.
#[derive(Clone, Debug)]
pub struct ConnectionInput {
    /// The connection.
    pub id: ConnectionId,
    /// Its namespace slug (`[a-z0-9_]{2,24}`), the prefix of its tools' names.
    pub namespace: String,
    /// Its name, as people call it (the menu matches it case-insensitively).
    pub name: String,
    /// Whether its tools are named `namespace__tool` (else by their own names).
    pub prefix_tools: bool,
    /// Whether its discovery answered; an unavailable connection exposes nothing.
    pub availability: Availability,
    /// Set when the principal reaches it through two profiles that disagree: it exposes
    /// nothing until a person removes the conflict.
    pub conflicting_routes: bool,
    /// The principal's settings for it (defaults for a person).
    pub settings: RouteSettings,
    /// Every tool of its catalog, whatever its state.
    pub tools: Vec<ToolInput>,
}

/// Whether a connection answered its discovery, so that its tools can be offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Availability {
    /// It answered: its tools are known and may be offered.
    Answered,
    /// It did not; the reason is what the client is told.
    Unavailable(UnavailableReason),
}

/// Why a connection is unavailable, as the client is told (the remote's own error text goes to
/// the log only): stored on the connection, so one type from the column to the client.
pub use switchyard_protocol::agents::UnavailableReason;

/// The filter and delivery settings of one principal × connection (a person: the default,
/// which removes nothing and defers nothing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteSettings {
    /// Globs over the tool's own name; when any is given, a tool must match one.
    pub include: Vec<String>,
    /// Globs over the tool's own name; a tool matching one is removed.
    pub exclude: Vec<String>,
    /// Keep only tools whose server says `readOnlyHint: true`.
    pub read_only: bool,
    /// Keep only tools whose server says `destructiveHint: false`.
    pub non_destructive: bool,
    /// Keep only tools whose server says `idempotentHint: true`.
    pub idempotent: bool,
    /// Put this connection's tools behind `tool_search` / `call_tool`.
    pub defer: bool,
}

/// One tool of a connection's catalog, as discovery saw it and governance stands on it.
#[derive(Clone, Debug)]
pub struct ToolInput {
    /// Its own name on the connection.
    pub name: String,
    /// Its title (the annotations' `title`, else the tool's), if any.
    pub title: Option<String>,
    /// Its description, as the server gave it.
    pub description: Option<String>,
    /// The annotations' four hints, `None` where the server gave none.
    pub hints: ToolHints,
    /// JSON schema of its arguments.
    pub input_schema: Value,
    /// JSON schema of its structured result, if the server gave one.
    pub output_schema: Option<Value>,
    /// Where it stands: only a classified tool is offered.
    pub state: ToolState,
    /// Whether the route's profile grants it.
    pub granted: bool,
}

/// Why a tool is not offered: a stable code, shown by `agent tools` and in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// It awaits a person's classification.
    Unclassified,
    /// The latest discovery no longer listed it.
    Unavailable,
    /// Its connection is retired.
    Retired,
    /// The route's profile does not grant it.
    NotGranted,
    /// The filter keeps only read-only tools and its server does not say it is one.
    NotReadOnly,
    /// The filter keeps only non-destructive tools and its server does not say it is one.
    Destructive,
    /// The filter keeps only idempotent tools and its server does not say it is one.
    NotIdempotent,
    /// The filter has include globs and none matches it.
    NotIncluded,
    /// An exclude glob matches it.
    Excluded,
    /// Another offered tool (or one of the endpoint's own) has the same name.
    NameCollision,
    /// The principal reaches its connection through two profiles that disagree.
    ConflictingRoutes,
    /// Its connection did not answer.
    ConnectionUnavailable,
}

impl DropReason {
    /// Every reason, in the order a tool meets them.
    pub const ALL: [DropReason; 12] = [
        DropReason::ConflictingRoutes,
        DropReason::ConnectionUnavailable,
        DropReason::Unclassified,
        DropReason::Unavailable,
        DropReason::Retired,
        DropReason::NotGranted,
        DropReason::NotReadOnly,
        DropReason::Destructive,
        DropReason::NotIdempotent,
        DropReason::NotIncluded,
        DropReason::Excluded,
        DropReason::NameCollision,
    ];

    /// The reason's stable code.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Unclassified => "unclassified",
            DropReason::Unavailable => "unavailable",
            DropReason::Retired => "retired",
            DropReason::NotGranted => "not_granted",
            DropReason::NotReadOnly => "not_read_only",
            DropReason::Destructive => "destructive",
            DropReason::NotIdempotent => "not_idempotent",
            DropReason::NotIncluded => "not_included",
            DropReason::Excluded => "excluded",
            DropReason::NameCollision => "name_collision",
            DropReason::ConflictingRoutes => "conflicting_routes",
            DropReason::ConnectionUnavailable => "connection_unavailable",
        }
    }
}

impl std::fmt::Display for DropReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a call by name (`tools/call`, `call_tool`) or by provider and tool (`mcp_call`) is
/// refused. Its message is safe to show the model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallRefusal {
    /// No tool of the principal's connections has this name.
    #[error("no tool is named `{name}`")]
    UnknownTool {
        /// The name asked for.
        name: String,
    },
    /// The provider could not be resolved to exactly one connection.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The tool exists and is not offered to this principal.
    #[error("tool `{tool}` of `{namespace}` is not available to you ({reason})")]
    Denied {
        /// Its connection's namespace.
        namespace: String,
        /// Its own name.
        tool: String,
        /// Why (never [`DropReason::ConnectionUnavailable`]: an unavailable connection is
        /// [`ProviderError::Unavailable`]).
        reason: DropReason,
    },
}
