//! Integration tests of switchyard-server: a real server on a fresh PostgreSQL database per
//! test, real MCP servers as child processes.

mod bad_input;
mod calls;
mod harness;
mod health;
mod http_transport;
mod idempotency;
mod interop;
mod leases;
mod lifecycle;
mod sessions;
mod setup;
