//! What the parts of one lease term share: whether admission is paused and why, whether the
//! term must end and why, and which calls the runner holds.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use switchyard_protocol::CallId;
use tokio_util::sync::CancellationToken;

/// Why no new calls are leased for now. Calls already running go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pause {
    /// The outbox holds as many receipts as it may.
    Full {
        /// Entries alive.
        live: usize,
    },
    /// A receipt has waited too long for the server to acknowledge it.
    Stale {
        /// Receipts waiting.
        unacknowledged: usize,
        /// Age of the oldest.
        oldest: Duration,
    },
    /// The outbox could not be written.
    Storage {
        /// The storage error.
        error: String,
    },
}

impl fmt::Display for Pause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pause::Full { live } => write!(
                f,
                "the receipt outbox is full ({live} receipts not yet acknowledged or expired)"
            ),
            Pause::Stale {
                unacknowledged,
                oldest,
            } => write!(
                f,
                "{unacknowledged} receipts wait for the server's acknowledgement, the oldest for \
                 {} s",
                oldest.as_secs()
            ),
            Pause::Storage { error } => write!(f, "the receipt outbox cannot be written: {error}"),
        }
    }
}

/// Whether the runner admits new calls; logs every change.
#[derive(Debug, Default)]
pub(crate) struct Admission {
    pause: Mutex<Option<Pause>>,
}

impl Admission {
    /// Pauses admission for `pause` (logged when the reason changes).
    pub(crate) fn pause(&self, pause: Pause) {
        let mut current = lock(&self.pause);
        if current.as_ref() != Some(&pause) {
            tracing::warn!(reason = %pause, "admission paused: no new calls are leased");
            *current = Some(pause);
        }
    }

    /// Admits calls again (logged when it was paused).
    pub(crate) fn resume(&self) {
        if let Some(pause) = lock(&self.pause).take() {
            tracing::info!(was = %pause, "admission resumed");
        }
    }

    /// Whether admission is paused because storage failed.
    pub(crate) fn storage_failed(&self) -> bool {
        matches!(*lock(&self.pause), Some(Pause::Storage { .. }))
    }
}

/// Why a lease term ended, from least to most severe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The lease was lost (stale epoch, renewal impossible): drain, then take it again.
    Fenced {
        /// What happened.
        reason: String,
    },
    /// The process was asked to stop: drain, release the lease, exit.
    Shutdown,
    /// The device credential was refused: drain what can be drained, exit.
    Revoked {
        /// The error code (`device_revoked`).
        code: String,
        /// The server's message.
        message: String,
    },
}

impl Stop {
    fn severity(&self) -> u8 {
        match self {
            Stop::Fenced { .. } => 0,
            Stop::Shutdown => 1,
            Stop::Revoked { .. } => 2,
        }
    }
}

/// Ends a lease term: records why and cancels the token the executor runs under, so it leases
/// nothing more and lets its running calls finish and report.
#[derive(Debug)]
pub(crate) struct Halt {
    token: CancellationToken,
    reason: Mutex<Option<Stop>>,
}

impl Halt {
    /// A halt whose token is `token` (a child of the process's shutdown token).
    pub(crate) fn new(token: CancellationToken) -> Self {
        Self {
            token,
            reason: Mutex::new(None),
        }
    }

    /// The token the executor runs under.
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Whether the term is ending.
    pub(crate) fn is_halted(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Ends the term for `stop`, unless it is already ending for a more severe reason.
    pub(crate) fn halt(&self, stop: Stop) {
        let mut reason = lock(&self.reason);
        if reason
            .as_ref()
            .is_none_or(|now| now.severity() < stop.severity())
        {
            match &stop {
                Stop::Fenced { reason } => {
                    tracing::warn!(%reason, "runner lease lost: stopping admission and draining");
                }
                Stop::Shutdown => tracing::info!("stopping: draining running calls"),
                Stop::Revoked { code, message } => tracing::error!(
                    %code,
                    %message,
                    "the server refused the device credential: stopping"
                ),
            }
            *reason = Some(stop);
        }
        drop(reason);
        self.token.cancel();
    }

    /// Why the term ended: the recorded reason; else, with the token cancelled from outside
    /// (a signal), [`Stop::Shutdown`]; else the executor stopped on its own after being fenced.
    pub(crate) fn outcome(&self) -> Stop {
        if let Some(stop) = lock(&self.reason).clone() {
            return stop;
        }
        if self.token.is_cancelled() {
            Stop::Shutdown
        } else {
            Stop::Fenced {
                reason: "the server fenced this runner's epoch".to_owned(),
            }
        }
    }
}

/// The calls this runner holds (leased or started), reported with every heartbeat.
#[derive(Debug, Default)]
pub(crate) struct ActiveCalls {
    calls: Mutex<BTreeSet<CallId>>,
}

impl ActiveCalls {
    /// Adds leased calls.
    pub(crate) fn add(&self, calls: impl IntoIterator<Item = CallId>) {
        lock(&self.calls).extend(calls);
    }

    /// Removes a call that ended here or will never start.
    pub(crate) fn remove(&self, call: CallId) {
        lock(&self.calls).remove(&call);
    }

    /// The calls held now.
    pub(crate) fn list(&self) -> Vec<CallId> {
        lock(&self.calls).iter().copied().collect()
    }
}

/// Locks `mutex`; the data stays valid if a holder panicked (each update is one assignment).
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
