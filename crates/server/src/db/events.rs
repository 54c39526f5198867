//! Connection lifecycle events: the last [`EVENTS_KEPT`] per connection, sanitized before they
//! get here (no arguments, results or secret values).

use super::Datastore;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use switchyard_protocol::{ConnectionId, RunnerRef};

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

    /// The connection's events, newest first.
    pub async fn event_list(&self, connection: ConnectionId) -> Result<Vec<EventRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT * FROM connection_events WHERE connection_id = $1 ORDER BY id DESC LIMIT $2",
        )
        .bind(connection)
        .bind(EVENTS_KEPT)
        .fetch_all(&self.pool)
        .await
    }
}
