//! What a valid file asks for, with every default filled in: the state `apply` will make the
//! workspace match, in the API's own types where the API has them.

use super::document::{AuthKind, CredentialHolder, Document, McpServer};
use serde::Serialize;
use std::collections::BTreeMap;
use switchyard_protocol::agents::{AgentConnectionSettings, AgentMode};

/// The workspace a file describes.
#[derive(Debug, Serialize)]
pub struct Desired {
    /// The workspace it names, if it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The MCP servers, by id.
    pub mcp: BTreeMap<String, DeclaredServer>,
    /// The agents, by id.
    pub agents: BTreeMap<String, DeclaredAgent>,
}

/// How a declared server is reached.
#[derive(Debug, Serialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum Transport {
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
    },
    /// A process over stdio.
    Stdio {
        /// The executable.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Its environment: variable name → reference.
        env: BTreeMap<String, String>,
    },
}

/// Where a declared server's calls run.
#[derive(Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// In the server's own runner.
    Central,
    /// On the named paired device.
    Device(String),
}

/// One `[mcp.<id>]`, defaults filled in.
#[derive(Debug, Serialize)]
pub struct DeclaredServer {
    /// How it is reached.
    #[serde(flatten)]
    pub transport: Transport,
    /// How it is authorized; `None` means: ask the server.
    pub auth: Option<AuthKind>,
    /// The header a static token goes in (`auth = "token"` only).
    pub header: Option<String>,
    /// The scopes to ask for; empty means what the server advertises.
    pub scopes: Vec<String>,
    /// Whether agents see its tools as `slug__tool`.
    pub prefix_tools: bool,
    /// Whose credential a call uses.
    pub credential: CredentialHolder,
    /// The variable holding a client id, for a server that issues none.
    pub client_id_env: Option<String>,
    /// The variable holding that client's secret.
    pub client_secret_env: Option<String>,
    /// Where its calls run.
    pub placement: Placement,
}

/// One `[agent.<id>]`, defaults filled in.
#[derive(Debug, Serialize)]
pub struct DeclaredAgent {
    /// How it sees tools.
    pub mode: AgentMode,
    /// Every server's tools through `tool_search`.
    pub defer_all: bool,
    /// Its settings per server id (without `mcp.`), as `agent set` takes them.
    pub mcp: BTreeMap<String, AgentConnectionSettings>,
}

/// The desired state of a valid document.
pub fn desired(document: &Document) -> Desired {
    let mcp = document
        .mcp
        .iter()
        .map(|(id, server)| (id.clone(), declared_server(server.get_ref())))
        .collect();
    let agents = document
        .agent
        .iter()
        .map(|(id, agent)| {
            let agent = agent.get_ref();
            let servers = agent.mcp.iter().map(|entry| {
                let server = &entry.get_ref().0;
                let id = server.id.strip_prefix("mcp.").unwrap_or(&server.id);
                let settings = AgentConnectionSettings {
                    include: server.tools.include.clone(),
                    exclude: server.tools.exclude.clone(),
                    read_only: server.tools.read_only,
                    non_destructive: server.tools.non_destructive,
                    idempotent: server.tools.idempotent,
                    defer: server.defer.unwrap_or(false),
                    approve: server.approve,
                    auth_failure: server.auth_failure.unwrap_or_default(),
                    tool_sync_failure: server
                        .tool_sync_failure
                        .or(agent.mcp_tool_sync_failure)
                        .unwrap_or_default(),
                    announce: server.announce.or(agent.mcp_announce).unwrap_or_default(),
                };
                (id.to_owned(), settings)
            });
            let declared = DeclaredAgent {
                mode: agent.mode.unwrap_or_default(),
                defer_all: agent.defer_tools.unwrap_or(false),
                mcp: servers.collect(),
            };
            (id.clone(), declared)
        })
        .collect();
    Desired {
        workspace: document
            .workspace
            .as_ref()
            .map(|workspace| workspace.get_ref().clone()),
        mcp,
        agents,
    }
}

fn declared_server(server: &McpServer) -> DeclaredServer {
    let transport = match (&server.url, &server.command) {
        (Some(url), _) => Transport::Http { url: url.clone() },
        (None, command) => Transport::Stdio {
            command: command.clone().unwrap_or_default(),
            args: server.args.clone(),
            env: server
                .env
                .iter()
                .map(|(name, reference)| (name.clone(), reference.get_ref().clone()))
                .collect(),
        },
    };
    let placement = match server.placement.as_deref() {
        Some(placement) => placement
            .strip_prefix("device:")
            .map_or(Placement::Central, |device| {
                Placement::Device(device.to_owned())
            }),
        None => Placement::Central,
    };
    DeclaredServer {
        transport,
        auth: server.auth,
        header: match server.auth {
            Some(AuthKind::Token) => Some(
                server
                    .header
                    .clone()
                    .unwrap_or_else(|| "Authorization".to_owned()),
            ),
            _ => None,
        },
        scopes: server.scopes.clone().unwrap_or_default(),
        prefix_tools: server.prefix_tools.unwrap_or(true),
        credential: server.credential.unwrap_or_default(),
        client_id_env: server.client_id_env.clone(),
        client_secret_env: server.client_secret_env.clone(),
        placement,
    }
}
