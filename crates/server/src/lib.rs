//! switchyard-server: the control plane. It owns connectors, connections, profiles and their
//! grants, queued calls, runner leases and request-ID idempotency, on PostgreSQL; serves the
//! HTTP API; and runs the central executor (the `switchyard-mcp-runner` library) for calls
//! placed on the `central` runner.
//!
//! Layers: `http` (thin handlers) → `app` (operations and authorization) → `db` (every SQL
//! statement). `central` is the runner inside the server; `web` is the call inspector, a web UI
//! over the same app layer; `mcp` is `/mcp`, the MCP server agents connect to.

pub mod app;
pub mod central;
pub mod db;
pub mod error;
pub mod http;
pub mod mcp;
pub mod metrics;
pub mod private_file;
pub mod serve;
pub mod sweeper;
pub mod vault;
pub mod web;
