//! The approval gate's operations: reading and answering the questions held calls ask, the
//! profiles' approval policies and the workspace's approval timeout.
//!
//! Who may answer: a person (these operations take an [`Actor`], a user; a device credential
//! never reaches them) holding Approve on the call's profile right now, who did not submit
//! the call — a device's call counts as submitted by the user who approved the device. The
//! datastore's answer repeats those rules in its guarded statement, so a grant revoked or a
//! second answer racing this one changes nothing.

use super::call_trace;
use super::{Actor, App, Audit, views};
use crate::db::{Answered, ApprovalRow};
use crate::error::{AppError, AppResult};
use crate::metrics::Decision;
use serde_json::json;
use switchyard_protocol::approval::{
    ApprovalList, ApprovalPolicyList, ApprovalState, ApprovalTimeout, ApprovalView, DecideApproval,
    SetApprovalPolicy,
};
use switchyard_protocol::{CallId, CallState, ErrorCode, WorkspaceId};

/// How many questions a list returns.
const LIST_LIMIT: i64 = 100;
/// Longest note an answer may carry.
const MAX_REASON_CHARS: usize = 2000;
/// Longest approval timeout: 30 days.
const MAX_TIMEOUT_SECONDS: u64 = 30 * 24 * 3600;

impl App {
    /// The newest questions of a workspace the actor may read: about calls through a profile
    /// on which they hold Approve or Use, or that they submitted. Pending first.
    pub async fn approval_list(&self, actor: &Actor, ws: &str) -> AppResult<ApprovalList> {
        let membership = self.membership(actor, ws).await?;
        let rows = self
            .db
            .approval_list(membership.workspace.id, actor.user.id, LIST_LIMIT)
            .await?;
        Ok(ApprovalList {
            approvals: rows
                .iter()
                .map(|row| views::approval(row, actor.user.id))
                .collect(),
        })
    }

    /// One question, with the exact arguments it is bound to.
    pub async fn approval_get(
        &self,
        actor: &Actor,
        ws: &str,
        call: &str,
    ) -> AppResult<ApprovalView> {
        let membership = self.membership(actor, ws).await?;
        let row = self
            .readable_approval(actor, membership.workspace.id, call)
            .await?;
        Ok(views::approval(&row, actor.user.id))
    }

    /// Approves the call a question is about: it is queued and runs once, as any other.
    pub async fn approval_approve(
        &self,
        actor: &Actor,
        ws: &str,
        call: &str,
        req: DecideApproval,
    ) -> AppResult<ApprovalView> {
        self.answer(actor, ws, call, true, req).await
    }

    /// Declines the call a question is about: it ends `declined`, never sent, with the reason
    /// as the result its caller reads.
    pub async fn approval_decline(
        &self,
        actor: &Actor,
        ws: &str,
        call: &str,
        req: DecideApproval,
    ) -> AppResult<ApprovalView> {
        self.answer(actor, ws, call, false, req).await
    }

    async fn answer(
        &self,
        actor: &Actor,
        ws: &str,
        call: &str,
        approve: bool,
        req: DecideApproval,
    ) -> AppResult<ApprovalView> {
        let reason = req
            .reason
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty());
        if reason.is_some_and(|r| r.chars().count() > MAX_REASON_CHARS) {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                format!("`reason` is longer than {MAX_REASON_CHARS} characters; shorten it"),
            ));
        }
        let membership = self.membership(actor, ws).await?;
        let workspace = membership.workspace.id;
        let row = self.readable_approval(actor, workspace, call).await?;
        refuse_answer(actor, &row)?;
        let answered = self
            .db
            .approval_answer(workspace, row.call_id, actor.user.id, approve, reason)
            .await?;
        if self.sent(answered) == Answered::Unchanged {
            // Answered or expired meanwhile, or the grant went: say which, as it is now.
            let now = self.readable_approval(actor, workspace, call).await?;
            refuse_answer(actor, &now)?;
            return Err(already_decided(&now));
        }
        let row = self.readable_approval(actor, workspace, call).await?;
        if let Some(waited) = row
            .decided_at
            .and_then(|at| (at - row.asked_at).to_std().ok())
        {
            let decision = if approve {
                Decision::Approved
            } else {
                Decision::Declined
            };
            self.metrics.approval_answered(decision, waited);
            call_trace::record_wait(
                "approval wait",
                row.call_id,
                row.traceparent.as_deref(),
                row.asked_at,
                &[(
                    "switchyard.approval.decision",
                    if approve { "approved" } else { "declined" }.to_owned(),
                )],
            );
        }
        if !approve {
            self.metrics.calls_finished(CallState::Declined, 1);
        }
        // The answer, never the arguments: they may carry what the log must not keep.
        let action = if approve {
            "approval.approved"
        } else {
            "approval.declined"
        };
        self.audit(
            Audit::by(actor, action)
                .workspace(workspace)
                .connection(row.connection_id)
                .object("call", Some(row.call_id.0), &row.tool_name)
                .before(json!({"state": "awaiting_approval"}))
                .after(json!({"approved": approve, "reason": reason})),
        )
        .await;
        Ok(views::approval(&row, actor.user.id))
    }

    /// The question about `call`, if the actor may read it; else `approval_not_found`, so that
    /// questions about others' calls are not revealed.
    async fn readable_approval(
        &self,
        actor: &Actor,
        workspace: WorkspaceId,
        call: &str,
    ) -> AppResult<ApprovalRow> {
        let not_found = || {
            AppError::refused(
                ErrorCode::ApprovalNotFound,
                format!(
                    "no approval question about call `{call}` in this workspace; `switchyard approval list` shows those you may read"
                ),
            )
        };
        let id: CallId = call.parse().map_err(|_| not_found())?;
        let row = self
            .db
            .approval_get(workspace, actor.user.id, id)
            .await?
            .ok_or_else(not_found)?;
        let readable = row.reader_may_approve
            || row.asked_by == actor.user.id
            || self.db.grants_of(row.profile_id, actor.user.id).await?.use_;
        if readable { Ok(row) } else { Err(not_found()) }
    }

    /// Sets a profile's approval policy for its connections, one of them, or one tool of one
    /// (holders of Manage, and workspace admins). Answers the profile's policies now.
    pub async fn profile_set_approval(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
        req: SetApprovalPolicy,
    ) -> AppResult<ApprovalPolicyList> {
        let membership = self.membership(actor, ws).await?;
        let profile = self.find_profile(membership.workspace.id, key).await?;
        if !membership.is_admin && !self.db.grants_of(profile.id, actor.user.id).await?.manage {
            return Err(AppError::refused(
                ErrorCode::Forbidden,
                format!(
                    "you need the Manage grant on profile `{}`, or to be a workspace admin, to set its approval policy",
                    profile.name
                ),
            ));
        }
        let connection = match &req.connection {
            Some(key) => Some(self.find_connection(membership.workspace.id, key).await?),
            None => None,
        };
        let tool = req.tool.as_deref().map(str::trim);
        if tool.is_some() && connection.is_none() {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                "a tool's policy names its connection too: add `connection`",
            ));
        }
        if tool.is_some_and(str::is_empty) {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                "`tool` must not be empty",
            ));
        }
        let included = self
            .db
            .approval_policy_set(
                profile.id,
                connection.as_ref().map(|c| c.id),
                tool,
                req.policy,
                actor.user.id,
            )
            .await?;
        if !included {
            return Err(AppError::refused(
                ErrorCode::ConnectionNotInProfile,
                format!(
                    "profile `{}` does not include connection `{}`; add it to the profile first",
                    profile.name,
                    connection.map(|c| c.name).unwrap_or_default()
                ),
            ));
        }
        self.approval_policies_of(profile.id).await
    }

    /// A profile's approval policies (members of its workspace).
    pub async fn profile_approval_policies(
        &self,
        actor: &Actor,
        ws: &str,
        key: &str,
    ) -> AppResult<ApprovalPolicyList> {
        let membership = self.membership(actor, ws).await?;
        let profile = self.find_profile(membership.workspace.id, key).await?;
        self.approval_policies_of(profile.id).await
    }

    async fn approval_policies_of(
        &self,
        profile: switchyard_protocol::ProfileId,
    ) -> AppResult<ApprovalPolicyList> {
        let rows = self.db.approval_policy_list(profile).await?;
        Ok(ApprovalPolicyList {
            policies: rows.iter().map(views::approval_policy).collect(),
        })
    }

    /// Sets how long a workspace's questions wait before their calls expire (workspace
    /// admins); `None`: they never expire. Applies to questions already waiting too.
    pub async fn workspace_set_approval_timeout(
        &self,
        actor: &Actor,
        ws: &str,
        req: ApprovalTimeout,
    ) -> AppResult<ApprovalTimeout> {
        let membership = self.admin_membership(actor, ws).await?;
        let seconds = match req.seconds {
            None => None,
            Some(s) if (1..=MAX_TIMEOUT_SECONDS).contains(&s) => i32::try_from(s).ok(),
            Some(s) => {
                return Err(AppError::refused(
                    ErrorCode::InvalidRequest,
                    format!(
                        "an approval timeout is 1–{MAX_TIMEOUT_SECONDS} seconds, got {s}; omit it for no expiry"
                    ),
                ));
            }
        };
        self.db
            .workspace_set_approval_timeout(membership.workspace.id, seconds)
            .await?;
        Ok(ApprovalTimeout {
            seconds: req.seconds,
        })
    }

    /// A workspace's approval timeout (members).
    pub async fn workspace_approval_timeout(
        &self,
        actor: &Actor,
        ws: &str,
    ) -> AppResult<ApprovalTimeout> {
        let membership = self.membership(actor, ws).await?;
        let seconds = self
            .db
            .workspace_approval_timeout(membership.workspace.id)
            .await?;
        Ok(ApprovalTimeout {
            seconds: seconds.and_then(|s| u64::try_from(s).ok()),
        })
    }
}

/// Refuses an answer the actor may not give: to their own call (`self_approval`), without
/// Approve on its profile (`forbidden`), or to a question no longer pending.
fn refuse_answer(actor: &Actor, row: &ApprovalRow) -> AppResult<()> {
    if row.asked_by == actor.user.id {
        return Err(AppError::refused(
            ErrorCode::SelfApproval,
            "you submitted this call (yourself or through your device): someone else holding Approve on its profile must answer",
        ));
    }
    if !row.reader_may_approve {
        return Err(AppError::refused(
            ErrorCode::Forbidden,
            format!(
                "you need the Approve grant on profile `{}` to answer its approval questions (`switchyard profile grant … --approve`)",
                row.profile_name
            ),
        ));
    }
    if row.state != ApprovalState::Pending {
        return Err(already_decided(row));
    }
    Ok(())
}

fn already_decided(row: &ApprovalRow) -> AppError {
    AppError::refused(
        ErrorCode::ApprovalDecided,
        format!(
            "the question about call {} is {} already; nothing changed",
            row.call_id, row.state
        ),
    )
}
