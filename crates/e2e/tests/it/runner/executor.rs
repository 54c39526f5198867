//! The executor loop against an in-test control plane and the real fixture: outcomes, starts,
//! fencing, retries of the control plane and shutdown.

use super::control::*;
use super::fixture::*;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use switchyard_mcp_runner::{LaunchResolver, SessionLaunch, immediate_resolver};
use switchyard_protocol::CallId;
use switchyard_protocol::api::{CallError, ConnectorSpec};
use switchyard_protocol::runner::{Completion, LeasedCall};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_call_succeeds() {
    let call = leased(
        stdio_spec(&[]),
        "echo",
        json!({ "text": "via executor" }),
        20,
    );
    let call_id = call.call_id;
    let connection_id = call.connection.connection_id;
    let control = Arc::new(TestControl::new(vec![call], StartAnswer::Proceed));

    let completions = run_until_completed(&control, plain_resolver(), 1).await;

    assert_eq!(control.starts(), vec![(call_id, EPOCH)]);
    assert_eq!(completions.len(), 1);
    let (completed_id, epoch, completion) = &completions[0];
    assert_eq!((*completed_id, *epoch), (call_id, EPOCH));
    match completion {
        Completion::Succeeded { result } => assert_eq!(first_text(result), "via executor"),
        other => panic!("expected success, got {other:?}"),
    }
    // Shutdown closed the session, and the server exited on its own when stdin closed.
    let pids = control.started_pids(connection_id);
    assert_eq!(pids.len(), 1);
    assert_eq!(control.closed_reasons(connection_id), ["shutdown"]);
    assert_eq!(
        control.exit_of(connection_id, pids[0]),
        Some((Some(0), None))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_runs_once_and_carries_its_request_id() {
    let count_file = temp_path("count");
    let call = count_call(&count_file);
    let request_id = call.request_id;
    let control = Arc::new(TestControl::new(vec![call], StartAnswer::Proceed));

    let completions = run_until_completed(&control, plain_resolver(), 1).await;

    assert!(matches!(completions[0].2, Completion::Succeeded { .. }));
    let lines = count_lines(&count_file);
    assert_eq!(lines.len(), 1, "executed exactly once: {lines:?}");
    assert_eq!(lines[0]["request_id"], json!(request_id.to_string()));
    let _ = std::fs::remove_file(&count_file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_timeouts_and_crashes_map_to_outcomes() {
    let fail = leased(stdio_spec(&[]), "fail", json!({ "message": "nope" }), 20);
    let slow = leased(stdio_spec(&[]), "slow", json!({ "seconds": 60 }), 1);
    let crash = leased(stdio_spec(&[]), "crash", json!({}), 20);
    let ids = [fail.call_id, slow.call_id, crash.call_id];
    let control = Arc::new(TestControl::new(
        vec![fail, slow, crash],
        StartAnswer::Proceed,
    ));

    let completions = run_until_completed(&control, plain_resolver(), 3).await;

    let outcome = |id: CallId| {
        completions
            .iter()
            .find(|(completed, _, _)| *completed == id)
            .map(|(_, _, completion)| completion.clone())
            .expect("a completion for every call")
    };
    match outcome(ids[0]) {
        Completion::ToolError { result } => assert_eq!(first_text(&result), "nope"),
        other => panic!("fail: expected a tool error, got {other:?}"),
    }
    match outcome(ids[1]) {
        Completion::Unknown { error } => assert_eq!(error.code, "timeout"),
        other => panic!("slow: expected unknown/timeout, got {other:?}"),
    }
    match outcome(ids[2]) {
        Completion::Unknown { error } => assert_eq!(error.code, "transport_closed"),
        other => panic!("crash: expected unknown/transport_closed, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_start_never_runs_the_tool() {
    let count_file = temp_path("abandon");
    let control = Arc::new(TestControl::new(
        vec![count_call(&count_file)],
        StartAnswer::Abandon,
    ));

    let running = start_executor(&control, plain_resolver(), config());
    wait_until(SOON, "the start is asked", || !control.starts().is_empty()).await;
    running.stop().await;

    assert!(count_lines(&count_file).is_empty(), "the tool must not run");
    assert!(
        control.completions().is_empty(),
        "an abandoned call reports nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_lease_stops_the_executor() {
    let mut control = TestControl::new(Vec::new(), StartAnswer::Proceed);
    control.lease_fenced = true;
    let control = Arc::new(control);

    let running = start_executor(&control, plain_resolver(), config());

    stopped(running.task).await;
    assert!(control.starts().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_start_sends_nothing_and_stops_the_executor() {
    let count_file = temp_path("fenced");
    let control = Arc::new(TestControl::new(
        vec![count_call(&count_file)],
        StartAnswer::Fenced,
    ));

    let running = start_executor(&control, plain_resolver(), config());

    stopped(running.task).await;
    assert_eq!(control.starts().len(), 1);
    assert!(count_lines(&count_file).is_empty(), "the tool must not run");
    assert!(control.completions().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unavailable_control_plane_gets_the_completion_later() {
    let call = leased(stdio_spec(&[]), "echo", json!({ "text": "retry me" }), 20);
    let control = TestControl::new(vec![call], StartAnswer::Proceed);
    control.complete_failures.store(2, Ordering::SeqCst);
    let control = Arc::new(control);

    let completions = run_until_completed(&control, plain_resolver(), 1).await;

    assert_eq!(completions.len(), 1);
    assert_eq!(control.complete_attempts.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_waits_for_a_running_call() {
    let call = leased(stdio_spec(&[]), "slow", json!({ "seconds": 1 }), 20);
    let control = Arc::new(TestControl::new(vec![call], StartAnswer::Proceed));

    let running = start_executor(&control, plain_resolver(), config());
    wait_until(SOON, "the call starts", || !control.starts().is_empty()).await;
    running.stop().await;

    let completions = control.completions();
    assert_eq!(
        completions.len(),
        1,
        "the running call finished before the executor returned"
    );
    match &completions[0].2 {
        Completion::Succeeded { result } => assert_eq!(first_text(result), "slept 1"),
        other => panic!("expected success, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_and_spawn_failures_fail_the_call_before_start() {
    let unresolvable = leased(stdio_spec(&[]), "echo", json!({ "text": "x" }), 20);
    let missing_program = leased(
        ConnectorSpec::Stdio {
            command: "/nonexistent/switchyard-no-such-server".to_owned(),
            args: Vec::new(),
            env: Vec::new(),
        },
        "echo",
        json!({ "text": "x" }),
        20,
    );
    let unresolvable_id = unresolvable.call_id;
    let missing_id = missing_program.call_id;
    let control = Arc::new(TestControl::new(
        vec![unresolvable, missing_program],
        StartAnswer::Proceed,
    ));
    let resolver: LaunchResolver = immediate_resolver(move |call: &LeasedCall| {
        if call.call_id == unresolvable_id {
            return Err(CallError {
                code: "credential_missing".to_owned(),
                message: "no value for API_KEY".to_owned(),
            });
        }
        Ok(SessionLaunch {
            spec: call.connection.spec.clone(),
            env: Vec::new(),
            headers: Vec::new(),
        })
    });

    let completions = run_until_completed(&control, resolver, 2).await;

    assert!(control.starts().is_empty(), "nothing is started");
    let code = |id: CallId| {
        completions
            .iter()
            .find_map(|(completed, _, completion)| match completion {
                Completion::Failed { error } if *completed == id => Some(error.code.clone()),
                _ => None,
            })
            .expect("a failed completion")
    };
    assert_eq!(code(unresolvable_id), "credential_missing");
    assert_eq!(code(missing_id), "spawn_failed");
}
