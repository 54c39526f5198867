//! Switchyard's wire types: ids, API requests and views, call states, runner messages and
//! error codes. Plain data and a promise: no I/O lives here, and a change to these types is a
//! change to the protocol. The `sqlx` feature (the server's) makes the ids, epochs and named
//! enums PostgreSQL column types as well.
//!
//! `tests/golden/` pins that promise: one JSON file per wire type, each checked against an
//! example value and read back (see `tests/golden/README.md`).

pub mod agents;
pub mod api;
pub mod approval;
pub mod audit;
pub mod connection_auth;
pub mod credential_status;
pub mod credentials;
pub mod diagnose;
pub mod error;
pub mod ids;
pub mod placement;
pub mod reconcile;
pub mod runner;
pub mod runner_ref;
#[cfg(feature = "sqlx")]
mod sql;
pub mod state;
pub mod tools;

pub use error::{ApiError, ErrorBody, ErrorCode};
pub use ids::*;
pub use runner_ref::RunnerRef;
pub use state::CallState;
