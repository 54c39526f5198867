//! Integration tests of the `switchyard` binary on its own: how it finds and hands over to the
//! device runner helper beside it, and `config validate`, which reads a local file only.
//!
//! Runs against the CLI's real server, runner and fixture live in `crates/e2e`, which needs the
//! workspace built; these need only this package's binary.

mod config;
mod runner;
