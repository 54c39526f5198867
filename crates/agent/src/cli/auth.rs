//! `switchyard auth`, `switchyard list` and `switchyard revoke`: the grammar of authorizing a
//! central connection, listing where each connection's credential stands, and emptying it. No
//! flag takes a token: a static one is read from a prompt without echo, or from stdin.

use clap::Args;

/// `switchyard auth WS CONN`.
#[derive(Debug, Args)]
pub struct AuthArgs {
    /// Workspace id or name.
    #[arg(value_name = "WS")]
    pub workspace: String,
    /// Connection id or name (a central connection), or `mcp.<id>` as a file names it.
    #[arg(value_name = "CONN")]
    pub connection: String,
    /// How long to wait for the consent in the browser, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub wait: u64,
    /// The header a static token (`auth` = `token`) is sent in; by default the connection's
    /// own (its `header`), else `Authorization` (with the `Bearer ` prefix).
    #[arg(long, value_name = "NAME")]
    pub header: Option<String>,
}

/// `switchyard list WS`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Workspace id or name.
    #[arg(value_name = "WS")]
    pub workspace: String,
}

/// `switchyard revoke WS CONN`.
#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// Workspace id or name.
    #[arg(value_name = "WS")]
    pub workspace: String,
    /// Connection id or name (a central connection), or `mcp.<id>` as a file names it.
    #[arg(value_name = "CONN")]
    pub connection: String,
}
