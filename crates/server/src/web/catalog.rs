//! A connection's governance on its page: the tool catalog (the server's hints as given, each
//! tool's state and classification) with a Classify form per tool for those holding the
//! manage-integrations right, and the connection's recent audit history for those who may
//! read the audit log. The app layer decides who may; this only asks it.

use super::WebState;
use super::error::{WebError, WebResult};
use super::page::{encode_segment, when};
use super::session::{CsrfForm, Protected};
use crate::app::{Actor, AuditQuery};
use crate::error::AppError;
use axum::extract::{Path, State};
use axum::response::Redirect;
use std::fmt::Write as _;
use switchyard_protocol::ErrorCode;
use switchyard_protocol::api::{
    AuditActorKind, AuditEntryView, Risk, ToolClassification, ToolHints, ToolState, ToolView,
};

/// How many audit entries the connection page shows.
const RECENT_AUDIT: u32 = 20;

/// One of a tool's four hints, as the server gave it.
pub(super) struct Hint {
    /// The annotation's name, such as `readOnlyHint`.
    pub(super) name: &'static str,
    /// `true`, `false`, or `no hint`.
    pub(super) value: &'static str,
}

/// A choice of a select, pre-selected or not.
pub(super) struct Choice {
    /// The form value, also shown.
    pub(super) value: &'static str,
    /// Pre-selected.
    pub(super) selected: bool,
}

/// A tool of the catalog as the connection page shows it.
pub(super) struct CatalogRow {
    /// The tool's name.
    pub(super) name: String,
    /// The name as a path segment.
    pub(super) path: String,
    /// The four hints, in a fixed order.
    pub(super) hints: Vec<Hint>,
    /// `unclassified`, `classified`, `unavailable` or `retired`.
    pub(super) state: &'static str,
    /// CSS class of the state's badge.
    pub(super) tone: &'static str,
    /// A rediscovery changed its annotations since it was classified.
    pub(super) needs_review: bool,
    /// Not retired: a retired connection's tools are classified again once it is restored.
    pub(super) classifiable: bool,
    /// The classification in words, or none.
    pub(super) classification: Option<String>,
    /// The form's side effect choices: the current classification, else the suggested one.
    pub(super) effects: Vec<Choice>,
    /// The form's risk choices, likewise.
    pub(super) risks: Vec<Choice>,
}

fn hint_word(hint: Option<bool>) -> &'static str {
    match hint {
        Some(true) => "true",
        Some(false) => "false",
        None => "no hint",
    }
}

fn hint_list(hints: &ToolHints) -> Vec<Hint> {
    [
        ("readOnlyHint", hints.read_only),
        ("destructiveHint", hints.destructive),
        ("idempotentHint", hints.idempotent),
        ("openWorldHint", hints.open_world),
    ]
    .into_iter()
    .map(|(name, hint)| Hint {
        name,
        value: hint_word(hint),
    })
    .collect()
}

/// A side effect as the form names it.
const SIDE_EFFECTING: &str = "side-effecting";
/// No side effect, as the form names it.
const READ_ONLY: &str = "read-only";

fn effect_word(side_effect: bool) -> &'static str {
    if side_effect {
        SIDE_EFFECTING
    } else {
        READ_ONLY
    }
}

fn catalog_row(tool: &ToolView) -> CatalogRow {
    let chosen = tool.classification.unwrap_or(tool.suggested);
    CatalogRow {
        name: tool.name.clone(),
        path: encode_segment(&tool.name),
        hints: hint_list(&tool.hints),
        state: tool.state.as_str(),
        tone: match tool.state {
            ToolState::Classified => "ok",
            ToolState::Unclassified => "warn",
            _ => "muted",
        },
        needs_review: tool.needs_review,
        classifiable: tool.state != ToolState::Retired,
        classification: tool
            .classification
            .map(|c| format!("{}, {} risk", effect_word(c.side_effect), c.risk)),
        effects: [SIDE_EFFECTING, READ_ONLY]
            .into_iter()
            .map(|value| Choice {
                value,
                selected: value == effect_word(chosen.side_effect),
            })
            .collect(),
        risks: Risk::ALL
            .into_iter()
            .map(|risk| Choice {
                value: risk.as_str(),
                selected: risk == chosen.risk,
            })
            .collect(),
    }
}

/// The catalog of connection `key`, and whether the actor may classify its tools (workspace
/// admins and the installation owner: the same check the API makes).
pub(super) async fn catalog(
    s: &WebState,
    actor: &Actor,
    ws: &str,
    key: &str,
) -> WebResult<(Vec<CatalogRow>, bool)> {
    let tools = s.app.tool_list(actor, ws, key).await?;
    let may_classify = match s.app.integrations_membership(actor, ws).await {
        Ok(_) => true,
        Err(AppError::Refused {
            code: ErrorCode::Forbidden,
            ..
        }) => false,
        Err(e) => return Err(WebError(e)),
    };
    Ok((tools.iter().map(catalog_row).collect(), may_classify))
}

/// An audit entry as the connection and audit pages show it.
pub(super) struct AuditRow {
    /// Its place in the workspace's chain.
    pub(super) seq: i64,
    /// The call, for `call.*` entries.
    pub(super) call: Option<String>,
    /// When it was written.
    pub(super) at: String,
    /// Who: a user's name, a device or the system.
    pub(super) actor: String,
    /// The action's dotted name.
    pub(super) action: String,
    /// The object, and its summaries before and after.
    pub(super) summary: String,
}

/// What changed, in one line: the object, then its summaries before and after.
fn summary(entry: &AuditEntryView) -> String {
    let mut text = format!("{} {}", entry.object.kind, entry.object.name);
    for (label, summary) in [("before", &entry.before), ("after", &entry.after)] {
        if let Some(summary) = summary {
            let _ = write!(text, " · {label} {summary}");
        }
    }
    text
}

/// An entry as a table row.
pub(super) fn audit_row(entry: &AuditEntryView) -> AuditRow {
    AuditRow {
        seq: entry.seq,
        call: entry.call_id.map(|c| c.to_string()),
        at: when(&entry.at),
        actor: match entry.actor.kind {
            AuditActorKind::User => entry.actor.name.clone(),
            AuditActorKind::Device => format!("device {}", entry.actor.name),
            AuditActorKind::System => format!("system ({})", entry.actor.name),
        },
        action: entry.action.clone(),
        summary: summary(entry),
    }
}

/// The newest audit entries about connection `key`, or `None` when the actor may not read the
/// workspace's audit log (only its admins and installation owners may).
pub(super) async fn recent_audit(
    s: &WebState,
    actor: &Actor,
    ws: &str,
    key: &str,
) -> WebResult<Option<Vec<AuditRow>>> {
    let query = AuditQuery {
        connection: Some(key.to_owned()),
        limit: Some(RECENT_AUDIT),
        ..AuditQuery::default()
    };
    match s.app.audit_list(actor, ws, query).await {
        Ok(entries) => Ok(Some(entries.iter().map(audit_row).collect())),
        Err(AppError::Refused {
            code: ErrorCode::Forbidden,
            ..
        }) => Ok(None),
        Err(e) => Err(WebError(e)),
    }
}

/// The Classify form of one tool.
#[derive(Debug, serde::Deserialize)]
pub(super) struct ClassifyForm {
    #[serde(default)]
    csrf: String,
    /// `side-effecting` or `read-only`.
    #[serde(default)]
    effect: String,
    /// `low`, `medium` or `high`.
    #[serde(default)]
    risk: String,
}

impl CsrfForm for ClassifyForm {
    fn csrf(&self) -> Option<&str> {
        Some(&self.csrf)
    }
}

impl ClassifyForm {
    fn classification(&self) -> Result<ToolClassification, WebError> {
        let side_effect = match self.effect.as_str() {
            SIDE_EFFECTING => true,
            READ_ONLY => false,
            other => {
                return Err(WebError::refused(
                    ErrorCode::InvalidRequest,
                    format!(
                        "side effect `{other}` is neither `{SIDE_EFFECTING}` nor `{READ_ONLY}`; choose one"
                    ),
                ));
            }
        };
        let risk = self.risk.parse::<Risk>().map_err(|_| {
            WebError::refused(
                ErrorCode::InvalidRequest,
                format!(
                    "risk `{}` is not one of low, medium or high; choose one",
                    self.risk
                ),
            )
        })?;
        Ok(ToolClassification { side_effect, risk })
    }
}

/// `POST /workspaces/{ws}/connections/{connection}/tools/{tool}/classify`: classifies one
/// tool (workspace admins and the installation owner), then shows the connection again.
pub(super) async fn classify(
    State(s): State<WebState>,
    Path((ws, key, tool)): Path<(String, String, String)>,
    protected: Protected<ClassifyForm>,
) -> WebResult<Redirect> {
    let actor = &protected.signed_in.session.actor;
    let classification = protected.form.classification()?;
    s.app
        .tool_classify(actor, &ws, &key, &tool, classification)
        .await?;
    let connection = s.app.connection_get(actor, &ws, &key).await?;
    Ok(Redirect::to(&format!(
        "/workspaces/{}/connections/{}?notice=classified#tools-h",
        encode_segment(&ws),
        encode_segment(&connection.name)
    )))
}
