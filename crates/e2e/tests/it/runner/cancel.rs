//! Cancelling calls through the executor handle: before the start (never started, nothing
//! reported, nothing run) and after dispatch (`notifications/cancelled` reaches the server,
//! which stops; without an answer the call is unknown and its session closed).
//!
//! The fixture runs behind a small `sh` wrapper so the test can see what the server sees: a
//! gate file it waits for before starting, or a copy of its stdin and its stderr in files.

use super::control::*;
use super::fixture::*;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_mcp_runner::{CancelOutcome, ExecutorConfig};
use switchyard_protocol::runner::Completion;
use switchyard_protocol::{CallId, ConnectionId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cancelled_before_its_start_is_never_started() {
    let started = temp_path("gate-started");
    let gate = temp_path("gate-open");
    let count_file = temp_path("cancel-count");
    // Starts the fixture only once the gate file exists, so the call is still waiting for its
    // session when the test cancels it.
    let spec = shell_spec(
        r#"touch "$1"; while [ ! -e "$2" ]; do sleep 0.01; done; exec "$3" stdio --count-file "$4""#,
        &[&started, &gate, &fixture_binary(), &count_file],
    );
    let connection = connection(spec);
    let call = call_on(&connection, None, "count", json!({ "label": "x" }), 20);
    let call_id = call.call_id;
    let control = Arc::new(TestControl::new(vec![call], StartAnswer::Proceed));
    let running = start_executor(&control, plain_resolver(), config());
    assert_eq!(
        running.handle.cancel(CallId::new()).await,
        CancelOutcome::NotFound
    );
    assert_eq!(
        running
            .handle
            .release(ConnectionId::new(), None, None)
            .await,
        0
    );
    wait_until(SOON, "the server process is spawned", || started.exists()).await;

    let outcome = running.handle.cancel(call_id).await;

    assert_eq!(outcome, CancelOutcome::NotStarted);
    std::fs::write(&gate, b"").expect("open the gate");
    wait_until(SOON, "the session opens", || {
        control.started_pids(connection.connection_id).len() == 1
    })
    .await;
    running.stop().await;
    assert!(control.starts().is_empty(), "start is never asked");
    assert!(control.completions().is_empty(), "nothing is reported");
    assert!(count_lines(&count_file).is_empty(), "the tool never ran");
    assert_eq!(
        control.closed_reasons(connection.connection_id),
        ["shutdown"]
    );
    for path in [&started, &gate, &count_file] {
        let _ = std::fs::remove_file(path);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatched_call_is_cancelled_at_the_server() {
    let stdin_copy = temp_path("cancel-stdin");
    let stderr_file = temp_path("cancel-stderr");
    // The fixture's stdin is copied to a file (the test sees the request arrive) and its stderr
    // goes to another (the test sees it honour the cancellation).
    let spec = shell_spec(
        r#"tee "$1" | "$2" stdio 2>"$3""#,
        &[&stdin_copy, &fixture_binary(), &stderr_file],
    );
    let connection = connection(spec);
    let slow = call_on(&connection, None, "slow", json!({ "seconds": 60 }), 60);
    let slow_id = slow.call_id;
    let control = Arc::new(TestControl::new(vec![slow], StartAnswer::Proceed));
    let config = ExecutorConfig {
        cancel_grace: Duration::from_millis(500),
        ..config()
    };
    let running = start_executor(&control, plain_resolver(), config);
    wait_until(SOON, "the request reaches the server", || {
        file_contains(&stdin_copy, "tools/call")
    })
    .await;
    let cancelled_at = Instant::now();

    let outcome = running.handle.cancel(slow_id).await;

    assert_eq!(outcome, CancelOutcome::Cancelling);
    match completion_of(&control, slow_id).await {
        Completion::Unknown { error } => {
            assert_eq!(error.code, "cancelled");
            assert_eq!(
                error.message,
                "cancelled after dispatch; the server did not answer, so the effect is uncertain"
            );
        }
        other => panic!("expected unknown/cancelled, got {other:?}"),
    }
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(20),
        "the call ended long before its 60 s"
    );
    assert!(file_contains(&stdin_copy, "notifications/cancelled"));
    wait_until(SOON, "the server stops the call", || {
        file_contains(&stderr_file, "slow: cancelled by the client")
    })
    .await;
    wait_until(SOON, "the session closes", || {
        control.closed_reasons(connection.connection_id) == ["cancelled"]
    })
    .await;
    // A finished call is no longer held (once the loop has seen its task end).
    let deadline = Instant::now() + SOON;
    while running.handle.cancel(slow_id).await != CancelOutcome::NotFound {
        assert!(Instant::now() < deadline, "the finished call is still held");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    running.stop().await;
    for path in [&stdin_copy, &stderr_file] {
        let _ = std::fs::remove_file(path);
    }
}
