//! The bench suite's harness: the workspace's binaries, scratch directories, and stacks with a
//! short runner lease so that lost leases expire within seconds.

use sqlx::ConnectOptions;
use sqlx::postgres::PgConnectOptions;
use std::path::PathBuf;
use switchyard_bench::stack::Stack;
use switchyard_testkit::bins::{self, Binaries};

/// The runner lease chaos tests use, in seconds (the server's minimum).
pub const LEASE_TTL_SECONDS: &str = "3";

/// The directory holding the workspace's binaries (`target/<profile>`).
#[track_caller]
pub fn bin_dir() -> PathBuf {
    bins::beside_current_exe().expect("the binaries' directory")
}

/// The server, runner and fixture binaries, which must be built.
#[track_caller]
pub fn binaries() -> Binaries {
    Binaries::beside_current_exe().unwrap_or_else(|e| panic!("{e}"))
}

/// A fresh, empty directory for one test, kept after it.
#[track_caller]
pub fn scratch(test: &str) -> PathBuf {
    crate::harness::scratch("bench", test)
}

/// The URL of the test's database.
pub fn database_url(db: &PgConnectOptions) -> String {
    db.to_url_lossy().to_string()
}

/// A stack on the test's database with a short runner lease.
pub async fn stack(db: &PgConnectOptions, test: &str) -> Stack {
    let env = [("SWITCHYARD_LEASE_TTL_SECONDS", LEASE_TTL_SECONDS)];
    Stack::start(binaries(), &database_url(db), &scratch(test), &env)
        .await
        .unwrap_or_else(|e| panic!("starting the stack: {e}"))
}
