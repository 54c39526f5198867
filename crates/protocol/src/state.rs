//! The call lifecycle: one enum and the one function that says which transitions are legal.
//!
//! ```text
//! awaiting_approval ──approve──▶ queued   (a person said yes: the ordinary path from here)
//!   │ decline ─▶ declined   │ timeout ─▶ expired   (both certainly never sent)
//!
//! queued ──lease──▶ leased ──start(ack)──▶ running ──result──▶ succeeded | tool_error
//!   │                 │                       │
//!   │ cancel          │ lease lost            │ runner lost / timeout / cut mid-call
//!   ▼                 ▼                       ▼
//! cancelled        queued (again,          unknown ──reconcile/resolve──▶ resolved
//! expired           nothing was sent)
//! failed           (certain no effect)
//! ```

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Where a call is in its lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// Held for a person's approval before it is queued: no runner can lease it.
    AwaitingApproval,
    /// Accepted and waiting for a runner.
    Queued,
    /// Leased by a runner; nothing has been sent to the MCP server.
    Leased,
    /// The server acknowledged the start: the request may have reached the MCP server.
    Running,
    /// The MCP server answered with a result.
    Succeeded,
    /// The MCP server answered with `isError: true`.
    ToolError,
    /// Certainly no effect: refused or failed before the request was sent.
    Failed,
    /// Cancelled before anything was sent.
    Cancelled,
    /// Waited in the queue too long without a runner, or for an approval nobody gave in
    /// time: never sent.
    Expired,
    /// The request may have been applied, but no answer was recorded.
    Unknown,
    /// An unknown call settled by a later observation or resolution.
    Resolved,
    /// A person declined to approve it: never sent; their reason is its result.
    Declined,
}

/// Every state, in lifecycle order.
pub const ALL_STATES: [CallState; 12] = [
    CallState::AwaitingApproval,
    CallState::Queued,
    CallState::Leased,
    CallState::Running,
    CallState::Succeeded,
    CallState::ToolError,
    CallState::Failed,
    CallState::Cancelled,
    CallState::Expired,
    CallState::Unknown,
    CallState::Resolved,
    CallState::Declined,
];

impl CallState {
    /// The state's wire and database name.
    pub fn as_str(self) -> &'static str {
        match self {
            CallState::AwaitingApproval => "awaiting_approval",
            CallState::Queued => "queued",
            CallState::Leased => "leased",
            CallState::Running => "running",
            CallState::Succeeded => "succeeded",
            CallState::ToolError => "tool_error",
            CallState::Failed => "failed",
            CallState::Cancelled => "cancelled",
            CallState::Expired => "expired",
            CallState::Unknown => "unknown",
            CallState::Resolved => "resolved",
            CallState::Declined => "declined",
        }
    }

    /// A terminal state never changes again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            CallState::Succeeded
                | CallState::ToolError
                | CallState::Failed
                | CallState::Cancelled
                | CallState::Expired
                | CallState::Resolved
                | CallState::Declined
        )
    }

    /// Whether the lifecycle allows moving from `self` to `next`.
    ///
    /// This is the only place the transitions are written down; the database applies each one
    /// as a single guarded update on the current state.
    pub fn can_transition_to(self, next: CallState) -> bool {
        use CallState::*;
        matches!(
            (self, next),
            // Only a person's answer, its timeout or a cancel moves a held call;
            // nothing leases it.
            (AwaitingApproval, Queued | Declined | Expired | Cancelled)
                | (Queued, Leased | Cancelled | Expired | Failed)
                // Lease lost before the start ack: nothing was sent, so it may run again.
                | (Leased, Queued | Running | Failed | Cancelled)
                // After the start ack the request may have been sent: failure is only
                // certain when the runner knows it never dispatched.
                | (Running, Succeeded | ToolError | Failed | Unknown)
                | (Unknown, Resolved)
        )
    }
}

impl fmt::Display for CallState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not one of [`CallState`]'s.
#[derive(Debug, thiserror::Error)]
#[error("unknown call state `{0}`")]
pub struct UnknownState(pub String);

impl FromStr for CallState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ALL_STATES
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CallState::*;

    #[test]
    fn names_round_trip() {
        for state in ALL_STATES {
            assert_eq!(state.as_str().parse::<CallState>().unwrap(), state);
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
        }
        assert!("done".parse::<CallState>().is_err());
    }

    /// The exhaustive table: every pair not listed here is illegal.
    #[test]
    fn transitions_are_exactly_the_lifecycle() {
        let legal = [
            (AwaitingApproval, Queued),
            (AwaitingApproval, Declined),
            (AwaitingApproval, Expired),
            (AwaitingApproval, Cancelled),
            (Queued, Leased),
            (Queued, Cancelled),
            (Queued, Expired),
            (Queued, Failed),
            (Leased, Queued),
            (Leased, Running),
            (Leased, Failed),
            (Leased, Cancelled),
            (Running, Succeeded),
            (Running, ToolError),
            (Running, Failed),
            (Running, Unknown),
            (Unknown, Resolved),
        ];
        for from in ALL_STATES {
            for to in ALL_STATES {
                assert_eq!(
                    from.can_transition_to(to),
                    legal.contains(&(from, to)),
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn terminal_states_have_no_way_out() {
        for from in ALL_STATES.into_iter().filter(|s| s.is_terminal()) {
            assert!(
                ALL_STATES.iter().all(|to| !from.can_transition_to(*to)),
                "{from}"
            );
        }
        // Unknown is not terminal: it can still be resolved, but never re-run.
        assert!(!Unknown.is_terminal());
        assert!(!Unknown.can_transition_to(Queued));
        assert!(!Running.can_transition_to(Queued));
    }

    /// A held call reaches a runner only through `queued`, which only an approval enters.
    #[test]
    fn an_awaiting_call_is_never_leased_or_started() {
        for to in [Leased, Running, Succeeded, ToolError, Failed, Unknown] {
            assert!(!AwaitingApproval.can_transition_to(to), "{to}");
        }
        assert!(!AwaitingApproval.is_terminal());
        for from in ALL_STATES {
            assert!(
                !from.can_transition_to(AwaitingApproval),
                "nothing goes back to awaiting approval: {from}"
            );
        }
    }
}
