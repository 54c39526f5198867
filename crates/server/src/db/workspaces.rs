//! Workspaces, their members and environments.

use super::access_changes::{AccessAction, record};
use super::{Datastore, Key};
use chrono::{DateTime, Utc};
use serde_json::json;
use switchyard_protocol::api::DEFAULT_ENVIRONMENT;
use switchyard_protocol::{EnvironmentId, UserId, WorkspaceId};
use uuid::Uuid;

/// A row of `workspaces`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct WorkspaceRow {
    /// Id.
    pub id: WorkspaceId,
    /// Unique name.
    pub name: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// A member with the user's name.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct MemberRow {
    /// Workspace.
    pub workspace_id: WorkspaceId,
    /// User.
    pub user_id: UserId,
    /// User name.
    pub user_name: String,
    /// `member` or `admin`.
    pub role: String,
}

/// What [`Datastore::member_remove`] did.
#[derive(Clone, Debug)]
pub enum MemberRemoval {
    /// Removed, with this many grants.
    Removed {
        /// The member as they were.
        member: MemberRow,
        /// Grants on the workspace's profiles removed with them.
        grants_removed: u64,
    },
    /// Nothing: they are the workspace's only admin.
    LastAdmin,
}

/// A row of `environments`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct EnvironmentRow {
    /// Id.
    pub id: EnvironmentId,
    /// Workspace.
    pub workspace_id: WorkspaceId,
    /// Name, unique in the workspace.
    pub name: String,
}

impl Datastore {
    /// Creates a workspace with its creator as admin and the `default` environment, atomically.
    pub async fn workspace_create(
        &self,
        name: &str,
        creator: UserId,
    ) -> Result<WorkspaceRow, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let workspace: WorkspaceRow = sqlx::query_as(
            "INSERT INTO workspaces (id, name, created_by) VALUES ($1, $2, $3)
             RETURNING id, name, created_at",
        )
        .bind(Uuid::now_v7())
        .bind(name)
        .bind(creator)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO workspace_members (workspace_id, user_id, role) VALUES ($1, $2, 'admin')",
        )
        .bind(workspace.id)
        .bind(creator)
        .execute(&mut *tx)
        .await?;
        sqlx::query("INSERT INTO environments (id, workspace_id, name) VALUES ($1, $2, $3)")
            .bind(Uuid::now_v7())
            .bind(workspace.id)
            .bind(DEFAULT_ENVIRONMENT)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(workspace)
    }

    /// A workspace the user is a member of, with the user's role. `None` for unknown
    /// workspaces and for workspaces the user does not belong to alike.
    pub async fn workspace_find_for_member(
        &self,
        key: &Key<'_>,
        user: UserId,
    ) -> Result<Option<(WorkspaceRow, String)>, sqlx::Error> {
        let row: Option<(WorkspaceId, String, DateTime<Utc>, String)> = sqlx::query_as(
            "SELECT w.id, w.name, w.created_at, m.role FROM workspaces w
             JOIN workspace_members m ON m.workspace_id = w.id AND m.user_id = $3
             WHERE w.id = $1 OR w.name = $2",
        )
        .bind(key.id())
        .bind(key.name())
        .bind(user)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(id, name, created_at, role)| {
            (
                WorkspaceRow {
                    id,
                    name,
                    created_at,
                },
                role,
            )
        }))
    }

    /// The workspaces a user belongs to, by name.
    pub async fn workspace_list_for_member(
        &self,
        user: UserId,
    ) -> Result<Vec<WorkspaceRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT w.id, w.name, w.created_at FROM workspaces w
             JOIN workspace_members m ON m.workspace_id = w.id AND m.user_id = $1
             ORDER BY w.name",
        )
        .bind(user)
        .fetch_all(&self.pool)
        .await
    }

    /// Removes a member from a workspace together with their grants on its profiles, and
    /// records who did it, atomically. `Ok(None)` when the user is not a member; the only
    /// admin is never removed.
    pub async fn member_remove(
        &self,
        workspace: WorkspaceId,
        user: UserId,
        by: UserId,
    ) -> Result<Option<MemberRemoval>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        // The workspace's admins, locked: two admins removing each other at once cannot both
        // succeed and leave nobody.
        let admins: Vec<UserId> = sqlx::query_scalar(
            "SELECT user_id FROM workspace_members WHERE workspace_id = $1 AND role = 'admin'
             ORDER BY user_id FOR UPDATE",
        )
        .bind(workspace)
        .fetch_all(&mut *tx)
        .await?;
        if admins == [user] {
            return Ok(Some(MemberRemoval::LastAdmin));
        }
        let member: Option<MemberRow> = sqlx::query_as(
            "WITH m AS (
                 DELETE FROM workspace_members WHERE workspace_id = $1 AND user_id = $2
                 RETURNING workspace_id, user_id, role)
             SELECT m.workspace_id, m.user_id, u.name AS user_name, m.role
             FROM m JOIN users u ON u.id = m.user_id",
        )
        .bind(workspace)
        .bind(user)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(member) = member else {
            return Ok(None);
        };
        // Their own OAuth grants of the workspace's per-person connections go with them, and
        // so do the authorizations they started.
        sqlx::query(
            "WITH pending AS (
                 DELETE FROM oauth_pending g USING connections c
                 WHERE g.connection_id = c.id AND c.workspace_id = $1
                   AND g.holder = $2::uuid::text)
             DELETE FROM oauth_grants g USING connections c
             WHERE g.connection_id = c.id AND c.workspace_id = $1 AND g.holder = $2::uuid::text",
        )
        .bind(workspace)
        .bind(user)
        .execute(&mut *tx)
        .await?;
        let grants_removed = sqlx::query(
            "DELETE FROM profile_grants g USING profiles p
             WHERE g.profile_id = p.id AND p.workspace_id = $1 AND g.user_id = $2",
        )
        .bind(workspace)
        .bind(user)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        record(
            &mut tx,
            Some(by),
            AccessAction::MemberRemoved,
            Some(workspace),
            json!({"user_id": user, "role": member.role, "grants_removed": grants_removed}),
        )
        .await?;
        tx.commit().await?;
        Ok(Some(MemberRemoval::Removed {
            member,
            grants_removed,
        }))
    }

    /// Adds a member or changes an existing member's role.
    pub async fn member_upsert(
        &self,
        workspace: WorkspaceId,
        user: UserId,
        role: &str,
    ) -> Result<MemberRow, sqlx::Error> {
        sqlx::query_as(
            "WITH m AS (
                 INSERT INTO workspace_members (workspace_id, user_id, role) VALUES ($1, $2, $3)
                 ON CONFLICT (workspace_id, user_id) DO UPDATE SET role = EXCLUDED.role
                 RETURNING workspace_id, user_id, role)
             SELECT m.workspace_id, m.user_id, u.name AS user_name, m.role FROM m JOIN users u ON u.id = m.user_id",
        )
        .bind(workspace)
        .bind(user)
        .bind(role)
        .fetch_one(&self.pool)
        .await
    }

    /// The members of a workspace, by name.
    pub async fn member_list(&self, workspace: WorkspaceId) -> Result<Vec<MemberRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT m.workspace_id, m.user_id, u.name AS user_name, m.role
             FROM workspace_members m JOIN users u ON u.id = m.user_id
             WHERE m.workspace_id = $1 ORDER BY u.name",
        )
        .bind(workspace)
        .fetch_all(&self.pool)
        .await
    }

    /// Creates an environment.
    pub async fn environment_create(
        &self,
        workspace: WorkspaceId,
        name: &str,
    ) -> Result<EnvironmentRow, sqlx::Error> {
        sqlx::query_as(
            "INSERT INTO environments (id, workspace_id, name) VALUES ($1, $2, $3)
             RETURNING id, workspace_id, name",
        )
        .bind(Uuid::now_v7())
        .bind(workspace)
        .bind(name)
        .fetch_one(&self.pool)
        .await
    }

    /// An environment of a workspace by id or name.
    pub async fn environment_find(
        &self,
        workspace: WorkspaceId,
        key: &Key<'_>,
    ) -> Result<Option<EnvironmentRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT id, workspace_id, name FROM environments
             WHERE workspace_id = $1 AND (id = $2 OR name = $3)",
        )
        .bind(workspace)
        .bind(key.id())
        .bind(key.name())
        .fetch_optional(&self.pool)
        .await
    }

    /// The environments of a workspace, by name.
    pub async fn environment_list(
        &self,
        workspace: WorkspaceId,
    ) -> Result<Vec<EnvironmentRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT id, workspace_id, name FROM environments WHERE workspace_id = $1 ORDER BY name",
        )
        .bind(workspace)
        .fetch_all(&self.pool)
        .await
    }
}
