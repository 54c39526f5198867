//! Approval questions (`approvals`, one per held call) and their answers, the profiles'
//! approval policies and the workspaces' approval timeout. An answer is one guarded statement
//! on the call (`WHERE state = 'awaiting_approval'`) that also records the answer beside it,
//! so two answers at once, or an answer racing the expiry sweep or a cancel, change the call
//! once.

use super::audit::{NewAuditEntry, append};
use super::{Committed, Datastore, Wakeup};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::types::Json;
use switchyard_protocol::approval::{ApprovalPolicy, ApprovalState, AskReason};
use switchyard_protocol::{
    CallId, CallState, ConnectionId, DeviceId, ProfileId, RequestId, RunnerRef, UserId, WorkspaceId,
};

/// At most this many questions expire per sweep, so that one transaction (and its audit
/// entries' chain locks) stays short after a mass expiry; the next sweep takes the rest.
pub const EXPIRE_BATCH: i64 = 500;
/// A question with its call, as a person reads it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ApprovalRow {
    /// The call.
    pub call_id: CallId,
    /// Workspace.
    pub workspace_id: WorkspaceId,
    /// The call's idempotency key.
    pub request_id: RequestId,
    /// Profile.
    pub profile_id: ProfileId,
    /// Its name.
    pub profile_name: String,
    /// Connection.
    pub connection_id: ConnectionId,
    /// Its name.
    pub connection_name: String,
    /// Tool.
    pub tool_name: String,
    /// The call's arguments (until retention erases them).
    pub arguments: Option<Json<Value>>,
    /// The payload digest the question is bound to.
    pub payload_digest: Vec<u8>,
    /// The submitter.
    pub asked_by: UserId,
    /// Their name.
    pub asked_by_name: String,
    /// The submitting device.
    pub asked_by_device: Option<DeviceId>,
    /// When it was asked.
    pub asked_at: DateTime<Utc>,
    /// Why.
    pub why: AskReason,
    /// The policy that applied.
    pub policy: ApprovalPolicy,
    /// Where it stands.
    pub state: ApprovalState,
    /// The call's state.
    pub call_state: CallState,
    /// The call's trace context (its approval wait is a span of that trace).
    pub traceparent: Option<String>,
    /// When it expires unanswered.
    pub expires_at: Option<DateTime<Utc>>,
    /// Who answered.
    pub decided_by: Option<UserId>,
    /// Their name.
    pub decided_by_name: Option<String>,
    /// When.
    pub decided_at: Option<DateTime<Utc>>,
    /// The answer's note.
    pub reason: Option<String>,
    /// Whether the reader holds Approve on the call's profile.
    pub reader_may_approve: bool,
}

/// The statement reading [`ApprovalRow`]s for the reader `$2`, from `approvals a` joined with
/// its call `c`, followed by `$tail` (a literal: the condition and order).
macro_rules! concat_approval {
    ($tail:literal) => {
        concat!(
            "SELECT a.call_id, a.workspace_id, c.request_id, c.profile_id,
        p.name AS profile_name, c.connection_id, k.name AS connection_name, c.tool_name,
        c.arguments, a.payload_digest, c.created_by AS asked_by, u.name AS asked_by_name,
        c.submitted_by_device AS asked_by_device, a.asked_at, a.why, a.policy, a.state,
        c.state AS call_state, c.traceparent,
        CASE WHEN a.state = 'pending' AND w.approval_timeout_seconds IS NOT NULL
             THEN a.asked_at + make_interval(secs => w.approval_timeout_seconds) END AS expires_at,
        a.decided_by, d.name AS decided_by_name, a.decided_at, a.reason,
        EXISTS (SELECT 1 FROM profile_grants g WHERE g.profile_id = c.profile_id
                AND g.user_id = $2 AND g.grant_kind = 'approve') AS reader_may_approve
     FROM approvals a
     JOIN calls c ON c.id = a.call_id
     JOIN workspaces w ON w.id = a.workspace_id
     JOIN profiles p ON p.id = c.profile_id
     JOIN connections k ON k.id = c.connection_id
     JOIN users u ON u.id = c.created_by
     LEFT JOIN users d ON d.id = a.decided_by",
            " ",
            $tail
        )
    };
}

/// What answering a question did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answered {
    /// Approved: the call is queued now.
    Approved,
    /// Declined: the call ended `declined`.
    Declined,
    /// Nothing changed: it was answered already, expired or cancelled, or the answer was not allowed
    /// by the time it was applied.
    Unchanged,
}

/// A call whose approval question expired ([`Datastore::approval_expire_overdue`]).
#[derive(Clone, Copy, Debug)]
pub struct ExpiredApproval {
    /// The call, now `expired`.
    pub call: CallId,
    /// How long its question waited: its workspace's approval timeout.
    pub waited: std::time::Duration,
}

/// A call whose question expired unanswered, as its audit entry summarizes it.
#[derive(Debug, sqlx::FromRow)]
struct ExpiredQuestion {
    id: CallId,
    workspace_id: WorkspaceId,
    request_id: RequestId,
    connection_id: ConnectionId,
    tool_name: String,
    approval_timeout_seconds: i32,
}

impl ExpiredQuestion {
    /// Its `approval.expired` entry: by the system, never the arguments.
    fn entry(&self) -> NewAuditEntry {
        NewAuditEntry {
            workspace: Some(self.workspace_id),
            actor_kind: "system",
            actor_id: None,
            actor_name: "switchyard".to_owned(),
            action: "approval.expired",
            object_kind: "call",
            object_id: Some(self.id.0),
            object_name: self.tool_name.clone(),
            connection_id: Some(self.connection_id.0),
            before: Some(json!({"state": "awaiting_approval"})),
            after: Some(json!({
                "state": "expired",
                "approval_timeout_seconds": self.approval_timeout_seconds,
            })),
            request_id: Some(self.request_id.to_string()),
            trace_id: None,
            call_id: Some(self.id.0),
        }
    }
}

/// One policy row of a profile.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ApprovalPolicyRow {
    /// Connection.
    pub connection_id: ConnectionId,
    /// Its name.
    pub connection_name: String,
    /// The tool it overrides, if a tool's.
    pub tool: Option<String>,
    /// The policy.
    pub policy: ApprovalPolicy,
}

impl Datastore {
    /// The question about call `call` of workspace `ws`, read by `reader`.
    pub async fn approval_get(
        &self,
        ws: WorkspaceId,
        reader: UserId,
        call: CallId,
    ) -> Result<Option<ApprovalRow>, sqlx::Error> {
        const STATEMENT: &str = concat_approval!("WHERE a.workspace_id = $1 AND a.call_id = $3");
        sqlx::query_as(STATEMENT)
            .bind(ws)
            .bind(reader)
            .bind(call)
            .fetch_optional(&self.pool)
            .await
    }

    /// The newest questions of workspace `ws` that `reader` may read — about calls through a
    /// profile on which they hold Approve or Use, or that they submitted — pending first, at
    /// most `limit`.
    pub async fn approval_list(
        &self,
        ws: WorkspaceId,
        reader: UserId,
        limit: i64,
    ) -> Result<Vec<ApprovalRow>, sqlx::Error> {
        const STATEMENT: &str = concat_approval!(
            "WHERE a.workspace_id = $1 AND (c.created_by = $2 OR EXISTS (
                 SELECT 1 FROM profile_grants g WHERE g.profile_id = c.profile_id
                   AND g.user_id = $2 AND g.grant_kind IN ('approve', 'use')))
             ORDER BY a.state = 'pending' DESC, a.asked_at DESC LIMIT $3"
        );
        sqlx::query_as(STATEMENT)
            .bind(ws)
            .bind(reader)
            .bind(limit)
            .fetch_all(&self.pool)
            .await
    }

    /// Answers the question about call `call` of workspace `ws` as `approver`: approved, the
    /// call is queued (at its old submission time, announced as such); declined, it ends
    /// `declined` with `reason` as its result. One guarded statement, which also holds the
    /// rules: the call still awaits, the approver holds Approve on its profile right now and
    /// did not submit it.
    pub async fn approval_answer(
        &self,
        ws: WorkspaceId,
        call: CallId,
        approver: UserId,
        approve: bool,
        reason: Option<&str>,
    ) -> Result<Committed<Answered>, sqlx::Error> {
        let row: Option<(CallState, RunnerRef, DateTime<Utc>)> = sqlx::query_as(
            "WITH answered AS (
                 UPDATE calls c SET
                     state = CASE WHEN $4 THEN 'queued' ELSE 'declined' END,
                     approval_held = false,
                     finished_at = CASE WHEN $4 THEN NULL ELSE now() END,
                     error_code = CASE WHEN $4 THEN NULL ELSE 'approval_declined' END,
                     error_message = CASE WHEN $4 THEN NULL
                         ELSE 'declined by ' || (SELECT name FROM users WHERE id = $3)
                              || COALESCE(': ' || $5, '') || '; it was never sent' END,
                     result = CASE WHEN $4 THEN NULL ELSE jsonb_build_object(
                         'content', jsonb_build_array(jsonb_build_object('type', 'text',
                             'text', COALESCE($5, 'declined without a reason'))),
                         'isError', true) END
                 WHERE c.workspace_id = $1 AND c.id = $2 AND c.state = 'awaiting_approval'
                   AND c.approval_held AND c.created_by <> $3
                   AND EXISTS (SELECT 1 FROM profile_grants g WHERE g.profile_id = c.profile_id
                               AND g.user_id = $3 AND g.grant_kind = 'approve')
                 RETURNING c.id, c.state, c.runner_ref, c.created_at),
             recorded AS (
                 UPDATE approvals a SET state = CASE WHEN $4 THEN 'approved' ELSE 'declined' END,
                     decided_by = $3, decided_at = now(), reason = $5
                 FROM answered WHERE a.call_id = answered.id)
             SELECT state, runner_ref, created_at FROM answered",
        )
        .bind(ws)
        .bind(call)
        .bind(approver)
        .bind(approve)
        .bind(reason)
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            None => Committed::new(Answered::Unchanged),
            Some((CallState::Queued, runner, at)) => {
                Committed::new(Answered::Approved).waking(Wakeup::Queued { runner, at })
            }
            Some(_) => Committed::new(Answered::Declined).waking(Wakeup::Settled {
                call,
                recorded: None,
            }),
        })
    }

    /// Expires the calls whose question waited longer than their workspace's approval timeout
    /// (none for a workspace without one), the oldest [`EXPIRE_BATCH`] at most (locked ones,
    /// being answered or expired by another replica, skipped), in one guarded statement, and
    /// appends an `approval.expired` entry (actor: the system) for each to the audit log in the
    /// same transaction. Returns their ids, with the wake-ups their waiting readers need.
    pub async fn approval_expire_overdue(
        &self,
    ) -> Result<Committed<Vec<ExpiredApproval>>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let expired: Vec<ExpiredQuestion> = sqlx::query_as(
            "WITH expired AS (
                 UPDATE calls c SET state = 'expired', approval_held = false, finished_at = now(),
                     error_code = 'approval_expired',
                     error_message = 'nobody answered its approval question within the workspace''s approval timeout; it was never sent'
                 FROM workspaces w
                 WHERE w.id = c.workspace_id AND c.state = 'awaiting_approval'
                   AND c.id IN (
                     SELECT o.id FROM calls o JOIN workspaces ow ON ow.id = o.workspace_id
                     WHERE o.approval_held AND o.state = 'awaiting_approval'
                       AND ow.approval_timeout_seconds IS NOT NULL
                       AND o.created_at < now() - make_interval(secs => ow.approval_timeout_seconds)
                     ORDER BY o.created_at LIMIT $1
                     FOR UPDATE OF o SKIP LOCKED)
                 RETURNING c.id, c.workspace_id, c.request_id, c.connection_id, c.tool_name,
                     w.approval_timeout_seconds),
             recorded AS (
                 UPDATE approvals a SET state = 'expired', decided_at = now()
                 FROM expired WHERE a.call_id = expired.id AND a.state = 'pending')
             SELECT id, workspace_id, request_id, connection_id, tool_name,
                 approval_timeout_seconds
             FROM expired ORDER BY workspace_id, id",
        )
        .bind(EXPIRE_BATCH)
        .fetch_all(&mut *tx)
        .await?;
        if !expired.is_empty() {
            let entries: Vec<NewAuditEntry> = expired.iter().map(ExpiredQuestion::entry).collect();
            append(&mut tx, &entries).await?;
        }
        tx.commit().await?;
        let wakeups = expired
            .iter()
            .map(|q| Wakeup::Settled {
                call: q.id,
                recorded: None,
            })
            .collect();
        let value = expired
            .iter()
            .map(|q| ExpiredApproval {
                call: q.id,
                waited: std::time::Duration::from_secs(
                    u64::try_from(q.approval_timeout_seconds).unwrap_or(0),
                ),
            })
            .collect();
        Ok(Committed { value, wakeups })
    }

    /// Sets the approval policy of profile `profile`: of every connection (`connection`
    /// `None`), of one, or of one tool of one (an override). Returns whether the profile
    /// includes the connection (nothing is set otherwise).
    pub async fn approval_policy_set(
        &self,
        profile: ProfileId,
        connection: Option<ConnectionId>,
        tool: Option<&str>,
        policy: ApprovalPolicy,
        by: UserId,
    ) -> Result<bool, sqlx::Error> {
        let done = match (connection, tool) {
            (Some(connection), Some(tool)) => {
                sqlx::query(
                    "INSERT INTO profile_tool_approvals (profile_id, connection_id, tool_name, policy, changed_by)
                     SELECT pc.profile_id, pc.connection_id, $3, $4, $5 FROM profile_connections pc
                     WHERE pc.profile_id = $1 AND pc.connection_id = $2
                     ON CONFLICT (profile_id, connection_id, tool_name)
                     DO UPDATE SET policy = $4, changed_by = $5, changed_at = now()",
                )
                .bind(profile)
                .bind(connection)
                .bind(tool)
                .bind(policy)
                .bind(by)
                .execute(&self.pool)
                .await?
            }
            (connection, _) => {
                sqlx::query(
                    "UPDATE profile_connections SET approval_policy = $3, changed_by = $4, changed_at = now()
                     WHERE profile_id = $1 AND ($2::uuid IS NULL OR connection_id = $2)",
                )
                .bind(profile)
                .bind(connection)
                .bind(policy)
                .bind(by)
                .execute(&self.pool)
                .await?
            }
        };
        Ok(done.rows_affected() > 0 || connection.is_none())
    }

    /// The policies profile `profile` sets: each connection's, then the tools' overrides.
    pub async fn approval_policy_list(
        &self,
        profile: ProfileId,
    ) -> Result<Vec<ApprovalPolicyRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT pc.connection_id, k.name AS connection_name, NULL::text AS tool, pc.approval_policy AS policy
             FROM profile_connections pc JOIN connections k ON k.id = pc.connection_id
             WHERE pc.profile_id = $1
             UNION ALL
             SELECT t.connection_id, k.name, t.tool_name, t.policy
             FROM profile_tool_approvals t JOIN connections k ON k.id = t.connection_id
             WHERE t.profile_id = $1
             ORDER BY 2, 3 NULLS FIRST",
        )
        .bind(profile)
        .fetch_all(&self.pool)
        .await
    }

    /// Sets workspace `ws`'s approval timeout (`None`: questions never expire).
    pub async fn workspace_set_approval_timeout(
        &self,
        ws: WorkspaceId,
        seconds: Option<i32>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE workspaces SET approval_timeout_seconds = $2 WHERE id = $1")
            .bind(ws)
            .bind(seconds)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Workspace `ws`'s approval timeout, in seconds (`None`: questions never expire).
    pub async fn workspace_approval_timeout(
        &self,
        ws: WorkspaceId,
    ) -> Result<Option<i32>, sqlx::Error> {
        sqlx::query_scalar("SELECT approval_timeout_seconds FROM workspaces WHERE id = $1")
            .bind(ws)
            .fetch_one(&self.pool)
            .await
    }
}
