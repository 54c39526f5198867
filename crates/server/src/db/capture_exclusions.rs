//! Capture exclusions: per connection (every tool, stored as tool `''`) or per tool, what
//! Switchyard keeps of a call's arguments and result. The app reads the exclusions that apply
//! to a call when it records the call's completion in a transaction (the one-statement path
//! records no call an exclusion applies to: `calls::complete`'s guard), and applies them there.

use super::Datastore;
use chrono::{DateTime, Utc};
use switchyard_protocol::{CallId, ConnectionId, UserId};

/// A row of `capture_exclusions`.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct CaptureExclusionRow {
    /// The connection.
    pub connection_id: ConnectionId,
    /// The tool, or `''` for every tool of the connection.
    pub tool_name: String,
    /// Keep nothing but the disposition.
    pub capture_nothing: bool,
    /// Top-level argument fields never kept.
    pub drop_argument_fields: Vec<String>,
    /// Result fields never kept.
    pub drop_result_fields: Vec<String>,
    /// When they were last set.
    pub updated_at: DateTime<Utc>,
}

/// One exclusion to store.
#[derive(Clone, Debug)]
pub struct NewCaptureExclusion {
    /// The tool, or `''` for every tool of the connection.
    pub tool_name: String,
    /// Keep nothing but the disposition.
    pub capture_nothing: bool,
    /// Top-level argument fields never kept.
    pub drop_argument_fields: Vec<String>,
    /// Result fields never kept.
    pub drop_result_fields: Vec<String>,
}

impl Datastore {
    /// A connection's exclusions, the connection-wide one first, then by tool.
    pub async fn capture_exclusion_list(
        &self,
        connection: ConnectionId,
    ) -> Result<Vec<CaptureExclusionRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT connection_id, tool_name, capture_nothing, drop_argument_fields, drop_result_fields, updated_at
             FROM capture_exclusions WHERE connection_id = $1 ORDER BY tool_name",
        )
        .bind(connection)
        .fetch_all(&self.pool)
        .await
    }

    /// Replaces a connection's exclusions with `exclusions`, in one transaction.
    pub async fn capture_exclusion_replace(
        &self,
        connection: ConnectionId,
        exclusions: &[NewCaptureExclusion],
        by: UserId,
    ) -> Result<Vec<CaptureExclusionRow>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM capture_exclusions WHERE connection_id = $1")
            .bind(connection)
            .execute(&mut *tx)
            .await?;
        for exclusion in exclusions {
            sqlx::query(
                "INSERT INTO capture_exclusions (connection_id, tool_name, capture_nothing, drop_argument_fields,
                     drop_result_fields, updated_by)
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(connection)
            .bind(&exclusion.tool_name)
            .bind(exclusion.capture_nothing)
            .bind(&exclusion.drop_argument_fields)
            .bind(&exclusion.drop_result_fields)
            .bind(by)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        self.capture_exclusion_list(connection).await
    }

    /// The exclusions that apply to a call: its connection's connection-wide one and its
    /// tool's (none, one or both). None apply to a device discovery: its result is the
    /// connection's catalog, no tool's answer.
    pub async fn capture_exclusions_of_call(
        &self,
        call: CallId,
    ) -> Result<Vec<CaptureExclusionRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT x.connection_id, x.tool_name, x.capture_nothing, x.drop_argument_fields, x.drop_result_fields,
                 x.updated_at
             FROM calls c JOIN capture_exclusions x
               ON x.connection_id = c.connection_id AND x.tool_name IN ('', c.tool_name)
             WHERE c.id = $1 AND c.kind <> 'discovery'",
        )
        .bind(call)
        .fetch_all(&self.pool)
        .await
    }
}
