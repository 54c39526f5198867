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

/// Where the keyring thread sends an answer.
type Reply<T> = mpsc::SyncSender<Result<T, StoreError>>;

/// One operation sent to the keyring thread, with where to send the answer.
enum Request {
    /// Read an entry.
    Get {
        service: String,
        account: String,
        reply: Reply<Option<String>>,
    },
    /// Write an entry, replacing any earlier value.
    Set {
        service: String,
        account: String,
        value: String,
        reply: Reply<()>,
    },
    /// Remove an entry (none there is no error).
    Delete {
        service: String,
        account: String,
        reply: Reply<()>,
    },
}

/// The Linux kernel keyring, used from a dedicated thread that holds a session keyring.
#[derive(Debug)]
pub struct OsKeyring {
    requests: mpsc::Sender<Request>,
}

impl OsKeyring {
    /// Starts the keyring thread, which joins the process's session keyring or creates one when
    /// there is none (a runner started outside a login session). Fails when the kernel keyring
    /// cannot be used at all.
    pub fn new() -> Result<Self, StoreError> {
        let (requests, inbox) = mpsc::channel::<Request>();
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
        self.ask(|reply| Request::Get {
            service: service.to_owned(),
            account: account.to_owned(),
            reply,
        })
    }

    fn set(&self, service: &str, account: &str, value: &str) -> Result<(), StoreError> {
        self.ask(|reply| Request::Set {
            service: service.to_owned(),
            account: account.to_owned(),
            value: value.to_owned(),
            reply,
        })
    }

    fn delete(&self, service: &str, account: &str) -> Result<(), StoreError> {
        self.ask(|reply| Request::Delete {
            service: service.to_owned(),
            account: account.to_owned(),
            reply,
        })
    }
}

impl OsKeyring {
    /// Sends one request to the keyring thread and waits for its answer.
    fn ask<T>(&self, request: impl FnOnce(Reply<T>) -> Request) -> Result<T, StoreError> {
        let (reply, answer) = mpsc::sync_channel(1);
        self.requests
            .send(request(reply))
            .map_err(|_| thread_stopped())?;
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

/// Answers requests until the [`OsKeyring`] (the only sender) is dropped. An asker that gave
/// up is owed nothing, so failed replies are ignored.
fn serve(store: &Arc<CredentialStore>, inbox: mpsc::Receiver<Request>) {
    for request in inbox {
        match request {
            Request::Get {
                service,
                account,
                reply,
            } => {
                let _ = reply.send(read_entry(store, &service, &account));
            }
            Request::Set {
                service,
                account,
                value,
                reply,
            } => {
                let answer = Entry::new_in_store(store, &service, &account)
                    .and_then(|entry| entry.set_password(&value))
                    .map_err(store_error);
                let _ = reply.send(answer);
            }
            Request::Delete {
                service,
                account,
                reply,
            } => {
                let answer = Entry::new_in_store(store, &service, &account)
                    .and_then(|entry| match entry.delete_credential() {
                        Err(keyring_core::Error::NoEntry) => Ok(()),
                        done => done,
                    })
                    .map_err(store_error);
                let _ = reply.send(answer);
            }
        }
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
