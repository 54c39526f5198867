//! Calls: submission with request-ID idempotency, reads under current Use, and recording the
//! completions runners report (fenced by their lease epoch).

use super::auth::hash_token;
use super::connections::connection_not_found;
use super::dispatch::call_wait::{MAX_CALL_WAIT, is_settled};
use super::dispatch::wakeups::SettledWaiter;
use super::names::digest;
use super::operations::call_operation;
use super::principal::{DEVICE_CREDENTIAL_PREFIX, Principal};
use super::profiles::{environment_not_found, profile_not_found};
use super::results::{RESULT_LIMIT, bound_result};
use super::{Actor, App, views};
use crate::db::{
    CallOrigin, CallQuotas, CallRow, Key, NewCall, PlainCompletion, ProfileRow, StoredCompletion,
    SubmitConnection, SubmitContext, SubmitKeys, SubmitRead, SubmitterKey,
};
use crate::error::{AppError, AppResult};
use serde_json::json;
use std::borrow::Cow;
use std::collections::HashSet;
use std::time::Duration;
use switchyard_protocol::api::*;
use switchyard_protocol::approval::{self, ApprovalPolicy, AskReason, Floor, marks_destructive};
use switchyard_protocol::runner::{Completion, Epoch};
use switchyard_protocol::{CallId, CallState, EnvironmentId, ErrorCode, RunnerRef};
use tokio::time::Instant;
use uuid::Uuid;

/// How many calls a list returns.
const LIST_LIMIT: i64 = 100;

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

/// Who a submission is from.
#[derive(Clone, Copy, Debug)]
enum SubmittedBy<'a> {
    /// Authenticated before.
    Principal(&'a Principal),
    /// A user's API token, checked by the submission's read.
    UserToken(&'a str),
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
        self.submit(SubmittedBy::Principal(principal), ws, req, wait)
            .await
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
        self.submit(SubmittedBy::UserToken(token), ws, req, wait)
            .await
    }

    /// [`App::call_submit_waiting`] for either kind of submitter: its submit read (made with
    /// the others that wait at the same moment), the decision, then the insert.
    async fn submit(
        &self,
        by: SubmittedBy<'_>,
        ws: &str,
        req: SubmitCall,
        wait: Duration,
    ) -> AppResult<(CallView, bool)> {
        let deadline = Instant::now() + wait.min(MAX_CALL_WAIT);
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
            } => {
                self.replayed(&principal, ws, existing, &payload_digest, deadline)
                    .await
            }
            Decision::New(call) => {
                let waiter = (!wait.is_zero())
                    .then(|| self.dispatch.announcer.local.settled_waiter(call.id));
                let (workspace_id, request_id) = (call.workspace_id, call.request_id);
                let payload_digest = call.payload_digest.clone();
                match self.dispatch.submissions.insert(call).await? {
                    Some(row) => self.inserted(&principal, ws, &row, waiter, deadline).await,
                    // A concurrent submission with the same request_id won the insert.
                    None => {
                        self.lost_insert(
                            &principal,
                            ws,
                            (workspace_id, request_id),
                            &payload_digest,
                            deadline,
                        )
                        .await
                    }
                }
            }
            // Held for a person: its own statement, never batched nor handed to a lease, and
            // answered at once even to a waiting caller, who learns it awaits approval.
            Decision::Held { call, why, policy } => {
                let key = (call.workspace_id, call.request_id);
                match self.db.call_insert_held(&call, why, policy).await? {
                    Some(row) => Ok((views::call(&row), true)),
                    None => {
                        self.lost_insert(&principal, ws, key, &call.payload_digest, deadline)
                            .await
                    }
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

    /// The newest calls the actor may read.
    pub async fn call_list(&self, actor: &Actor, ws: &str) -> AppResult<CallList> {
        let membership = self.membership(actor, ws).await?;
        let rows = self
            .db
            .call_list_usable(membership.workspace.id, actor.user.id, LIST_LIMIT)
            .await?;
        Ok(CallList {
            calls: rows.iter().map(views::call).collect(),
        })
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
            Ok(recorded) => self.sent(recorded).into_iter().collect(),
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
        stored: StoredCompletion,
        receipt: Option<Uuid>,
    ) -> AppResult<(CompletionRecorded, bool)> {
        let from = from_states(stored.state);
        // The state change and what it implies (a lookup's observation on its unknown call,
        // captured evidence) are recorded in one transaction; a completion that implies
        // nothing else is one statement.
        let effects = self.completion_effects(&stored, receipt);
        // A reader waiting here is handed the call as recorded, read by the statement that
        // records it.
        let read_lineage = self.dispatch.announcer.local.waited_for(call);
        if let Some(completed) = self
            .db
            .call_complete_with_effects(call, runner, epoch, &from, &stored, effects, read_lineage)
            .await?
        {
            // A device discovery's catalog is reconciled before its readers are woken.
            if completed.value.call.kind == CallKind::Discovery
                && let Err(error) = self.discovery_settled(&completed.value.call).await
            {
                tracing::warn!(%error, call = %call, "a device discovery's catalog was not reconciled; the next `connection discover` will");
            }
            let completed = self.sent(completed);
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

/// Refuses a submission whose arguments, timeout or tool name are malformed; returns the
/// timeout with its default applied.
fn check_request(req: &SubmitCall) -> AppResult<u32> {
    if !req.arguments.is_object() {
        return Err(AppError::refused(
            ErrorCode::InvalidArguments,
            "`arguments` must be a JSON object, e.g. {\"text\": \"hello\"}",
        ));
    }
    let timeout = req.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    if !(1..=MAX_TIMEOUT_SECONDS).contains(&timeout) {
        return Err(AppError::refused(
            ErrorCode::InvalidTimeout,
            format!("`timeout_seconds` must be between 1 and {MAX_TIMEOUT_SECONDS}, got {timeout}"),
        ));
    }
    if req.tool_name.is_empty() {
        return Err(AppError::refused(
            ErrorCode::InvalidRequest,
            "`tool_name` must not be empty",
        ));
    }
    if let Some(session) = &req.client_session_id {
        super::names::validate_client_session_id(session)?;
    }
    Ok(timeout)
}

/// What a submission comes to, on a read that found its workspace. (Moved once, never
/// stored: its variants are not boxed.)
#[allow(clippy::large_enum_variant)]
enum Decision {
    /// A new call, to insert.
    New(NewCall),
    /// A new call that needs a person's approval: inserted held, with its question.
    Held {
        call: NewCall,
        why: AskReason,
        policy: ApprovalPolicy,
    },
    /// The request_id names a stored call: replayed with this request's payload digest.
    Replay {
        existing: CallRow,
        payload_digest: Vec<u8>,
    },
}

/// Who submits, once the read found the workspace: the principal authenticated before, or
/// the user of the API token the read checked.
fn submitter_principal<'a>(
    by: SubmittedBy<'a>,
    found: &SubmitContext,
) -> AppResult<Cow<'a, Principal>> {
    match by {
        SubmittedBy::Principal(principal) => Ok(Cow::Borrowed(principal)),
        SubmittedBy::UserToken(_) => {
            let user = found
                .token_user
                .clone()
                .ok_or_else(|| AppError::Internal("a token's read without its user".into()))?;
            Ok(Cow::Owned(Principal::User(Actor { user })))
        }
    }
}

/// Decides a submission by `principal` on what its submit read found (`found`, and `existing`, the
/// call stored under its request_id), refusing in the order the answers have always had:
/// request shape, names, Use, operation, replay, whether the call can run, then the
/// workspace's `quotas`.
fn decide(
    principal: &Principal,
    req: &SubmitCall,
    found: &SubmitContext,
    existing: Option<CallRow>,
    quotas: CallQuotas,
) -> AppResult<Decision> {
    let timeout = check_request(req)?;
    let profile = found
        .profile
        .as_ref()
        .ok_or_else(|| profile_not_found(&req.profile_id))?;
    let connection = found
        .connection
        .as_ref()
        .ok_or_else(|| connection_not_found(&req.connection_id))?;
    let environment = match (&req.environment_id, found.environment_id) {
        (None, _) => profile.environment_id,
        (Some(_), Some(id)) => id,
        (Some(key), None) => return Err(environment_not_found(key)),
    };
    principal.require_use_read(profile, found.user_holds_use)?;
    let operation = call_operation(
        principal,
        req.operation_id,
        found.operation.as_ref(),
        profile,
        environment,
    )?;

    // The canonical payload, after names are resolved to ids and defaults applied.
    let mut payload = json!({
        "profile_id": profile.id,
        "connection_id": connection.id,
        "environment_id": environment,
        "tool_name": req.tool_name,
        "arguments": req.arguments,
        "client_session_id": req.client_session_id,
        "timeout_seconds": timeout,
    });
    // Only when present, so digests of calls without an operation stay as they were.
    if let Some(operation) = operation {
        payload["operation_id"] = json!(operation);
    }
    let payload_digest = digest(&payload);
    if let Some(existing) = existing {
        return Ok(Decision::Replay {
            existing,
            payload_digest,
        });
    }
    let classification = check_runnable(
        profile,
        connection,
        (found.profile_has_connection, found.tool_granted),
        environment,
        &req.tool_name,
    )?;
    check_quotas(found, quotas)?;
    let call = NewCall {
        id: CallId::new(),
        workspace_id: found.workspace_id,
        request_id: req.request_id,
        payload_digest,
        profile_id: profile.id,
        connection_id: connection.id,
        connection_revision: connection.revision,
        environment_id: environment,
        tool_name: req.tool_name.clone(),
        arguments: req.arguments.clone(),
        client_session_id: req.client_session_id.clone(),
        // check_request bounds it to 1–3600.
        timeout_seconds: i32::try_from(timeout).unwrap_or(i32::MAX),
        runner_ref: connection.runner_ref,
        // A device's calls are accounted to the user who approved it.
        created_by: principal.accountable_user(),
        origin: CallOrigin {
            operation_id: operation,
            device_id: match principal {
                Principal::User(_) => None,
                Principal::Device(device) => Some(device.device.id),
            },
            lookup_of: None,
            discovery: false,
        },
    };
    let policy = found.approval_policy.unwrap_or_default();
    let destructive = marks_destructive(connection.tool_annotations.as_ref());
    let floor = Floor::of(
        classification.side_effect,
        classification.risk == Risk::High,
    );
    match approval::decide(floor, destructive, policy) {
        approval::Decision::Run => Ok(Decision::New(call)),
        approval::Decision::Ask(why) => Ok(Decision::Held { call, why, policy }),
        approval::Decision::Refuse => Err(AppError::refused(
            ErrorCode::ApprovalUnavailable,
            format!(
                "tool `{}` needs a person's approval and profile `{}`'s approval policy for connection `{}` is `never`; nothing was queued (ask a holder of Manage to change the policy)",
                req.tool_name, profile.name, connection.name
            ),
        )),
    }
}

/// Refuses a new call while its workspace holds as many queued calls, or leased and running
/// calls, as `quotas` allow. The running quota is checked here, at submission, by counting the
/// workspace's calls in flight: a workspace at it queues nothing more until some finish (the
/// calls it queued before are leased as usual).
fn check_quotas(found: &SubmitContext, quotas: CallQuotas) -> AppResult<()> {
    let over = |count: i64, max: u32| count >= i64::from(max);
    if over(found.queued_calls, quotas.max_queued) {
        return Err(AppError::refused(
            ErrorCode::QuotaExceeded,
            format!(
                "workspace quota reached: at most {} queued calls (--max-queued-per-workspace); nothing was queued, submit again once some have started",
                quotas.max_queued
            ),
        ));
    }
    if over(found.running_calls, quotas.max_running) {
        return Err(AppError::refused(
            ErrorCode::QuotaExceeded,
            format!(
                "workspace quota reached: at most {} leased or running calls (--max-running-per-workspace); nothing was queued, submit again once some have finished",
                quotas.max_running
            ),
        ));
    }
    Ok(())
}

/// Refuses a new call that could not run: a retired connection, connector or profile (in that
/// order, as the start ack names them), another environment than its profile's, a connection
/// the profile does not include or a tool it does not grant (`granted`: whether the profile
/// includes the connection, and grants the tool), a connector not approved, a runner that is
/// gone, a device placement its owner has not accepted for the current spec, or a tool the
/// connection does not offer (`tool_not_found`, on every placement: a device's catalog is
/// discovered by its runner), no longer offers (`tool_unavailable`) or offers unclassified
/// (`tool_unclassified`). A call that can run: its tool's classification.
fn check_runnable(
    profile: &ProfileRow,
    connection: &SubmitConnection,
    granted: (bool, bool),
    environment: EnvironmentId,
    tool_name: &str,
) -> AppResult<ToolClassification> {
    let (profile_has_connection, tool_granted) = granted;
    let retired = [
        (
            connection.connection_retired,
            ErrorCode::ConnectionRetired,
            &connection.name,
        ),
        (
            connection.connector_retired,
            ErrorCode::ConnectorRetired,
            &connection.connector_name,
        ),
        (
            profile.retired_at.is_some(),
            ErrorCode::ProfileRetired,
            &profile.name,
        ),
    ];
    if let Some((_, code, name)) = retired.into_iter().find(|(retired, ..)| *retired) {
        return Err(super::retire::refused_retired(code, name));
    }
    if environment != profile.environment_id {
        return Err(AppError::refused(
            ErrorCode::EnvironmentMismatch,
            format!(
                "profile `{}` runs in another environment than the one requested",
                profile.name
            ),
        ));
    }
    if !profile_has_connection {
        return Err(AppError::refused(
            ErrorCode::ConnectionNotInProfile,
            format!(
                "profile `{}` does not include connection `{}`",
                profile.name, connection.name
            ),
        ));
    }
    if !tool_granted {
        return Err(AppError::refused(
            ErrorCode::ToolNotGranted,
            format!(
                "profile `{}` grants only some tools of connection `{}`, and not `{tool_name}`",
                profile.name, connection.name
            ),
        ));
    }
    if !connection.connector_runnable {
        return Err(super::connections::not_approved(&connection.connector_name));
    }
    if !connection.runner_available {
        return Err(super::devices::runner_gone(
            &connection.name,
            connection.runner_ref,
        ));
    }
    super::placements::require_consent(connection)?;
    let Some(tool) = connection.tool else {
        return Err(AppError::refused(
            ErrorCode::ToolNotFound,
            format!(
                "connection `{}` has no discovered tool `{tool_name}`; nothing was queued. Run `switchyard connection discover` to refresh the catalog (a device connection is discovered by its device's runner)",
                connection.name
            ),
        ));
    };
    if !tool.available {
        return Err(AppError::refused(
            ErrorCode::ToolUnavailable,
            format!(
                "tool `{tool_name}` is no longer offered by connection `{}` (its last discovery did not list it); nothing was queued",
                connection.name
            ),
        ));
    }
    tool.classification.ok_or_else(|| {
        AppError::refused(
            ErrorCode::ToolUnclassified,
            format!(
                "tool `{tool_name}` of connection `{}` is not classified yet, so it cannot be called; nothing was queued. A workspace admin classifies it: `switchyard tool classify WS {} {tool_name} --risk low|medium|high --side-effect|--read-only`",
                connection.name, connection.name
            ),
        )
    })
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

pub(super) fn stored_completion(completion: Completion) -> StoredCompletion {
    let finished = |state, result: serde_json::Value| {
        let (result, result_truncated) = bound_result(result, RESULT_LIMIT);
        StoredCompletion {
            state,
            result: Some(result),
            result_truncated,
            error_code: None,
            error_message: None,
        }
    };
    let errored = |state, error: CallError| StoredCompletion {
        state,
        result: None,
        result_truncated: false,
        error_code: Some(error.code),
        error_message: Some(error.message),
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
                PageFrom::Newest | PageFrom::Before(_) => rows.truncate(limit as usize),
            }
        }
        let first = rows.first().map(|r| r.id);
        let last = rows.last().map(|r| r.id);
        let (older, newer) = match query.from {
            PageFrom::Newest => (if more { last } else { None }, None),
            PageFrom::Before(_) => (if more { last } else { None }, first),
            PageFrom::After(_) => (last, if more { first } else { None }),
        };
        Ok(CallPage {
            calls: rows.iter().map(views::call).collect(),
            older,
            newer,
        })
    }
}
