//! The process group of a stdio MCP server this runner spawned, and the only place that
//! signals it.
//!
//! Each stdio server is started as the leader of a new process group, so everything it forks
//! can be reached with one `killpg`. A [`ProcessGroup`] is only ever made from the PID of a
//! child this process just spawned (never from a stored PID), and once it has been killed it
//! sends nothing more. Dropping a group that was not killed kills it, so a panic or an early
//! return leaves no orphans.

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Whether the group may still be signalled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupState {
    /// Spawned by us and not killed yet.
    Owned,
    /// SIGKILL was sent: the group is gone or going, and its id may be reused.
    Killed,
}

/// A process group led by a child this process spawned with `process_group(0)`.
#[derive(Debug)]
pub(crate) struct ProcessGroup {
    id: Pid,
    state: GroupState,
}

impl ProcessGroup {
    /// Takes charge of the group led by `leader`, the PID of a child this process has just
    /// spawned as a group leader. Refuses ids that would make `killpg` hit something else
    /// (0 is our own group, 1 is init).
    pub(crate) fn adopt(leader: u32) -> Option<Self> {
        let raw = i32::try_from(leader).ok().filter(|raw| *raw > 1)?;
        Some(Self {
            id: Pid::from_raw(raw),
            state: GroupState::Owned,
        })
    }

    /// The process group id (the leader's PID).
    pub(crate) fn id(&self) -> u32 {
        self.id.as_raw().unsigned_abs()
    }

    /// Asks every member to exit (SIGTERM).
    pub(crate) fn terminate(&self) {
        if self.state == GroupState::Owned {
            self.signal(Signal::SIGTERM);
        }
    }

    /// Kills every member (SIGKILL); the group is never signalled again.
    pub(crate) fn kill(&mut self) {
        if self.state == GroupState::Owned {
            self.signal(Signal::SIGKILL);
            self.state = GroupState::Killed;
        }
    }

    fn signal(&self, signal: Signal) {
        match killpg(self.id, signal) {
            Ok(()) => tracing::debug!(pgid = self.id.as_raw(), ?signal, "signalled process group"),
            // Every member has already exited.
            Err(Errno::ESRCH) => {}
            Err(error) => {
                tracing::warn!(pgid = self.id.as_raw(), ?signal, %error, "cannot signal process group");
            }
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if self.state == GroupState::Owned {
            tracing::debug!(
                pgid = self.id.as_raw(),
                "session dropped without close: killing its group"
            );
            self.kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_ids_that_name_our_own_group_or_init() {
        assert!(ProcessGroup::adopt(0).is_none());
        assert!(ProcessGroup::adopt(1).is_none());
        assert!(ProcessGroup::adopt(u32::MAX).is_none());
    }
}
