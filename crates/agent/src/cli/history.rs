//! `switchyard mcp status WS`'s filters and paging of the calls history.

use clap::Args;

/// The filters and paging of `switchyard mcp status WS` (not with a call id).
#[derive(Debug, Default, Args)]
pub struct CallPageArgs {
    /// Only calls in this state (`succeeded`, `unknown`, `failed`, …).
    #[arg(long)]
    pub state: Option<String>,
    /// Only calls of this tool.
    #[arg(long)]
    pub tool: Option<String>,
    /// Only calls on this connection (name or id).
    #[arg(long)]
    pub connection: Option<String>,
    /// Only calls this member submitted (name or id), or `device:<id>`.
    #[arg(long)]
    pub submitter: Option<String>,
    /// Only calls placed here: `central` or `device:<id>`.
    #[arg(long)]
    pub placement: Option<String>,
    /// Only calls submitted at or after this RFC 3339 time, e.g. `2026-12-01T00:00:00Z`.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Only calls submitted before this RFC 3339 time.
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// Calls per page (1–200; the server's default is 50).
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
    /// Start at this page: the `next_cursor` the page before printed (same filters).
    #[arg(long, conflicts_with = "all")]
    pub cursor: Option<String>,
    /// Follow every page to the oldest call instead of printing one.
    #[arg(long)]
    pub all: bool,
}
