//! Sessions of `/mcp` clients on the session-era protocol (`Mcp-Session-Id`): the client's
//! `initialize` parameters, so that any replica can replay the handshake of a session another
//! one started, and the principal who started it, so that no one else can use it.

use super::Datastore;
use switchyard_protocol::UserId;

/// A session not named by any request this long is deleted by the sweeper.
pub const MCP_SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
/// A session's use is recorded at most this often (by the principal's read,
/// [`Datastore::mcp_principal_in_session`]): far below [`MCP_SESSION_IDLE`], so a session in
/// use is never swept.
pub const MCP_SESSION_TOUCH_EVERY: std::time::Duration = std::time::Duration::from_secs(300);

impl Datastore {
    /// Stores (or replaces) a session's `initialize` parameters; the owner is set by
    /// [`Datastore::mcp_session_claim`].
    pub async fn mcp_session_store(
        &self,
        id: &str,
        initialize_params: &serde_json::Value,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO mcp_sessions (id, initialize_params) VALUES ($1, $2)
             ON CONFLICT (id) DO UPDATE SET initialize_params = EXCLUDED.initialize_params,
                                            last_used_at = now()",
        )
        .bind(id)
        .bind(initialize_params)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Makes `user` the owner of a session stored without one; false when there is no such
    /// session (or it already has an owner).
    pub async fn mcp_session_claim(&self, id: &str, user: UserId) -> Result<bool, sqlx::Error> {
        let done =
            sqlx::query("UPDATE mcp_sessions SET user_id = $2 WHERE id = $1 AND user_id IS NULL")
                .bind(id)
                .bind(user)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    /// A session's `initialize` parameters, if it is stored.
    pub async fn mcp_session_load(
        &self,
        id: &str,
    ) -> Result<Option<serde_json::Value>, sqlx::Error> {
        sqlx::query_scalar("SELECT initialize_params FROM mcp_sessions WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await
    }

    /// Deletes a session (the client ended it).
    pub async fn mcp_session_delete(&self, id: &str) -> Result<(), sqlx::Error> {
        sqlx::query("DELETE FROM mcp_sessions WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Deletes the sessions no request named for [`MCP_SESSION_IDLE`]; how many.
    pub async fn mcp_session_sweep(&self) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(
            "DELETE FROM mcp_sessions WHERE last_used_at < now() - make_interval(secs => $1)",
        )
        .bind(MCP_SESSION_IDLE.as_secs_f64())
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}
