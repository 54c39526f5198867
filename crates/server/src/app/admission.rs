//! Admission of a new call: the checks a submission passes on what its one read found
//! (request shape, names, Use, operation, replay, whether the call can run, the workspace's
//! quotas) and what it comes to — a call to queue, a call to hold for a person
//! ([`switchyard_protocol::approval::decide`]), or a replay of a stored one.

use super::Actor;
use super::connections::connection_not_found;
use super::names::digest;
use super::operations::call_operation;
use super::principal::Principal;
use super::profiles::{environment_not_found, profile_not_found};
use crate::db::{
    CallOrigin, CallQuotas, CallRow, NewCall, ProfileRow, SubmitConnection, SubmitContext,
};
use crate::error::{AppError, AppResult};
use serde_json::json;
use std::borrow::Cow;
use switchyard_protocol::api::*;
use switchyard_protocol::approval::{self, ApprovalPolicy, AskReason, Floor, marks_destructive};
use switchyard_protocol::{CallId, EnvironmentId, ErrorCode};

/// Who a submission is from.
#[derive(Clone, Copy, Debug)]
pub(super) enum SubmittedBy<'a> {
    /// Authenticated before.
    Principal(&'a Principal),
    /// A user's API token, checked by the submission's read.
    UserToken(&'a str),
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
pub(super) enum Decision {
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
pub(super) fn submitter_principal<'a>(
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
pub(super) fn decide(
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
            trace: None,
        },
    };
    let profile_policy = found.approval_policy.unwrap_or_default();
    let destructive = marks_destructive(connection.tool_annotations.as_ref());
    let floor = Floor::of(
        classification.side_effect,
        classification.risk == Risk::High,
    );
    let (decision, policy) = approval::decide_with_agent(
        floor,
        destructive,
        profile_policy,
        found.agent_approval_policy,
    );
    match decision {
        approval::Decision::Run => Ok(Decision::New(call)),
        approval::Decision::Ask(why) => Ok(Decision::Held { call, why, policy }),
        approval::Decision::Refuse => Err(AppError::refused(
            ErrorCode::ApprovalUnavailable,
            format!(
                "tool `{}` needs a person's approval and the approval policy for connection `{}` is `never` ({}); nothing was queued (ask a holder of Manage to change the policy)",
                req.tool_name,
                connection.name,
                if profile_policy == ApprovalPolicy::Never {
                    format!("profile `{}`", profile.name)
                } else {
                    "the agent's setting".to_owned()
                },
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
                "workspace quota reached: at most {} queued calls, those awaiting approval included (--max-queued-per-workspace); nothing was queued, submit again once some have started or been answered",
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
