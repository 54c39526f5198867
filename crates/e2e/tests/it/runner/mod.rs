//! `switchyard-mcp-runner`'s executor: MCP sessions and the executor loop, driven against the
//! real `switchyard-fixture` MCP server.

mod bounds;
mod cancel;
mod control;
mod executor;
mod fixture;
mod http;
mod session;
mod warm;
