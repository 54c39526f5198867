//! The Diagnose button of a connection's page: `POST …/connections/{connection}/diagnose`
//! runs the same checks as `switchyard connection diagnose` and shows them in order.

use super::WebState;
use super::error::WebResult;
use super::page::{Chrome, html};
use super::session::{CsrfOnly, Protected};
use askama::Template;
use axum::extract::{Path, State};
use axum::response::Html;
use switchyard_protocol::diagnose::{
    CheckResult, CheckStatus, DiagnoseRequest, DiagnosisView, LiveCheck,
};

#[derive(Template)]
#[template(path = "diagnosis.html")]
struct DiagnosisPage {
    chrome: Chrome,
    ws: String,
    diagnosis: DiagnosisView,
    checks: Vec<CheckLine>,
    on_device: bool,
}

/// One check as the page shows it.
struct CheckLine {
    check: &'static str,
    status: &'static str,
    /// The badge's tone for the status.
    tone: &'static str,
    detail: String,
}

impl From<&CheckResult> for CheckLine {
    fn from(result: &CheckResult) -> Self {
        Self {
            check: result.check.as_str(),
            status: result.status.as_str(),
            tone: match result.status {
                CheckStatus::Passed => "ok",
                CheckStatus::Failed => "bad",
                CheckStatus::Skipped => "muted",
            },
            detail: result.detail.clone(),
        }
    }
}

/// `POST /workspaces/{ws}/connections/{connection}/diagnose`: the diagnosis, as a page
/// (workspace admins, as in the API).
pub(super) async fn diagnose(
    State(s): State<WebState>,
    Path((ws, key)): Path<(String, String)>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Html<String>> {
    let signed_in = &protected.signed_in;
    let actor = &signed_in.session.actor;
    let diagnosis = s
        .app
        .connection_diagnose(actor, &ws, &key, DiagnoseRequest::default())
        .await?;
    html(&DiagnosisPage {
        chrome: Chrome::in_workspace(signed_in, &ws, "connections"),
        ws,
        checks: diagnosis.checks.iter().map(CheckLine::from).collect(),
        on_device: diagnosis.live_check == LiveCheck::OnDevice,
        diagnosis,
    })
}
