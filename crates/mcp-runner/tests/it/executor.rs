//! The executor loop against an in-test control plane and the real fixture.
//!
//! [`TestControl`] implements our own `ControlPlane` trait with a queue and recorded starts and
//! completions; the MCP side is the real fixture process.

use crate::fixture::*;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_mcp_runner::{
    ControlError, ControlPlane, Executor, ExecutorConfig, LaunchResolver, SessionLaunch,
    StartDecision,
};
use switchyard_protocol::api::{CallError, ConnectorSpec};
use switchyard_protocol::runner::{Completion, ConnectionTarget, Epoch, LeasedCall};
use switchyard_protocol::{CallId, ConnectionId, RequestId};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const EPOCH: Epoch = Epoch(7);

/// What [`TestControl::start`] answers.
#[derive(Clone, Copy, Debug)]
enum StartAnswer {
    Proceed,
    Abandon,
    Fenced,
}

/// A control plane in memory: a queue of calls, a scripted start answer, and records.
struct TestControl {
    queue: Mutex<VecDeque<LeasedCall>>,
    start_answer: StartAnswer,
    lease_fenced: bool,
    /// How many upcoming `complete` calls fail as unavailable before one succeeds.
    complete_failures: AtomicUsize,
    complete_attempts: AtomicUsize,
    starts: Mutex<Vec<(CallId, Epoch)>>,
    completions: Mutex<Vec<(CallId, Epoch, Completion)>>,
}

impl TestControl {
    fn new(calls: Vec<LeasedCall>, start_answer: StartAnswer) -> Self {
        Self {
            queue: Mutex::new(calls.into()),
            start_answer,
            lease_fenced: false,
            complete_failures: AtomicUsize::new(0),
            complete_attempts: AtomicUsize::new(0),
            starts: Mutex::new(Vec::new()),
            completions: Mutex::new(Vec::new()),
        }
    }

    fn starts(&self) -> Vec<(CallId, Epoch)> {
        self.starts.lock().expect("starts lock").clone()
    }

    fn completions(&self) -> Vec<(CallId, Epoch, Completion)> {
        self.completions.lock().expect("completions lock").clone()
    }
}

impl ControlPlane for TestControl {
    async fn lease(&self, max: usize, wait: Duration) -> Result<Vec<LeasedCall>, ControlError> {
        if self.lease_fenced {
            return Err(ControlError::Fenced(EPOCH));
        }
        let leased: Vec<LeasedCall> = {
            let mut queue = self.queue.lock().expect("queue lock");
            let take = max.min(queue.len());
            queue.drain(..take).collect()
        };
        if leased.is_empty() {
            // A long poll on which no work arrives.
            tokio::time::sleep(wait).await;
        }
        Ok(leased)
    }

    async fn start(&self, call_id: CallId, epoch: Epoch) -> Result<StartDecision, ControlError> {
        self.starts
            .lock()
            .expect("starts lock")
            .push((call_id, epoch));
        match self.start_answer {
            StartAnswer::Proceed => Ok(StartDecision::Proceed),
            StartAnswer::Abandon => Ok(StartDecision::Abandon {
                reason: "cancelled by the user".to_owned(),
            }),
            StartAnswer::Fenced => Err(ControlError::Fenced(epoch)),
        }
    }

    async fn complete(
        &self,
        call_id: CallId,
        epoch: Epoch,
        completion: Completion,
    ) -> Result<(), ControlError> {
        self.complete_attempts.fetch_add(1, Ordering::SeqCst);
        let failing = self
            .complete_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if failing {
            return Err(ControlError::Unavailable("database restarting".to_owned()));
        }
        self.completions
            .lock()
            .expect("completions lock")
            .push((call_id, epoch, completion));
        Ok(())
    }
}

/// A leased call of `tool` on a connection running `spec`.
fn leased(spec: ConnectorSpec, tool: &str, arguments: Value, timeout_seconds: u32) -> LeasedCall {
    LeasedCall {
        call_id: CallId::new(),
        request_id: RequestId::new(),
        epoch: EPOCH,
        connection: ConnectionTarget {
            connection_id: ConnectionId::new(),
            revision: 1,
            spec,
        },
        tool_name: tool.to_owned(),
        arguments,
        timeout_seconds,
        client_session_id: None,
    }
}

/// A `count` call on a fixture writing to `count_file`.
fn count_call(count_file: &Path) -> LeasedCall {
    let path = count_file.to_string_lossy();
    leased(
        stdio_spec(&["--count-file", &path]),
        "count",
        json!({ "label": "executor" }),
        20,
    )
}

/// A resolver that launches the leased connector with no secrets.
fn plain_resolver() -> LaunchResolver {
    Arc::new(|call: &LeasedCall| {
        Ok(SessionLaunch {
            spec: call.connection.spec.clone(),
            env: Vec::new(),
            headers: Vec::new(),
        })
    })
}

fn config() -> ExecutorConfig {
    ExecutorConfig {
        max_concurrent: 4,
        lease_wait: Duration::from_millis(50),
        open_deadline: OPEN_DEADLINE,
    }
}

/// Starts the executor; returns its task and its shutdown token.
fn spawn_executor(
    control: &Arc<TestControl>,
    resolver: LaunchResolver,
) -> (JoinHandle<()>, CancellationToken) {
    let shutdown = CancellationToken::new();
    let executor = Executor::new(Arc::clone(control), resolver, config());
    let task = tokio::spawn(executor.run(shutdown.clone()));
    (task, shutdown)
}

/// Waits for the executor to return on its own (shutdown or fencing).
async fn stopped(task: JoinHandle<()>) {
    tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("the executor returns in time")
        .expect("the executor does not panic");
}

/// Runs the executor until `completions` completions are recorded, then shuts it down.
async fn run_until_completed(
    control: &Arc<TestControl>,
    resolver: LaunchResolver,
    completions: usize,
) -> Vec<(CallId, Epoch, Completion)> {
    let (task, shutdown) = spawn_executor(control, resolver);
    wait_until(Duration::from_secs(30), "the calls complete", || {
        control.completions().len() >= completions
    })
    .await;
    shutdown.cancel();
    stopped(task).await;
    control.completions()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_started_call_succeeds() {
    let call = leased(
        stdio_spec(&[]),
        "echo",
        json!({ "text": "via executor" }),
        20,
    );
    let call_id = call.call_id;
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

    let (task, shutdown) = spawn_executor(&control, plain_resolver());
    wait_until(Duration::from_secs(30), "the start is asked", || {
        !control.starts().is_empty()
    })
    .await;
    shutdown.cancel();
    stopped(task).await;

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

    let (task, _shutdown) = spawn_executor(&control, plain_resolver());

    stopped(task).await;
    assert!(control.starts().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_start_sends_nothing_and_stops_the_executor() {
    let count_file = temp_path("fenced");
    let control = Arc::new(TestControl::new(
        vec![count_call(&count_file)],
        StartAnswer::Fenced,
    ));

    let (task, _shutdown) = spawn_executor(&control, plain_resolver());

    stopped(task).await;
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

    let (task, shutdown) = spawn_executor(&control, plain_resolver());
    wait_until(Duration::from_secs(30), "the call starts", || {
        !control.starts().is_empty()
    })
    .await;
    shutdown.cancel();
    stopped(task).await;

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
    let resolver: LaunchResolver = Arc::new(move |call: &LeasedCall| {
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
