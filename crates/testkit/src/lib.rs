//! The real stack for Switchyard's tests and benchmarks, written once: where the binaries are,
//! scratch directories, `switchyard-server` and `switchyard-mcp-runner` as real processes, an
//! HTTP API client, a workspace set up and a device paired through that API, and waits with a
//! bound.
//!
//! - [`bins`]: the workspace's binaries beside the running executable;
//! - [`child_env`]: a test run again in a child process with variables in its environment;
//! - [`scratch`]: private scratch directories, kept for reading or removed on drop;
//! - [`server`]: the server's admin commands and `serve` as a process;
//! - [`runner`]: the device runner as a process;
//! - [`api`]: the HTTP API client;
//! - [`mcp_clients`]: published MCP clients (Python SDK, Inspector CLI) against an endpoint;
//! - [`oauth_server`]: a real OAuth 2.1 authorization server (`oidc-provider`);
//! - [`setup`]: workspace, connector, connection and profile through the API;
//! - [`pairing`]: pairing a device and saving its identity;
//! - [`poll`]: waiting for a condition with a bound;
//! - [`error`]: the one error type.
//!
//! Users: the end-to-end tests (`crates/e2e`), the benchmark driver and chaos suite
//! (`crates/bench`, a normal dependency used at run time), and the integration tests of the
//! other crates for binaries and scratch directories.
//!
//! Nothing here panics on a failed step: it returns an [`Error`] whose message says what failed
//! (a missing binary, a refused request with its answer, a process's log), so the benchmark can
//! report it and stop; tests call `.expect("…")`. Every process handle kills and reaps its
//! process when dropped.
//!
//! Nothing here builds a binary either. Cargo builds only the package's own binaries before its
//! tests, so a test that starts another package's binary lives in `crates/e2e`, which needs
//! `cargo build --workspace` first (`scripts/test.sh` builds it); `cargo test -p
//! switchyard-agent` or `-p switchyard-mcp-runner` then needs nothing beyond its own package.
//! One exception is kept on purpose: `switchyard-server`'s integration tests are the server's
//! specification and run the fixture MCP server (`switchyard-fixture`) as the tool behind most
//! of them, so they stay with the server and find the fixture through
//! [`bins::workspace_binary`], which says to build the workspace first when it is missing.

#![warn(missing_docs)]

pub mod api;
pub mod bins;
pub mod child_env;
pub mod error;
pub mod mcp_clients;
pub mod oauth_server;
pub mod pairing;
pub mod poll;
mod process;
pub mod runner;
pub mod scratch;
pub mod server;
pub mod setup;

pub use error::{Error, Result};
