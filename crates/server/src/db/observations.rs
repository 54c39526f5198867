//! Observations, and the transactions that record what a completion implies beside the call:
//! what it says of its connection's credential, a lookup's answer on its unknown parent (settling it when the answer is certain), a late
//! receipt on an unknown call, and the evidence either one captures. The original attempt is
//! never overwritten: observations and resolutions are rows beside it.

use super::calls::call_complete_on;
use super::connections::connection_credential_seen;
use super::evidence::{Captured, EvidenceOffer, QueueBounds};
use super::{CallRow, Committed, Datastore, Kept, StoredCompletion, Wakeup};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use sqlx::types::Json;
use switchyard_protocol::api::{CallKind, Reported, ResolutionOutcome};
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{CallId, CallState, EvidenceId, ObservationId, RunnerRef, WorkspaceId};
use uuid::Uuid;

/// A row of `observations`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ObservationRow {
    /// Id.
    pub id: ObservationId,
    /// The unknown call it is about.
    pub call_id: CallId,
    /// `lookup` or `late_receipt`.
    pub source: String,
    /// The lookup call, for `lookup`.
    pub lookup_call_id: Option<CallId>,
    /// The runner that answered.
    pub runner_ref: RunnerRef,
    /// The epoch of a late receipt (or of the lookup's lease).
    pub epoch: Option<i64>,
    /// `applied`, `not_applied`, `failed` or `unknown`.
    pub reported: String,
    /// Retained output.
    pub output: Option<Json<Value>>,
    /// When it was recorded.
    pub recorded_at: DateTime<Utc>,
    /// When retention removed the output.
    pub output_expired_at: Option<DateTime<Utc>>,
    /// When erasure removed the output.
    pub erased_at: Option<DateTime<Utc>>,
}

/// Removes from a completed call's retained arguments what capture exclusions do not keep;
/// the call as it is then.
async fn keep_arguments(
    conn: &mut PgConnection,
    id: CallId,
    kept: &Kept,
) -> Result<CallRow, sqlx::Error> {
    let (nothing, fields): (bool, &[String]) = match kept {
        Kept::All => (false, &[]),
        Kept::AllBut { argument_fields } => (false, argument_fields),
        Kept::Nothing => (true, &[]),
    };
    sqlx::query_as(
        "UPDATE calls SET arguments = CASE WHEN $2 THEN NULL ELSE arguments - $3::text[] END
         WHERE id = $1 RETURNING *",
    )
    .bind(id)
    .bind(nothing)
    .bind(fields)
    .fetch_one(conn)
    .await
}

/// What a completion implies beside its state change, decided by the app layer.
#[derive(Clone, Copy, Debug)]
pub struct CompletionEffects {
    /// What the completion reports if the call is a receipt lookup.
    pub lookup_reports: Reported,
    /// The bounds of the workspace's pending-evidence queue.
    pub bounds: QueueBounds,
    /// The id of the device receipt that carried the completion, to store with it when the
    /// completion is one statement (see [`Completed::receipt_stored`]).
    pub receipt: Option<Uuid>,
}

/// A completion as applied.
#[derive(Clone, Debug)]
pub struct Completed {
    /// The call after the completion.
    pub call: CallRow,
    /// Whether the call's parent was settled by this (lookup) completion.
    pub settled_parent: Option<ResolutionOutcome>,
    /// What became of the evidence it offered.
    pub captured: Captured,
    /// Whether the device receipt that carried it was stored with it (answered `recorded`).
    pub receipt_stored: bool,
}

/// What became of a report about a call that was already `unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LateReceipt {
    /// Not a valid late receipt: the call is not unknown under this runner and epoch, or the
    /// epoch is no longer the runner's.
    NotLate,
    /// The call's evidence was erased: the receipt is fenced.
    Erased,
    /// Recorded as an observation; it settled nothing.
    Observed,
    /// Recorded, and it settled the call with this outcome.
    Settled(ResolutionOutcome),
}

impl Datastore {
    /// Records a completion that implies nothing beside its state change — most of them — as
    /// one statement (with the device's receipt `effects.receipt`), no transaction of several:
    /// see [`Datastore::call_complete_plain`]. `None` when it recorded nothing: the caller then
    /// records it with [`Datastore::call_complete_with_effects`] (and stores its receipt).
    #[allow(clippy::too_many_arguments)]
    pub async fn call_complete_plain_effects(
        &self,
        id: CallId,
        runner: RunnerRef,
        epoch: Epoch,
        from: &[CallState],
        completion: &StoredCompletion,
        effects: CompletionEffects,
        read_lineage: bool,
    ) -> Result<Option<Committed<Completed>>, sqlx::Error> {
        if let Some(recorded) = self
            .call_complete_plain(
                id,
                runner,
                epoch,
                from,
                completion,
                effects.receipt,
                read_lineage,
            )
            .await?
        {
            let Committed { value, wakeups } = recorded;
            return Ok(Some(Committed {
                value: Completed {
                    call: value.call,
                    settled_parent: None,
                    captured: Captured::Off,
                    receipt_stored: value.receipt_stored,
                },
                wakeups,
            }));
        }
        Ok(None)
    }

    /// Records a completion and what it implies, in one transaction: the state change (as one
    /// guarded update under the runner's epoch); what capture exclusions keep of its arguments;
    /// what it says of its connection's credential (refused, or answered on a connection marked
    /// `needs_authorization`); for a lookup, an observation on its parent, which a certain answer settles (`unknown` →
    /// `resolved`); and the evidence it offers. `None` when the report was stale or the call had
    /// moved on: nothing was recorded. Readers waiting for the call are woken once it committed.
    pub async fn call_complete_with_effects(
        &self,
        id: CallId,
        runner: RunnerRef,
        epoch: Epoch,
        from: &[CallState],
        completion: &StoredCompletion,
        effects: CompletionEffects,
    ) -> Result<Option<Committed<Completed>>, sqlx::Error> {
        let settled = Wakeup::Settled {
            call: id,
            recorded: None,
        };
        let mut tx = self.pool.begin().await?;
        let Some(mut call) = call_complete_on(&mut tx, id, runner, epoch, from, completion).await?
        else {
            return Ok(None);
        };
        if completion.kept != Kept::All {
            call = keep_arguments(&mut tx, id, &completion.kept).await?;
        }
        // What the call says of its connection's credential (a discovery's failure is
        // recorded by its reconcile, with its kind).
        if call.kind != CallKind::Discovery {
            connection_credential_seen(&mut tx, call.connection_id, completion).await?;
        }
        if call.evidence_erased_at.is_some() {
            // A lookup still running when its parent was erased: keep nothing it answered.
            sqlx::query("UPDATE calls SET result = NULL WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            return Ok(Some(
                Committed::new(Completed {
                    call,
                    settled_parent: None,
                    captured: Captured::Off,
                    receipt_stored: false,
                })
                .waking(settled),
            ));
        }
        let mut settled_parent = None;
        if let Some(parent) = call.parent_call_id {
            let observation = NewObservation {
                call: parent,
                source: "lookup",
                lookup_call: Some(id),
                runner,
                epoch: Some(epoch),
                reported: effects.lookup_reports,
                output: completion.result.as_ref(),
            };
            settled_parent = observe_and_settle(&mut tx, &observation).await?;
        }
        // A device discovery's catalog is no tool's result: never captured as evidence.
        let captured = if completion.capturable() && call.kind != CallKind::Discovery {
            let offer = EvidenceOffer {
                call: id,
                workspace: call.workspace_id,
                output: completion.result.as_ref(),
                output_truncated: completion.result_truncated,
                observation: None,
            };
            Datastore::evidence_capture_on(&mut tx, offer, effects.bounds).await?
        } else {
            Captured::Off
        };
        tx.commit().await?;
        Ok(Some(
            Committed::new(Completed {
                call,
                settled_parent,
                captured,
                receipt_stored: false,
            })
            .waking(settled),
        ))
    }

    /// Records a report about a tool call that is already `unknown`, made by the runner that
    /// started it under the epoch it was started under, while that epoch is still the
    /// runner's. (A lookup answering late settles nothing: run another lookup.) It becomes a `late_receipt` observation; a certain one settles the call and
    /// offers its output as evidence. A call whose evidence was erased records nothing.
    pub async fn call_record_late_receipt(
        &self,
        id: CallId,
        runner: RunnerRef,
        epoch: Epoch,
        reported: Reported,
        completion: &StoredCompletion,
        bounds: QueueBounds,
    ) -> Result<(LateReceipt, Captured), sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let call: Option<(WorkspaceId, Option<DateTime<Utc>>)> = sqlx::query_as(
            "SELECT workspace_id, evidence_erased_at FROM calls
             WHERE id = $1 AND runner_ref = $2 AND lease_epoch = $3 AND state = 'unknown' AND kind = 'tool'
               AND EXISTS (SELECT 1 FROM runner_leases r WHERE r.runner_ref = $2 AND r.epoch = $3)
             FOR UPDATE",
        )
        .bind(id)
        .bind(runner)
        .bind(epoch)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((workspace, erased_at)) = call else {
            return Ok((LateReceipt::NotLate, Captured::Off));
        };
        if erased_at.is_some() {
            return Ok((LateReceipt::Erased, Captured::Off));
        }
        let observation = NewObservation {
            call: id,
            source: "late_receipt",
            lookup_call: None,
            runner,
            epoch: Some(epoch),
            reported,
            output: completion.result.as_ref(),
        };
        let observation_id = ObservationId::new();
        let settled = observe_and_settle_as(&mut tx, observation_id, &observation).await?;
        let captured = match (settled, completion.result.as_ref()) {
            (Some(_), Some(output)) => {
                let offer = EvidenceOffer {
                    call: id,
                    workspace,
                    output: Some(output),
                    output_truncated: completion.result_truncated,
                    observation: Some(observation_id),
                };
                Datastore::evidence_capture_on(&mut tx, offer, bounds).await?
            }
            _ => Captured::Off,
        };
        tx.commit().await?;
        let late = match settled {
            Some(outcome) => LateReceipt::Settled(outcome),
            None => LateReceipt::Observed,
        };
        Ok((late, captured))
    }

    /// The observations of a call, oldest first.
    pub async fn observation_list(&self, call: CallId) -> Result<Vec<ObservationRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM observations WHERE call_id = $1 ORDER BY recorded_at, id")
            .bind(call)
            .fetch_all(&self.pool)
            .await
    }

    /// Removes observation outputs recorded longer than `retention` ago, like call results.
    /// Returns how many.
    pub async fn observation_sweep_retention(
        &self,
        retention: std::time::Duration,
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE observations SET output = NULL, output_expired_at = now()
             WHERE output IS NOT NULL AND recorded_at < now() - make_interval(secs => $1)",
        )
        .bind(retention.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// What is recorded beside a call, in one statement: its receipt lookups, receipts and
    /// evidence records (ids, oldest first), and whether it has observations or a resolution
    /// (read separately when it does; most calls have neither).
    pub async fn call_lineage(&self, call: CallId) -> Result<Lineage, sqlx::Error> {
        static STATEMENT: std::sync::LazyLock<std::sync::Arc<str>> =
            std::sync::LazyLock::new(|| {
                format!(
                    "SELECT {} FROM (SELECT $1::uuid AS id) c",
                    lineage_columns("")
                )
                .into()
            });
        sqlx::query_as(super::sql::text(&STATEMENT))
            .bind(call)
            .fetch_one(&self.pool)
            .await
    }
}

/// The columns of a [`Lineage`] for the call `c.id` of the statement they are part of:
/// [`Datastore::call_lineage`] reads them alone, a reader's `Datastore::call_read` beside the
/// call. `stored_beside` is empty, or `|| ` and the SQL of an array of receipt ids stored by
/// the same statement, which its snapshot does not see: they are the newest, so they come
/// last.
pub(super) fn lineage_columns(stored_beside: &str) -> String {
    format!(
        "ARRAY(SELECT id FROM calls WHERE parent_call_id = c.id ORDER BY created_at, id)
             AS lookup_ids,
         ARRAY(SELECT receipt_id FROM receipts WHERE call_id = c.id ORDER BY received_at, receipt_id) {stored_beside}
             AS receipt_ids,
         ARRAY(SELECT id FROM evidence_records WHERE call_id = c.id OR parent_call_id = c.id
               ORDER BY captured_at, id)
             AS evidence_ids,
         EXISTS (SELECT 1 FROM observations WHERE call_id = c.id) AS has_observations,
         EXISTS (SELECT 1 FROM resolutions WHERE call_id = c.id) AS has_resolution"
    )
}

/// The columns of [`lineage_columns`], empty and unread: for a statement whose call nobody
/// waits to see, so that it does not read what would not be used.
pub(super) const UNREAD_LINEAGE: &str =
    "'{}'::uuid[] AS lookup_ids, '{}'::uuid[] AS receipt_ids, '{}'::uuid[] AS evidence_ids,
     false AS has_observations, false AS has_resolution";

/// What [`Datastore::call_lineage`] reads.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Lineage {
    /// The receipt lookups run for the call, oldest first.
    pub lookup_ids: Vec<CallId>,
    /// The receipts runners uploaded for it, oldest first.
    pub receipt_ids: Vec<Uuid>,
    /// The evidence records captured from it or its lookups, oldest first.
    pub evidence_ids: Vec<EvidenceId>,
    /// Whether observations were recorded on it.
    pub has_observations: bool,
    /// Whether it was resolved.
    pub has_resolution: bool,
}

/// An observation to record.
struct NewObservation<'a> {
    call: CallId,
    source: &'static str,
    lookup_call: Option<CallId>,
    runner: RunnerRef,
    epoch: Option<Epoch>,
    reported: Reported,
    output: Option<&'a Value>,
}

/// Records an observation on a call unless the call's evidence was erased, and settles the
/// call when the report is certain and the call is still unknown. Returns the outcome it was
/// settled with.
async fn observe_and_settle(
    conn: &mut PgConnection,
    observation: &NewObservation<'_>,
) -> Result<Option<ResolutionOutcome>, sqlx::Error> {
    let erased: Option<Option<DateTime<Utc>>> =
        sqlx::query_scalar("SELECT evidence_erased_at FROM calls WHERE id = $1 FOR UPDATE")
            .bind(observation.call)
            .fetch_optional(&mut *conn)
            .await?;
    match erased {
        Some(None) => observe_and_settle_as(conn, ObservationId::new(), observation).await,
        // Erased (or gone): nothing about it is published any more.
        _ => Ok(None),
    }
}

/// [`observe_and_settle`] for a call already locked and known not erased, under a chosen id.
async fn observe_and_settle_as(
    conn: &mut PgConnection,
    id: ObservationId,
    observation: &NewObservation<'_>,
) -> Result<Option<ResolutionOutcome>, sqlx::Error> {
    sqlx::query(
        "INSERT INTO observations (id, call_id, source, lookup_call_id, runner_ref, epoch, reported, output)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(id)
    .bind(observation.call)
    .bind(observation.source)
    .bind(observation.lookup_call)
    .bind(observation.runner)
    .bind(observation.epoch)
    .bind(observation.reported.as_str())
    .bind(observation.output.map(Json))
    .execute(&mut *conn)
    .await?;
    let Some(outcome) = observation.reported.settles() else {
        return Ok(None);
    };
    let settled = sqlx::query(
        "UPDATE calls SET state = 'resolved', resolution_outcome = $2
         WHERE id = $1 AND state = 'unknown' AND evidence_erased_at IS NULL",
    )
    .bind(observation.call)
    .bind(outcome.as_str())
    .execute(&mut *conn)
    .await?;
    if settled.rows_affected() == 0 {
        // Settled before (by another observation or a caller): this one is kept as recorded.
        return Ok(None);
    }
    sqlx::query(
        "INSERT INTO resolutions (id, call_id, workspace_id, source, outcome, observation_id)
         SELECT $1, id, workspace_id, 'observation', $3, $2 FROM calls WHERE id = $4",
    )
    .bind(Uuid::now_v7())
    .bind(id)
    .bind(outcome.as_str())
    .bind(observation.call)
    .execute(&mut *conn)
    .await?;
    Ok(Some(outcome))
}
