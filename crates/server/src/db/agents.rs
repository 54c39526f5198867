//! Agents: a `users` row of kind `agent` with its token, its membership of one workspace and
//! an `agents` row; their per-connection settings (`agent_connections`). Migration
//! `0024_agents.sql` says why an agent is a user.

use super::{Datastore, Key};
use chrono::{DateTime, Utc};
use sqlx::FromRow;
use switchyard_protocol::agents::{
    AgentConnectionSettings, AgentMode, Announce, AuthFailure, ToolSyncFailure,
};
use switchyard_protocol::approval::ApprovalPolicy;
use switchyard_protocol::{CallId, ConnectionId, ProfileId, UserId, WorkspaceId};
use uuid::Uuid;

/// A row of `agents`.
#[derive(Clone, Debug, FromRow)]
pub struct AgentRow {
    /// The agent's user id: its principal.
    pub user_id: UserId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// Its name in the workspace.
    pub name: String,
    /// How it sees tools.
    pub mode: AgentMode,
    /// Every connection's tools through search.
    pub defer_all: bool,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// Whether a declarative file created or adopted it (`switchyard apply`).
    pub declared: bool,
}

/// A row of `agent_connections`, with the connection's name.
#[derive(Clone, Debug, FromRow)]
pub struct AgentConnectionRow {
    /// The connection.
    pub connection_id: ConnectionId,
    /// Its name.
    pub connection_name: String,
    /// Include globs.
    pub include: Vec<String>,
    /// Exclude globs.
    pub exclude: Vec<String>,
    /// Only read-only tools.
    pub read_only: bool,
    /// Only non-destructive tools.
    pub non_destructive: bool,
    /// Only idempotent tools.
    pub idempotent: bool,
    /// Behind search.
    pub defer: bool,
    /// The agent's approval policy for the connection.
    pub approve: Option<ApprovalPolicy>,
    /// A refused credential.
    pub auth_failure: AuthFailure,
    /// A failed tool listing.
    pub tool_sync_failure: ToolSyncFailure,
    /// Announcement.
    pub announce: Announce,
}

impl AgentConnectionRow {
    /// The settings, as the wire carries them.
    pub fn settings(&self) -> AgentConnectionSettings {
        AgentConnectionSettings {
            include: self.include.clone(),
            exclude: self.exclude.clone(),
            read_only: self.read_only,
            non_destructive: self.non_destructive,
            idempotent: self.idempotent,
            defer: self.defer,
            approve: self.approve,
            auth_failure: self.auth_failure,
            tool_sync_failure: self.tool_sync_failure,
            announce: self.announce,
        }
    }
}

/// What a new agent is made of.
pub struct NewAgent<'a> {
    /// Its workspace.
    pub workspace: WorkspaceId,
    /// Its name there.
    pub name: &'a str,
    /// Its user name (`<agent>@<workspace>`).
    pub user_name: &'a str,
    /// How it sees tools.
    pub mode: AgentMode,
    /// Every connection's tools through search.
    pub defer_all: bool,
    /// Who creates it.
    pub created_by: UserId,
    /// Its token's hash.
    pub token_hash: &'a [u8],
    /// Whether a declarative file creates it.
    pub declared: bool,
}

impl Datastore {
    /// Creates an agent: its user, token, membership and row, atomically. A taken name is a
    /// unique violation.
    pub async fn agent_create(&self, new: NewAgent<'_>) -> Result<AgentRow, sqlx::Error> {
        let id = Uuid::now_v7();
        let mut tx = self.pool.begin().await?;
        sqlx::query("INSERT INTO users (id, name, is_owner, kind) VALUES ($1, $2, false, 'agent')")
            .bind(id)
            .bind(new.user_name)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO api_tokens (id, user_id, token_hash, name) VALUES ($1, $2, $3, 'agent')",
        )
        .bind(Uuid::now_v7())
        .bind(id)
        .bind(new.token_hash)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO workspace_members (workspace_id, user_id, role) VALUES ($1, $2, 'agent')",
        )
        .bind(new.workspace)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query_as(
            "INSERT INTO agents (user_id, workspace_id, name, mode, defer_all, created_by, declared)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             RETURNING user_id, workspace_id, name, mode, defer_all, created_at, revoked_at, declared",
        )
        .bind(id)
        .bind(new.workspace)
        .bind(new.name)
        .bind(new.mode)
        .bind(new.defer_all)
        .bind(new.created_by)
        .bind(new.declared)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(row)
    }

    /// A workspace's agents, by name, revoked ones included.
    pub async fn agent_list(&self, workspace: WorkspaceId) -> Result<Vec<AgentRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT user_id, workspace_id, name, mode, defer_all, created_at, revoked_at, declared FROM agents WHERE workspace_id = $1 ORDER BY name",
        )
            .bind(workspace)
            .fetch_all(&self.pool)
            .await
    }

    /// An agent of the workspace by its id or name.
    pub async fn agent_find(
        &self,
        workspace: WorkspaceId,
        key: &Key<'_>,
    ) -> Result<Option<AgentRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT user_id, workspace_id, name, mode, defer_all, created_at, revoked_at, declared FROM agents
             WHERE workspace_id = $1 AND (user_id = $2 OR name = $3)",
        )
            .bind(workspace)
            .bind(key.id())
            .bind(key.name())
            .fetch_optional(&self.pool)
            .await
    }

    /// The agent whose principal is `user`, if it is one.
    pub async fn agent_of_user(&self, user: UserId) -> Result<Option<AgentRow>, sqlx::Error> {
        sqlx::query_as("SELECT user_id, workspace_id, name, mode, defer_all, created_at, revoked_at, declared FROM agents WHERE user_id = $1")
            .bind(user)
            .fetch_optional(&self.pool)
            .await
    }

    /// Changes an agent's mode, deferral and declared mark.
    pub async fn agent_edit(
        &self,
        agent: UserId,
        (mode, defer_all, declared): (AgentMode, bool, bool),
    ) -> Result<AgentRow, sqlx::Error> {
        sqlx::query_as(
            "UPDATE agents SET mode = $2, defer_all = $3, declared = $4 WHERE user_id = $1
             RETURNING user_id, workspace_id, name, mode, defer_all, created_at, revoked_at, declared",
        )
        .bind(agent)
        .bind(mode)
        .bind(defer_all)
        .bind(declared)
        .fetch_one(&self.pool)
        .await
    }

    /// Revokes an agent: its row is marked, its tokens revoked. Revoking a revoked agent
    /// changes nothing. Returns the profiles it held Use on (for the caller to take).
    pub async fn agent_revoke(
        &self,
        agent: UserId,
        by: UserId,
    ) -> Result<Vec<ProfileId>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "UPDATE agents SET revoked_at = now(), revoked_by = $2
             WHERE user_id = $1 AND revoked_at IS NULL",
        )
        .bind(agent)
        .bind(by)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE api_tokens SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL",
        )
        .bind(agent)
        .execute(&mut *tx)
        .await?;
        let profiles = sqlx::query_scalar(
            "SELECT profile_id FROM profile_grants WHERE user_id = $1 AND grant_kind = 'use'
             ORDER BY profile_id",
        )
        .bind(agent)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(profiles)
    }

    /// The profiles an agent (or any user) holds Use on in a workspace, by name.
    pub async fn agent_use_profiles(
        &self,
        workspace: WorkspaceId,
        user: UserId,
    ) -> Result<Vec<(ProfileId, String)>, sqlx::Error> {
        sqlx::query_as(
            "SELECT p.id, p.name FROM profiles p
             JOIN profile_grants g ON g.profile_id = p.id AND g.grant_kind = 'use' AND g.user_id = $2
             WHERE p.workspace_id = $1 ORDER BY p.name",
        )
        .bind(workspace)
        .bind(user)
        .fetch_all(&self.pool)
        .await
    }

    /// Replaces an agent's settings for one connection.
    pub async fn agent_connection_set(
        &self,
        agent: UserId,
        connection: ConnectionId,
        settings: &AgentConnectionSettings,
        by: UserId,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO agent_connections (agent_id, connection_id, include, exclude, read_only,
                 non_destructive, idempotent, defer, approve, auth_failure, tool_sync_failure,
                 announce, changed_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
             ON CONFLICT (agent_id, connection_id) DO UPDATE SET
                 include = EXCLUDED.include, exclude = EXCLUDED.exclude,
                 read_only = EXCLUDED.read_only, non_destructive = EXCLUDED.non_destructive,
                 idempotent = EXCLUDED.idempotent, defer = EXCLUDED.defer,
                 approve = EXCLUDED.approve, auth_failure = EXCLUDED.auth_failure,
                 tool_sync_failure = EXCLUDED.tool_sync_failure, announce = EXCLUDED.announce,
                 changed_by = EXCLUDED.changed_by, changed_at = now()",
        )
        .bind(agent)
        .bind(connection)
        .bind(&settings.include)
        .bind(&settings.exclude)
        .bind(settings.read_only)
        .bind(settings.non_destructive)
        .bind(settings.idempotent)
        .bind(settings.defer)
        .bind(settings.approve)
        .bind(settings.auth_failure)
        .bind(settings.tool_sync_failure)
        .bind(settings.announce)
        .bind(by)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// An agent's per-connection settings, by connection name.
    pub async fn agent_connections(
        &self,
        agent: UserId,
    ) -> Result<Vec<AgentConnectionRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT ac.connection_id, c.name AS connection_name, ac.include, ac.exclude,
                    ac.read_only, ac.non_destructive, ac.idempotent, ac.defer, ac.approve,
                    ac.auth_failure, ac.tool_sync_failure, ac.announce
             FROM agent_connections ac JOIN connections c ON c.id = ac.connection_id
             WHERE ac.agent_id = $1 ORDER BY c.name",
        )
        .bind(agent)
        .fetch_all(&self.pool)
        .await
    }

    /// The calls `user` submitted that have not been handed to a runner: queued, or held for
    /// a person's approval (what revoking an agent cancels).
    pub async fn calls_waiting_of_submitter(
        &self,
        user: UserId,
    ) -> Result<Vec<(WorkspaceId, CallId, ConnectionId, String)>, sqlx::Error> {
        sqlx::query_as(
            "SELECT workspace_id, id, connection_id, tool_name FROM calls
             WHERE created_by = $1 AND finished_at IS NULL AND lease_epoch IS NULL
             ORDER BY created_at",
        )
        .bind(user)
        .fetch_all(&self.pool)
        .await
    }
}
