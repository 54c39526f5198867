//! The provider menu (agents in `menu` mode): `mcp_providers`, `mcp_capabilities`, `mcp_call`.
//!
//! A provider is a connection that answered. Its page shows every *classified* tool, offered
//! or not: visibility is not permission, so a tool the route does not grant or the filter
//! removes appears with `granted: false` and its reason, and the agent can say why it cannot
//! do something. `mcp_call` resolves exactly the tools that pass rules 1–3 of the module doc —
//! the same allow/deny answer [`Catalog::lookup`] gives by name (names do not matter here,
//! so a name collision refuses nothing).

use super::build::{Catalog, ConnectionSummary, ExposedTool, ToolRoute};
use super::{Availability, CallRefusal, DropReason, UnavailableReason};
use serde_json::Value;
use switchyard_protocol::api::{ToolHints, ToolState};
use switchyard_protocol::ids::ConnectionId;

/// Most providers `mcp_providers` lists.
pub const MAX_PROVIDERS: usize = 50;
/// Tools on a page of `mcp_capabilities` when the client gives no size.
pub const DEFAULT_PAGE_SIZE: usize = 12;
/// Most tools on a page of `mcp_capabilities`, whatever the client asks.
pub const MAX_PAGE_SIZE: usize = 20;

/// What `mcp_providers` answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderList {
    /// The first [`MAX_PROVIDERS`] providers, by namespace.
    pub providers: Vec<Provider>,
    /// How many providers there are in all.
    pub total: usize,
}

/// A connection that answered, as the menu shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provider {
    /// The connection (accepted by `mcp_capabilities` and `mcp_call`).
    pub id: ConnectionId,
    /// Its namespace (accepted too).
    pub namespace: String,
    /// Its name (accepted too, case-insensitively).
    pub name: String,
    /// How many classified tools its page shows.
    pub tools: usize,
    /// How many of them the principal may call.
    pub granted: usize,
}

/// A page of `mcp_capabilities`.
#[derive(Clone, Debug, PartialEq)]
pub struct CapabilitiesPage<'a> {
    /// The provider.
    pub provider: Provider,
    /// This page's number, from 1.
    pub page: usize,
    /// Tools per page.
    pub page_size: usize,
    /// The next page's number, if there are more tools.
    pub next_page: Option<usize>,
    /// This page's tools, by name.
    pub tools: Vec<MenuTool<'a>>,
}

/// One tool on a provider's page.
#[derive(Clone, Debug, PartialEq)]
pub struct MenuTool<'a> {
    /// Its own name: what `mcp_call` takes.
    pub name: &'a str,
    /// Its title, if any.
    pub title: Option<&'a str>,
    /// Its bounded description.
    pub description: Option<&'a str>,
    /// The server's hints.
    pub hints: ToolHints,
    /// JSON schema of its arguments.
    pub input_schema: &'a Value,
    /// JSON schema of its structured result, if any.
    pub output_schema: Option<&'a Value>,
    /// Whether the principal may call it.
    pub granted: bool,
    /// Why not, when it may not.
    pub reason: Option<DropReason>,
}

/// Why a provider named by a client is not one the menu can show.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// No connection has this id, name or namespace.
    #[error("no MCP server is called `{provider}`; mcp_providers lists them")]
    NotFound {
        /// What the client asked for.
        provider: String,
    },
    /// Several connections have this name or namespace.
    #[error("`{provider}` names several MCP servers ({}); give one's id or namespace", matches.join(", "))]
    Ambiguous {
        /// What the client asked for.
        provider: String,
        /// The namespaces of the connections it names.
        matches: Vec<String>,
    },
    /// The connection did not answer.
    #[error("the MCP server `{namespace}` is unavailable ({reason})")]
    Unavailable {
        /// Its namespace.
        namespace: String,
        /// Why.
        reason: UnavailableReason,
    },
}

impl Catalog {
    /// `mcp_providers`: the connections that answered, by namespace, at most
    /// [`MAX_PROVIDERS`].
    pub fn providers(&self) -> ProviderList {
        let answered: Vec<&ConnectionSummary> = self
            .connections()
            .iter()
            .filter(|c| c.availability == Availability::Answered)
            .collect();
        ProviderList {
            total: answered.len(),
            providers: answered
                .into_iter()
                .take(MAX_PROVIDERS)
                .map(|c| self.provider(c))
                .collect(),
        }
    }

    /// `mcp_capabilities`: page `page` (from 1; `None` or 0 is 1) of one provider's classified
    /// tools, `page_size` per page ([`DEFAULT_PAGE_SIZE`] when `None`, clamped to
    /// 1..=[`MAX_PAGE_SIZE`]). The provider is named by id, or by name or namespace in any case.
    pub fn capabilities(
        &self,
        provider: &str,
        page: Option<usize>,
        page_size: Option<usize>,
    ) -> Result<CapabilitiesPage<'_>, ProviderError> {
        let connection = self.resolve_provider(provider)?;
        let page = page.unwrap_or(1).max(1);
        let page_size = page_size
            .unwrap_or(DEFAULT_PAGE_SIZE)
            .clamp(1, MAX_PAGE_SIZE);
        let shown: Vec<&ExposedTool> = shown(self.tools_of(connection)).collect();
        let start = (page - 1).saturating_mul(page_size);
        let end = start.saturating_add(page_size);
        Ok(CapabilitiesPage {
            provider: self.provider(connection),
            page,
            page_size,
            next_page: (end < shown.len()).then_some(page + 1),
            tools: shown
                .iter()
                .skip(start)
                .take(page_size)
                .map(|tool| menu_tool(tool))
                .collect(),
        })
    }

    /// `mcp_call`: the route of `tool` (its own name, exactly) on `provider` (as
    /// [`Catalog::capabilities`] takes it), only when the principal may call it.
    pub fn mcp_call(&self, provider: &str, tool: &str) -> Result<ToolRoute, CallRefusal> {
        let connection = self.resolve_provider(provider)?;
        let Some(found) = self.tools_of(connection).iter().find(|t| t.tool == tool) else {
            return Err(CallRefusal::UnknownTool {
                name: tool.to_owned(),
            });
        };
        match found.access {
            Ok(()) => Ok(found.route()),
            Err(_) => Err(self.refusal(found)),
        }
    }

    /// The one connection a client's `provider` names, if it answered.
    fn resolve_provider(&self, provider: &str) -> Result<&ConnectionSummary, ProviderError> {
        let wanted = provider.trim();
        let by_id = wanted.parse::<ConnectionId>().ok();
        let lowered = wanted.to_lowercase();
        let matches: Vec<&ConnectionSummary> = self
            .connections()
            .iter()
            .filter(|c| {
                Some(c.id) == by_id
                    || c.namespace.to_lowercase() == lowered
                    || c.name.to_lowercase() == lowered
            })
            .collect();
        let connection = match matches.as_slice() {
            [] => {
                return Err(ProviderError::NotFound {
                    provider: provider.to_owned(),
                });
            }
            [one] => *one,
            several => {
                return Err(ProviderError::Ambiguous {
                    provider: provider.to_owned(),
                    matches: several.iter().map(|c| c.namespace.clone()).collect(),
                });
            }
        };
        match connection.availability {
            Availability::Answered => Ok(connection),
            Availability::Unavailable(reason) => Err(ProviderError::Unavailable {
                namespace: connection.namespace.clone(),
                reason,
            }),
        }
    }

    /// A connection as the menu shows it.
    fn provider(&self, connection: &ConnectionSummary) -> Provider {
        let tools = self.tools_of(connection);
        Provider {
            id: connection.id,
            namespace: connection.namespace.clone(),
            name: connection.name.clone(),
            tools: shown(tools).count(),
            granted: shown(tools).filter(|t| t.access.is_ok()).count(),
        }
    }
}

/// The tools a provider's page shows: the classified ones, by own name.
fn shown(tools: &[ExposedTool]) -> impl Iterator<Item = &ExposedTool> + '_ {
    tools.iter().filter(|t| t.state == ToolState::Classified)
}

/// A tool as a provider's page shows it.
fn menu_tool(tool: &ExposedTool) -> MenuTool<'_> {
    MenuTool {
        name: &tool.tool,
        title: tool.title.as_deref(),
        description: tool.description.as_deref(),
        hints: tool.hints,
        input_schema: &tool.input_schema,
        output_schema: tool.output_schema.as_ref(),
        granted: tool.access.is_ok(),
        reason: tool.access.err(),
    }
}
