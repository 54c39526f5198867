//! Stdio sessions against the fixture: answers, errors, timeouts, crashes, stderr, process
//! groups, environment and discovery.

use super::fixture::*;
use serde_json::{Map, Value, json};
use std::time::{Duration, Instant};
use switchyard_mcp_runner::{
    CallCancellation, Dispatch, McpSession, SessionError, SessionLaunch, discover,
};
use switchyard_protocol::api::ConnectorSpec;
use tokio_util::sync::CancellationToken;

async fn open(launch: &SessionLaunch) -> McpSession {
    McpSession::open(launch, &EndpointGuard::device(), OPEN_DEADLINE)
        .await
        .expect("the fixture opens a session")
}

async fn call(session: &McpSession, tool: &str, arguments: Map<String, Value>) -> Dispatch {
    session
        .call_tool(tool, arguments, Map::new(), CALL_TIMEOUT)
        .await
}

#[track_caller]
fn answered(dispatch: Dispatch) -> (Value, bool) {
    match dispatch {
        Dispatch::Answered { result, is_error } => (result, is_error),
        other => panic!("expected an answer, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_is_answered() {
    let session = open(&stdio_launch(&[])).await;

    let (result, is_error) =
        answered(call(&session, "echo", args(&[("text", json!("hello runner"))])).await);

    assert!(!is_error);
    assert_eq!(first_text(&result), "hello runner");
    assert_eq!(
        result["structuredContent"],
        json!({ "text": "hello runner" })
    );
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_is_an_error_result() {
    let session = open(&stdio_launch(&[])).await;

    let (result, is_error) =
        answered(call(&session, "fail", args(&[("message", json!("disk full"))])).await);

    assert!(is_error);
    assert_eq!(result["isError"], json!(true));
    assert_eq!(first_text(&result), "disk full");
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tool_is_rejected_by_the_server() {
    let session = open(&stdio_launch(&[])).await;

    let dispatch = call(&session, "no_such_tool", Map::new()).await;

    match dispatch {
        Dispatch::Rejected { code, message } => {
            assert_eq!(code, -32602, "invalid params");
            assert_eq!(message, "tool not found");
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_big_answer_arrives_whole() {
    let session = open(&stdio_launch(&[])).await;
    let bytes = 3 * 1024 * 1024 + 17;

    let (result, is_error) =
        answered(call(&session, "big", args(&[("bytes", json!(bytes))])).await);

    assert!(!is_error);
    let text = first_text(&result);
    assert_eq!(text.len(), bytes);
    assert!(text.bytes().all(|byte| byte == b'x'));
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_noise_stays_out_of_the_result_but_is_in_the_tail() {
    let session = open(&stdio_launch(&[])).await;

    let (result, _) = answered(call(&session, "noisy", args(&[("lines", json!(5))])).await);

    assert_eq!(first_text(&result), "quiet result");
    assert!(!result.to_string().contains("noise line"));
    wait_until(Duration::from_secs(5), "stderr reaches the tail", || {
        session
            .stderr_tail()
            .is_some_and(|tail| tail.contains("noise line 4"))
    })
    .await;
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_crashing_mid_call_loses_the_call_and_later_calls_are_not_sent() {
    let session = open(&stdio_launch(&[])).await;

    let crashed = call(&session, "crash", Map::new()).await;
    assert!(matches!(crashed, Dispatch::Lost { .. }), "got {crashed:?}");

    let after = call(&session, "echo", args(&[("text", json!("anyone?"))])).await;
    assert!(matches!(after, Dispatch::NotSent { .. }), "got {after:?}");
    assert!(session.is_closed());
    let status = session.close().await.expect("the server is reaped");
    assert_eq!(status.code(), Some(3), "the crash tool's exit status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_call_past_its_timeout_times_out_and_is_cancelled() {
    let session = open(&stdio_launch(&[])).await;
    let started = Instant::now();

    let dispatch = session
        .call_tool(
            "slow",
            args(&[("seconds", json!(30))]),
            Map::new(),
            Duration::from_millis(300),
        )
        .await;

    assert_eq!(dispatch, Dispatch::TimedOut);
    assert!(started.elapsed() < Duration::from_secs(5));
    // The fixture logs when it receives notifications/cancelled for the running call.
    wait_until(
        Duration::from_secs(5),
        "the server sees the cancellation",
        || {
            session
                .stderr_tail()
                .is_some_and(|tail| tail.contains("slow: cancelled by the client"))
        },
    )
    .await;
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_is_cancelled_at_the_server_and_the_session_stays_usable() {
    let stdin_copy = temp_path("session-cancel-stdin");
    let session = open(&SessionLaunch {
        spec: stdin_copying_spec(&stdin_copy),
        env: Vec::new(),
        headers: Vec::new(),
    })
    .await;
    let cancel = CallCancellation {
        token: CancellationToken::new(),
        grace: Duration::from_millis(300),
    };
    let started = Instant::now();

    // Cancelled once the request has reached the server: a cancellation sent in the same
    // instant as the request may overtake it on the wire.
    let (dispatch, ()) = tokio::join!(
        session.call_tool_until_cancelled(
            "slow",
            args(&[("seconds", json!(30))]),
            Map::new(),
            CALL_TIMEOUT,
            &cancel,
        ),
        async {
            wait_until(
                Duration::from_secs(10),
                "the request reaches the server",
                || file_contains(&stdin_copy, "tools/call"),
            )
            .await;
            cancel.token.cancel();
        }
    );

    assert_eq!(
        dispatch,
        Dispatch::Cancelled,
        "the server does not answer a cancelled call"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    wait_until(
        Duration::from_secs(5),
        "the server sees the cancellation",
        || {
            session
                .stderr_tail()
                .is_some_and(|tail| tail.contains("slow: cancelled by the client"))
        },
    )
    .await;
    let (result, _) =
        answered(call(&session, "echo", args(&[("text", json!("still here"))])).await);
    assert_eq!(first_text(&result), "still here");
    assert!(file_contains(&stdin_copy, "notifications/cancelled"));
    let status = session.close().await.expect("the server is reaped");
    assert_eq!(
        status.code(),
        Some(0),
        "it exited on its own when stdin closed"
    );
    let _ = std::fs::remove_file(&stdin_copy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_leaves_no_process_in_the_group() {
    let session = open(&stdio_launch(&["--grandchild"])).await;
    let pgid = session
        .process_group_id()
        .expect("a stdio session has a group");
    let members = live_group_members(pgid);
    assert!(
        members.len() >= 2,
        "the fixture and its grandchild run in group {pgid}: {members:?}"
    );

    let started = Instant::now();
    session.close().await;

    assert!(
        started.elapsed() < Duration::from_secs(4),
        "close took {:?}",
        started.elapsed()
    );
    wait_until(Duration::from_secs(5), "the group is empty", || {
        live_group_members(pgid).is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_an_open_session_kills_its_group() {
    let session = open(&stdio_launch(&["--grandchild"])).await;
    let pgid = session
        .process_group_id()
        .expect("a stdio session has a group");
    assert!(!live_group_members(pgid).is_empty());

    drop(session);

    wait_until(Duration::from_secs(5), "the group is empty", || {
        live_group_members(pgid).is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_sees_launch_values_but_not_the_runner_environment() {
    let mut launch = stdio_launch(&[]);
    launch.env = vec![("FIXTURE_API_KEY".to_owned(), "value-from-launch".to_owned())];
    let session = open(&launch).await;

    let (result, is_error) =
        answered(call(&session, "env", args(&[("name", json!("FIXTURE_API_KEY"))])).await);
    assert!(!is_error);
    assert_eq!(first_text(&result), "value-from-launch");

    // Cargo sets this for the test process; the child must not inherit it.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let (result, is_error) = answered(
        call(
            &session,
            "env",
            args(&[("name", json!("CARGO_MANIFEST_DIR"))]),
        )
        .await,
    );
    assert!(is_error);
    assert_eq!(first_text(&result), "not set");
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserved_variable_is_refused_before_spawning() {
    let mut launch = stdio_launch(&[]);
    launch.env = vec![("SWITCHYARD_TOKEN".to_owned(), "syt_value".to_owned())];

    let error = McpSession::open(&launch, &EndpointGuard::device(), OPEN_DEADLINE)
        .await
        .expect_err("reserved variable");

    assert!(
        matches!(&error, SessionError::ReservedEnv { name } if name == "SWITCHYARD_TOKEN"),
        "got {error:?}"
    );
    assert!(!error.to_string().contains("syt_value"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_program_is_a_spawn_error() {
    let launch = SessionLaunch {
        spec: ConnectorSpec::Stdio {
            command: "/nonexistent/switchyard-no-such-server".to_owned(),
            args: Vec::new(),
            env: Vec::new(),
        },
        env: Vec::new(),
        headers: Vec::new(),
    };

    let error = McpSession::open(&launch, &EndpointGuard::device(), OPEN_DEADLINE)
        .await
        .expect_err("missing program");

    assert!(matches!(error, SessionError::Spawn { .. }), "got {error:?}");
    assert!(error.to_string().contains("switchyard-no-such-server"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_at_start_reports_its_stderr() {
    use_runner_as_helper();
    let launch = SessionLaunch {
        spec: ConnectorSpec::Stdio {
            command: "sh".to_owned(),
            args: vec![
                "-c".to_owned(),
                "echo 'config file not found' >&2; exit 2".to_owned(),
            ],
            env: Vec::new(),
        },
        env: Vec::new(),
        headers: Vec::new(),
    };

    let error = McpSession::open(&launch, &EndpointGuard::device(), OPEN_DEADLINE)
        .await
        .expect_err("the server exits before initializing");

    assert!(
        matches!(error, SessionError::Initialize { .. }),
        "got {error:?}"
    );
    assert!(
        error
            .stderr_tail()
            .is_some_and(|tail| tail.contains("config file not found")),
        "got {:?}",
        error.stderr_tail()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_initialize_times_out_and_is_killed() {
    use_runner_as_helper();
    let marker = temp_path("hung-server");
    let launch = SessionLaunch {
        spec: ConnectorSpec::Stdio {
            command: "sh".to_owned(),
            // Reads nothing and never answers; records its PID so the test can check it died.
            args: vec![
                "-c".to_owned(),
                format!("echo $$ > '{}'; exec sleep 3600", marker.display()),
            ],
            env: Vec::new(),
        },
        env: Vec::new(),
        headers: Vec::new(),
    };

    let error = McpSession::open(
        &launch,
        &EndpointGuard::device(),
        Duration::from_millis(500),
    )
    .await
    .expect_err("no handshake");

    assert!(
        matches!(
            error,
            SessionError::Timeout {
                stage: "initialize",
                ..
            }
        ),
        "got {error:?}"
    );
    let pid: u32 = std::fs::read_to_string(&marker)
        .expect("the server wrote its PID")
        .trim()
        .parse()
        .expect("a PID");
    wait_until(Duration::from_secs(5), "the hung server is gone", || {
        live_group_members(pid).is_empty()
    })
    .await;
    let _ = std::fs::remove_file(&marker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discover_lists_the_tools_and_what_the_server_is_for() {
    let found = discover(&stdio_launch(&[]), &EndpointGuard::device(), OPEN_DEADLINE)
        .await
        .expect("discovery");
    assert!(
        found
            .about
            .as_deref()
            .is_some_and(|about| about.starts_with("A controllable MCP server")),
        "{:?}",
        found.about
    );
    let tools = found.tools;

    let mut names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    names.sort_unstable();
    for expected in [
        "big", "count", "crash", "echo", "env", "fail", "noisy", "slow",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let echo = tools
        .iter()
        .find(|tool| tool.name == "echo")
        .expect("echo listed");
    assert!(
        echo.description
            .as_deref()
            .is_some_and(|text| !text.is_empty())
    );
    assert_eq!(echo.input_schema["type"], json!("object"));
    assert!(echo.input_schema["properties"]["text"].is_object());
    let count = tools
        .iter()
        .find(|tool| tool.name == "count")
        .expect("count listed");
    assert_eq!(
        count
            .annotations
            .as_ref()
            .map(|hints| &hints["readOnlyHint"]),
        Some(&json!(false))
    );
}
