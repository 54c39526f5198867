//! Resolutions: how an unknown call was settled, one per call. A caller's resolution moves the
//! call `unknown` → `resolved` and records who, when, the outcome, the evidence cited and an
//! explanation, in one transaction. Explanations are removed after a while; the rest remains.
//!
//! The update sets only the state and `resolution_outcome`: the attempt's own outcome, error and
//! result stay as recorded. A certain observation (a lookup's answer, a late receipt) settles a
//! call the same way, with a resolution of its own (`db::observations`). Neither settles an
//! erased call.

use super::Datastore;
use chrono::{DateTime, Utc};
use std::time::Duration;
use switchyard_protocol::api::ResolutionOutcome;
use switchyard_protocol::{CallId, EvidenceId, ObservationId, RequestId, UserId, WorkspaceId};
use uuid::Uuid;

/// A row of `resolutions`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ResolutionRow {
    /// Id.
    pub id: Uuid,
    /// The call settled.
    pub call_id: CallId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// `observation` or `caller`.
    pub source: String,
    /// `succeeded`, `not_applied` or `failed`.
    pub outcome: String,
    /// The observation that settled it.
    pub observation_id: Option<ObservationId>,
    /// The caller's idempotency key.
    pub request_id: Option<RequestId>,
    /// SHA-256 of the caller's canonical request, to tell a retry from a conflicting reuse.
    pub payload_digest: Option<Vec<u8>>,
    /// The evidence record cited.
    pub evidence_id: Option<EvidenceId>,
    /// The explanation, until removed.
    pub explanation: Option<String>,
    /// When the explanation was removed.
    pub explanation_removed_at: Option<DateTime<Utc>>,
    /// Who resolved it.
    pub resolved_by: Option<UserId>,
    /// When.
    pub resolved_at: DateTime<Utc>,
}

/// A caller's resolution to record.
#[derive(Clone, Debug)]
pub struct NewResolution<'a> {
    /// The call.
    pub call: CallId,
    /// Its workspace.
    pub workspace: WorkspaceId,
    /// The caller's idempotency key.
    pub request_id: RequestId,
    /// SHA-256 of the canonical request.
    pub payload_digest: &'a [u8],
    /// The outcome.
    pub outcome: ResolutionOutcome,
    /// The evidence record cited.
    pub evidence: EvidenceId,
    /// The explanation.
    pub explanation: &'a str,
    /// Who.
    pub resolved_by: UserId,
}

impl Datastore {
    /// Settles an unknown call with a caller's resolution: `unknown` → `resolved` as one
    /// guarded update (not for an erased call) and the resolution row, in one transaction.
    /// Returns whether it won.
    pub async fn call_resolve(&self, resolution: &NewResolution<'_>) -> Result<bool, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let settled = sqlx::query(
            "UPDATE calls SET state = 'resolved', resolution_outcome = $3
             WHERE id = $1 AND workspace_id = $2 AND state = 'unknown' AND evidence_erased_at IS NULL",
        )
        .bind(resolution.call)
        .bind(resolution.workspace)
        .bind(resolution.outcome.as_str())
        .execute(&mut *tx)
        .await?;
        if settled.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO resolutions (id, call_id, workspace_id, source, outcome, request_id, payload_digest,
                 evidence_id, explanation, resolved_by)
             VALUES ($1, $2, $3, 'caller', $4, $5, $6, $7, $8, $9)",
        )
        .bind(Uuid::now_v7())
        .bind(resolution.call)
        .bind(resolution.workspace)
        .bind(resolution.outcome.as_str())
        .bind(resolution.request_id)
        .bind(resolution.payload_digest)
        .bind(resolution.evidence)
        .bind(resolution.explanation)
        .bind(resolution.resolved_by)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// The resolution of a call, if it was settled.
    pub async fn resolution_of_call(
        &self,
        call: CallId,
    ) -> Result<Option<ResolutionRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM resolutions WHERE call_id = $1")
            .bind(call)
            .fetch_optional(&self.pool)
            .await
    }

    /// The caller's resolution recorded under a request_id in a workspace.
    pub async fn resolution_find_by_request(
        &self,
        workspace: WorkspaceId,
        request_id: RequestId,
    ) -> Result<Option<ResolutionRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM resolutions WHERE workspace_id = $1 AND request_id = $2")
            .bind(workspace)
            .bind(request_id)
            .fetch_optional(&self.pool)
            .await
    }

    /// Removes explanations recorded longer than `ttl` ago, keeping who, when and the
    /// outcome. Returns how many.
    pub async fn resolution_sweep_explanations(&self, ttl: Duration) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE resolutions SET explanation = NULL, explanation_removed_at = now()
             WHERE explanation IS NOT NULL AND resolved_at < now() - make_interval(secs => $1)",
        )
        .bind(ttl.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}
