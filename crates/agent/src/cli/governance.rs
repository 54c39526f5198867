//! The grammar of governance: tool classification, approval questions and the audit logs.

use clap::{ArgGroup, Args, Subcommand};

/// `switchyard tool …`
#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// List a connection's tools: name, the server's hints, state, classification, and
    /// whether a changed annotation asks for a review.
    List {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection id or name.
        #[arg(value_name = "CONN")]
        connection: String,
    },
    /// Classify a tool (the installation owner and workspace admins): whether it changes
    /// external state, and its risk. Both are required; the server's hints are never taken in
    /// their place. Clears a review flag.
    #[command(group(ArgGroup::new("effect").required(true).args(["side_effect", "read_only"])))]
    Classify {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// Connection id or name.
        #[arg(value_name = "CONN")]
        connection: String,
        /// Tool name.
        tool: String,
        /// How much harm a call could do: low, medium or high.
        #[arg(long, value_parser = ["low", "medium", "high"])]
        risk: String,
        /// The tool changes external state (exactly one of --side-effect and --read-only).
        #[arg(long)]
        side_effect: bool,
        /// The tool changes nothing (exactly one of --side-effect and --read-only).
        #[arg(long)]
        read_only: bool,
    },
}

/// `switchyard approval …`
#[derive(Debug, Subcommand)]
pub enum ApprovalCommand {
    /// List the approval questions you may read (pending first).
    List {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
    },
    /// Show one question: tool, connection, the exact arguments, who asked, when and why.
    Show {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The call's id (the question's id).
        id: String,
    },
    /// Approve a call (holders of Approve on its profile; never your own): it is queued and
    /// runs once.
    Approve {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The call's id.
        id: String,
    },
    /// Decline a call: it never runs, and its caller reads your reason as its result.
    Decline {
        /// Workspace id or name.
        #[arg(value_name = "WS")]
        workspace: String,
        /// The call's id.
        id: String,
        /// Why (at most 2,000 characters).
        #[arg(long)]
        reason: Option<String>,
    },
}

/// `switchyard audit …`
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// List entries, newest first: who changed what, when.
    List {
        #[command(flatten)]
        log: AuditLog,
        /// Only entries about this connection (name or id).
        #[arg(long, conflicts_with = "installation")]
        connection: Option<String>,
        /// Only entries by this actor (a user's or device's name or id).
        #[arg(long)]
        actor: Option<String>,
        /// Only entries written at or after this RFC 3339 time, e.g. `2026-12-01T00:00:00Z`.
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
    },
    /// Print every entry, oldest first, one JSON object per line.
    Export {
        #[command(flatten)]
        log: AuditLog,
    },
    /// Walk the hash chain from its first entry; exits 8 naming the first entry edited,
    /// removed or reordered.
    Verify {
        #[command(flatten)]
        log: AuditLog,
    },
}

/// Which audit log: a workspace's, or (`--installation`) the installation's own.
#[derive(Debug, Args)]
pub struct AuditLog {
    /// Workspace (name or id).
    #[arg(value_name = "WS", required_unless_present = "installation")]
    pub ws: Option<String>,
    /// The installation's own log instead: connectors and other changes outside any workspace
    /// (installation owners).
    #[arg(long, conflicts_with = "ws")]
    pub installation: bool,
}
