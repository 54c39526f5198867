//! The Switchyard executor: leases calls from a [`control::ControlPlane`], runs them against
//! MCP servers and reports how they ended. Used by the server for central placement and by the
//! `switchyard-mcp-runner` binary on devices.

pub mod control;
