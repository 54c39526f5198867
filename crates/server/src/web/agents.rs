//! A workspace's agents, and one agent's tool list exactly as it sees it on `/mcp` — the tools,
//! those it reaches through `tool_search`, every tool it does not see and why, and connections
//! that did not answer — as `switchyard agent list` and `agent tools WS AGENT` show them
//! ([`crate::app::App::agent_list`], [`crate::app::App::agent_show`],
//! [`crate::app::App::agent_tools`]). Read-only: agents are created and configured with the CLI.

use super::WebState;
use super::error::WebResult;
use super::page::{Chrome, encode_segment, html, when};
use super::session::SignedIn;
use askama::Template;
use axum::extract::{Path, State};
use axum::response::Html;
use switchyard_protocol::api::{AgentToolView, AgentView};

/// An agent as the list shows it.
struct AgentRow {
    name: String,
    path: String,
    mode: String,
    defer_all: bool,
    created: String,
    revoked: Option<String>,
}

fn agent_row(a: &AgentView) -> AgentRow {
    AgentRow {
        name: a.name.clone(),
        path: encode_segment(&a.name),
        mode: a.mode.to_string(),
        defer_all: a.defer_all,
        created: when(&a.created_at),
        revoked: a.revoked_at.as_ref().map(when),
    }
}

#[derive(Template)]
#[template(path = "agents.html")]
struct AgentsPage {
    chrome: Chrome,
    ws: String,
    agents: Vec<AgentRow>,
}

/// `GET /workspaces/{ws}/agents`.
pub(super) async fn list(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path(ws): Path<String>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let workspace = s.app.workspace_get(actor, &ws).await?;
    let agents = s.app.agent_list(actor, &ws).await?;
    html(&AgentsPage {
        chrome: Chrome::in_workspace(&signed_in, &workspace.name, "agents"),
        ws: workspace.name,
        agents: agents.iter().map(agent_row).collect(),
    })
}

/// A tool the agent sees: the name the model calls, and where it comes from.
struct ToolRow {
    name: String,
    connection: String,
    tool: String,
}

fn tool_row(t: &AgentToolView) -> ToolRow {
    ToolRow {
        name: t.name.clone(),
        connection: t.connection.clone(),
        tool: t.tool.clone(),
    }
}

/// A tool the agent does not see, and the stable reason code.
struct LeftOut {
    connection: String,
    tool: String,
    reason: String,
}

#[derive(Template)]
#[template(path = "agent.html")]
struct AgentPage {
    chrome: Chrome,
    ws: String,
    agent: AgentRow,
    profiles: Vec<String>,
    tools: Vec<ToolRow>,
    deferred: Vec<ToolRow>,
    dropped: Vec<LeftOut>,
    unavailable: Vec<Unanswered>,
}

/// A connection the agent could use that did not answer, and why.
struct Unanswered {
    connection: String,
    reason: String,
}

/// `GET /workspaces/{ws}/agents/{agent}`: its grants and the tool list it sees.
pub(super) async fn detail(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path((ws, agent)): Path<(String, String)>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let workspace = s.app.workspace_get(actor, &ws).await?;
    let shown = s.app.agent_show(actor, &ws, &agent).await?;
    let tools = s.app.agent_tools(actor, &ws, &agent).await?;
    html(&AgentPage {
        chrome: Chrome::in_workspace(&signed_in, &workspace.name, "agents"),
        ws: workspace.name,
        agent: agent_row(&shown.agent),
        profiles: shown.profiles.into_iter().map(|p| p.name).collect(),
        tools: tools.tools.iter().map(tool_row).collect(),
        deferred: tools.deferred.iter().map(tool_row).collect(),
        dropped: tools
            .dropped
            .into_iter()
            .map(|d| LeftOut {
                connection: d.connection,
                tool: d.tool,
                reason: d.reason,
            })
            .collect(),
        unavailable: tools
            .unavailable
            .into_iter()
            .map(|u| Unanswered {
                connection: u.connection,
                reason: u.reason,
            })
            .collect(),
    })
}
