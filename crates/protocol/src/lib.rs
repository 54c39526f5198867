//! Switchyard's wire types: ids, API requests and views, call states, runner messages and
//! error codes. Plain data and a promise: no I/O lives here, and a change to these types is a
//! change to the protocol.

pub mod api;
pub mod error;
pub mod ids;
pub mod reconcile;
pub mod runner;
pub mod state;

pub use error::{ApiError, ErrorBody, ErrorCode};
pub use ids::*;
pub use state::CallState;
