//! `switchyard-mcp-runner`'s executor: MCP sessions and the executor loop, driven against the
//! real `switchyard-fixture` MCP server.

mod bounds;
mod cancel;
mod contain;
mod control;
mod executor;
pub(crate) mod fixture;
mod http;
mod session;
mod warm;
