//! What a datastore method committed, with the wake-ups the change calls for. The datastore
//! only runs SQL; the app layer sends the wake-ups once the method returned — to this
//! process's waiting runners and readers at once, to other replicas through PostgreSQL
//! (`app::dispatch`) — so that nobody is woken before the change they look for is visible.

use super::SettledCall;
use chrono::{DateTime, Utc};
use switchyard_protocol::{CallId, RunnerRef};

/// A wake-up a committed change calls for.
#[derive(Clone, Debug)]
pub enum Wakeup {
    /// A call of `runner` was queued, submitted at `at` (a transaction that began earlier can
    /// commit later, so each carries its own time).
    Queued {
        /// Its runner.
        runner: RunnerRef,
        /// Its submission time.
        at: DateTime<Utc>,
    },
    /// Calls of this runner — or of any runner, `None` — went back to the queue at their old
    /// submission times.
    Requeued(Option<RunnerRef>),
    /// A call settled.
    Settled {
        /// The call.
        call: CallId,
        /// The call and its lineage as the statement that settled it recorded them, when it
        /// read them (it does when asked to: a reader in this process waits for the call).
        recorded: Option<Box<SettledCall>>,
    },
}

/// What a datastore method committed (`value`) and the wake-ups it calls for.
#[derive(Debug)]
#[must_use = "the wake-ups are the app layer's to send once the change committed"]
pub struct Committed<T> {
    /// What the method returns.
    pub value: T,
    /// The wake-ups to send.
    pub wakeups: Vec<Wakeup>,
}

impl<T> Committed<T> {
    /// `value`, calling for no wake-up yet.
    pub fn new(value: T) -> Self {
        Self {
            value,
            wakeups: Vec::new(),
        }
    }

    /// Adds `wakeup`.
    pub fn waking(mut self, wakeup: Wakeup) -> Self {
        self.wakeups.push(wakeup);
        self
    }

    /// Adds `wakeup` when `condition` holds.
    pub fn waking_if(self, condition: bool, wakeup: Wakeup) -> Self {
        if condition { self.waking(wakeup) } else { self }
    }
}
