//! Properties of the approval decision over inputs a server controls: a tool's `annotations`
//! are whatever JSON the MCP server sends (hints of the wrong type, extra keys, nesting, not an
//! object at all). The unit tests in `src/approval.rs` walk the modelled space exhaustively;
//! these generate the annotations instead, so that no reading of a hostile or sloppy server can
//! let a side-effecting `high` call run without a person.

use proptest::prelude::*;
use serde_json::{Map, Value};
use switchyard_protocol::approval::{
    ALL_POLICIES, ApprovalPolicy, Decision, Floor, decide, marks_destructive,
};
use switchyard_protocol::tools::{Risk, ToolClassification, ToolHints};

/// The hint keys of the MCP specification, which the decision and the suggestion read.
const HINTS: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        prop_oneof![Just("true".to_owned()), Just("false".to_owned()), ".{0,8}"]
            .prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,16}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// What a server may send as a tool's `annotations`: nothing, any JSON, or an object whose
/// hint keys carry any JSON (booleans most often, as real servers send).
fn any_annotations() -> impl Strategy<Value = Option<Value>> {
    let hint_value = prop_oneof![
        3 => any::<bool>().prop_map(Value::Bool),
        1 => any_json(),
    ];
    let hinted = (
        prop::collection::vec(prop::option::of(hint_value), HINTS.len()),
        prop::collection::btree_map("[a-zA-Z]{1,16}", any_json(), 0..3),
    )
        .prop_map(|(hints, extra)| {
            let mut object: Map<String, Value> = extra.into_iter().collect();
            for (key, value) in HINTS.iter().zip(hints) {
                if let Some(value) = value {
                    object.insert((*key).to_owned(), value);
                }
            }
            Value::Object(object)
        });
    prop_oneof![
        1 => Just(None),
        1 => any_json().prop_map(Some),
        4 => hinted.prop_map(Some),
    ]
}

fn any_policy() -> impl Strategy<Value = ApprovalPolicy> {
    prop::sample::select(ALL_POLICIES.to_vec())
}

fn any_classification() -> impl Strategy<Value = ToolClassification> {
    (
        any::<bool>(),
        prop::sample::select(vec![Risk::Low, Risk::Medium, Risk::High]),
    )
        .prop_map(|(side_effect, risk)| ToolClassification { side_effect, risk })
}

/// Whether `annotations` says, as a JSON boolean, that hint `key` is `value`.
fn says(annotations: Option<&Value>, key: &str, value: bool) -> bool {
    annotations
        .and_then(|a| a.get(key))
        .and_then(Value::as_bool)
        == Some(value)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// The property: under no policy and no annotation does a side-effecting `high`
    /// call run without an approval; `always` never runs a call unasked; a call is refused
    /// (`approval_unavailable`) only when it needs a person and the policy is `never`.
    #[test]
    fn no_side_effecting_high_call_runs_without_approval(
        policy in any_policy(),
        classification in any_classification(),
        annotations in any_annotations(),
    ) {
        let floor = Floor::of(classification.side_effect, classification.risk == Risk::High);
        let decision = decide(floor, marks_destructive(annotations.as_ref()), policy);
        if classification.side_effect && classification.risk == Risk::High {
            prop_assert!(matches!(decision, Decision::Ask(_) | Decision::Refuse),
                "{policy} ran a side-effecting high call with annotations {annotations:?}");
        }
        if policy == ApprovalPolicy::Always {
            prop_assert_ne!(decision, Decision::Run);
        }
        prop_assert_eq!(
            decision == Decision::Refuse,
            policy == ApprovalPolicy::Never && floor == Floor::NeedsPerson
        );
    }

    /// Under `destructive`, only an explicit boolean in the annotations can spare a call the
    /// question: `destructiveHint: false`, or `readOnlyHint: true` with no `destructiveHint`.
    #[test]
    fn destructive_policy_asks_unless_the_server_says_otherwise(
        classification in any_classification(),
        annotations in any_annotations(),
    ) {
        let floor = Floor::of(classification.side_effect, classification.risk == Risk::High);
        let decision = decide(floor, marks_destructive(annotations.as_ref()), ApprovalPolicy::Destructive);
        let a = annotations.as_ref();
        let destructive_hint = a.and_then(|a| a.get("destructiveHint")).and_then(Value::as_bool);
        let spared = match destructive_hint {
            Some(destructive) => !destructive,
            None => says(a, "readOnlyHint", true),
        };
        prop_assert_eq!(decision == Decision::Run, spared && floor != Floor::NeedsPerson);
    }

    /// The classification offered first is fail-safe whatever the server sends: read-only only
    /// when `readOnlyHint` is the boolean `true`, below `high` only when the server says, as a
    /// boolean, that the tool is read-only or destroys nothing.
    #[test]
    fn the_suggested_classification_is_fail_safe(annotations in any_annotations()) {
        let a = annotations.as_ref();
        let suggested = ToolHints::from_annotations(a).suggested();
        if !says(a, "readOnlyHint", true) {
            prop_assert!(suggested.side_effect);
        }
        if suggested.risk != Risk::High {
            prop_assert!(says(a, "readOnlyHint", true) || says(a, "destructiveHint", false));
        }
    }
}
