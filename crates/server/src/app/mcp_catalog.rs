//! What an `/mcp` principal sees: its routes (each connection it may use, through one
//! profile), the tools listed to its client and one notice per connection.
//!
//! The gathering reads the principal's routes and their cached catalogs; persons get the
//! default settings (every granted, classified, available tool; names `namespace__tool`).
//! Part B's pure builder (`app/agent_catalog/`) takes over the exposure rules (filters,
//! shortening, deferred search, the menu) once it lands, and agents' settings with it.

use super::App;
use crate::db::{McpRouteRow, ToolRow};
use crate::error::AppResult;
use std::collections::{BTreeMap, HashMap};
use switchyard_protocol::{ConnectionId, ProfileId, WorkspaceId};

/// The separator between a connection's namespace and a tool's own name.
const NAME_SEPARATOR: &str = "__";
/// The longest exposed name a client is given (MCP clients allow 64; room is left for their
/// own prefix).
const MAX_EXPOSED_NAME: usize = 52;

/// Where a listed tool's calls go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpRoute {
    /// The workspace.
    pub workspace_id: WorkspaceId,
    /// The profile the principal holds Use on.
    pub profile_id: ProfileId,
    /// The connection.
    pub connection_id: ConnectionId,
}

/// One tool as the client sees it.
#[derive(Clone, Debug)]
pub struct McpTool {
    /// The name the client calls.
    pub exposed_name: String,
    /// The tool's own name on its connection.
    pub tool_name: String,
    /// Its route.
    pub route: McpRoute,
    /// Its description, as discovered.
    pub description: Option<String>,
    /// Its input schema, as discovered.
    pub input_schema: serde_json::Value,
    /// Its annotations (MCP hints), as discovered.
    pub annotations: Option<serde_json::Value>,
}

/// Why a connection's tools are not offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// Its latest discovery failed.
    Unreachable,
}

impl Unavailable {
    /// The stable reason code.
    pub fn as_str(self) -> &'static str {
        match self {
            Unavailable::Unreachable => "unreachable",
        }
    }
}

/// A connection the principal may use, as announced to its client.
#[derive(Clone, Debug)]
pub struct McpConnectionNotice {
    /// The connection's namespace.
    pub namespace: String,
    /// How many of its tools are listed.
    pub tools: usize,
    /// Why its tools are not offered, if they are not.
    pub unavailable: Option<Unavailable>,
}

/// Everything an `/mcp` principal is offered.
#[derive(Clone, Debug, Default)]
pub struct McpCatalog {
    /// The listed tools, by exposed name.
    pub tools: Vec<McpTool>,
    /// One notice per usable connection, by namespace.
    pub connections: Vec<McpConnectionNotice>,
}

impl McpCatalog {
    /// The listed tool with this exposed name.
    pub fn find(&self, exposed_name: &str) -> Option<&McpTool> {
        self.tools
            .binary_search_by(|tool| tool.exposed_name.as_str().cmp(exposed_name))
            .ok()
            .map(|at| &self.tools[at])
    }
}

impl App {
    /// What `user` is offered on `/mcp`: its routes' granted, classified, available tools and
    /// a notice per connection. A connection reached through several profiles is routed
    /// through the first by name; exposed names two tools would share are offered by neither.
    pub async fn mcp_catalog(&self, user: &crate::db::UserRow) -> AppResult<McpCatalog> {
        let routes = one_route_per_connection(self.db.mcp_routes(user.id).await?);
        let mut by_name: BTreeMap<String, Vec<McpTool>> = BTreeMap::new();
        let mut connections = Vec::with_capacity(routes.len());
        for route in routes {
            if route.last_discovery_error.is_some() || !route.discovered {
                connections.push(McpConnectionNotice {
                    namespace: route.namespace,
                    tools: 0,
                    unavailable: Some(Unavailable::Unreachable),
                });
                continue;
            }
            let tools = self.db.tool_list(route.connection_id).await?;
            let offered: Vec<McpTool> = tools
                .into_iter()
                .filter(|tool| offered(&route, tool))
                .filter_map(|tool| exposed(&route, tool))
                .collect();
            connections.push(McpConnectionNotice {
                namespace: route.namespace.clone(),
                tools: offered.len(),
                unavailable: None,
            });
            for tool in offered {
                by_name
                    .entry(tool.exposed_name.clone())
                    .or_default()
                    .push(tool);
            }
        }
        let tools = by_name
            .into_values()
            .filter(|same| same.len() == 1)
            .flatten()
            .collect();
        Ok(McpCatalog { tools, connections })
    }
}

/// The routes with each connection once: through its first profile by name.
fn one_route_per_connection(routes: Vec<McpRouteRow>) -> Vec<McpRouteRow> {
    let mut seen: HashMap<ConnectionId, ()> = HashMap::new();
    routes
        .into_iter()
        .filter(|route| seen.insert(route.connection_id, ()).is_none())
        .collect()
}

/// Whether a cached tool is offered on its route: granted by the profile, available, not
/// retired, classified.
fn offered(route: &McpRouteRow, tool: &ToolRow) -> bool {
    let granted = route
        .granted_tools
        .as_ref()
        .is_none_or(|granted| granted.contains(&tool.name));
    granted && tool.available && !tool.retired && tool.classification().is_some()
}

/// The tool as listed, unless its exposed name would not fit a client's tool-name alphabet
/// (`[A-Za-z0-9_.-]`, at most [`MAX_EXPOSED_NAME`] characters).
fn exposed(route: &McpRouteRow, tool: ToolRow) -> Option<McpTool> {
    let exposed_name = format!("{}{NAME_SEPARATOR}{}", route.namespace, tool.name);
    let fits = exposed_name.len() <= MAX_EXPOSED_NAME
        && exposed_name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    fits.then(|| McpTool {
        exposed_name,
        tool_name: tool.name,
        route: McpRoute {
            workspace_id: route.workspace_id,
            profile_id: route.profile_id,
            connection_id: route.connection_id,
        },
        description: tool.description,
        input_schema: tool.input_schema.0,
        annotations: tool.annotations.map(|a| a.0),
    })
}
