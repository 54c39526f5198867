//! Execution profiles, their connections and the independent grants on them.

use super::access_changes::{AccessAction, record};
use super::{Datastore, Key};
use chrono::{DateTime, Utc};
use serde_json::json;
use switchyard_protocol::{ConnectionId, EnvironmentId, ProfileId, UserId, WorkspaceId};
use uuid::Uuid;

/// A row of `profiles`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ProfileRow {
    /// Id.
    pub id: ProfileId,
    /// Workspace.
    pub workspace_id: WorkspaceId,
    /// Environment the profile runs in.
    pub environment_id: EnvironmentId,
    /// Name, unique in the workspace.
    pub name: String,
    /// When it was retired (`None`: in service).
    pub retired_at: Option<DateTime<Utc>>,
    /// Who retired it.
    pub retired_by: Option<UserId>,
}

/// The grants one user holds on one profile. Independent: none implies another.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grants {
    /// Run tools and read results.
    pub use_: bool,
    /// Edit the profile.
    pub manage: bool,
    /// Grant to others.
    pub share: bool,
    /// Answer approval questions about the profile's calls (never one's own).
    pub approve: bool,
}

impl Grants {
    /// The names of the grants held (`use`, `manage`, `share`).
    pub fn kinds(self) -> Vec<&'static str> {
        [
            ("use", self.use_),
            ("manage", self.manage),
            ("share", self.share),
            ("approve", self.approve),
        ]
        .into_iter()
        .filter_map(|(kind, held)| held.then_some(kind))
        .collect()
    }

    fn from_kinds(kinds: &[String]) -> Self {
        Grants {
            use_: kinds.iter().any(|k| k == "use"),
            manage: kinds.iter().any(|k| k == "manage"),
            share: kinds.iter().any(|k| k == "share"),
            approve: kinds.iter().any(|k| k == "approve"),
        }
    }
}

/// A profile to create ([`Datastore::profile_create`]).
#[derive(Clone, Copy, Debug)]
pub struct NewProfile<'a> {
    /// Its workspace.
    pub workspace: WorkspaceId,
    /// The environment it runs in.
    pub environment: EnvironmentId,
    /// Its name.
    pub name: &'a str,
    /// The connections it may run.
    pub connections: &'a [ConnectionId],
    /// The exact tools it grants of each connection; `None`: each whole.
    pub tools: Option<&'a [String]>,
    /// Who creates it.
    pub creator: UserId,
    /// What the creator receives.
    pub creator_grants: Grants,
}

impl Datastore {
    /// Creates a profile with its connections and its creator's grants, atomically.
    pub async fn profile_create(&self, new: NewProfile<'_>) -> Result<ProfileRow, sqlx::Error> {
        let NewProfile {
            workspace,
            environment,
            name,
            connections,
            tools,
            creator,
            creator_grants,
        } = new;
        let mut tx = self.pool.begin().await?;
        let profile: ProfileRow = sqlx::query_as(
            "INSERT INTO profiles (id, workspace_id, environment_id, name) VALUES ($1, $2, $3, $4)
             RETURNING id, workspace_id, environment_id, name, retired_at, retired_by",
        )
        .bind(Uuid::now_v7())
        .bind(workspace)
        .bind(environment)
        .bind(name)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO profile_connections (profile_id, connection_id, tools, changed_by, changed_at)
             SELECT $1, unnest($2::uuid[]), $3, $4, now() ON CONFLICT DO NOTHING",
        )
        .bind(profile.id)
        .bind(connections)
        .bind(tools)
        .bind(creator)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO profile_grants (profile_id, user_id, grant_kind, granted_by)
             SELECT $1, $2, unnest($3::text[]), $2",
        )
        .bind(profile.id)
        .bind(creator)
        .bind(creator_grants.kinds())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(profile)
    }

    /// A profile of a workspace by id or name.
    pub async fn profile_find(
        &self,
        workspace: WorkspaceId,
        key: &Key<'_>,
    ) -> Result<Option<ProfileRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT id, workspace_id, environment_id, name, retired_at, retired_by FROM profiles
             WHERE workspace_id = $1 AND (id = $2 OR name = $3)",
        )
        .bind(workspace)
        .bind(key.id())
        .bind(key.name())
        .fetch_optional(&self.pool)
        .await
    }

    /// A profile by id.
    pub async fn profile_get(&self, id: ProfileId) -> Result<ProfileRow, sqlx::Error> {
        sqlx::query_as("SELECT id, workspace_id, environment_id, name, retired_at, retired_by FROM profiles WHERE id = $1")
            .bind(id)
            .fetch_one(&self.pool)
            .await
    }

    /// The profiles of a workspace, by name.
    pub async fn profile_list(
        &self,
        workspace: WorkspaceId,
    ) -> Result<Vec<ProfileRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT id, workspace_id, environment_id, name, retired_at, retired_by FROM profiles WHERE workspace_id = $1 ORDER BY name",
        )
        .bind(workspace)
        .fetch_all(&self.pool)
        .await
    }

    /// The connections a profile may run.
    pub async fn profile_connection_ids(
        &self,
        profile: ProfileId,
    ) -> Result<Vec<ConnectionId>, sqlx::Error> {
        sqlx::query_scalar("SELECT connection_id FROM profile_connections WHERE profile_id = $1 ORDER BY connection_id")
            .bind(profile)
            .fetch_all(&self.pool)
            .await
    }

    /// The connections of a profile that it grants only some tools of, with those tools.
    pub async fn profile_tool_sets(
        &self,
        profile: ProfileId,
    ) -> Result<Vec<(ConnectionId, Vec<String>)>, sqlx::Error> {
        sqlx::query_as(
            "SELECT connection_id, tools FROM profile_connections
             WHERE profile_id = $1 AND tools IS NOT NULL ORDER BY connection_id",
        )
        .bind(profile)
        .fetch_all(&self.pool)
        .await
    }

    /// Replaces the set of `connection`'s tools that a profile grants (`None`: the connection
    /// whole), recording who did it. False when the profile does not include the connection.
    pub async fn profile_set_tools(
        &self,
        profile: ProfileId,
        connection: ConnectionId,
        tools: Option<&[String]>,
        by: UserId,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(
            "UPDATE profile_connections SET tools = $3, changed_by = $4, changed_at = now()
             WHERE profile_id = $1 AND connection_id = $2",
        )
        .bind(profile)
        .bind(connection)
        .bind(tools)
        .bind(by)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Whether a profile may run a connection.
    pub async fn profile_has_connection(
        &self,
        profile: ProfileId,
        connection: ConnectionId,
    ) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM profile_connections WHERE profile_id = $1 AND connection_id = $2)",
        )
        .bind(profile)
        .bind(connection)
        .fetch_one(&self.pool)
        .await
    }

    /// Adds grants (existing ones are kept).
    pub async fn grant_add(
        &self,
        profile: ProfileId,
        user: UserId,
        grants: Grants,
        by: UserId,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO profile_grants (profile_id, user_id, grant_kind, granted_by)
             SELECT $1, $2, unnest($3::text[]), $4 ON CONFLICT DO NOTHING",
        )
        .bind(profile)
        .bind(user)
        .bind(grants.kinds())
        .bind(by)
        .execute(&self.pool)
        .await
        .map(drop)
    }

    /// Takes `grants` on a profile from a user, and records who did it, atomically. Returns
    /// the grants taken (those the user held).
    pub async fn grant_remove(
        &self,
        profile: &ProfileRow,
        user: UserId,
        grants: Grants,
        by: UserId,
    ) -> Result<Grants, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let removed: Vec<String> = sqlx::query_scalar(
            "DELETE FROM profile_grants
             WHERE profile_id = $1 AND user_id = $2 AND grant_kind = ANY($3::text[])
             RETURNING grant_kind",
        )
        .bind(profile.id)
        .bind(user)
        .bind(grants.kinds())
        .fetch_all(&mut *tx)
        .await?;
        if !removed.is_empty() {
            record(
                &mut tx,
                Some(by),
                AccessAction::GrantRevoked,
                Some(profile.workspace_id),
                json!({"profile_id": profile.id, "user_id": user, "grants": removed}),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(Grants::from_kinds(&removed))
    }

    /// The grants a user holds on a profile right now.
    pub async fn grants_of(&self, profile: ProfileId, user: UserId) -> Result<Grants, sqlx::Error> {
        let kinds: Vec<String> = sqlx::query_scalar(
            "SELECT grant_kind FROM profile_grants WHERE profile_id = $1 AND user_id = $2",
        )
        .bind(profile)
        .bind(user)
        .fetch_all(&self.pool)
        .await?;
        Ok(Grants::from_kinds(&kinds))
    }

    /// The in-service profiles that may run `connection`, by name, each with how many users
    /// hold a `use` grant on it.
    pub async fn connection_profiles(
        &self,
        connection: ConnectionId,
    ) -> Result<Vec<(String, i64)>, sqlx::Error> {
        sqlx::query_as(
            "SELECT p.name, (SELECT count(*) FROM profile_grants g
                             WHERE g.profile_id = p.id AND g.grant_kind = 'use')
             FROM profile_connections pc JOIN profiles p ON p.id = pc.profile_id
             WHERE pc.connection_id = $1 AND p.retired_at IS NULL ORDER BY p.name",
        )
        .bind(connection)
        .fetch_all(&self.pool)
        .await
    }

    /// Everyone's grants on a profile: (user id, user name, grants), by user name.
    pub async fn grant_list(
        &self,
        profile: ProfileId,
    ) -> Result<Vec<(UserId, String, Grants)>, sqlx::Error> {
        let rows: Vec<(UserId, String, Vec<String>)> = sqlx::query_as(
            "SELECT g.user_id, u.name, array_agg(g.grant_kind) FROM profile_grants g
             JOIN users u ON u.id = g.user_id WHERE g.profile_id = $1
             GROUP BY g.user_id, u.name ORDER BY u.name",
        )
        .bind(profile)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, name, kinds)| (id, name, Grants::from_kinds(&kinds)))
            .collect())
    }
}
