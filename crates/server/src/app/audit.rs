//! The audit log: who changed what. Every change an app function makes is followed by
//! [`App::audit`], which appends an entry to the workspace's hash chain (or the installation's,
//! for connectors) right after the change commits, in the same request; calls submitted and
//! ended are appended by the sweeper in batches
//! ([`crate::db::Datastore::audit_record_calls`]), off the submission path. Reading and
//! verifying it is for workspace admins and installation owners.
//!
//! An entry's summaries never hold a secret: they name credentials and environment
//! variables, never values, and never a call's arguments or result.

use super::{Actor, App, views};
use crate::db::{AuditFilter, AuditHead, AuditRow, Key, NewAuditEntry, WorkspaceRow, chain_of};
use crate::error::{AppError, AppResult};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::HashMap;
use switchyard_protocol::api::{AuditBreak, AuditBreakKind, AuditEntryView, AuditVerification};
use switchyard_protocol::{ConnectionId, ErrorCode, WorkspaceId};
use uuid::Uuid;

/// The request a change is made in: its id and trace id, set by the HTTP layer for the
/// request's task (`http::request_context`), read by [`App::audit`].
#[derive(Clone, Debug, Default)]
pub struct RequestContext {
    /// The request's id (`x-request-id`, or one the server made).
    pub request_id: Option<String>,
    /// The trace id (`traceparent`'s, or one the server made).
    pub trace_id: Option<String>,
    /// The `traceparent` header the client sent, as sent (checked where it is used).
    pub traceparent: Option<String>,
}

tokio::task_local! {
    /// The request the current task serves.
    pub static REQUEST: RequestContext;
}

/// One entry being built: who, what, on what; then the workspace, the connection and the
/// summaries. Appended by [`App::audit`].
#[derive(Clone, Debug)]
#[must_use = "an audit entry is written only by App::audit"]
pub(crate) struct Audit(NewAuditEntry);

impl Audit {
    /// A change made by a user.
    pub(crate) fn by(actor: &Actor, action: &'static str) -> Self {
        Self(NewAuditEntry {
            actor_kind: "user",
            actor_id: Some(actor.user.id.0),
            actor_name: actor.user.name.clone(),
            action,
            ..NewAuditEntry::default()
        })
    }

    /// A change the server made itself, or the operator on its host (`name` says which).
    pub(crate) fn by_system(name: &str, action: &'static str) -> Self {
        Self(NewAuditEntry {
            actor_kind: "system",
            actor_name: name.to_owned(),
            action,
            ..NewAuditEntry::default()
        })
    }

    /// What was changed.
    pub(crate) fn object(mut self, kind: &'static str, id: Option<Uuid>, name: &str) -> Self {
        self.0.object_kind = kind;
        self.0.object_id = id;
        self.0.object_name = name.to_owned();
        self
    }

    /// The workspace it happened in (none: the installation).
    pub(crate) fn workspace(mut self, workspace: WorkspaceId) -> Self {
        self.0.workspace = Some(workspace);
        self
    }

    /// The connection it concerns, so that it shows in the connection's history.
    pub(crate) fn connection(mut self, connection: ConnectionId) -> Self {
        self.0.connection_id = Some(connection.0);
        self
    }

    /// A summary of the object before the change. Never a secret.
    pub(crate) fn before(mut self, summary: Value) -> Self {
        self.0.before = Some(summary);
        self
    }

    /// A summary of the object after the change. Never a secret.
    pub(crate) fn after(mut self, summary: Value) -> Self {
        self.0.after = Some(summary);
        self
    }
}

/// A connector's spec for the log: transport, command, arguments and the *names* of its
/// environment variables, or its URL without query or fragment (where a key might sit).
pub(crate) fn spec_summary(row: &crate::db::ConnectorRow) -> Value {
    match row.spec() {
        switchyard_protocol::api::ConnectorSpec::Stdio { command, args, env } => {
            serde_json::json!({
                "transport": "stdio", "command": command, "args": args, "env": env,
                "revision": row.revision, "approved_revision": row.approved_revision,
            })
        }
        switchyard_protocol::api::ConnectorSpec::Http { url } => {
            let shown = url::Url::parse(&url).map_or_else(
                |_| String::new(),
                |mut u| {
                    u.set_query(None);
                    u.set_fragment(None);
                    u.to_string()
                },
            );
            serde_json::json!({
                "transport": "http", "url": shown,
                "revision": row.revision, "approved_revision": row.approved_revision,
            })
        }
    }
}

/// A connection for the log: its connector and where it runs.
pub(crate) fn connection_summary(row: &crate::db::ConnectionRow) -> Value {
    serde_json::json!({
        "name": row.name,
        "connector": row.connector_name,
        "runner": row.runner_ref.to_string(),
        "revision": row.revision,
        "retired": row.retired_at.is_some(),
    })
}

/// What `audit list` asks for.
#[derive(Clone, Debug, Default)]
pub struct AuditQuery {
    /// Only entries about this connection (id or name).
    pub connection: Option<String>,
    /// Only this actor (id or name).
    pub actor: Option<String>,
    /// Only entries written at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only entries before this seq (the next page of a newest-first list).
    pub before: Option<i64>,
    /// At most this many (default and cap [`MAX_AUDIT_PAGE`]).
    pub limit: Option<u32>,
}

/// The most entries one list returns.
pub const MAX_AUDIT_PAGE: u32 = 1000;

/// How many entries verification reads at a time.
const VERIFY_PAGE: i64 = 5000;

impl App {
    /// Appends `entry` with the current request's id and trace id. Called right after the
    /// change committed: the change stands whatever happens here, so a failure is logged (at
    /// error level, naming the action) rather than answered.
    pub(crate) async fn audit(&self, entry: Audit) {
        let mut entry = entry.0;
        if let Ok(request) = REQUEST.try_with(Clone::clone) {
            entry.request_id = request.request_id;
            entry.trace_id = request.trace_id;
        }
        if let Err(error) = self.db.audit_append(std::slice::from_ref(&entry)).await {
            tracing::error!(%error, action = entry.action, object = %entry.object_name,
                "could not append to the audit log");
        }
    }

    /// The workspace named `key` if the actor may read its audit log: an installation owner,
    /// or an admin of it. Members who are not admins are refused; others see 404.
    async fn auditable(&self, actor: &Actor, key: &str) -> AppResult<WorkspaceRow> {
        let (workspace, role) = self
            .db
            .workspace_find_for_auditor(&Key::parse(key), actor.user.id)
            .await?
            .ok_or_else(|| super::auth::not_a_member(key))?;
        match (actor.user.is_owner, role.as_deref()) {
            (true, _) | (_, Some("admin")) => Ok(workspace),
            (false, Some(_)) => Err(AppError::refused(
                ErrorCode::Forbidden,
                format!(
                    "only admins of workspace `{}` and installation owners may read its audit log",
                    workspace.name
                ),
            )),
            (false, None) => Err(super::auth::not_a_member(key)),
        }
    }

    /// A workspace's audit entries, newest first.
    pub async fn audit_list(
        &self,
        actor: &Actor,
        key: &str,
        query: AuditQuery,
    ) -> AppResult<Vec<AuditEntryView>> {
        let workspace = self.auditable(actor, key).await?;
        let connection = match &query.connection {
            Some(c) => Some(self.find_connection(workspace.id, c).await?.id.0),
            None => None,
        };
        self.audit_page(chain_of(Some(workspace.id)), connection, query)
            .await
    }

    /// A workspace's every entry, oldest first (for export), `VERIFY_PAGE` at a time.
    pub async fn audit_export(&self, actor: &Actor, key: &str) -> AppResult<Vec<AuditEntryView>> {
        let workspace = self.auditable(actor, key).await?;
        self.audit_chain(chain_of(Some(workspace.id))).await
    }

    /// Walks a workspace's chain from its first entry and reports the first break.
    pub async fn audit_verify(&self, actor: &Actor, key: &str) -> AppResult<AuditVerification> {
        let workspace = self.auditable(actor, key).await?;
        self.audit_walk(chain_of(Some(workspace.id))).await
    }

    /// The installation's own entries (connectors and other changes outside any workspace),
    /// newest first: installation owners only. A connection filter needs a workspace.
    pub async fn installation_audit_list(
        &self,
        actor: &Actor,
        query: AuditQuery,
    ) -> AppResult<Vec<AuditEntryView>> {
        require_installation_auditor(actor)?;
        if query.connection.is_some() {
            return Err(AppError::refused(
                ErrorCode::InvalidRequest,
                "connections belong to workspaces: filter a workspace's log by connection instead",
            ));
        }
        self.audit_page(chain_of(None), None, query).await
    }

    /// The installation's every entry, oldest first: installation owners only.
    pub async fn installation_audit_export(&self, actor: &Actor) -> AppResult<Vec<AuditEntryView>> {
        require_installation_auditor(actor)?;
        self.audit_chain(chain_of(None)).await
    }

    /// Walks the installation's chain: installation owners only.
    pub async fn installation_audit_verify(&self, actor: &Actor) -> AppResult<AuditVerification> {
        require_installation_auditor(actor)?;
        self.audit_walk(chain_of(None)).await
    }

    /// One page of `chain`, newest first, filtered by `query` (and `connection`, resolved).
    async fn audit_page(
        &self,
        chain: Uuid,
        connection: Option<Uuid>,
        query: AuditQuery,
    ) -> AppResult<Vec<AuditEntryView>> {
        let limit = query
            .limit
            .unwrap_or(MAX_AUDIT_PAGE)
            .clamp(1, MAX_AUDIT_PAGE);
        let rows = self
            .db
            .audit_list(
                chain,
                &AuditFilter {
                    connection,
                    actor: query.actor,
                    since: query.since,
                    before_seq: query.before,
                    limit: i64::from(limit),
                },
            )
            .await?;
        Ok(rows.iter().map(views::audit_entry).collect())
    }

    /// Every entry of `chain`, oldest first.
    async fn audit_chain(&self, chain: Uuid) -> AppResult<Vec<AuditEntryView>> {
        let rows = self.audit_rows(chain).await?;
        Ok(rows.iter().map(views::audit_entry).collect())
    }

    /// The first break in `chain`, read up to the head as it was when the walk began.
    async fn audit_walk(&self, chain: Uuid) -> AppResult<AuditVerification> {
        // The head first: entries appended while the chain is read only add to its end.
        let head = self.db.audit_head(chain).await?;
        let mut rows = self.audit_rows(chain).await?;
        rows.retain(|r| r.seq <= head.seq);
        Ok(verify_chain(&rows, &head))
    }

    async fn audit_rows(&self, chain: Uuid) -> AppResult<Vec<AuditRow>> {
        let mut rows = Vec::new();
        loop {
            let after = rows.last().map_or(0, |r: &AuditRow| r.seq);
            let page = self.db.audit_chain_page(chain, after, VERIFY_PAGE).await?;
            let done = i64::try_from(page.len()).unwrap_or(i64::MAX) < VERIFY_PAGE;
            rows.extend(page);
            if done {
                return Ok(rows);
            }
        }
    }
}

/// Refuses anyone but an installation owner the installation's log.
fn require_installation_auditor(actor: &Actor) -> AppResult<()> {
    if actor.user.is_owner {
        Ok(())
    } else {
        Err(AppError::refused(
            ErrorCode::Forbidden,
            "only installation owners may read the installation's audit log",
        ))
    }
}

/// The first break in a chain's `rows` (in seq order) and its `head`, if any.
///
/// Each entry must hash to its stored hash (else it was *edited*) and name the hash of the
/// entry before it. When it names another entry's hash, it was *reordered*; when it names a
/// hash no entry has, entries before it were *removed*. Entries missing from the end show
/// against the head (*truncated*).
pub(crate) fn verify_chain(rows: &[AuditRow], head: &AuditHead) -> AuditVerification {
    let by_hash: HashMap<&[u8], i64> = rows.iter().map(|r| (r.hash.as_slice(), r.seq)).collect();
    let broken = |kind, seq, message: String| AuditVerification {
        entries: rows.len() as u64,
        head_seq: head.seq,
        broken: Some(AuditBreak { kind, seq, message }),
    };
    let mut prev: Option<&AuditRow> = None;
    for row in rows {
        let seq = row.seq;
        if !row.hash_matches() {
            return broken(
                AuditBreakKind::Edited,
                seq,
                format!("entry {seq} no longer matches its hash: it was edited"),
            );
        }
        let expected = prev.map(|p| p.hash.as_slice());
        if row.prev_hash.as_deref() != expected {
            let linked = row.prev_hash.as_deref().map(|h| by_hash.get(h).copied());
            return match (linked, prev) {
                (Some(Some(other)), _) => broken(
                    AuditBreakKind::Reordered,
                    seq,
                    format!("entry {seq} was written after entry {other}, not where it is now"),
                ),
                (None, Some(p)) => broken(
                    AuditBreakKind::Reordered,
                    seq,
                    format!(
                        "entry {seq} was written first in the chain, but now follows entry {}",
                        p.seq
                    ),
                ),
                (Some(None), p) => {
                    let first_missing = p.map_or(1, |p| p.seq + 1);
                    broken(
                        AuditBreakKind::Removed,
                        first_missing.min(seq),
                        format!(
                            "the entry written before entry {seq} is missing (after {}): entries were removed",
                            p.map_or("the start".to_owned(), |p| format!("entry {}", p.seq))
                        ),
                    )
                }
                (None, None) => unreachable!("a first entry without a previous hash matches"),
            };
        }
        let expected_seq = prev.map_or(1, |p| p.seq + 1);
        if seq != expected_seq {
            return broken(
                AuditBreakKind::Edited,
                seq,
                format!(
                    "entry {seq} follows entry {} directly: its number was changed",
                    expected_seq - 1
                ),
            );
        }
        prev = Some(row);
    }
    let last_seq = prev.map_or(0, |p| p.seq);
    let last_hash = prev.map(|p| p.hash.as_slice());
    if head.seq != last_seq || head.hash.as_deref() != last_hash {
        return broken(
            AuditBreakKind::Truncated,
            last_seq + 1,
            format!(
                "the chain ends at entry {last_seq} but {} were written: entries were removed from its end",
                head.seq
            ),
        );
    }
    AuditVerification {
        entries: rows.len() as u64,
        head_seq: head.seq,
        broken: None,
    }
}
