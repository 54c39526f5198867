//! Browser sessions of the web UI. Rows hold the SHA-256 of the session id, never the id
//! itself; a session is only valid while it has not expired and the API token it was signed in
//! with is not revoked.

use super::tokens::token_live;
use super::{Datastore, UserRow};
use std::time::Duration;

/// A live session's user and CSRF token.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct WebSessionRow {
    /// The signed-in user.
    #[sqlx(flatten)]
    pub user: UserRow,
    /// The session's CSRF token.
    pub csrf_token: String,
}

/// How long sessions live: idle timeout (sliding) and absolute lifetime.
#[derive(Clone, Copy, Debug)]
pub struct SessionTimes {
    /// A session unused this long ends.
    pub idle: Duration,
    /// No session outlives this, however often it is used.
    pub lifetime: Duration,
}

impl Datastore {
    /// Creates a session for the holder of the unrevoked API token with `token_hash`. Returns
    /// `None` when no person holds such a token — an agent's token signs nobody in (nothing is
    /// written then).
    pub async fn web_session_insert(
        &self,
        id_hash: &[u8],
        token_hash: &[u8],
        csrf_token: &str,
        times: SessionTimes,
    ) -> Result<Option<WebSessionRow>, sqlx::Error> {
        sqlx::query_as(concat!(
            "WITH s AS (
                 INSERT INTO web_sessions (id_hash, user_id, token_id, csrf_token, expires_at)
                 SELECT $1, t.user_id, t.id, $3,
                        now() + LEAST(make_interval(secs => $4), make_interval(secs => $5))
                 FROM api_tokens t JOIN users tu ON tu.id = t.user_id AND tu.kind = 'person'
                 WHERE t.token_hash = $2 AND ",
            token_live!(),
            "
                 RETURNING user_id, csrf_token)
             SELECT u.*, s.csrf_token FROM users u JOIN s ON s.user_id = u.id",
        ))
        .bind(id_hash)
        .bind(token_hash)
        .bind(csrf_token)
        .bind(times.idle.as_secs_f64())
        .bind(times.lifetime.as_secs_f64())
        .fetch_optional(&self.pool)
        .await
    }

    /// Resumes a live session and slides its expiry; `None` when it expired, was ended, or its
    /// token was revoked.
    pub async fn web_session_touch(
        &self,
        id_hash: &[u8],
        times: SessionTimes,
    ) -> Result<Option<WebSessionRow>, sqlx::Error> {
        sqlx::query_as(concat!(
            "WITH s AS (
                 UPDATE web_sessions s SET last_used_at = now(),
                     expires_at = LEAST(s.created_at + make_interval(secs => $3), now() + make_interval(secs => $2))
                 FROM api_tokens t
                 WHERE s.id_hash = $1 AND s.expires_at > now() AND t.id = s.token_id
                   AND EXISTS (SELECT 1 FROM users tu WHERE tu.id = t.user_id AND tu.kind = 'person') AND ",
            token_live!(),
            "
                 RETURNING s.user_id, s.csrf_token)
             SELECT u.*, s.csrf_token FROM users u JOIN s ON s.user_id = u.id",
        ))
        .bind(id_hash)
        .bind(times.idle.as_secs_f64())
        .bind(times.lifetime.as_secs_f64())
        .fetch_optional(&self.pool)
        .await
    }

    /// Whether a session is still live, without touching it (for long-lived streams that ask
    /// often).
    pub async fn web_session_live(&self, id_hash: &[u8]) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(concat!(
            "SELECT EXISTS (SELECT 1 FROM web_sessions s JOIN api_tokens t ON t.id = s.token_id
                            WHERE s.id_hash = $1 AND s.expires_at > now() AND ",
            token_live!(),
            ")",
        ))
        .bind(id_hash)
        .fetch_one(&self.pool)
        .await
    }

    /// Ends a session. Returns whether one was there.
    pub async fn web_session_delete(&self, id_hash: &[u8]) -> Result<bool, sqlx::Error> {
        let done = sqlx::query("DELETE FROM web_sessions WHERE id_hash = $1")
            .bind(id_hash)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Deletes expired sessions. Returns how many.
    pub async fn web_session_sweep(&self) -> Result<u64, sqlx::Error> {
        let done = sqlx::query("DELETE FROM web_sessions WHERE expires_at <= now()")
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}
