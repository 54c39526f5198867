//! Cancelling calls, releasing warm sessions and reading connection lifecycle events.

use super::{Actor, App, Audit, views};
use crate::db::CancelEffect;
use crate::error::{AppError, AppResult};
use serde_json::json;
use switchyard_protocol::api::*;
use switchyard_protocol::runner::LifecycleEvent;
use switchyard_protocol::{CallId, ConnectionId, ErrorCode, RunnerRef, WorkspaceId};

impl App {
    /// Cancels a call (Use on its profile needed): a call awaiting approval, queued or leased
    /// is cancelled at once (a held call's question closed with it, `approval.cancelled` in
    /// the audit log) and its waiting readers woken, a running one is asked to stop through
    /// its runner, a finished one is left as it is.
    pub async fn call_cancel(
        &self,
        actor: &Actor,
        ws: &str,
        call: &str,
    ) -> AppResult<CancelAnswer> {
        let before = self.call_get(actor, ws, call).await?;
        let effect = self.sent(self.db.call_cancel(before.workspace_id, before.id).await?);
        self.audit_cancel(
            actor,
            effect,
            (before.workspace_id, before.connection_id, before.id),
            &before.tool_name,
        )
        .await;
        let outcome = match effect {
            CancelEffect::Cancelled { .. } => CancelOutcome::Cancelled,
            CancelEffect::Requested => CancelOutcome::CancellationRequested,
            CancelEffect::Nothing => CancelOutcome::AlreadyFinished,
        };
        let call = self.call_get(actor, ws, call).await?;
        Ok(CancelAnswer { outcome, call })
    }

    /// Counts a cancel that ended the call, and audits a cancel by `actor` of `call` (its
    /// workspace, connection and id) that closed its approval question
    /// (`approval.cancelled`); any other effect is not an audited change.
    pub(crate) async fn audit_cancel(
        &self,
        actor: &Actor,
        effect: CancelEffect,
        (workspace, connection, call): (WorkspaceId, ConnectionId, CallId),
        tool: &str,
    ) {
        if matches!(effect, CancelEffect::Cancelled { .. }) {
            self.metrics
                .calls_finished(switchyard_protocol::CallState::Cancelled, 1);
        }
        if effect
            == (CancelEffect::Cancelled {
                question_closed: true,
            })
        {
            self.audit(
                Audit::by(actor, "approval.cancelled")
                    .workspace(workspace)
                    .connection(connection)
                    .object("call", Some(call.0), tool)
                    .before(json!({"state": "awaiting_approval"}))
                    .after(json!({"state": "cancelled"})),
            )
            .await;
        }
    }

    /// Drains the actor's own warm sessions with this key (under any profile) on one
    /// connection, or on every connection the actor may use: active calls finish, then the
    /// sessions close. Other users' sessions with the same key are theirs, and stay.
    pub async fn session_release(
        &self,
        actor: &Actor,
        ws: &str,
        client_session_id: &str,
        req: ReleaseSession,
    ) -> AppResult<ReleaseAnswer> {
        super::names::validate_client_session_id(client_session_id)?;
        let membership = self.membership(actor, ws).await?;
        let usable = self
            .db
            .connection_usable(membership.workspace.id, actor.user.id)
            .await?;
        let targets: Vec<(ConnectionId, RunnerRef)> = match &req.connection_id {
            Some(key) => {
                let connection = self.find_connection(membership.workspace.id, key).await?;
                if !usable.iter().any(|(id, _)| *id == connection.id) {
                    return Err(AppError::refused(
                        ErrorCode::Forbidden,
                        format!(
                            "you need Use on a profile that includes connection `{}`",
                            connection.name
                        ),
                    ));
                }
                vec![(connection.id, connection.runner_ref)]
            }
            None => usable,
        };
        for (connection, runner) in &targets {
            self.db
                .session_release_notify(*runner, *connection, client_session_id, actor.user.id)
                .await?;
        }
        Ok(ReleaseAnswer {
            client_session_id: client_session_id.to_owned(),
            connection_ids: targets.into_iter().map(|(id, _)| id).collect(),
        })
    }

    /// The last lifecycle events of a connection, newest first. A session's
    /// `client_session_id` is shown only to a reader with Use on the profile it served.
    pub async fn connection_events(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
    ) -> AppResult<Vec<ConnectionEventView>> {
        let membership = self.membership(actor, ws).await?;
        let connection = self.find_connection(membership.workspace.id, key).await?;
        Ok(self
            .db
            .event_list(connection.id, actor.user.id)
            .await?
            .iter()
            .map(views::event)
            .collect())
    }

    /// Records a runner's lifecycle event. The event types carry no secret by construction.
    pub async fn event_record(&self, runner: RunnerRef, event: &LifecycleEvent) -> AppResult<()> {
        let (kind, detail) = match event {
            // The profile decides who may see the session id (`Datastore::event_list`).
            LifecycleEvent::SessionStarted {
                client_session_id,
                profile_id,
                pid,
                ..
            } => (
                "session_started",
                json!({"client_session_id": client_session_id, "profile_id": profile_id, "pid": pid}),
            ),
            LifecycleEvent::SessionClosed {
                client_session_id,
                profile_id,
                reason,
                ..
            } => (
                "session_closed",
                json!({"client_session_id": client_session_id, "profile_id": profile_id, "reason": reason}),
            ),
            LifecycleEvent::ProcessExited {
                pid,
                status,
                signal,
                ..
            } => (
                "process_exited",
                json!({"pid": pid, "status": status, "signal": signal}),
            ),
        };
        Ok(self
            .db
            .event_record(event.connection_id(), kind, &detail, Some(runner))
            .await?)
    }
}

/// The call id in a path, or `call_not_found`.
pub(crate) fn parse_call_id(call: &str) -> AppResult<CallId> {
    call.parse().map_err(|_| {
        AppError::refused(
            ErrorCode::CallNotFound,
            format!("no call `{call}` in this workspace"),
        )
    })
}
