//! Connection lifecycle events: the last [`EVENTS_KEPT`] per connection, sanitized before they
//! get here (no arguments, results or secret values).

use super::Datastore;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use switchyard_protocol::{ConnectionId, RunnerRef, UserId};

/// How many events each connection keeps.
pub const EVENTS_KEPT: i64 = 200;

/// A row of `connection_events`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct EventRow {
    /// Increasing id.
    pub id: i64,
    /// Connection.
    pub connection_id: ConnectionId,
    /// Event kind.
    pub kind: String,
    /// Details.
    pub detail: Json<Value>,
    /// Reporting runner.
    pub runner_ref: Option<RunnerRef>,
    /// Time.
    pub at: DateTime<Utc>,
}

impl Datastore {
    /// Records an event and drops the connection's events beyond the newest [`EVENTS_KEPT`].
    pub async fn event_record(
        &self,
        connection: ConnectionId,
        kind: &str,
        detail: &Value,
        runner: Option<RunnerRef>,
    ) -> Result<(), sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("INSERT INTO connection_events (connection_id, kind, detail, runner_ref) VALUES ($1, $2, $3, $4)")
            .bind(connection)
            .bind(kind)
            .bind(Json(detail))
            .bind(runner)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "DELETE FROM connection_events WHERE connection_id = $1 AND id < (
                 SELECT min(id) FROM (SELECT id FROM connection_events WHERE connection_id = $1
                                      ORDER BY id DESC LIMIT $2) newest)",
        )
        .bind(connection)
        .bind(EVENTS_KEPT)
        .execute(&mut *tx)
        .await?;
        tx.commit().await
    }

    /// The connection's events, newest first, as `reader` may see them: a session's
    /// `client_session_id` is null unless the reader holds Use on the profile the session
    /// served (recorded as `profile_id` beside it; an event without one shows it to nobody).
    pub async fn event_list(
        &self,
        connection: ConnectionId,
        reader: UserId,
    ) -> Result<Vec<EventRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT e.id, e.connection_id, e.kind, e.runner_ref, e.at,
                 CASE WHEN e.detail->>'client_session_id' IS NULL OR EXISTS (
                          SELECT 1 FROM profile_grants g
                          WHERE g.user_id = $3 AND g.grant_kind = 'use'
                            AND g.profile_id::text = e.detail->>'profile_id')
                      THEN e.detail
                      ELSE jsonb_set(e.detail, '{client_session_id}', 'null') END AS detail
             FROM connection_events e WHERE e.connection_id = $1 ORDER BY e.id DESC LIMIT $2",
        )
        .bind(connection)
        .bind(EVENTS_KEPT)
        .bind(reader)
        .fetch_all(&self.pool)
        .await
    }
}
