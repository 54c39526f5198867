//! Receipt policies: a connection's approved, read-only receipt lookup (a tool of the same
//! connector and the template of its arguments).

use super::{Datastore, ProfileRow};
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;
use switchyard_protocol::{ConnectionId, UserId};

/// A row of `receipt_policies`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ReceiptPolicyRow {
    /// The connection.
    pub connection_id: ConnectionId,
    /// The lookup tool.
    pub tool_name: String,
    /// The argument template (an object; placeholders in string values).
    pub arguments: Json<Value>,
    /// Who approved it.
    pub approved_by: UserId,
    /// When.
    pub approved_at: DateTime<Utc>,
}

impl Datastore {
    /// Sets (or replaces) a connection's receipt policy.
    pub async fn receipt_policy_set(
        &self,
        connection: ConnectionId,
        tool: &str,
        arguments: &Value,
        by: UserId,
    ) -> Result<ReceiptPolicyRow, sqlx::Error> {
        sqlx::query_as(
            "INSERT INTO receipt_policies (connection_id, tool_name, arguments, approved_by) VALUES ($1, $2, $3, $4)
             ON CONFLICT (connection_id) DO UPDATE SET tool_name = EXCLUDED.tool_name, arguments = EXCLUDED.arguments,
                 approved_by = EXCLUDED.approved_by, approved_at = now()
             RETURNING *",
        )
        .bind(connection)
        .bind(tool)
        .bind(Json(arguments))
        .bind(by)
        .fetch_one(&self.pool)
        .await
    }

    /// A connection's receipt policy, if one was approved.
    pub async fn receipt_policy_get(
        &self,
        connection: ConnectionId,
    ) -> Result<Option<ReceiptPolicyRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM receipt_policies WHERE connection_id = $1")
            .bind(connection)
            .fetch_optional(&self.pool)
            .await
    }

    /// The profiles that include a connection: whose calls a receipt policy on it settles.
    pub async fn receipt_policy_profiles(
        &self,
        connection: ConnectionId,
    ) -> Result<Vec<ProfileRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT p.id, p.workspace_id, p.environment_id, p.name, p.retired_at, p.retired_by FROM profiles p
             JOIN profile_connections pc ON pc.profile_id = p.id WHERE pc.connection_id = $1 ORDER BY p.name",
        )
        .bind(connection)
        .fetch_all(&self.pool)
        .await
    }
}
