//! Evidence capture, evidence records, erasure, and the one view of a call with everything
//! recorded beside it (attempt, observations, resolution, lineage).
//!
//! Evidence records are readable by every member of the workspace: that is what capture is
//! for, and an admin turns it on deliberately. It never grants Use: a call's own result, through
//! the calls API, still needs Use on its profile.
//!
//! Erasure fences: once a call's evidence is erased, a receipt that arrives for it is refused
//! (the completion is answered `Fenced`) and device runners keep it quarantined from their next
//! receipt check on. Erasure removes what Switchyard retained ([`ERASURE_NOTICE`]) and never
//! claims to undo the tool's external effect.
//!
//! `call_view_full` is that one view (`call_view_with` when the lineage was read already): call
//! reads and waits, and the resolve, reconcile and erase answers, all build a call with it.
//! Capture happens in the completion's own transaction (`db::observations`); the queue,
//! publication and erasure are `db::evidence`'s.

use super::{Actor, App, views};
use crate::db::{CallRow, EraseRefusal, Lineage};
use crate::error::{AppError, AppResult};
use switchyard_protocol::api::*;
use switchyard_protocol::{CallState, ErrorCode, EvidenceId};

/// What every erasure answer says about what erasure cannot do.
pub const ERASURE_NOTICE: &str = "Erasure removed Switchyard's retained evidence of this call (its result, observation outputs, evidence records, pending evidence and explanations) and fences receipts that arrive for it later. It does not undo whatever the tool did outside Switchyard: an effect that happened still happened.";

impl App {
    /// A workspace's capture policy and queue (any member). Off unless an admin turned it on.
    pub async fn capture_policy_get(
        &self,
        actor: &Actor,
        ws: &str,
    ) -> AppResult<CapturePolicyView> {
        let workspace = self.membership(actor, ws).await?.workspace.id;
        let row = self.db.capture_policy_get(workspace).await?;
        Ok(views::capture_policy(workspace, row.as_ref()))
    }

    /// Turns capture of completed managed tool results on or off, and sets how long evidence
    /// records are kept (workspace admins). Turning capture on captures completions from now on
    /// only; it grants no Use. A shorter retention applies to records already kept too.
    pub async fn capture_policy_set(
        &self,
        actor: &Actor,
        ws: &str,
        req: SetCapturePolicy,
    ) -> AppResult<CapturePolicyView> {
        let workspace = self.admin_membership(actor, ws).await?.workspace.id;
        if req.capture_managed_tool_results.is_none() && req.evidence_retention_days.is_none() {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                "give `capture_managed_tool_results` (true or false), `evidence_retention_days`, or both",
            ));
        }
        let retention = req
            .evidence_retention_days
            .map(|days| {
                (1..=MAX_EVIDENCE_RETENTION_DAYS)
                    .contains(&days)
                    .then(|| i32::try_from(days).ok())
                    .flatten()
                    .ok_or_else(|| {
                        AppError::refused(
                            ErrorCode::InvalidRequest,
                            format!(
                                "`evidence_retention_days` must be from 1 to {MAX_EVIDENCE_RETENTION_DAYS}, not {days}"
                            ),
                        )
                    })
            })
            .transpose()?;
        let row = self
            .db
            .capture_policy_set(
                workspace,
                req.capture_managed_tool_results,
                retention,
                actor.user.id,
            )
            .await?;
        Ok(views::capture_policy(workspace, Some(&row)))
    }

    /// An evidence record, for a member holding Use on its call's profile; an erased one shows
    /// only its minimal disposition.
    pub async fn evidence_get(&self, actor: &Actor, ws: &str, id: &str) -> AppResult<EvidenceView> {
        let workspace = self.membership(actor, ws).await?.workspace.id;
        let not_found = || {
            AppError::refused(
                ErrorCode::EvidenceNotFound,
                format!("no evidence record `{id}` in this workspace"),
            )
        };
        let id: EvidenceId = id.parse().map_err(|_| not_found())?;
        let row = self
            .db
            .evidence_get(workspace, id)
            .await?
            .ok_or_else(not_found)?;
        // Evidence is the call's output: read under the same Use as the call itself.
        let call = self
            .db
            .call_get(workspace, row.call_id)
            .await?
            .ok_or_else(not_found)?;
        let profile = self.db.profile_get(call.profile_id).await?;
        self.require_use(actor, &profile).await?;
        Ok(views::evidence(&row))
    }

    /// Erases a finished or unknown call's evidence (workspace admins): see
    /// [`crate::db::Datastore::call_erase`]. Receipts that arrive for it later are fenced.
    pub async fn call_erase(&self, actor: &Actor, ws: &str, call: &str) -> AppResult<EraseAnswer> {
        let workspace = self.admin_membership(actor, ws).await?.workspace.id;
        let row = self.call_row(workspace, call).await?;
        let erased = match self.db.call_erase(workspace, row.id).await? {
            Ok(erased) => erased,
            Err(EraseRefusal::NotFound) => {
                return Err(AppError::refused(
                    ErrorCode::CallNotFound,
                    format!("no call `{call}` in this workspace"),
                ));
            }
            Err(EraseRefusal::Active) => {
                return Err(AppError::refused(
                    ErrorCode::CallActive,
                    format!(
                        "call {} is still {}; cancel it or wait until it finishes (or becomes unknown), then erase",
                        row.id, row.state
                    ),
                ));
            }
        };
        tracing::info!(call = %row.id, by = %actor.user.id, ?erased, "erased a call's evidence");
        self.metrics
            .calls_finished(CallState::Cancelled, erased.lookups_cancelled);
        Ok(EraseAnswer {
            call: self
                .call_view_full(&self.call_row(workspace, call).await?)
                .await?,
            observations_erased: erased.observations,
            evidence_erased: erased.evidence,
            pending_evidence_dropped: erased.pending,
            notice: ERASURE_NOTICE.to_owned(),
        })
    }

    /// A call with everything recorded beside it: its attempt, observations, resolution and
    /// lineage (one read, and one more each for observations and a resolution when it has
    /// them). Authorization is the caller's business.
    pub(crate) async fn call_view_full(&self, row: &CallRow) -> AppResult<CallView> {
        self.call_view_with(row, self.db.call_lineage(row.id).await?)
            .await
    }

    /// [`App::call_view_full`] with the call's lineage already read.
    pub(crate) async fn call_view_with(
        &self,
        row: &CallRow,
        lineage: Lineage,
    ) -> AppResult<CallView> {
        let mut view = views::call(row);
        view.attempts = views::attempt(row).into_iter().collect();
        if lineage.has_observations {
            view.observations = self
                .db
                .observation_list(row.id)
                .await?
                .iter()
                .map(views::observation)
                .collect();
        }
        if lineage.has_resolution {
            view.resolution = self
                .db
                .resolution_of_call(row.id)
                .await?
                .as_ref()
                .map(views::resolution);
        }
        view.lineage = Some(LineageView {
            lookup_call_ids: lineage.lookup_ids,
            receipt_ids: lineage.receipt_ids,
            evidence_ids: lineage.evidence_ids,
        });
        Ok(view)
    }
}
