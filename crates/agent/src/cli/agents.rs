//! `switchyard agent …`: agents, the principals MCP clients connect to `/mcp` as.

use clap::{Args, Subcommand};
use switchyard_protocol::agents::{AgentMode, Announce, AuthFailure, ToolSyncFailure};
use switchyard_protocol::approval::ApprovalPolicy;

/// `switchyard agent …`
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Create an agent (workspace admins) and print its token, once, for its MCP client.
    Create {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The agent's name in the workspace.
        name: String,
        /// `tools` (the granted tools themselves) or `menu` (three provider-menu tools).
        #[arg(long, default_value = "tools")]
        mode: AgentMode,
        /// Every connection's tools reach the model through `tool_search`.
        #[arg(long)]
        defer_all: bool,
    },
    /// List a workspace's agents.
    List {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
    },
    /// Show an agent: the profiles it holds Use on and its per-connection settings.
    Show {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Agent id or name.
        agent: String,
    },
    /// Print exactly the tool list the agent sees on `/mcp`, and every dropped tool and why.
    Tools {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Agent id or name.
        agent: String,
    },
    /// Change an agent's settings (workspace admins): with `--connection`, its settings for
    /// that connection, replaced whole; without, its mode and deferral.
    Set(AgentSet),
    /// Revoke an agent (workspace admins): its token stops working, its Use grants are taken.
    Revoke {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Agent id or name.
        agent: String,
    },
}

/// `switchyard agent set`.
#[derive(Debug, Args)]
pub struct AgentSet {
    /// Workspace id or name.
    #[arg(value_name = "WS")]
    pub workspace: String,
    /// Agent id or name.
    pub agent: String,
    /// The connection (id or name) whose settings are replaced.
    #[arg(long, value_name = "CONNECTION")]
    pub connection: Option<String>,
    /// Only tools whose name matches one of these globs (`*`, `?`); repeatable.
    #[arg(long, value_name = "GLOB", requires = "connection")]
    pub include: Vec<String>,
    /// Remove tools whose name matches; repeatable.
    #[arg(long, value_name = "GLOB", requires = "connection")]
    pub exclude: Vec<String>,
    /// Only tools annotated read-only.
    #[arg(long, requires = "connection")]
    pub read_only: bool,
    /// Only tools annotated non-destructive.
    #[arg(long, requires = "connection")]
    pub non_destructive: bool,
    /// Only tools annotated idempotent.
    #[arg(long, requires = "connection")]
    pub idempotent: bool,
    /// The connection's tools reach the model through `tool_search`.
    #[arg(long, requires = "connection")]
    pub defer: bool,
    /// The agent's approval policy for the connection, beside the profile's (the stricter
    /// wins): default, destructive, always or never.
    #[arg(long, value_name = "MODE", requires = "connection")]
    pub approve: Option<ApprovalPolicy>,
    /// A refused credential: `stop` (a tool error) or `degrade` (leave the tools out).
    #[arg(long, default_value = "stop", requires = "connection")]
    pub auth_failure: AuthFailure,
    /// A failed tool listing: `warn` (announced unavailable) or `silent`.
    #[arg(long, default_value = "warn", requires = "connection")]
    pub tool_sync_failure: ToolSyncFailure,
    /// `auto` (announce the connection in the instructions) or `never`.
    #[arg(long, default_value = "auto", requires = "connection")]
    pub announce: Announce,
    /// Without `--connection`: `tools` or `menu`.
    #[arg(long, conflicts_with = "connection")]
    pub mode: Option<AgentMode>,
    /// Without `--connection`: whether every connection's tools go behind search.
    #[arg(long, value_name = "BOOL", conflicts_with = "connection")]
    pub defer_all: Option<bool>,
}
