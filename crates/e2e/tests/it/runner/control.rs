//! An in-test control plane and helpers to run the executor against it.
//!
//! [`TestControl`] implements our own `ControlPlane` trait with a queue (calls can be added
//! while the executor runs), a scripted start answer, and records of starts, completions and
//! lifecycle events; the MCP side is always the real fixture process.

use super::fixture::*;
use serde_json::Value;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_mcp_runner::{
    ControlError, ControlPlane, Executor, ExecutorConfig, ExecutorHandle, LaunchResolver,
    SessionLaunch, StartDecision, immediate_resolver,
};
use switchyard_protocol::api::ConnectorSpec;
use switchyard_protocol::runner::{
    Completion, ConnectionTarget, Epoch, LeasedCall, LifecycleEvent, Submitter,
};
use switchyard_protocol::{CallId, ConnectionId, ProfileId, RequestId, UserId};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The lease epoch of every test call.
pub const EPOCH: Epoch = Epoch(7);

/// The profile of every test call.
pub const PROFILE: ProfileId = ProfileId(uuid::Uuid::from_u128(1));

/// The submitter of every test call.
pub const SUBMITTER: Submitter = Submitter::User(UserId(uuid::Uuid::from_u128(1)));

/// How long tests wait for something the executor should do soon.
pub const SOON: Duration = Duration::from_secs(30);

/// What [`TestControl::start`] answers.
#[derive(Clone, Copy, Debug)]
pub enum StartAnswer {
    Proceed,
    Abandon,
    Fenced,
}

/// A control plane in memory: a queue of calls, a scripted start answer, and records.
pub struct TestControl {
    queue: Mutex<VecDeque<LeasedCall>>,
    start_answer: StartAnswer,
    pub lease_fenced: bool,
    /// How many upcoming `complete` calls fail as unavailable before one succeeds.
    pub complete_failures: AtomicUsize,
    pub complete_attempts: AtomicUsize,
    starts: Mutex<Vec<(CallId, Epoch)>>,
    completions: Mutex<Vec<(CallId, Epoch, Completion)>>,
    events: Mutex<Vec<LifecycleEvent>>,
}

impl TestControl {
    pub fn new(calls: Vec<LeasedCall>, start_answer: StartAnswer) -> Self {
        Self {
            queue: Mutex::new(calls.into()),
            start_answer,
            lease_fenced: false,
            complete_failures: AtomicUsize::new(0),
            complete_attempts: AtomicUsize::new(0),
            starts: Mutex::new(Vec::new()),
            completions: Mutex::new(Vec::new()),
            events: Mutex::new(Vec::new()),
        }
    }

    /// Queues another call for the running executor.
    pub fn push(&self, call: LeasedCall) {
        self.queue.lock().expect("queue lock").push_back(call);
    }

    pub fn starts(&self) -> Vec<(CallId, Epoch)> {
        self.starts.lock().expect("starts lock").clone()
    }

    pub fn completions(&self) -> Vec<(CallId, Epoch, Completion)> {
        self.completions.lock().expect("completions lock").clone()
    }

    /// The completion reported for `call_id`, if any.
    pub fn completion(&self, call_id: CallId) -> Option<Completion> {
        self.completions()
            .into_iter()
            .find(|(completed, _, _)| *completed == call_id)
            .map(|(_, _, completion)| completion)
    }

    /// Every lifecycle event, in the order reported.
    pub fn events(&self) -> Vec<LifecycleEvent> {
        self.events.lock().expect("events lock").clone()
    }

    /// The PIDs of the sessions started for `connection_id`, in order.
    pub fn started_pids(&self, connection_id: ConnectionId) -> Vec<u32> {
        self.events()
            .into_iter()
            .filter_map(|event| match event {
                LifecycleEvent::SessionStarted {
                    connection_id: id,
                    pid,
                    ..
                } if id == connection_id => Some(pid.expect("a stdio session has a pid")),
                _ => None,
            })
            .collect()
    }

    /// The reasons of the sessions closed for `connection_id`, in order.
    pub fn closed_reasons(&self, connection_id: ConnectionId) -> Vec<String> {
        self.events()
            .into_iter()
            .filter_map(|event| match event {
                LifecycleEvent::SessionClosed {
                    connection_id: id,
                    reason,
                    ..
                } if id == connection_id => Some(reason),
                _ => None,
            })
            .collect()
    }

    /// How process `pid` of `connection_id` exited (status, signal), once reported.
    pub fn exit_of(
        &self,
        connection_id: ConnectionId,
        pid: u32,
    ) -> Option<(Option<i32>, Option<String>)> {
        self.events().into_iter().find_map(|event| match event {
            LifecycleEvent::ProcessExited {
                connection_id: id,
                pid: exited,
                status,
                signal,
            } if id == connection_id && exited == pid => Some((status, signal)),
            _ => None,
        })
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

    async fn report_event(&self, event: LifecycleEvent) {
        self.events.lock().expect("events lock").push(event);
    }
}

/// A connection running `spec`, at revision 1.
pub fn connection(spec: ConnectorSpec) -> ConnectionTarget {
    ConnectionTarget {
        connection_id: ConnectionId::new(),
        revision: 1,
        spec,
        accepted_spec_digest: None,
        auth_kind: None,
    }
}

/// A leased call of `tool` on `connection`, in warm session `client_session_id`.
pub fn call_on(
    connection: &ConnectionTarget,
    client_session_id: Option<&str>,
    tool: &str,
    arguments: Value,
    timeout_seconds: u32,
) -> LeasedCall {
    LeasedCall {
        traceparent: None,
        call_id: CallId::new(),
        request_id: RequestId::new(),
        epoch: EPOCH,
        connection: connection.clone(),
        tool_name: tool.to_owned(),
        arguments,
        timeout_seconds,
        client_session_id: client_session_id.map(str::to_owned),
        profile_id: PROFILE,
        submitter: SUBMITTER,
        kind: Default::default(),
    }
}

/// A leased call of `tool` on a new connection running `spec`.
pub fn leased(
    spec: ConnectorSpec,
    tool: &str,
    arguments: Value,
    timeout_seconds: u32,
) -> LeasedCall {
    call_on(&connection(spec), None, tool, arguments, timeout_seconds)
}

/// A `count` call on a fixture writing to `count_file`.
pub fn count_call(count_file: &Path) -> LeasedCall {
    let path = count_file.to_string_lossy();
    leased(
        stdio_spec(&["--count-file", &path]),
        "count",
        serde_json::json!({ "label": "executor" }),
        20,
    )
}

/// A resolver that launches the leased connector with no secrets.
pub fn plain_resolver() -> LaunchResolver {
    immediate_resolver(|call: &LeasedCall| {
        Ok(SessionLaunch {
            spec: call.connection.spec.clone(),
            env: Vec::new(),
            headers: Vec::new(),
        })
    })
}

/// The executor settings of the tests: short lease polls, generous deadlines.
pub fn config() -> ExecutorConfig {
    ExecutorConfig {
        max_concurrent: 4,
        lease_wait: Duration::from_millis(50),
        open_deadline: OPEN_DEADLINE,
        endpoints: EndpointGuard::device(),
        ..ExecutorConfig::default()
    }
}

/// A running executor.
pub struct Running {
    pub task: JoinHandle<()>,
    pub shutdown: CancellationToken,
    pub handle: ExecutorHandle,
}

impl Running {
    /// Shuts the executor down and waits for it to return.
    pub async fn stop(self) {
        self.shutdown.cancel();
        stopped(self.task).await;
    }
}

/// Starts an executor with `config`.
pub fn start_executor(
    control: &Arc<TestControl>,
    resolver: LaunchResolver,
    config: ExecutorConfig,
) -> Running {
    let shutdown = CancellationToken::new();
    let executor = Executor::new(Arc::clone(control), resolver, config);
    let handle = executor.handle();
    let task = tokio::spawn(executor.run(shutdown.clone()));
    Running {
        task,
        shutdown,
        handle,
    }
}

/// Waits for the executor to return on its own (shutdown or fencing).
pub async fn stopped(task: JoinHandle<()>) {
    tokio::time::timeout(SOON, task)
        .await
        .expect("the executor returns in time")
        .expect("the executor does not panic");
}

/// Runs the executor until `completions` completions are recorded, then shuts it down.
pub async fn run_until_completed(
    control: &Arc<TestControl>,
    resolver: LaunchResolver,
    completions: usize,
) -> Vec<(CallId, Epoch, Completion)> {
    let running = start_executor(control, resolver, config());
    wait_until(SOON, "the calls complete", || {
        control.completions().len() >= completions
    })
    .await;
    running.stop().await;
    control.completions()
}

/// Waits for the completion of `call_id`.
pub async fn completion_of(control: &TestControl, call_id: CallId) -> Completion {
    wait_until(SOON, "the call completes", || {
        control.completion(call_id).is_some()
    })
    .await;
    control
        .completion(call_id)
        .expect("the completion was just seen")
}
