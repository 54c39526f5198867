//! The device companion runner: the executor run against the server's device runner API
//! (`/api/v1/runner/...`) over authenticated HTTP, with every start and completion recorded in
//! the receipt outbox ([`crate::outbox`]) first.
//!
//! A run is a series of lease terms. Each term: take the device's runner lease (waiting while
//! another runner holds it), start the heartbeat, recover the outbox (cut-off calls become
//! `unknown`, unacknowledged receipts are checked and uploaded), then lease and run calls until
//! shutdown or fencing. Fencing ends a term: admission stops, running calls finish and report,
//! and the lease is taken again. Shutdown ends the run after the lease is released. A refused
//! device credential ends the run with [`RunError::Revoked`].
//!
//! Guarantees:
//! - No request is sent before its start is recorded in the outbox and acknowledged by the
//!   server; every receipt is recorded while it is uploaded and kept until the server
//!   acknowledges it (unless the outbox cannot record it, which pauses admission).
//! - No call is leased while the outbox is full, stale or failing.
//! - A call cut off by a crash after the server acknowledged its start is reported `unknown`,
//!   never run again; one cut off before was never sent, and is leased again.
//! - The credential is sent only to the identity's server and never logged.
//! - A call runs only when the spec it was leased with is the one the device's owner accepted
//!   (`pins`); otherwise it fails before its credentials are resolved or anything starts.

mod channel;
mod client;
mod control;
mod heartbeat;
pub mod lines;
mod pins;
mod recovery;
mod retry;
mod runner;
mod state;

pub use client::{ApiFailure, Credential, RunnerClient, install_tls_provider};
pub use runner::{DeviceConfig, RunError, run};
