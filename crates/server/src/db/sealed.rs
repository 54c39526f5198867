//! Values sealed with the installation key, wherever they are stored: the one list of sealed
//! tables ([`SealedTable::ALL`]) and re-sealing every value with the newest key
//! (`switchyard-server admin rotate-key`, `app/rotate_key.rs`). A new table of sealed values
//! is one more [`SealedTable`] variant: its stale rows and how to rewrite one.
//!
//! Writers of sealed values take the sealed-write lock shared, in their transaction, before
//! they read the key file and seal ([`begin_sealed_write`]); a rotation holds it exclusively
//! from before it adds a key until after it drops the old ones ([`SealedExclusive`]). So no
//! value is sealed with a key a rotation is about to drop, and none is written while the
//! rotation's re-sealing transaction could miss it.

use super::Datastore;
use super::credential_values::credential_context;
use crate::vault::{Sealed, Vault, VaultError};
use sqlx::{Connection, PgConnection, PgPool, Postgres, Transaction};
use switchyard_mcp_runner::credentials::Destination;
use switchyard_protocol::ConnectionId;

/// The advisory lock key of sealed writes (any constant no other lock uses).
const SEALED_WRITE_LOCK: i64 = 0x5357_5345_414c_4544;

/// A transaction holding the sealed-write lock (shared, until its end), and the value `seal`
/// made under it, so that it is sealed with the key file as it is while no rotation runs.
/// `seal`'s error comes back as the inner `Err`, with the transaction dropped: nothing written.
pub(super) async fn begin_sealed_write(
    pool: &PgPool,
    seal: impl FnOnce() -> Result<Sealed, VaultError>,
) -> Result<Result<(Transaction<'static, Postgres>, Sealed), VaultError>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock_shared($1)")
        .bind(SEALED_WRITE_LOCK)
        .execute(&mut *tx)
        .await?;
    Ok(seal().map(|sealed| (tx, sealed)))
}

/// A table of values sealed with the installation key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SealedTable {
    /// Central connections' credential values (`central_credential_values`).
    CentralCredentialValues,
    /// Central connections' OAuth grants (`oauth_grants`).
    OAuthGrants,
    /// OAuth authorizations waiting for their callback (`oauth_pending`).
    OAuthPending,
}

impl SealedTable {
    /// Every table of sealed values: what a rotation re-seals.
    pub const ALL: [SealedTable; 3] = [
        SealedTable::CentralCredentialValues,
        SealedTable::OAuthGrants,
        SealedTable::OAuthPending,
    ];

    /// The table's name.
    pub fn name(self) -> &'static str {
        match self {
            SealedTable::CentralCredentialValues => "central_credential_values",
            SealedTable::OAuthGrants => "oauth_grants",
            SealedTable::OAuthPending => "oauth_pending",
        }
    }

    /// How many values the table holds.
    async fn count(self, pool: &PgPool) -> Result<i64, sqlx::Error> {
        let query = match self {
            SealedTable::CentralCredentialValues => {
                "SELECT count(*) FROM central_credential_values"
            }
            SealedTable::OAuthGrants => "SELECT count(*) FROM oauth_grants",
            SealedTable::OAuthPending => "SELECT count(*) FROM oauth_pending",
        };
        sqlx::query_scalar(query).fetch_one(pool).await
    }

    /// The table's values sealed with a key other than `current`, locked for the
    /// transaction, each with the context it was sealed for.
    async fn stale(
        self,
        tx: &mut PgConnection,
        current: &str,
    ) -> Result<Vec<StaleValue>, sqlx::Error> {
        match self {
            SealedTable::CentralCredentialValues => {
                let rows = super::credential_values::stale_rows(tx, current).await?;
                Ok(rows
                    .into_iter()
                    .map(|row| StaleValue {
                        context: credential_context(row.connection_id, &row.destination),
                        row: RowKey::CentralCredential {
                            connection: row.connection_id,
                            destination: row.destination,
                        },
                        sealed: row.sealed,
                    })
                    .collect())
            }
            SealedTable::OAuthGrants => Ok(super::oauth::stale_grants(tx, current)
                .await?
                .into_iter()
                .map(|grant| StaleValue {
                    context: super::oauth::grant_context(grant.connection, &grant.holder),
                    row: RowKey::OAuthGrant {
                        connection: grant.connection,
                        holder: grant.holder,
                    },
                    sealed: grant.sealed,
                })
                .collect()),
            SealedTable::OAuthPending => Ok(super::oauth::stale_pending(tx, current)
                .await?
                .into_iter()
                .map(|pending| StaleValue {
                    context: super::oauth::pending_context(&pending.digest),
                    row: RowKey::OAuthPending {
                        digest: pending.digest,
                    },
                    sealed: pending.sealed,
                })
                .collect()),
        }
    }
}

/// A value to re-seal: which row, the context it is sealed for, and how it is sealed now.
struct StaleValue {
    row: RowKey,
    context: String,
    sealed: Sealed,
}

/// Which row of which table a sealed value is in.
enum RowKey {
    CentralCredential {
        connection: ConnectionId,
        destination: Destination,
    },
    OAuthGrant {
        connection: ConnectionId,
        holder: String,
    },
    OAuthPending {
        digest: Vec<u8>,
    },
}

impl RowKey {
    /// Writes `sealed` into the row.
    async fn rewrite(&self, tx: &mut PgConnection, sealed: &Sealed) -> Result<(), sqlx::Error> {
        match self {
            RowKey::CentralCredential {
                connection,
                destination,
            } => {
                let (kind, name) = super::credential_values::destination_columns(destination);
                sqlx::query(
                    "UPDATE central_credential_values SET key_id = $4, nonce = $5, ciphertext = $6
                     WHERE connection_id = $1 AND destination = $2 AND name = $3",
                )
                .bind(connection)
                .bind(kind)
                .bind(name)
                .bind(&sealed.key_id)
                .bind(&sealed.nonce)
                .bind(&sealed.ciphertext)
                .execute(tx)
                .await?;
            }
            RowKey::OAuthGrant { connection, holder } => {
                super::oauth::reseal_grant(tx, *connection, holder, sealed).await?;
            }
            RowKey::OAuthPending { digest } => {
                super::oauth::reseal_pending(tx, digest, sealed).await?;
            }
        }
        Ok(())
    }
}

/// Why re-sealing stopped (nothing was changed).
#[derive(Debug, thiserror::Error)]
pub enum ResealError {
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// A stored value does not open with the keys in the file.
    #[error("{table}: {error}")]
    Vault {
        /// The table holding it.
        table: &'static str,
        /// Why it does not open.
        error: VaultError,
    },
}

/// The sealed-write lock held exclusively, on a database connection of its own (closed when
/// this is dropped, which releases the lock even if [`SealedExclusive::release`] is never
/// reached).
pub struct SealedExclusive {
    connection: PgConnection,
}

impl Datastore {
    /// How many sealed values every [`SealedTable`] holds together: a server must not make a
    /// new installation key while any value needs the old one.
    pub async fn sealed_values_count(&self) -> Result<u64, sqlx::Error> {
        let mut total = 0;
        for table in SealedTable::ALL {
            total += u64::try_from(table.count(&self.pool).await?).unwrap_or_default();
        }
        Ok(total)
    }

    /// Waits for the sealed-write lock exclusively: no sealed value is written until it is
    /// released.
    pub async fn sealed_exclusive(&self) -> Result<SealedExclusive, sqlx::Error> {
        let mut connection = self.pool.acquire().await?.detach();
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(SEALED_WRITE_LOCK)
            .execute(&mut connection)
            .await?;
        Ok(SealedExclusive { connection })
    }
}

impl SealedExclusive {
    /// Re-seals, in one transaction, every value of every [`SealedTable`] that `vault`'s newest
    /// key did not seal; answers how many were re-sealed. A value that does not open stops it
    /// and nothing is changed.
    pub async fn reseal_all(&mut self, vault: &Vault) -> Result<usize, ResealError> {
        let mut tx = self.connection.begin().await?;
        let mut resealed = 0;
        for table in SealedTable::ALL {
            for stale in table.stale(&mut tx, vault.current_key_id()).await? {
                let value = vault.open(&stale.context, &stale.sealed).map_err(|error| {
                    ResealError::Vault {
                        table: table.name(),
                        error,
                    }
                })?;
                let sealed = vault.seal(&stale.context, &value);
                stale.row.rewrite(&mut tx, &sealed).await?;
                resealed += 1;
            }
        }
        tx.commit().await?;
        Ok(resealed)
    }

    /// Releases the lock and closes the connection.
    pub async fn release(mut self) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(SEALED_WRITE_LOCK)
            .execute(&mut self.connection)
            .await?;
        self.connection.close().await
    }
}
