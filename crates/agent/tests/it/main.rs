//! End-to-end tests of the `switchyard` CLI against the real `switchyard-server` binary on a
//! fresh PostgreSQL database per test, with the fixture MCP server as the tool.
//!
//! Needs `DATABASE_URL` (a role allowed to create databases) and the server and fixture
//! binaries built next to this test (`cargo build -p switchyard-server -p switchyard-fixture`).
//! Device identities are kept in files under per-test directories
//! (`SWITCHYARD_DEVICE_KEYRING=off`), never in the machine's real configuration.

mod calls;
mod devices;
mod errors;
mod harness;
mod reconcile;
mod runner;
mod sessions;
mod tour;
