//! The typed shape of `switchyard.toml`: every section and key it may hold, nothing else
//! (unknown keys are refused by serde with their position).

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use std::collections::BTreeMap;
use std::fmt;
use switchyard_protocol::agents::{AgentMode, Announce, AuthFailure, ToolSyncFailure};
/// How a server is authorized (`oauth`, `token`, `none`) and whose credential a call uses
/// (`shared`, `user`): the file takes the API's own names.
pub use switchyard_protocol::api::{AuthKind, CredentialHolder};
use switchyard_protocol::approval::ApprovalPolicy;
use toml::Spanned;

/// One workspace's declared MCP servers and agents.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Document {
    /// `workspace = "acme"`: the workspace the file describes (`switchyard apply` takes it
    /// from here unless `--workspace` names it).
    pub workspace: Option<Spanned<String>>,
    /// `[mcp.<id>]`: the MCP servers the workspace connects to, by id.
    #[serde(default)]
    pub mcp: BTreeMap<String, Spanned<McpServer>>,
    /// `[agent.<id>]`: the agents and the servers each may use, by id.
    #[serde(default)]
    pub agent: BTreeMap<String, Spanned<Agent>>,
}

/// `[mcp.<id>]`: one MCP server, reached over HTTP (`url`) or started over stdio (`command`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// The streamable HTTP endpoint.
    pub url: Option<String>,
    /// The stdio server's executable.
    pub command: Option<String>,
    /// The stdio server's arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// The stdio server's environment, each value a reference (`env:NAME`, `keyring:ACCOUNT`,
    /// `file:KEY`, `stored`), never a value.
    #[serde(default)]
    pub env: BTreeMap<String, Spanned<String>>,
    /// How the server is authorized; discovered from the server when absent.
    pub auth: Option<AuthKind>,
    /// The header a static token goes in (`auth = "token"`; `Authorization` by default).
    pub header: Option<String>,
    /// The OAuth scopes to ask for; the server's advertised ones when absent.
    pub scopes: Option<Vec<String>>,
    /// Whether the server's tools are named `slug__tool` for agents (default on).
    pub prefix_tools: Option<bool>,
    /// Whose credential a call uses (default `shared`; `user`: the calling person's own).
    pub credential: Option<CredentialHolder>,
    /// The environment variable holding the OAuth client id, for servers that issue none.
    pub client_id_env: Option<String>,
    /// The environment variable holding the OAuth client secret.
    pub client_secret_env: Option<String>,
    /// `central` (the default) or `device:NAME`.
    pub placement: Option<String>,
}

/// `[agent.<id>]`: an agent and the servers it may use.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// The servers, by `mcp.<id>` or as a table with per-server settings.
    #[serde(default)]
    pub mcp: Vec<Spanned<ServerEntry>>,
    /// How the agent sees tools (`tools` by default, or `menu`).
    pub mode: Option<AgentMode>,
    /// Whether the agent's connections are announced by default.
    pub mcp_announce: Option<Announce>,
    /// Whether a failed tool listing is reported to the agent by default.
    pub mcp_tool_sync_failure: Option<ToolSyncFailure>,
    /// Every server's tools through `tool_search`.
    pub defer_tools: Option<bool>,
}

/// An entry of an agent's `mcp` list: a server's id alone, or a table with its settings.
#[derive(Debug)]
pub struct ServerEntry(pub AgentServer);

/// One server an agent may use, with its settings for that agent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentServer {
    /// `mcp.<id>`.
    pub id: String,
    /// Which of the server's tools the agent sees.
    #[serde(default)]
    pub tools: ToolFilter,
    /// The approval policy for this agent and server.
    pub approve: Option<ApprovalPolicy>,
    /// The server's tools through `tool_search`.
    pub defer: Option<bool>,
    /// What a call gets when the server's credential was refused.
    pub auth_failure: Option<AuthFailure>,
    /// Whether a failed tool listing is reported to the agent.
    pub tool_sync_failure: Option<ToolSyncFailure>,
    /// Whether the server is announced to the agent.
    pub announce: Option<Announce>,
}

/// `tools = { … }`: each key can only remove tools.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFilter {
    /// Globs over the tool's name; only matching tools pass.
    #[serde(default)]
    pub include: Vec<String>,
    /// Globs over the tool's name; matching tools are removed.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Only tools annotated read-only.
    #[serde(default)]
    pub read_only: bool,
    /// Only tools annotated non-destructive.
    #[serde(default)]
    pub non_destructive: bool,
    /// Only tools annotated idempotent.
    #[serde(default)]
    pub idempotent: bool,
}

impl<'de> Deserialize<'de> for ServerEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ServerEntryVisitor)
    }
}

/// `"mcp.sentry"` or `{ id = "mcp.sentry", … }`.
struct ServerEntryVisitor;

impl<'de> Visitor<'de> for ServerEntryVisitor {
    type Value = ServerEntry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"mcp.<id>\" or a table { id = \"mcp.<id>\", … }")
    }

    fn visit_str<E: de::Error>(self, id: &str) -> Result<ServerEntry, E> {
        Ok(ServerEntry(AgentServer {
            id: id.to_owned(),
            tools: ToolFilter::default(),
            approve: None,
            defer: None,
            auth_failure: None,
            tool_sync_failure: None,
            announce: None,
        }))
    }

    fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<ServerEntry, M::Error> {
        AgentServer::deserialize(de::value::MapAccessDeserializer::new(map)).map(ServerEntry)
    }
}
