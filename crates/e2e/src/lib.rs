//! Switchyard end to end: the tests in `tests/it` start the binaries of several packages
//! together — `switchyard-server`, the `switchyard` CLI, the device runner
//! `switchyard-mcp-runner`, the fixture MCP server `switchyard-fixture` and the benchmark
//! driver — against a fresh PostgreSQL database per test. This library is empty; the package
//! exists for its tests.
//!
//! Cargo builds only a package's own binaries before its tests, and this package has none:
//! build the workspace first (`cargo build --workspace`; `scripts/test.sh` does, then runs
//! every test). A missing binary fails the test that needs it with a message saying so. Tests
//! that need only their own package's binary stay in that package, so that `cargo test -p
//! switchyard-agent` or `-p switchyard-mcp-runner` works on its own.
