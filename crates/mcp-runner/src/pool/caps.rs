//! Caps on warm sessions: in all, per connection and per submitter.
//!
//! A cap counts the sessions that take calls — opening or open, not draining or closing. Before
//! a session opens, each scope of its key that is full gives up its least recently used idle
//! session (`capacity`): the one whose last call finished longest ago. A busy session is never
//! closed for a cap, and a call never waits for another's session: when every session of a
//! full scope is busy, the call gets a session of its own that serves it (and the calls with
//! its key that arrive while it opens) and then closes (`capacity`). So the sessions open at
//! once exceed a cap by at most the calls running, which the executor bounds.

use super::{CloseReason, Entry, PooledSession, SessionKey, SessionPool, SessionSlot, Slot};

/// Most warm sessions an executor keeps, by scope (see [`crate::executor::ExecutorConfig`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionCaps {
    /// In all.
    pub global: usize,
    /// Per connection.
    pub per_connection: usize,
    /// Per submitter (a user or a device), across connections.
    pub per_submitter: usize,
}

impl SessionCaps {
    /// [`SessionCaps::global`] unless configured.
    pub const DEFAULT_GLOBAL: usize = 128;
    /// [`SessionCaps::per_connection`] unless configured.
    pub const DEFAULT_PER_CONNECTION: usize = 64;
    /// [`SessionCaps::per_submitter`] unless configured.
    pub const DEFAULT_PER_SUBMITTER: usize = 16;
}

impl Default for SessionCaps {
    fn default() -> Self {
        Self {
            global: Self::DEFAULT_GLOBAL,
            per_connection: Self::DEFAULT_PER_CONNECTION,
            per_submitter: Self::DEFAULT_PER_SUBMITTER,
        }
    }
}

/// The scopes a cap applies to, narrowest first.
#[derive(Clone, Copy, Debug)]
enum Scope {
    Submitter,
    Connection,
    Global,
}

impl Scope {
    const ALL: [Scope; 3] = [Scope::Submitter, Scope::Connection, Scope::Global];

    /// This scope's cap.
    fn cap(self, caps: SessionCaps) -> usize {
        match self {
            Scope::Submitter => caps.per_submitter,
            Scope::Connection => caps.per_connection,
            Scope::Global => caps.global,
        }
    }

    /// Whether a session with `other` is in the scope of a new session with `key`.
    fn holds(self, key: &SessionKey, other: &SessionKey) -> bool {
        match self {
            Scope::Submitter => key.submitter == other.submitter,
            Scope::Connection => key.connection_id == other.connection_id,
            Scope::Global => true,
        }
    }
}

impl<S, W> Entry<S, W> {
    /// Whether the entry counts against the caps: it takes calls (opening, not to be drained
    /// once open, or open and not draining).
    fn takes_calls(&self) -> bool {
        matches!(
            self.slot,
            Slot::Starting { drain: None, .. } | Slot::Ready { .. }
        )
    }
}

impl<S: PooledSession, W> SessionPool<S, W> {
    /// Makes room under `caps` for one more session with `key`: in each full scope, drains
    /// the least recently used idle session until the scope has room. False when a scope
    /// stays full because all its sessions are busy: the new session must then close after
    /// serving its calls ([`SessionPool::close_after_use`]).
    pub(crate) fn make_room(&mut self, key: &SessionKey, caps: SessionCaps) -> bool {
        for scope in Scope::ALL {
            while self.in_scope(scope, key).count() >= scope.cap(caps) {
                let Some(slot) = self.least_recently_used(scope, key) else {
                    return false;
                };
                self.drain(slot, CloseReason::Capacity);
            }
        }
        true
    }

    /// Marks the Starting session `slot` to close once its waiting calls are served.
    pub(crate) fn close_after_use(&mut self, slot: SessionSlot) {
        self.drain(slot, CloseReason::Capacity);
    }

    /// The entries in `scope` of a new session with `key` that count against its cap.
    fn in_scope<'a>(
        &'a self,
        scope: Scope,
        key: &'a SessionKey,
    ) -> impl Iterator<Item = (&'a SessionSlot, &'a Entry<S, W>)> + 'a {
        self.entries
            .iter()
            .filter(move |(_, entry)| entry.takes_calls() && scope.holds(key, &entry.key))
    }

    /// The idle Ready session in `scope` whose last call finished first (the oldest slot of
    /// equals).
    fn least_recently_used(&self, scope: Scope, key: &SessionKey) -> Option<SessionSlot> {
        self.in_scope(scope, key)
            .filter_map(|(slot, entry)| match &entry.slot {
                Slot::Ready { idle_since, .. } if entry.active == 0 => Some((*idle_since, *slot)),
                _ => None,
            })
            .min()
            .map(|(_, slot)| slot)
    }
}

/// The command-line flags that set [`SessionCaps`], shared by `switchyard-server` (its central
/// runner) and `switchyard-mcp-runner`.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct SessionCapFlags {
    /// Most warm MCP sessions kept open in all; past it, the least recently used idle one
    /// closes (`capacity`).
    #[arg(
        long,
        env = "SWITCHYARD_MAX_WARM_SESSIONS",
        default_value_t = SessionCaps::DEFAULT_GLOBAL as u32,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_warm_sessions: u32,
    /// Most warm MCP sessions kept open per connection.
    #[arg(
        long,
        env = "SWITCHYARD_MAX_WARM_SESSIONS_PER_CONNECTION",
        default_value_t = SessionCaps::DEFAULT_PER_CONNECTION as u32,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_warm_sessions_per_connection: u32,
    /// Most warm MCP sessions kept open per submitter (a user or a device).
    #[arg(
        long,
        env = "SWITCHYARD_MAX_WARM_SESSIONS_PER_SUBMITTER",
        default_value_t = SessionCaps::DEFAULT_PER_SUBMITTER as u32,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_warm_sessions_per_submitter: u32,
}

impl From<SessionCapFlags> for SessionCaps {
    fn from(flags: SessionCapFlags) -> Self {
        Self {
            global: flags.max_warm_sessions as usize,
            per_connection: flags.max_warm_sessions_per_connection as usize,
            per_submitter: flags.max_warm_sessions_per_submitter as usize,
        }
    }
}
