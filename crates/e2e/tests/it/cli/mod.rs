//! The `switchyard` CLI end to end: the real binary against the real `switchyard-server`, with
//! the fixture MCP server as the tool.

mod access;
mod apply;
mod approvals;
mod audit;
mod auth;
mod calls;
mod contain;
mod devices;
mod diagnose;
mod errors;
pub(crate) mod harness;
mod reconcile;
mod retire;
mod sessions;
mod tools;
mod tour;
