//! Helpers: where the fixture binary is, launches for it, result accessors, process scans.

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;
use switchyard_mcp_runner::SessionLaunch;
/// Sessions in these tests reach fixtures on this machine, as a device runner may.
pub use switchyard_mcp_runner::endpoints::EndpointGuard;
use switchyard_protocol::api::ConnectorSpec;
use switchyard_testkit::bins;
use switchyard_testkit::poll::Bound;
use switchyard_testkit::scratch;

/// Deadline for opening a session in tests: generous, a loaded 2-core machine is slow.
pub const OPEN_DEADLINE: Duration = Duration::from_secs(20);
/// Timeout for calls expected to answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// The fixture binary built with the workspace (`target/debug/switchyard-fixture`).
#[track_caller]
pub fn fixture_binary() -> PathBuf {
    use_runner_as_helper();
    crate::harness::binary(bins::FIXTURE)
}

/// Starts this process's stdio servers through `switchyard-mcp-runner`'s containment helper
/// mode (a test executable cannot serve as the helper itself).
#[track_caller]
pub fn use_runner_as_helper() {
    switchyard_mcp_runner::contain::use_helper_program(crate::harness::binary(bins::RUNNER));
}

/// The connector spec running the fixture over stdio with `args` after `stdio`.
pub fn stdio_spec(args: &[&str]) -> ConnectorSpec {
    let mut all = vec!["stdio".to_owned()];
    all.extend(args.iter().map(|arg| (*arg).to_owned()));
    ConnectorSpec::Stdio {
        command: fixture_binary().to_string_lossy().into_owned(),
        args: all,
        env: Vec::new(),
    }
}

/// A launch of the fixture over stdio with no secrets.
pub fn stdio_launch(args: &[&str]) -> SessionLaunch {
    SessionLaunch {
        spec: stdio_spec(args),
        env: Vec::new(),
        headers: Vec::new(),
    }
}

/// `sh -c script` with `args` as `$1`, `$2`, …: the fixture behind a wrapper that lets a test
/// see what the server sees.
pub fn shell_spec(script: &str, args: &[&Path]) -> ConnectorSpec {
    use_runner_as_helper();
    let mut all = vec!["-c".to_owned(), script.to_owned(), "sh".to_owned()];
    all.extend(args.iter().map(|arg| arg.to_string_lossy().into_owned()));
    ConnectorSpec::Stdio {
        command: "sh".to_owned(),
        args: all,
        env: Vec::new(),
    }
}

/// The fixture over stdio with a copy of everything it reads on stdin written to `stdin_copy`.
pub fn stdin_copying_spec(stdin_copy: &Path) -> ConnectorSpec {
    shell_spec(r#"tee "$1" | "$2" stdio"#, &[stdin_copy, &fixture_binary()])
}

/// Whether file `path` exists and contains `needle`.
pub fn file_contains(path: &Path, needle: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| text.contains(needle))
}

/// A path in the temp directory no other test uses (not created).
pub fn temp_path(name: &str) -> PathBuf {
    scratch::unique_path(name)
}

/// `{key: value}` as tool arguments.
pub fn args(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), value.clone()))
        .collect()
}

/// The text of a `CallToolResult`'s first content block.
#[track_caller]
pub fn first_text(result: &Value) -> &str {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {result}"))
}

/// The lines of a count file; a missing file is no lines (nothing executed).
pub fn count_lines(path: &Path) -> Vec<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .lines()
            .map(|line| serde_json::from_str(line).expect("count file line is JSON"))
            .collect(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => panic!("cannot read {}: {error}", path.display()),
    }
}

/// PIDs of the live (not zombie) processes in process group `pgid`, from `/proc/*/stat`.
pub fn live_group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        panic!("cannot read /proc");
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // The process may exit between the listing and the read.
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid pgrp …`; comm may contain spaces and parentheses.
            let Some((_, after_comm)) = stat.rsplit_once(')') else {
                return false;
            };
            let fields: Vec<&str> = after_comm.split_whitespace().collect();
            let dead = matches!(fields.first(), Some(&"Z") | Some(&"X"));
            !dead && fields.get(2) == Some(&pgid.to_string().as_str())
        })
        .collect()
}

/// Polls `condition` every 10 ms until it holds; panics naming `what` after `within`.
pub async fn wait_until(within: Duration, what: &str, condition: impl FnMut() -> bool) {
    if Bound::new(within, Duration::from_millis(10))
        .until_true(what, condition)
        .await
        .is_err()
    {
        panic!("timed out waiting until {what}");
    }
}
