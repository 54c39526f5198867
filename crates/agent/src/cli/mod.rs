//! The command-line grammar: clap types only, no behaviour.
//!
//! Nothing here accepts a command override for calls, a runner override for calls, or a
//! credential value (`credential set` reads it from a prompt or stdin): connectors name
//! environment variables, never their values, and what a call runs is decided by the server
//! from the workspace's approved configuration.

mod agents;
mod auth;
mod config;
mod connections;
mod credentials;
mod governance;
mod history;

pub use agents::{AgentCommand, AgentSet};
pub use auth::{AuthArgs, ListArgs, RevokeArgs};
pub use config::{ApplyArgs, ConfigCommand};
pub use connections::ConnectionCommand;
pub use credentials::{CredentialCommand, CredentialTarget, StoreChoice};
pub use governance::{ApprovalCommand, AuditCommand, AuditLog, ToolCommand};
pub use history::CallPageArgs;

use crate::input::InputSource;
use clap::{ArgGroup, Args, Parser, Subcommand};
use std::path::PathBuf;

/// The Switchyard CLI: talks to a Switchyard server over its HTTP API.
#[derive(Debug, Parser)]
#[command(
    name = "switchyard",
    version,
    about = "Run MCP tool calls through a Switchyard server.",
    after_help = "Environment:\n  SWITCHYARD_URL             server base URL (default http://127.0.0.1:8787, or the paired server)\n  SWITCHYARD_TOKEN           personal API token; without it, the paired device identity is used\n  SWITCHYARD_DEVICE_PROFILE  which paired device identity to use (default `default`)\n  SWITCHYARD_CONFIG_DIR      where device identities live (default ~/.config/switchyard)\n  SWITCHYARD_DEVICE_KEYRING  `off` keeps device credentials in 0600 files instead of the OS keyring\n  SWITCHYARD_MCP_CREDENTIALS_FILE  the device runner's credential bindings file (default <config dir>/credentials/<profile>.mcp-bindings.json)\n\nExit codes: 0 ok, 2 usage or local input, 3 not authenticated, 4 refused by the server,\n5 server unreachable or failing, 6 call did not succeed, 7 call outcome unknown,\n130 interrupted."
)]
pub struct Cli {
    /// Print the server's JSON answer (pretty) instead of human-readable text.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level command groups.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create and list workspaces, manage members.
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Create and list a workspace's environments.
    #[command(subcommand)]
    Environment(EnvironmentCommand),
    /// Define, import and approve installation-wide connectors.
    #[command(subcommand)]
    Connector(ConnectorCommand),
    /// Place connectors in a workspace and discover their tools.
    #[command(subcommand)]
    Connection(ConnectionCommand),
    /// Set, rotate and list the credential values of a connection placed on this machine.
    #[command(subcommand)]
    Credential(CredentialCommand),
    /// List a connection's tools and classify them: only a classified tool can be called.
    #[command(subcommand)]
    Tool(ToolCommand),
    /// Create execution profiles and grant them.
    #[command(subcommand)]
    Profile(ProfileCommand),
    /// Submit tool calls and follow them.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Create agents, the principals MCP clients connect to `/mcp` as, and set what they see.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// Check a declarative `switchyard.toml`, or export a workspace as one.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Make a workspace match a `switchyard.toml`: print the plan (what is created, changed,
    /// retired), then carry it out. Nothing is changed when the plan is blocked (exit 4) or
    /// with `--dry-run`. Each new agent's token is printed this once.
    Apply(ApplyArgs),
    /// Authorize a central connection: OAuth consent in a browser (prints the URL, then waits
    /// until the server holds the grant), or a static token read from a prompt without echo
    /// or from stdin (`gh auth token | switchyard auth acme github`) — never from the
    /// command line. What the connection needs is what its auth settings say, else what its
    /// server asks for.
    Auth(AuthArgs),
    /// List a workspace's connections with how each authenticates and whether it is
    /// authorized (`authorized`, `needs_authorization`, `auth_required`, `expired`).
    List(ListArgs),
    /// Empty a central connection's credentials — every value the server keeps and every
    /// OAuth grant — keeping its declaration; it then needs authorization again.
    Revoke(RevokeArgs),
    /// Pair this machine with a server as a device: shows a code for a user to approve, then
    /// stores the device identity under a local profile. With `--json`, prints one JSON object
    /// per line: the code first, the stored identity last.
    Pair(PairArgs),
    /// Approve, list and revoke paired devices; accept what runs on yours.
    #[command(subcommand)]
    Device(DeviceCommand),
    /// Create, list and revoke your personal API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Read, export and verify a workspace's audit log (workspace admins and owners).
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Begin operations: the immutable scopes a device's calls run under.
    #[command(subcommand)]
    Scope(ScopeCommand),
    /// Read evidence records captured under a workspace's capture policy.
    #[command(subcommand)]
    Evidence(EvidenceCommand),
    /// List, show, approve and decline the calls that wait for a person's approval.
    #[command(subcommand)]
    Approval(ApprovalCommand),
    /// Run the device runner (`switchyard-mcp-runner`, installed next to `switchyard`) in the
    /// foreground.
    McpRunner(McpRunnerArgs),
}

/// `switchyard pair`.
#[derive(Debug, Args)]
pub struct PairArgs {
    /// The server's base URL, e.g. `https://switchyard.example.com`.
    #[arg(long, value_name = "URL")]
    pub server: String,
    /// Local profile to store the identity under (default: SWITCHYARD_DEVICE_PROFILE, else
    /// `default`).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// Device name shown to the approving user (default: the host name).
    #[arg(long, value_name = "DEVICE_NAME")]
    pub name: Option<String>,
}

/// `switchyard device …`
#[derive(Debug, Subcommand)]
pub enum DeviceCommand {
    /// Approve a pairing code shown by `switchyard pair`, binding the device to a profile you
    /// hold Use on.
    Approve {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The pairing code, e.g. K7QM-3XTD.
        code: String,
        /// Execution profile (id or name) the device may run calls under.
        #[arg(long)]
        profile: String,
    },
    /// List a workspace's paired devices.
    List {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
    },
    /// Revoke a device: it is refused from its next request.
    Revoke {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The device id.
        device: String,
    },
    /// List the connections placed on your devices (those you approved), pending and accepted,
    /// with the command or URL each would run there.
    Placements {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
    },
    /// Accept a connection placed on one of your devices, for the spec `device placements`
    /// shows now; its calls then run there, until the connector's spec changes.
    Accept {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Your device's name or id.
        device: String,
        /// The connection's name or id.
        connection: String,
    },
    /// Decline a connection placed on one of your devices: its calls are refused.
    Decline {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Your device's name or id.
        device: String,
        /// The connection's name or id.
        connection: String,
    },
}

/// `switchyard token …`
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token; prints its secret alone on stdout (the server cannot show it again).
    Create {
        /// A name to tell your tokens apart, e.g. `ci`.
        name: String,
        /// How long it works: a number with `s`, `m`, `h` or `d` (e.g. `90d`); without it the
        /// token works until revoked.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration_seconds)]
        expires_in: Option<u64>,
    },
    /// List your tokens, revoked and expired ones included.
    List,
    /// Revoke one of your tokens: it is refused from its next request, and the inspector
    /// sessions signed in with it end.
    Revoke {
        /// The token's id (`switchyard token list`).
        token: String,
    },
}

/// Seconds in `90d`, `12h`, `30m` or `45s` (a bare number is seconds).
fn parse_duration_seconds(text: &str) -> Result<u64, String> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "`{text}` is not a duration: use a number with s, m, h or d, e.g. 90d"
            ));
        }
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&seconds| seconds > 0)
        .ok_or_else(|| {
            format!("`{text}` is not a duration: use a positive number with s, m, h or d, e.g. 90d")
        })
}

/// `switchyard scope …`
#[derive(Debug, Subcommand)]
pub enum ScopeCommand {
    /// Begin an operation and print its id; put it in call files as `operation_id`.
    Begin {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Environment id or name.
        #[arg(long)]
        environment: String,
        /// Execution profile id or name.
        #[arg(long)]
        profile: String,
        /// What the work is for, for people reading the record (at most 500 characters).
        #[arg(long)]
        task: String,
    },
}

/// `switchyard mcp-runner`.
#[derive(Debug, Args)]
pub struct McpRunnerArgs {
    /// The runner's private state directory (its receipt outbox lives here).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Device profile to run as (default: SWITCHYARD_DEVICE_PROFILE, else `default`).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
}

/// `switchyard evidence …`
#[derive(Debug, Subcommand)]
pub enum EvidenceCommand {
    /// Show one evidence record (any member of its workspace may read it).
    Show {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The evidence record's id (a `source_version_id`).
        id: String,
    },
}

/// A switch given as `on` or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    /// Turned on.
    On,
    /// Turned off.
    Off,
}

/// `switchyard workspace …`
#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Create a workspace; you become its admin.
    Create {
        /// Unique workspace name.
        name: String,
    },
    /// List the workspaces you are a member of.
    List,
    /// Manage a workspace's members.
    #[command(subcommand)]
    Member(MemberCommand),
    /// Show the workspace's evidence capture policy, or change it (workspace admins). Turning
    /// capture on never imports earlier calls and grants nobody Use.
    CapturePolicy {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Capture completed managed tool results as evidence records readable by the
        /// workspace's members.
        #[arg(long, value_name = "on|off")]
        capture_managed_tool_results: Option<Switch>,
        /// Keep evidence records this many days after their capture (1–3650; 30 unless set),
        /// then delete them; the calls keep their disposition.
        #[arg(long, value_name = "DAYS")]
        evidence_retention_days: Option<u32>,
    },
    /// Set how long a call waits for approval before it expires (workspace admins).
    #[command(group(ArgGroup::new("timeout").required(true).args(["seconds", "none"])))]
    SetApprovalTimeout {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Seconds (1 to 30 days).
        #[arg(long)]
        seconds: Option<u64>,
        /// Questions never expire.
        #[arg(long)]
        none: bool,
    },
}

/// `switchyard workspace member …`
#[derive(Debug, Subcommand)]
pub enum MemberCommand {
    /// Add a user to a workspace.
    Add {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// User id or name.
        #[arg(long)]
        user: String,
        /// Make the user a workspace admin (admin never implies Use on profiles).
        #[arg(long)]
        admin: bool,
    },
    /// List a workspace's members and their roles.
    List {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
    },
    /// Remove a member from a workspace, with their grants on its profiles (workspace
    /// admins). Their calls stay readable to those who may read them.
    Remove {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// User id or name.
        user: String,
    },
}

/// `switchyard environment …`
#[derive(Debug, Subcommand)]
pub enum EnvironmentCommand {
    /// Create an environment in a workspace.
    Create {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Environment name, unique in the workspace.
        name: String,
    },
    /// List a workspace's environments.
    List {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
    },
}

/// `switchyard connector …`
#[derive(Debug, Subcommand)]
pub enum ConnectorCommand {
    /// Define a connector: `--stdio -- CMD ARGS…` or `--http URL`.
    Add(ConnectorAdd),
    /// Import connectors from a JSON file in the common `mcpServers` shape (`-` reads stdin).
    Import {
        /// The JSON file, or `-` for stdin.
        #[arg(value_name = "FILE|-")]
        file: InputSource,
    },
    /// Approve a stdio connector's exact command and arguments.
    Approve {
        /// Connector id or name.
        name: String,
    },
    /// List connectors, retired ones included.
    List,
    /// Retire a connector (installation owners): none of its connections runs anything, their
    /// queued calls fail `connector_retired`; it stays listed with its history.
    Retire {
        /// Connector id or name.
        name: String,
    },
    /// Put a retired connector back in service (installation owners).
    Restore {
        /// Connector id or name.
        name: String,
    },
}

/// `switchyard connector add`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("transport").required(true).args(["stdio", "http"])))]
pub struct ConnectorAdd {
    /// Unique connector name.
    pub name: String,
    /// A local process speaking MCP over stdin/stdout; give its command after `--`.
    #[arg(long, requires = "command")]
    pub stdio: bool,
    /// A remote MCP server over streamable HTTP at this URL.
    #[arg(long, value_name = "URL")]
    pub http: Option<String>,
    /// Name of an environment variable the server needs (repeatable). Names only: values come
    /// from credential bindings, never from the command line.
    #[arg(long = "env", value_name = "NAME", requires = "stdio")]
    pub env: Vec<String>,
    /// The stdio server's command and arguments, after `--`.
    #[arg(last = true, value_name = "CMD ARGS", requires = "stdio")]
    pub command: Vec<String>,
}

/// `switchyard profile …`
#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// Create an execution profile (you get Manage and Share, not Use).
    Create {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Profile name, unique in the workspace.
        name: String,
        /// Environment id or name (`default` when omitted).
        #[arg(long)]
        environment: Option<String>,
        /// A connection the profile may run (repeatable).
        #[arg(long = "connection", value_name = "CONNECTION", required = true)]
        connections: Vec<String>,
        /// Grant only these tools of the (one) connection, e.g. `--tools get_issue,list_issues`;
        /// without it the profile grants every tool, present and future.
        #[arg(long, value_name = "TOOL,…", value_delimiter = ',')]
        tools: Option<Vec<String>>,
    },
    /// Replace the set of a connection's tools a profile grants (holders of Manage).
    #[command(group(ArgGroup::new("which_tools").required(true).args(["tools", "all"])))]
    SetTools {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Profile id or name.
        profile: String,
        /// Connection id or name.
        #[arg(long)]
        connection: String,
        /// The complete set of tools granted, e.g. `--tools get_issue,list_issues`.
        #[arg(long, value_name = "TOOL,…", value_delimiter = ',')]
        tools: Option<Vec<String>>,
        /// Grant the connection whole: every tool, present and future.
        #[arg(long)]
        all: bool,
    },
    /// Set which calls through a profile wait for a person (holders of Manage, workspace
    /// admins): for every connection, one (`--connection`), or one tool of it (`--tool`).
    /// A side-effecting high-risk call always asks; `never` refuses it instead.
    SetApproval {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Profile id or name.
        profile: String,
        /// Connection id or name (default: every connection of the profile).
        #[arg(long)]
        connection: Option<String>,
        /// A tool of that connection: overrides the connection's policy for it.
        #[arg(long, requires = "connection")]
        tool: Option<String>,
        /// default | destructive | always | never.
        #[arg(long)]
        policy: switchyard_protocol::approval::ApprovalPolicy,
    },
    /// List a workspace's profiles, retired ones included.
    List {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
    },
    /// Retire a profile (workspace admins): nothing is submitted through it, its queued calls
    /// fail `profile_retired`; its grants stay, inert.
    Retire {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Profile id or name.
        profile: String,
    },
    /// Put a retired profile back in service (workspace admins).
    Restore {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Profile id or name.
        profile: String,
    },
    /// Grant a user Use, Manage and/or Share on a profile.
    Grant(ProfileGrant),
    /// Revoke a user's Use, Manage and/or Share on a profile (holders of Share and workspace
    /// admins). Revoked Use stops their next call.
    Revoke(ProfileGrant),
}

/// `switchyard profile grant|revoke`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("grants").required(true).multiple(true).args(["use_", "manage", "share", "approve"])))]
pub struct ProfileGrant {
    /// Workspace id or name.
    #[arg(value_name = "WS")]
    pub workspace: String,
    /// Profile id or name.
    pub profile: String,
    /// User id or name (a person).
    #[arg(long, required_unless_present = "agent", conflicts_with = "agent")]
    pub user: Option<String>,
    /// Agent id or name (`switchyard agent list`): it may hold Use only.
    #[arg(long)]
    pub agent: Option<String>,
    /// Use: run tools and read results.
    #[arg(long = "use", id = "use_")]
    pub use_: bool,
    /// Manage: edit the profile.
    #[arg(long)]
    pub manage: bool,
    /// Share: grant the profile to others.
    #[arg(long)]
    pub share: bool,
    /// Approve: answer approval questions about the profile's calls (never one's own).
    #[arg(long)]
    pub approve: bool,
}

/// `switchyard mcp …`
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Submit a call from a JSON SubmitCall file (`-` reads stdin).
    Call {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The SubmitCall JSON object, or `-` for stdin.
        #[arg(value_name = "FILE|-")]
        file: InputSource,
        /// Wait until the call finishes (or becomes unknown) and print its result.
        #[arg(long)]
        wait: bool,
    },
    /// List calls, newest first, a page at a time (summaries: no arguments or results), or
    /// show one call in full.
    Status {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// A call id: show this call instead of the list.
        #[arg(conflicts_with = "CallPageArgs")]
        call: Option<String>,
        /// Which calls the list shows, and which page.
        #[command(flatten)]
        page: CallPageArgs,
    },
    /// Cancel a call: at once if it was not sent yet, otherwise ask its runner to stop it.
    Cancel {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The call id.
        call: String,
    },
    /// Settle an unknown call by asking its connector: run the connection's approved receipt
    /// lookup (FILE: `{"request_id": "<fresh uuid>", "client_session_id": "…"}`), wait for it,
    /// and show what the connector reported. Exits 0 when the call is settled, 7 when it stays
    /// unknown.
    Reconcile {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The unknown call's id.
        call: String,
        /// The request JSON object, or `-` for stdin.
        #[arg(value_name = "FILE|-")]
        file: InputSource,
    },
    /// Settle an unknown call yourself, citing evidence you can read (FILE: `request_id`,
    /// `outcome` succeeded|not_applied|failed, `source_version_id`, `explanation` of at most
    /// 2,000 characters).
    Resolve {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The unknown call's id.
        call: String,
        /// The resolution JSON object, or `-` for stdin.
        #[arg(value_name = "FILE|-")]
        file: InputSource,
    },
    /// Erase a finished or unknown call's evidence (workspace admins). This never undoes what
    /// the tool did.
    Erase {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The call id.
        call: String,
    },
    /// Release a warm session key: its sessions finish their active calls, then close.
    Release {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The `client_session_id` the calls were submitted with.
        #[arg(value_name = "SESSION")]
        session: String,
        /// Only on this connection (id or name); every connection you may use when omitted.
        #[arg(long)]
        connection: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn stdio_command_follows_double_dash() {
        let cli = Cli::try_parse_from([
            "switchyard",
            "connector",
            "add",
            "fx",
            "--env",
            "A",
            "--stdio",
            "--",
            "/bin/fx",
            "stdio",
            "--flag",
        ])
        .expect("parses");
        let Command::Connector(ConnectorCommand::Add(add)) = cli.command else {
            panic!("not connector add")
        };
        assert_eq!(add.command, ["/bin/fx", "stdio", "--flag"]);
        assert_eq!(add.env, ["A"]);
    }

    #[test]
    fn invalid_combinations_are_usage_errors() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("switchyard").chain(args.iter().copied()))
                .map_err(|e| e.exit_code())
                .err()
        };
        assert_eq!(parse(&["connector", "add", "fx"]), Some(2));
        assert_eq!(parse(&["connector", "add", "fx", "--stdio"]), Some(2));
        assert_eq!(
            parse(&[
                "connector",
                "add",
                "fx",
                "--http",
                "http://h",
                "--stdio",
                "--",
                "x"
            ]),
            Some(2)
        );
        assert_eq!(
            parse(&["connector", "add", "fx", "--http", "http://h", "--env", "A"]),
            Some(2)
        );
        assert_eq!(
            parse(&["profile", "grant", "ws", "p", "--user", "bob"]),
            Some(2)
        );
        assert_eq!(parse(&["profile", "create", "ws", "p"]), Some(2));
        assert_eq!(
            parse(&[
                "profile", "grant", "ws", "p", "--user", "bob", "--use", "--share"
            ]),
            None
        );
        assert_eq!(parse(&["--json", "mcp", "call", "ws", "-", "--wait"]), None);
        assert_eq!(parse(&["mcp", "status", "ws", "--json"]), None);
        assert_eq!(parse(&["mcp", "cancel", "ws"]), Some(2));
        assert_eq!(parse(&["mcp", "release", "ws"]), Some(2));
        assert_eq!(
            parse(&["mcp", "release", "ws", "s1", "--connection", "fx"]),
            None
        );
        assert_eq!(parse(&["connection", "events", "ws"]), Some(2));
        assert_eq!(parse(&["pair"]), Some(2));
        assert_eq!(parse(&["pair", "--server", "http://h", "--json"]), None);
        assert_eq!(parse(&["device", "approve", "ws", "CODE"]), Some(2));
        assert_eq!(
            parse(&["device", "approve", "ws", "CODE", "--profile", "main"]),
            None
        );
        assert_eq!(parse(&["scope", "begin", "ws", "--profile", "p"]), Some(2));
        assert_eq!(parse(&["mcp-runner"]), Some(2));
        assert_eq!(parse(&["mcp", "reconcile", "ws", "call"]), Some(2));
        assert_eq!(parse(&["mcp", "reconcile", "ws", "call", "-"]), None);
        assert_eq!(parse(&["mcp", "resolve", "ws", "call", "file.json"]), None);
        assert_eq!(parse(&["mcp", "erase", "ws"]), Some(2));
        assert_eq!(
            parse(&[
                "connection",
                "receipt-policy",
                "ws",
                "fx",
                "--tool",
                "lookup"
            ]),
            Some(2)
        );
        assert_eq!(
            parse(&[
                "connection",
                "receipt-policy",
                "ws",
                "fx",
                "--tool",
                "lookup",
                "--arguments",
                "{}"
            ]),
            None
        );
        assert_eq!(
            parse(&[
                "workspace",
                "capture-policy",
                "ws",
                "--capture-managed-tool-results",
                "maybe"
            ]),
            Some(2)
        );
        assert_eq!(
            parse(&[
                "workspace",
                "capture-policy",
                "ws",
                "--capture-managed-tool-results",
                "on"
            ]),
            None
        );
        assert_eq!(parse(&["evidence", "show", "ws"]), Some(2));
        assert_eq!(parse(&["apply"]), Some(2));
        assert_eq!(parse(&["apply", "f.toml", "--dry-run", "--json"]), None);
        assert_eq!(parse(&["apply", "f.toml", "--workspace", "acme"]), None);
        assert_eq!(parse(&["config", "export"]), Some(2));
        assert_eq!(parse(&["config", "export", "acme"]), None);
        assert_eq!(parse(&["mcp-runner", "dir", "--profile", "laptop"]), None);
    }
}
