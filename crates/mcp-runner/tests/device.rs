//! The device companion runner on its own: its receipt outbox on real files, and the checks the
//! `switchyard-mcp-runner` binary makes before it contacts a server. They need nothing beyond
//! this package; the runner against the real `switchyard-server` is tested in `crates/e2e`.

// The crate root of a test binary looks for modules beside it; these live in `device/`.
#[path = "device/harness.rs"]
mod harness;
#[path = "device/outbox.rs"]
mod outbox;
#[path = "device/runner.rs"]
mod runner;
