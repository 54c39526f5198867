//! Integration tests of the benchmark driver and the core chaos cases, with the real binaries
//! (server, device runner, fixture) against a fresh PostgreSQL database per test.
//!
//! They need `DATABASE_URL` (a role allowed to create databases) and the workspace's binaries
//! built beside this test (`cargo build --workspace`; `scripts/test.sh` does both).

mod chaos;
mod harness;
mod smoke;
