//! The executor loop: lease calls from a [`ControlPlane`], run each in its own task on a warm
//! MCP session, and report how each ended and what became of the sessions.
//!
//! One `select!` loop owns all mutable state and linearizes everything that happens: lease
//! results, call tasks asking for and returning sessions, sessions opening and closing, user
//! commands from an [`ExecutorHandle`] (cancel, release), idle deadlines and shutdown. Call
//! tasks (`call.rs`) do the slow work; the session pool (`pool.rs`) decides which session a
//! call uses and when a session closes.
//!
//! Guarantees:
//! - No request is sent without a `Proceed` for the call under its lease epoch, and none after
//!   the call was cancelled before its start.
//! - A completion is never dropped: an unavailable control plane is retried with backoff until
//!   it accepts the report or fences the runner. Completions are redacted of the call's
//!   resolved secret values.
//! - Once shut down or fenced, the executor leases nothing more, lets running calls finish,
//!   closes every session (`shutdown`) and returns when all are closed.
//! - Arguments, results and secret values are never logged; a server's stderr is logged only
//!   redacted.

use crate::backoff::Backoff;
use crate::call::{Acquired, CallContext, SessionLease, ToLoop, run_call};
use crate::control::{ControlError, ControlPlane};
use crate::credentials::codes;
use crate::endpoints::{EndpointError, EndpointGuard};
use crate::events::{EventSink, process_exited, spawn_reporter};
use crate::handle::{CancelOutcome, Command, ExecutorHandle};
use crate::launch::SessionLaunch;
use crate::pool::{
    Checkout, CloseReason, ReleaseKey, SessionCaps, SessionKey, SessionPool, SessionSlot, ToClose,
    Verdict,
};
use crate::redact::{Redactor, stderr_excerpt};
use crate::session::{McpSession, SessionError};
use crate::tasks::KeyedTasks;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use switchyard_protocol::CallId;
use switchyard_protocol::api::CallError;
use switchyard_protocol::runner::{LeasedCall, LifecycleEvent};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use crate::meta::REQUEST_ID_META_KEY;

/// How much of a failed server's stderr goes into a call's error message.
const STDERR_IN_ERROR: usize = 1024;
/// How much of a server's stderr is logged when its session closes abnormally.
const STDERR_IN_LOG: usize = 4096;

pub use crate::launch::{LaunchFuture, LaunchResolver};

/// A [`LaunchResolver`] that resolves at once, with `resolve` (a device runner's bindings
/// file and keyring).
pub fn immediate_resolver<F>(resolve: F) -> LaunchResolver
where
    F: Fn(&LeasedCall) -> Result<SessionLaunch, CallError> + Send + Sync + 'static,
{
    Arc::new(move |call: &LeasedCall| -> LaunchFuture {
        Box::pin(std::future::ready(resolve(call)))
    })
}

/// How an executor runs.
#[derive(Clone, Debug)]
pub struct ExecutorConfig {
    /// Most calls running at once (at least one is always allowed).
    pub max_concurrent: usize,
    /// How long one lease request may wait for work (a long poll).
    pub lease_wait: Duration,
    /// Deadline for starting and initializing an MCP session.
    pub open_deadline: Duration,
    /// How long a warm session may sit unused before it is closed (`idle`).
    pub idle_timeout: Duration,
    /// How long a call cancelled after dispatch may still be answered by the server.
    pub cancel_grace: Duration,
    /// Most warm sessions kept, in all, per connection and per submitter; the least recently
    /// used idle session makes room (see [`SessionCaps`]).
    pub session_caps: SessionCaps,
    /// Which addresses an HTTP MCP server may be reached at (the central runner's guard with
    /// nothing allowed unless set).
    pub endpoints: EndpointGuard,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        Self {
            max_concurrent: 8,
            lease_wait: Duration::from_secs(25),
            open_deadline: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(5 * 60),
            cancel_grace: Duration::from_secs(2),
            session_caps: SessionCaps::default(),
            endpoints: EndpointGuard::default(),
        }
    }
}

/// Runs leased calls against MCP servers until shut down or fenced.
pub struct Executor<C: ControlPlane> {
    control: Arc<C>,
    resolver: LaunchResolver,
    config: ExecutorConfig,
    commands: mpsc::UnboundedReceiver<Command>,
    handle: ExecutorHandle,
}

impl<C: ControlPlane> Executor<C> {
    /// An executor leasing from `control` and launching sessions through `resolver`.
    pub fn new(control: Arc<C>, resolver: LaunchResolver, config: ExecutorConfig) -> Self {
        let (commands_tx, commands) = mpsc::unbounded_channel();
        Self {
            control,
            resolver,
            config,
            commands,
            handle: ExecutorHandle::new(commands_tx),
        }
    }

    /// A handle to cancel calls and release sessions while [`Executor::run`] runs.
    pub fn handle(&self) -> ExecutorHandle {
        self.handle.clone()
    }

    /// Leases and runs calls until `shutdown` is cancelled or the control plane fences this
    /// runner; then leases nothing more, waits for running calls, closes every session and
    /// returns.
    ///
    /// A lease request still waiting when shutdown comes is dropped: calls it may have leased
    /// were never started, so their leases expire and they are queued again.
    pub async fn run(self, shutdown: CancellationToken) {
        let Self {
            control,
            resolver,
            config,
            commands,
            handle,
        } = self;
        // Handles held elsewhere keep working until the loop ends; this one is not needed.
        drop(handle);
        let (to_loop, inbox) = mpsc::unbounded_channel();
        let (events, reporter) = spawn_reporter(Arc::clone(&control));
        let context = Arc::new(CallContext {
            control: Arc::clone(&control),
            resolver,
            to_loop,
            cancel_grace: config.cancel_grace,
            endpoints: config.endpoints.clone(),
            shutdown,
            fenced: CancellationToken::new(),
        });
        let runner = Runner {
            control,
            config,
            context,
            commands,
            inbox,
            pool: SessionPool::new(),
            calls: HashMap::new(),
            call_tasks: KeyedTasks::new(),
            openers: KeyedTasks::new(),
            closers: KeyedTasks::new(),
            events,
            lease: None,
            lease_retry: None,
            backoff: Backoff::default(),
            stopping: false,
        };
        runner.run(reporter).await;
    }
}

/// A pending lease request.
type LeaseFuture = Pin<Box<dyn Future<Output = Result<Vec<LeasedCall>, ControlError>> + Send>>;

/// How a waiting call is answered when its session opens.
type Waiter = oneshot::Sender<Acquired>;

/// Where a leased call stands, as far as cancelling it is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallPhase {
    /// Its launch is being prepared; it has not asked for a session yet.
    Preparing,
    /// Waiting for session `slot` to open.
    Waiting(SessionSlot),
    /// Cancelled before it was started: it never will be.
    Withdrawn,
    /// It has a session (or its session failed to open): it is being started, or has been,
    /// and will report a completion unless the start is refused.
    Running,
}

/// The loop's record of one call task.
struct CallEntry {
    phase: CallPhase,
    /// Cancelled when the user cancels the call.
    cancel: CancellationToken,
    /// The session it holds, if any.
    slot: Option<SessionSlot>,
}

/// The state of a running executor; only its loop touches it.
struct Runner<C: ControlPlane> {
    control: Arc<C>,
    config: ExecutorConfig,
    context: Arc<CallContext<C>>,
    commands: mpsc::UnboundedReceiver<Command>,
    inbox: mpsc::UnboundedReceiver<ToLoop>,
    pool: SessionPool<McpSession, Waiter>,
    calls: HashMap<CallId, CallEntry>,
    call_tasks: KeyedTasks<CallId, ()>,
    openers: KeyedTasks<SessionSlot, Result<McpSession, SessionError>>,
    closers: KeyedTasks<SessionSlot, ()>,
    events: EventSink,
    lease: Option<LeaseFuture>,
    /// When an unavailable control plane may be asked for a lease again.
    lease_retry: Option<Instant>,
    backoff: Backoff,
    /// Shut down or fenced: lease nothing more, wind down.
    stopping: bool,
}

impl<C: ControlPlane> Runner<C> {
    async fn run(mut self, reporter: JoinHandle<()>) {
        loop {
            self.close_queued();
            if !self.stopping
                && (self.context.shutdown.is_cancelled() || self.context.fenced.is_cancelled())
            {
                self.stopping = true;
                self.lease = None;
                tracing::info!(
                    active = self.calls.len(),
                    "executor stopping; waiting for running calls"
                );
            }
            if self.stopping && self.calls.is_empty() {
                self.pool.drain_all(CloseReason::Shutdown);
                self.close_queued();
                if self.pool.is_empty()
                    && self.call_tasks.is_empty()
                    && self.openers.is_empty()
                    && self.closers.is_empty()
                {
                    break;
                }
            }
            self.request_lease();
            let idle_deadline = self.pool.next_idle_deadline(self.config.idle_timeout);

            tokio::select! {
                leased = next_lease(&mut self.lease) => self.on_lease(leased),
                Some(command) = self.commands.recv() => self.on_command(command),
                Some(message) = self.inbox.recv() => self.on_message(message),
                Some((call_id, ended)) = self.call_tasks.join_next() => {
                    self.on_call_ended(call_id, ended);
                }
                Some((slot, opened)) = self.openers.join_next() => self.on_opened(slot, opened),
                Some((slot, closed)) = self.closers.join_next() => {
                    if let Err(error) = closed {
                        tracing::error!(%error, "closing an MCP session failed");
                    }
                    self.pool.closed(slot);
                }
                () = sleep_until(idle_deadline) => {
                    self.pool.close_idle(Instant::now(), self.config.idle_timeout);
                }
                () = sleep_until(self.lease_retry) => self.lease_retry = None,
                () = self.context.shutdown.cancelled(), if !self.stopping => {}
                () = self.context.fenced.cancelled(), if !self.stopping => {}
            }
        }

        // Closers hold the last other senders: once they are done, the reporter drains its
        // queue and ends.
        drop(self.events);
        if let Err(error) = reporter.await {
            tracing::error!(%error, "the lifecycle event reporter failed");
        }
        tracing::info!("executor stopped");
    }

    /// Starts a lease request when there is room for more calls and none is pending.
    fn request_lease(&mut self) {
        if self.stopping || self.lease.is_some() || self.lease_retry.is_some() {
            return;
        }
        let free = self
            .config
            .max_concurrent
            .max(1)
            .saturating_sub(self.calls.len());
        if free == 0 {
            return;
        }
        let control = Arc::clone(&self.control);
        let wait = self.config.lease_wait;
        self.lease = Some(Box::pin(async move {
            // Calls this loop just spawned run first: their starts are on their way to the
            // server before the next lease's own work.
            tokio::task::yield_now().await;
            control.lease(free, wait).await
        }));
    }

    fn on_lease(&mut self, leased: Result<Vec<LeasedCall>, ControlError>) {
        self.lease = None;
        match leased {
            Ok(leased) => {
                self.backoff.reset();
                for call in leased {
                    self.spawn_call(call);
                }
            }
            Err(ControlError::Fenced(epoch)) => {
                tracing::warn!(?epoch, "lease refused: runner fenced; stopping");
                self.context.fenced.cancel();
            }
            Err(ControlError::Unavailable(reason)) => {
                let delay = self.backoff.next_delay();
                tracing::warn!(%reason, retry_in = ?delay, "cannot lease calls");
                self.lease_retry = Some(Instant::now() + delay);
            }
        }
    }

    fn spawn_call(&mut self, call: LeasedCall) {
        let call_id = call.call_id;
        if self.calls.contains_key(&call_id) {
            // Its earlier lease expired while this executor was still preparing it. Running it
            // twice could send it twice; the running task keeps it.
            tracing::warn!(%call_id, "leased a call that is already running here; ignored");
            return;
        }
        let traceparent = crate::meta::traceparent_for(&call);
        let span = tracing::info_span!(
            "call",
            %call_id,
            trace_id = crate::telemetry::context::trace_id(&traceparent),
            connection_id = %call.connection.connection_id,
            tool = %call.tool_name,
        );
        // The runner's spans continue the call's trace (the server's submission span).
        crate::telemetry::context::adopt(&span, Some(&traceparent));
        let cancel = CancellationToken::new();
        let task = run_call(Arc::clone(&self.context), call, cancel.clone()).instrument(span);
        self.call_tasks.spawn(call_id, task);
        self.calls.insert(
            call_id,
            CallEntry {
                phase: CallPhase::Preparing,
                cancel,
                slot: None,
            },
        );
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::Cancel { call_id, reply } => {
                let outcome = self.cancel(call_id);
                tracing::info!(%call_id, ?outcome, "cancel requested");
                let _ = reply.send(outcome);
            }
            Command::Release {
                connection_id,
                client_session_id,
                submitter,
                reply,
            } => {
                let key = ReleaseKey {
                    connection_id,
                    client_session_id,
                    submitter,
                };
                let released = self.pool.release(&key);
                tracing::info!(%connection_id, released, "sessions released");
                let _ = reply.send(released);
            }
        }
    }

    fn cancel(&mut self, call_id: CallId) -> CancelOutcome {
        let Some(entry) = self.calls.get_mut(&call_id) else {
            return CancelOutcome::NotFound;
        };
        entry.cancel.cancel();
        match entry.phase {
            CallPhase::Preparing | CallPhase::Withdrawn => {
                entry.phase = CallPhase::Withdrawn;
                CancelOutcome::NotStarted
            }
            CallPhase::Waiting(slot) => {
                entry.phase = CallPhase::Withdrawn;
                if let Some(waiter) = self.pool.remove_waiter(slot, call_id) {
                    let _ = waiter.send(Acquired::Withdrawn);
                }
                CancelOutcome::NotStarted
            }
            CallPhase::Running => CancelOutcome::Cancelling,
        }
    }

    fn on_message(&mut self, message: ToLoop) {
        match message {
            ToLoop::Acquire {
                call_id,
                key,
                launch,
                redactor,
                reply,
            } => self.acquire(call_id, key, launch, redactor, reply),
            ToLoop::Checkin {
                call_id,
                slot,
                verdict,
            } => {
                self.pool.checkin(slot, verdict, Instant::now());
                if let Some(entry) = self.calls.get_mut(&call_id)
                    && entry.slot == Some(slot)
                {
                    entry.slot = None;
                }
            }
        }
    }

    /// Finds or opens a session for a call.
    fn acquire(
        &mut self,
        call_id: CallId,
        key: SessionKey,
        launch: SessionLaunch,
        redactor: Arc<Redactor>,
        reply: Waiter,
    ) {
        let Some(phase) = self.calls.get(&call_id).map(|entry| entry.phase) else {
            let error = CallError::new("runner_error", "the executor does not know this call");
            let _ = reply.send(Acquired::Failed(error));
            return;
        };
        if phase == CallPhase::Withdrawn {
            let _ = reply.send(Acquired::Withdrawn);
            return;
        }
        let fingerprint = self.pool.fingerprint(&launch);
        self.pool.supersede(&key, fingerprint);
        let waiting_on = match self.pool.checkout(&key, fingerprint) {
            Checkout::Ready { slot, session } => {
                self.hand_out(call_id, slot, session, reply);
                return;
            }
            Checkout::Opening(slot) => match self.pool.wait(slot, call_id, reply) {
                Ok(()) => slot,
                Err(reply) => {
                    let error = CallError::new("runner_error", "the session being opened vanished");
                    let _ = reply.send(Acquired::Failed(error));
                    return;
                }
            },
            Checkout::Absent => {
                let room = self.pool.make_room(&key, self.config.session_caps);
                let slot = self
                    .pool
                    .start_opening(key, fingerprint, redactor, call_id, reply);
                if !room {
                    // Every session in a full scope is busy: this one serves and closes.
                    self.pool.close_after_use(slot);
                }
                let deadline = self.config.open_deadline;
                let guard = self.config.endpoints.clone();
                self.openers.spawn(slot, async move {
                    McpSession::open(&launch, &guard, deadline).await
                });
                slot
            }
        };
        // A started call that waits again (for a fresh session) stays cancellable only as a
        // started call.
        if let Some(entry) = self.calls.get_mut(&call_id)
            && entry.phase == CallPhase::Preparing
        {
            entry.phase = CallPhase::Waiting(waiting_on);
        }
    }

    /// Lends `session` (already counted as active) to a call.
    fn hand_out(
        &mut self,
        call_id: CallId,
        slot: SessionSlot,
        session: Arc<McpSession>,
        reply: Waiter,
    ) {
        let delivered = reply
            .send(Acquired::Session(SessionLease { slot, session }))
            .is_ok();
        match self.calls.get_mut(&call_id) {
            Some(entry) if delivered => {
                entry.phase = CallPhase::Running;
                entry.slot = Some(slot);
            }
            // The call task is gone: the session goes back unused.
            _ => self.pool.checkin(slot, Verdict::Keep, Instant::now()),
        }
    }

    fn on_opened(
        &mut self,
        slot: SessionSlot,
        opened: Result<Result<McpSession, SessionError>, JoinError>,
    ) {
        let session = match opened {
            Ok(Ok(session)) => session,
            Ok(Err(error)) => {
                let stderr_tail = error.stderr_tail().map(str::to_owned);
                // A refused address is the installation's decision, not a broken server; a
                // refused credential is a person's to fix, and the server records it so.
                let code = match error {
                    SessionError::Endpoint(EndpointError::Blocked { .. }) => "endpoint_blocked",
                    SessionError::Unauthorized { .. } => codes::REFUSED,
                    _ => "spawn_failed",
                };
                self.open_failed(slot, code, error.to_string(), stderr_tail);
                return;
            }
            Err(error) => {
                let reason = format!("opening the session failed: {error}");
                self.open_failed(slot, "spawn_failed", reason, None);
                return;
            }
        };
        let pid = session.process_group_id();
        let Some(opened) = self.pool.opened(slot, session, Instant::now()) else {
            // Not a Starting entry: the session is dropped, which kills its process group.
            tracing::error!(?slot, "a session opened for an entry that was not starting");
            return;
        };
        tracing::info!(
            connection_id = %opened.key.connection_id,
            pid,
            waiting = opened.waiters.len(),
            "MCP session started"
        );
        self.events.send(LifecycleEvent::SessionStarted {
            connection_id: opened.key.connection_id,
            client_session_id: opened.key.client_session_id.clone(),
            profile_id: Some(opened.key.profile_id),
            pid,
        });
        for (call_id, waiter) in opened.waiters {
            self.hand_out(call_id, slot, Arc::clone(&opened.session), waiter);
        }
    }

    /// Fails every call waiting for `slot`, whose session could not be opened, with `code`.
    fn open_failed(
        &mut self,
        slot: SessionSlot,
        code: &str,
        reason: String,
        stderr_tail: Option<String>,
    ) {
        let Some((waiters, redactor)) = self.pool.open_failed(slot) else {
            return;
        };
        let mut message = redactor.redact(&reason).into_owned();
        if let Some(tail) = stderr_tail {
            let excerpt = stderr_excerpt(&redactor, &tail, STDERR_IN_ERROR);
            if !excerpt.is_empty() {
                message.push_str("; the server's stderr ends with: ");
                message.push_str(&excerpt);
            }
        }
        tracing::warn!(%message, waiting = waiters.len(), "cannot open the MCP session");
        let error = CallError::new(code, message);
        for (call_id, waiter) in waiters {
            if let Some(entry) = self.calls.get_mut(&call_id) {
                entry.phase = CallPhase::Running;
            }
            let _ = waiter.send(Acquired::Failed(error.clone()));
        }
    }

    fn on_call_ended(&mut self, call_id: CallId, ended: Result<(), JoinError>) {
        if let Err(error) = &ended {
            tracing::error!(%call_id, %error, "call task failed without reporting");
            // Its last checkin may still be queued: apply it before looking at what it held.
            while let Ok(message) = self.inbox.try_recv() {
                self.on_message(message);
            }
        }
        let Some(entry) = self.calls.remove(&call_id) else {
            return;
        };
        // A task that ended normally has given its session back already (the checkin may
        // still be queued); one that panicked may still hold one.
        if ended.is_err()
            && let Some(slot) = entry.slot
        {
            self.pool.checkin(
                slot,
                Verdict::Evict(CloseReason::RunnerError),
                Instant::now(),
            );
        }
    }

    /// Starts closing every session the pool has queued for closing.
    fn close_queued(&mut self) {
        for close in self.pool.take_closable() {
            let events = self.events.clone();
            self.closers.spawn(close.slot, close_session(close, events));
        }
    }
}

/// Closes a session and reports how it and its process ended.
async fn close_session(close: ToClose<McpSession>, events: EventSink) {
    let ToClose {
        key,
        session,
        reason,
        redactor,
        ..
    } = close;
    let closed_event = LifecycleEvent::SessionClosed {
        connection_id: key.connection_id,
        client_session_id: key.client_session_id.clone(),
        profile_id: Some(key.profile_id),
        reason: reason.as_str().to_owned(),
    };
    let session = match Arc::try_unwrap(session) {
        Ok(session) => session,
        Err(shared) => {
            // Every call gives its handle back before checking in, so this is a bug; the
            // session still ends (its process group is killed) when the last handle goes.
            tracing::error!(
                reason = reason.as_str(),
                "a session to close is still shared"
            );
            drop(shared);
            events.send(closed_event);
            return;
        }
    };
    let pid = session.process_group_id();
    if reason.is_abnormal()
        && let Some(tail) = session.stderr_tail()
    {
        let excerpt = stderr_excerpt(&redactor, &tail, STDERR_IN_LOG);
        if !excerpt.is_empty() {
            tracing::warn!(
                reason = reason.as_str(),
                pid,
                stderr = %excerpt,
                "closing MCP session; the end of the server's stderr follows"
            );
        }
    }
    let status = session.close().await;
    if let (Some(pid), Some(status)) = (pid, status) {
        events.send(process_exited(key.connection_id, pid, status));
    }
    tracing::info!(
        connection_id = %key.connection_id,
        reason = reason.as_str(),
        pid,
        "MCP session closed"
    );
    events.send(closed_event);
}

/// The pending lease request's answer; never, when none is pending.
async fn next_lease(lease: &mut Option<LeaseFuture>) -> Result<Vec<LeasedCall>, ControlError> {
    match lease {
        Some(lease) => lease.await,
        None => std::future::pending().await,
    }
}

/// Sleeps until `deadline`; forever, when there is none.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
