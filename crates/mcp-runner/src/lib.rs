//! The Switchyard executor: leases calls from a [`control::ControlPlane`], runs them against
//! MCP servers on warm sessions and reports how they ended. Used by the server for central
//! placement and by the `switchyard-mcp-runner` binary on devices.

mod backoff;
mod call;
mod call_span;
pub mod contain;
pub mod control;
pub mod credentials;
pub mod device;
pub mod endpoints;
mod events;
pub mod executor;
pub mod failure;
pub mod handle;
pub mod identity;
pub mod launch;
pub mod message_bound;
pub mod meta;
pub mod oauth;
pub mod outbox;
pub mod owned_file;
mod pool;
mod process_group;
pub mod redact;
pub mod session;
pub mod tail;
mod tasks;
pub mod telemetry;

pub use control::{ControlError, ControlPlane, StartDecision};
pub use executor::{Executor, ExecutorConfig, LaunchFuture, LaunchResolver, immediate_resolver};
pub use handle::{CancelOutcome, ExecutorHandle};
pub use launch::SessionLaunch;
pub use pool::{SessionCapFlags, SessionCaps};
pub use redact::Redactor;
pub use session::{CallCancellation, DiscoveredTool, Dispatch, McpSession, SessionError, discover};
