//! The record of access taken away: who revoked a token, removed a member or revoked a grant,
//! and when. Written in the transaction that made the change, never updated.

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
}

impl AccessAction {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessAction::TokenRevoked => "token_revoked",
            AccessAction::MemberRemoved => "member_removed",
            AccessAction::GrantRevoked => "grant_revoked",
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
