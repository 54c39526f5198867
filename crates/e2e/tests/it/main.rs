//! Switchyard end to end: the binaries of several packages started together against a fresh
//! PostgreSQL database per test.
//!
//! - [`bench`]: the benchmark driver's smoke run and the core chaos cases.
//!
//! Needs `DATABASE_URL` (a role allowed to create databases) and the workspace's binaries built
//! beside this test: `cargo build --workspace` (`scripts/test.sh` does both).

mod bench;
mod harness;
