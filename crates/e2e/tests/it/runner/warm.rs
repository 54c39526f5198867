//! Warm sessions through the executor: reuse per client session, release, idle close, new
//! credentials, evictions after a timeout, a crash or a server that died while idle, and
//! redaction of secret values from completions. Processes are counted by the PIDs in the
//! lifecycle events.

use super::control::*;
use super::fixture::*;
use serde_json::json;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_mcp_runner::{ExecutorConfig, LaunchResolver, SessionLaunch, immediate_resolver};
use switchyard_protocol::runner::{Completion, LeasedCall};

/// The text of a successful completion.
#[track_caller]
fn succeeded_text(completion: &Completion) -> String {
    match completion {
        Completion::Succeeded { result } => first_text(result).to_owned(),
        other => panic!("expected success, got {other:?}"),
    }
}

/// The error code of an unknown completion.
#[track_caller]
fn unknown_code(completion: &Completion) -> String {
    match completion {
        Completion::Unknown { error } => error.code.clone(),
        other => panic!("expected unknown, got {other:?}"),
    }
}

/// How many different values `pids` holds.
fn distinct(pids: &[u32]) -> usize {
    pids.iter().collect::<HashSet<_>>().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_one_client_session_share_one_server_process() {
    let connection = connection(stdio_spec(&[]));
    let calls: Vec<LeasedCall> = (0..5)
        .map(|n| {
            call_on(
                &connection,
                Some("session-1"),
                "echo",
                json!({ "text": format!("call {n}") }),
                20,
            )
        })
        .collect();
    let control = Arc::new(TestControl::new(calls, StartAnswer::Proceed));

    let completions = run_until_completed(&control, plain_resolver(), 5).await;

    let mut texts: Vec<String> = completions
        .iter()
        .map(|(_, _, completion)| succeeded_text(completion))
        .collect();
    texts.sort();
    assert_eq!(texts, ["call 0", "call 1", "call 2", "call 3", "call 4"]);
    let pids = control.started_pids(connection.connection_id);
    assert_eq!(pids.len(), 1, "one server process for all five calls");
    assert_eq!(
        control.closed_reasons(connection.connection_id),
        ["shutdown"]
    );
    assert_eq!(
        control.exit_of(connection.connection_id, pids[0]),
        Some((Some(0), None))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_client_sessions_get_different_processes() {
    let connection = connection(stdio_spec(&[]));
    let calls = vec![
        call_on(&connection, Some("a"), "echo", json!({ "text": "a" }), 20),
        call_on(&connection, Some("b"), "echo", json!({ "text": "b" }), 20),
        call_on(&connection, None, "echo", json!({ "text": "default" }), 20),
    ];
    let control = Arc::new(TestControl::new(calls, StartAnswer::Proceed));

    let completions = run_until_completed(&control, plain_resolver(), 3).await;

    assert!(
        completions
            .iter()
            .all(|(_, _, completion)| matches!(completion, Completion::Succeeded { .. }))
    );
    let pids = control.started_pids(connection.connection_id);
    assert_eq!(pids.len(), 3);
    assert_eq!(
        distinct(&pids),
        3,
        "one process per client session: {pids:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_lets_the_active_call_finish_then_closes_the_session() {
    let connection = connection(stdio_spec(&[]));
    let slow = call_on(&connection, Some("r"), "slow", json!({ "seconds": 2 }), 20);
    let slow_id = slow.call_id;
    let control = Arc::new(TestControl::new(vec![slow], StartAnswer::Proceed));
    let running = start_executor(&control, plain_resolver(), config());
    wait_until(SOON, "the session starts", || {
        control.started_pids(connection.connection_id).len() == 1
    })
    .await;

    let released = running
        .handle
        .release(
            connection.connection_id,
            Some("r".to_owned()),
            Some(SUBMITTER),
        )
        .await;

    assert_eq!(released, 1);
    assert_eq!(
        succeeded_text(&completion_of(&control, slow_id).await),
        "slept 2",
        "the active call finishes on the released session"
    );
    wait_until(SOON, "the released session closes", || {
        control.closed_reasons(connection.connection_id) == ["released"]
    })
    .await;

    let next = call_on(
        &connection,
        Some("r"),
        "echo",
        json!({ "text": "again" }),
        20,
    );
    let next_id = next.call_id;
    control.push(next);
    assert_eq!(
        succeeded_text(&completion_of(&control, next_id).await),
        "again"
    );
    let pids = control.started_pids(connection.connection_id);
    assert_eq!(
        distinct(&pids),
        2,
        "the next call gets a new process: {pids:?}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_is_closed_after_the_idle_timeout() {
    let connection = connection(stdio_spec(&[]));
    let call = call_on(&connection, None, "echo", json!({ "text": "once" }), 20);
    let call_id = call.call_id;
    let control = Arc::new(TestControl::new(vec![call], StartAnswer::Proceed));
    let config = ExecutorConfig {
        idle_timeout: Duration::from_millis(300),
        ..config()
    };
    let running = start_executor(&control, plain_resolver(), config);

    assert_eq!(
        succeeded_text(&completion_of(&control, call_id).await),
        "once"
    );
    wait_until(SOON, "the idle session closes", || {
        control.closed_reasons(connection.connection_id) == ["idle"]
    })
    .await;
    let pid = control.started_pids(connection.connection_id)[0];
    wait_until(SOON, "its process exit is reported", || {
        control.exit_of(connection.connection_id, pid) == Some((Some(0), None))
    })
    .await;
    assert!(live_group_members(pid).is_empty(), "the server is gone");

    running.stop().await;
    assert_eq!(
        control.closed_reasons(connection.connection_id),
        ["idle"],
        "shutdown has nothing more to close"
    );
}

/// A resolver passing the current value of `token` to the server as `FIXTURE_TOKEN`.
fn token_resolver(token: &Arc<Mutex<String>>) -> LaunchResolver {
    let token = Arc::clone(token);
    immediate_resolver(move |call: &LeasedCall| {
        let value = token.lock().expect("token lock").clone();
        Ok(SessionLaunch {
            spec: call.connection.spec.clone(),
            env: vec![("FIXTURE_TOKEN".to_owned(), value)],
            headers: Vec::new(),
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_credentials_start_a_new_session_and_drain_the_old_one() {
    let connection = connection(stdio_spec(&[]));
    let token = Arc::new(Mutex::new("token-generation-1".to_owned()));
    let first = call_on(&connection, None, "echo", json!({ "text": "first" }), 20);
    let first_id = first.call_id;
    let control = Arc::new(TestControl::new(vec![first], StartAnswer::Proceed));
    let running = start_executor(&control, token_resolver(&token), config());
    assert_eq!(
        succeeded_text(&completion_of(&control, first_id).await),
        "first"
    );

    *token.lock().expect("token lock") = "token-generation-2".to_owned();
    let second = call_on(
        &connection,
        None,
        "env",
        json!({ "name": "FIXTURE_TOKEN" }),
        20,
    );
    let second_id = second.call_id;
    control.push(second);

    let answer = succeeded_text(&completion_of(&control, second_id).await);
    assert_eq!(
        answer, "[REDACTED]",
        "the new server has the new value (redacted in the result)"
    );
    wait_until(SOON, "the old session closes", || {
        control.closed_reasons(connection.connection_id) == ["credential_changed"]
    })
    .await;
    let pids = control.started_pids(connection.connection_id);
    assert_eq!(
        distinct(&pids),
        2,
        "a new process for the new credentials: {pids:?}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_in_results_and_error_messages_are_redacted() {
    const SECRET: &str = "sk-live-2c9f4e7a1b";
    let connection = connection(stdio_spec(&[]));
    let echoed = call_on(&connection, None, "env", json!({ "name": "API_KEY" }), 20);
    let failed = call_on(
        &connection,
        None,
        "fail",
        json!({ "message": format!("bad key {SECRET}, header Bearer hdr-token-5150") }),
        20,
    );
    let ids = [echoed.call_id, failed.call_id];
    let control = Arc::new(TestControl::new(vec![echoed, failed], StartAnswer::Proceed));
    let resolver: LaunchResolver = immediate_resolver(|call: &LeasedCall| {
        Ok(SessionLaunch {
            spec: call.connection.spec.clone(),
            env: vec![("API_KEY".to_owned(), SECRET.to_owned())],
            headers: vec![(
                "Authorization".to_owned(),
                "Bearer hdr-token-5150".to_owned(),
            )],
        })
    });

    run_until_completed(&control, resolver, 2).await;

    let echoed = control.completion(ids[0]).expect("completed");
    assert_eq!(succeeded_text(&echoed), "[REDACTED]");
    let failed = control.completion(ids[1]).expect("completed");
    match &failed {
        Completion::ToolError { result } => {
            assert_eq!(first_text(result), "bad key [REDACTED], header [REDACTED]");
        }
        other => panic!("expected a tool error, got {other:?}"),
    }
    for completion in [echoed, failed] {
        let stored = serde_json::to_string(&completion).expect("serialize");
        assert!(!stored.contains(SECRET), "secret leaked: {stored}");
        assert!(
            !stored.contains("hdr-token-5150"),
            "secret leaked: {stored}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_call_closes_its_session() {
    let connection = connection(stdio_spec(&[]));
    let slow = call_on(&connection, None, "slow", json!({ "seconds": 60 }), 1);
    let slow_id = slow.call_id;
    let control = Arc::new(TestControl::new(vec![slow], StartAnswer::Proceed));
    let running = start_executor(&control, plain_resolver(), config());

    assert_eq!(
        unknown_code(&completion_of(&control, slow_id).await),
        "timeout"
    );
    wait_until(SOON, "the session closes", || {
        control.closed_reasons(connection.connection_id) == ["timeout"]
    })
    .await;
    let pid = control.started_pids(connection.connection_id)[0];
    wait_until(SOON, "the server is gone", || {
        live_group_members(pid).is_empty()
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_evicts_the_session_and_the_next_call_gets_a_new_process() {
    let connection = connection(stdio_spec(&[]));
    let crash = call_on(&connection, Some("c"), "crash", json!({}), 20);
    let crash_id = crash.call_id;
    let control = Arc::new(TestControl::new(vec![crash], StartAnswer::Proceed));
    let running = start_executor(&control, plain_resolver(), config());

    assert_eq!(
        unknown_code(&completion_of(&control, crash_id).await),
        "transport_closed"
    );
    wait_until(SOON, "the dead session is closed", || {
        control.closed_reasons(connection.connection_id) == ["transport_closed"]
    })
    .await;
    let crashed_pid = control.started_pids(connection.connection_id)[0];
    wait_until(SOON, "the crash's exit status is reported", || {
        control.exit_of(connection.connection_id, crashed_pid) == Some((Some(3), None))
    })
    .await;

    let next = call_on(
        &connection,
        Some("c"),
        "echo",
        json!({ "text": "alive" }),
        20,
    );
    let next_id = next.call_id;
    control.push(next);
    assert_eq!(
        succeeded_text(&completion_of(&control, next_id).await),
        "alive"
    );
    let pids = control.started_pids(connection.connection_id);
    assert_eq!(distinct(&pids), 2, "{pids:?}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_died_while_idle_is_replaced_without_losing_the_call() {
    let connection = connection(stdio_spec(&[]));
    let first = call_on(&connection, None, "echo", json!({ "text": "first" }), 20);
    let first_id = first.call_id;
    let control = Arc::new(TestControl::new(vec![first], StartAnswer::Proceed));
    let running = start_executor(&control, plain_resolver(), config());
    assert_eq!(
        succeeded_text(&completion_of(&control, first_id).await),
        "first"
    );
    let dead_pid = control.started_pids(connection.connection_id)[0];

    let pid = nix::unistd::Pid::from_raw(i32::try_from(dead_pid).expect("a pid fits i32"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).expect("kill the idle server");
    wait_until(SOON, "the idle server is dead", || {
        live_group_members(dead_pid).is_empty()
    })
    .await;
    let next = call_on(&connection, None, "echo", json!({ "text": "second" }), 20);
    let next_id = next.call_id;
    control.push(next);

    assert_eq!(
        succeeded_text(&completion_of(&control, next_id).await),
        "second",
        "the call is sent on a fresh session, not lost"
    );
    let pids = control.started_pids(connection.connection_id);
    assert_eq!(distinct(&pids), 2, "{pids:?}");
    wait_until(SOON, "the dead session is closed", || {
        control.closed_reasons(connection.connection_id) == ["transport_closed"]
    })
    .await;
    wait_until(SOON, "the kill is reported", || {
        control.exit_of(connection.connection_id, dead_pid)
            == Some((None, Some("SIGKILL".to_owned())))
    })
    .await;
    running.stop().await;
}
