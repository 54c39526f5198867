//! The server's instructions: one notice per connection the principal may use, so that a
//! model knows which MCP servers stand behind the tools (and which are unavailable, and why).

use crate::app::McpCatalog;
use serde_json::json;

/// The opening line of the instructions.
const PREAMBLE: &str = "Switchyard runs each of these tools as a call under your grants, audited, and approved by a person where policy says so. The MCP servers behind them, one JSON object a line:";

/// The instructions for a principal offered `catalog`.
pub(super) fn of(catalog: &McpCatalog) -> String {
    let mut text = String::from(PREAMBLE);
    for notice in &catalog.connections {
        let line = match notice.unavailable {
            None => json!({
                "mcp_server": notice.namespace,
                "tools": notice.tools,
                "about": notice.about,
            }),
            Some(reason) => json!({
                "mcp_server": notice.namespace,
                "unavailable": true,
                "reason": reason.as_str(),
            }),
        };
        text.push('\n');
        text.push_str(&line.to_string());
    }
    text
}
