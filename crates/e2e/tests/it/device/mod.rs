//! The device companion `switchyard-mcp-runner` end to end against the real
//! `switchyard-server`, with the fixture MCP server as the tool.

mod credentials;
mod discovery;
mod harness;
mod large;
mod mcp_clients;
mod oauth;
mod placements;
mod proxy;
mod runner;
mod traces;
