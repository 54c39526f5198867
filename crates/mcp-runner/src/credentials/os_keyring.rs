//! The OS keyring as a [`SecretStore`]: the Linux kernel keyring, through `keyring-core` and
//! `linux-keyutils-keyring-store`.
//!
//! Linux keeps the session keyring in each *thread's* credentials: joining one affects the
//! joining thread and the threads it creates later, never threads that already exist. Lookups
//! come from threads the runner does not control (the async runtime's workers), so every
//! keyring access happens on one dedicated thread that joins (or creates) a session keyring
//! before anything else. The store links the per-user persistent keyring into that session
//! keyring, which is how entries set by other processes of the same user are found.

use super::store::{SecretStore, StoreError};
use keyring_core::{CredentialStore, Entry};
use linux_keyutils::{KeyRing, KeyRingIdentifier};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;

/// One lookup sent to the keyring thread, with where to send the answer.
struct Lookup {
    service: String,
    account: String,
    reply: mpsc::SyncSender<Result<Option<String>, StoreError>>,
}

/// The Linux kernel keyring, read on a dedicated thread that holds a session keyring.
#[derive(Debug)]
pub struct OsKeyring {
    requests: mpsc::Sender<Lookup>,
}

impl OsKeyring {
    /// Starts the keyring thread, which joins the process's session keyring or creates one when
    /// there is none (a runner started outside a login session). Fails when the kernel keyring
    /// cannot be used at all.
    pub fn new() -> Result<Self, StoreError> {
        let (requests, inbox) = mpsc::channel::<Lookup>();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        thread::Builder::new()
            .name("switchyard-keyring".to_owned())
            .spawn(move || match open_store() {
                Ok(store) => {
                    // The receiver waits for this message; it cannot be gone yet.
                    let _ = ready_tx.send(Ok(()));
                    serve(&store, inbox);
                }
                Err(error) => {
                    let _ = ready_tx.send(Err(error));
                }
            })
            .map_err(|error| StoreError::Unavailable {
                reason: format!("cannot start the keyring thread: {error}"),
            })?;
        ready_rx.recv().map_err(|_| thread_stopped())??;
        Ok(Self { requests })
    }
}

impl SecretStore for OsKeyring {
    fn get(&self, service: &str, account: &str) -> Result<Option<String>, StoreError> {
        let (reply, answer) = mpsc::sync_channel(1);
        let lookup = Lookup {
            service: service.to_owned(),
            account: account.to_owned(),
            reply,
        };
        self.requests.send(lookup).map_err(|_| thread_stopped())?;
        answer.recv().map_err(|_| thread_stopped())?
    }
}

fn thread_stopped() -> StoreError {
    StoreError::Unavailable {
        reason: "the keyring thread has stopped".to_owned(),
    }
}

/// Joins or creates this thread's session keyring and opens the keyutils store on it.
fn open_store() -> Result<Arc<CredentialStore>, StoreError> {
    // Without a session keyring of its own, a thread's lookups fall back to the user session
    // keyring while the store links the persistent keyring elsewhere, and entries are not found.
    KeyRing::from_special_id(KeyRingIdentifier::Session, true).map_err(|error| {
        StoreError::Unavailable {
            reason: format!("cannot join or create a session keyring: {error}"),
        }
    })?;
    let store: Arc<CredentialStore> =
        linux_keyutils_keyring_store::Store::new().map_err(store_error)?;
    Ok(store)
}

/// Answers lookups until the [`OsKeyring`] (the only sender) is dropped.
fn serve(store: &Arc<CredentialStore>, inbox: mpsc::Receiver<Lookup>) {
    for lookup in inbox {
        let answer = read_entry(store, &lookup.service, &lookup.account);
        // The asker may have given up; nothing else is owed to it.
        let _ = lookup.reply.send(answer);
    }
}

fn read_entry(
    store: &Arc<CredentialStore>,
    service: &str,
    account: &str,
) -> Result<Option<String>, StoreError> {
    let entry = Entry::new_in_store(store, service, account).map_err(store_error)?;
    match entry.get_password() {
        Ok(value) => Ok(Some(value)),
        Err(keyring_core::Error::NoEntry) => Ok(None),
        Err(error) => Err(store_error(error)),
    }
}

/// Translates a keyring error without ever formatting data the error may carry (some variants
/// hold the raw stored bytes).
fn store_error(error: keyring_core::Error) -> StoreError {
    use keyring_core::Error;
    match error {
        Error::NoStorageAccess(platform) => StoreError::Locked {
            reason: platform.to_string(),
        },
        Error::BadEncoding(_) => StoreError::NotText,
        Error::NoDefaultStore => StoreError::Unavailable {
            reason: "no keyring store is configured".to_owned(),
        },
        Error::PlatformFailure(platform) => StoreError::Failed {
            reason: platform.to_string(),
        },
        Error::Invalid(what, why) => StoreError::Failed {
            reason: format!("{what}: {why}"),
        },
        Error::TooLong(what, limit) => StoreError::Failed {
            reason: format!("{what} is longer than the keyring's limit of {limit}"),
        },
        _ => StoreError::Failed {
            reason: "unexpected keyring error".to_owned(),
        },
    }
}
