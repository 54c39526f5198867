//! What an `/mcp` principal sees: it gathers the principal's routes (each connection it may
//! use, through one profile), their cached catalogs and — for an agent — its settings, and
//! hands them to the pure builder ([`super::agent_catalog`]), which decides names, filters,
//! deferral and the menu. Nothing here touches the network: a catalog is what discovery read.
//!
//! A connection reached through several profiles is routed through the first by name when they
//! grant it alike, and offers nothing (`conflicting_routes`) when they do not — the same rule
//! that refuses a grant creating such routes ([`route_conflicts`], used by `app/profiles.rs`).
//! A connection is unavailable as it records (`connections.unavailable`, set from the runner's
//! typed error): `unreachable` when its latest discovery failed so, `needs_authorization` when
//! its credential was refused — at discovery or by a call — until a discovery or a call
//! succeeds; one never discovered is `unreachable`. Under an agent's `auth_failure = stop` a
//! refused connection keeps its tools and each call is answered that it needs authorizing.

use super::agent_catalog::{
    Availability, CallRefusal, Catalog, CatalogInput, ConnectionInput, ExposedTool, RouteSettings,
    ToolInput, ToolRoute, UnavailableReason,
};
use super::{Actor, App};
use crate::db::{AgentConnectionRow, McpRouteRow, ToolRow, UserRow};
use crate::error::{AppError, AppResult};
use std::collections::{BTreeMap, HashMap};
use switchyard_protocol::agents::{
    AgentMode, AgentToolView, AgentToolsView, Announce, AuthFailure, DroppedToolView,
    ToolSyncFailure, UnavailableConnectionView,
};
use switchyard_protocol::api::{ToolHints, ToolState};
use switchyard_protocol::approval::ApprovalPolicy;
use switchyard_protocol::{ConnectionId, EnvironmentId, ErrorCode, ProfileId, WorkspaceId};

/// Where a tool's calls go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpRoute {
    /// The workspace.
    pub workspace_id: WorkspaceId,
    /// The profile the principal holds Use on.
    pub profile_id: ProfileId,
    /// The connection.
    pub connection_id: ConnectionId,
}

/// One tool as the client sees it, and where its calls go.
#[derive(Clone, Debug)]
pub struct McpTool {
    /// The name the client calls.
    pub exposed_name: String,
    /// The tool's own name on its connection.
    pub tool_name: String,
    /// Its route.
    pub route: McpRoute,
    /// Its title, if any.
    pub title: Option<String>,
    /// Its description, bounded.
    pub description: Option<String>,
    /// Its input schema, as discovered.
    pub input_schema: serde_json::Value,
    /// Its output schema, as discovered.
    pub output_schema: Option<serde_json::Value>,
    /// The server's hints, as discovered.
    pub hints: ToolHints,
}

/// A connection the principal may use, as announced to its client.
#[derive(Clone, Debug)]
pub struct McpConnectionNotice {
    /// The connection's namespace.
    pub namespace: String,
    /// How many of its tools are offered (listed or behind search).
    pub tools: usize,
    /// What its server said it is for, at its latest discovery.
    pub about: Option<String>,
    /// Why its tools are not offered, if they are not.
    pub unavailable: Option<UnavailableReason>,
}

/// Why a call by name, or by provider and tool, is refused: safe to show the model.
#[derive(Clone, Debug, thiserror::Error)]
pub enum McpRefusal {
    /// The catalog does not offer it.
    #[error(transparent)]
    Catalog(#[from] CallRefusal),
    /// Its connection's credential was refused (`auth_failure = stop`).
    #[error(
        "connection `{namespace}` needs authorizing: its credential was refused; ask an admin to authorize it, then call again"
    )]
    NeedsAuthorization {
        /// The connection's namespace.
        namespace: String,
    },
}

/// Everything an `/mcp` principal is offered.
#[derive(Clone, Debug)]
pub struct McpCatalog {
    /// How the principal sees tools (a person: `tools`).
    pub mode: AgentMode,
    /// The builder's decisions: names, filters, deferral, search and the menu.
    pub catalog: Catalog,
    /// The listed tools, by exposed name.
    pub tools: Vec<McpTool>,
    /// One notice per connection to announce, by namespace.
    pub connections: Vec<McpConnectionNotice>,
    /// Each connection's route.
    routes: HashMap<ConnectionId, McpRoute>,
    /// Connections whose credential was refused under `auth_failure = stop`.
    refused: HashMap<ConnectionId, String>,
}

impl McpCatalog {
    /// The tool a client calls by `name` (`tools/call`, or `call_tool` for a deferred one).
    pub fn call(&self, name: &str) -> Result<McpTool, McpRefusal> {
        let route = self.catalog.lookup(name)?;
        self.resolve(&route, name)
    }

    /// The tool `mcp_call` names by provider and tool (the grant checked again).
    pub fn menu_call(&self, provider: &str, tool: &str) -> Result<McpTool, McpRefusal> {
        let route = self.catalog.mcp_call(provider, tool)?;
        let exposed = format!("{}/{}", route.namespace, route.tool);
        self.resolve(&route, &exposed)
    }

    fn resolve(&self, route: &ToolRoute, exposed: &str) -> Result<McpTool, McpRefusal> {
        if let Some(namespace) = self.refused.get(&route.connection_id) {
            return Err(McpRefusal::NeedsAuthorization {
                namespace: namespace.clone(),
            });
        }
        let tool = self
            .catalog
            .listed()
            .chain(self.catalog.deferred())
            .find(|t| t.connection_id == route.connection_id && t.tool == route.tool);
        let (title, description, input_schema, output_schema, hints) = match tool {
            Some(t) => (
                t.title.clone(),
                t.description.clone(),
                t.input_schema.clone(),
                t.output_schema.clone(),
                t.hints,
            ),
            // The menu resolves a tool by its own name even where its exposed name collided.
            None => (
                None,
                None,
                serde_json::json!({}),
                None,
                ToolHints::default(),
            ),
        };
        Ok(McpTool {
            exposed_name: exposed.to_owned(),
            tool_name: route.tool.clone(),
            route: self.routes[&route.connection_id].clone(),
            title,
            description,
            input_schema,
            output_schema,
            hints,
        })
    }
}

impl App {
    /// What `user` is offered on `/mcp`: its routes' tools as its settings and the builder
    /// decide, and a notice per connection to announce.
    pub async fn mcp_catalog(&self, user: &UserRow) -> AppResult<McpCatalog> {
        // Two round trips whatever the principal reaches: its agent row, settings and routes
        // side by side, then every routed connection's tools in one read.
        let is_agent = user.kind == switchyard_protocol::agents::PrincipalKind::Agent;
        let (agent, settings, routes_read) = tokio::try_join!(
            async {
                if is_agent {
                    self.db.agent_of_user(user.id).await
                } else {
                    Ok(None)
                }
            },
            async {
                if is_agent {
                    self.db.agent_connections(user.id).await
                } else {
                    Ok(Vec::new())
                }
            },
            self.db.mcp_routes(user.id),
        )?;
        let settings: HashMap<ConnectionId, AgentConnectionRow> = settings
            .into_iter()
            .map(|row| (row.connection_id, row))
            .collect();
        let routed = routes_by_connection(routes_read);
        let connection_ids: Vec<ConnectionId> = routed
            .iter()
            .map(|(route, _)| route.connection_id)
            .collect();
        let mut tools_of: HashMap<ConnectionId, Vec<ToolRow>> = HashMap::new();
        for row in self.db.tool_lists(&connection_ids).await? {
            tools_of
                .entry(row.connection_id)
                .or_default()
                .push(row.tool);
        }
        let mut input = CatalogInput {
            connections: Vec::new(),
            defer_all: agent.as_ref().is_some_and(|a| a.defer_all),
        };
        let mut routes = HashMap::new();
        let mut refused = HashMap::new();
        let mut quiet = Vec::new();
        let mut about = HashMap::new();
        for (route, conflicting) in routed {
            let setting = settings.get(&route.connection_id);
            let failure = unavailability(&route);
            let stop = setting.is_none_or(|s| s.auth_failure == AuthFailure::Stop);
            let availability = match failure {
                Some(UnavailableReason::NeedsAuthorization) if stop && route.discovered => {
                    refused.insert(route.connection_id, route.namespace.clone());
                    Availability::Answered
                }
                Some(reason) => Availability::Unavailable(reason),
                None => Availability::Answered,
            };
            let announce = setting.is_none_or(|s| s.announce == Announce::Auto);
            let silent = setting.is_some_and(|s| s.tool_sync_failure == ToolSyncFailure::Silent);
            if !announce || (silent && matches!(availability, Availability::Unavailable(_))) {
                quiet.push(route.connection_id);
            }
            if let Some(reason) = failure {
                // The remote's own words go to the log only.
                let error = route.last_discovery_error.as_deref().unwrap_or_default();
                tracing::debug!(connection = %route.connection_id, %reason, %error, "an /mcp principal's connection is unavailable");
            }
            about.insert(route.connection_id, route.about.clone());
            let tools = tools_of.remove(&route.connection_id).unwrap_or_default();
            routes.insert(
                route.connection_id,
                McpRoute {
                    workspace_id: route.workspace_id,
                    profile_id: route.profile_id,
                    connection_id: route.connection_id,
                },
            );
            input.connections.push(ConnectionInput {
                id: route.connection_id,
                namespace: route.namespace.clone(),
                name: route.connection_name.clone(),
                prefix_tools: route.prefix_tools,
                availability,
                conflicting_routes: conflicting,
                settings: setting.map(route_settings).unwrap_or_default(),
                tools: tools.iter().map(|tool| tool_input(&route, tool)).collect(),
            });
        }
        let catalog = Catalog::build(input);
        for dropped in catalog.dropped() {
            if dropped.reason == super::agent_catalog::DropReason::NameCollision {
                tracing::info!(principal = %user.name, connection = %dropped.namespace, tool = %dropped.tool, "an /mcp tool name is offered by two connections: neither offers it");
            }
        }
        let tools = catalog.listed().map(|t| mcp_tool(t, &routes)).collect();
        let connections = catalog
            .connections()
            .iter()
            .filter(|c| !quiet.contains(&c.id))
            .map(|c| McpConnectionNotice {
                namespace: c.namespace.clone(),
                tools: c.offered,
                about: about.get(&c.id).cloned().flatten(),
                unavailable: match c.availability {
                    Availability::Unavailable(reason) => Some(reason),
                    Availability::Answered if refused.contains_key(&c.id) => {
                        Some(UnavailableReason::NeedsAuthorization)
                    }
                    Availability::Answered => None,
                },
            })
            .collect();
        Ok(McpCatalog {
            mode: agent.map_or(AgentMode::Tools, |a| a.mode),
            catalog,
            tools,
            connections,
            routes,
            refused,
        })
    }

    /// Exactly the tool list agent `agent` sees on `/mcp`, with every tool it does not see and
    /// why (workspace members).
    pub async fn agent_tools(
        &self,
        actor: &Actor,
        ws: &str,
        agent: &str,
    ) -> AppResult<AgentToolsView> {
        let membership = self.membership(actor, ws).await?;
        let row = self.find_agent(membership.workspace.id, agent).await?;
        let user = self
            .db
            .user_find(&crate::db::Key::Id(row.user_id.0))
            .await?
            .ok_or_else(|| {
                AppError::refused(ErrorCode::AgentNotFound, "the agent has no principal")
            })?;
        let offered = self.mcp_catalog(&user).await?;
        let view = |t: &ExposedTool| AgentToolView {
            name: t.name.clone(),
            connection: t.namespace.clone(),
            tool: t.tool.clone(),
        };
        Ok(AgentToolsView {
            mode: offered.mode,
            tools: offered.catalog.listed().map(view).collect(),
            deferred: offered.catalog.deferred().map(view).collect(),
            dropped: offered
                .catalog
                .dropped()
                .iter()
                .map(|d| DroppedToolView {
                    connection: d.namespace.clone(),
                    tool: d.tool.clone(),
                    reason: d.reason.as_str().to_owned(),
                })
                .collect(),
            unavailable: offered
                .catalog
                .connections()
                .iter()
                .filter_map(|c| {
                    let reason = match c.availability {
                        _ if c.conflicting_routes => "conflicting_routes",
                        Availability::Unavailable(reason) => reason.as_str(),
                        Availability::Answered if offered.refused.contains_key(&c.id) => {
                            UnavailableReason::NeedsAuthorization.as_str()
                        }
                        Availability::Answered => return None,
                    };
                    Some(UnavailableConnectionView {
                        connection: c.namespace.clone(),
                        reason: reason.to_owned(),
                    })
                })
                .collect(),
        })
    }
}

/// How a route grants its connection: the tools (in any order), the environment and the
/// approval policy. This is the one definition of the rule that two routes of a principal to
/// one connection must grant it alike: a grant that would break it is refused
/// ([`route_conflicts`]), and a catalog that finds it broken anyway (the profiles changed
/// since) offers the connection nothing ([`routes_by_connection`]).
fn grant_of(route: &McpRouteRow) -> (Option<Vec<String>>, EnvironmentId, ApprovalPolicy) {
    let mut tools = route.granted_tools.clone();
    if let Some(tools) = &mut tools {
        tools.sort();
    }
    (tools, route.environment_id, route.approval_policy)
}

/// Each connection once, with whether its routes conflict: the first route by profile name
/// when every route grants it alike ([`grant_of`]), else marked.
fn routes_by_connection(rows: Vec<McpRouteRow>) -> Vec<(McpRouteRow, bool)> {
    let mut by_connection: BTreeMap<(String, ConnectionId), Vec<McpRouteRow>> = BTreeMap::new();
    for row in rows {
        by_connection
            .entry((row.workspace_name.clone(), row.connection_id))
            .or_default()
            .push(row);
    }
    by_connection
        .into_values()
        .filter_map(|mut routes| {
            routes.sort_by(|a, b| a.profile_name.cmp(&b.profile_name));
            let conflicting = routes
                .windows(2)
                .any(|w| grant_of(&w[0]) != grant_of(&w[1]));
            routes.into_iter().next().map(|first| (first, conflicting))
        })
        .collect()
}

/// The routes a grant of Use would add (`added`, one profile's) that conflict with a route
/// the principal holds through another profile (`held`) — they grant one connection
/// differently ([`grant_of`]) — each with that other route, by connection then profile name.
pub(super) fn route_conflicts<'a>(
    held: &'a [McpRouteRow],
    added: &'a [McpRouteRow],
) -> Vec<(&'a McpRouteRow, &'a McpRouteRow)> {
    let mut conflicts: Vec<(&McpRouteRow, &McpRouteRow)> = added
        .iter()
        .flat_map(|new| {
            held.iter()
                .filter(move |old| {
                    old.connection_id == new.connection_id
                        && old.profile_id != new.profile_id
                        && grant_of(old) != grant_of(new)
                })
                .map(move |old| (new, old))
        })
        .collect();
    conflicts.sort_by(|a, b| {
        (&a.0.connection_name, &a.1.profile_name).cmp(&(&b.0.connection_name, &b.1.profile_name))
    });
    conflicts
}

/// Why a connection is unavailable: what its latest discovery, or a call refused for its
/// credential, recorded on it (a typed fact, never read from an error's words); or it never
/// answered a discovery.
fn unavailability(route: &McpRouteRow) -> Option<UnavailableReason> {
    route
        .unavailable
        .or((!route.discovered).then_some(UnavailableReason::Unreachable))
}

fn route_settings(row: &AgentConnectionRow) -> RouteSettings {
    RouteSettings {
        include: row.include.clone(),
        exclude: row.exclude.clone(),
        read_only: row.read_only,
        non_destructive: row.non_destructive,
        idempotent: row.idempotent,
        defer: row.defer,
    }
}

fn tool_input(route: &McpRouteRow, tool: &ToolRow) -> ToolInput {
    let annotations = tool.annotations.as_ref().map(|a| &a.0);
    ToolInput {
        name: tool.name.clone(),
        title: annotations
            .and_then(|a| a.get("title"))
            .and_then(|t| t.as_str())
            .map(str::to_owned),
        description: tool.description.clone(),
        hints: ToolHints::from_annotations(annotations),
        input_schema: tool.input_schema.0.clone(),
        output_schema: None,
        state: ToolState::derive(
            tool.retired,
            tool.available,
            tool.classification().is_some(),
        ),
        granted: route
            .granted_tools
            .as_ref()
            .is_none_or(|granted| granted.contains(&tool.name)),
    }
}

fn mcp_tool(tool: &ExposedTool, routes: &HashMap<ConnectionId, McpRoute>) -> McpTool {
    McpTool {
        exposed_name: tool.name.clone(),
        tool_name: tool.tool.clone(),
        route: routes[&tool.connection_id].clone(),
        title: tool.title.clone(),
        description: tool.description.clone(),
        input_schema: tool.input_schema.clone(),
        output_schema: tool.output_schema.clone(),
        hints: tool.hints,
    }
}
