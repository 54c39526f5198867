//! The seam to a secret store such as the OS keyring, and the store used when there is none.

/// A store of secret values addressed by service and account (the OS keyring's model).
pub trait SecretStore: Send + Sync {
    /// The value stored for `service`/`account`: `Ok(None)` when there is no such entry.
    fn get(&self, service: &str, account: &str) -> Result<Option<String>, StoreError>;

    /// Stores `value` for `service`/`account`, replacing any earlier value.
    fn set(&self, service: &str, account: &str, value: &str) -> Result<(), StoreError>;

    /// Removes the entry for `service`/`account`; removing one that does not exist succeeds.
    fn delete(&self, service: &str, account: &str) -> Result<(), StoreError>;
}

/// Why a store could not answer. Messages never contain a stored value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// There is no usable store (none configured, or it could not be reached).
    #[error("the OS keyring is unavailable: {reason}")]
    Unavailable {
        /// Why.
        reason: String,
    },
    /// The store exists but is locked or refuses this process access.
    #[error("the OS keyring is locked or denied access: {reason}")]
    Locked {
        /// Why.
        reason: String,
    },
    /// The entry exists but its value is not UTF-8 text.
    #[error("the stored value is not UTF-8 text")]
    NotText,
    /// Any other failure of the store.
    #[error("the OS keyring failed: {reason}")]
    Failed {
        /// Why.
        reason: String,
    },
}

/// A store for runners without an OS keyring: every lookup is [`StoreError::Unavailable`].
#[derive(Clone, Copy, Debug, Default)]
pub struct NoKeyring;

impl SecretStore for NoKeyring {
    fn get(&self, _service: &str, _account: &str) -> Result<Option<String>, StoreError> {
        Err(no_keyring())
    }

    fn set(&self, _service: &str, _account: &str, _value: &str) -> Result<(), StoreError> {
        Err(no_keyring())
    }

    fn delete(&self, _service: &str, _account: &str) -> Result<(), StoreError> {
        Err(no_keyring())
    }
}

fn no_keyring() -> StoreError {
    StoreError::Unavailable {
        reason: "no OS keyring is configured for this runner; use another provider or start the \
                 runner with an OS keyring"
            .to_owned(),
    }
}
