//! The routes of an `/mcp` principal: each connection it may use, with the profile it holds
//! Use on that includes it (a connection reached through several profiles is listed once per
//! profile; choosing is the app's), and the routes a profile would add to them.

use super::Datastore;
use super::sql::text;
use std::sync::{Arc, LazyLock};
use switchyard_protocol::agents::UnavailableReason;
use switchyard_protocol::approval::ApprovalPolicy;
use switchyard_protocol::{ConnectionId, EnvironmentId, ProfileId, RunnerRef, UserId, WorkspaceId};

/// A connection a user may use, through one profile.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct McpRouteRow {
    /// The connection.
    pub connection_id: ConnectionId,
    /// Its name.
    pub connection_name: String,
    /// Its namespace (the slug its tools are exposed under).
    pub namespace: String,
    /// Where its calls run.
    pub runner_ref: RunnerRef,
    /// The error of its latest discovery, if that failed (for the log only).
    pub last_discovery_error: Option<String>,
    /// Why its tools are unavailable, as its latest discovery or a call refused for its
    /// credential recorded it (`None`: nothing known against it).
    pub unavailable: Option<UnavailableReason>,
    /// Whether it was ever discovered.
    pub discovered: bool,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// The workspace's name.
    pub workspace_name: String,
    /// The profile the user holds Use on.
    pub profile_id: ProfileId,
    /// The profile's name.
    pub profile_name: String,
    /// The tools the profile grants on the connection (`None`: all of them).
    pub granted_tools: Option<Vec<String>>,
    /// The profile's environment.
    pub environment_id: EnvironmentId,
    /// The profile's approval policy for the connection.
    pub approval_policy: ApprovalPolicy,
    /// Whether the connection's tools are exposed as `namespace__tool`.
    pub prefix_tools: bool,
    /// What its server said it is for, at its latest discovery.
    pub about: Option<String>,
}

/// The columns and joins of a route, up to its `WHERE`: an unretired profile, the unretired
/// connections it includes, and their workspace. `{grants}` joins what says whose route it is.
fn routes(grants: &str) -> String {
    format!(
        "SELECT c.id AS connection_id, c.name AS connection_name, c.namespace, c.runner_ref,
                c.last_discovery_error, c.unavailable, c.last_discovery_at IS NOT NULL AS discovered,
                w.id AS workspace_id, w.name AS workspace_name,
                p.id AS profile_id, p.name AS profile_name, pc.tools AS granted_tools,
                p.environment_id, pc.approval_policy, c.prefix_tools, c.about
         FROM profiles p
         {grants}
         JOIN workspaces w ON w.id = p.workspace_id
         JOIN profile_connections pc ON pc.profile_id = p.id
         JOIN connections c ON c.id = pc.connection_id AND c.retired_at IS NULL
         WHERE p.retired_at IS NULL"
    )
}

impl Datastore {
    /// Every (connection, profile) pair by which `user` may call a connection's tools: Use on
    /// an unretired profile of a workspace the user is a member of, that includes the
    /// unretired connection; by workspace, namespace and profile name.
    pub async fn mcp_routes(&self, user: UserId) -> Result<Vec<McpRouteRow>, sqlx::Error> {
        static STATEMENT: LazyLock<Arc<str>> = LazyLock::new(|| {
            format!(
                "{} AND g.user_id = $1 AND g.grant_kind = 'use'
                 ORDER BY w.name, c.namespace, p.name",
                routes(
                    "JOIN profile_grants g ON g.profile_id = p.id
                     JOIN workspace_members m
                         ON m.workspace_id = p.workspace_id AND m.user_id = g.user_id"
                )
            )
            .into()
        });
        sqlx::query_as(text(&STATEMENT))
            .bind(user)
            .fetch_all(&self.pool)
            .await
    }

    /// The routes Use on `profile` gives (to a member of its workspace): one per unretired
    /// connection it includes, by namespace; none when it is retired.
    pub async fn mcp_routes_of_profile(
        &self,
        profile: ProfileId,
    ) -> Result<Vec<McpRouteRow>, sqlx::Error> {
        static STATEMENT: LazyLock<Arc<str>> =
            LazyLock::new(|| format!("{} AND p.id = $1 ORDER BY c.namespace", routes("")).into());
        sqlx::query_as(text(&STATEMENT))
            .bind(profile)
            .fetch_all(&self.pool)
            .await
    }
}
