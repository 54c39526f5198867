//! Integration tests of switchyard-server: a real server on a fresh PostgreSQL database per
//! test, real MCP servers as child processes.

mod access;
mod agents;
mod approvals;
mod audit;
mod authz;
mod bad_input;
mod browser;
mod call_history;
mod calls;
mod classification;
mod credential_values;
mod device_discovery;
mod devices;
mod endpoints;
mod evidence;
mod evidence_expiry;
mod handshake;
mod harness;
mod health;
mod heartbeats;
mod http_transport;
mod idempotency;
mod interop;
mod leases;
mod lifecycle;
mod mcp_agents;
mod mcp_authorization;
mod mcp_cancel;
mod mcp_catalog_cache;
mod mcp_clients;
mod mcp_endpoint;
mod metrics;
mod namespaces;
mod placements;
mod quotas;
mod reconcile;
mod retire;
mod runner_api;
mod runner_channel;
mod sessions;
mod setup;
mod warm_sessions;

mod web;
mod web_http;
