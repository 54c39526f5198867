//! Test harness: the binaries beside this test, scratch directories, and stacks with a short
//! runner lease so that lost leases expire within seconds.

use sqlx::ConnectOptions;
use sqlx::postgres::PgConnectOptions;
use std::path::{Path, PathBuf};
use switchyard_bench::procs::Binaries;
use switchyard_bench::stack::Stack;

/// The runner lease chaos tests use, in seconds (the server's minimum).
pub const LEASE_TTL_SECONDS: &str = "3";

/// The directory holding this test's sibling binaries (`target/<profile>`).
#[track_caller]
pub fn bin_dir() -> PathBuf {
    // current_exe is target/<profile>/deps/it-<hash>.
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("the target directory")
        .to_owned()
}

/// The server, runner and fixture binaries, which must be built.
#[track_caller]
pub fn binaries() -> Binaries {
    Binaries::in_dir(&bin_dir()).unwrap_or_else(|e| panic!("{e} (run `cargo build --workspace`)"))
}

/// A fresh, empty directory for one test.
pub fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("switchyard-bench-it")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
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
