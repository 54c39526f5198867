//! The tasks extension (SEP-2663): a client that declares it gets, for a call that has not
//! settled at once, a task whose id is the Switchyard call's id, and polls it (`tasks/get`)
//! or cancels it (`tasks/cancel`). A task reads its call afresh at every poll, on any replica.

use super::call::{self, settled, settled_result};
use crate::app::{Actor, App, SettledWaiter};
use crate::error::AppResult;
use rmcp::model::{CreateTaskResult, DetailedTask, Task, TaskPayload, TaskStatus};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use std::time::Duration;
use switchyard_protocol::api::CallView;
use switchyard_protocol::{CallId, CallState};

/// How often a client is asked to poll a task.
const POLL_INTERVAL_MS: u64 = 1000;
/// How long a tasks client's call may take to settle and still be answered directly.
const DIRECT_ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// The call once settled, or as it is after [`DIRECT_ANSWER_WITHIN`] — at once when it awaits
/// a person, who will not answer within a moment; `waiter` is the one its submission handed
/// back, if any.
pub(super) async fn settle_briefly(
    app: &App,
    actor: &Actor,
    call: CallView,
    waiter: Option<SettledWaiter>,
) -> AppResult<CallView> {
    if settled(call.state) || call.state == CallState::AwaitingApproval {
        return Ok(call);
    }
    app.mcp_call_wait(
        actor,
        call.workspace_id,
        call.id,
        waiter,
        DIRECT_ANSWER_WITHIN,
    )
    .await
}

/// Whether the request's client declared the tasks extension.
pub(super) fn declared(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// The call a task id names, or invalid params.
pub(super) fn call_of(task_id: &str) -> Result<CallId, ErrorData> {
    task_id
        .parse()
        .map_err(|_| ErrorData::invalid_params(format!("no task `{task_id}`"), None))
}

/// The task a new, unsettled call becomes.
pub(super) fn created(call: &CallView) -> CreateTaskResult {
    CreateTaskResult::new(base(call, TaskStatus::Working))
}

/// A task as `tasks/get` answers it: working while the call is, else completed with the
/// answer a held `tools/call` would have given (a declined or failed call is a tool error),
/// or cancelled.
pub(super) fn detailed(call: &CallView) -> DetailedTask {
    let payload = if call.state == CallState::Cancelled {
        TaskPayload::Cancelled
    } else if settled(call.state) {
        let result = serde_json::to_value(settled_result(call))
            .ok()
            .and_then(|v| match v {
                serde_json::Value::Object(result) => Some(result),
                _ => None,
            })
            .unwrap_or_default();
        TaskPayload::Completed { result }
    } else {
        TaskPayload::Working
    };
    DetailedTask::new(base(call, payload.status()), payload)
}

/// The task's common fields.
fn base(call: &CallView, status: TaskStatus) -> Task {
    let updated = call
        .finished_at
        .or(call.started_at)
        .or(call.leased_at)
        .unwrap_or(call.created_at);
    Task::new(
        call.id.to_string(),
        status,
        call.created_at.to_rfc3339(),
        updated.to_rfc3339(),
    )
    .with_status_message(call::state_message(call))
    .with_poll_interval_ms(POLL_INTERVAL_MS)
}
