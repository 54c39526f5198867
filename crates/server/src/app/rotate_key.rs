//! `switchyard-server admin rotate-key`: re-encrypting every value the server keeps sealed
//! with a new installation key.
//!
//! The steps, each leaving every stored value's key in the file should the process stop
//! after it: hold the sealed-write lock (no value is sealed meanwhile, [`crate::db::SealedExclusive`]);
//! put a new key first in the file, the old ones kept; re-seal every value of every sealed
//! table in one transaction and commit; drop the old keys from the file; release the lock.
//! A value that does not open stops the rotation before anything is changed in the database
//! (the file then holds the new key first and the old ones still: everything still opens).

use super::App;
use crate::db::ResealError;
use crate::vault::{Vault, VaultError};
use std::path::Path;

/// What a rotation did.
#[derive(Debug)]
pub struct Rotated {
    /// How many values were re-sealed.
    pub resealed: usize,
    /// The id of the key that seals them now.
    pub key_id: String,
}

/// Why a rotation stopped.
#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    /// The key file cannot be read or written.
    #[error("{0}")]
    KeyFile(#[from] VaultError),
    /// The database failed, or a value does not open: nothing was re-sealed.
    #[error("nothing was re-sealed: {0}; the key file holds the new key and the old ones")]
    Reseal(#[from] ResealError),
    /// The lock could not be taken or released.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
}

impl App {
    /// Rotates the installation key in the file at `path` (see the module documentation).
    pub async fn installation_key_rotate(&self, path: &Path) -> Result<Rotated, RotateError> {
        // A file that is missing or unsafe stops it before anything else.
        Vault::load(path)?;
        let mut exclusive = self.db.sealed_exclusive().await?;
        let vault = Vault::add_key(path)?;
        let resealed = exclusive.reseal_all(&vault).await?;
        let vault = Vault::drop_old_keys(path)?;
        exclusive.release().await?;
        tracing::info!(
            resealed,
            key = vault.current_key_id(),
            "installation key rotated"
        );
        Ok(Rotated {
            resealed,
            key_id: vault.current_key_id().to_owned(),
        })
    }
}
