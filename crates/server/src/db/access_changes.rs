//! The record of access taken away: who revoked a token, removed a member or revoked a grant,
//! who retired or restored a connector, connection or profile, and when. Written in the
//! transaction that made the change, never updated.

use serde_json::Value;
use sqlx::PgConnection;
use sqlx::types::Json;
use switchyard_protocol::{UserId, WorkspaceId};
use uuid::Uuid;

/// What was taken away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessAction {
    /// A personal API token was revoked.
    TokenRevoked,
    /// A member was removed from a workspace, with their grants there.
    MemberRemoved,
    /// Grants on a profile were revoked.
    GrantRevoked,
    /// A connector was retired.
    ConnectorRetired,
    /// A retired connector was restored.
    ConnectorRestored,
    /// A connection was retired, with its tools.
    ConnectionRetired,
    /// A retired connection was restored.
    ConnectionRestored,
    /// A profile was retired.
    ProfileRetired,
    /// A retired profile was restored.
    ProfileRestored,
}

impl AccessAction {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessAction::TokenRevoked => "token_revoked",
            AccessAction::MemberRemoved => "member_removed",
            AccessAction::GrantRevoked => "grant_revoked",
            AccessAction::ConnectorRetired => "connector_retired",
            AccessAction::ConnectorRestored => "connector_restored",
            AccessAction::ConnectionRetired => "connection_retired",
            AccessAction::ConnectionRestored => "connection_restored",
            AccessAction::ProfileRetired => "profile_retired",
            AccessAction::ProfileRestored => "profile_restored",
        }
    }
}

/// Records one change on `conn`, inside the caller's transaction.
pub(super) async fn record(
    conn: &mut PgConnection,
    actor: Option<UserId>,
    action: AccessAction,
    workspace: Option<WorkspaceId>,
    subject: Value,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO access_changes (id, actor_id, action, workspace_id, subject)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(Uuid::now_v7())
    .bind(actor)
    .bind(action.as_str())
    .bind(workspace)
    .bind(Json(subject))
    .execute(conn)
    .await
    .map(drop)
}
