//! A call's evidence page: the evidence records captured from the call or its receipt lookups,
//! and the record its resolution cites, each as `switchyard evidence show` shows it (the
//! retained output is already redacted and bounded by the app). Records are read one by one
//! through [`crate::app::App::evidence_get`], under Use on their call's profile; one that has
//! expired, or that the reader may not read, is listed by id only.

use super::WebState;
use super::error::{WebError, WebResult};
use super::output::{self, OutputItem};
use super::page::{Chrome, html, when};
use super::session::SignedIn;
use crate::error::AppError;
use askama::Template;
use axum::extract::{Path, State};
use axum::response::Html;
use switchyard_protocol::api::EvidenceView;
use switchyard_protocol::{ErrorCode, EvidenceId};

/// One readable record.
struct Record {
    id: String,
    call: String,
    request_id: String,
    kind: String,
    tool: String,
    outcome: String,
    runner: String,
    connector_revision: String,
    captured: String,
    published: String,
    erased: Option<String>,
    /// Whether the call's resolution cites it.
    cited: bool,
    output: Vec<OutputItem>,
    structured: Option<String>,
    has_output: bool,
    truncated: bool,
    lineage: String,
}

impl Record {
    fn new(e: &EvidenceView, cited: bool) -> Self {
        let output = e.output.as_ref();
        Record {
            id: e.id.to_string(),
            call: e.call_id.to_string(),
            request_id: e.request_id.to_string(),
            kind: e.kind.to_string(),
            tool: e.tool_name.clone(),
            outcome: match e.resolution_outcome {
                Some(resolved) => format!("{} ({})", e.outcome, resolved),
                None => e.outcome.to_string(),
            },
            runner: e.runner.clone(),
            connector_revision: e
                .connector_revision
                .map(|r| r.to_string())
                .unwrap_or_else(|| "-".to_owned()),
            captured: when(&e.captured_at),
            published: when(&e.published_at),
            erased: e.erased_at.as_ref().map(when),
            cited,
            output: output.map(output::content_items).unwrap_or_default(),
            structured: output.and_then(output::structured),
            has_output: output.is_some(),
            truncated: e.output_truncated,
            lineage: serde_json::to_string_pretty(&e.lineage).unwrap_or_default(),
        }
    }
}

#[derive(Template)]
#[template(path = "evidence.html")]
struct EvidencePage {
    chrome: Chrome,
    ws: String,
    call: String,
    tool: String,
    records: Vec<Record>,
    /// Records linked to the call that cannot be read: expired, or not the reader's to read.
    unreadable: Vec<String>,
}

/// `GET /workspaces/{ws}/calls/{call}/evidence`.
pub(super) async fn page(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path((ws, call)): Path<(String, String)>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let view = s.app.call_get(actor, &ws, &call).await?;
    let workspace = s.app.workspace_get(actor, &ws).await?;
    let cited = view.resolution.as_ref().and_then(|r| r.source_version_id);
    let mut ids: Vec<EvidenceId> = view
        .lineage
        .as_ref()
        .map(|l| l.evidence_ids.clone())
        .unwrap_or_default();
    if let Some(cited) = cited.filter(|c| !ids.contains(c)) {
        ids.push(cited);
    }
    let mut records = Vec::new();
    let mut unreadable = Vec::new();
    for id in ids {
        match s.app.evidence_get(actor, &ws, &id.to_string()).await {
            Ok(record) => records.push(Record::new(&record, cited == Some(id))),
            Err(AppError::Refused {
                code: ErrorCode::EvidenceNotFound | ErrorCode::Forbidden,
                ..
            }) => unreadable.push(id.to_string()),
            Err(e) => return Err(WebError(e)),
        }
    }
    html(&EvidencePage {
        chrome: Chrome::in_workspace(&signed_in, &workspace.name, "calls"),
        ws: workspace.name,
        call: view.id.to_string(),
        tool: view.tool_name,
        records,
        unreadable,
    })
}
