//! Warm MCP sessions: which open session a call may use, and when a session must close.
//!
//! Sessions are keyed by connection, profile, submitter (a user or a device), launch
//! fingerprint and the client's session id (`None` is a key of its own: the submitter's
//! default session on the connection under that profile). Calls with the same key share one
//! session; MCP allows concurrent requests on it. Two submitters never share a session, even
//! with the same client session id, nor does one submitter under two profiles. Each entry has
//! an explicit [`SessionState`] and a count of active calls:
//!
//! ```text
//! Starting ──opened──▶ Ready ──drain──▶ Draining ──no active calls──▶ Closing ──closed──▶ (gone)
//!     │                  └──────── drain while idle ───────────────────▲
//!     └── open failed ──▶ (gone)
//! ```
//!
//! A Draining session takes no new calls; it closes once its active calls have finished. A
//! drain requested while a session is still Starting takes effect once it has opened (the calls
//! already waiting for it are served first). Reasons: a new launch fingerprint for the
//! connection (`credential_changed`), a release, idleness, a cap on warm sessions
//! (`capacity`, see [`caps`]), an evicting call outcome (`timeout`, `cancelled`,
//! `transport_closed`), shutdown.
//!
//! The pool is plain bookkeeping owned by the executor loop: it does no I/O. Sessions it wants
//! closed are queued and collected with [`SessionPool::take_closable`].
//!
//! The fingerprint is a keyed hash of the launch (spec, environment and header values) under a
//! random key made per pool: it stays in this process and is never logged.

mod caps;

pub use caps::{SessionCapFlags, SessionCaps};

use crate::launch::SessionLaunch;
use crate::redact::Redactor;
use crate::session::McpSession;
use std::collections::BTreeMap;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;
use switchyard_protocol::api::ConnectorSpec;
use switchyard_protocol::runner::Submitter;
use switchyard_protocol::{CallId, ConnectionId, ProfileId};
use tokio::time::Instant;

/// What the pool needs to know about a live session.
pub(crate) trait PooledSession {
    /// Whether the session has ended on its own, so it must not be handed out.
    fn is_closed(&self) -> bool;
}

impl PooledSession for McpSession {
    fn is_closed(&self) -> bool {
        McpSession::is_closed(self)
    }
}

/// Which calls may share a session (together with the launch fingerprint).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SessionKey {
    /// The connection.
    pub(crate) connection_id: ConnectionId,
    /// The profile the calls run under.
    pub(crate) profile_id: ProfileId,
    /// Who submitted the calls.
    pub(crate) submitter: Submitter,
    /// The client's warm-session key; `None` is the submitter's default session.
    pub(crate) client_session_id: Option<String>,
}

/// Which sessions a release drains: a connection's sessions with one client session id, under
/// any profile, of one submitter (of every submitter when `None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReleaseKey {
    /// The connection.
    pub(crate) connection_id: ConnectionId,
    /// The client's warm-session key.
    pub(crate) client_session_id: Option<String>,
    /// Whose sessions; `None`: everyone's.
    pub(crate) submitter: Option<Submitter>,
}

impl ReleaseKey {
    /// Whether the release drains a session with `key`.
    fn matches(&self, key: &SessionKey) -> bool {
        self.connection_id == key.connection_id
            && self.client_session_id == key.client_session_id
            && self
                .submitter
                .is_none_or(|submitter| submitter == key.submitter)
    }
}

/// A keyed hash of a launch: equal launches have equal fingerprints within one pool.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint(u64);

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Derived from secret values: never printed.
        f.write_str("Fingerprint(..)")
    }
}

/// One pool entry's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct SessionSlot(u64);

/// Why a session was (or is being) closed; reported in `SessionClosed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CloseReason {
    /// Unused for longer than the idle timeout.
    Idle,
    /// Released by the user.
    Released,
    /// A cap on warm sessions: the least recently used idle one made room, or a session
    /// opened past a cap (every session in its scope busy) served its calls and closed.
    Capacity,
    /// A call on it timed out.
    Timeout,
    /// A call on it was cancelled and the server did not answer.
    Cancelled,
    /// A newer launch (new credentials) exists for its connection.
    CredentialChanged,
    /// The runner is shutting down.
    Shutdown,
    /// The server exited or hung up.
    TransportClosed,
    /// A call task on it failed unexpectedly.
    RunnerError,
}

impl CloseReason {
    /// The reason as reported in lifecycle events.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Released => "released",
            Self::Capacity => "capacity",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::CredentialChanged => "credential_changed",
            Self::Shutdown => "shutdown",
            Self::TransportClosed => "transport_closed",
            Self::RunnerError => "runner_error",
        }
    }

    /// Whether the reason points at a problem worth the server's stderr in the log.
    pub(crate) fn is_abnormal(self) -> bool {
        matches!(
            self,
            Self::Timeout | Self::Cancelled | Self::TransportClosed | Self::RunnerError
        )
    }
}

/// What a finished call says about the session it used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The session is fine for more calls.
    Keep,
    /// The session must take no more calls and close.
    Evict(CloseReason),
}

/// The life of a pool entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SessionState {
    /// Being opened; calls wait for it.
    Starting,
    /// Open and taking calls.
    Ready,
    /// Open, taking no new calls; closes when its active calls have finished.
    Draining,
    /// Handed over to be closed.
    Closing,
}

/// An entry's state with the data each state holds.
enum Slot<S, W> {
    Starting {
        waiters: Waiters<W>,
        /// A drain requested before the session opened.
        drain: Option<CloseReason>,
    },
    Ready {
        session: Arc<S>,
        /// When the last active call finished (or the session opened).
        idle_since: Instant,
    },
    Draining {
        session: Arc<S>,
        reason: CloseReason,
    },
    Closing,
}

struct Entry<S, W> {
    key: SessionKey,
    fingerprint: Fingerprint,
    active: usize,
    redactor: Arc<Redactor>,
    slot: Slot<S, W>,
}

impl<S, W> Entry<S, W> {
    fn state(&self) -> SessionState {
        match self.slot {
            Slot::Starting { .. } => SessionState::Starting,
            Slot::Ready { .. } => SessionState::Ready,
            Slot::Draining { .. } => SessionState::Draining,
            Slot::Closing => SessionState::Closing,
        }
    }

    /// Whether a call with this key and fingerprint may use (or wait for) the session.
    fn serves(&self, key: &SessionKey, fingerprint: Fingerprint) -> bool {
        self.key == *key
            && self.fingerprint == fingerprint
            && matches!(self.state(), SessionState::Starting | SessionState::Ready)
    }
}

/// A session the pool wants closed.
pub(crate) struct ToClose<S> {
    /// Its entry, to report back with [`SessionPool::closed`].
    pub(crate) slot: SessionSlot,
    /// Its key.
    pub(crate) key: SessionKey,
    /// The session; no call holds it any more.
    pub(crate) session: Arc<S>,
    /// Why it closes.
    pub(crate) reason: CloseReason,
    /// The secrets of its launch, to redact its stderr.
    pub(crate) redactor: Arc<Redactor>,
}

/// Calls waiting for a session to open, each with how to answer it.
pub(crate) type Waiters<W> = Vec<(CallId, W)>;

/// What [`SessionPool::checkout`] found for a call.
pub(crate) enum Checkout<S> {
    /// A ready session; the call now counts as active on it.
    Ready {
        /// Its entry.
        slot: SessionSlot,
        /// The session.
        session: Arc<S>,
    },
    /// A session with this key is opening: wait for it.
    Opening(SessionSlot),
    /// No usable session: open one.
    Absent,
}

/// A session that has just opened, with the calls that were waiting for it.
pub(crate) struct Opened<S, W> {
    /// Its key.
    pub(crate) key: SessionKey,
    /// The session.
    pub(crate) session: Arc<S>,
    /// The calls waiting for it; each already counts as active on it.
    pub(crate) waiters: Waiters<W>,
}

/// The warm sessions of one executor. `S` is the session, `W` how a waiting call is answered.
pub(crate) struct SessionPool<S, W> {
    hasher: RandomState,
    next_slot: u64,
    entries: BTreeMap<SessionSlot, Entry<S, W>>,
    closable: Vec<ToClose<S>>,
}

impl<S: PooledSession, W> SessionPool<S, W> {
    /// An empty pool with a fresh fingerprint key.
    pub(crate) fn new() -> Self {
        Self {
            hasher: RandomState::new(),
            next_slot: 0,
            entries: BTreeMap::new(),
            closable: Vec::new(),
        }
    }

    /// The fingerprint of `launch`: its spec, environment and headers, values included.
    pub(crate) fn fingerprint(&self, launch: &SessionLaunch) -> Fingerprint {
        let mut hasher = self.hasher.build_hasher();
        match &launch.spec {
            ConnectorSpec::Stdio { command, args, env } => {
                0u8.hash(&mut hasher);
                command.hash(&mut hasher);
                args.hash(&mut hasher);
                env.hash(&mut hasher);
            }
            ConnectorSpec::Http { url } => {
                1u8.hash(&mut hasher);
                url.hash(&mut hasher);
            }
        }
        launch.env.hash(&mut hasher);
        launch.headers.hash(&mut hasher);
        Fingerprint(hasher.finish())
    }

    /// Drains every session of `key`'s connection and submitter opened from another launch
    /// than `fingerprint`: the credentials (or spec) changed, so they are an older generation.
    /// Another submitter's sessions are left alone: its launch may rightly differ (a
    /// per-person grant), and its own next call drains what is stale of its own.
    pub(crate) fn supersede(&mut self, key: &SessionKey, fingerprint: Fingerprint) {
        let stale: Vec<SessionSlot> = self
            .entries
            .iter()
            .filter(|(_, entry)| {
                entry.key.connection_id == key.connection_id
                    && entry.key.submitter == key.submitter
                    && entry.fingerprint != fingerprint
            })
            .map(|(slot, _)| *slot)
            .collect();
        for slot in stale {
            self.drain(slot, CloseReason::CredentialChanged);
        }
    }

    /// Finds a session for a call with `key` launched as `fingerprint`. A ready session whose
    /// server has gone is evicted (`transport_closed`) instead of handed out.
    pub(crate) fn checkout(&mut self, key: &SessionKey, fingerprint: Fingerprint) -> Checkout<S> {
        let Some((&slot, entry)) = self
            .entries
            .iter_mut()
            .find(|(_, entry)| entry.serves(key, fingerprint))
        else {
            return Checkout::Absent;
        };
        match &entry.slot {
            Slot::Starting { .. } => Checkout::Opening(slot),
            Slot::Ready { session, .. } if session.is_closed() => {
                self.drain(slot, CloseReason::TransportClosed);
                Checkout::Absent
            }
            Slot::Ready { session, .. } => {
                let session = Arc::clone(session);
                entry.active += 1;
                Checkout::Ready { slot, session }
            }
            Slot::Draining { .. } | Slot::Closing => Checkout::Absent,
        }
    }

    /// Adds a Starting entry for `key`, with the call that asked for it waiting.
    pub(crate) fn start_opening(
        &mut self,
        key: SessionKey,
        fingerprint: Fingerprint,
        redactor: Arc<Redactor>,
        call_id: CallId,
        waiter: W,
    ) -> SessionSlot {
        let slot = SessionSlot(self.next_slot);
        self.next_slot += 1;
        self.entries.insert(
            slot,
            Entry {
                key,
                fingerprint,
                active: 0,
                redactor,
                slot: Slot::Starting {
                    waiters: vec![(call_id, waiter)],
                    drain: None,
                },
            },
        );
        slot
    }

    /// Makes `call_id` wait for the Starting session `slot`. Gives the waiter back when the
    /// session is not Starting.
    pub(crate) fn wait(&mut self, slot: SessionSlot, call_id: CallId, waiter: W) -> Result<(), W> {
        match self.entries.get_mut(&slot).map(|entry| &mut entry.slot) {
            Some(Slot::Starting { waiters, .. }) => {
                waiters.push((call_id, waiter));
                Ok(())
            }
            _ => Err(waiter),
        }
    }

    /// Stops `call_id` waiting for `slot`; its waiter, if it was waiting.
    pub(crate) fn remove_waiter(&mut self, slot: SessionSlot, call_id: CallId) -> Option<W> {
        let Some(Slot::Starting { waiters, .. }) =
            self.entries.get_mut(&slot).map(|entry| &mut entry.slot)
        else {
            return None;
        };
        let index = waiters
            .iter()
            .position(|(waiting, _)| *waiting == call_id)?;
        Some(waiters.remove(index).1)
    }

    /// The Starting session `slot` has opened: every waiting call becomes active on it. A drain
    /// requested meanwhile applies now.
    pub(crate) fn opened(
        &mut self,
        slot: SessionSlot,
        session: S,
        now: Instant,
    ) -> Option<Opened<S, W>> {
        let entry = self.entries.get_mut(&slot)?;
        let Slot::Starting { waiters, drain } = &mut entry.slot else {
            return None;
        };
        let waiters = std::mem::take(waiters);
        let drain = *drain;
        let session = Arc::new(session);
        entry.active += waiters.len();
        entry.slot = Slot::Ready {
            session: Arc::clone(&session),
            idle_since: now,
        };
        let key = entry.key.clone();
        if let Some(reason) = drain {
            self.drain(slot, reason);
        }
        Some(Opened {
            key,
            session,
            waiters,
        })
    }

    /// The Starting session `slot` could not be opened: the entry is gone. Returns the calls
    /// that were waiting and the launch's redactor (for the error).
    pub(crate) fn open_failed(&mut self, slot: SessionSlot) -> Option<(Waiters<W>, Arc<Redactor>)> {
        let entry = self.entries.remove(&slot)?;
        match entry.slot {
            Slot::Starting { waiters, .. } => Some((waiters, entry.redactor)),
            // Only a Starting entry can fail to open; put anything else back untouched.
            other => {
                self.entries.insert(
                    slot,
                    Entry {
                        slot: other,
                        ..entry
                    },
                );
                None
            }
        }
    }

    /// A call has finished with session `slot` (and dropped its handle to it).
    pub(crate) fn checkin(&mut self, slot: SessionSlot, verdict: Verdict, now: Instant) {
        let Some(entry) = self.entries.get_mut(&slot) else {
            tracing::warn!(?slot, "a call returned a session the pool does not know");
            return;
        };
        entry.active = entry.active.saturating_sub(1);
        if let (0, Slot::Ready { idle_since, .. }) = (entry.active, &mut entry.slot) {
            *idle_since = now;
        }
        match verdict {
            Verdict::Keep => self.close_if_done(slot),
            Verdict::Evict(reason) => self.drain(slot, reason),
        }
    }

    /// Drains the sessions `release` names (a user's release). Returns how many were affected.
    pub(crate) fn release(&mut self, release: &ReleaseKey) -> usize {
        let matching: Vec<SessionSlot> = self
            .entries
            .iter()
            .filter(|(_, entry)| {
                release.matches(&entry.key)
                    && matches!(entry.state(), SessionState::Starting | SessionState::Ready)
            })
            .map(|(slot, _)| *slot)
            .collect();
        for slot in &matching {
            self.drain(*slot, CloseReason::Released);
        }
        matching.len()
    }

    /// Drains every session.
    pub(crate) fn drain_all(&mut self, reason: CloseReason) {
        let slots: Vec<SessionSlot> = self.entries.keys().copied().collect();
        for slot in slots {
            self.drain(slot, reason);
        }
    }

    /// When the next idle session reaches `idle_timeout`, if any session is idle.
    pub(crate) fn next_idle_deadline(&self, idle_timeout: Duration) -> Option<Instant> {
        self.entries
            .values()
            .filter_map(|entry| match &entry.slot {
                Slot::Ready { idle_since, .. } if entry.active == 0 => {
                    Some(*idle_since + idle_timeout)
                }
                _ => None,
            })
            .min()
    }

    /// Closes every session idle for at least `idle_timeout` at `now`.
    pub(crate) fn close_idle(&mut self, now: Instant, idle_timeout: Duration) {
        let idle: Vec<SessionSlot> = self
            .entries
            .iter()
            .filter(|(_, entry)| match &entry.slot {
                Slot::Ready { idle_since, .. } => {
                    entry.active == 0 && *idle_since + idle_timeout <= now
                }
                _ => false,
            })
            .map(|(slot, _)| *slot)
            .collect();
        for slot in idle {
            self.drain(slot, CloseReason::Idle);
        }
    }

    /// The sessions that are now to be closed (each entry is Closing until [`Self::closed`]).
    pub(crate) fn take_closable(&mut self) -> Vec<ToClose<S>> {
        std::mem::take(&mut self.closable)
    }

    /// The Closing session `slot` has been closed: forget it.
    pub(crate) fn closed(&mut self, slot: SessionSlot) {
        if let Some(entry) = self.entries.remove(&slot)
            && entry.state() != SessionState::Closing
        {
            tracing::warn!(?slot, state = ?entry.state(), "forgot a session that was not closing");
        }
    }

    /// Whether no session is open, opening or closing.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The state of entry `slot`.
    #[cfg(test)]
    fn state(&self, slot: SessionSlot) -> Option<SessionState> {
        self.entries.get(&slot).map(Entry::state)
    }

    /// Stops `slot` taking calls for `reason`; closes it at once when no call is active.
    fn drain(&mut self, slot: SessionSlot, reason: CloseReason) {
        let Some(entry) = self.entries.get_mut(&slot) else {
            return;
        };
        match &mut entry.slot {
            Slot::Starting { drain, .. } => {
                drain.get_or_insert(reason);
            }
            Slot::Ready { session, .. } => {
                let session = Arc::clone(session);
                entry.slot = Slot::Draining { session, reason };
                self.close_if_done(slot);
            }
            // Already on its way out, for an earlier reason.
            Slot::Draining { .. } | Slot::Closing => {}
        }
    }

    /// Moves a Draining entry without active calls to Closing and queues it for closing.
    fn close_if_done(&mut self, slot: SessionSlot) {
        let Some(entry) = self.entries.get_mut(&slot) else {
            return;
        };
        let (session, reason) = match &entry.slot {
            Slot::Draining { session, reason } if entry.active == 0 => {
                (Arc::clone(session), *reason)
            }
            _ => return,
        };
        entry.slot = Slot::Closing;
        self.closable.push(ToClose {
            slot,
            key: entry.key.clone(),
            session,
            reason,
            redactor: Arc::clone(&entry.redactor),
        });
    }
}

#[cfg(test)]
mod tests;
