//! A test that needs variables in its own process's environment runs again as a child process
//! of its test binary, with them set there: changing the running process's environment takes
//! `unsafe` (another thread may read it meanwhile), which this workspace forbids.
//!
//! ```ignore
//! #[test]
//! fn reads_a_variable() {
//!     let Some([name]) = in_child_with_env("reads_a_variable", ["a-value"]) else {
//!         return; // the parent: the child passed
//!     };
//!     assert_eq!(std::env::var(&name).unwrap(), "a-value");
//! }
//! ```

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Set in a child process to the test it runs.
const CHILD: &str = "SWITCHYARD_TESTKIT_CHILD_TEST";
/// Set in a child process to the names of the variables made for it, comma-separated.
const NAMES: &str = "SWITCHYARD_TESTKIT_CHILD_NAMES";

/// In the test binary's own process: runs the test `test` (its path in the binary, e.g.
/// `calls::reads_a_variable`) again in a child process with each of `values` in a fresh
/// environment variable, waits for it and returns `None` once it passed. In that child: returns
/// the variables' names, in the order of `values`, for the test to go on with.
///
/// # Panics
///
/// When the child fails, or runs no test of that name, with its output.
pub fn in_child_with_env<const N: usize>(test: &str, values: [&str; N]) -> Option<[String; N]> {
    if std::env::var(CHILD).is_ok_and(|child| child == test) {
        let names = std::env::var(NAMES).unwrap_or_default();
        let names: Vec<String> = names.split(',').map(str::to_owned).collect();
        return Some(
            names
                .try_into()
                .unwrap_or_else(|names| panic!("{N} variables expected, got {names:?}")),
        );
    }
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let names: [String; N] = std::array::from_fn(|_| {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        format!("TESTKIT_CHILD_VAR_{}_{n}", std::process::id())
    });
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        .env(NAMES, names.join(","))
        .envs(names.iter().zip(values))
        .output()
        .expect("the test binary runs again");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let ran = stdout.contains("test result: ok. 1 passed");
    assert!(
        output.status.success() && ran,
        "the child process running `{test}` {}:\n--- stdout\n{stdout}\n--- stderr\n{}",
        if output.status.success() {
            "ran no such test"
        } else {
            "failed"
        },
        String::from_utf8_lossy(&output.stderr)
    );
    None
}
