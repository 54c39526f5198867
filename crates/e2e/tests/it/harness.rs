//! What every end-to-end test needs: the workspace's binaries and a scratch directory, from
//! `switchyard-testkit`, a failed step failing the test.

use std::path::PathBuf;
use switchyard_testkit::bins;
use switchyard_testkit::scratch;

/// The workspace binary `name` (`switchyard-server`, `switchyard`, …), which must be built.
#[track_caller]
pub fn binary(name: &str) -> PathBuf {
    bins::workspace_binary(name).unwrap_or_else(|e| panic!("{e}"))
}

/// A fresh private directory `target/tmp/<suite>/<test>`, kept after the test.
#[track_caller]
pub fn scratch(suite: &str, test: &str) -> PathBuf {
    scratch::kept(suite, test).expect("a scratch directory")
}
