//! The device companion runner: its receipt outbox on real files, and the
//! `switchyard-mcp-runner` binary end to end against the real `switchyard-server` on a fresh
//! PostgreSQL database per test, with the fixture MCP server as the tool.
//!
//! The end-to-end tests need `DATABASE_URL` (a role allowed to create databases) and the server
//! and fixture binaries built next to this test
//! (`cargo build -p switchyard-server -p switchyard-fixture`).

// The crate root of a test binary looks for modules beside it; these live in `device/`.
#[path = "device/harness.rs"]
mod harness;
#[path = "device/outbox.rs"]
mod outbox;
#[path = "device/proxy.rs"]
mod proxy;
#[path = "device/runner.rs"]
mod runner;
