//! The audit log (`migrations/0020_audit_log.sql`): appending entries to a chain, reading them
//! back. Appends to one chain are serialized by its head row, locked `FOR UPDATE`, so the
//! chain never forks; each entry's hash covers its content and the previous entry's hash
//! ([`entry_hash`]), which is what `App::audit_verify` checks. The table refuses updates and
//! deletes; nothing here tries.

use super::Datastore;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgConnection;
use sqlx::types::Json;
use switchyard_protocol::WorkspaceId;
use uuid::Uuid;

/// The chain of installation-wide entries (connectors), beside one per workspace.
pub const INSTALLATION_CHAIN: Uuid = Uuid::nil();

/// The chain an entry of `workspace` (or of the installation, `None`) belongs to.
pub fn chain_of(workspace: Option<WorkspaceId>) -> Uuid {
    workspace.map_or(INSTALLATION_CHAIN, |w| w.0)
}

/// An entry to append, before the chain gives it a place.
#[derive(Clone, Debug, Default)]
pub struct NewAuditEntry {
    /// The workspace, or `None` for an installation-wide change.
    pub workspace: Option<WorkspaceId>,
    /// `user`, `device` or `system`.
    pub actor_kind: &'static str,
    /// The user or device; `None` for the system.
    pub actor_id: Option<Uuid>,
    /// The actor's name now.
    pub actor_name: String,
    /// A stable dotted name (`connection.created`).
    pub action: &'static str,
    /// What was changed: `connector`, `connection`, `tool`, `profile`, `grant`, …
    pub object_kind: &'static str,
    /// Its id, when it has one.
    pub object_id: Option<Uuid>,
    /// Its name now.
    pub object_name: String,
    /// The connection the entry concerns, if any.
    pub connection_id: Option<Uuid>,
    /// A summary of the object before the change (never a secret).
    pub before: Option<Value>,
    /// A summary of the object after the change (never a secret).
    pub after: Option<Value>,
    /// The HTTP request's id.
    pub request_id: Option<String>,
    /// The request's trace id.
    pub trace_id: Option<String>,
    /// For a call event, the call.
    pub call_id: Option<Uuid>,
}

/// A row of `audit_log`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct AuditRow {
    /// The chain: the workspace's id, or [`INSTALLATION_CHAIN`].
    pub chain: Uuid,
    /// Position in the chain, from 1.
    pub seq: i64,
    /// The workspace, `None` for installation-wide entries.
    pub workspace_id: Option<Uuid>,
    /// When it was written.
    pub at: DateTime<Utc>,
    /// `user`, `device` or `system`.
    pub actor_kind: String,
    /// The user or device.
    pub actor_id: Option<Uuid>,
    /// The actor's name when written.
    pub actor_name: String,
    /// Dotted action name.
    pub action: String,
    /// Object kind.
    pub object_kind: String,
    /// Object id.
    pub object_id: Option<Uuid>,
    /// Object name when written.
    pub object_name: String,
    /// The connection concerned.
    pub connection_id: Option<Uuid>,
    /// Summary before.
    pub before: Option<Json<Value>>,
    /// Summary after.
    pub after: Option<Json<Value>>,
    /// The HTTP request's id.
    pub request_id: Option<String>,
    /// The trace id.
    pub trace_id: Option<String>,
    /// The call of a call event.
    pub call_id: Option<Uuid>,
    /// The previous entry's hash (`None` for the first).
    pub prev_hash: Option<Vec<u8>>,
    /// SHA-256 over the content and `prev_hash`.
    pub hash: Vec<u8>,
}

/// The head of a chain: its last entry's seq and hash.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct AuditHead {
    /// The last seq (0: empty).
    pub seq: i64,
    /// The last hash.
    pub hash: Option<Vec<u8>>,
}

/// Which entries [`Datastore::audit_list`] returns, newest first.
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    /// Only entries concerning this connection.
    pub connection: Option<Uuid>,
    /// Only this actor: an id or a name.
    pub actor: Option<String>,
    /// Only entries written at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only entries before this seq (paging).
    pub before_seq: Option<i64>,
    /// At most this many.
    pub limit: i64,
}

/// The entry's content as hashed: everything but its seq, with times in microseconds.
fn content(chain: Uuid, at: DateTime<Utc>, e: &EntryFields<'_>, prev_hash: Option<&[u8]>) -> Value {
    json!({
        "chain": chain,
        "workspace_id": e.workspace_id,
        "at_us": at.timestamp_micros(),
        "actor": {"kind": e.actor_kind, "id": e.actor_id, "name": e.actor_name},
        "action": e.action,
        "object": {"kind": e.object_kind, "id": e.object_id, "name": e.object_name},
        "connection_id": e.connection_id,
        "before": e.before,
        "after": e.after,
        "request_id": e.request_id,
        "trace_id": e.trace_id,
        "call_id": e.call_id,
        "prev_hash": prev_hash.map(hex),
    })
}

/// What [`entry_hash`] covers, borrowed from a new entry or a stored row.
pub struct EntryFields<'a> {
    /// Workspace.
    pub workspace_id: Option<Uuid>,
    /// Actor kind.
    pub actor_kind: &'a str,
    /// Actor id.
    pub actor_id: Option<Uuid>,
    /// Actor name.
    pub actor_name: &'a str,
    /// Action.
    pub action: &'a str,
    /// Object kind.
    pub object_kind: &'a str,
    /// Object id.
    pub object_id: Option<Uuid>,
    /// Object name.
    pub object_name: &'a str,
    /// Connection.
    pub connection_id: Option<Uuid>,
    /// Before.
    pub before: Option<&'a Value>,
    /// After.
    pub after: Option<&'a Value>,
    /// Request id.
    pub request_id: Option<&'a str>,
    /// Trace id.
    pub trace_id: Option<&'a str>,
    /// Call.
    pub call_id: Option<Uuid>,
}

impl AuditRow {
    /// The fields its hash covers.
    pub fn fields(&self) -> EntryFields<'_> {
        EntryFields {
            workspace_id: self.workspace_id,
            actor_kind: &self.actor_kind,
            actor_id: self.actor_id,
            actor_name: &self.actor_name,
            action: &self.action,
            object_kind: &self.object_kind,
            object_id: self.object_id,
            object_name: &self.object_name,
            connection_id: self.connection_id,
            before: self.before.as_ref().map(|j| &j.0),
            after: self.after.as_ref().map(|j| &j.0),
            request_id: self.request_id.as_deref(),
            trace_id: self.trace_id.as_deref(),
            call_id: self.call_id,
        }
    }

    /// Whether its stored hash is the hash of what it holds now.
    pub fn hash_matches(&self) -> bool {
        entry_hash(
            self.chain,
            self.at,
            &self.fields(),
            self.prev_hash.as_deref(),
        ) == self.hash
    }
}

impl NewAuditEntry {
    fn fields(&self) -> EntryFields<'_> {
        EntryFields {
            workspace_id: self.workspace.map(|w| w.0),
            actor_kind: self.actor_kind,
            actor_id: self.actor_id,
            actor_name: &self.actor_name,
            action: self.action,
            object_kind: self.object_kind,
            object_id: self.object_id,
            object_name: &self.object_name,
            connection_id: self.connection_id,
            before: self.before.as_ref(),
            after: self.after.as_ref(),
            request_id: self.request_id.as_deref(),
            trace_id: self.trace_id.as_deref(),
            call_id: self.call_id,
        }
    }
}

/// SHA-256 over the canonical JSON of an entry's content, which includes the previous hash.
pub fn entry_hash(
    chain: Uuid,
    at: DateTime<Utc>,
    fields: &EntryFields<'_>,
    prev_hash: Option<&[u8]>,
) -> Vec<u8> {
    let text = crate::app::names::canonical_json(&content(chain, at, fields, prev_hash));
    Sha256::digest(text.as_bytes()).to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The columns of [`AuditRow`].
macro_rules! columns {
    () => {
        "chain, seq, workspace_id, at, actor_kind, actor_id, actor_name, action, object_kind,
         object_id, object_name, connection_id, before, after, request_id, trace_id, call_id,
         prev_hash, hash"
    };
}

impl Datastore {
    /// Appends entries to their chains, in order, in one transaction.
    pub async fn audit_append(&self, entries: &[NewAuditEntry]) -> Result<(), sqlx::Error> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        append(&mut tx, entries).await?;
        tx.commit().await
    }

    /// The workspace named `key` and the user's role there, if they are a member (`None`
    /// role: not a member), for the audit log's readers.
    pub async fn workspace_find_for_auditor(
        &self,
        key: &super::Key<'_>,
        user: switchyard_protocol::UserId,
    ) -> Result<Option<(super::WorkspaceRow, Option<String>)>, sqlx::Error> {
        let row: Option<(WorkspaceId, String, DateTime<Utc>, Option<String>)> = sqlx::query_as(
            "SELECT w.id, w.name, w.created_at, m.role FROM workspaces w
             LEFT JOIN workspace_members m ON m.workspace_id = w.id AND m.user_id = $3
             WHERE w.id = $1 OR w.name = $2",
        )
        .bind(key.id())
        .bind(key.name())
        .bind(user)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(id, name, created_at, role)| {
            (
                super::WorkspaceRow {
                    id,
                    name,
                    created_at,
                },
                role,
            )
        }))
    }

    /// A chain's head.
    pub async fn audit_head(&self, chain: Uuid) -> Result<AuditHead, sqlx::Error> {
        Ok(
            sqlx::query_as("SELECT seq, hash FROM audit_heads WHERE chain = $1")
                .bind(chain)
                .fetch_optional(&self.pool)
                .await?
                .unwrap_or(AuditHead { seq: 0, hash: None }),
        )
    }

    /// A chain's entries from `after_seq` on, oldest first, at most `limit`.
    pub async fn audit_chain_page(
        &self,
        chain: Uuid,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<AuditRow>, sqlx::Error> {
        sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM audit_log WHERE chain = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        ))
        .bind(chain)
        .bind(after_seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
    }

    /// A chain's entries that match `filter`, newest first.
    pub async fn audit_list(
        &self,
        chain: Uuid,
        filter: &AuditFilter,
    ) -> Result<Vec<AuditRow>, sqlx::Error> {
        let actor_id = filter
            .actor
            .as_deref()
            .and_then(|a| Uuid::parse_str(a).ok());
        sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM audit_log WHERE chain = $1
               AND ($2::uuid IS NULL OR connection_id = $2 OR object_id = $2)
               AND ($3::text IS NULL OR actor_name = $3 OR actor_id = $4)
               AND ($5::timestamptz IS NULL OR at >= $5)
               AND ($6::bigint IS NULL OR seq < $6)
             ORDER BY seq DESC LIMIT $7"
        ))
        .bind(chain)
        .bind(filter.connection)
        .bind(filter.actor.as_deref())
        .bind(actor_id)
        .bind(filter.since)
        .bind(filter.before_seq)
        .bind(filter.limit)
        .fetch_all(&self.pool)
        .await
    }
}

/// Appends `entries` on `conn` (inside the caller's transaction): per chain, lock its head,
/// hash each entry onto the one before, insert them in one statement, move the head.
pub(super) async fn append(
    conn: &mut PgConnection,
    entries: &[NewAuditEntry],
) -> Result<(), sqlx::Error> {
    let mut chains: Vec<Uuid> = entries.iter().map(|e| chain_of(e.workspace)).collect();
    chains.sort();
    chains.dedup();
    // Heads are locked in chain order, so two appends spanning chains cannot deadlock.
    for chain in chains {
        let (seq, hash, now): (i64, Option<Vec<u8>>, DateTime<Utc>) = sqlx::query_as(
            "INSERT INTO audit_heads (chain, seq, hash) VALUES ($1, 0, NULL)
             ON CONFLICT (chain) DO UPDATE SET chain = EXCLUDED.chain
             RETURNING seq, hash, clock_timestamp()",
        )
        .bind(chain)
        .fetch_one(&mut *conn)
        .await?;
        // Stored with microseconds: hash what will be read back.
        let at = DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now);
        let mut seq = seq;
        let mut prev = hash;
        let mut rows = Vec::new();
        for entry in entries.iter().filter(|e| chain_of(e.workspace) == chain) {
            seq += 1;
            let hash = entry_hash(chain, at, &entry.fields(), prev.as_deref());
            rows.push(json!({
                "chain": chain,
                "seq": seq,
                "workspace_id": entry.workspace,
                "at": at,
                "actor_kind": entry.actor_kind,
                "actor_id": entry.actor_id,
                "actor_name": entry.actor_name,
                "action": entry.action,
                "object_kind": entry.object_kind,
                "object_id": entry.object_id,
                "object_name": entry.object_name,
                "connection_id": entry.connection_id,
                "before": entry.before,
                "after": entry.after,
                "request_id": entry.request_id,
                "trace_id": entry.trace_id,
                "call_id": entry.call_id,
                "prev_hash": prev.as_deref().map(hex),
                "hash": hex(&hash),
            }));
            prev = Some(hash);
        }
        sqlx::query(
            "INSERT INTO audit_log (chain, seq, workspace_id, at, actor_kind, actor_id,
                 actor_name, action, object_kind, object_id, object_name, connection_id, before,
                 after, request_id, trace_id, call_id, prev_hash, hash)
             SELECT r.chain, r.seq, r.workspace_id, r.at, r.actor_kind, r.actor_id, r.actor_name,
                 r.action, r.object_kind, r.object_id, r.object_name, r.connection_id,
                 r.before, r.after, r.request_id, r.trace_id, r.call_id,
                 decode(r.prev_hash, 'hex'), decode(r.hash, 'hex')
             FROM jsonb_to_recordset($1) AS r(chain uuid, seq bigint, workspace_id uuid,
                 at timestamptz, actor_kind text, actor_id uuid, actor_name text, action text,
                 object_kind text, object_id uuid, object_name text, connection_id uuid,
                 before jsonb, after jsonb, request_id text, trace_id text, call_id uuid,
                 prev_hash text, hash text)
             ORDER BY r.seq",
        )
        .bind(Json(rows))
        .execute(&mut *conn)
        .await?;
        sqlx::query("UPDATE audit_heads SET seq = $2, hash = $3 WHERE chain = $1")
            .bind(chain)
            .bind(seq)
            .bind(prev)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
