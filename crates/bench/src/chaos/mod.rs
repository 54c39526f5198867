//! The chaos suite: real processes and real faults, each repeated with random timing, judged
//! by invariants rather than by timing ([`invariants`]). One case per fault:
//!
//! | case | fault |
//! |---|---|
//! | `runner-kill` | SIGKILL the device runner mid-stream; restart it at once or after its lease expired |
//! | `pg-restart` | restart PostgreSQL (`fast` or `immediate`) under load |
//! | `pg-backend-kill` | terminate the PostgreSQL backends serving the long-poll listeners (or all of the database's) |
//! | `replica-restart` | SIGKILL or SIGTERM one of two server replicas under load, then start it again |
//! | `proxy-cut` | reset every connection between the device runner and the server |
//! | `proxy-stall` | stop forwarding between the device runner and the server for up to twice the lease |
//! | `disk-full` | fill the tmpfs holding the device runner's outbox, then free it |
//!
//! Each case runs on a fresh database with a 3-second runner lease (so lost leases expire
//! quickly), with the fixture's `count` tool as the side effect whose executions are counted.

pub mod cases;
pub mod invariants;
pub mod pgctl;
pub mod proxy;
pub mod workload;

pub use cases::{Case, CaseReport, ChaosConfig, run_case, summary_table};
