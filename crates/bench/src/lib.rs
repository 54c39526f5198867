//! Switchyard's benchmark driver and chaos suite. Both run the real binaries — the server, the
//! device companion `switchyard-mcp-runner` and the fixture MCP server — against a real
//! PostgreSQL, and measure or break them from the outside, the way an operator would see them.
//!
//! - [`bench`](mod@bench): the figures of `docs/BENCHMARKS.md`, each next to its baseline from the same run.
//! - [`chaos`]: real faults with random timing, judged by invariants (`docs/RELIABILITY.md`).
//!
//! The processes, the API client and pairing come from `switchyard-testkit`, which the tests
//! use too; [`stack`] builds a deployment from them.
//!
//! The driver talks to the system through its HTTP API only, and reads PostgreSQL only for
//! statistics and invariants; it never writes call state (it writes only the scratch table of
//! [`floor`], the durable writes a call makes, measured alone).

pub mod bench;
pub mod chaos;
pub mod cpu;
pub mod direct;
pub mod error;
pub mod floor;
pub mod limits;
pub mod pg;
pub mod procs;
pub mod rng;
pub mod stack;
pub mod stats;

pub use error::{Error, Result};
