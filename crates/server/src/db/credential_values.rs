//! Central connections' credential values, sealed with the installation key
//! (`central_credential_values`). A row binds one destination of a connection to its value;
//! the ciphertext opens only for the row's own context ([`credential_context`]). Writes take
//! the sealed-write lock ([`super::sealed`]) so that key rotation never misses one.

use super::Datastore;
use super::sealed::begin_sealed_write;
use crate::vault::{Sealed, VaultError};
use chrono::{DateTime, Utc};
use switchyard_mcp_runner::credentials::Destination;
use switchyard_protocol::ConnectionId;

/// A row of `central_credential_values`.
#[derive(Clone, Debug)]
pub struct CredentialValueRow {
    /// The connection.
    pub connection_id: ConnectionId,
    /// Where the value goes.
    pub destination: Destination,
    /// Text put before a header's value.
    pub prefix: Option<String>,
    /// The sealed value.
    pub sealed: Sealed,
    /// When it was last set.
    pub updated_at: DateTime<Utc>,
}

/// The row as read.
#[derive(sqlx::FromRow)]
struct RawRow {
    connection_id: ConnectionId,
    destination: String,
    name: String,
    key_id: String,
    nonce: Vec<u8>,
    ciphertext: Vec<u8>,
    prefix: Option<String>,
    updated_at: DateTime<Utc>,
}

impl From<RawRow> for CredentialValueRow {
    fn from(raw: RawRow) -> Self {
        CredentialValueRow {
            connection_id: raw.connection_id,
            destination: match raw.destination.as_str() {
                "header" => Destination::Header(raw.name),
                // The column's check admits `env` and `header` only.
                _ => Destination::Env(raw.name),
            },
            prefix: raw.prefix,
            sealed: Sealed {
                key_id: raw.key_id,
                nonce: raw.nonce,
                ciphertext: raw.ciphertext,
            },
            updated_at: raw.updated_at,
        }
    }
}

/// The AEAD context a value of `connection`'s `destination` is sealed for: it names the row,
/// so a ciphertext copied to another row (another connection, destination or name) does not
/// open.
pub fn credential_context(connection: ConnectionId, destination: &Destination) -> String {
    let (kind, name) = destination_columns(destination);
    format!("credential:{connection}/{kind}/{name}")
}

/// The `destination` and `name` columns of `destination`.
pub(super) fn destination_columns(destination: &Destination) -> (&'static str, &str) {
    match destination {
        Destination::Env(name) => ("env", name),
        Destination::Header(name) => ("header", name),
    }
}

/// The values sealed with a key other than `current`, locked until the end of the
/// transaction on `tx` (what a rotation re-seals, [`super::sealed`]).
pub(super) async fn stale_rows(
    tx: &mut sqlx::PgConnection,
    current: &str,
) -> Result<Vec<CredentialValueRow>, sqlx::Error> {
    let rows: Vec<RawRow> = sqlx::query_as(
        "SELECT connection_id, destination, name, key_id, nonce, ciphertext, prefix, updated_at
         FROM central_credential_values WHERE key_id <> $1
         FOR UPDATE",
    )
    .bind(current)
    .fetch_all(tx)
    .await?;
    Ok(rows.into_iter().map(CredentialValueRow::from).collect())
}

impl Datastore {
    /// The sealed values of `connection`, environment variables first, then by name.
    pub async fn credential_value_list(
        &self,
        connection: ConnectionId,
    ) -> Result<Vec<CredentialValueRow>, sqlx::Error> {
        let rows: Vec<RawRow> = sqlx::query_as(
            "SELECT connection_id, destination, name, key_id, nonce, ciphertext, prefix, updated_at
             FROM central_credential_values WHERE connection_id = $1
             ORDER BY destination, name",
        )
        .bind(connection)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(CredentialValueRow::from).collect())
    }

    /// Stores the value `seal` makes for `destination` of `connection` (replacing any), with
    /// `prefix`. `seal` runs under the sealed-write lock, so it seals with the key file as it
    /// is while no rotation runs; its error stores nothing.
    pub async fn credential_value_store(
        &self,
        connection: ConnectionId,
        destination: &Destination,
        prefix: Option<&str>,
        seal: impl FnOnce() -> Result<Sealed, VaultError>,
    ) -> Result<Result<(), VaultError>, sqlx::Error> {
        let (mut tx, sealed) = match begin_sealed_write(&self.pool, seal).await? {
            Ok(begun) => begun,
            Err(error) => return Ok(Err(error)),
        };
        let (kind, name) = destination_columns(destination);
        sqlx::query(
            "INSERT INTO central_credential_values
                 (connection_id, destination, name, key_id, nonce, ciphertext, prefix)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (connection_id, destination, name) DO UPDATE
             SET key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce,
                 ciphertext = EXCLUDED.ciphertext, prefix = EXCLUDED.prefix, updated_at = now()",
        )
        .bind(connection)
        .bind(kind)
        .bind(name)
        .bind(&sealed.key_id)
        .bind(&sealed.nonce)
        .bind(&sealed.ciphertext)
        .bind(prefix)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Ok(()))
    }

    /// Deletes every sealed value of `connection`; answers how many there were.
    pub async fn credential_value_delete_all(
        &self,
        connection: ConnectionId,
    ) -> Result<u64, sqlx::Error> {
        let deleted = sqlx::query("DELETE FROM central_credential_values WHERE connection_id = $1")
            .bind(connection)
            .execute(&self.pool)
            .await?;
        Ok(deleted.rows_affected())
    }
}
