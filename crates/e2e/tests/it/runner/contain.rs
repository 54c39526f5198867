//! Containment of stdio servers (`switchyard_mcp_runner::contain`): no capabilities and no new
//! privileges, a private scratch home removed with the session, and SIGKILL for a server that
//! ignores SIGTERM. (That a server dies with a SIGKILLed runner is in `cli::contain`, which
//! kills a real `switchyard-server`.)

use super::fixture::*;
use serde_json::{Map, Value, json};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use switchyard_mcp_runner::{Dispatch, McpSession};

/// No capability at all, as `/proc/<pid>/status` prints it.
const NO_CAPABILITIES: &str = "0000000000000000";

async fn open(args: &[&str]) -> McpSession {
    McpSession::open(&stdio_launch(args), &EndpointGuard::device(), OPEN_DEADLINE)
        .await
        .expect("the fixture opens a session")
}

/// The text `tool` answers, and whether it is an error result.
async fn text_of(session: &McpSession, tool: &str, arguments: Value) -> (String, bool) {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object");
    };
    match session
        .call_tool(tool, arguments, Map::new(), CALL_TIMEOUT)
        .await
    {
        Dispatch::Answered { result, is_error } => (first_text(&result).to_owned(), is_error),
        other => panic!("expected an answer from {tool}, got {other:?}"),
    }
}

/// The value of line `field:` of a `/proc/<pid>/status` text.
#[track_caller]
fn status_field<'a>(status: &'a str, field: &str) -> &'a str {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_has_no_capabilities_and_no_new_privileges() {
    let ours = std::fs::read_to_string("/proc/self/status").expect("our status");
    let session = open(&[]).await;

    let (status, is_error) = text_of(
        &session,
        "read_file",
        json!({ "path": "/proc/self/status" }),
    )
    .await;

    assert!(!is_error, "{status}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        assert_eq!(status_field(&status, set), NO_CAPABILITIES, "{set}");
    }
    assert_eq!(status_field(&status, "NoNewPrivs"), "1");
    // A runner with CAP_SETPCAP (root, as in CI) empties the bounding set too, so that no
    // `exec` by the server can bring a capability back.
    let setpcap = 1_u64 << 8;
    let our_effective = u64::from_str_radix(status_field(&ours, "CapEff"), 16).expect("hex");
    if our_effective & setpcap != 0 {
        assert_eq!(status_field(&status, "CapBnd"), NO_CAPABILITIES);
    }
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_runs_in_a_private_scratch_home_removed_with_its_session() {
    let session = open(&[]).await;
    let other = open(&[]).await;

    let (home, _) = text_of(&session, "env", json!({ "name": "HOME" })).await;
    let (cwd, _) = text_of(&session, "cwd", json!({})).await;
    let (other_home, _) = text_of(&other, "env", json!({ "name": "HOME" })).await;

    assert_eq!(home, cwd, "HOME is the working directory");
    let home = PathBuf::from(home);
    let other_home = PathBuf::from(other_home);
    assert_ne!(home, other_home, "each session has its own");
    assert!(home.starts_with(std::env::temp_dir()), "{}", home.display());
    assert_ne!(Some(home.as_os_str()), std::env::var_os("HOME").as_deref());
    let metadata = std::fs::metadata(&home).expect("the scratch home exists");
    assert!(metadata.is_dir());
    assert_eq!(metadata.mode() & 0o777, 0o700, "private");
    assert_eq!(metadata.uid(), nix::unistd::geteuid().as_raw());

    session.close().await;
    assert!(!home.exists(), "closing removes {}", home.display());
    assert!(other_home.exists(), "the other session keeps its own");
    drop(other);
    assert!(
        !other_home.exists(),
        "dropping removes {}",
        other_home.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_ignoring_sigterm_is_killed_a_second_after_close() {
    let session = open(&["--ignore-sigterm", "--grandchild"]).await;
    let (answer, _) = text_of(&session, "echo", json!({ "text": "stubborn" })).await;
    assert_eq!(answer, "stubborn");
    let pgid = session
        .process_group_id()
        .expect("a stdio session has a group");
    assert!(live_group_members(pgid).len() >= 2, "server and grandchild");

    let started = Instant::now();
    let status = session.close().await.expect("the server is reaped");
    let took = started.elapsed();

    assert_eq!(
        status.signal(),
        Some(nix::sys::signal::Signal::SIGKILL as i32),
        "{status:?}"
    );
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(4),
        "SIGKILL follows SIGTERM after a second; close took {took:?}"
    );
    wait_until(Duration::from_secs(2), "the group is empty", || {
        live_group_members(pgid).is_empty()
    })
    .await;
}
