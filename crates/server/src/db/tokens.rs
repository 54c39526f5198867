//! Personal API tokens: created, listed and revoked by their user, revoked by an operator, and
//! the one condition under which a token authenticates. Only SHA-256 hashes are stored.

use super::Datastore;
use super::access_changes::{AccessAction, record};
use chrono::{DateTime, Utc};
use serde_json::json;
use std::time::Duration;
use switchyard_protocol::{TokenId, UserId};

/// The condition under which the API token aliased `t` authenticates: neither revoked nor
/// expired. Every statement that accepts a token (a request, a submission's read, a web
/// session) uses it, so a revoked or expired token is refused everywhere at once.
macro_rules! token_live {
    () => {
        "t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())"
    };
}
pub(super) use token_live;

/// A row of `api_tokens`, without its hash.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct TokenRow {
    /// Id.
    pub id: TokenId,
    /// Its user.
    pub user_id: UserId,
    /// Name, to tell a user's tokens apart.
    pub name: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// When it stops working, if it expires.
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
    /// Who revoked it.
    pub revoked_by: Option<UserId>,
}

/// The columns of a [`TokenRow`], for `RETURNING` and `SELECT`.
macro_rules! columns {
    () => {
        "id, user_id, name, created_at, expires_at, revoked_at, revoked_by"
    };
}

impl Datastore {
    /// Stores a new token of `user` (given as a hash), expiring after `expires_in` if given.
    pub async fn token_create(
        &self,
        user: UserId,
        name: &str,
        token_hash: &[u8],
        expires_in: Option<Duration>,
    ) -> Result<TokenRow, sqlx::Error> {
        sqlx::query_as(concat!(
            "INSERT INTO api_tokens (id, user_id, token_hash, name, expires_at)
             VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
             RETURNING ",
            columns!(),
            ""
        ))
        .bind(TokenId::new())
        .bind(user)
        .bind(token_hash)
        .bind(name)
        .bind(expires_in.map(|d| d.as_secs_f64()))
        .fetch_one(&self.pool)
        .await
    }

    /// A user's tokens, revoked and expired ones included, oldest first.
    pub async fn token_list(&self, user: UserId) -> Result<Vec<TokenRow>, sqlx::Error> {
        sqlx::query_as(concat!(
            "SELECT ",
            columns!(),
            " FROM api_tokens WHERE user_id = $1 ORDER BY created_at, id"
        ))
        .bind(user)
        .fetch_all(&self.pool)
        .await
    }

    /// Revokes the tokens of `user` — the one named, or every unrevoked one — on behalf of
    /// `by` (`None`: the operator, from the server's command line), ends their web sessions
    /// and records each revocation, atomically. A token revoked before is answered as it is,
    /// its first revocation kept. Returns the tokens (none when `id` is not `user`'s).
    pub async fn token_revoke(
        &self,
        user: UserId,
        id: Option<TokenId>,
        by: Option<UserId>,
    ) -> Result<Vec<TokenRow>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let revoked: Vec<TokenRow> = sqlx::query_as(concat!(
            "UPDATE api_tokens SET revoked_at = now(), revoked_by = $3
             WHERE user_id = $1 AND ($2::uuid IS NULL OR id = $2) AND revoked_at IS NULL
             RETURNING ",
            columns!(),
            ""
        ))
        .bind(user)
        .bind(id)
        .bind(by)
        .fetch_all(&mut *tx)
        .await?;
        for token in &revoked {
            record(
                &mut tx,
                by,
                AccessAction::TokenRevoked,
                None,
                json!({"user_id": user, "token_id": token.id, "name": token.name}),
            )
            .await?;
        }
        let ids: Vec<TokenId> = revoked.iter().map(|token| token.id).collect();
        sqlx::query("DELETE FROM web_sessions WHERE token_id = ANY($1)")
            .bind(&ids)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        match id {
            Some(id) if revoked.is_empty() => {
                sqlx::query_as(concat!(
                    "SELECT ",
                    columns!(),
                    " FROM api_tokens WHERE user_id = $1 AND id = $2"
                ))
                .bind(user)
                .bind(id)
                .fetch_all(&self.pool)
                .await
            }
            _ => Ok(revoked),
        }
    }
}
