//! The Switchyard executor: leases calls from a [`control::ControlPlane`], runs them against
//! MCP servers and reports how they ended. Used by the server for central placement and by the
//! `switchyard-mcp-runner` binary on devices.

pub mod control;
pub mod executor;
pub mod launch;
mod process_group;
pub mod session;
pub mod tail;

pub use control::{ControlError, ControlPlane, StartDecision};
pub use executor::{Executor, ExecutorConfig, LaunchResolver};
pub use launch::SessionLaunch;
pub use session::{DiscoveredTool, Dispatch, McpSession, SessionError, discover};
