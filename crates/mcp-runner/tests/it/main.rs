//! Integration tests of `switchyard-mcp-runner`: MCP sessions and the executor loop, driven
//! against the real `switchyard-fixture` MCP server (build it first with
//! `cargo build -p switchyard-fixture`).

mod cancel;
mod control;
mod executor;
mod fixture;
mod http;
mod session;
mod warm;
