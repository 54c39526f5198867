//! [`Catalog::build`]: every tool of every route judged once, named, and sorted into listed,
//! deferred and dropped; and [`Catalog::lookup`], the way back from a name to a tool.

use super::names::{bound_description, exposed_name};
use super::{
    Availability, CallRefusal, CatalogInput, ConnectionInput, DropReason, ProviderError,
    RESERVED_NAMES, ToolInput, filter,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::ops::Range;
use switchyard_protocol::api::{ToolHints, ToolState};
use switchyard_protocol::ids::ConnectionId;

/// One principal's tool list, decided (see the module doc for the rules).
#[derive(Clone, Debug)]
pub struct Catalog {
    /// Every connection, by namespace then id.
    connections: Vec<ConnectionSummary>,
    /// Every tool of every connection, grouped by connection (in `connections` order) and by
    /// own name within one; each connection's [`ConnectionSummary::tools`] is its range here.
    tools: Vec<ExposedTool>,
    /// Indexes of the listed tools in `tools`, by exposed name.
    listed: Vec<usize>,
    /// Indexes of the deferred tools in `tools`, by exposed name.
    deferred: Vec<usize>,
    /// Every tool not offered, in `tools` order.
    dropped: Vec<DroppedTool>,
    /// Exposed name → every tool (offered or not) that has or would have it.
    by_name: BTreeMap<String, Vec<usize>>,
}

/// One connection of the catalog, for announcements and the menu.
#[derive(Clone, Debug)]
pub struct ConnectionSummary {
    /// The connection.
    pub id: ConnectionId,
    /// Its namespace slug.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Whether it answered.
    pub availability: Availability,
    /// Whether two routes to it disagree (then it offers nothing).
    pub conflicting_routes: bool,
    /// Whether its tools are deferred (its `defer` or the agent's `defer_all`).
    pub deferred: bool,
    /// How many of its tools are offered (listed or deferred).
    pub offered: usize,
    /// Its tools' range in [`Catalog::tools`].
    pub(super) tools: Range<usize>,
}

impl ConnectionSummary {
    /// Whether the principal can use it: it answered and its route is not in conflict.
    pub fn usable(&self) -> bool {
        self.availability == Availability::Answered && !self.conflicting_routes
    }
}

/// A tool of the catalog as a client would see it: its name, bounded description and schemas.
/// Only those [`Catalog::listed`] and [`Catalog::deferred`] yield are offered.
#[derive(Clone, Debug)]
pub struct ExposedTool {
    /// The name the client calls it by (module doc, rule 4).
    pub name: String,
    /// Its connection.
    pub connection_id: ConnectionId,
    /// Its connection's namespace.
    pub namespace: String,
    /// Its own name on the connection (what the MCP server is called with).
    pub tool: String,
    /// Its title, if any.
    pub title: Option<String>,
    /// Its description, bounded to [`super::MAX_DESCRIPTION`] characters.
    pub description: Option<String>,
    /// The server's four hints.
    pub hints: ToolHints,
    /// JSON schema of its arguments.
    pub input_schema: Value,
    /// JSON schema of its structured result, if any.
    pub output_schema: Option<Value>,
    /// Whether it is reached through `tool_search` / `call_tool` rather than listed.
    pub deferred: bool,
    /// Its connection's index in [`Catalog::connections`].
    connection: usize,
    /// Where it stands (the menu shows only classified tools).
    pub(super) state: ToolState,
    /// Rules 1–3: `Ok` when the principal may call it, whatever its name.
    pub(super) access: Result<(), DropReason>,
    /// Rule 4: another offered tool (or a reserved name) has its name.
    pub(super) collided: bool,
}

impl ExposedTool {
    /// Why it is not offered, or `None` when it is.
    pub(super) fn drop_reason(&self) -> Option<DropReason> {
        match self.access {
            Err(reason) => Some(reason),
            Ok(()) if self.collided => Some(DropReason::NameCollision),
            Ok(()) => None,
        }
    }

    /// The route of a call to it.
    pub(super) fn route(&self) -> ToolRoute {
        ToolRoute {
            connection_id: self.connection_id,
            namespace: self.namespace.clone(),
            tool: self.tool.clone(),
            deferred: self.deferred,
        }
    }
}

/// A tool not offered, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedTool {
    /// Its connection.
    pub connection_id: ConnectionId,
    /// Its connection's namespace.
    pub namespace: String,
    /// Its own name.
    pub tool: String,
    /// The first rule it failed.
    pub reason: DropReason,
}

/// Where a call goes: what a permitted lookup or `mcp_call` resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolRoute {
    /// The connection to call.
    pub connection_id: ConnectionId,
    /// Its namespace.
    pub namespace: String,
    /// The tool's own name on it.
    pub tool: String,
    /// Whether the tool is deferred (reached through `call_tool`).
    pub deferred: bool,
}

impl Catalog {
    /// Decides a principal's tool list from its routes (module doc). Deterministic: the order
    /// of `input`'s connections and tools does not matter.
    pub fn build(input: CatalogInput) -> Catalog {
        let CatalogInput {
            mut connections,
            defer_all,
        } = input;
        connections.sort_by(|a, b| (&a.namespace, a.id).cmp(&(&b.namespace, b.id)));

        let mut summaries = Vec::with_capacity(connections.len());
        let mut tools = Vec::new();
        for connection in connections {
            let ConnectionInput {
                id,
                namespace,
                name,
                prefix_tools,
                availability,
                conflicting_routes,
                settings,
                tools: mut inputs,
            } = connection;
            let deferred = settings.defer || defer_all;
            inputs.sort_by(|a, b| a.name.cmp(&b.name));
            let start = tools.len();
            for input in inputs {
                let access = if conflicting_routes {
                    Err(DropReason::ConflictingRoutes)
                } else if availability != Availability::Answered {
                    Err(DropReason::ConnectionUnavailable)
                } else {
                    tool_access(&settings, &input)
                };
                let ToolInput {
                    name: tool,
                    title,
                    description,
                    hints,
                    input_schema,
                    output_schema,
                    state,
                    granted: _,
                } = input;
                tools.push(ExposedTool {
                    name: exposed_name(&namespace, prefix_tools, id, &tool),
                    connection_id: id,
                    namespace: namespace.clone(),
                    tool,
                    connection: summaries.len(),
                    title,
                    description: description.as_deref().map(bound_description),
                    hints,
                    input_schema,
                    output_schema,
                    deferred,
                    state,
                    access,
                    collided: false,
                });
            }
            summaries.push(ConnectionSummary {
                id,
                namespace,
                name,
                availability,
                conflicting_routes,
                deferred,
                offered: 0,
                tools: start..tools.len(),
            });
        }

        let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (index, tool) in tools.iter().enumerate() {
            by_name.entry(tool.name.clone()).or_default().push(index);
        }
        // Only tools that passed rules 1–3 claim a name: a removed tool never takes one away.
        for indexes in by_name.values() {
            let claimants: Vec<usize> = indexes
                .iter()
                .copied()
                .filter(|&i| tools[i].access.is_ok())
                .collect();
            let reserved = claimants
                .first()
                .is_some_and(|&i| RESERVED_NAMES.contains(&tools[i].name.as_str()));
            if claimants.len() > 1 || reserved {
                for i in claimants {
                    tools[i].collided = true;
                }
            }
        }

        let mut listed = Vec::new();
        let mut deferred = Vec::new();
        let mut dropped = Vec::new();
        for (index, tool) in tools.iter().enumerate() {
            match tool.drop_reason() {
                Some(reason) => dropped.push(DroppedTool {
                    connection_id: tool.connection_id,
                    namespace: tool.namespace.clone(),
                    tool: tool.tool.clone(),
                    reason,
                }),
                None if tool.deferred => deferred.push(index),
                None => listed.push(index),
            }
        }
        // Offered names are unique, so sorting by name alone is a total order.
        listed.sort_by(|&a, &b| tools[a].name.cmp(&tools[b].name));
        deferred.sort_by(|&a, &b| tools[a].name.cmp(&tools[b].name));
        for summary in &mut summaries {
            summary.offered = tools[summary.tools.clone()]
                .iter()
                .filter(|tool| tool.drop_reason().is_none())
                .count();
        }

        Catalog {
            connections: summaries,
            tools,
            listed,
            deferred,
            dropped,
            by_name,
        }
    }

    /// The tools `tools/list` shows, by name.
    pub fn listed(&self) -> impl ExactSizeIterator<Item = &ExposedTool> + '_ {
        self.listed.iter().map(|&i| &self.tools[i])
    }

    /// The tools behind `tool_search` / `call_tool`, by name.
    pub fn deferred(&self) -> impl ExactSizeIterator<Item = &ExposedTool> + '_ {
        self.deferred.iter().map(|&i| &self.tools[i])
    }

    /// Whether the endpoint offers `tool_search` and `call_tool`: some connection is deferred,
    /// even one that offers nothing now (a search then says it is unavailable).
    pub fn offers_search(&self) -> bool {
        self.connections.iter().any(|c| c.deferred)
    }

    /// Every tool not offered and why, by namespace then tool name.
    pub fn dropped(&self) -> &[DroppedTool] {
        &self.dropped
    }

    /// Every connection, by namespace, with how many tools it offers.
    pub fn connections(&self) -> &[ConnectionSummary] {
        &self.connections
    }

    /// The tools of one connection (offered or not), by own name.
    pub(super) fn tools_of(&self, connection: &ConnectionSummary) -> &[ExposedTool] {
        &self.tools[connection.tools.clone()]
    }

    /// The tool a client calls by `name` (`tools/call`, or `call_tool` for a deferred one): the
    /// same answer on both paths, and only for an offered tool. A name that was never offered
    /// is refused with what removed the tool that would have had it.
    pub fn lookup(&self, name: &str) -> Result<ToolRoute, CallRefusal> {
        let Some(indexes) = self.by_name.get(name) else {
            return Err(CallRefusal::UnknownTool {
                name: name.to_owned(),
            });
        };
        let candidates = || indexes.iter().map(|&i| &self.tools[i]);
        if let Some(offered) = candidates().find(|tool| tool.drop_reason().is_none()) {
            return Ok(offered.route());
        }
        match candidates().next() {
            Some(tool) => Err(self.refusal(tool)),
            None => Err(CallRefusal::UnknownTool {
                name: name.to_owned(),
            }),
        }
    }

    /// The refusal of a call to a tool that is not offered; `Ok`-access tools are refused for
    /// their name only (which the caller decides is a refusal).
    pub(super) fn refusal(&self, tool: &ExposedTool) -> CallRefusal {
        let reason = tool.drop_reason().unwrap_or(DropReason::NameCollision);
        let availability = self.connections[tool.connection].availability;
        if let (DropReason::ConnectionUnavailable, Availability::Unavailable(why)) =
            (reason, availability)
        {
            return CallRefusal::Provider(ProviderError::Unavailable {
                namespace: tool.namespace.clone(),
                reason: why,
            });
        }
        CallRefusal::Denied {
            namespace: tool.namespace.clone(),
            tool: tool.tool.clone(),
            reason,
        }
    }
}

/// Rules 2 and 3 for one tool of a connection that answered on a single route.
fn tool_access(settings: &super::RouteSettings, tool: &ToolInput) -> Result<(), DropReason> {
    match tool.state {
        ToolState::Classified => {}
        ToolState::Unclassified => return Err(DropReason::Unclassified),
        ToolState::Unavailable => return Err(DropReason::Unavailable),
        ToolState::Retired => return Err(DropReason::Retired),
    }
    if !tool.granted {
        return Err(DropReason::NotGranted);
    }
    filter::check(settings, &tool.name, &tool.hints)
}
