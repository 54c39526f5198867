//! Resolving an unknown call by a caller (`mcp resolve`): a person or an agent with Use on the
//! call's profile settles it with an outcome, citing an evidence record they can read, with a
//! short explanation. No review queue: the resolution is recorded as given, beside the
//! original attempt, and is idempotent on its request_id.

use super::names::digest;
use super::{Actor, App};
use crate::db::{NewResolution, ResolutionRow};
use crate::error::{AppError, AppResult};
use crate::metrics::SettledBy;
use serde_json::json;
use switchyard_protocol::api::*;
use switchyard_protocol::{CallId, ErrorCode, WorkspaceId};

impl App {
    /// Settles an unknown call with the caller's outcome, evidence and explanation, or
    /// returns the call as it is for a request_id used before with the same request.
    pub async fn call_resolve(
        &self,
        actor: &Actor,
        ws: &str,
        call: &str,
        req: ResolveCall,
    ) -> AppResult<CallView> {
        let workspace = self.membership(actor, ws).await?.workspace.id;
        let row = self.call_row(workspace, call).await?;
        let profile = self.db.profile_get(row.profile_id).await?;
        self.require_use(actor, &profile).await?;
        if row.kind != CallKind::Tool {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                format!(
                    "call {} is a receipt lookup; resolve the call it looks up instead",
                    row.id
                ),
            ));
        }
        let length = req.explanation.chars().count();
        if length > MAX_EXPLANATION_CHARS {
            return Err(AppError::refused(
                ErrorCode::ExplanationTooLong,
                format!(
                    "`explanation` has {length} characters; at most {MAX_EXPLANATION_CHARS} are kept"
                ),
            ));
        }
        if req.explanation.trim().is_empty() {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                "`explanation` must say why the evidence settles the call",
            ));
        }
        let payload_digest = digest(&json!({
            "call_id": row.id,
            "outcome": req.outcome,
            "source_version_id": req.source_version_id,
            "explanation": req.explanation,
        }));
        if let Some(existing) = self
            .db
            .resolution_find_by_request(workspace, req.request_id)
            .await?
        {
            return self
                .resolution_replay(workspace, &existing, row.id, &payload_digest)
                .await;
        }
        self.require_settleable(&row)?;
        let readable = self
            .db
            .evidence_get(workspace, req.source_version_id)
            .await?
            .is_some_and(|evidence| evidence.erased_at.is_none());
        if !readable {
            return Err(AppError::refused(
                ErrorCode::EvidenceNotFound,
                format!(
                    "no readable evidence record `{}` in this workspace (unknown, another workspace's, or erased)",
                    req.source_version_id
                ),
            ));
        }
        let resolution = NewResolution {
            call: row.id,
            workspace,
            request_id: req.request_id,
            payload_digest: &payload_digest,
            outcome: req.outcome,
            evidence: req.source_version_id,
            explanation: &req.explanation,
            resolved_by: actor.user.id,
        };
        match self.db.call_resolve(&resolution).await {
            Ok(true) => self
                .metrics
                .unknown_settled(SettledBy::Resolution, req.outcome),
            // Another resolution or observation settled it first, or it was erased meanwhile.
            Ok(false) => self.require_settleable(&self.call_row(workspace, call).await?)?,
            // A concurrent resolution with the same request_id was recorded first.
            Err(e) if crate::db::is_unique_violation(&e) => {
                if let Some(existing) = self
                    .db
                    .resolution_find_by_request(workspace, req.request_id)
                    .await?
                {
                    return self
                        .resolution_replay(workspace, &existing, row.id, &payload_digest)
                        .await;
                }
                return Err(AppError::Database(e));
            }
            Err(e) => return Err(AppError::Database(e)),
        }
        self.call_view_full(&self.call_row(workspace, call).await?)
            .await
    }

    /// The answer for a request_id used before: the call as it is for the same request, else
    /// a conflict.
    async fn resolution_replay(
        &self,
        workspace: WorkspaceId,
        existing: &ResolutionRow,
        call: CallId,
        payload_digest: &[u8],
    ) -> AppResult<CallView> {
        if existing.call_id != call || existing.payload_digest.as_deref() != Some(payload_digest) {
            return Err(AppError::refused(
                ErrorCode::McpRequestConflict,
                format!(
                    "request_id {} was already used for another resolution; use a fresh request_id",
                    existing.request_id.unwrap_or_default()
                ),
            ));
        }
        self.call_view_full(&self.call_row(workspace, &call.to_string()).await?)
            .await
    }
}
