//! A connection's tool catalog as people govern it: each tool's state, the classification a
//! person gave it, and the MCP server's annotations shown beside it as hints.
//!
//! A tool can be called only while it is [`ToolState::Classified`]. A classification is two
//! mandatory fields a person chose ([`ToolClassification`]); the server's annotations
//! ([`ToolHints`]) inform that choice and never stand in for it. Where the server says nothing,
//! the choice offered first ([`ToolHints::suggested`]) is the fail-safe one: side-effecting,
//! high risk. These types are re-exported from [`crate::api`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a tool of a connection's catalog stands. Derived, never stored: from its
/// connection's retirement, whether the latest discovery listed it, and its classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolState {
    /// Listed by discovery, not classified yet (new, or its connection was restored): it runs
    /// nothing until a person classifies it.
    Unclassified,
    /// Classified: it may be called.
    Classified,
    /// The latest discovery no longer listed it; it keeps its classification, if any, for
    /// when it comes back.
    Unavailable,
    /// Its connection is retired.
    Retired,
}

impl ToolState {
    /// The state's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolState::Unclassified => "unclassified",
            ToolState::Classified => "classified",
            ToolState::Unavailable => "unavailable",
            ToolState::Retired => "retired",
        }
    }

    /// The state of a tool: retired with its connection first, then unavailable, then
    /// whether it is classified.
    pub fn derive(retired: bool, available: bool, classified: bool) -> Self {
        if retired {
            ToolState::Retired
        } else if !available {
            ToolState::Unavailable
        } else if classified {
            ToolState::Classified
        } else {
            ToolState::Unclassified
        }
    }
}

impl std::fmt::Display for ToolState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much harm a tool's call could do, as a person judged it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Little or none.
    Low,
    /// Some.
    Medium,
    /// Much: a side-effecting high-risk call always needs a person's approval.
    High,
}

impl Risk {
    /// Every risk, lowest first.
    pub const ALL: [Risk; 3] = [Risk::Low, Risk::Medium, Risk::High];

    /// The risk's wire and database name.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
        }
    }
}

impl std::fmt::Display for Risk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Risk {
    type Err = crate::reconcile::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Risk::ALL
            .into_iter()
            .find(|risk| risk.as_str() == s)
            .ok_or_else(|| crate::reconcile::UnknownName {
                what: "risk",
                name: s.to_owned(),
            })
    }
}

/// A person's classification of a tool; both fields are mandatory.
/// `PUT /api/v1/workspaces/{ws}/connections/{c}/tools/{tool}/classification` takes it as its body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ToolClassification {
    /// Whether a call changes external state.
    pub side_effect: bool,
    /// How much harm a call could do.
    pub risk: Risk,
}

/// The MCP server's annotations of a tool that inform a classification: hints, never trusted
/// in its place. Each is `None` where the server gave none (or gave something not a boolean).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ToolHints {
    /// The tool does not change its environment.
    #[serde(
        rename = "readOnlyHint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub read_only: Option<bool>,
    /// A change it makes may destroy something (meaningful when not read-only).
    #[serde(
        rename = "destructiveHint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub destructive: Option<bool>,
    /// Calling it again with the same arguments has no further effect.
    #[serde(
        rename = "idempotentHint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub idempotent: Option<bool>,
    /// It reaches beyond a closed domain (the web, other people's systems).
    #[serde(
        rename = "openWorldHint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub open_world: Option<bool>,
}

impl ToolHints {
    /// The hints of an MCP tool's `annotations` object (absent or not an object: none).
    pub fn from_annotations(annotations: Option<&Value>) -> Self {
        let hint = |key: &str| {
            annotations
                .and_then(|a| a.get(key))
                .and_then(Value::as_bool)
        };
        Self {
            read_only: hint("readOnlyHint"),
            destructive: hint("destructiveHint"),
            idempotent: hint("idempotentHint"),
            open_world: hint("openWorldHint"),
        }
    }

    /// The classification offered first to the person who classifies the tool. Fail-safe: a
    /// tool is side-effecting unless the server says it is read-only, and a side-effecting
    /// tool is high risk unless the server says it destroys nothing (then medium). A read-only
    /// tool is low risk. Only a suggestion: nothing runs on it.
    pub fn suggested(&self) -> ToolClassification {
        match (self.read_only, self.destructive) {
            (Some(true), _) => ToolClassification {
                side_effect: false,
                risk: Risk::Low,
            },
            (_, Some(false)) => ToolClassification {
                side_effect: true,
                risk: Risk::Medium,
            },
            _ => ToolClassification {
                side_effect: true,
                risk: Risk::High,
            },
        }
    }
}

/// A discovered tool in a connection's catalog.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolView {
    /// Tool name.
    pub name: String,
    /// Description, as the server gave it.
    pub description: Option<String>,
    /// JSON schema of the arguments.
    pub input_schema: Value,
    /// Server annotations as the server gave them: hints, never trusted.
    pub annotations: Option<Value>,
    /// The annotations' four hints.
    #[serde(default)]
    pub hints: ToolHints,
    /// Where the tool stands: only a classified tool can be called.
    #[serde(default = "unclassified")]
    pub state: ToolState,
    /// The classification a person gave it; `None` until classified (and again after its
    /// connection is restored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<ToolClassification>,
    /// The fail-safe classification offered first, from the hints ([`ToolHints::suggested`]).
    pub suggested: ToolClassification,
    /// Set when a rediscovery found the annotations of a classified tool changed: its
    /// classification stands until a person classifies it again, which clears this.
    #[serde(default)]
    pub needs_review: bool,
    /// False once a rediscovery no longer lists the tool.
    pub available: bool,
    /// When the tool was last seen by discovery.
    pub discovered_at: DateTime<Utc>,
    /// True while its connection is retired: it stays in the catalog and runs nothing.
    #[serde(default)]
    pub retired: bool,
}

fn unclassified() -> ToolState {
    ToolState::Unclassified
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The classification offered first, for each combination of hints a server may give.
    #[test]
    fn suggested_classification_is_fail_safe() {
        let (read_only, side_effect) = (false, true);
        let table: &[(Option<Value>, bool, Risk)] = &[
            // No hint at all: side-effecting and high.
            (None, side_effect, Risk::High),
            (Some(json!({})), side_effect, Risk::High),
            (Some(json!({"title": "Echo"})), side_effect, Risk::High),
            // Not booleans are no hints.
            (
                Some(json!({"readOnlyHint": "true"})),
                side_effect,
                Risk::High,
            ),
            (Some(json!("readOnly")), side_effect, Risk::High),
            // Read-only: low, whatever else is said.
            (Some(json!({"readOnlyHint": true})), read_only, Risk::Low),
            (
                Some(json!({"readOnlyHint": true, "destructiveHint": true})),
                read_only,
                Risk::Low,
            ),
            (
                Some(json!({"readOnlyHint": true, "openWorldHint": true})),
                read_only,
                Risk::Low,
            ),
            // Not read-only, or unsaid: destructive unless said otherwise.
            (
                Some(json!({"readOnlyHint": false})),
                side_effect,
                Risk::High,
            ),
            (
                Some(json!({"readOnlyHint": false, "destructiveHint": true})),
                side_effect,
                Risk::High,
            ),
            (
                Some(json!({"readOnlyHint": false, "destructiveHint": false})),
                side_effect,
                Risk::Medium,
            ),
            (
                Some(json!({"destructiveHint": false})),
                side_effect,
                Risk::Medium,
            ),
            (
                Some(json!({"destructiveHint": false, "idempotentHint": true})),
                side_effect,
                Risk::Medium,
            ),
            // Idempotence or a closed world alone lowers nothing.
            (
                Some(json!({"idempotentHint": true})),
                side_effect,
                Risk::High,
            ),
            (
                Some(json!({"openWorldHint": false})),
                side_effect,
                Risk::High,
            ),
        ];
        for (annotations, side_effect, risk) in table {
            let hints = ToolHints::from_annotations(annotations.as_ref());
            assert_eq!(
                hints.suggested(),
                ToolClassification {
                    side_effect: *side_effect,
                    risk: *risk
                },
                "annotations {annotations:?}"
            );
        }
    }

    #[test]
    fn state_is_derived_retired_first() {
        use ToolState::*;
        for (retired, available, classified, state) in [
            (true, true, true, Retired),
            (true, false, false, Retired),
            (false, false, true, Unavailable),
            (false, false, false, Unavailable),
            (false, true, true, Classified),
            (false, true, false, Unclassified),
        ] {
            assert_eq!(ToolState::derive(retired, available, classified), state);
        }
    }

    #[test]
    fn hints_use_the_mcp_names() {
        let hints = ToolHints::from_annotations(Some(&json!({
            "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false
        })));
        assert_eq!(
            serde_json::to_value(hints).unwrap(),
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false})
        );
    }
}
