//! Calls. Every state change is one guarded update (`WHERE state = … AND lease_epoch = …`)
//! that reports whether it won; nothing here reads, decides, then writes.

use super::devices::device_by_credential;
use super::observations::{lineage_columns, unread_lineage_columns};
use super::{ANY_RUNNER, ConnectorRow, Datastore, DeviceRow, Lineage};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use std::collections::HashMap;
use switchyard_protocol::CallState;
use uuid::Uuid;

/// A row of `calls`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct CallRow {
    /// Id.
    pub id: Uuid,
    /// Workspace.
    pub workspace_id: Uuid,
    /// Client idempotency key.
    pub request_id: Uuid,
    /// SHA-256 of the canonical payload.
    pub payload_digest: Vec<u8>,
    /// Profile.
    pub profile_id: Uuid,
    /// Connection.
    pub connection_id: Uuid,
    /// Connection revision at submission.
    pub connection_revision: i64,
    /// Environment.
    pub environment_id: Uuid,
    /// Tool.
    pub tool_name: String,
    /// Arguments, until they expire.
    pub arguments: Option<Json<Value>>,
    /// Warm-session key.
    pub client_session_id: Option<String>,
    /// Timeout.
    pub timeout_seconds: i32,
    /// State name (see [`CallState`]).
    pub state: String,
    /// Selected runner.
    pub runner_ref: String,
    /// Epoch of the lease it was last leased under.
    pub lease_epoch: Option<i64>,
    /// Retained result.
    pub result: Option<Json<Value>>,
    /// Whether the result was cut.
    pub result_truncated: bool,
    /// Failure or uncertainty code.
    pub error_code: Option<String>,
    /// Failure or uncertainty explanation.
    pub error_message: Option<String>,
    /// Submitter.
    pub created_by: Uuid,
    /// Submission time.
    pub created_at: DateTime<Utc>,
    /// Lease time.
    pub leased_at: Option<DateTime<Utc>>,
    /// Start-ack time.
    pub started_at: Option<DateTime<Utc>>,
    /// End time.
    pub finished_at: Option<DateTime<Utc>>,
    /// When cancellation of the dispatched call was requested.
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// When retention erased inputs and results.
    pub retention_expired_at: Option<DateTime<Utc>>,
    /// `tool`, or `lookup` for a receipt lookup run for `parent_call_id`.
    pub kind: String,
    /// For a lookup: the unknown call it looks up.
    pub parent_call_id: Option<Uuid>,
    /// The connector revision the call was dispatched to (recorded when leased).
    pub connector_revision: Option<i64>,
    /// For a `resolved` call: `succeeded`, `not_applied` or `failed`.
    pub resolution_outcome: Option<String>,
    /// When the call's evidence was erased.
    pub evidence_erased_at: Option<DateTime<Utc>>,
}

/// A call to insert.
#[derive(Clone, Debug)]
pub struct NewCall {
    /// The id it is stored under: a fresh `Uuid::now_v7()` (ids order by creation).
    pub id: Uuid,
    /// Workspace.
    pub workspace_id: Uuid,
    /// Client idempotency key.
    pub request_id: Uuid,
    /// SHA-256 of the canonical payload.
    pub payload_digest: Vec<u8>,
    /// Profile.
    pub profile_id: Uuid,
    /// Connection.
    pub connection_id: Uuid,
    /// Connection revision now.
    pub connection_revision: i64,
    /// Environment.
    pub environment_id: Uuid,
    /// Tool.
    pub tool_name: String,
    /// Arguments (an object).
    pub arguments: Value,
    /// Warm-session key.
    pub client_session_id: Option<String>,
    /// Timeout.
    pub timeout_seconds: i32,
    /// Runner that will run it.
    pub runner_ref: String,
    /// Submitter.
    pub created_by: Uuid,
}

/// The head of a call's insert, as a string literal (`concat!`): the columns a submission
/// sets, in the order [`Datastore::call_insert_from`] binds them and
/// [`Datastore::call_insert_many`] unnests them — and, with an argument (`, ` and column
/// names), those a handed call's insert sets beside them (see [`handed_target!`]).
macro_rules! insert_call {
    () => {
        insert_call!("")
    };
    ($more:literal) => {
        concat!(
            "INSERT INTO calls (id, workspace_id, request_id, payload_digest, profile_id, connection_id,
             connection_revision, environment_id, tool_name, arguments, client_session_id,
             timeout_seconds, state, runner_ref, created_by, operation_id, submitted_by_device,
             kind, parent_call_id",
            $more,
            ")"
        )
    };
}
pub(super) use insert_call;

/// The start ack's update (`leased` → `running`) of call `$1` under epoch `$3`, for the runner
/// `$runner` names (a parameter, or a subquery).
macro_rules! start_call {
    ($runner:literal) => {
        concat!(
            "UPDATE calls SET state = 'running', started_at = COALESCE(started_at, now())
             WHERE id = $1 AND state IN ('leased', 'running') AND runner_ref = ",
            $runner,
            "
               AND lease_epoch = $3
               AND EXISTS (SELECT 1 FROM runner_leases r
                           WHERE r.runner_ref = ",
            $runner,
            " AND r.epoch = $3 AND r.expires_at > now())"
        )
    };
}

/// What a device's upload found ([`Datastore::call_complete_plain_by_device`]).
#[derive(Debug)]
pub struct DeviceCompletion {
    /// The device holding the credential (revoked or not).
    pub device: DeviceRow,
    /// Whether the completion was recorded, with its receipt.
    pub completed: bool,
}

/// A call as the statement that recorded its completion left it, with its lineage then: what
/// a reader would have read the moment that statement committed. Handed to the readers
/// waiting for the call in the same process (see `app::wakeups`), so that they need not read
/// it again; the statement reads the lineage only when such a reader waits.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SettledCall {
    /// The call.
    #[sqlx(flatten)]
    pub call: CallRow,
    /// What is recorded beside it.
    #[sqlx(flatten)]
    pub lineage: Lineage,
}

/// The row of [`Datastore::call_complete_plain_by_device`]: the device under `device_…`
/// names, and the call it completed (its own columns, all null when it completed none).
struct DeviceCompletionRow {
    found: DeviceCompletion,
    settled: Option<SettledCall>,
}

impl sqlx::FromRow<'_, PgRow> for DeviceCompletionRow {
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
        let settled = match row.try_get::<Option<Uuid>, _>("id")? {
            Some(_) => Some(SettledCall::from_row(row)?),
            None => None,
        };
        Ok(Self {
            found: DeviceCompletion {
                device,
                completed: settled.is_some(),
            },
            settled,
        })
    }
}

/// What a device's start ack found ([`Datastore::call_start_by_device`]).
#[derive(Debug, sqlx::FromRow)]
pub struct DeviceStart {
    /// The device holding the credential (revoked or not).
    #[sqlx(flatten)]
    pub device: DeviceRow,
    /// Whether the call moved to (or already was) `running` under the epoch.
    pub started: bool,
}

/// Which expired runner leases a lost-lease sweep settles the calls of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpiredLeases {
    /// Every expired lease.
    All,
    /// Leases that expired in the last minute: usually none, so the sweep reads no call. Each
    /// of thousands of long-expired leases (devices gone away) costs a lookup in every sweep
    /// of all of them.
    Recent,
}

/// The condition on the expired leases (`e`) that makes a lost-lease sweep
/// [`ExpiredLeases::Recent`]: a minute covers the sweeper's interval and any lease or start
/// transaction still committing when the lease expired, many times over.
macro_rules! recent_expiry {
    () => {
        " AND e.expires_at > now() - interval '60 seconds'"
    };
}

/// A lost-lease sweep's statement: sets `$set` on the calls in `$state` of the runners whose
/// lease expired (`e`, with the `window`'s further condition), under that lease's epoch or an
/// earlier one. The calls are looked up by those runners (an index condition on
/// `calls_in_flight`), so that no plan walks the entries of runners whose lease is live: with
/// the xmin horizon held, the central runner's dead ones (31 ms against 9 ms for 10,000
/// expired runners among 100,000 dead entries; 0.5 ms for the recent ones).
macro_rules! lost_leases {
    ($set:literal, $state:literal, $($window:tt)*) => {
        concat!(
            "UPDATE calls c SET ", $set, "
             FROM runner_leases r
             WHERE c.runner_ref = ANY (ARRAY(
                       SELECT e.runner_ref FROM runner_leases e WHERE e.expires_at <= now()",
            $($window)*,
            "))
               AND c.runner_ref = r.runner_ref AND c.state = '", $state, "'
               AND c.lease_epoch <= r.epoch AND c.finished_at IS NULL AND r.expires_at <= now()"
        )
    };
}

/// [`lost_leases!`] for leased calls: back to the queue.
macro_rules! requeue_lost {
    ($($window:tt)*) => {
        lost_leases!(
            "state = 'queued', lease_epoch = NULL, leased_at = NULL",
            "leased",
            $($window)*
        )
    };
}

/// [`lost_leases!`] for started calls: `unknown`, as they may have run.
macro_rules! unknown_lost {
    ($($window:tt)*) => {
        lost_leases!(
            "state = 'unknown', finished_at = now(), error_code = 'runner_lost',
                 error_message = 'the runner lost its lease after the call was started; it may or may not have run'",
            "running",
            $($window)*
        )
    };
}

/// Where a call came from beyond its submitter: the operation it runs under and the device
/// that submitted it, when there are, and for a receipt lookup the unknown call it looks up.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallOrigin {
    /// The operation.
    pub operation_id: Option<Uuid>,
    /// The submitting device.
    pub device_id: Option<Uuid>,
    /// Set for a receipt lookup (`kind = 'lookup'`): the unknown call it looks up. A lookup is
    /// inserted as one from the start, so no runner ever sees it as anything else.
    pub lookup_of: Option<Uuid>,
}

/// A call just leased, with everything the runner and the lease's own checks need, read by
/// the statement that leased it: the connection's revision and its connector as they are now,
/// the target the call was recorded as dispatched to, and for a receipt lookup the unknown
/// call it looks up as it is now.
#[derive(Clone, Debug)]
pub struct LeasedRow {
    /// Call id.
    pub id: Uuid,
    /// Submitted (the insert's transaction time): where the runner's next lease may scan from.
    pub created_at: DateTime<Utc>,
    /// Client idempotency key.
    pub request_id: Uuid,
    /// Connection.
    pub connection_id: Uuid,
    /// The connection's revision now.
    pub connection_revision: i64,
    /// The connection's connector now.
    pub connector: ConnectorRow,
    /// Tool.
    pub tool_name: String,
    /// Arguments.
    pub arguments: Option<Json<Value>>,
    /// Timeout.
    pub timeout_seconds: i32,
    /// Warm-session key.
    pub client_session_id: Option<String>,
    /// The digest of the target the call is recorded as dispatched to (see `target_digest!`).
    pub target_digest: Vec<u8>,
    /// For a receipt lookup: the unknown call it looks up.
    pub parent_call_id: Option<Uuid>,
    /// For a receipt lookup: that call as it is now (`None` if it is gone).
    pub parent: Option<LookedUpCall>,
}

/// The unknown call a leased receipt lookup looks up, as the lease read it.
#[derive(Clone, Debug)]
pub struct LookedUpCall {
    /// Its state.
    pub state: String,
    /// The digest of the target it was dispatched to.
    pub target_digest: Option<Vec<u8>>,
    /// When its evidence was erased.
    pub evidence_erased_at: Option<DateTime<Utc>>,
}

impl<'r> sqlx::FromRow<'r, PgRow> for LeasedRow {
    fn from_row(row: &'r PgRow) -> Result<Self, sqlx::Error> {
        let parent_state: Option<String> = row.try_get("parent_state")?;
        let parent = match parent_state {
            Some(state) => Some(LookedUpCall {
                state,
                target_digest: row.try_get("parent_target_digest")?,
                evidence_erased_at: row.try_get("parent_erased_at")?,
            }),
            None => None,
        };
        Ok(Self {
            id: row.try_get("id")?,
            created_at: row.try_get("created_at")?,
            request_id: row.try_get("request_id")?,
            connection_id: row.try_get("connection_id")?,
            connection_revision: row.try_get("connection_revision")?,
            connector: ConnectorRow {
                id: row.try_get("connector_id")?,
                name: row.try_get("connector_name")?,
                transport: row.try_get("connector_transport")?,
                command: row.try_get("connector_command")?,
                args: row.try_get("connector_args")?,
                env_names: row.try_get("connector_env_names")?,
                url: row.try_get("connector_url")?,
                revision: row.try_get("connector_revision")?,
                approved_revision: row.try_get("connector_approved_revision")?,
                created_at: row.try_get("connector_created_at")?,
            },
            tool_name: row.try_get("tool_name")?,
            arguments: row.try_get("arguments")?,
            timeout_seconds: row.try_get("timeout_seconds")?,
            client_session_id: row.try_get("client_session_id")?,
            target_digest: row.try_get("target_digest")?,
            parent_call_id: row.try_get("parent_call_id")?,
            parent,
        })
    }
}

/// SQL for the digest of the target a call on connection `k` (joined with its connector `x`)
/// is dispatched to now: runner, connection and connector revisions, transport and target,
/// and for the central runner the credential binding's references, never values. `$bindings`
/// is the central bindings file's `bindings` map (connection id → references), `null` when
/// there is none, or a string marking an unreadable file (lookups then fail closed).
/// PostgreSQL computes it, so that the lease records it in the statement that leases, and a
/// lookup request compares with the same expression.
macro_rules! target_digest {
    ($bindings:literal) => {
        concat!(
            "sha256(convert_to(jsonb_build_object(
                 'runner', k.runner_ref, 'connection', k.id, 'connection_revision', k.revision,
                 'connector', x.id, 'connector_revision', x.revision, 'transport', x.transport,
                 'command', x.command, 'args', x.args, 'env', x.env_names, 'url', x.url,
                 'binding', CASE WHEN k.runner_ref <> 'central' THEN NULL
                                 WHEN jsonb_typeof(",
            $bindings,
            ") = 'object' THEN ",
            $bindings,
            " -> k.id::text
                                 ELSE ",
            $bindings,
            " END)::text, 'UTF8'))"
        )
    };
}

pub(super) use target_digest;

/// `target AS (…)`, as a string literal (`concat!`): what a call inserted leased to a waiting
/// lease is dispatched to — its connection `$connection`'s connector and the target digest
/// (`$bindings` as in [`target_digest!`]) — when `$epoch` is runner `$runner`'s live lease;
/// empty otherwise. With two leading arguments, for calls of a batch: `$select` adds columns
/// in front and `$from` a relation (ending `, `) the others may name.
macro_rules! handed_target {
    ($connection:literal, $runner:literal, $epoch:literal, $bindings:literal) => {
        handed_target!("", "", $connection, $runner, $epoch, $bindings)
    };
    ($select:literal, $from:literal, $connection:literal, $runner:literal, $epoch:literal,
     $bindings:literal) => {
        concat!(
            "target AS (
                 SELECT ",
            $select,
            "x.id AS connector_id, x.revision AS connector_revision,
                     k.revision AS connection_revision_now, x.name AS connector_name,
                     x.transport AS connector_transport, x.command AS connector_command,
                     x.args AS connector_args, x.env_names AS connector_env_names,
                     x.url AS connector_url, x.approved_revision AS connector_approved_revision,
                     x.created_at AS connector_created_at,
                     ",
            target_digest!($bindings),
            " AS target_digest
                 FROM ",
            $from,
            "connections k JOIN connectors x ON x.id = k.connector_id
                 WHERE k.id = ",
            $connection,
            " AND EXISTS (
                     SELECT 1 FROM runner_leases l
                     WHERE l.runner_ref = ",
            $runner,
            " AND l.epoch = ",
            $epoch,
            " AND l.expires_at > now()))"
        )
    };
}
pub(super) use handed_target;

/// The head of a handed call's insert: [`insert_call!`] with the columns its lease sets, which
/// [`handed_target!`] fills.
macro_rules! insert_handed_call {
    () => {
        insert_call!(", lease_epoch, leased_at, connector_id, connector_revision, target_digest")
    };
}
pub(super) use insert_handed_call;

/// The values a handed call's insert gives the columns [`insert_handed_call!`] adds, as a
/// string literal (`concat!`): the lease epoch `$epoch` and the lease time when
/// [`handed_target!`] found the call's target under a live lease (none otherwise), and that
/// target.
macro_rules! handed_lease_values {
    ($epoch:literal) => {
        concat!(
            "CASE WHEN t.connector_id IS NULL THEN NULL ELSE ",
            $epoch,
            " END,
                 CASE WHEN t.connector_id IS NULL THEN NULL ELSE now() END,
                 t.connector_id, t.connector_revision, t.target_digest"
        )
    };
}
pub(super) use handed_lease_values;

/// What [`HandedRow`] reads beside the call's own columns, from [`handed_target!`]'s `t`: what
/// the lease reads of the connector (no parent: a handed call is never a receipt lookup).
macro_rules! handed_read_columns {
    () => {
        "t.connection_revision_now, t.connector_name, t.connector_transport,
             t.connector_command, t.connector_args, t.connector_env_names, t.connector_url,
             t.connector_approved_revision, t.connector_created_at,
             NULL::text AS parent_state, NULL::bytea AS parent_target_digest,
             NULL::timestamptz AS parent_erased_at"
    };
}
pub(super) use handed_read_columns;

/// A completion ready to store: already redacted and bounded by the app layer.
#[derive(Clone, Debug)]
pub struct StoredCompletion {
    /// The state it moves the call to.
    pub state: CallState,
    /// Retained result.
    pub result: Option<Value>,
    /// Whether the result was cut.
    pub result_truncated: bool,
    /// Failure or uncertainty code.
    pub error_code: Option<String>,
    /// Failure or uncertainty explanation.
    pub error_message: Option<String>,
}

/// One completion of a batch for [`Datastore::call_complete_plain_many`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlainCompletion<'a> {
    /// The call.
    pub id: Uuid,
    /// The states it may leave.
    pub from: &'a [CallState],
    /// What it records.
    pub completion: &'a StoredCompletion,
}

/// The guarded completion update: `$1` the call, `$runner` the runner (`$2`, or an expression
/// that finds it), `$3` its epoch (still the runner's), `$4` the states it may leave, `$5`…`$9`
/// what it records; `$guard` adds conditions. Readers waiting for the call are the caller's to
/// wake once it committed.
macro_rules! complete_call {
    ($runner:literal, $guard:expr) => {
        concat!(
            "UPDATE calls SET state = $5, result = $6, result_truncated = $7, error_code = $8,
                 error_message = $9, finished_at = now()
             WHERE id = $1 AND runner_ref = ",
            $runner,
            " AND lease_epoch = $3 AND state = ANY($4)
               AND EXISTS (SELECT 1 FROM runner_leases r WHERE r.runner_ref = ",
            $runner,
            " AND r.epoch = $3) ",
            $guard,
            " RETURNING *"
        )
    };
}

/// The CTE `receipt` that stores a device's receipt `$11` (when it is not NULL) for the call
/// the CTE `done` completed, answered `recorded`, unless that receipt id is stored already.
macro_rules! store_receipt {
    () => {
        "receipt AS (
             INSERT INTO receipts (receipt_id, call_id, runner_ref, epoch, outcome, answer, applied)
             SELECT $11, id, runner_ref, lease_epoch, state, 'recorded', true FROM done WHERE $11::uuid IS NOT NULL
             ON CONFLICT (receipt_id) DO NOTHING
             RETURNING receipt_id)"
    };
}

/// The conditions under which a completion implies nothing beside its state change: a tool
/// call (not a receipt lookup), its evidence not erased, and not captured (`$capturable`: the
/// SQL saying whether capture would take this outcome). Shared by the single and the batched
/// plain completion.
macro_rules! plain_guard {
    ($capturable:literal) => {
        concat!(
            "AND kind = 'tool' AND evidence_erased_at IS NULL
             AND NOT (",
            $capturable,
            " AND EXISTS (SELECT 1 FROM capture_policies p
                          WHERE p.workspace_id = calls.workspace_id
                            AND p.capture_managed_tool_results))"
        )
    };
}

/// Which calls of a batch [`Datastore::call_insert_many`] inserts leased to a waiting lease:
/// the epoch of that lease, by the call's place in the batch (none: queued), and the central
/// credential bindings of their target digest (as in `target_digest!`).
#[derive(Clone, Copy, Debug)]
pub struct HandedTo<'a> {
    /// Each call's lease epoch, in the batch's order.
    pub epochs: &'a [Option<i64>],
    /// The central runner's credential bindings.
    pub bindings: &'a Value,
}

/// What [`Datastore::call_insert_handed`] inserted: the call and, when it was inserted
/// leased, what its lease reads.
#[derive(Debug)]
pub struct HandedRow {
    /// The inserted call.
    pub call: CallRow,
    /// Set when the call was inserted leased.
    pub leased: Option<LeasedRow>,
}

impl<'r> sqlx::FromRow<'r, PgRow> for HandedRow {
    fn from_row(row: &'r PgRow) -> Result<Self, sqlx::Error> {
        let call = <CallRow as sqlx::FromRow<_>>::from_row(row)?;
        let leased = if call.state == CallState::Leased.as_str() {
            // The lease reads the connection's revision as it is now, as the lease does;
            // the call's own column keeps the one it was submitted under.
            let mut leased = <LeasedRow as sqlx::FromRow<_>>::from_row(row)?;
            leased.connection_revision = row.try_get("connection_revision_now")?;
            Some(leased)
        } else {
            None
        };
        Ok(Self { call, leased })
    }
}

/// Binds a new call's columns as `$1`…`$17`, in the order of [`insert_call!`] (its state
/// and kind aside), to an insert of it.
pub(super) fn bind_new_call<'q, O>(
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    call: &'q NewCall,
    origin: CallOrigin,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>
where
    O: for<'r> sqlx::FromRow<'r, PgRow>,
{
    query
        .bind(call.id)
        .bind(call.workspace_id)
        .bind(call.request_id)
        .bind(&call.payload_digest)
        .bind(call.profile_id)
        .bind(call.connection_id)
        .bind(call.connection_revision)
        .bind(call.environment_id)
        .bind(&call.tool_name)
        .bind(Json(&call.arguments))
        .bind(&call.client_session_id)
        .bind(call.timeout_seconds)
        .bind(&call.runner_ref)
        .bind(call.created_by)
        .bind(origin.operation_id)
        .bind(origin.device_id)
        .bind(origin.lookup_of)
}

/// [`lineage_columns!`] in a completion statement whose CTE `receipt` stores a device's receipt
/// beside the call.
macro_rules! recorded_lineage {
    () => {
        lineage_columns!("|| ARRAY(SELECT receipt_id FROM receipt)")
    };
}

/// The row of [`Datastore::call_complete_plain`].
#[derive(sqlx::FromRow)]
struct PlainCompleted {
    #[sqlx(flatten)]
    settled: SettledCall,
    receipt_stored: bool,
}

/// A completion recorded by [`Datastore::call_complete_plain`].
pub(super) struct PlainRecorded {
    /// The call as recorded; its lineage is empty unless `lineage_read`.
    settled: SettledCall,
    /// Whether the statement read the call's lineage (a reader here waits for the call).
    lineage_read: bool,
    /// Whether the device's receipt was stored with it.
    pub(super) receipt_stored: bool,
}

impl PlainRecorded {
    /// The call for the readers waiting here, when its lineage was read.
    fn for_readers(self) -> Option<SettledCall> {
        self.lineage_read.then_some(self.settled)
    }

    /// [`PlainRecorded::for_readers`], and the call.
    pub(super) fn split(self) -> (Option<SettledCall>, CallRow) {
        if self.lineage_read {
            let call = self.settled.call.clone();
            (Some(self.settled), call)
        } else {
            (None, self.settled.call)
        }
    }
}

/// [`complete_call!`] with its parameters bound; `$2` is the runner reference, or what the
/// statement finds the runner by.
fn completion_update<'q, O, R>(
    sql: &'static str,
    id: Uuid,
    runner: R,
    epoch: i64,
    from: &[CallState],
    completion: &'q StoredCompletion,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>
where
    O: for<'r> sqlx::FromRow<'r, PgRow>,
    R: 'q + Send + sqlx::Encode<'q, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    let from: Vec<&'static str> = from.iter().map(|s| s.as_str()).collect();
    sqlx::query_as(sql)
        .bind(id)
        .bind(runner)
        .bind(epoch)
        .bind(from)
        .bind(completion.state.as_str())
        .bind(completion.result.as_ref().map(Json))
        .bind(completion.result_truncated)
        .bind(&completion.error_code)
        .bind(&completion.error_message)
}

impl StoredCompletion {
    /// Whether capture takes this outcome (a result the tool answered), when it is on.
    pub(super) fn capturable(&self) -> bool {
        matches!(self.state, CallState::Succeeded | CallState::ToolError)
    }
}

impl Datastore {
    /// Inserts a call unless one with the same (workspace, request_id) exists. Returns the
    /// inserted row, or `None` when the request_id was taken (by an earlier or concurrent
    /// submission).
    pub async fn call_insert(&self, call: &NewCall) -> Result<Option<CallRow>, sqlx::Error> {
        self.call_insert_from(call, CallOrigin::default()).await
    }

    /// [`Datastore::call_insert`], recording where the call came from (its operation, the
    /// device that submitted it, or the unknown call a lookup looks up). Every call is
    /// inserted here.
    pub async fn call_insert_from(
        &self,
        call: &NewCall,
        origin: CallOrigin,
    ) -> Result<Option<CallRow>, sqlx::Error> {
        // One statement, one commit; the call's runner is woken once it committed, and only
        // if it inserted.
        let inserted: Option<CallRow> = bind_new_call(
            sqlx::query_as(concat!(
                "WITH inserted AS (",
                insert_call!(),
                "
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'queued', $13, $14, $15, $16,
                     CASE WHEN $17::uuid IS NULL THEN 'tool' ELSE 'lookup' END, $17)
                 ON CONFLICT (workspace_id, request_id) DO NOTHING
                 RETURNING *)
             SELECT * FROM inserted"
            )),
            call,
            origin,
        )
        .fetch_optional(&self.pool)
        .await?;
        if let Some(call) = &inserted {
            self.announce_queued(call);
        }
        Ok(inserted)
    }

    /// [`Datastore::call_insert_from`] for a call handed to a lease that waits for it: the
    /// call is inserted already leased under `epoch` — with the target it is dispatched to
    /// recorded, as the lease statement records it (`bindings` as in `target_digest!`) — if
    /// `epoch` is the runner's live lease, else queued (and announced) as any other. One
    /// statement, one commit: the insert's and the lease's.
    ///
    /// `None` when the request_id was taken; otherwise the row and, if it was leased, what
    /// the lease's checks and the runner's work item need.
    pub async fn call_insert_handed(
        &self,
        call: &NewCall,
        origin: CallOrigin,
        epoch: i64,
        bindings: &Value,
    ) -> Result<Option<HandedRow>, sqlx::Error> {
        let inserted: Option<HandedRow> = bind_new_call(
            sqlx::query_as(concat!(
                "WITH ",
                handed_target!("$6", "$13", "$18", "$19"),
                ", inserted AS (",
                insert_handed_call!(),
                "
                     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,
                         CASE WHEN t.connector_id IS NULL THEN 'queued' ELSE 'leased' END, $13, $14, $15, $16,
                         CASE WHEN $17::uuid IS NULL THEN 'tool' ELSE 'lookup' END, $17,
                         ",
                handed_lease_values!("$18::int8"),
                "
                     FROM (SELECT 1) AS one LEFT JOIN target t ON true
                     ON CONFLICT (workspace_id, request_id) DO NOTHING
                     RETURNING *)
             SELECT i.*, ",
            handed_read_columns!(),
            "
             FROM inserted i LEFT JOIN target t ON i.state = 'leased'"
            )),
            call,
            origin,
        )
        .bind(epoch)
        .bind(Json(bindings))
        .fetch_optional(&self.pool)
        .await?;
        if let Some(HandedRow { call, leased: None }) = &inserted {
            self.announce_queued(call);
        }
        Ok(inserted)
    }

    /// Puts a handed-off call that never reached its lease back in the queue (and announces
    /// it), unless it moved on meanwhile. Returns whether it did.
    pub async fn call_requeue_handed(
        &self,
        id: Uuid,
        runner_ref: &str,
        epoch: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE calls SET state = 'queued', lease_epoch = NULL, leased_at = NULL
             WHERE id = $1 AND state = 'leased' AND lease_epoch = $2",
        )
        .bind(id)
        .bind(epoch)
        .execute(&self.pool)
        .await?;
        let requeued = done.rows_affected() == 1;
        if requeued {
            self.announce_requeued(runner_ref);
        }
        Ok(requeued)
    }

    /// [`Datastore::call_insert_from`] for several calls, in one statement (one commit, one
    /// WAL flush): each answer, in order, is the inserted row or `None` when its request_id
    /// was taken (by an earlier submission, a concurrent one, or an earlier one of the same
    /// batch). With `handed`, the calls it gives an epoch are inserted leased, as
    /// [`Datastore::call_insert_handed`] inserts one, when that epoch is their runner's live
    /// lease; queued calls are announced. A lone call takes the single-row statements.
    pub async fn call_insert_many(
        &self,
        calls: &[(NewCall, CallOrigin)],
        handed: Option<HandedTo<'_>>,
    ) -> Result<Vec<Option<HandedRow>>, sqlx::Error> {
        let epoch = |at: usize| handed.and_then(|h| h.epochs.get(at).copied().flatten());
        if let [(call, origin)] = calls {
            return Ok(vec![match (epoch(0), handed) {
                (Some(epoch), Some(handed)) => {
                    self.call_insert_handed(call, *origin, epoch, handed.bindings)
                        .await?
                }
                _ => self
                    .call_insert_from(call, *origin)
                    .await?
                    .map(|call| HandedRow { call, leased: None }),
            }]);
        }
        // One order of the unique keys for every batch, so that two replicas' batches that
        // share request_ids wait for each other instead of deadlocking; stable, so that of two
        // calls of the batch with one request_id the first is inserted.
        let mut order: Vec<(usize, &(NewCall, CallOrigin))> = calls.iter().enumerate().collect();
        order.sort_by_key(|(_, (call, _))| (call.workspace_id, call.request_id));
        let column = |get: fn(&NewCall) -> Uuid| -> Vec<Uuid> {
            order.iter().map(|(_, (call, _))| get(call)).collect()
        };
        let origin = |get: fn(&CallOrigin) -> Option<Uuid>| -> Vec<Option<Uuid>> {
            order.iter().map(|(_, (_, origin))| get(origin)).collect()
        };
        let rows: Vec<HandedRow> = sqlx::query_as(concat!(
            "WITH fresh AS (
                 SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::bytea[], $5::uuid[],
                             $6::uuid[], $7::int8[], $8::uuid[], $9::text[], $10::jsonb[],
                             $11::text[], $12::int4[], $13::text[], $14::uuid[], $15::uuid[],
                             $16::uuid[], $17::uuid[], $18::int8[])
                      WITH ORDINALITY
                      AS n(id, workspace_id, request_id, payload_digest, profile_id, connection_id,
                           connection_revision, environment_id, tool_name, arguments, client_session_id,
                           timeout_seconds, runner_ref, created_by, operation_id, device_id, lookup_of,
                           epoch, position)), ",
            handed_target!(
                "n.id AS call_id, ",
                "fresh n, ",
                "n.connection_id",
                "n.runner_ref",
                "n.epoch",
                "$19"
            ),
            ", inserted AS (",
            insert_handed_call!(),
            "
                 SELECT n.id, n.workspace_id, n.request_id, n.payload_digest, n.profile_id, n.connection_id,
                     n.connection_revision, n.environment_id, n.tool_name, n.arguments, n.client_session_id,
                     n.timeout_seconds, CASE WHEN t.connector_id IS NULL THEN 'queued' ELSE 'leased' END,
                     n.runner_ref, n.created_by, n.operation_id, n.device_id,
                     CASE WHEN n.lookup_of IS NULL THEN 'tool' ELSE 'lookup' END, n.lookup_of,
                     ",
                handed_lease_values!("n.epoch"),
                "
                 FROM fresh n LEFT JOIN target t ON t.call_id = n.id
                 ORDER BY n.position
                 ON CONFLICT (workspace_id, request_id) DO NOTHING
                 RETURNING *)
             SELECT i.*, ",
            handed_read_columns!(),
            "
             FROM inserted i LEFT JOIN target t ON t.call_id = i.id AND i.state = 'leased'"
        ))
        .bind(column(|c| c.id))
        .bind(column(|c| c.workspace_id))
        .bind(column(|c| c.request_id))
        .bind(order.iter().map(|(_, (c, _))| c.payload_digest.as_slice()).collect::<Vec<_>>())
        .bind(column(|c| c.profile_id))
        .bind(column(|c| c.connection_id))
        .bind(order.iter().map(|(_, (c, _))| c.connection_revision).collect::<Vec<_>>())
        .bind(column(|c| c.environment_id))
        .bind(order.iter().map(|(_, (c, _))| c.tool_name.as_str()).collect::<Vec<_>>())
        .bind(order.iter().map(|(_, (c, _))| Json(&c.arguments)).collect::<Vec<_>>())
        .bind(order.iter().map(|(_, (c, _))| c.client_session_id.as_deref()).collect::<Vec<_>>())
        .bind(order.iter().map(|(_, (c, _))| c.timeout_seconds).collect::<Vec<_>>())
        .bind(order.iter().map(|(_, (c, _))| c.runner_ref.as_str()).collect::<Vec<_>>())
        .bind(column(|c| c.created_by))
        .bind(origin(|o| o.operation_id))
        .bind(origin(|o| o.device_id))
        .bind(origin(|o| o.lookup_of))
        .bind(order.iter().map(|(at, _)| epoch(*at)).collect::<Vec<_>>())
        .bind(Json(handed.map_or(&Value::Null, |h| h.bindings)))
        .fetch_all(&self.pool)
        .await?;
        let mut inserted: HashMap<Uuid, HandedRow> =
            rows.into_iter().map(|row| (row.call.id, row)).collect();
        for row in inserted.values() {
            if row.leased.is_none() {
                self.announce_queued(&row.call);
            }
        }
        Ok(calls
            .iter()
            .map(|(call, _)| inserted.remove(&call.id))
            .collect())
    }

    /// The call with this request_id in a workspace.
    pub async fn call_find_by_request(
        &self,
        workspace: Uuid,
        request_id: Uuid,
    ) -> Result<Option<CallRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM calls WHERE workspace_id = $1 AND request_id = $2")
            .bind(workspace)
            .bind(request_id)
            .fetch_optional(&self.pool)
            .await
    }

    /// A call of a workspace.
    pub async fn call_get(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> Result<Option<CallRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM calls WHERE workspace_id = $1 AND id = $2")
            .bind(workspace)
            .bind(id)
            .fetch_optional(&self.pool)
            .await
    }

    /// The newest calls of a workspace on profiles the user currently holds Use on.
    pub async fn call_list_usable(
        &self,
        workspace: Uuid,
        user: Uuid,
        limit: i64,
    ) -> Result<Vec<CallRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT c.* FROM calls c WHERE c.workspace_id = $1 AND EXISTS (
                 SELECT 1 FROM profile_grants g
                 WHERE g.profile_id = c.profile_id AND g.user_id = $2 AND g.grant_kind = 'use')
             ORDER BY c.created_at DESC LIMIT $3",
        )
        .bind(workspace)
        .bind(user)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
    }

    /// Leases up to `max` queued calls of a runner under `epoch`, oldest first among those
    /// submitted at or after `since` (all when `None`), skipping rows other transactions hold;
    /// `None` (leasing nothing) unless `epoch` is the runner's live lease.
    ///
    /// One statement per batch: it records the target each call is dispatched to (connector,
    /// its revision, the target digest; `bindings` as in `target_digest!`) and returns what the
    /// runner needs and what the lease's checks read (the connector, a lookup's unknown call).
    /// It answers at least one row, saying whether the lease is live, so that an empty answer
    /// needs no second look to tell a fenced runner from an empty queue. It names
    /// `calls_queued`'s predicate (no epoch, no finish: what a queued call is, checked by
    /// `calls_queued_shape`) so that the index answers it.
    pub async fn call_lease(
        &self,
        runner_ref: &str,
        epoch: i64,
        max: i64,
        since: Option<DateTime<Utc>>,
        bindings: &Value,
    ) -> Result<Option<Vec<LeasedRow>>, sqlx::Error> {
        let rows = sqlx::query(concat!(
            "WITH live AS (
                 SELECT EXISTS (SELECT 1 FROM runner_leases r
                                WHERE r.runner_ref = $1 AND r.epoch = $2 AND r.expires_at > now()) AS live),
             picked AS (
                 SELECT id, connection_id, parent_call_id FROM calls
                 WHERE runner_ref = $1 AND state = 'queued' AND lease_epoch IS NULL AND finished_at IS NULL
                   AND (SELECT live FROM live)
                   AND created_at >= COALESCE($5::timestamptz, '-infinity')
                 ORDER BY created_at LIMIT $3
                 FOR NO KEY UPDATE SKIP LOCKED),
             leased AS (
                 UPDATE calls c SET state = 'leased', lease_epoch = $2, leased_at = now(),
                     connector_id = x.id, connector_revision = x.revision,
                     target_digest = ",
            target_digest!("$4"),
            "
                 FROM picked
                 JOIN connections k ON k.id = picked.connection_id
                 JOIN connectors x ON x.id = k.connector_id
                 LEFT JOIN calls p ON p.id = picked.parent_call_id
                 WHERE c.id = picked.id
                 RETURNING c.id, c.created_at, c.request_id, c.connection_id, c.tool_name, c.arguments, c.timeout_seconds,
                     c.client_session_id, c.target_digest, c.parent_call_id, k.revision AS connection_revision,
                     x.id AS connector_id, x.name AS connector_name, x.transport AS connector_transport,
                     x.command AS connector_command, x.args AS connector_args, x.env_names AS connector_env_names,
                     x.url AS connector_url, x.revision AS connector_revision,
                     x.approved_revision AS connector_approved_revision, x.created_at AS connector_created_at,
                     p.state AS parent_state, p.target_digest AS parent_target_digest,
                     p.evidence_erased_at AS parent_erased_at)
             SELECT live.live AS runner_live, leased.* FROM live LEFT JOIN leased ON true"
        ))
        .bind(runner_ref)
        .bind(epoch)
        .bind(max)
        .bind(Json(bindings))
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        let live = match rows.first() {
            Some(row) => row.try_get("runner_live")?,
            None => false,
        };
        if !live {
            return Ok(None);
        }
        let mut leased = Vec::with_capacity(rows.len());
        for row in &rows {
            // Nothing leased: the one row says only that the lease is live.
            if row.try_get::<Option<Uuid>, _>("id")?.is_some() {
                leased.push(<LeasedRow as sqlx::FromRow<_>>::from_row(row)?);
            }
        }
        Ok(Some(leased))
    }

    /// Whether a call was dispatched to the target its connection reaches now (`bindings` as
    /// in `target_digest!`): what a receipt lookup for it needs. False for a call never leased.
    pub async fn call_target_is_current(
        &self,
        id: Uuid,
        bindings: &Value,
    ) -> Result<bool, sqlx::Error> {
        let current: Option<bool> = sqlx::query_scalar(concat!(
            "SELECT COALESCE(c.target_digest = ",
            target_digest!("$2"),
            ", false)
             FROM calls c JOIN connections k ON k.id = c.connection_id JOIN connectors x ON x.id = k.connector_id
             WHERE c.id = $1"
        ))
        .bind(id)
        .bind(Json(bindings))
        .fetch_optional(&self.pool)
        .await?;
        Ok(current.unwrap_or(false))
    }

    /// The start ack: `leased` → `running`, only under the runner's live lease epoch.
    /// Returns whether it won. Idempotent: a runner that lost the first answer and asks again
    /// under the same epoch is told yes again (the start time is kept).
    pub async fn call_start(
        &self,
        id: Uuid,
        runner_ref: &str,
        epoch: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(start_call!("$2"))
            .bind(id)
            .bind(runner_ref)
            .bind(epoch)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// A device's start ack in one statement: finds the device holding the credential with
    /// this hash and, unless it is revoked, makes [`Datastore::call_start`]'s update under its
    /// runner reference. `None` when no device holds the credential.
    pub async fn call_start_by_device(
        &self,
        id: Uuid,
        credential_hash: &[u8],
        epoch: i64,
    ) -> Result<Option<DeviceStart>, sqlx::Error> {
        sqlx::query_as(concat!(
            "WITH device AS (",
            device_by_credential!("$2"),
            "),
             started AS (",
            start_call!("(SELECT runner_ref FROM device WHERE revoked_at IS NULL)"),
            " RETURNING id)
             SELECT d.*, EXISTS (SELECT 1 FROM started) AS started FROM device d"
        ))
        .bind(id)
        .bind(credential_hash)
        .bind(epoch)
        .fetch_optional(&self.pool)
        .await
    }

    /// [`Datastore::call_start`] for several calls of one runner and epoch, in one statement
    /// (one commit, one WAL flush). Returns the ids it started (again); the others were not.
    ///
    /// The states a call may leave come per row, as in the completion batch, so the statement
    /// finds each call by primary key: with the states as a constant (or a parameter, which a
    /// custom plan sees through) it matched `calls_in_flight`'s predicate (on `state` until
    /// migration 0011) and was planned on that index, and with the xmin horizon held the index
    /// fills with dead entries of the epoch — in the full benchmark's soak such a batch read
    /// 6,700 blocks (6 ms) and the held phase fell to 355 of the 500 calls/s asked. Nor does
    /// it say `finished_at IS NULL`, the index's predicate now.
    pub async fn call_start_many(
        &self,
        ids: &[Uuid],
        runner_ref: &str,
        epoch: i64,
    ) -> Result<Vec<Uuid>, sqlx::Error> {
        if let [id] = ids {
            let started = self.call_start(*id, runner_ref, epoch).await?;
            return Ok(if started { vec![*id] } else { Vec::new() });
        }
        // `leased`, or `running` again for a runner that lost the first answer.
        let from = vec!["leased,running"; ids.len()];
        sqlx::query_scalar(
            "UPDATE calls SET state = 'running', started_at = COALESCE(started_at, now())
             FROM unnest($1::uuid[], $4::text[]) AS i(id, from_states)
             WHERE calls.id = ANY($1) AND calls.id = i.id
               AND calls.state = ANY(string_to_array(i.from_states, ','))
               AND calls.runner_ref = $2 AND calls.lease_epoch = $3
               AND EXISTS (SELECT 1 FROM runner_leases r
                           WHERE r.runner_ref = $2 AND r.epoch = $3 AND r.expires_at > now())
             RETURNING calls.id",
        )
        .bind(ids)
        .bind(runner_ref)
        .bind(epoch)
        .bind(from)
        .fetch_all(&self.pool)
        .await
    }

    /// [`Datastore::call_complete_plain`] for several completions of one runner and epoch (none
    /// with a device receipt), in one statement (a lone one by `call_complete_plain` itself).
    /// Returns the ids it recorded and announces them settled; the others recorded nothing and
    /// are the caller's to record one by one.
    pub(crate) async fn call_complete_plain_many(
        &self,
        runner_ref: &str,
        epoch: i64,
        completions: &[PlainCompletion<'_>],
    ) -> Result<Vec<Uuid>, sqlx::Error> {
        // A lone completion (every one on an idle server) takes the single-row statement:
        // PostgreSQL plans the batch statement anew for nearly every execution (its plan for
        // arrays of unknown length looks dearer than one for the array at hand), the
        // single-row one once per connection.
        if let [one] = completions {
            let done = self
                .call_complete_plain(one.id, runner_ref, epoch, one.from, one.completion, None)
                .await?;
            let Some(recorded) = done else {
                return Ok(Vec::new());
            };
            self.announce_settled(one.id, recorded.for_readers());
            return Ok(vec![one.id]);
        }
        let mut completions: Vec<&PlainCompletion<'_>> = completions.iter().collect();
        // One lock order for every batch.
        completions.sort_unstable_by_key(|c| c.id);
        let ids: Vec<Uuid> = completions.iter().map(|c| c.id).collect();
        let from: Vec<String> = completions
            .iter()
            .map(|c| {
                let names: Vec<&str> = c.from.iter().map(|s| s.as_str()).collect();
                names.join(",")
            })
            .collect();
        let states: Vec<&str> = completions
            .iter()
            .map(|c| c.completion.state.as_str())
            .collect();
        let results: Vec<Option<Json<&Value>>> = completions
            .iter()
            .map(|c| c.completion.result.as_ref().map(Json))
            .collect();
        let truncated: Vec<bool> = completions
            .iter()
            .map(|c| c.completion.result_truncated)
            .collect();
        let codes: Vec<Option<&str>> = completions
            .iter()
            .map(|c| c.completion.error_code.as_deref())
            .collect();
        let messages: Vec<Option<&str>> = completions
            .iter()
            .map(|c| c.completion.error_message.as_deref())
            .collect();
        let capturable: Vec<bool> = completions
            .iter()
            .map(|c| c.completion.capturable())
            .collect();
        let recorded: Vec<Uuid> = sqlx::query_scalar(concat!(
            "UPDATE calls SET state = i.state, result = i.result, result_truncated = i.truncated,
                 error_code = i.code, error_message = i.message, finished_at = now()
             FROM unnest($3::uuid[], $4::text[], $5::text[], $6::jsonb[], $7::bool[], $8::text[],
                         $9::text[], $10::bool[])
                  AS i(id, from_states, state, result, truncated, code, message, capturable)
             WHERE calls.id = ANY($3) AND calls.id = i.id
               AND calls.runner_ref = $1 AND calls.lease_epoch = $2
               AND calls.state = ANY(string_to_array(i.from_states, ','))
               AND EXISTS (SELECT 1 FROM runner_leases r WHERE r.runner_ref = $1 AND r.epoch = $2) ",
            plain_guard!("i.capturable"),
            " RETURNING calls.id"
        ))
        .bind(runner_ref)
        .bind(epoch)
        .bind(ids)
        .bind(from)
        .bind(states)
        .bind(results)
        .bind(truncated)
        .bind(codes)
        .bind(messages)
        .bind(capturable)
        .fetch_all(&self.pool)
        .await?;
        for id in &recorded {
            self.announce_settled(*id, None);
        }
        Ok(recorded)
    }

    /// Records a completion reported under `epoch`, moving the call from one of `from` to
    /// `completion.state`, on `conn` (inside the caller's transaction, which records what
    /// the completion implies beside it). Returns the updated call, or `None` when a stale
    /// epoch or a call that moved on recorded nothing.
    pub(super) async fn call_complete_on(
        conn: &mut sqlx::PgConnection,
        id: Uuid,
        runner_ref: &str,
        epoch: i64,
        from: &[CallState],
        completion: &StoredCompletion,
    ) -> Result<Option<CallRow>, sqlx::Error> {
        completion_update(
            complete_call!("$2", ""),
            id,
            runner_ref,
            epoch,
            from,
            completion,
        )
        .fetch_optional(conn)
        .await
    }

    /// Which text of a completion statement to run for call `id`: `reading`, which reads the
    /// call's lineage, when a reader in this process waits for the call (the bool), otherwise
    /// `not_reading`.
    fn completion_text(
        &self,
        id: Uuid,
        reading: &'static str,
        not_reading: &'static str,
    ) -> (bool, &'static str) {
        let read = self.notices.waited_for(id);
        (read, if read { reading } else { not_reading })
    }

    /// Records a completion that implies nothing beside its state change, as one statement
    /// (its own transaction): a tool call — not a receipt
    /// lookup, so no observation and no erased parent — whose workspace does not capture it
    /// (or whose outcome capture does not take). A device's `receipt` is stored with it,
    /// answered `recorded`, unless that receipt id is stored already (the bool says whether
    /// it was stored). Returns the call as recorded, with its lineage when a reader in this
    /// process waits for it, or `None`, recording nothing, for any other completion as for a
    /// stale epoch or a call that moved on: the caller then records it in a transaction with
    /// what it implies.
    pub(super) async fn call_complete_plain(
        &self,
        id: Uuid,
        runner_ref: &str,
        epoch: i64,
        from: &[CallState],
        completion: &StoredCompletion,
        receipt: Option<Uuid>,
    ) -> Result<Option<PlainRecorded>, sqlx::Error> {
        macro_rules! plain_completion {
            ($lineage:expr) => {
                concat!(
                    "WITH done AS (",
                    complete_call!("$2", plain_guard!("$10")),
                    "), ",
                    store_receipt!(),
                    " SELECT c.*, EXISTS (SELECT 1 FROM receipt) AS receipt_stored, ",
                    $lineage,
                    " FROM done c"
                )
            };
        }
        let (read_lineage, sql) = self.completion_text(
            id,
            plain_completion!(recorded_lineage!()),
            plain_completion!(unread_lineage_columns!()),
        );
        let done: Option<PlainCompleted> =
            completion_update(sql, id, runner_ref, epoch, from, completion)
                .bind(completion.capturable())
                .bind(receipt)
                .fetch_optional(&self.pool)
                .await?;
        Ok(done.map(|done| PlainRecorded {
            settled: done.settled,
            lineage_read: read_lineage,
            receipt_stored: done.receipt_stored,
        }))
    }

    /// [`Datastore::call_complete_plain`] for a device's upload in the statement that checks
    /// its credential: it finds the device by the credential's hash and, unless the device is
    /// revoked or `receipt` was uploaded before, records the completion under its runner
    /// reference with the receipt. `None` when no device holds the credential; `completed`
    /// false when nothing was recorded (any completion `call_complete_plain` would not record,
    /// a revoked device, a receipt seen before): the caller then looks at why.
    pub async fn call_complete_plain_by_device(
        &self,
        id: Uuid,
        credential_hash: &[u8],
        epoch: i64,
        from: &[CallState],
        completion: &StoredCompletion,
        receipt: Uuid,
    ) -> Result<Option<DeviceCompletion>, sqlx::Error> {
        macro_rules! device_completion {
            ($lineage:expr) => {
                concat!(
                    "WITH device AS (",
                    device_by_credential!("$2"),
                    "),
                     done AS (",
                    complete_call!(
                        "(SELECT runner_ref FROM device WHERE revoked_at IS NULL)",
                        concat!(
                            plain_guard!("$10"),
                            " AND NOT EXISTS (SELECT 1 FROM receipts WHERE receipt_id = $11)"
                        )
                    ),
                    "), ",
                    store_receipt!(),
                    " SELECT c.*, ",
                    $lineage,
                    ", d.id AS device_id, d.workspace_id AS device_workspace_id,
                         d.profile_id AS device_profile_id, d.name AS device_name,
                         d.approved_by AS device_approved_by, d.created_at AS device_created_at,
                         d.last_seen_at AS device_last_seen_at, d.revoked_at AS device_revoked_at
                     FROM device d LEFT JOIN done c ON true"
                )
            };
        }
        let (read_lineage, sql) = self.completion_text(
            id,
            device_completion!(recorded_lineage!()),
            device_completion!(unread_lineage_columns!()),
        );
        let row: Option<DeviceCompletionRow> =
            completion_update(sql, id, credential_hash, epoch, from, completion)
                .bind(completion.capturable())
                .bind(receipt)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|row| {
            if let Some(settled) = row.settled {
                self.announce_settled(id, read_lineage.then_some(settled));
            }
            row.found
        }))
    }

    /// Fails a call that was leased but can certainly not run (e.g. its connector lost its
    /// approval): `leased` → `failed`, nothing was sent.
    pub async fn call_fail_leased(
        &self,
        id: Uuid,
        epoch: i64,
        code: &str,
        message: &str,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE calls SET state = 'failed', error_code = $3, error_message = $4, finished_at = now()
             WHERE id = $1 AND state = 'leased' AND lease_epoch = $2",
        )
        .bind(id)
        .bind(epoch)
        .bind(code)
        .bind(message)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// What a cancel request changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelEffect {
    /// `queued`/`leased` → `cancelled`: nothing had been sent.
    Cancelled,
    /// The call is running: cancellation was requested from its runner.
    Requested,
    /// The call was already finished (or unknown); nothing changed.
    Nothing,
}

impl Datastore {
    /// Cancels a call as far as its state allows, each step one guarded update.
    pub async fn call_cancel(
        &self,
        workspace: Uuid,
        id: Uuid,
    ) -> Result<CancelEffect, sqlx::Error> {
        let cancelled = sqlx::query(
            "UPDATE calls SET state = 'cancelled', finished_at = now(), error_code = 'cancelled',
                 error_message = 'cancelled before it was sent'
             WHERE workspace_id = $1 AND id = $2 AND state IN ('queued', 'leased')",
        )
        .bind(workspace)
        .bind(id)
        .execute(&self.pool)
        .await?;
        if cancelled.rows_affected() == 1 {
            return Ok(CancelEffect::Cancelled);
        }
        let runner: Option<String> = sqlx::query_scalar(
            "UPDATE calls SET cancel_requested_at = COALESCE(cancel_requested_at, now())
             WHERE workspace_id = $1 AND id = $2 AND state = 'running' RETURNING runner_ref",
        )
        .bind(workspace)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        match runner {
            Some(runner) => {
                sqlx::query("SELECT pg_notify('switchyard_cancel', $1)")
                    .bind(serde_json::json!({"runner": runner, "call_id": id}).to_string())
                    .execute(&self.pool)
                    .await?;
                Ok(CancelEffect::Requested)
            }
            None => Ok(CancelEffect::Nothing),
        }
    }

    /// Expires calls queued longer than `max_wait`. Returns how many.
    pub async fn call_expire_queued(
        &self,
        max_wait: std::time::Duration,
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE calls SET state = 'expired', finished_at = now(), error_code = 'queue_expired',
                 error_message = 'no runner took the call in time'
             WHERE state = 'queued' AND lease_epoch IS NULL AND finished_at IS NULL
               AND created_at < now() - make_interval(secs => $1)",
        )
        .bind(max_wait.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    /// Settles calls held under expired runner leases — all of them, or those that expired
    /// lately: leased-but-unstarted calls go back to the queue (nothing was sent), started
    /// ones become `unknown` (they may have run). Returns (requeued, unknown).
    pub async fn call_sweep_lost_leases(
        &self,
        leases: ExpiredLeases,
    ) -> Result<(u64, u64), sqlx::Error> {
        let (requeue, unknown) = match leases {
            ExpiredLeases::All => (requeue_lost!(""), unknown_lost!("")),
            ExpiredLeases::Recent => (
                requeue_lost!(recent_expiry!()),
                unknown_lost!(recent_expiry!()),
            ),
        };
        let requeued = sqlx::query(requeue).execute(&self.pool).await?;
        let unknown = sqlx::query(unknown).execute(&self.pool).await?;
        if requeued.rows_affected() > 0 {
            self.announce_requeued(ANY_RUNNER);
        }
        Ok((requeued.rows_affected(), unknown.rows_affected()))
    }

    /// Erases inputs and results of calls finished longer than `retention` ago, keeping the
    /// minimal disposition (state, error code, times). Returns how many.
    pub async fn call_sweep_retention(
        &self,
        retention: std::time::Duration,
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE calls SET arguments = NULL, result = NULL, error_message = NULL, retention_expired_at = now()
             WHERE retention_expired_at IS NULL AND finished_at IS NOT NULL
               AND finished_at < now() - make_interval(secs => $1)",
        )
        .bind(retention.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}

impl Datastore {
    /// Running calls of a runner whose cancellation was requested.
    pub async fn call_cancel_requested(&self, runner_ref: &str) -> Result<Vec<Uuid>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT id FROM calls WHERE runner_ref = $1 AND state = 'running' AND cancel_requested_at IS NOT NULL
               AND lease_epoch IS NOT NULL AND finished_at IS NULL",
        )
        .bind(runner_ref)
        .fetch_all(&self.pool)
        .await
    }
}

/// Which calls a page of the calls list shows (all conditions must hold).
#[derive(Clone, Debug, Default)]
pub struct CallFilter {
    /// Only calls in this state.
    pub state: Option<CallState>,
    /// Only calls on this connection.
    pub connection: Option<Uuid>,
    /// Only calls placed on this runner.
    pub runner: Option<String>,
    /// Only calls submitted at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only calls submitted before this time.
    pub until: Option<DateTime<Utc>>,
}

/// Where a page of calls starts (keyset pagination on `(created_at, id)`, newest first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PageFrom {
    /// The newest calls.
    #[default]
    Newest,
    /// Calls older than this one.
    Before(Uuid),
    /// Calls newer than this one.
    After(Uuid),
}

/// The filtered calls of a workspace on profiles the user holds Use on, then `$8`-cursor
/// condition and order appended.
macro_rules! select_call_page {
    ($cursor:literal) => {
        concat!(
            "SELECT c.* FROM calls c WHERE c.workspace_id = $1 AND EXISTS (
                 SELECT 1 FROM profile_grants g
                 WHERE g.profile_id = c.profile_id AND g.user_id = $2 AND g.grant_kind = 'use')
               AND ($3::text IS NULL OR c.state = $3)
               AND ($4::uuid IS NULL OR c.connection_id = $4)
               AND ($5::text IS NULL OR c.runner_ref = $5)
               AND ($6::timestamptz IS NULL OR c.created_at >= $6)
               AND ($7::timestamptz IS NULL OR c.created_at < $7) ",
            $cursor
        )
    };
}

impl Datastore {
    /// Up to `limit` calls matching `filter` from `from`, newest first, among those the user
    /// may read (current Use on their profile). A cursor that names no call of the workspace
    /// gives an empty page.
    pub async fn call_list_page(
        &self,
        workspace: Uuid,
        user: Uuid,
        filter: &CallFilter,
        from: PageFrom,
        limit: i64,
    ) -> Result<Vec<CallRow>, sqlx::Error> {
        let (sql, cursor) = match from {
            // $8 (the cursor) is bound as NULL here so that every variant takes the same parameters.
            PageFrom::Newest => (select_call_page!("AND $8::uuid IS NULL ORDER BY c.created_at DESC, c.id DESC LIMIT $9"), None),
            PageFrom::Before(id) => (
                select_call_page!(
                    "AND (c.created_at, c.id) < (SELECT created_at, id FROM calls WHERE id = $8 AND workspace_id = $1)
                     ORDER BY c.created_at DESC, c.id DESC LIMIT $9"
                ),
                Some(id),
            ),
            PageFrom::After(id) => (
                select_call_page!(
                    "AND (c.created_at, c.id) > (SELECT created_at, id FROM calls WHERE id = $8 AND workspace_id = $1)
                     ORDER BY c.created_at ASC, c.id ASC LIMIT $9"
                ),
                Some(id),
            ),
        };
        let mut rows: Vec<CallRow> = sqlx::query_as(sql)
            .bind(workspace)
            .bind(user)
            .bind(filter.state.map(CallState::as_str))
            .bind(filter.connection)
            .bind(&filter.runner)
            .bind(filter.since)
            .bind(filter.until)
            .bind(cursor)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        if matches!(from, PageFrom::After(_)) {
            rows.reverse();
        }
        Ok(rows)
    }
}

impl Datastore {
    /// Settles the calls a runner holds under `epoch` in the database but no longer holds
    /// itself (not in `held`), in one statement. Calls leased more than `grace` ago go back to
    /// the queue: a restarted device process resumes its lease but not the calls its
    /// predecessor leased and never started, and a lease answer can be lost on the way;
    /// nothing was sent for a leased call, and a late start for one requeued here is refused.
    /// Calls started more than `grace` ago become `unknown`: a process that resumed its
    /// predecessor's lease knows only the starts its outbox recorded, and one acknowledged by
    /// the server but cut off before the outbox recorded it would otherwise stay `running` for
    /// as long as the lease lives; the server cannot tell whether it was sent, so it is
    /// uncertain, never retried. The grace covers a lease or start answer still on its way.
    /// Returns (requeued, unknown).
    pub async fn call_settle_unheld(
        &self,
        runner_ref: &str,
        epoch: i64,
        held: &[Uuid],
        grace: std::time::Duration,
    ) -> Result<(u64, u64), sqlx::Error> {
        // SET expressions read the row as it was; RETURNING reads it as it became.
        let requeued: Vec<bool> = sqlx::query_scalar(
            "UPDATE calls SET
                 state = CASE WHEN state = 'leased' THEN 'queued' ELSE 'unknown' END,
                 lease_epoch = CASE WHEN state = 'leased' THEN NULL ELSE lease_epoch END,
                 leased_at = CASE WHEN state = 'leased' THEN NULL ELSE leased_at END,
                 finished_at = CASE WHEN state = 'leased' THEN finished_at ELSE now() END,
                 error_code = CASE WHEN state = 'leased' THEN error_code ELSE 'runner_restarted' END,
                 error_message = CASE WHEN state = 'leased' THEN error_message
                     ELSE 'the runner that started this call restarted without a record of it; it may or may not have run' END
             WHERE runner_ref = $1 AND lease_epoch = $2 AND finished_at IS NULL AND state IN ('leased', 'running')
               AND NOT (id = ANY($3))
               AND ((state = 'leased' AND leased_at < now() - make_interval(secs => $4))
                 OR (state = 'running' AND started_at < now() - make_interval(secs => $4)))
             RETURNING state = 'queued'",
        )
        .bind(runner_ref)
        .bind(epoch)
        .bind(held)
        .bind(grace.as_secs_f64())
        .fetch_all(&self.pool)
        .await?;
        let queued = requeued.iter().filter(|q| **q).count() as u64;
        if queued > 0 {
            self.announce_requeued(runner_ref);
        }
        Ok((queued, requeued.len() as u64 - queued))
    }

    /// Those of `ids` that are leased or running.
    ///
    /// The states are read and matched here, not in the statement: a condition on them
    /// matched `calls_in_flight`'s predicate (on `state` until migration 0011; on
    /// `finished_at IS NULL` now), and the planner then answered from that index —
    /// every call in flight and, while the xmin horizon is held, every dead entry of them
    /// (~100 ms a beat in the soak) — instead of finding each call by primary key.
    pub async fn call_in_flight_among(&self, ids: &[Uuid]) -> Result<Vec<Uuid>, sqlx::Error> {
        let states: Vec<(Uuid, String)> =
            sqlx::query_as("SELECT id, state FROM calls WHERE id = ANY($1)")
                .bind(ids)
                .fetch_all(&self.pool)
                .await?;
        let in_flight = [CallState::Leased.as_str(), CallState::Running.as_str()];
        Ok(states
            .into_iter()
            .filter(|(_, state)| in_flight.contains(&state.as_str()))
            .map(|(id, _)| id)
            .collect())
    }
}
