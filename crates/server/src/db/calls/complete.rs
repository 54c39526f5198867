//! Recording what a runner reports: a guarded update under the runner's epoch from the states
//! the completion may leave. A completion that implies nothing beside its state change — most
//! of them — is one statement ("plain"); the rest are recorded in a transaction with what they
//! imply (`db::observations`). A statement that settles a call reads it back with its lineage
//! when the caller asks (a reader in the app's process waits for it), so that reader need not
//! read it again.
//!
//! A device's upload is usually one statement too (`call_complete_plain_by_device`): it checks the
//! device credential and stores the receipt beside the completion, so a revoked device's upload,
//! or a receipt uploaded before, changes nothing there (the app then looks at why).

use super::CallRow;
use crate::db::devices::device_by_credential;
use crate::db::observations::{UNREAD_LINEAGE, lineage_columns};
use crate::db::sql::{Params, Text, text};
use crate::db::{Committed, Datastore, DeviceRow, Lineage, Wakeup};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::types::Json;
use sqlx::{Arguments, FromRow, Row};
use std::sync::{Arc, LazyLock};
use switchyard_protocol::reconcile::CallKind;
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{CallId, CallState, ConnectionId, RunnerRef};
use uuid::Uuid;

/// A completion ready to store: already redacted and bounded by the app layer.
#[derive(Clone, Debug)]
pub struct StoredCompletion {
    /// The state it moves the call to.
    pub state: CallState,
    /// Retained result.
    pub result: Option<Value>,
    /// Whether the result was cut.
    pub result_truncated: bool,
    /// The result as reported, kept only when bounding cut it: a capture exclusion filters
    /// this, then bounds it again. Never stored.
    pub unbounded: Option<Value>,
    /// Failure or uncertainty code.
    pub error_code: Option<String>,
    /// Failure or uncertainty explanation.
    pub error_message: Option<String>,
    /// Whether it failed for its connection's credential (refused by the MCP server, or not
    /// resolvable): the connection is then marked `needs_authorization`. Decided by the app
    /// layer from the runner's stable error code.
    pub credential_refused: bool,
    /// What capture exclusions keep of the call beside its disposition.
    pub kept: Kept,
}

/// What capture exclusions keep of a call when its completion is recorded (its result was
/// filtered by the app layer already).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Kept {
    /// Everything: no exclusion applies.
    #[default]
    All,
    /// All but these top-level argument fields.
    AllBut {
        /// The argument fields removed from the retained arguments.
        argument_fields: Vec<String>,
    },
    /// Nothing but the disposition: no arguments, no result, no evidence.
    Nothing,
}

impl StoredCompletion {
    /// Whether the MCP server answered (a result, or an error result): what capture takes,
    /// when it is on, and what says the connection's credential was accepted.
    pub(crate) fn answered(&self) -> bool {
        matches!(self.state, CallState::Succeeded | CallState::ToolError)
    }

    /// Whether capture takes this outcome (a result the tool answered), when it is on.
    pub(crate) fn capturable(&self) -> bool {
        self.answered() && self.kept != Kept::Nothing
    }
}

/// One completion of a batch for [`Datastore::call_complete_plain_many`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlainCompletion<'a> {
    /// The call.
    pub id: CallId,
    /// The states it may leave.
    pub from: &'a [CallState],
    /// What it records.
    pub completion: &'a StoredCompletion,
}

/// A call as the statement that recorded its completion left it, with its lineage then: what
/// a reader would have read the moment that statement committed.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SettledCall {
    /// The call.
    #[sqlx(flatten)]
    pub call: CallRow,
    /// What is recorded beside it.
    #[sqlx(flatten)]
    pub lineage: Lineage,
}

/// What a device's upload found ([`Datastore::call_complete_plain_by_device`]).
#[derive(Debug)]
pub struct DeviceCompletion {
    /// The device holding the credential (revoked or not).
    pub device: DeviceRow,
    /// Whether the completion was recorded, with its receipt.
    pub completed: bool,
    /// The call as recorded, when it was.
    pub finished: Option<FinishedCall>,
}

/// A call whose completion a statement recorded, as that statement returned it: what the
/// server's instruments need (no arguments, no result).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct FinishedCall {
    /// The call.
    pub id: CallId,
    /// Its connection.
    pub connection_id: ConnectionId,
    /// Its tool.
    pub tool_name: String,
    /// A tool call, a receipt lookup or a discovery.
    pub kind: CallKind,
    /// The state recorded.
    pub state: CallState,
    /// The start ack, if it was started.
    pub started_at: Option<DateTime<Utc>>,
    /// The completion.
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<&CallRow> for FinishedCall {
    fn from(call: &CallRow) -> Self {
        Self {
            id: call.id,
            connection_id: call.connection_id,
            tool_name: call.tool_name.clone(),
            kind: call.kind,
            state: call.state,
            started_at: call.started_at,
            finished_at: call.finished_at,
        }
    }
}

/// The placeholders every completion statement takes first, in the order
/// [`completion_arguments`] binds them: the call, who completes it (a runner reference, or the
/// credential hash that finds a device's), the epoch, the states it may leave, and what it
/// records.
struct CompletionParams {
    id: String,
    by: String,
    epoch: String,
    from: String,
    state: String,
    result: String,
    truncated: String,
    code: String,
    message: String,
}

impl CompletionParams {
    fn take(params: &mut Params) -> Self {
        Self {
            id: params.next(),
            by: params.next(),
            epoch: params.next(),
            from: params.next(),
            state: params.next(),
            result: params.next(),
            truncated: params.next(),
            code: params.next(),
            message: params.next(),
        }
    }

    /// The guarded completion update: of the call, by the runner `runner` (the `by`
    /// placeholder, or an expression that finds the runner from it), under the epoch (still
    /// the runner's), from the states it may leave; `guard` adds conditions.
    fn update(&self, runner: &str, guard: &str) -> String {
        let Self {
            id,
            epoch,
            from,
            state,
            result,
            truncated,
            code,
            message,
            ..
        } = self;
        format!(
            "UPDATE calls SET state = {state}, result = {result}, result_truncated = {truncated},
                 error_code = {code}, error_message = {message}, finished_at = now()
             WHERE id = {id} AND runner_ref = {runner} AND lease_epoch = {epoch} AND state = ANY({from})
               AND EXISTS (SELECT 1 FROM runner_leases r WHERE r.runner_ref = {runner} AND r.epoch = {epoch}) {guard}
             RETURNING *"
        )
    }
}

/// Binds the arguments of [`CompletionParams`], in its order.
fn completion_arguments<'q, By>(
    id: CallId,
    by: By,
    epoch: Epoch,
    from: &'q [CallState],
    completion: &'q StoredCompletion,
) -> Result<PgArguments, sqlx::Error>
where
    By: 'q + sqlx::Encode<'q, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    let mut arguments = PgArguments::default();
    add(&mut arguments, id)?;
    add(&mut arguments, by)?;
    add(&mut arguments, epoch)?;
    add(&mut arguments, from)?;
    add(&mut arguments, completion.state)?;
    add(&mut arguments, completion.result.as_ref().map(Json))?;
    add(&mut arguments, completion.result_truncated)?;
    add(&mut arguments, completion.error_code.as_deref())?;
    add(&mut arguments, completion.error_message.as_deref())?;
    Ok(arguments)
}

/// The placeholders a plain completion takes after [`CompletionParams`], in the order
/// [`plain_arguments`] binds them: whether capture would take the outcome (the server
/// answered), whether the connection's credential was refused, and a device's receipt.
struct PlainParams {
    capturable: String,
    refused: String,
    receipt: String,
}

impl PlainParams {
    fn take(params: &mut Params) -> Self {
        Self {
            capturable: params.next(),
            refused: params.next(),
            receipt: params.next(),
        }
    }
}

/// [`completion_arguments`] followed by those of [`PlainParams`].
fn plain_arguments<'q, By>(
    id: CallId,
    by: By,
    epoch: Epoch,
    from: &'q [CallState],
    completion: &'q StoredCompletion,
    receipt: Option<Uuid>,
) -> Result<PgArguments, sqlx::Error>
where
    By: 'q + sqlx::Encode<'q, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    let mut arguments = completion_arguments(id, by, epoch, from, completion)?;
    add(&mut arguments, completion.capturable())?;
    add(&mut arguments, completion.credential_refused)?;
    add(&mut arguments, receipt)?;
    Ok(arguments)
}

/// A statement built once for each answer to "read the lineage back?".
struct ByLineage {
    reading: LazyLock<Arc<str>>,
    not_reading: LazyLock<Arc<str>>,
}

impl ByLineage {
    /// The statements that `reading` and `not_reading` build.
    const fn new(reading: fn() -> Arc<str>, not_reading: fn() -> Arc<str>) -> Self {
        Self {
            reading: LazyLock::new(reading),
            not_reading: LazyLock::new(not_reading),
        }
    }

    /// The statement that reads the lineage back, or the one that does not.
    fn get(&self, read_lineage: bool) -> Text {
        text(if read_lineage {
            &self.reading
        } else {
            &self.not_reading
        })
    }
}

fn add<'q, T>(arguments: &mut PgArguments, value: T) -> Result<(), sqlx::Error>
where
    T: 'q + sqlx::Encode<'q, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    arguments.add(value).map_err(sqlx::Error::Encode)
}

/// The conditions under which a completion implies nothing beside its state change: a tool
/// call (not a receipt lookup), its evidence not erased, not captured (`capturable`: SQL
/// saying whether capture would take this outcome, which is whether the server answered), no
/// capture exclusion applies, and its connection's credential state unchanged: not refused
/// (`refused`: SQL saying whether the completion failed for it), nor answered on a connection
/// marked `needs_authorization`, which the answer clears. Those are recorded with their effect
/// on the connection (`db/observations.rs`). Shared by the single and the batched plain
/// completion.
fn plain_guard(capturable: &str, refused: &str) -> String {
    format!(
        "AND kind = 'tool' AND evidence_erased_at IS NULL
         AND NOT ({capturable} AND EXISTS (SELECT 1 FROM capture_policies p
                                          WHERE p.workspace_id = calls.workspace_id
                                            AND p.capture_managed_tool_results))
         AND NOT EXISTS (SELECT 1 FROM capture_exclusions x
                         WHERE x.connection_id = calls.connection_id AND x.tool_name IN ('', calls.tool_name))
         AND NOT {refused}
         AND NOT ({capturable} AND EXISTS (SELECT 1 FROM connections n
                                          WHERE n.id = calls.connection_id
                                            AND n.unavailable = 'needs_authorization'))"
    )
}

/// The CTE `receipt` that stores a device's receipt `receipt` (when it is not NULL) for the
/// call the CTE `done` completed, answered `recorded`, unless that receipt id is stored
/// already.
fn store_receipt(receipt: &str) -> String {
    format!(
        "receipt AS (
             INSERT INTO receipts (receipt_id, call_id, runner_ref, epoch, outcome, answer, applied)
             SELECT {receipt}, id, runner_ref, lease_epoch, state, 'recorded', true FROM done
             WHERE {receipt}::uuid IS NOT NULL
             ON CONFLICT (receipt_id) DO NOTHING
             RETURNING receipt_id)"
    )
}

/// The lineage columns of a completion whose CTE `receipt` stores a device's receipt beside
/// the call (read), or their empty stand-ins (not read).
fn recorded_lineage(read: bool) -> String {
    if read {
        lineage_columns("|| ARRAY(SELECT receipt_id FROM receipt)")
    } else {
        UNREAD_LINEAGE.to_owned()
    }
}

/// The statement of [`call_complete_on`].
fn completion_on() -> Text {
    static STATEMENT: LazyLock<Arc<str>> = LazyLock::new(|| {
        let values = CompletionParams::take(&mut Params::default());
        values.update(&values.by, "").into()
    });
    text(&STATEMENT)
}

/// Records a completion reported under `epoch`, moving the call from one of `from` to
/// `completion.state`, on `conn` (inside the caller's transaction, which records what the
/// completion implies beside it). Returns the updated call, or `None` when a stale epoch or a
/// call that moved on recorded nothing.
pub(crate) async fn call_complete_on(
    conn: &mut sqlx::PgConnection,
    id: CallId,
    runner: RunnerRef,
    epoch: Epoch,
    from: &[CallState],
    completion: &StoredCompletion,
) -> Result<Option<CallRow>, sqlx::Error> {
    let arguments = completion_arguments(id, runner, epoch, from, completion)?;
    sqlx::query_as_with(completion_on(), arguments)
        .fetch_optional(conn)
        .await
}

/// The statements of [`Datastore::call_complete_plain`].
static PLAIN_COMPLETION: ByLineage =
    ByLineage::new(|| plain_completion(true), || plain_completion(false));

/// The statement of [`Datastore::call_complete_plain`], reading the lineage or not.
fn plain_completion(read_lineage: bool) -> Arc<str> {
    let mut params = Params::default();
    let values = CompletionParams::take(&mut params);
    let PlainParams {
        capturable,
        refused,
        receipt,
    } = PlainParams::take(&mut params);
    format!(
        "WITH done AS ({update}), {receipt_cte}
         SELECT c.*, EXISTS (SELECT 1 FROM receipt) AS receipt_stored, {lineage} FROM done c",
        update = values.update(&values.by, &plain_guard(&capturable, &refused)),
        receipt_cte = store_receipt(&receipt),
        lineage = recorded_lineage(read_lineage),
    )
    .into()
}

/// The statements of [`Datastore::call_complete_plain_by_device`].
static DEVICE_COMPLETION: ByLineage =
    ByLineage::new(|| device_completion(true), || device_completion(false));

/// The statement of [`Datastore::call_complete_plain_by_device`], reading the lineage or not.
fn device_completion(read_lineage: bool) -> Arc<str> {
    let mut params = Params::default();
    let values = CompletionParams::take(&mut params);
    let PlainParams {
        capturable,
        refused,
        receipt,
    } = PlainParams::take(&mut params);
    let guard = format!(
        "{} AND NOT EXISTS (SELECT 1 FROM receipts WHERE receipt_id = {receipt})",
        plain_guard(&capturable, &refused)
    );
    format!(
        "WITH device AS ({device}),
         done AS ({update}), {receipt_cte}
         SELECT c.*, {lineage}, d.id AS device_id, d.workspace_id AS device_workspace_id,
             d.profile_id AS device_profile_id, d.name AS device_name,
             d.approved_by AS device_approved_by, d.created_at AS device_created_at,
             d.last_seen_at AS device_last_seen_at, d.revoked_at AS device_revoked_at
         FROM device d LEFT JOIN done c ON true",
        device = device_by_credential(&values.by),
        update = values.update(
            "(SELECT runner_ref FROM device WHERE revoked_at IS NULL)",
            &guard
        ),
        receipt_cte = store_receipt(&receipt),
        lineage = recorded_lineage(read_lineage),
    )
    .into()
}

/// The row of [`Datastore::call_complete_plain`].
#[derive(sqlx::FromRow)]
struct PlainCompleted {
    #[sqlx(flatten)]
    settled: SettledCall,
    receipt_stored: bool,
}

/// A completion recorded by [`Datastore::call_complete_plain`].
#[derive(Debug)]
pub(crate) struct PlainRecorded {
    /// The call as recorded.
    pub(crate) call: CallRow,
    /// Whether the device's receipt was stored with it.
    pub(crate) receipt_stored: bool,
}

/// The wake-up of a call settled by a statement that read it back with its lineage when
/// `read_lineage`.
fn settled_wakeup(settled: SettledCall, read_lineage: bool) -> (CallRow, Wakeup) {
    let call = settled.call.clone();
    let wakeup = Wakeup::Settled {
        call: call.id,
        recorded: read_lineage.then(|| Box::new(settled)),
    };
    (call, wakeup)
}

impl Datastore {
    /// Records a completion that implies nothing beside its state change, as one statement
    /// (its own transaction): a tool call — not a receipt lookup, so no observation and no
    /// erased parent — whose workspace does not capture it (or whose outcome capture does not
    /// take). A device's `receipt` is stored with it, answered `recorded`, unless that receipt
    /// id is stored already. Returns the call as recorded, its wake-up carrying it with its
    /// lineage when `read_lineage`; or `None`, recording nothing, for any other completion as
    /// for a stale epoch or a call that moved on: the caller then records it in a transaction
    /// with what it implies.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn call_complete_plain(
        &self,
        id: CallId,
        runner: RunnerRef,
        epoch: Epoch,
        from: &[CallState],
        completion: &StoredCompletion,
        receipt: Option<Uuid>,
        read_lineage: bool,
    ) -> Result<Option<Committed<PlainRecorded>>, sqlx::Error> {
        let arguments = plain_arguments(id, runner, epoch, from, completion, receipt)?;
        let done: Option<PlainCompleted> =
            sqlx::query_as_with(PLAIN_COMPLETION.get(read_lineage), arguments)
                .fetch_optional(&self.pool)
                .await?;
        Ok(done.map(|done| {
            let (call, wakeup) = settled_wakeup(done.settled, read_lineage);
            Committed::new(PlainRecorded {
                call,
                receipt_stored: done.receipt_stored,
            })
            .waking(wakeup)
        }))
    }

    /// [`Datastore::call_complete_plain`] for several completions of one runner and epoch
    /// (none with a device receipt), in one statement (a lone one by `call_complete_plain`
    /// itself). Returns the ids it recorded; the others recorded nothing and are the caller's
    /// to record one by one.
    pub(crate) async fn call_complete_plain_many(
        &self,
        runner: RunnerRef,
        epoch: Epoch,
        completions: &[PlainCompletion<'_>],
    ) -> Result<Committed<Vec<FinishedCall>>, sqlx::Error> {
        // A lone completion (every one on an idle server) takes the single-row statement:
        // PostgreSQL plans the batch statement anew for nearly every execution (its plan for
        // arrays of unknown length looks dearer than one for the array at hand), the
        // single-row one once per connection.
        if let [one] = completions {
            let done = self
                .call_complete_plain(one.id, runner, epoch, one.from, one.completion, None, false)
                .await?;
            return Ok(match done {
                Some(recorded) => Committed {
                    value: vec![FinishedCall::from(&recorded.value.call)],
                    wakeups: recorded.wakeups,
                },
                None => Committed::new(Vec::new()),
            });
        }
        let mut completions: Vec<&PlainCompletion<'_>> = completions.iter().collect();
        // One lock order for every batch.
        completions.sort_unstable_by_key(|c| c.id);
        let column = |get: fn(&PlainCompletion<'_>) -> Option<String>| -> Vec<Option<String>> {
            completions.iter().map(|c| get(c)).collect()
        };
        let ids: Vec<CallId> = completions.iter().map(|c| c.id).collect();
        let from = column(|c| {
            let names: Vec<&str> = c.from.iter().map(|s| s.as_str()).collect();
            Some(names.join(","))
        });
        let states: Vec<CallState> = completions.iter().map(|c| c.completion.state).collect();
        let results: Vec<Option<Json<&Value>>> = completions
            .iter()
            .map(|c| c.completion.result.as_ref().map(Json))
            .collect();
        let truncated: Vec<bool> = completions
            .iter()
            .map(|c| c.completion.result_truncated)
            .collect();
        let codes = column(|c| c.completion.error_code.clone());
        let messages = column(|c| c.completion.error_message.clone());
        let capturable: Vec<bool> = completions
            .iter()
            .map(|c| c.completion.capturable())
            .collect();
        let refused: Vec<bool> = completions
            .iter()
            .map(|c| c.completion.credential_refused)
            .collect();
        static STATEMENT: LazyLock<Arc<str>> = LazyLock::new(|| {
            format!(
                "UPDATE calls SET state = i.state, result = i.result, result_truncated = i.truncated,
                     error_code = i.code, error_message = i.message, finished_at = now()
                 FROM unnest($3::uuid[], $4::text[], $5::text[], $6::jsonb[], $7::bool[], $8::text[],
                             $9::text[], $10::bool[], $11::bool[])
                      AS i(id, from_states, state, result, truncated, code, message, capturable,
                           refused)
                 WHERE calls.id = ANY($3) AND calls.id = i.id
                   AND calls.runner_ref = $1 AND calls.lease_epoch = $2
                   AND calls.state = ANY(string_to_array(i.from_states, ','))
                   AND EXISTS (SELECT 1 FROM runner_leases r WHERE r.runner_ref = $1 AND r.epoch = $2) {guard}
                 RETURNING calls.id, calls.connection_id, calls.tool_name, calls.kind, calls.state,
                     calls.started_at, calls.finished_at",
                guard = plain_guard("i.capturable", "i.refused"),
            )
            .into()
        });
        let recorded: Vec<FinishedCall> = sqlx::query_as(text(&STATEMENT))
            .bind(runner)
            .bind(epoch)
            .bind(ids)
            .bind(from)
            .bind(states)
            .bind(results)
            .bind(truncated)
            .bind(codes)
            .bind(messages)
            .bind(capturable)
            .bind(refused)
            .fetch_all(&self.pool)
            .await?;
        let wakeups = recorded
            .iter()
            .map(|call| Wakeup::Settled {
                call: call.id,
                recorded: None,
            })
            .collect();
        Ok(Committed {
            value: recorded,
            wakeups,
        })
    }

    /// [`Datastore::call_complete_plain`] for a device's upload in the statement that checks
    /// its credential: it finds the device by the credential's hash and, unless the device is
    /// revoked or `receipt` was uploaded before, records the completion under its runner
    /// reference with the receipt. `None` when no device holds the credential; `completed`
    /// false when nothing was recorded (any completion `call_complete_plain` would not record,
    /// a revoked device, a receipt seen before): the caller then looks at why.
    #[allow(clippy::too_many_arguments)]
    pub async fn call_complete_plain_by_device(
        &self,
        id: CallId,
        credential_hash: &[u8],
        epoch: Epoch,
        from: &[CallState],
        completion: &StoredCompletion,
        receipt: Uuid,
        read_lineage: bool,
    ) -> Result<Option<Committed<DeviceCompletion>>, sqlx::Error> {
        let arguments =
            plain_arguments(id, credential_hash, epoch, from, completion, Some(receipt))?;
        let statement = DEVICE_COMPLETION.get(read_lineage);
        let row: Option<DeviceCompletionRow> = sqlx::query_as_with(statement, arguments)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|row| {
            let completed = Committed::new(DeviceCompletion {
                device: row.device,
                completed: row.settled.is_some(),
                finished: row.settled.as_ref().map(|settled| (&settled.call).into()),
            });
            match row.settled {
                Some(settled) => completed.waking(settled_wakeup(settled, read_lineage).1),
                None => completed,
            }
        }))
    }
}

/// The row of [`Datastore::call_complete_plain_by_device`]: the device under `device_…`
/// names, and the call it completed (its own columns, all null when it completed none).
struct DeviceCompletionRow {
    device: DeviceRow,
    settled: Option<SettledCall>,
}

impl FromRow<'_, PgRow> for DeviceCompletionRow {
    fn from_row(row: &PgRow) -> Result<Self, sqlx::Error> {
        let device = DeviceRow {
            id: row.try_get("device_id")?,
            workspace_id: row.try_get("device_workspace_id")?,
            profile_id: row.try_get("device_profile_id")?,
            name: row.try_get("device_name")?,
            approved_by: row.try_get("device_approved_by")?,
            created_at: row.try_get("device_created_at")?,
            last_seen_at: row.try_get("device_last_seen_at")?,
            revoked_at: row.try_get("device_revoked_at")?,
        };
        let settled = match row.try_get::<Option<CallId>, _>("id")? {
            Some(_) => Some(SettledCall::from_row(row)?),
            None => None,
        };
        Ok(Self { device, settled })
    }
}
