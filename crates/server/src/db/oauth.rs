//! Connections' auth settings and state (`connection_auth`), their sealed OAuth grants
//! (`oauth_grants`) and the authorizations waiting for a callback (`oauth_pending`); the
//! advisory lock that makes a grant's renewal single-flight across replicas.
//!
//! Sealed values arrive and leave sealed ([`Sealed`]): this file never sees a token.

use super::Datastore;
use super::sealed::begin_sealed_write;
use crate::vault::{Sealed, VaultError};
use chrono::{DateTime, Utc};
use sqlx::pool::PoolConnection;
use sqlx::{Postgres, Row};
use switchyard_protocol::ConnectionId;
use switchyard_protocol::api::{
    AuthKind, AuthState, CredentialHolder, DEFAULT_TOKEN_HEADER, SetConnectionAuth,
};

/// The AEAD context of grant (`connection`, `holder`): what binds a sealed grant to its row.
pub fn grant_context(connection: ConnectionId, holder: &str) -> String {
    format!("oauth-grant:{connection}/{holder}")
}

/// The AEAD context of the pending authorization stored under `digest`.
pub fn pending_context(digest: &[u8]) -> String {
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("oauth-pending:{hex}")
}

/// A grant sealed with a key other than the current one ([`super::sealed`]).
pub(super) struct StaleGrant {
    pub(super) connection: ConnectionId,
    pub(super) holder: String,
    pub(super) sealed: Sealed,
}

/// A pending authorization sealed with a key other than the current one.
pub(super) struct StalePending {
    pub(super) digest: Vec<u8>,
    pub(super) sealed: Sealed,
}

/// `oauth_grants` rows not sealed with `current`, locked for the transaction.
pub(super) async fn stale_grants(
    tx: &mut sqlx::PgConnection,
    current: &str,
) -> Result<Vec<StaleGrant>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT connection_id, holder, key_id, nonce, ciphertext FROM oauth_grants
         WHERE key_id <> $1 FOR UPDATE",
    )
    .bind(current)
    .fetch_all(tx)
    .await?;
    rows.into_iter()
        .map(|row| {
            Ok(StaleGrant {
                connection: row.try_get("connection_id")?,
                holder: row.try_get("holder")?,
                sealed: sealed_of(&row)?,
            })
        })
        .collect()
}

/// `oauth_pending` rows not sealed with `current`, locked for the transaction.
pub(super) async fn stale_pending(
    tx: &mut sqlx::PgConnection,
    current: &str,
) -> Result<Vec<StalePending>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT state_digest, key_id, nonce, ciphertext FROM oauth_pending
         WHERE key_id <> $1 FOR UPDATE",
    )
    .bind(current)
    .fetch_all(tx)
    .await?;
    rows.into_iter()
        .map(|row| {
            Ok(StalePending {
                digest: row.try_get("state_digest")?,
                sealed: sealed_of(&row)?,
            })
        })
        .collect()
}

/// Rewrites grant (`connection`, `holder`) as `sealed` (a rotation's re-seal).
pub(super) async fn reseal_grant(
    tx: &mut sqlx::PgConnection,
    connection: ConnectionId,
    holder: &str,
    sealed: &Sealed,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE oauth_grants SET key_id = $3, nonce = $4, ciphertext = $5
         WHERE connection_id = $1 AND holder = $2",
    )
    .bind(connection)
    .bind(holder)
    .bind(&sealed.key_id)
    .bind(&sealed.nonce)
    .bind(&sealed.ciphertext)
    .execute(tx)
    .await?;
    Ok(())
}

/// Rewrites the pending authorization under `digest` as `sealed` (a rotation's re-seal).
pub(super) async fn reseal_pending(
    tx: &mut sqlx::PgConnection,
    digest: &[u8],
    sealed: &Sealed,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE oauth_pending SET key_id = $2, nonce = $3, ciphertext = $4
         WHERE state_digest = $1",
    )
    .bind(digest)
    .bind(&sealed.key_id)
    .bind(&sealed.nonce)
    .bind(&sealed.ciphertext)
    .execute(tx)
    .await?;
    Ok(())
}

/// The sealed value of a row with `key_id`, `nonce` and `ciphertext` columns.
fn sealed_of(row: &sqlx::postgres::PgRow) -> Result<Sealed, sqlx::Error> {
    Ok(Sealed {
        key_id: row.try_get("key_id")?,
        nonce: row.try_get("nonce")?,
        ciphertext: row.try_get("ciphertext")?,
    })
}

/// A row of `connection_auth`.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct ConnectionAuthRow {
    /// What the connection sends (`None`: discovered at its first authorization).
    pub kind: Option<AuthKind>,
    /// Scopes to ask for.
    pub scopes: Vec<String>,
    /// Server-side variable holding the OAuth client id.
    pub client_id_env: Option<String>,
    /// Server-side variable holding the OAuth client secret.
    pub client_secret_env: Option<String>,
    /// Whose credential it sends.
    pub credential: CredentialHolder,
    /// Whether its credential is usable.
    pub state: AuthState,
    /// The header its static token is sent in (`None`: `Authorization`).
    pub header: Option<String>,
}

/// A sealed OAuth grant with what is kept beside it in clear.
#[derive(Clone, Debug)]
pub struct GrantRow {
    /// The grant, sealed.
    pub sealed: Sealed,
    /// The MCP server URL it was obtained for.
    pub resource: String,
    /// Changed by every save (the writing transaction's id), compared by a renewal's save.
    pub generation: i64,
}

/// What [`Datastore::oauth_grant_save`] writes beside the sealed grant.
#[derive(Clone, Debug)]
pub struct GrantFacts<'a> {
    /// The authorization server that issued it.
    pub issuer: Option<&'a str>,
    /// The MCP server URL it was obtained for.
    pub resource: &'a str,
    /// When its access token expires, if known.
    pub expires_at: Option<DateTime<Utc>>,
}

/// An authorization waiting for its callback.
#[derive(Clone, Debug)]
pub struct PendingRow {
    /// The connection being authorized.
    pub connection_id: ConnectionId,
    /// Whose grant it obtains: `shared`, or a person's user id.
    pub holder: String,
    /// The flow's state, sealed.
    pub sealed: Sealed,
}

/// A PostgreSQL advisory lock on one grant, held on a pooled connection of its own until
/// dropped (the connection then unlocks and goes back to the pool).
pub struct GrantLock {
    connection: Option<PoolConnection<Postgres>>,
}

impl std::fmt::Debug for GrantLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantLock").finish_non_exhaustive()
    }
}

impl Drop for GrantLock {
    fn drop(&mut self) {
        let Some(mut connection) = self.connection.take() else {
            return;
        };
        // Unlocking needs a round trip; a connection that cannot make it is closed, which
        // releases its session's locks too.
        tokio::spawn(async move {
            if sqlx::query("SELECT pg_advisory_unlock_all()")
                .execute(&mut *connection)
                .await
                .is_err()
            {
                connection.close_on_drop();
            }
        });
    }
}

impl Datastore {
    /// The auth settings and state of `connection`, if it has any.
    pub async fn connection_auth_get(
        &self,
        connection: ConnectionId,
    ) -> Result<Option<ConnectionAuthRow>, sqlx::Error> {
        sqlx::query_as(
            "SELECT kind, scopes, client_id_env, client_secret_env, credential, state, header
             FROM connection_auth WHERE connection_id = $1",
        )
        .bind(connection)
        .fetch_optional(&self.pool)
        .await
    }

    /// Replaces the auth settings of `connection` (an omitted `kind` keeps the one it has).
    /// When `kind` changes, its grants and pending authorizations are deleted and it needs
    /// authorization again, in the same transaction. Answers the row after.
    pub async fn connection_auth_set(
        &self,
        connection: ConnectionId,
        settings: &SetConnectionAuth,
    ) -> Result<ConnectionAuthRow, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let before: Option<(Option<AuthKind>, Option<String>, CredentialHolder)> = sqlx::query_as(
            "SELECT kind, header, credential FROM connection_auth
             WHERE connection_id = $1 FOR UPDATE",
        )
        .bind(connection)
        .fetch_optional(&mut *tx)
        .await?;
        // An omitted kind keeps the one declared or discovered: it is no change.
        let kind_changed = settings.kind.is_some()
            && before
                .as_ref()
                .is_some_and(|(kind, _, _)| *kind != settings.kind);
        // Grants held for everybody are not each person's, nor the other way round.
        let holder_changed = before
            .as_ref()
            .is_some_and(|(_, _, credential)| *credential != settings.credential);
        // A static token is the value set for the header it goes in: another kind, or another
        // header, is not what it was set for.
        if let Some((Some(AuthKind::Token), header, _)) = &before {
            let token_header = |header: &Option<String>| {
                header
                    .clone()
                    .unwrap_or_else(|| DEFAULT_TOKEN_HEADER.to_owned())
                    .to_ascii_lowercase()
            };
            let still_token = settings.kind.is_none_or(|kind| kind == AuthKind::Token);
            if !still_token || token_header(header) != token_header(&settings.header) {
                sqlx::query(
                    "DELETE FROM central_credential_values
                     WHERE connection_id = $1 AND destination = 'header' AND lower(name) = $2",
                )
                .bind(connection)
                .bind(token_header(header))
                .execute(&mut *tx)
                .await?;
            }
        }
        if kind_changed || holder_changed {
            // An authorization begun under the old settings must not complete under the new.
            forget_grants(&mut tx, connection).await?;
        }
        let row = sqlx::query_as(
            "INSERT INTO connection_auth
                 (connection_id, kind, scopes, client_id_env, client_secret_env, credential,
                  header)
             VALUES ($1, $2, $3, $4, $5, $6, $8)
             ON CONFLICT (connection_id) DO UPDATE SET
                 kind = COALESCE(EXCLUDED.kind, connection_auth.kind), scopes = EXCLUDED.scopes,
                 client_id_env = EXCLUDED.client_id_env,
                 client_secret_env = EXCLUDED.client_secret_env,
                 credential = EXCLUDED.credential,
                 header = EXCLUDED.header,
                 state = CASE WHEN $7 THEN 'needs_authorization' ELSE connection_auth.state END,
                 updated_at = now()
             RETURNING kind, scopes, client_id_env, client_secret_env, credential, state, header",
        )
        .bind(connection)
        .bind(settings.kind)
        .bind(&settings.scopes)
        .bind(&settings.client_id_env)
        .bind(&settings.client_secret_env)
        .bind(settings.credential)
        .bind(kind_changed || holder_changed)
        .bind(&settings.header)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(row)
    }

    /// Records the kind a first authorization discovered for a connection whose kind was not
    /// declared (creating its row with the defaults when it has none); a declared kind stays.
    pub async fn connection_auth_discovered(
        &self,
        connection: ConnectionId,
        kind: AuthKind,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO connection_auth (connection_id, kind) VALUES ($1, $2)
             ON CONFLICT (connection_id) DO UPDATE SET kind = EXCLUDED.kind, updated_at = now()
                 WHERE connection_auth.kind IS NULL",
        )
        .bind(connection)
        .bind(kind)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Moves `connection` to `state` (one statement); answers whether it changed.
    pub async fn connection_auth_state_set(
        &self,
        connection: ConnectionId,
        state: AuthState,
    ) -> Result<bool, sqlx::Error> {
        let changed = sqlx::query(
            "UPDATE connection_auth SET state = $2, updated_at = now()
             WHERE connection_id = $1 AND state IS DISTINCT FROM $2",
        )
        .bind(connection)
        .bind(state)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(changed > 0)
    }

    /// Records `state` as reported by the device a connection is placed on (its grant lives
    /// there): made the connection's auth row when it has none (kind not declared). Answers
    /// whether it changed.
    pub async fn connection_auth_state_reported(
        &self,
        connection: ConnectionId,
        state: AuthState,
    ) -> Result<bool, sqlx::Error> {
        let changed = sqlx::query(
            "INSERT INTO connection_auth (connection_id, state) VALUES ($1, $2)
             ON CONFLICT (connection_id) DO UPDATE SET state = EXCLUDED.state, updated_at = now()
             WHERE connection_auth.state IS DISTINCT FROM EXCLUDED.state",
        )
        .bind(connection)
        .bind(state)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(changed > 0)
    }

    /// The grant of (`connection`, `holder`), if there is one.
    pub async fn oauth_grant_get(
        &self,
        connection: ConnectionId,
        holder: &str,
    ) -> Result<Option<GrantRow>, sqlx::Error> {
        let row = sqlx::query(
            "SELECT key_id, nonce, ciphertext, resource, generation FROM oauth_grants
             WHERE connection_id = $1 AND holder = $2",
        )
        .bind(connection)
        .bind(holder)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(GrantRow {
                sealed: sealed_of(&row)?,
                resource: row.try_get("resource")?,
                generation: row.try_get("generation")?,
            })
        })
        .transpose()
    }

    /// Stores the grant of (`connection`, `holder`) that a person's authorization obtained,
    /// as `seal` seals it (called under the sealed-write lock, [`super::sealed`]), replacing
    /// any grant before it with a new generation, and marks the connection `authorized` in the
    /// same transaction. The inner error: `seal` failed, nothing written.
    pub async fn oauth_grant_save(
        &self,
        connection: ConnectionId,
        holder: &str,
        seal: impl FnOnce() -> Result<Sealed, VaultError>,
        facts: &GrantFacts<'_>,
    ) -> Result<Result<(), VaultError>, sqlx::Error> {
        let (mut tx, sealed) = match begin_sealed_write(&self.pool, seal).await? {
            Ok(begun) => begun,
            Err(error) => return Ok(Err(error)),
        };
        // The generation is the writing transaction's id: unique and growing across deletes,
        // so a renewal that read a deleted grant's generation never matches its successor.
        sqlx::query(
            "INSERT INTO oauth_grants (connection_id, holder, key_id, nonce, ciphertext, issuer,
                 resource, expires_at, generation)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, txid_current())
             ON CONFLICT (connection_id, holder) DO UPDATE SET
                 key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce,
                 ciphertext = EXCLUDED.ciphertext, issuer = EXCLUDED.issuer,
                 resource = EXCLUDED.resource, expires_at = EXCLUDED.expires_at,
                 generation = txid_current(), updated_at = now()",
        )
        .bind(connection)
        .bind(holder)
        .bind(&sealed.key_id)
        .bind(&sealed.nonce)
        .bind(&sealed.ciphertext)
        .bind(facts.issuer)
        .bind(facts.resource)
        .bind(facts.expires_at)
        .execute(&mut *tx)
        .await?;
        // The connection's state is the shared grant's; a person's shows in their own view.
        if holder == CredentialHolder::Shared.as_str() {
            sqlx::query(
                "INSERT INTO connection_auth (connection_id, kind, state, authorized_at)
                     VALUES ($1, 'oauth', 'authorized', now())
                 ON CONFLICT (connection_id) DO UPDATE SET state = 'authorized',
                     updated_at = now(), authorized_at = now()",
            )
            .bind(connection)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(Ok(()))
    }

    /// Replaces grant (`connection`, `holder`) with its renewal, as `seal` seals it under the
    /// sealed-write lock, only while it is still at `generation` (the one the renewal read
    /// under the grant's lock): answers `false`, nothing written, when it was revoked or
    /// replaced by a new authorization meanwhile. The inner error: `seal` failed.
    pub async fn oauth_grant_renewed(
        &self,
        connection: ConnectionId,
        holder: &str,
        generation: i64,
        seal: impl FnOnce() -> Result<Sealed, VaultError>,
        facts: &GrantFacts<'_>,
    ) -> Result<Result<bool, VaultError>, sqlx::Error> {
        let (mut tx, sealed) = match begin_sealed_write(&self.pool, seal).await? {
            Ok(begun) => begun,
            Err(error) => return Ok(Err(error)),
        };
        let updated = sqlx::query(
            "UPDATE oauth_grants SET key_id = $4, nonce = $5, ciphertext = $6, issuer = $7,
                 expires_at = $8, generation = txid_current(), updated_at = now()
             WHERE connection_id = $1 AND holder = $2 AND generation = $3",
        )
        .bind(connection)
        .bind(holder)
        .bind(generation)
        .bind(&sealed.key_id)
        .bind(&sealed.nonce)
        .bind(&sealed.ciphertext)
        .bind(facts.issuer)
        .bind(facts.expires_at)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if updated != 1 {
            return Ok(Ok(false));
        }
        if holder != CredentialHolder::Shared.as_str() {
            tx.commit().await?;
            return Ok(Ok(true));
        }
        sqlx::query(
            "UPDATE connection_auth SET state = 'authorized', updated_at = now()
             WHERE connection_id = $1 AND state IS DISTINCT FROM 'authorized'",
        )
        .bind(connection)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Ok(true))
    }

    /// Deletes every grant of `connection` (every holder's) and the authorizations waiting
    /// for their callback (a revoke also stops one begun before it) and, when it had auth
    /// settings, moves it to `needs_authorization`; answers how many grants there were.
    pub async fn oauth_grants_delete(&self, connection: ConnectionId) -> Result<u64, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        let deleted = forget_grants(&mut tx, connection).await?;
        sqlx::query(
            "UPDATE connection_auth SET state = 'needs_authorization', updated_at = now()
             WHERE connection_id = $1",
        )
        .bind(connection)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(deleted)
    }

    /// Deletes the grant of (`connection`, `holder`) alone: a person's grant that can no
    /// longer be renewed — only at `generation` when given (the one the renewal read: a grant
    /// the person obtained anew meanwhile stays). Answers whether one was deleted.
    pub async fn oauth_grant_delete(
        &self,
        connection: ConnectionId,
        holder: &str,
        generation: Option<i64>,
    ) -> Result<bool, sqlx::Error> {
        let deleted = sqlx::query(
            "DELETE FROM oauth_grants WHERE connection_id = $1 AND holder = $2
                 AND ($3::int8 IS NULL OR generation = $3)",
        )
        .bind(connection)
        .bind(holder)
        .bind(generation)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(deleted > 0)
    }

    /// When `holder` last obtained or renewed a grant, for each of `connections` it holds one
    /// for.
    pub async fn oauth_grants_held(
        &self,
        connections: &[ConnectionId],
        holder: &str,
    ) -> Result<Vec<(ConnectionId, DateTime<Utc>)>, sqlx::Error> {
        let rows = sqlx::query(
            "SELECT connection_id, updated_at FROM oauth_grants
             WHERE connection_id = ANY($1) AND holder = $2",
        )
        .bind(connections)
        .bind(holder)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("connection_id")?, row.try_get("updated_at")?)))
            .collect()
    }

    /// Takes the advisory lock of grant (`connection`, `holder`), waiting at most `wait` while
    /// another holds it (on any replica): `None` when it was not free in time. The wait is
    /// the session's `lock_timeout`, reset before the connection is used again.
    pub async fn oauth_grant_lock(
        &self,
        connection: ConnectionId,
        holder: &str,
        wait: std::time::Duration,
    ) -> Result<Option<GrantLock>, sqlx::Error> {
        let mut lock = GrantLock {
            connection: Some(self.pool.acquire().await?),
        };
        let session = lock.connection.as_mut().expect("just acquired");
        let millis = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).max(1);
        sqlx::query("SELECT set_config('lock_timeout', $1, false)")
            .bind(format!("{millis}ms"))
            .execute(&mut **session)
            .await?;
        // The key is the grant's AEAD context, hashed: one lock per grant, the same on every
        // replica.
        let locked = sqlx::query(
            "SELECT pg_advisory_lock(hashtextextended('oauth-grant:' || $1::text || '/' || $2, 0))",
        )
        .bind(connection)
        .bind(holder)
        .execute(&mut **session)
        .await;
        // The pooled connection goes back without the bound (or is closed, which releases
        // the lock too, when it cannot be reset).
        if let Err(error) = sqlx::query("RESET lock_timeout")
            .execute(&mut **session)
            .await
        {
            if let Some(mut connection) = lock.connection.take() {
                connection.close_on_drop();
            }
            return Err(error);
        }
        match locked {
            Ok(_) => Ok(Some(lock)),
            // 55P03 lock_not_available: `lock_timeout` passed.
            Err(sqlx::Error::Database(error)) if error.code().as_deref() == Some("55P03") => {
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// Stores an authorization waiting for its callback under `digest` (of its state), as
    /// `seal` seals it under the sealed-write lock. The inner error: `seal` failed.
    pub async fn oauth_pending_put(
        &self,
        digest: &[u8],
        connection: ConnectionId,
        holder: &str,
        seal: impl FnOnce() -> Result<Sealed, VaultError>,
        expires_at: DateTime<Utc>,
    ) -> Result<Result<(), VaultError>, sqlx::Error> {
        let (mut tx, sealed) = match begin_sealed_write(&self.pool, seal).await? {
            Ok(begun) => begun,
            Err(error) => return Ok(Err(error)),
        };
        sqlx::query(
            "INSERT INTO oauth_pending
                 (state_digest, connection_id, holder, key_id, nonce, ciphertext, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(digest)
        .bind(connection)
        .bind(holder)
        .bind(&sealed.key_id)
        .bind(&sealed.nonce)
        .bind(&sealed.ciphertext)
        .bind(expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Ok(()))
    }

    /// The authorization waiting under `digest`, unless it expired.
    pub async fn oauth_pending_get(
        &self,
        digest: &[u8],
    ) -> Result<Option<PendingRow>, sqlx::Error> {
        let row = sqlx::query(
            "SELECT connection_id, holder, key_id, nonce, ciphertext FROM oauth_pending
             WHERE state_digest = $1 AND expires_at > now()",
        )
        .bind(digest)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(PendingRow {
                connection_id: row.try_get("connection_id")?,
                holder: row.try_get("holder")?,
                sealed: sealed_of(&row)?,
            })
        })
        .transpose()
    }

    /// Consumes the authorization waiting under `digest` at its callback: answers whether
    /// this caller took it (`false`: it expired, or another callback took it first).
    pub async fn oauth_pending_take(&self, digest: &[u8]) -> Result<bool, sqlx::Error> {
        let taken =
            sqlx::query("DELETE FROM oauth_pending WHERE state_digest = $1 AND expires_at > now()")
                .bind(digest)
                .execute(&self.pool)
                .await?
                .rows_affected();
        Ok(taken == 1)
    }

    /// Forgets the authorization waiting under `digest` (abandoned).
    pub async fn oauth_pending_delete(&self, digest: &[u8]) -> Result<(), sqlx::Error> {
        sqlx::query("DELETE FROM oauth_pending WHERE state_digest = $1")
            .bind(digest)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Forgets the authorizations whose callback never came in time; answers how many.
    pub async fn oauth_pending_expire(&self) -> Result<u64, sqlx::Error> {
        Ok(
            sqlx::query("DELETE FROM oauth_pending WHERE expires_at <= now()")
                .execute(&self.pool)
                .await?
                .rows_affected(),
        )
    }
}

/// Deletes every grant of `connection` (every holder's) and the authorizations waiting for
/// their callback, in the caller's transaction; answers how many grants there were.
async fn forget_grants(
    conn: &mut sqlx::PgConnection,
    connection: ConnectionId,
) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query("DELETE FROM oauth_grants WHERE connection_id = $1")
        .bind(connection)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    sqlx::query("DELETE FROM oauth_pending WHERE connection_id = $1")
        .bind(connection)
        .execute(&mut *conn)
        .await?;
    Ok(deleted)
}
