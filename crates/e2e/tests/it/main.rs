//! Switchyard end to end: the binaries of several packages started together against a fresh
//! PostgreSQL database per test.
//!
//! - [`cli`]: the `switchyard` CLI against the real server, the fixture MCP server as the tool;
//! - [`device`]: the device runner `switchyard-mcp-runner` against the real server;
//! - [`runner`]: MCP sessions and the executor loop of `switchyard-mcp-runner` against the
//!   real fixture MCP server;
//! - [`bench`]: the benchmark driver's smoke run and the core chaos cases.
//!
//! Needs `DATABASE_URL` (a role allowed to create databases) and the workspace's binaries built
//! beside this test: `cargo build --workspace` (`scripts/test.sh` does both). Device identities
//! are kept in files under per-test directories (`SWITCHYARD_DEVICE_KEYRING=off`), never in the
//! machine's real configuration.

mod bench;
mod cli;
mod device;
mod harness;
mod runner;
