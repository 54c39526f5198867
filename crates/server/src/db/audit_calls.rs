//! Calls in the audit log: `call.submitted` and `call.ended` entries, written by the sweeper in
//! batches behind a cursor (`audit_call_cursor`), never on the submission path. The cursor
//! row is taken `FOR UPDATE SKIP LOCKED`, so one replica at a time writes them, and it moves
//! in the transaction that appends them, so each call event is written once. Calls are read
//! `lag` after they were submitted or finished, so that a transaction still committing then
//! is not skipped by the cursor.

use super::Datastore;
use super::audit::{NewAuditEntry, append};
use chrono::{DateTime, Utc};
use serde_json::json;
use std::time::Duration;
use switchyard_protocol::WorkspaceId;
use uuid::Uuid;

/// A call as its audit entries summarize it: no arguments, no result.
#[derive(Debug, sqlx::FromRow)]
struct CallEvent {
    id: Uuid,
    workspace_id: WorkspaceId,
    request_id: Uuid,
    connection_id: Uuid,
    connection_name: String,
    profile_name: String,
    tool_name: String,
    kind: String,
    created_by: Uuid,
    user_name: String,
    submitted_by_device: Option<Uuid>,
    device_name: Option<String>,
    state: String,
    error_code: Option<String>,
    finished_at: Option<DateTime<Utc>>,
}

/// The columns of [`CallEvent`], from `calls c` and its joins.
macro_rules! call_event {
    () => {
        "SELECT c.id, c.workspace_id, c.request_id, c.connection_id, cn.name AS connection_name,
                p.name AS profile_name, c.tool_name, c.kind, c.created_by, u.name AS user_name,
                c.submitted_by_device, d.name AS device_name, c.state, c.error_code, c.finished_at
         FROM calls c
         JOIN users u ON u.id = c.created_by
         JOIN connections cn ON cn.id = c.connection_id
         JOIN profiles p ON p.id = c.profile_id
         LEFT JOIN devices d ON d.id = c.submitted_by_device "
    };
}

impl CallEvent {
    fn entry(&self, action: &'static str) -> NewAuditEntry {
        let (actor_kind, actor_id, actor_name) = match (&self.submitted_by_device, action) {
            (_, "call.ended") => ("system", None, "switchyard".to_owned()),
            (Some(device), _) => (
                "device",
                Some(*device),
                self.device_name.clone().unwrap_or_default(),
            ),
            (None, _) => ("user", Some(self.created_by), self.user_name.clone()),
        };
        let after = match action {
            "call.ended" => json!({"state": self.state, "error_code": self.error_code}),
            _ => json!({
                "tool": self.tool_name,
                "connection": self.connection_name,
                "profile": self.profile_name,
                "kind": self.kind,
            }),
        };
        NewAuditEntry {
            workspace: Some(self.workspace_id),
            actor_kind,
            actor_id,
            actor_name,
            action,
            object_kind: "call",
            object_id: Some(self.id),
            object_name: self.tool_name.clone(),
            connection_id: Some(self.connection_id),
            before: None,
            after: Some(after),
            request_id: Some(self.request_id.to_string()),
            trace_id: None,
            call_id: Some(self.id),
        }
    }
}

/// The largest call id created at or before `at` (call ids are UUIDv7: milliseconds first).
fn last_id_at(at: DateTime<Utc>) -> Uuid {
    let ms = u128::try_from(at.timestamp_millis().max(0)).unwrap_or(0);
    Uuid::from_u128((ms << 80) | ((1u128 << 80) - 1))
}

impl Datastore {
    /// Appends the `call.submitted` entries of calls submitted, and the `call.ended` entries
    /// of calls finished, at least `lag` ago and not logged yet: at most `limit` of each.
    /// Returns how many entries were written (0 when another replica holds the cursor).
    pub async fn audit_record_calls(
        &self,
        lag: Duration,
        limit: i64,
    ) -> Result<usize, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let cursor: Option<(Uuid, DateTime<Utc>, Uuid, DateTime<Utc>)> = sqlx::query_as(
            "SELECT submitted_id, finished_at, finished_id, now() FROM audit_call_cursor
             FOR UPDATE SKIP LOCKED",
        )
        .fetch_optional(&mut *tx)
        .await?;
        let Some((submitted_id, finished_at, finished_id, now)) = cursor else {
            return Ok(0);
        };
        let until = now - chrono::Duration::from_std(lag).unwrap_or_default();
        let submitted: Vec<CallEvent> = sqlx::query_as(concat!(
            call_event!(),
            "WHERE c.id > $1 AND c.id <= $2 ORDER BY c.id LIMIT $3"
        ))
        .bind(submitted_id)
        .bind(last_id_at(until))
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        let mut entries: Vec<NewAuditEntry> = submitted
            .iter()
            .map(|c| c.entry("call.submitted"))
            .collect();
        let submitted_id = submitted.last().map_or(submitted_id, |c| c.id);
        let mut finished = (finished_at, finished_id);
        // While submissions are behind, ends wait: a call's end never precedes its submission.
        if i64::try_from(submitted.len()).unwrap_or(i64::MAX) < limit {
            let ended: Vec<CallEvent> = sqlx::query_as(concat!(
                call_event!(),
                "WHERE c.finished_at IS NOT NULL AND c.retention_expired_at IS NULL
                   AND (c.finished_at, c.id) > ($1, $2) AND c.finished_at <= $3
                 ORDER BY c.finished_at, c.id LIMIT $4"
            ))
            .bind(finished_at)
            .bind(finished_id)
            .bind(until)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
            entries.extend(ended.iter().map(|c| c.entry("call.ended")));
            if let Some(last) = ended.last() {
                finished = (last.finished_at.unwrap_or(finished_at), last.id);
            }
        }
        if entries.is_empty() {
            return Ok(0);
        }
        append(&mut tx, &entries).await?;
        sqlx::query(
            "UPDATE audit_call_cursor SET submitted_id = $1, finished_at = $2, finished_id = $3",
        )
        .bind(submitted_id)
        .bind(finished.0)
        .bind(finished.1)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(entries.len())
    }
}
