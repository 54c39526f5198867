//! `/mcp` tool calls: each an ordinary Switchyard call under its route's profile, submitted by
//! the principal, with the request_id the client chose (or a fresh one) — so a retry with
//! the same request_id finds the same call, running or ended.

use super::calls::PendingCheck;
use super::dispatch::call_wait::MAX_CALL_WAIT;
use super::dispatch::wakeups::SettledWaiter;
use super::mcp_catalog::McpTool;
use super::principal::Principal;
use super::{Actor, App};
use crate::db::{InFlight, TraceParent};
use crate::error::{AppError, AppResult};
use std::time::Duration;
use switchyard_protocol::api::{CallView, CancelAnswer, SubmitCall};
use switchyard_protocol::{CallId, ErrorCode, RequestId, WorkspaceId};
use tokio::time::Instant;

impl App {
    /// Submits (or, for a known request_id, finds) the call of `tool` with `arguments` for
    /// `actor`, under the tool's route; `trace` is the client's trace context. A new, unsettled
    /// call comes with its settle waiter, for the first [`App::mcp_call_wait`]. With a `check`
    /// of `actor` still on its way, the submission reads first and waits for it before
    /// anything else ([`PendingCheck`]).
    pub(crate) async fn mcp_call_submit(
        &self,
        actor: &Actor,
        tool: &McpTool,
        arguments: serde_json::Value,
        request_id: RequestId,
        trace: Option<TraceParent>,
        check: Option<PendingCheck<'_>>,
    ) -> AppResult<(CallView, Option<SettledWaiter>)> {
        let req = SubmitCall {
            request_id,
            profile_id: tool.route.profile_id.to_string(),
            connection_id: tool.route.connection_id.to_string(),
            tool_name: tool.tool_name.clone(),
            arguments,
            environment_id: None,
            client_session_id: None,
            timeout_seconds: None,
            operation_id: None,
        };
        let principal = Principal::User(actor.clone());
        let ws = tool.route.workspace_id.to_string();
        self.call_submit_traced(&principal, &ws, req, trace, check)
            .await
    }

    /// The call, once settled or after `wait` (each wait is bounded as `?wait_ms=` reads are).
    /// With the `waiter` its submission handed back, the wait begins without a read: the
    /// waiter has seen every completion since before the call was inserted.
    pub(crate) async fn mcp_call_wait(
        &self,
        actor: &Actor,
        workspace: WorkspaceId,
        call: CallId,
        waiter: Option<SettledWaiter>,
        wait: Duration,
    ) -> AppResult<CallView> {
        let principal = Principal::User(actor.clone());
        let (ws, call) = (workspace.to_string(), call.to_string());
        match waiter {
            Some(waiter) => {
                let deadline = Instant::now() + wait.min(MAX_CALL_WAIT);
                self.call_wait_with(&principal, &ws, &call, waiter, deadline)
                    .await
            }
            None => self.call_wait_as(&principal, &ws, &call, wait).await,
        }
    }

    /// Cancels the call for its `/mcp` client, as `mcp cancel` does (and audited alike): the
    /// client cancelled or left its request, or cancelled the call's task.
    pub async fn mcp_call_cancel(
        &self,
        actor: &Actor,
        workspace: WorkspaceId,
        call: CallId,
    ) -> AppResult<CancelAnswer> {
        self.call_cancel(actor, &workspace.to_string(), &call.to_string())
            .await
    }

    /// Records that request `request` (a JSON-RPC id as JSON text) of `/mcp` session `session`
    /// is `call`, held open; a request its client already cancelled has the call cancelled.
    pub async fn mcp_request_record(
        &self,
        actor: &Actor,
        (session, request): (&str, &str),
        workspace: WorkspaceId,
        call: CallId,
    ) -> AppResult<()> {
        if !self
            .db
            .mcp_request_record(session, request, workspace, call)
            .await?
        {
            self.mcp_call_cancel(actor, workspace, call).await?;
            self.db.mcp_request_forget(session, request, None).await?;
        }
        Ok(())
    }

    /// Forgets request `request` of `session` once its answer is sent (if it still is `call`).
    pub async fn mcp_request_forget(
        &self,
        (session, request): (&str, &str),
        call: CallId,
    ) -> AppResult<()> {
        Ok(self
            .db
            .mcp_request_forget(session, request, Some(call))
            .await?)
    }

    /// The client of `session` cancelled its request `request` (`notifications/cancelled`,
    /// received by any replica): its call is cancelled, or, when the request has recorded
    /// none yet, it will be as it records one.
    pub async fn mcp_request_cancel(
        &self,
        actor: &Actor,
        (session, request): (&str, &str),
    ) -> AppResult<()> {
        if let InFlight::Call { workspace, call } =
            self.db.mcp_request_cancel(session, request).await?
        {
            self.mcp_call_cancel(actor, workspace, call).await?;
            self.db
                .mcp_request_forget(session, request, Some(call))
                .await?;
        }
        Ok(())
    }

    /// A call named by its id alone (an `/mcp` task's), as `actor` may read it.
    pub async fn mcp_task_get(&self, actor: &Actor, call: CallId) -> AppResult<CallView> {
        let workspace = self.task_workspace(call).await?;
        let principal = Principal::User(actor.clone());
        self.call_get_as(&principal, &workspace.to_string(), &call.to_string())
            .await
    }

    /// Cancels a call named by its id alone (`tasks/cancel`).
    pub async fn mcp_task_cancel(&self, actor: &Actor, call: CallId) -> AppResult<CancelAnswer> {
        let workspace = self.task_workspace(call).await?;
        self.mcp_call_cancel(actor, workspace, call).await
    }

    /// The workspace of a task's call, or `call_not_found`.
    async fn task_workspace(&self, call: CallId) -> AppResult<WorkspaceId> {
        self.db
            .call_workspace(call)
            .await?
            .ok_or_else(|| AppError::refused(ErrorCode::CallNotFound, format!("no task `{call}`")))
    }

    /// How long `/mcp` holds a `tools/call` for its call to settle before answering that it
    /// awaits approval or still runs.
    pub fn mcp_call_hold(&self) -> Duration {
        self.config.mcp_call_hold
    }
}
