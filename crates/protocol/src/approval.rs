//! The approval gate: which calls wait for a person before they are queued ([`decide`], a pure
//! function of the tool's classification, its annotations and the profile's policy), and the
//! wire types of the approvals API.
//!
//! The classification sets a floor no policy lowers: a side-effecting `high` call always needs
//! a person ([`Floor::NeedsPerson`]). A policy can only ask more, or — `never`, for callers
//! with nobody to ask — refuse what the floor says needs a person (`approval_unavailable`),
//! never run it unapproved.

use crate::ids::*;
use crate::state::CallState;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::str::FromStr;

/// A profile's approval policy for a connection, or for one tool of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalPolicy {
    /// Only what the classification's floor asks: side-effecting `high` calls.
    #[default]
    Default,
    /// The floor, and every call of a tool whose annotations mark it destructive.
    Destructive,
    /// Every call, reading no annotation.
    Always,
    /// Nobody to ask: what the floor says needs a person is refused (`approval_unavailable`).
    Never,
}

/// Every policy, in declaration order.
pub const ALL_POLICIES: [ApprovalPolicy; 4] = [
    ApprovalPolicy::Default,
    ApprovalPolicy::Destructive,
    ApprovalPolicy::Always,
    ApprovalPolicy::Never,
];

impl ApprovalPolicy {
    /// The policy's wire and database name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Default => "default",
            ApprovalPolicy::Destructive => "destructive",
            ApprovalPolicy::Always => "always",
            ApprovalPolicy::Never => "never",
        }
    }
}

impl fmt::Display for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not one of an approval enum's ([`ApprovalPolicy`]: default, destructive,
/// always or never).
#[derive(Debug, thiserror::Error)]
#[error("unknown approval name `{0}` (policies: default, destructive, always or never)")]
pub struct UnknownPolicy(pub String);

impl FromStr for ApprovalPolicy {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ALL_POLICIES
            .into_iter()
            .find(|policy| policy.as_str() == s)
            .ok_or_else(|| UnknownPolicy(s.to_owned()))
    }
}

/// What a tool's classification alone says its calls need: the floor of [`decide`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Floor {
    /// Read-only: runs.
    ReadOnly,
    /// Side-effecting, `low` or `medium` risk: approved by the default policy.
    AutoApproved,
    /// Side-effecting, `high` risk: always needs a person.
    NeedsPerson,
}

/// Every floor.
pub const ALL_FLOORS: [Floor; 3] = [Floor::ReadOnly, Floor::AutoApproved, Floor::NeedsPerson];

impl Floor {
    /// The floor of a tool classified `side_effect` with risk `high` or not.
    pub fn of(side_effect: bool, high_risk: bool) -> Floor {
        match (side_effect, high_risk) {
            (false, _) => Floor::ReadOnly,
            (true, false) => Floor::AutoApproved,
            (true, true) => Floor::NeedsPerson,
        }
    }
}

/// Why a call waits for a person (shown with the question).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskReason {
    /// The tool is classified side-effecting and `high` risk: every policy but `never` asks.
    HighRisk,
    /// The policy is `destructive` and the tool's annotations mark it destructive.
    Destructive,
    /// The policy is `always`.
    Always,
}

impl AskReason {
    /// The reason's wire and database name.
    pub fn as_str(self) -> &'static str {
        match self {
            AskReason::HighRisk => "high_risk",
            AskReason::Destructive => "destructive",
            AskReason::Always => "always",
        }
    }

    /// The reason for a person.
    pub fn explain(self) -> &'static str {
        match self {
            AskReason::HighRisk => "the tool is classified side-effecting and high risk",
            AskReason::Destructive => {
                "the policy is `destructive` and the tool's annotations mark it destructive"
            }
            AskReason::Always => "the policy is `always`: every call asks",
        }
    }
}

impl fmt::Display for AskReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AskReason {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            AskReason::HighRisk,
            AskReason::Destructive,
            AskReason::Always,
        ]
        .into_iter()
        .find(|reason| reason.as_str() == s)
        .ok_or_else(|| UnknownPolicy(s.to_owned()))
    }
}

/// What [`decide`] says of a new call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Queue it.
    Run,
    /// Hold it in `awaiting_approval` until a person answers.
    Ask(AskReason),
    /// Refuse it (`approval_unavailable`): it needs a person and the policy says there is none.
    Refuse,
}

/// Decides whether a call runs, waits for a person, or is refused: from the floor its tool's
/// classification sets, whether the tool's annotations mark it destructive (see
/// [`marks_destructive`]) and the policy that applies (the tool's, else its connection's).
pub fn decide(floor: Floor, destructive: bool, policy: ApprovalPolicy) -> Decision {
    match (policy, floor) {
        (ApprovalPolicy::Never, Floor::NeedsPerson) => Decision::Refuse,
        (ApprovalPolicy::Never, _) => Decision::Run,
        (_, Floor::NeedsPerson) => Decision::Ask(AskReason::HighRisk),
        (ApprovalPolicy::Always, _) => Decision::Ask(AskReason::Always),
        (ApprovalPolicy::Destructive, _) if destructive => Decision::Ask(AskReason::Destructive),
        (ApprovalPolicy::Destructive | ApprovalPolicy::Default, _) => Decision::Run,
    }
}

/// [`decide`] for a call with two policies — the profile's, and the submitting agent's own
/// for the connection when it set one: the stricter answer wins (refused over held over run),
/// so an agent's setting can add a person but never take one away. Returns the decision and
/// the policy that made it.
pub fn decide_with_agent(
    floor: Floor,
    destructive: bool,
    profile: ApprovalPolicy,
    agent: Option<ApprovalPolicy>,
) -> (Decision, ApprovalPolicy) {
    let strictness = |decision: &Decision| match decision {
        Decision::Run => 0,
        Decision::Ask(_) => 1,
        Decision::Refuse => 2,
    };
    let by_profile = (decide(floor, destructive, profile), profile);
    match agent {
        Some(agent) => {
            let by_agent = (decide(floor, destructive, agent), agent);
            if strictness(&by_agent.0) > strictness(&by_profile.0) {
                by_agent
            } else {
                by_profile
            }
        }
        None => by_profile,
    }
}

/// Whether a tool's MCP annotations mark it destructive, with the MCP defaults: an explicit
/// `destructiveHint` says; without one, a tool is destructive unless `readOnlyHint` is true
/// (the specification's default, and the fail-safe reading of a server that says nothing).
pub fn marks_destructive(annotations: Option<&Value>) -> bool {
    let hint = |name: &str| {
        annotations
            .and_then(|a| a.get(name))
            .and_then(Value::as_bool)
    };
    match hint("destructiveHint") {
        Some(destructive) => destructive,
        None => hint("readOnlyHint") != Some(true),
    }
}

/// Where an approval question stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a person.
    Pending,
    /// Approved: the call was queued.
    Approved,
    /// Declined: the call will never run.
    Declined,
    /// Nobody answered within the workspace's approval timeout: the call will never run.
    Expired,
    /// Its call was cancelled while it waited: the call will never run.
    Cancelled,
}

/// Every approval state, in declaration order.
pub const ALL_APPROVAL_STATES: [ApprovalState; 5] = [
    ApprovalState::Pending,
    ApprovalState::Approved,
    ApprovalState::Declined,
    ApprovalState::Expired,
    ApprovalState::Cancelled,
];

impl ApprovalState {
    /// The state's wire and database name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Declined => "declined",
            ApprovalState::Expired => "expired",
            ApprovalState::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ApprovalState {
    type Err = UnknownPolicy;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ALL_APPROVAL_STATES
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownPolicy(s.to_owned()))
    }
}

/// One approval question: a held call, with everything a person needs to answer it.
/// `GET /api/v1/workspaces/{ws}/approvals/{call}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalView {
    /// The call it is about (the approval's id).
    pub call_id: CallId,
    /// Its workspace.
    pub workspace_id: WorkspaceId,
    /// The call's client idempotency key.
    pub request_id: RequestId,
    /// The profile the call runs under.
    pub profile_id: ProfileId,
    /// Its name.
    pub profile_name: String,
    /// The connection.
    pub connection_id: ConnectionId,
    /// Its name.
    pub connection_name: String,
    /// The tool.
    pub tool_name: String,
    /// The exact arguments the approval is bound to (absent once inputs have expired).
    pub arguments: Option<Value>,
    /// SHA-256 (hex) of the call's canonical payload: what an approval approves.
    pub payload_digest: String,
    /// Who asked: the submitter (for a device's call, the user who approved the device).
    pub asked_by: UserId,
    /// Their name.
    pub asked_by_name: String,
    /// The device that submitted it, if one did.
    pub asked_by_device: Option<DeviceId>,
    /// When it was asked.
    pub asked_at: DateTime<Utc>,
    /// Why it asks.
    pub why: AskReason,
    /// The policy that applied.
    pub policy: ApprovalPolicy,
    /// Where the question stands.
    pub state: ApprovalState,
    /// The call's state now.
    pub call_state: CallState,
    /// When it expires unanswered (none when the workspace sets no approval timeout).
    pub expires_at: Option<DateTime<Utc>>,
    /// Who answered.
    pub decided_by: Option<UserId>,
    /// Their name.
    pub decided_by_name: Option<String>,
    /// When.
    pub decided_at: Option<DateTime<Utc>>,
    /// The decliner's reason.
    pub reason: Option<String>,
    /// Whether the reader may answer it now: it is pending, they hold Approve on the call's
    /// profile, and they did not ask it.
    #[serde(default)]
    pub may_answer: bool,
}

/// `GET /api/v1/workspaces/{ws}/approvals`: questions the caller may answer or read, pending
/// first, newest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalList {
    /// The questions.
    pub approvals: Vec<ApprovalView>,
}

/// `POST …/approvals/{call}/approve` and `…/decline`: the answer's note.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DecideApproval {
    /// Why (for a decline: the result the caller reads). At most 2,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `PUT /api/v1/workspaces/{ws}/profiles/{profile}/approval-policy`: the policy of one of the
/// profile's connections (every one when `connection` is absent), or of one tool of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SetApprovalPolicy {
    /// Connection id or name; absent: every connection of the profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
    /// A tool of that connection: overrides the connection's policy for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The policy.
    pub policy: ApprovalPolicy,
}

/// One policy a profile sets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalPolicyView {
    /// The connection.
    pub connection_id: ConnectionId,
    /// Its name.
    pub connection_name: String,
    /// The tool it overrides the connection's policy for, if it is a tool's.
    pub tool: Option<String>,
    /// The policy.
    pub policy: ApprovalPolicy,
}

/// The policies a profile sets: one per connection, then the tools' overrides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalPolicyList {
    /// The policies.
    pub policies: Vec<ApprovalPolicyView>,
}

/// `PUT /api/v1/workspaces/{ws}/approval-timeout`, and its answer: how long a question waits
/// before its call expires.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalTimeout {
    /// Seconds; none: questions never expire.
    pub seconds: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ApprovalPolicy::*;
    use Floor::*;

    /// An agent's policy can add a person, never take one away: over every floor, annotation
    /// and pair of policies, the answer is the stricter of the two alone, and without an agent
    /// policy it is the profile's.
    #[test]
    fn an_agent_policy_only_tightens() {
        let rank = |d: Decision| match d {
            Decision::Run => 0,
            Decision::Ask(_) => 1,
            Decision::Refuse => 2,
        };
        for floor in ALL_FLOORS {
            for destructive in [false, true] {
                for profile in ALL_POLICIES {
                    assert_eq!(
                        decide_with_agent(floor, destructive, profile, None),
                        (decide(floor, destructive, profile), profile)
                    );
                    for agent in ALL_POLICIES {
                        let (both, _) = decide_with_agent(floor, destructive, profile, Some(agent));
                        let alone = [profile, agent].map(|p| rank(decide(floor, destructive, p)));
                        assert_eq!(
                            rank(both),
                            alone[0].max(alone[1]),
                            "{floor:?} {destructive} {profile:?} {agent:?}"
                        );
                    }
                }
            }
        }
        // The profile holds a high-risk call for a person; an agent's `never` refuses it.
        assert_eq!(
            decide_with_agent(NeedsPerson, false, Default, Some(Never)),
            (Decision::Refuse, Never)
        );
        // The profile runs a destructive call; the agent's `destructive` holds it.
        assert_eq!(
            decide_with_agent(AutoApproved, true, Default, Some(Destructive)),
            (Decision::Ask(AskReason::Destructive), Destructive)
        );
    }

    /// Every policy × floor × annotation, written out: the table the issue states.
    #[test]
    fn every_combination_decides_as_the_table_says() {
        let ask = Decision::Ask;
        let table = [
            // (policy, floor, marked destructive) → decision
            (Default, ReadOnly, false, Decision::Run),
            (Default, ReadOnly, true, Decision::Run),
            (Default, AutoApproved, false, Decision::Run),
            (Default, AutoApproved, true, Decision::Run),
            (Default, NeedsPerson, false, ask(AskReason::HighRisk)),
            (Default, NeedsPerson, true, ask(AskReason::HighRisk)),
            (Destructive, ReadOnly, false, Decision::Run),
            (Destructive, ReadOnly, true, ask(AskReason::Destructive)),
            (Destructive, AutoApproved, false, Decision::Run),
            (Destructive, AutoApproved, true, ask(AskReason::Destructive)),
            (Destructive, NeedsPerson, false, ask(AskReason::HighRisk)),
            (Destructive, NeedsPerson, true, ask(AskReason::HighRisk)),
            (Always, ReadOnly, false, ask(AskReason::Always)),
            (Always, ReadOnly, true, ask(AskReason::Always)),
            (Always, AutoApproved, false, ask(AskReason::Always)),
            (Always, AutoApproved, true, ask(AskReason::Always)),
            (Always, NeedsPerson, false, ask(AskReason::HighRisk)),
            (Always, NeedsPerson, true, ask(AskReason::HighRisk)),
            (Never, ReadOnly, false, Decision::Run),
            (Never, ReadOnly, true, Decision::Run),
            (Never, AutoApproved, false, Decision::Run),
            (Never, AutoApproved, true, Decision::Run),
            (Never, NeedsPerson, false, Decision::Refuse),
            (Never, NeedsPerson, true, Decision::Refuse),
        ];
        assert_eq!(table.len(), ALL_POLICIES.len() * ALL_FLOORS.len() * 2);
        for (policy, floor, destructive, decision) in table {
            assert_eq!(
                decide(floor, destructive, policy),
                decision,
                "{policy} × {floor:?} × destructive={destructive}"
            );
        }
    }

    #[test]
    fn the_classification_sets_the_floor() {
        assert_eq!(Floor::of(false, false), ReadOnly);
        assert_eq!(Floor::of(false, true), ReadOnly);
        assert_eq!(Floor::of(true, false), AutoApproved);
        assert_eq!(Floor::of(true, true), NeedsPerson);
    }

    /// Every annotation a tool may carry, as the decision reads it.
    fn annotations() -> Vec<Option<Value>> {
        let mut all = vec![None, Some(serde_json::json!({}))];
        let hint = [None, Some(false), Some(true)];
        for read_only in hint {
            for destructive in hint {
                let mut a = serde_json::Map::new();
                if let Some(r) = read_only {
                    a.insert("readOnlyHint".into(), r.into());
                }
                if let Some(d) = destructive {
                    a.insert("destructiveHint".into(), d.into());
                }
                all.push(Some(Value::Object(a)));
            }
        }
        all
    }

    #[test]
    fn annotations_mark_destructive_with_the_mcp_defaults() {
        let marks = |a: Value| marks_destructive(Some(&a));
        assert!(
            marks_destructive(None),
            "no annotations: the fail-safe default"
        );
        assert!(marks(serde_json::json!({})));
        assert!(!marks(serde_json::json!({"readOnlyHint": true})));
        assert!(marks(serde_json::json!({"readOnlyHint": false})));
        assert!(!marks(serde_json::json!({"destructiveHint": false})));
        assert!(marks(
            serde_json::json!({"readOnlyHint": true, "destructiveHint": true})
        ));
    }

    /// The property, over the whole (finite) input space — every policy, every classification
    /// (side effect × risk), every annotation a tool may carry: a side-effecting `high` call
    /// never runs without an approval, and a call is refused only when that floor asks.
    #[test]
    fn no_side_effecting_high_call_ever_runs_unapproved() {
        for policy in ALL_POLICIES {
            for side_effect in [false, true] {
                // low, medium, high
                for high in [false, false, true] {
                    for annotation in annotations() {
                        let floor = Floor::of(side_effect, high);
                        let decision =
                            decide(floor, marks_destructive(annotation.as_ref()), policy);
                        if side_effect && high {
                            assert!(
                                matches!(decision, Decision::Ask(_) | Decision::Refuse),
                                "{policy} ran a side-effecting high call: {annotation:?}"
                            );
                        } else {
                            assert_ne!(decision, Decision::Refuse, "{policy} {floor:?}");
                        }
                        if policy == Always {
                            assert_ne!(decision, Decision::Run);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn policy_names_round_trip() {
        for policy in ALL_POLICIES {
            assert_eq!(policy.as_str().parse::<ApprovalPolicy>().unwrap(), policy);
            assert_eq!(
                serde_json::to_string(&policy).unwrap(),
                format!("\"{policy}\"")
            );
        }
        assert!("sometimes".parse::<ApprovalPolicy>().is_err());
    }
}
