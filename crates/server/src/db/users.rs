//! Users and personal API tokens (stored as SHA-256 hashes).

use super::mcp_sessions::MCP_SESSION_TOUCH_EVERY;
use super::{Datastore, Key};
use chrono::{DateTime, Utc};
use switchyard_protocol::UserId;
use switchyard_protocol::agents::PrincipalKind;
use uuid::Uuid;

/// A row of `users`.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct UserRow {
    /// Id.
    pub id: UserId,
    /// Unique name.
    pub name: String,
    /// Installation owner.
    pub is_owner: bool,
    /// A person, or an agent (whose token is accepted on `/mcp` only).
    pub kind: PrincipalKind,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// `SELECT u.* …`: the person or unrevoked agent holding the unrevoked token whose hash is
/// the placeholder `hash` — who may use `/mcp`.
fn mcp_principal(hash: &str) -> String {
    format!(
        "SELECT u.* FROM users u JOIN api_tokens t ON t.user_id = u.id
         WHERE t.token_hash = {hash} AND {live}
           AND NOT EXISTS (SELECT 1 FROM agents a
                           WHERE a.user_id = u.id AND a.revoked_at IS NOT NULL)",
        live = super::tokens::token_live!(),
    )
}

/// An `/mcp` request's principal ([`Datastore::mcp_principal_in_session`]).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct McpPrincipalRow {
    /// The principal.
    #[sqlx(flatten)]
    pub user: UserRow,
    /// Whether the session the request named exists and was started by this principal.
    pub session_owned: bool,
    /// The generation of every `/mcp` catalog as this read saw it (`mcp_catalog_generation`).
    pub catalog_generation: i64,
}

/// `SELECT u.* …`: the person holding the unrevoked API token whose hash is the placeholder
/// `hash` (and neither revoked nor expired); an agent's token finds nobody here. Shared by [`Datastore::user_by_token_hash`] and a submission's read, which reads it
/// with everything else.
pub(super) fn user_by_token(hash: &str) -> String {
    format!(
        "SELECT u.* FROM users u JOIN api_tokens t ON t.user_id = u.id
         WHERE t.token_hash = {hash} AND u.kind = 'person' AND {live}",
        live = super::tokens::token_live!(),
    )
}

impl Datastore {
    /// Creates a user together with its first API token (given as a hash), atomically.
    pub async fn user_create(
        &self,
        name: &str,
        is_owner: bool,
        token_hash: &[u8],
    ) -> Result<UserRow, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let user: UserRow = sqlx::query_as(
            "INSERT INTO users (id, name, is_owner) VALUES ($1, $2, $3) RETURNING *",
        )
        .bind(Uuid::now_v7())
        .bind(name)
        .bind(is_owner)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO api_tokens (id, user_id, token_hash, name) VALUES ($1, $2, $3, 'initial')",
        )
        .bind(Uuid::now_v7())
        .bind(user.id)
        .bind(token_hash)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(user)
    }

    /// The person holding an unrevoked token with this hash (never an agent).
    pub async fn user_by_token_hash(
        &self,
        token_hash: &[u8],
    ) -> Result<Option<UserRow>, sqlx::Error> {
        static BY_TOKEN: std::sync::LazyLock<std::sync::Arc<str>> =
            std::sync::LazyLock::new(|| user_by_token("$1").into());
        sqlx::query_as(super::sql::text(&BY_TOKEN))
            .bind(token_hash)
            .fetch_optional(&self.pool)
            .await
    }

    /// The person or unrevoked agent holding an unrevoked token with this hash: who may use
    /// `/mcp`.
    pub async fn mcp_principal_by_token_hash(
        &self,
        token_hash: &[u8],
    ) -> Result<Option<UserRow>, sqlx::Error> {
        static BY_TOKEN: std::sync::LazyLock<std::sync::Arc<str>> =
            std::sync::LazyLock::new(|| mcp_principal("$1").into());
        sqlx::query_as(super::sql::text(&BY_TOKEN))
            .bind(token_hash)
            .fetch_optional(&self.pool)
            .await
    }

    /// [`Datastore::mcp_principal_by_token_hash`] and, for a request naming `/mcp` session
    /// `session`, whether that principal started it, with the catalogs' generation — in one
    /// read. The session's use is
    /// recorded only when the last one recorded is older than [`MCP_SESSION_TOUCH_EVERY`]: most
    /// requests only read, and a read waits for no durable commit.
    pub async fn mcp_principal_in_session(
        &self,
        token_hash: &[u8],
        session: Option<&str>,
    ) -> Result<Option<McpPrincipalRow>, sqlx::Error> {
        static IN_SESSION: std::sync::LazyLock<std::sync::Arc<str>> =
            std::sync::LazyLock::new(|| {
                format!(
                    "WITH principal AS ({principal}),
                          owned AS (SELECT s.id, s.last_used_at
                                    FROM mcp_sessions s JOIN principal p ON s.user_id = p.id
                                    WHERE s.id = $2),
                          touched AS (UPDATE mcp_sessions s SET last_used_at = now() FROM owned
                                      WHERE s.id = owned.id
                                        AND owned.last_used_at < now() - make_interval(secs => $3)
                                      RETURNING 1)
                     SELECT p.*, EXISTS (SELECT 1 FROM owned) AS session_owned,
                            (SELECT generation FROM mcp_catalog_generation) AS catalog_generation
                     FROM principal p",
                    principal = mcp_principal("$1"),
                )
                .into()
            });
        sqlx::query_as(super::sql::text(&IN_SESSION))
            .bind(token_hash)
            .bind(session)
            .bind(MCP_SESSION_TOUCH_EVERY.as_secs_f64())
            .fetch_optional(&self.pool)
            .await
    }

    /// A user by id or name.
    pub async fn user_find(&self, key: &Key<'_>) -> Result<Option<UserRow>, sqlx::Error> {
        sqlx::query_as("SELECT * FROM users WHERE id = $1 OR name = $2")
            .bind(key.id())
            .bind(key.name())
            .fetch_optional(&self.pool)
            .await
    }
}
