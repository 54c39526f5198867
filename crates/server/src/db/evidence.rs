//! Evidence: workspace capture policies, the bounded pending-evidence queue (filled in the
//! completion's own transaction, published by the sweeper), published evidence records, and
//! erasure of a call's evidence.
//!
//! The queue's counters live on the capture policy row and change only in the transactions
//! that change the queue, each as a guarded update, so a full queue is decided without a race:
//! a completion that finds it full counts a drop and captures nothing, and never touches the
//! evidence already waiting.
//!
//! Capture never fails a tool: a full queue costs the evidence, never the completion. The
//! sweeper publishes what waits (`evidence_publish_due`), one record per statement, oldest
//! first; a record that fails is retried at most `MAX_RETRY_DELAY` apart, and one still pending
//! at its deadline is given up and counted (`evidence_expire_pending`). A record another replica
//! published first changes nothing, so replicas may publish at once. `call_erase` erases a
//! finished or unknown call's evidence in one transaction and marks the call erased, which
//! fences its receipts from then on (`app::evidence`).

use super::Datastore;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use sqlx::types::Json;
use std::time::Duration;
use switchyard_protocol::api::DEFAULT_EVIDENCE_RETENTION_DAYS;
use switchyard_protocol::{
    CallId, ConnectionId, ConnectorId, EnvironmentId, EvidenceId, ObservationId, OperationId,
    ProfileId, RequestId, RunnerRef, UserId, WorkspaceId,
};
use uuid::Uuid;

/// How long pending evidence is retried before it is given up.
pub const PENDING_DEADLINE: Duration = Duration::from_secs(30 * 24 * 3600);
/// The longest wait between two publication attempts of one pending record.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);
/// How long captured evidence waits before its first publication: a device's completion is
/// recorded before the runner API stores the receipt that carried it, and the published
/// lineage should name that receipt.
const FIRST_ATTEMPT_DELAY: Duration = Duration::from_secs(1);
/// The most pending records one publication pass takes.
const PUBLISH_BATCH: i64 = 100;

/// The bounds of one workspace's pending-evidence queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueBounds {
    /// Most records waiting.
    pub max_records: i32,
    /// Most bytes of output waiting.
    pub max_bytes: i64,
}

impl Default for QueueBounds {
    fn default() -> Self {
        Self {
            max_records: 1000,
            max_bytes: 64 * 1024 * 1024,
        }
    }
}

/// A row of `capture_policies`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct CapturePolicyRow {
    /// The workspace.
    pub workspace_id: WorkspaceId,
    /// Whether completed results are captured.
    pub capture_managed_tool_results: bool,
    /// Records waiting.
    pub pending_records: i32,
    /// Their bytes.
    pub pending_bytes: i64,
    /// Evidence not captured because the queue was full.
    pub dropped: i64,
    /// Pending evidence given up at its deadline.
    pub expired: i64,
    /// Days a record is kept after its capture.
    pub evidence_retention_days: i32,
    /// When the policy last changed.
    pub updated_at: Option<DateTime<Utc>>,
}

/// A row of `evidence_records`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct EvidenceRow {
    /// Id (the `source_version_id`).
    pub id: EvidenceId,
    /// Workspace.
    pub workspace_id: WorkspaceId,
    /// The call captured.
    pub call_id: CallId,
    /// Its request id.
    pub request_id: RequestId,
    /// Its kind.
    pub kind: String,
    /// Its parent, for a lookup.
    pub parent_call_id: Option<CallId>,
    /// The observation it came with, for a late receipt.
    pub observation_id: Option<ObservationId>,
    /// Profile.
    pub profile_id: ProfileId,
    /// Environment.
    pub environment_id: EnvironmentId,
    /// Operation.
    pub operation_id: Option<OperationId>,
    /// Tool.
    pub tool_name: String,
    /// Connection.
    pub connection_id: ConnectionId,
    /// Connector dispatched to.
    pub connector_id: Option<ConnectorId>,
    /// Its revision then.
    pub connector_revision: Option<i64>,
    /// Runner.
    pub runner_ref: RunnerRef,
    /// `succeeded`, `tool_error` or `resolved`.
    pub outcome: String,
    /// For `resolved`: the outcome.
    pub resolution_outcome: Option<String>,
    /// Retained output, until erased.
    pub output: Option<Json<Value>>,
    /// Whether it was cut.
    pub output_truncated: bool,
    /// Receipt lineage.
    pub lineage: Json<Value>,
    /// When it was captured.
    pub captured_at: DateTime<Utc>,
    /// When it was published.
    pub published_at: DateTime<Utc>,
    /// When it was erased.
    pub erased_at: Option<DateTime<Utc>>,
}

/// What became of evidence offered with a completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Captured {
    /// The workspace does not capture.
    Off,
    /// Queued for publication under this evidence id.
    Queued(EvidenceId),
    /// The queue was full: not captured, counted as a drop.
    Dropped,
}

/// Evidence to capture with a completion: the call (its scope, identity and target are read
/// from its row in the same transaction) and the output it reported.
#[derive(Clone, Copy, Debug)]
pub struct EvidenceOffer<'a> {
    /// The call.
    pub call: CallId,
    /// Its workspace.
    pub workspace: WorkspaceId,
    /// The output (already redacted and bounded).
    pub output: Option<&'a Value>,
    /// Whether the output was cut.
    pub output_truncated: bool,
    /// The observation it came with, for a late receipt.
    pub observation: Option<ObservationId>,
}

/// What erasing a call's evidence changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Erased {
    /// Observations whose output was removed.
    pub observations: u64,
    /// Evidence records whose output was removed.
    pub evidence: u64,
    /// Pending evidence dropped.
    pub pending: u64,
    /// Its receipt lookups cancelled before they started.
    pub lookups_cancelled: u64,
}

/// Why a call's evidence could not be erased.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EraseRefusal {
    /// No such call in the workspace.
    NotFound,
    /// The call is queued, leased or running.
    Active,
}

/// [`DEFAULT_EVIDENCE_RETENTION_DAYS`] as the column's type.
fn default_retention_days() -> i32 {
    i32::try_from(DEFAULT_EVIDENCE_RETENTION_DAYS).unwrap_or(i32::MAX)
}

impl Datastore {
    /// Offers evidence for capture on `conn`, inside the completion's transaction: queued when
    /// the workspace captures and its queue has room, else counted as dropped. One statement
    /// unless the queue is full (then one more counts the drop).
    pub(super) async fn evidence_capture_on(
        conn: &mut PgConnection,
        offer: EvidenceOffer<'_>,
        bounds: QueueBounds,
    ) -> Result<Captured, sqlx::Error> {
        let size = offer.output.map_or(0, |o| o.to_string().len());
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        let id = EvidenceId::new();
        // The slot and the pending record are taken together; the call's scope, identity and
        // target are read from its row as the completion left it.
        let (queued, capturing): (bool, bool) = sqlx::query_as(
            "WITH slot AS (
                 UPDATE capture_policies SET pending_records = pending_records + 1, pending_bytes = pending_bytes + $2
                 WHERE workspace_id = $1 AND capture_managed_tool_results
                   AND pending_records < $3 AND pending_bytes + $2 <= $4
                 RETURNING workspace_id),
             queued AS (
                 INSERT INTO pending_evidence (id, workspace_id, call_id, request_id, kind, parent_call_id, observation_id,
                     profile_id, environment_id, operation_id, tool_name, connection_id, connector_id, connector_revision,
                     runner_ref, outcome, resolution_outcome, output, output_truncated, size_bytes, deadline_at,
                     next_attempt_at)
                 SELECT $6, workspace_id, id, request_id, kind, parent_call_id, $7, profile_id, environment_id, operation_id,
                     tool_name, connection_id, connector_id, connector_revision, runner_ref, state, resolution_outcome,
                     $8, $9, $2, now() + make_interval(secs => $10), now() + make_interval(secs => $11)
                 FROM calls WHERE id = $5 AND EXISTS (SELECT 1 FROM slot)
                 RETURNING id)
             SELECT EXISTS (SELECT 1 FROM queued),
                    EXISTS (SELECT 1 FROM capture_policies WHERE workspace_id = $1 AND capture_managed_tool_results)",
        )
        .bind(offer.workspace)
        .bind(size)
        .bind(bounds.max_records)
        .bind(bounds.max_bytes)
        .bind(offer.call)
        .bind(id)
        .bind(offer.observation)
        .bind(offer.output.map(Json))
        .bind(offer.output_truncated)
        .bind(PENDING_DEADLINE.as_secs_f64())
        .bind(FIRST_ATTEMPT_DELAY.as_secs_f64())
        .fetch_one(&mut *conn)
        .await?;
        if queued {
            return Ok(Captured::Queued(id));
        }
        if !capturing {
            return Ok(Captured::Off);
        }
        let full: Option<Uuid> = sqlx::query_scalar(
            "UPDATE capture_policies SET dropped = dropped + 1
             WHERE workspace_id = $1 AND capture_managed_tool_results RETURNING workspace_id",
        )
        .bind(offer.workspace)
        .fetch_optional(&mut *conn)
        .await?;
        Ok(if full.is_some() {
            Captured::Dropped
        } else {
            Captured::Off
        })
    }

    /// A workspace's capture policy row, if it was ever set.
    pub async fn capture_policy_get(
        &self,
        workspace: WorkspaceId,
    ) -> Result<Option<CapturePolicyRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT workspace_id, capture_managed_tool_results, pending_records, pending_bytes, dropped, expired, evidence_retention_days, updated_at
             FROM capture_policies WHERE workspace_id = $1",
        )
        .bind(workspace)
        .fetch_optional(&self.pool)
        .await
    }

    /// Turns capture on or off and sets how long records are kept (each when given; an
    /// absent one keeps its setting, or its default on a new row). Evidence already pending is
    /// published either way.
    pub async fn capture_policy_set(
        &self,
        workspace: WorkspaceId,
        capture: Option<bool>,
        retention_days: Option<i32>,
        by: UserId,
    ) -> Result<CapturePolicyRow, sqlx::Error> {
        sqlx::query_as(
            "INSERT INTO capture_policies (workspace_id, capture_managed_tool_results, evidence_retention_days,
                 updated_by, updated_at)
             VALUES ($1, COALESCE($2, false), COALESCE($3, $5), $4, now())
             ON CONFLICT (workspace_id) DO UPDATE SET
                 capture_managed_tool_results = COALESCE($2, capture_policies.capture_managed_tool_results),
                 evidence_retention_days = COALESCE($3, capture_policies.evidence_retention_days),
                 updated_by = EXCLUDED.updated_by, updated_at = now()
             RETURNING workspace_id, capture_managed_tool_results, pending_records, pending_bytes, dropped, expired, evidence_retention_days, updated_at",
        )
        .bind(workspace)
        .bind(capture)
        .bind(retention_days)
        .bind(by)
        .bind(default_retention_days())
        .fetch_one(&self.pool)
        .await
    }

    /// Deletes evidence records kept past their workspace's retention (counted from capture;
    /// [`DEFAULT_EVIDENCE_RETENTION_DAYS`] where no policy says otherwise), at most `batch` of them.
    /// Their calls keep their disposition; a resolution that cited one keeps its outcome and
    /// loses the citation. Returns how many were deleted.
    pub async fn evidence_sweep_retention(&self, batch: i64) -> Result<u64, sqlx::Error> {
        sqlx::query(
            "DELETE FROM evidence_records WHERE id IN (
                 SELECT e.id FROM evidence_records e
                 LEFT JOIN capture_policies p ON p.workspace_id = e.workspace_id
                 WHERE e.captured_at < now() - interval '1 day'
                   AND e.captured_at < now() - make_interval(days => COALESCE(p.evidence_retention_days, $1))
                 LIMIT $2)",
        )
        .bind(default_retention_days())
        .bind(batch)
        .execute(&self.pool)
        .await
        .map(|done| done.rows_affected())
    }

    /// Publishes pending evidence that is due, oldest first: each record moves into
    /// `evidence_records` with its receipt lineage as it is now, in one statement. A record
    /// that fails is retried later, at most [`MAX_RETRY_DELAY`] apart. Returns (published,
    /// failed).
    pub async fn evidence_publish_due(&self) -> Result<(u64, u64), sqlx::Error> {
        let due: Vec<EvidenceId> = sqlx::query_scalar(
            "SELECT id FROM pending_evidence WHERE next_attempt_at <= now() ORDER BY captured_at, id LIMIT $1",
        )
        .bind(PUBLISH_BATCH)
        .fetch_all(&self.pool)
        .await?;
        let (mut published, mut failed) = (0, 0);
        for id in due {
            match self.evidence_publish_one(id).await {
                Ok(n) => published += n,
                Err(e) => {
                    failed += 1;
                    tracing::warn!(evidence = %id, error = %e, "publishing evidence failed; retrying later");
                    sqlx::query(
                        "UPDATE pending_evidence SET attempts = attempts + 1, last_error = $2,
                             next_attempt_at = now() + make_interval(secs => LEAST($3, power(2, LEAST(attempts, 16))))
                         WHERE id = $1",
                    )
                    .bind(id)
                    .bind(e.to_string())
                    .bind(MAX_RETRY_DELAY.as_secs_f64())
                    .execute(&self.pool)
                    .await?;
                }
            }
        }
        Ok((published, failed))
    }

    /// Moves one pending record into `evidence_records` and releases its room in the queue.
    /// A record another replica took first changes nothing.
    async fn evidence_publish_one(&self, id: EvidenceId) -> Result<u64, sqlx::Error> {
        sqlx::query_scalar(
            "WITH due AS (DELETE FROM pending_evidence WHERE id = $1 RETURNING *),
             published AS (
                 INSERT INTO evidence_records (id, workspace_id, call_id, request_id, kind, parent_call_id, observation_id,
                     profile_id, environment_id, operation_id, tool_name, connection_id, connector_id, connector_revision,
                     runner_ref, outcome, resolution_outcome, output, output_truncated, lineage, captured_at)
                 SELECT d.id, d.workspace_id, d.call_id, d.request_id, d.kind, d.parent_call_id, d.observation_id,
                     d.profile_id, d.environment_id, d.operation_id, d.tool_name, d.connection_id, d.connector_id,
                     d.connector_revision, d.runner_ref, d.outcome, d.resolution_outcome, d.output, d.output_truncated,
                     jsonb_build_object(
                         'parent_call_id', d.parent_call_id,
                         'observation_id', d.observation_id,
                         'lookup_call_ids', COALESCE((SELECT jsonb_agg(l.id ORDER BY l.created_at, l.id)
                                                      FROM calls l WHERE l.parent_call_id = d.call_id), '[]'::jsonb),
                         'receipt_ids', COALESCE((SELECT jsonb_agg(r.receipt_id ORDER BY r.received_at, r.receipt_id)
                                                  FROM receipts r WHERE r.call_id = d.call_id), '[]'::jsonb)),
                     d.captured_at
                 FROM due d
                 ON CONFLICT (id) DO NOTHING
                 RETURNING id),
             released AS (
                 UPDATE capture_policies c SET pending_records = c.pending_records - 1, pending_bytes = c.pending_bytes - d.size_bytes
                 FROM due d WHERE c.workspace_id = d.workspace_id RETURNING 1)
             SELECT count(*)::bigint FROM published",
        )
        .bind(id)
        .fetch_one(&self.pool)
        .await
        .map(|n: i64| u64::try_from(n).unwrap_or(0))
    }

    /// Gives up pending evidence past its deadline, counting it per workspace. Returns how many.
    pub async fn evidence_expire_pending(&self) -> Result<u64, sqlx::Error> {
        let expired: Vec<i64> = sqlx::query_scalar(
            "WITH gone AS (DELETE FROM pending_evidence WHERE deadline_at <= now() RETURNING workspace_id, size_bytes),
             per AS (SELECT workspace_id, count(*) AS n, sum(size_bytes) AS b FROM gone GROUP BY workspace_id)
             UPDATE capture_policies c SET pending_records = c.pending_records - per.n,
                 pending_bytes = c.pending_bytes - per.b, expired = c.expired + per.n
             FROM per WHERE c.workspace_id = per.workspace_id RETURNING per.n",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(expired
            .into_iter()
            .map(|n| u64::try_from(n).unwrap_or(0))
            .sum())
    }

    /// An evidence record of a workspace (erased ones included).
    pub async fn evidence_get(
        &self,
        workspace: WorkspaceId,
        id: EvidenceId,
    ) -> Result<Option<EvidenceRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM evidence_records WHERE workspace_id = $1 AND id = $2")
            .bind(workspace)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
    }

    /// Whether a call's evidence was erased: its receipts are fenced.
    pub async fn call_is_erased(&self, call: CallId) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM calls WHERE id = $1 AND evidence_erased_at IS NOT NULL)",
        )
        .bind(call)
        .fetch_one(&self.pool)
        .await
    }

    /// Erases a finished or unknown call's evidence in one transaction: its retained inputs and
    /// result, its lookups' (queued ones are cancelled), its observations' outputs, its
    /// evidence records' outputs, its pending evidence, and the explanations of resolutions of
    /// it or citing its evidence. Ids, times, states and outcomes remain. Erasing again
    /// changes nothing.
    pub async fn call_erase(
        &self,
        workspace: WorkspaceId,
        call: CallId,
    ) -> Result<Result<Erased, EraseRefusal>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let found: Option<(String, Option<DateTime<Utc>>)> =
            sqlx::query_as("SELECT state, evidence_erased_at FROM calls WHERE workspace_id = $1 AND id = $2 FOR UPDATE")
                .bind(workspace)
                .bind(call)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((state, erased_at)) = found else {
            return Ok(Err(EraseRefusal::NotFound));
        };
        if matches!(state.as_str(), "queued" | "leased" | "running") {
            return Ok(Err(EraseRefusal::Active));
        }
        if erased_at.is_some() {
            return Ok(Ok(Erased::default()));
        }
        let lookups_cancelled = sqlx::query(
            "UPDATE calls SET state = 'cancelled', finished_at = now(), error_code = 'cancelled'
             WHERE parent_call_id = $1 AND state IN ('queued', 'leased')",
        )
        .bind(call)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let erased: Vec<CallId> = sqlx::query_scalar(
            "UPDATE calls SET evidence_erased_at = now(), arguments = NULL, result = NULL, error_message = NULL
             WHERE id = $1 OR parent_call_id = $1 RETURNING id",
        )
        .bind(call)
        .fetch_all(&mut *tx)
        .await?;
        // Its own observations, and (when a lookup is erased) the observation it produced.
        let observations = sqlx::query(
            "UPDATE observations SET output = NULL, erased_at = now()
             WHERE (call_id = $1 OR lookup_call_id = $1) AND erased_at IS NULL",
        )
        .bind(call)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let evidence = sqlx::query(
            "UPDATE evidence_records SET output = NULL, erased_at = now() WHERE call_id = ANY($1) AND erased_at IS NULL",
        )
        .bind(&erased)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let pending: Option<(i64, i64)> = sqlx::query_as(
            "WITH gone AS (DELETE FROM pending_evidence WHERE call_id = ANY($1) RETURNING size_bytes),
             per AS (SELECT count(*) AS n, COALESCE(sum(size_bytes), 0)::bigint AS b FROM gone)
             UPDATE capture_policies c SET pending_records = c.pending_records - per.n, pending_bytes = c.pending_bytes - per.b
             FROM per WHERE c.workspace_id = $2 AND per.n > 0 RETURNING per.n, per.b",
        )
        .bind(&erased)
        .bind(workspace)
        .fetch_optional(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE resolutions SET explanation = NULL, explanation_removed_at = now()
             WHERE explanation IS NOT NULL
               AND (call_id = $1 OR evidence_id IN (SELECT id FROM evidence_records WHERE call_id = ANY($2)))",
        )
        .bind(call)
        .bind(&erased)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Ok(Erased {
            observations,
            evidence,
            pending: pending.map_or(0, |(n, _)| u64::try_from(n).unwrap_or(0)),
            lookups_cancelled,
        }))
    }
}
