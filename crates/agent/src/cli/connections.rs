//! `switchyard connection …`: placing connectors, discovering, diagnosing and retiring.

use crate::input::InputSource;
use clap::{ArgGroup, Subcommand};

/// `switchyard connection …`
#[derive(Debug, Subcommand)]
pub enum ConnectionCommand {
    /// Place a connector in a workspace.
    Create {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection name, unique in the workspace.
        name: String,
        /// Connector id or name.
        #[arg(long)]
        connector: String,
        /// Where its calls run: `central` (the default) or `device:<uuid>`.
        #[arg(long)]
        runner: Option<String>,
        /// Namespace slug, 2–24 characters of `a-z`, `0-9`, `_`, unique in the workspace;
        /// derived from the name when omitted.
        #[arg(long)]
        namespace: Option<String>,
        /// Credential references for a central connection, as JSON from FILE or `-` (stdin):
        /// `{"headers": {"Authorization": {"provider": "environment", "name": "TOKEN",
        /// "prefix": "Bearer "}}}` (HTTP) or `{"env": {NAME: reference}}` (stdio). References
        /// only, never values. The server checks them with the MCP handshake, then writes them
        /// to its bindings file (`--mcp-credentials-file`); if anything fails nothing is
        /// stored. See docs/CREDENTIALS.md.
        #[arg(long, value_name = "FILE|-")]
        credentials: Option<InputSource>,
    },
    /// List a workspace's connections, retired ones included.
    List {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
    },
    /// Retire a connection and its tools (workspace admins): it runs nothing, its queued calls
    /// fail `connection_retired`; its calls, events and results stay readable.
    Retire {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection id or name.
        connection: String,
    },
    /// Put a retired connection back in service (workspace admins). Its tools come back
    /// ungranted: every profile that includes it needs `profile set-tools` again.
    Restore {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection id or name.
        connection: String,
    },
    /// Whether the connection's tools reach agents as `namespace__tool` (`on`, the default) or
    /// by their own names (`off`; a name two connections share is then offered by neither).
    PrefixTools {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection id or name.
        connection: String,
        /// `on` or `off`.
        #[arg(value_parser = ["on", "off"])]
        setting: String,
    },
    /// Start or contact the connection's MCP server and cache its tool catalog.
    Discover {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection id or name.
        connection: String,
    },
    /// Check the connection in order, then a bounded live MCP handshake whose failure is
    /// classified; exits 9 when a check failed (docs/OPERATIONS.md).
    Diagnose {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection id or name.
        connection: String,
        /// Time bound of the live handshake, in ms (1 to 60000; default: the server's).
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
    },
    /// Show the connection's cached tool catalog.
    Tools {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection id or name.
        connection: String,
    },
    /// Show the connection's recent lifecycle events, newest first.
    Events {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection id or name.
        connection: String,
    },
    /// Approve the connection's receipt policy: a read-only lookup tool of the same connector
    /// and its arguments, whose string values may contain {{request_id}}, {{call_id}} and
    /// {{tool_name}} (workspace admins with Manage on the profiles that include it). Without
    /// `--tool`, shows the current policy.
    ReceiptPolicy {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection id or name.
        connection: String,
        /// The lookup tool.
        #[arg(long, requires = "arguments")]
        tool: Option<String>,
        /// Its arguments, a JSON object, e.g. '{"request_id": "{{request_id}}"}'.
        #[arg(long, value_name = "JSON", requires = "tool")]
        arguments: Option<String>,
    },
    /// Show what Switchyard never keeps of the connection's calls, or change it (workspace
    /// admins): for one tool (`--tool`) or every tool, keep nothing but the disposition
    /// (`--capture-nothing`), or drop named argument and result fields before anything is
    /// stored. Changing one tool's exclusion keeps the others'.
    #[command(group(ArgGroup::new("change").multiple(true).args(["capture_nothing", "drop_argument", "drop_result", "remove"])))]
    CaptureExclusions {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection id or name.
        connection: String,
        /// The tool the change is about; without it, every tool of the connection.
        #[arg(long, requires = "change")]
        tool: Option<String>,
        /// Keep no arguments, result or evidence of its calls, only their disposition.
        #[arg(long, conflicts_with_all = ["drop_argument", "drop_result", "remove"])]
        capture_nothing: bool,
        /// A top-level argument field to drop (repeat for several).
        #[arg(long, value_name = "FIELD", conflicts_with = "remove")]
        drop_argument: Vec<String>,
        /// A result field to drop from `structuredContent` and JSON text (repeat for several).
        #[arg(long, value_name = "FIELD", conflicts_with = "remove")]
        drop_result: Vec<String>,
        /// Remove the exclusion (of `--tool`, or the connection-wide one).
        #[arg(long)]
        remove: bool,
    },
}
