//! Calls: submission with request-ID idempotency, reads under current Use, and recording the
//! completions runners report (fenced by their lease epoch).

use super::admission::{Decision, SubmittedBy, decide, submitter_principal};
use super::auth::hash_token;
use super::call_trace;
use super::dispatch::call_wait::{MAX_CALL_WAIT, is_settled};
use super::dispatch::wakeups::SettledWaiter;
use super::principal::{DEVICE_CREDENTIAL_PREFIX, Principal};
use super::results::{RESULT_LIMIT, bound_keeping_original};
use super::{Actor, App, views};
use crate::db::{
    CallRow, Kept, Key, PlainCompletion, StoredCompletion, SubmitKeys, SubmitRead, SubmitterKey,
    TraceParent,
};
use crate::error::{AppError, AppResult};
use std::collections::HashSet;
use std::time::Duration;
use switchyard_mcp_runner::credentials::codes;
use switchyard_protocol::api::*;
use switchyard_protocol::runner::{Completion, Epoch};
use switchyard_protocol::{CallId, CallState, ErrorCode, RunnerRef};
use tokio::time::Instant;
use tracing::Instrument as _;
use uuid::Uuid;

/// What happened to a reported completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionRecorded {
    /// Stored; the call moved to its new state (for a late receipt: it settled the unknown
    /// call, recorded beside the original attempt).
    Recorded,
    /// The epoch is stale, or the call's evidence was erased: the report was recorded nowhere.
    Fenced,
    /// The call had already moved on (e.g. cancelled); the report was not applied (a late
    /// receipt that settles nothing is kept as an observation).
    Superseded,
}

/// How a submission waits for its call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SubmitWait {
    /// Up to this long (at most [`MAX_CALL_WAIT`]) for the call to settle.
    For(Duration),
    /// Not at all: a new call's settle waiter is handed back instead, for a submitter that
    /// waits in its own way.
    Subscribe,
}

/// The check of the principal a submission was read for, still on its way (`/mcp`'s speculated
/// calls, `mcp/speculation.rs`): the submission reads, then waits for it to pass before it
/// decides, answers or writes anything. A failed check is the submission's answer.
pub(crate) type PendingCheck<'a> =
    std::pin::Pin<Box<dyn Future<Output = AppResult<()>> + Send + 'a>>;

/// A submission's answer without a waiter to hand back.
fn no_waiter((view, fresh): (CallView, bool)) -> (CallView, bool, Option<SettledWaiter>) {
    (view, fresh, None)
}

impl App {
    /// Submits a call, or returns the existing one for a retried request_id. The bool is true
    /// when the call was created by this request.
    pub async fn call_submit(
        &self,
        actor: &Actor,
        ws: &str,
        req: SubmitCall,
    ) -> AppResult<(CallView, bool)> {
        self.call_submit_as(&Principal::User(actor.clone()), ws, req)
            .await
    }

    /// [`App::call_submit`] for a user or a device. A device submits under its bound profile
    /// only, and every call it submits names an operation of that profile.
    ///
    /// Everything the submission decides on is read in one statement
    /// ([`crate::db::Datastore::call_submit_read`]), so a new call costs that read and its
    /// insert, and a replayed request_id only the read. The checks keep the order the answers have always had: workspace, request
    /// shape, names, Use, operation, replay, then whether the call can run.
    pub async fn call_submit_as(
        &self,
        principal: &Principal,
        ws: &str,
        req: SubmitCall,
    ) -> AppResult<(CallView, bool)> {
        self.call_submit_waiting(principal, ws, req, Duration::ZERO)
            .await
    }

    /// [`App::call_submit_as`], then — for a `wait` above zero — waiting up to `wait` (at most
    /// [`MAX_CALL_WAIT`]) for the call to settle, as `GET …/calls/{call}?wait_ms=` does: a
    /// caller who wants the outcome learns it from one request, the moment it is recorded.
    /// A new call's waiter subscribes before its insert, so no completion can slip past it.
    pub async fn call_submit_waiting(
        &self,
        principal: &Principal,
        ws: &str,
        req: SubmitCall,
        wait: Duration,
    ) -> AppResult<(CallView, bool)> {
        self.submit_waiting(SubmittedBy::Principal(principal), ws, req, wait)
            .await
    }

    /// [`App::call_submit_as`] for a submitter that waits on its call itself (`/mcp`), whose
    /// client may have sent a trace context (carried to the MCP server in the call's `_meta`; a
    /// retry of a stored request_id keeps the first one's). A new, unsettled call comes back
    /// with its settle waiter, subscribed before its insert, for [`App::call_wait_with`].
    /// With a `check`, the submission reads for `principal` before the check has passed and
    /// waits for it before anything else ([`PendingCheck`]).
    pub(crate) async fn call_submit_traced(
        &self,
        principal: &Principal,
        ws: &str,
        req: SubmitCall,
        trace: Option<TraceParent>,
        check: Option<PendingCheck<'_>>,
    ) -> AppResult<(CallView, Option<SettledWaiter>)> {
        let (view, _, waiter) = self
            .submit(
                SubmittedBy::Principal(principal),
                ws,
                req,
                SubmitWait::Subscribe,
                trace,
                check,
            )
            .await?;
        Ok((view, waiter))
    }

    /// [`App::call_submit_waiting`] for the bearer token a request presented, not checked yet.
    /// A user's API token is checked by the submission's own read (one statement fewer); a
    /// device credential is authenticated first, as on every device route.
    pub async fn call_submit_presented(
        &self,
        token: &str,
        ws: &str,
        req: SubmitCall,
        wait: Duration,
    ) -> AppResult<(CallView, bool)> {
        if token.starts_with(DEVICE_CREDENTIAL_PREFIX) {
            let principal = Principal::Device(self.authenticate_device(token).await?);
            return self.call_submit_waiting(&principal, ws, req, wait).await;
        }
        self.submit_waiting(SubmittedBy::UserToken(token), ws, req, wait)
            .await
    }

    /// [`App::submit`] for a submitter waiting up to `wait` itself, with no trace context.
    async fn submit_waiting(
        &self,
        by: SubmittedBy<'_>,
        ws: &str,
        req: SubmitCall,
        wait: Duration,
    ) -> AppResult<(CallView, bool)> {
        let (view, fresh, _) = self
            .submit(by, ws, req, SubmitWait::For(wait), None, None)
            .await?;
        Ok((view, fresh))
    }

    /// [`App::call_submit_waiting`] for either kind of submitter, in the span of the
    /// submission (the trace the call's runner continues).
    async fn submit(
        &self,
        by: SubmittedBy<'_>,
        ws: &str,
        req: SubmitCall,
        wait: SubmitWait,
        trace: Option<TraceParent>,
        check: Option<PendingCheck<'_>>,
    ) -> AppResult<(CallView, bool, Option<SettledWaiter>)> {
        let span = call_trace::submission_span(trace.as_ref());
        self.submit_in_span(by, ws, req, wait, trace, check)
            .instrument(span)
            .await
    }

    /// [`App::submit`] inside its span: the submit read (made with the others that wait at
    /// the same moment), the principal's pending check if any, the decision, then the insert.
    async fn submit_in_span(
        &self,
        by: SubmittedBy<'_>,
        ws: &str,
        req: SubmitCall,
        wait: SubmitWait,
        trace: Option<TraceParent>,
        check: Option<PendingCheck<'_>>,
    ) -> AppResult<(CallView, bool, Option<SettledWaiter>)> {
        let deadline = Instant::now()
            + match wait {
                SubmitWait::For(wait) => wait.min(MAX_CALL_WAIT),
                SubmitWait::Subscribe => Duration::ZERO,
            };
        let token_hash;
        let keys = SubmitKeys {
            workspace: Key::parse(ws),
            submitter: match by {
                SubmittedBy::Principal(principal) => SubmitterKey::Known(principal.submitter()),
                SubmittedBy::UserToken(token) => {
                    token_hash = hash_token(token);
                    SubmitterKey::UserToken(&token_hash)
                }
            },
            profile: Key::parse(&req.profile_id),
            connection: Key::parse(&req.connection_id),
            environment: req.environment_id.as_deref().map(Key::parse),
            operation: req.operation_id,
            request_id: req.request_id,
            tool_name: &req.tool_name,
        };
        let found = self
            .dispatch
            .submissions
            .read(SubmitRead::new(&keys).with_quotas(self.config.quotas))
            .await?;
        if let Some(check) = check {
            check.await?;
        }
        let Some(mut found) = found else {
            return Err(match by {
                SubmittedBy::Principal(principal) => principal.workspace_not_found(ws),
                // An unknown token, or a workspace that is not the user's: the token's own
                // check says which (401 before 404, as for every route).
                SubmittedBy::UserToken(token) => {
                    let actor = self.authenticate(token).await?;
                    Principal::User(actor).workspace_not_found(ws)
                }
            });
        };
        let existing = found.existing.take();
        let principal = submitter_principal(by, &found)?;
        match decide(&principal, &req, &found, existing, self.config.quotas)? {
            Decision::Replay {
                existing,
                payload_digest,
            } => self
                .replayed(&principal, ws, existing, &payload_digest, deadline)
                .await
                .map(no_waiter),
            Decision::New(mut call) => {
                call.origin.trace = call_trace::call_trace(call.id, trace);
                let waiter = (wait != SubmitWait::For(Duration::ZERO))
                    .then(|| self.dispatch.announcer.local.settled_waiter(call.id));
                let (workspace_id, request_id) = (call.workspace_id, call.request_id);
                let payload_digest = call.payload_digest.clone();
                match self.dispatch.submissions.insert(call).await? {
                    Some(row) => {
                        self.metrics.call_submitted(false);
                        if wait == SubmitWait::Subscribe {
                            return Ok((views::call(&row), true, waiter));
                        }
                        self.inserted(&principal, ws, &row, waiter, deadline)
                            .await
                            .map(no_waiter)
                    }
                    // A concurrent submission with the same request_id won the insert.
                    None => self
                        .lost_insert(
                            &principal,
                            ws,
                            (workspace_id, request_id),
                            &payload_digest,
                            deadline,
                        )
                        .await
                        .map(no_waiter),
                }
            }
            // Held for a person: its own statement, never batched nor handed to a lease, and
            // answered at once even to a waiting caller, who learns it awaits approval.
            Decision::Held {
                mut call,
                why,
                policy,
            } => {
                call.origin.trace = call_trace::call_trace(call.id, trace);
                let key = (call.workspace_id, call.request_id);
                match self.db.call_insert_held(&call, why, policy).await? {
                    Some(row) => {
                        self.metrics.call_submitted(true);
                        Ok((views::call(&row), true, None))
                    }
                    None => self
                        .lost_insert(&principal, ws, key, &call.payload_digest, deadline)
                        .await
                        .map(no_waiter),
                }
            }
        }
    }

    /// The answer to a submission whose insert a concurrent one with the same request_id won
    /// (`key`: workspace and request_id): that call, replayed.
    async fn lost_insert(
        &self,
        principal: &Principal,
        ws: &str,
        key: (
            switchyard_protocol::WorkspaceId,
            switchyard_protocol::RequestId,
        ),
        payload_digest: &[u8],
        deadline: Instant,
    ) -> AppResult<(CallView, bool)> {
        match self.db.call_find_by_request(key.0, key.1).await? {
            Some(existing) => {
                self.replayed(principal, ws, existing, payload_digest, deadline)
                    .await
            }
            None => Err(AppError::Internal(
                "request_id conflict without a stored call".into(),
            )),
        }
    }

    /// The answer to a submission whose call was inserted as `row`: the call, or — when the
    /// submitter waits — the call once settled or at `deadline`.
    async fn inserted(
        &self,
        principal: &Principal,
        ws: &str,
        row: &CallRow,
        waiter: Option<SettledWaiter>,
        deadline: Instant,
    ) -> AppResult<(CallView, bool)> {
        let view = match waiter {
            Some(waiter) => {
                self.call_wait_with(principal, ws, &row.id.to_string(), waiter, deadline)
                    .await?
            }
            None => views::call(row),
        };
        Ok((view, true))
    }

    /// The answer to a replayed request_id: the stored call (if its payload matches), as it
    /// is or — when the submitter waits — once settled or at `deadline`.
    async fn replayed(
        &self,
        principal: &Principal,
        ws: &str,
        existing: CallRow,
        payload_digest: &[u8],
        deadline: Instant,
    ) -> AppResult<(CallView, bool)> {
        let view = replay(existing, payload_digest, principal)?;
        let now = Instant::now();
        // A held call is answered at once: its caller learns that it awaits approval.
        if is_settled(view.state) || view.state == CallState::AwaitingApproval || now >= deadline {
            return Ok((view, false));
        }
        let view = self
            .call_wait_as(principal, ws, &view.id.to_string(), deadline - now)
            .await?;
        Ok((view, false))
    }

    /// One call, for a reader who holds Use on its profile right now.
    pub async fn call_get(&self, actor: &Actor, ws: &str, call: &str) -> AppResult<CallView> {
        self.call_get_as(&Principal::User(actor.clone()), ws, call)
            .await
    }

    /// [`App::call_get`] for a user or a device (which reads only the calls it submitted).
    pub async fn call_get_as(
        &self,
        principal: &Principal,
        ws: &str,
        call: &str,
    ) -> AppResult<CallView> {
        // The workspace, the call, its profile, the reader's Use and the call's lineage in one
        // read, refused in the order they always were: workspace, call, Use.
        let read = self
            .db
            .call_read(&Key::parse(ws), principal.submitter(), call.parse().ok())
            .await?
            .ok_or_else(|| principal.workspace_not_found(ws))?;
        let (row, profile) = read.call.ok_or_else(|| {
            AppError::refused(
                ErrorCode::CallNotFound,
                format!("no call `{call}` in this workspace"),
            )
        })?;
        principal.require_use_read(&profile, read.user_holds_use)?;
        // A device reads only what it submitted: another device's calls, even on the same
        // profile, look unknown to it.
        if let Principal::Device(device) = principal
            && row.submitted_by_device != Some(device.device.id)
        {
            return Err(AppError::refused(
                ErrorCode::CallNotFound,
                format!("no call `{call}` submitted by this device"),
            ));
        }
        self.call_view_with(&row, read.lineage).await
    }

    /// Records a runner's completion report under its lease epoch.
    pub async fn call_record_completion(
        &self,
        runner: RunnerRef,
        call: CallId,
        epoch: Epoch,
        completion: Completion,
    ) -> AppResult<CompletionRecorded> {
        Ok(self
            .record_stored_completion(runner, call, epoch, stored_completion(completion), None)
            .await?
            .0)
    }

    /// [`App::call_record_completion`] for several completions of one runner and epoch, answered
    /// in order. Those that imply nothing beside their state change are recorded in one
    /// statement; the rest, and all of them if that statement fails, one by one.
    pub async fn call_record_completions(
        &self,
        runner: RunnerRef,
        epoch: Epoch,
        completions: Vec<(CallId, Completion)>,
    ) -> Vec<AppResult<CompletionRecorded>> {
        let stored: Vec<(CallId, StoredCompletion, Vec<CallState>)> = completions
            .into_iter()
            .map(|(call, completion)| {
                let stored = stored_completion(completion);
                let from = from_states(stored.state);
                (call, stored, from)
            })
            .collect();
        let plain: Vec<PlainCompletion<'_>> = stored
            .iter()
            .map(|(call, completion, from)| PlainCompletion {
                id: *call,
                from,
                completion,
            })
            .collect();
        let recorded: HashSet<CallId> = match self
            .db
            .call_complete_plain_many(runner, epoch, &plain)
            .await
        {
            Ok(recorded) => self
                .sent(recorded)
                .iter()
                .map(|finished| {
                    self.metrics.call_completed(finished);
                    finished.id
                })
                .collect(),
            Err(e) => {
                tracing::debug!(error = %e, "a batch of completions failed; recording them one by one");
                HashSet::new()
            }
        };
        let mut answers = Vec::with_capacity(stored.len());
        for (call, completion, _) in stored {
            answers.push(if recorded.contains(&call) {
                Ok(CompletionRecorded::Recorded)
            } else {
                self.record_stored_completion(runner, call, epoch, completion, None)
                    .await
                    .map(|(recorded, _)| recorded)
            });
        }
        answers
    }

    /// [`App::call_record_completion`] for a completion a device uploaded in the receipt
    /// `receipt`, already in its stored form. The bool is true when the receipt was stored with
    /// the completion, answered `recorded`; otherwise storing it is the caller's business.
    pub(crate) async fn call_record_receipt(
        &self,
        runner: RunnerRef,
        call: CallId,
        epoch: Epoch,
        completion: StoredCompletion,
        receipt: Uuid,
    ) -> AppResult<(CompletionRecorded, bool)> {
        self.record_stored_completion(runner, call, epoch, completion, Some(receipt))
            .await
    }

    async fn record_stored_completion(
        &self,
        runner: RunnerRef,
        call: CallId,
        epoch: Epoch,
        mut stored: StoredCompletion,
        receipt: Option<Uuid>,
    ) -> AppResult<(CompletionRecorded, bool)> {
        let from = from_states(stored.state);
        // The state change and what it implies (a lookup's observation on its unknown call,
        // captured evidence, what capture exclusions keep) are recorded in one transaction; a
        // completion that implies nothing else is one statement.
        let effects = self.completion_effects(&stored, receipt);
        // A reader waiting here is handed the call as recorded, read by the statement that
        // records it.
        let read_lineage = self.dispatch.announcer.local.waited_for(call);
        let plain = self
            .db
            .call_complete_plain_effects(call, runner, epoch, &from, &stored, effects, read_lineage)
            .await?;
        let completed = match plain {
            Some(completed) => Some(completed),
            None => {
                // The one statement records no call a capture exclusion applies to: its
                // completion is filtered here, before anything of it is stored.
                stored = self.apply_capture_exclusions(call, stored).await?;
                self.db
                    .call_complete_with_effects(call, runner, epoch, &from, &stored, effects)
                    .await?
            }
        };
        if let Some(completed) = completed {
            // A device discovery's catalog is reconciled before its readers are woken.
            if completed.value.call.kind == CallKind::Discovery
                && let Err(error) = self.discovery_settled(&completed.value.call).await
            {
                tracing::warn!(%error, call = %call, "a device discovery's catalog was not reconciled; the next `connection discover` will");
            }
            let completed = self.sent(completed);
            self.metrics.call_completed(&(&completed.call).into());
            self.note_completed(&completed);
            return Ok((CompletionRecorded::Recorded, completed.receipt_stored));
        }
        // A report about a call already unknown: a valid late receipt is recorded beside it
        // (and settles it when certain); a call whose evidence was erased fences it.
        if let Some(recorded) = self
            .record_late_receipt(runner, call, epoch, &stored)
            .await?
        {
            return Ok((recorded, false));
        }
        if self.db.runner_lease_is_current(runner, epoch).await? {
            Ok((CompletionRecorded::Superseded, false))
        } else {
            Ok((CompletionRecorded::Fenced, false))
        }
    }
}

/// The states a completion recording `to` may leave, straight from the lifecycle's one table.
pub(super) fn from_states(to: CallState) -> Vec<CallState> {
    [CallState::Leased, CallState::Running]
        .into_iter()
        .filter(|s| s.can_transition_to(to))
        .collect()
}

/// A replayed request_id: the same payload answers the stored call; another payload is a
/// conflict. The stored call's id is named only to the user it is accounted to: request_ids
/// are unique per workspace, and a conflict must not reveal another user's call.
fn replay(existing: CallRow, payload_digest: &[u8], principal: &Principal) -> AppResult<CallView> {
    // A user's own calls include those their devices submitted; a device's, only its own.
    let mine = match principal {
        Principal::User(actor) => existing.created_by == actor.user.id,
        Principal::Device(device) => existing.submitted_by_device == Some(device.device.id),
    };
    let call = if mine {
        format!("call {}", existing.id)
    } else {
        "a call of another submitter".to_owned()
    };
    if existing.retention_expired_at.is_some() {
        return Err(AppError::refused(
            ErrorCode::McpReplayExpired,
            format!(
                "request_id {} belongs to {call} whose inputs and result have expired; read its disposition with `switchyard mcp status`, or use a fresh request_id",
                existing.request_id
            ),
        ));
    }
    if !mine {
        return Err(AppError::refused(
            ErrorCode::McpRequestConflict,
            format!(
                "request_id {} was already used by another submitter; use a fresh request_id for a new call",
                existing.request_id
            ),
        ));
    }
    if existing.payload_digest == payload_digest {
        Ok(views::call(&existing))
    } else {
        Err(AppError::refused(
            ErrorCode::McpRequestConflict,
            format!(
                "request_id {} was already used for {call} with another payload; use a fresh request_id for a new call",
                existing.request_id
            ),
        ))
    }
}

/// A completion as stored: its result bounded (the result as reported kept beside it only
/// when that cut it, for capture exclusions to filter first), everything kept until
/// [`App::apply_capture_exclusions`] says otherwise.
pub(super) fn stored_completion(completion: Completion) -> StoredCompletion {
    let finished = |state, result: serde_json::Value| {
        let (bounded, unbounded) = bound_keeping_original(result, RESULT_LIMIT);
        StoredCompletion {
            state,
            result: Some(bounded),
            result_truncated: unbounded.is_some(),
            unbounded,
            error_code: None,
            error_message: None,
            kept: Kept::All,
            credential_refused: false,
        }
    };
    let errored = |state, error: CallError| StoredCompletion {
        state,
        result: None,
        result_truncated: false,
        unbounded: None,
        // The runner's stable code says so, for a call that certainly did not run.
        credential_refused: state == CallState::Failed && codes::is_credential_failure(&error.code),
        error_code: Some(error.code),
        error_message: Some(error.message),
        kept: Kept::All,
    };
    match completion {
        Completion::Succeeded { result } => finished(CallState::Succeeded, result),
        Completion::ToolError { result } => finished(CallState::ToolError, result),
        Completion::Failed { error } => errored(CallState::Failed, error),
        Completion::Unknown { error } => errored(CallState::Unknown, error),
    }
}

/// One page of the calls list.
#[derive(Clone, Debug)]
pub struct CallPage {
    /// The calls, newest first.
    pub calls: Vec<CallView>,
    /// Start of the next older page, if there is one.
    pub older: Option<CallId>,
    /// Start of the next newer page, if there is one.
    pub newer: Option<CallId>,
}

/// What a page of the calls list shows: a filter (connection by id or name) and where to start.
#[derive(Clone, Debug, Default)]
pub struct CallQuery {
    /// Only calls in this state.
    pub state: Option<CallState>,
    /// Only calls on this connection (id or name).
    pub connection: Option<String>,
    /// Only calls placed on this runner.
    pub runner: Option<String>,
    /// Only calls submitted at or after this time.
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    /// Only calls submitted before this time.
    pub until: Option<chrono::DateTime<chrono::Utc>>,
    /// Where the page starts.
    pub from: crate::db::PageFrom,
}

/// Largest page of the calls list.
pub const MAX_PAGE: u32 = 200;

impl App {
    /// A filtered, keyset-paginated page of the calls the actor may read (current Use on their
    /// profile), newest first; at most `limit` (1–[`MAX_PAGE`]) calls.
    pub async fn call_page(
        &self,
        actor: &Actor,
        ws: &str,
        query: CallQuery,
        limit: u32,
    ) -> AppResult<CallPage> {
        use crate::db::{CallFilter, PageFrom};
        let membership = self.membership(actor, ws).await?;
        let workspace = membership.workspace.id;
        let connection = match &query.connection {
            Some(key) => Some(self.find_connection(workspace, key).await?.id),
            None => None,
        };
        // A runner that is none (not `central`, nor `device:` and a UUID) has placed no call.
        let runner = match query.runner.as_deref().map(str::parse::<RunnerRef>) {
            None => None,
            Some(Ok(runner)) => Some(runner),
            Some(Err(_)) => {
                return Ok(CallPage {
                    calls: Vec::new(),
                    older: None,
                    newer: None,
                });
            }
        };
        let filter = CallFilter {
            state: query.state,
            connection,
            runner,
            since: query.since,
            until: query.until,
            ..CallFilter::default()
        };
        let limit = limit.clamp(1, MAX_PAGE);
        // One more than asked tells whether another page follows in the direction of travel.
        let mut rows = self
            .db
            .call_list_page(
                workspace,
                actor.user.id,
                &filter,
                query.from,
                i64::from(limit) + 1,
            )
            .await?;
        let more = rows.len() > limit as usize;
        if more {
            match query.from {
                // Newer pages are read oldest first and reversed: the extra row is the newest.
                PageFrom::After(_) => drop(rows.remove(0)),
                PageFrom::Newest | PageFrom::Before(_) | PageFrom::Older(..) => {
                    rows.truncate(limit as usize);
                }
            }
        }
        let first = rows.first().map(|r| r.id);
        let last = rows.last().map(|r| r.id);
        let (older, newer) = match query.from {
            PageFrom::Newest => (if more { last } else { None }, None),
            PageFrom::Before(_) | PageFrom::Older(..) => (if more { last } else { None }, first),
            PageFrom::After(_) => (last, if more { first } else { None }),
        };
        Ok(CallPage {
            calls: rows.iter().map(views::call).collect(),
            older,
            newer,
        })
    }
}
