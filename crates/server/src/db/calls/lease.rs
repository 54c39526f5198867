//! Leasing queued calls under a runner's epoch, and the target each call is dispatched to:
//! the lease records it in the statement that leases, a call handed to a waiting lease records
//! it in its insert, and a receipt lookup compares with the same expression.

use super::CallRow;
use crate::db::sql::{Params, Text, text};
use crate::db::{Committed, Wakeup};
use crate::db::{ConnectorRow, Datastore};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use std::sync::{Arc, LazyLock};
use switchyard_protocol::api::{AuthKind, SpecDigest};
use switchyard_protocol::reconcile::CallKind;
use switchyard_protocol::runner::Epoch;
use switchyard_protocol::{
    CallId, CallState, ConnectionId, DeviceId, ProfileId, RequestId, RunnerRef, UserId,
};

/// A call just leased, with everything the runner and the lease's own checks need, read by
/// the statement that leased it: the connection's revision and its connector as they are now,
/// the target the call was recorded as dispatched to, and for a receipt lookup the unknown
/// call it looks up as it is now.
#[derive(Clone, Debug)]
pub struct LeasedRow {
    /// Call id.
    pub id: CallId,
    /// Submitted (the insert's transaction time): where the runner's next lease may scan from.
    pub created_at: DateTime<Utc>,
    /// Client idempotency key.
    pub request_id: RequestId,
    /// Connection.
    pub connection_id: ConnectionId,
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
    /// The profile it runs under.
    pub profile_id: ProfileId,
    /// Its submitter (for a device's call, the user who approved the device).
    pub created_by: UserId,
    /// The device that submitted it, if one did.
    pub submitted_by_device: Option<DeviceId>,
    /// The digest of the target the call is recorded as dispatched to (see [`target_digest`]).
    pub target_digest: Vec<u8>,
    /// For a receipt lookup: the unknown call it looks up.
    pub parent_call_id: Option<CallId>,
    /// A tool call, a receipt lookup or a device discovery: what the runner runs.
    pub kind: CallKind,
    /// For a receipt lookup: that call as it is now (`None` if it is gone).
    pub parent: Option<LookedUpCall>,
    /// The trace context its client sent, if any.
    pub traceparent: Option<String>,
    /// For a connection placed on a device: the spec digest its owner accepted, if they did
    /// (`db/placements.rs`). The device runner compares it with the spec it receives.
    pub accepted_spec_digest: Option<SpecDigest>,
    /// For a connection placed on a device: its declared auth kind, if declared (the device
    /// runner sends its OAuth grant for `oauth`).
    pub auth_kind: Option<AuthKind>,
}

/// The unknown call a leased receipt lookup looks up, as the lease read it.
#[derive(Clone, Debug)]
pub struct LookedUpCall {
    /// Its state.
    pub state: CallState,
    /// The digest of the target it was dispatched to.
    pub target_digest: Option<Vec<u8>>,
    /// When its evidence was erased.
    pub evidence_erased_at: Option<DateTime<Utc>>,
}

impl<'r> sqlx::FromRow<'r, PgRow> for LeasedRow {
    fn from_row(row: &'r PgRow) -> Result<Self, sqlx::Error> {
        let parent_state: Option<CallState> = row.try_get("parent_state")?;
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
                retired_at: row.try_get("connector_retired_at")?,
                retired_by: row.try_get("connector_retired_by")?,
            },
            tool_name: row.try_get("tool_name")?,
            arguments: row.try_get("arguments")?,
            timeout_seconds: row.try_get("timeout_seconds")?,
            client_session_id: row.try_get("client_session_id")?,
            profile_id: row.try_get("profile_id")?,
            created_by: row.try_get("created_by")?,
            submitted_by_device: row.try_get("submitted_by_device")?,
            traceparent: row.try_get("traceparent")?,
            target_digest: row.try_get("target_digest")?,
            parent_call_id: row.try_get("parent_call_id")?,
            kind: row.try_get("kind")?,
            parent,
            accepted_spec_digest: row.try_get("accepted_spec_digest")?,
            auth_kind: row.try_get("auth_kind")?,
        })
    }
}

/// SQL for the digest of the target a call on connection `k` (joined with its connector `x`)
/// is dispatched to now: runner, connection and connector revisions, transport and target,
/// and for the central runner the credential binding's references, never values. `bindings`
/// is the placeholder of the central bindings file's `bindings` map (connection id →
/// references), `null` when there is none, or a string marking an unreadable file (lookups
/// then fail closed). PostgreSQL computes it, so that the lease records it in the statement
/// that leases, and a lookup request compares with the same expression.
pub(super) fn target_digest(bindings: &str) -> String {
    format!(
        "sha256(convert_to(jsonb_build_object(
             'runner', k.runner_ref, 'connection', k.id, 'connection_revision', k.revision,
             'connector', x.id, 'connector_revision', x.revision, 'transport', x.transport,
             'command', x.command, 'args', x.args, 'env', x.env_names, 'url', x.url,
             'binding', CASE WHEN k.runner_ref <> 'central' THEN NULL
                             WHEN jsonb_typeof({bindings}) = 'object' THEN {bindings} -> k.id::text
                             ELSE {bindings} END)::text, 'UTF8'))"
    )
}

/// `target AS (…)`: what a call inserted leased to a waiting lease is dispatched to — its
/// connection's connector and the target digest — when `epoch` is `runner`'s live lease;
/// empty otherwise. The arguments are the placeholders of the call's connection and runner,
/// the lease's epoch and the central bindings (see [`target_digest`]).
pub(super) fn handed_target(connection: &str, runner: &str, epoch: &str, bindings: &str) -> String {
    format!(
        "target AS (
             SELECT x.id AS connector_id, x.revision AS connector_revision,
                 k.revision AS connection_revision_now, x.name AS connector_name,
                 x.transport AS connector_transport, x.command AS connector_command,
                 x.args AS connector_args, x.env_names AS connector_env_names,
                 x.url AS connector_url, x.approved_revision AS connector_approved_revision,
                 x.created_at AS connector_created_at, x.retired_at AS connector_retired_at,
                 x.retired_by AS connector_retired_by,
                 {digest} AS target_digest, {accepted} AS accepted_spec_digest,
                 {auth_kind} AS auth_kind
             FROM connections k JOIN connectors x ON x.id = k.connector_id
             WHERE k.id = {connection} AND EXISTS (
                 SELECT 1 FROM runner_leases l
                 WHERE l.runner_ref = {runner} AND l.epoch = {epoch} AND l.expires_at > now()))",
        digest = target_digest(bindings),
        accepted = ACCEPTED_SPEC_DIGEST,
        auth_kind = DEVICE_AUTH_KIND,
    )
}

/// SQL: the spec digest the owner of the device that connection `k` is placed on accepted
/// for it (null for the central runner, or while they have not).
const ACCEPTED_SPEC_DIGEST: &str = "(SELECT pl.spec_digest FROM placements pl
     WHERE pl.connection_id = k.id AND pl.device_id = k.runner_device_id)";

/// SQL: the declared auth kind of connection `k` when it is placed on a device (null for
/// the central runner, which reads the settings itself, or while none is declared).
const DEVICE_AUTH_KIND: &str = "(SELECT a.kind FROM connection_auth a
     WHERE a.connection_id = k.id AND k.runner_device_id IS NOT NULL)";

/// [`Datastore::call_lease`]'s statement.
fn lease_statement() -> Text {
    static STATEMENT: LazyLock<Arc<str>> = LazyLock::new(|| {
        let mut params = Params::default();
        let (runner, epoch, max, bindings, since) = (
            params.next(),
            params.next(),
            params.next(),
            params.next(),
            params.next(),
        );
        format!(
            "WITH live AS (
                 SELECT EXISTS (SELECT 1 FROM runner_leases r
                                WHERE r.runner_ref = {runner} AND r.epoch = {epoch} AND r.expires_at > now()) AS live),
             picked AS (
                 SELECT id, connection_id, parent_call_id FROM calls
                 WHERE runner_ref = {runner} AND state = 'queued' AND lease_epoch IS NULL AND finished_at IS NULL
                   AND NOT approval_held
                   AND (SELECT live FROM live)
                   AND created_at >= COALESCE({since}::timestamptz, '-infinity')
                 ORDER BY created_at LIMIT {max}
                 FOR NO KEY UPDATE SKIP LOCKED),
             leased AS (
                 UPDATE calls c SET state = 'leased', lease_epoch = {epoch}, leased_at = now(),
                     connector_id = x.id, connector_revision = x.revision,
                     target_digest = {digest}
                 FROM picked
                 JOIN connections k ON k.id = picked.connection_id
                 JOIN connectors x ON x.id = k.connector_id
                 LEFT JOIN calls p ON p.id = picked.parent_call_id
                 WHERE c.id = picked.id
                 RETURNING c.id, c.created_at, c.request_id, c.connection_id, c.tool_name, c.arguments, c.timeout_seconds,
                     c.client_session_id, c.profile_id, c.created_by, c.submitted_by_device,
                     c.traceparent, c.target_digest, c.parent_call_id, c.kind, k.revision AS connection_revision,
                     x.id AS connector_id, x.name AS connector_name, x.transport AS connector_transport,
                     x.command AS connector_command, x.args AS connector_args, x.env_names AS connector_env_names,
                     x.url AS connector_url, x.revision AS connector_revision,
                     x.approved_revision AS connector_approved_revision, x.created_at AS connector_created_at,
                     x.retired_at AS connector_retired_at, x.retired_by AS connector_retired_by,
                     p.state AS parent_state, p.target_digest AS parent_target_digest,
                     p.evidence_erased_at AS parent_erased_at, {accepted} AS accepted_spec_digest,
                     {auth_kind} AS auth_kind)
             SELECT live.live AS runner_live, leased.* FROM live LEFT JOIN leased ON true",
            digest = target_digest(&bindings),
            accepted = ACCEPTED_SPEC_DIGEST,
            auth_kind = DEVICE_AUTH_KIND,
        )
        .into()
    });
    text(&STATEMENT)
}

impl Datastore {
    /// Leases up to `max` queued calls of a runner under `epoch`, oldest first among those
    /// submitted at or after `since` (all when `None`), skipping rows other transactions hold;
    /// `None` (leasing nothing) unless `epoch` is the runner's live lease.
    ///
    /// One statement per batch: it records the target each call is dispatched to (connector,
    /// its revision, the target digest; `bindings` as in [`target_digest`]) and returns what
    /// the runner needs and what the lease's checks read (the connector, a lookup's unknown
    /// call). It answers at least one row, saying whether the lease is live, so that an empty
    /// answer needs no second look to tell a fenced runner from an empty queue. It names
    /// `calls_queued`'s predicate (no epoch, no finish, not held for approval: what a queued
    /// call is, checked by `calls_queued_shape` and `calls_held_shape`) so that the index
    /// answers it; a call awaiting approval is in neither the index nor the answer.
    pub async fn call_lease(
        &self,
        runner: RunnerRef,
        epoch: Epoch,
        max: i64,
        since: Option<DateTime<Utc>>,
        bindings: &Value,
    ) -> Result<Option<Vec<LeasedRow>>, sqlx::Error> {
        let rows = sqlx::query(lease_statement())
            .bind(runner)
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
            if row.try_get::<Option<CallId>, _>("id")?.is_some() {
                leased.push(<LeasedRow as sqlx::FromRow<_>>::from_row(row)?);
            }
        }
        Ok(Some(leased))
    }

    /// Whether a call was dispatched to the target its connection reaches now (`bindings` as
    /// in [`target_digest`]): what a receipt lookup for it needs. False for a call never
    /// leased.
    pub async fn call_target_is_current(
        &self,
        id: CallId,
        bindings: &Value,
    ) -> Result<bool, sqlx::Error> {
        static STATEMENT: LazyLock<Arc<str>> = LazyLock::new(|| {
            let mut params = Params::default();
            let (id, bindings) = (params.next(), params.next());
            format!(
                "SELECT COALESCE(c.target_digest = {digest}, false)
                 FROM calls c JOIN connections k ON k.id = c.connection_id JOIN connectors x ON x.id = k.connector_id
                 WHERE c.id = {id}",
                digest = target_digest(&bindings),
            )
            .into()
        });
        let current: Option<bool> = sqlx::query_scalar(text(&STATEMENT))
            .bind(id)
            .bind(Json(bindings))
            .fetch_optional(&self.pool)
            .await?;
        Ok(current.unwrap_or(false))
    }

    /// Fails a call that was leased but can certainly not run (e.g. its connector lost its
    /// approval): `leased` → `failed`, nothing was sent.
    pub async fn call_fail_leased(
        &self,
        id: CallId,
        epoch: Epoch,
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

    /// Puts a leased call its runner never received back in the queue (handed to a lease that
    /// never took it, or in a lease answer too long for the runner channel), unless it moved
    /// on meanwhile. Returns whether it did, with the wake-up that calls for.
    pub async fn call_requeue_handed(
        &self,
        id: CallId,
        runner: RunnerRef,
        epoch: Epoch,
    ) -> Result<Committed<bool>, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE calls SET state = 'queued', lease_epoch = NULL, leased_at = NULL
             WHERE id = $1 AND state = 'leased' AND lease_epoch = $2",
        )
        .bind(id)
        .bind(epoch)
        .execute(&self.pool)
        .await?;
        let requeued = done.rows_affected() == 1;
        Ok(Committed::new(requeued).waking_if(requeued, Wakeup::Requeued(Some(runner))))
    }
}

/// The wake-up a newly queued call calls for.
pub(super) fn queued_wakeup(call: &CallRow) -> Wakeup {
    Wakeup::Queued {
        runner: call.runner_ref,
        at: call.created_at,
    }
}
