//! Settling an `unknown` call from its inspector page, as `switchyard mcp reconcile` and
//! `switchyard mcp resolve` do: **Look up the receipt** runs the connection's approved receipt
//! lookup ([`crate::app::App::call_reconcile`]), and the **Resolve** form records an outcome
//! citing an evidence record, with a reason ([`crate::app::App::call_resolve`]). The app layer
//! decides who may; a refusal shows the call page again with the app's message and the form as
//! it was typed, and nothing is written.

use super::WebState;
use super::calls;
use super::error::{WebError, WebResult};
use super::page::when;
use super::session::{CsrfForm, Protected, SignedIn};
use crate::app::Actor;
use crate::error::AppError;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use switchyard_protocol::api::{
    CallKind, CallView, MAX_EXPLANATION_CHARS, ReconcileCall, ResolutionOutcome, ResolveCall,
};
use switchyard_protocol::{CallState, ErrorCode, EvidenceId, RequestId};

/// The evidence choice that means "the id typed below".
const OTHER: &str = "other";

/// The outcomes the API accepts, with what each means.
const OUTCOMES: [(ResolutionOutcome, &str); 3] = [
    (
        ResolutionOutcome::Succeeded,
        "succeeded: the effect happened",
    ),
    (
        ResolutionOutcome::NotApplied,
        "not applied: the effect did not happen",
    ),
    (
        ResolutionOutcome::Failed,
        "failed: the server answered with an error",
    ),
];

/// One option of a select.
pub(super) struct Choice {
    /// The submitted value.
    pub(super) value: String,
    /// What the option says.
    pub(super) label: String,
    /// Whether it is chosen.
    pub(super) selected: bool,
}

/// The settle section of an unknown tool call's page.
pub(super) struct SettleModel {
    /// Receipt lookups run for the call so far, oldest first (call ids).
    pub(super) lookups: Vec<String>,
    /// The call's readable evidence records (its own and its lookups').
    pub(super) evidence: Vec<Choice>,
    /// Whether "another record" is the evidence choice.
    pub(super) other_chosen: bool,
    /// The other record's id, as typed.
    pub(super) other_evidence: String,
    /// The outcomes.
    pub(super) outcomes: Vec<Choice>,
    /// The reason, as typed.
    pub(super) explanation: String,
    /// Most characters a reason may have.
    pub(super) max_explanation: usize,
    /// A fresh idempotency key for the lookup (a double submission queues one lookup).
    pub(super) lookup_request_id: String,
    /// A fresh idempotency key for the resolution.
    pub(super) resolve_request_id: String,
    /// The app's refusal of the last submission.
    pub(super) error: Option<String>,
}

/// A refused settle form: the app's message, and the resolve form as it was typed.
pub(super) struct Refusal {
    message: String,
    typed: Option<ResolveForm>,
}

impl SettleModel {
    /// The section for `call` when it is an unknown tool call not erased, else `None`.
    pub(super) async fn for_call(
        s: &WebState,
        actor: &Actor,
        ws: &str,
        call: &CallView,
        refusal: Option<Refusal>,
    ) -> WebResult<Option<Self>> {
        // An erased call refuses both (410 `call_erased`): nothing to offer.
        if call.state != CallState::Unknown
            || call.kind != CallKind::Tool
            || call.erased_at.is_some()
        {
            return Ok(None);
        }
        let lineage = call.lineage.clone().unwrap_or_default();
        let (message, typed) = match refusal {
            Some(r) => (Some(r.message), r.typed.unwrap_or_default()),
            None => (None, ResolveForm::default()),
        };
        let mut evidence = Vec::new();
        for id in &lineage.evidence_ids {
            match s.app.evidence_get(actor, ws, &id.to_string()).await {
                Ok(record) if record.erased_at.is_none() => evidence.push(Choice {
                    value: id.to_string(),
                    label: format!(
                        "{id} · {} {} · captured {}",
                        record.kind,
                        record.tool_name,
                        when(&record.captured_at)
                    ),
                    selected: typed.evidence == id.to_string(),
                }),
                // Erased or expired records cannot be cited.
                Ok(_)
                | Err(AppError::Refused {
                    code: ErrorCode::EvidenceNotFound,
                    ..
                }) => {}
                Err(e) => return Err(WebError(e)),
            }
        }
        let other_chosen = typed.evidence == OTHER || !typed.evidence_id.is_empty();
        Ok(Some(SettleModel {
            lookups: lineage
                .lookup_call_ids
                .iter()
                .map(ToString::to_string)
                .collect(),
            evidence,
            other_chosen,
            outcomes: OUTCOMES
                .iter()
                .map(|(outcome, label)| Choice {
                    value: outcome.as_str().to_owned(),
                    label: (*label).to_owned(),
                    selected: typed.outcome == outcome.as_str(),
                })
                .collect(),
            other_evidence: typed.evidence_id,
            explanation: typed.explanation,
            max_explanation: MAX_EXPLANATION_CHARS,
            lookup_request_id: RequestId::new().to_string(),
            resolve_request_id: RequestId::new().to_string(),
            error: message,
        }))
    }
}

/// The Look up the receipt form: a fresh request id.
#[derive(Debug, serde::Deserialize)]
pub(super) struct LookupForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    request_id: String,
}

impl CsrfForm for LookupForm {
    fn csrf(&self) -> Option<&str> {
        Some(&self.csrf)
    }
}

/// The Resolve form.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct ResolveForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    request_id: String,
    /// One of the call's evidence ids, or [`OTHER`].
    #[serde(default)]
    evidence: String,
    /// Another evidence record's id; when given, it is cited whatever `evidence` says.
    #[serde(default)]
    evidence_id: String,
    #[serde(default)]
    outcome: String,
    #[serde(default)]
    explanation: String,
}

impl CsrfForm for ResolveForm {
    fn csrf(&self) -> Option<&str> {
        Some(&self.csrf)
    }
}

fn invalid(message: impl Into<String>) -> AppError {
    AppError::refused(ErrorCode::InvalidRequest, message)
}

fn request_id(text: &str) -> Result<RequestId, AppError> {
    text.trim()
        .parse()
        .map_err(|_| invalid("the form's request id is missing or malformed; reload the page"))
}

impl ResolveForm {
    /// The API's request, or a refusal naming the field to fix.
    fn request(&self) -> Result<ResolveCall, AppError> {
        let request_id = request_id(&self.request_id)?;
        // A typed id is the more deliberate act: it wins over the list's choice.
        let cited = match (self.evidence_id.trim(), self.evidence.trim()) {
            ("", OTHER) => "",
            ("", chosen) => chosen,
            (typed, _) => typed,
        };
        if cited.is_empty() {
            return Err(invalid(
                "choose the evidence record that settles the call, or enter another record's id",
            ));
        }
        let source_version_id: EvidenceId = cited.parse().map_err(|_| {
            invalid(format!(
                "`{cited}` is not an evidence id; an evidence id is a UUID, as `switchyard evidence show` names it"
            ))
        })?;
        let outcome = ResolutionOutcome::parse(self.outcome.trim()).ok_or_else(|| {
            invalid(format!(
                "outcome `{}` is not one of succeeded, not_applied or failed; choose one",
                self.outcome
            ))
        })?;
        Ok(ResolveCall {
            request_id,
            outcome,
            source_version_id,
            explanation: self.explanation.clone(),
        })
    }
}

/// The call page again after a refusal, with the refusal's status.
async fn refused_page(
    s: &WebState,
    signed_in: &SignedIn,
    (ws, call): (&str, &str),
    error: AppError,
    typed: Option<ResolveForm>,
) -> WebResult<Response> {
    let AppError::Refused { code, message } = error else {
        return Err(WebError(error));
    };
    let status = StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
    let refusal = Refusal { message, typed };
    let page = calls::render(s, signed_in, ws, call, None, Some(refusal)).await?;
    Ok((status, page).into_response())
}

fn call_page(ws: &str, call: &CallView, notice: &str) -> Response {
    Redirect::to(&format!(
        "/workspaces/{}/calls/{}?notice={notice}",
        super::page::encode_segment(ws),
        call.id
    ))
    .into_response()
}

/// `POST /workspaces/{ws}/calls/{call}/reconcile`: queues the connection's receipt lookup.
pub(super) async fn reconcile(
    State(s): State<WebState>,
    Path((ws, call)): Path<(String, String)>,
    protected: Protected<LookupForm>,
) -> WebResult<Response> {
    let signed_in = &protected.signed_in;
    let asked = async {
        let req = ReconcileCall {
            request_id: request_id(&protected.form.request_id)?,
            client_session_id: None,
        };
        s.app
            .call_reconcile(&signed_in.session.actor, &ws, &call, req)
            .await
    }
    .await;
    match asked {
        Ok((answer, _)) => Ok(call_page(&ws, &answer.call, "lookup-queued")),
        Err(e) => refused_page(&s, signed_in, (&ws, &call), e, None).await,
    }
}

/// `POST /workspaces/{ws}/calls/{call}/resolve`: settles the call with the chosen outcome,
/// evidence and reason.
pub(super) async fn resolve(
    State(s): State<WebState>,
    Path((ws, call)): Path<(String, String)>,
    protected: Protected<ResolveForm>,
) -> WebResult<Response> {
    let signed_in = &protected.signed_in;
    let resolved = async {
        let req = protected.form.request()?;
        s.app
            .call_resolve(&signed_in.session.actor, &ws, &call, req)
            .await
    }
    .await;
    match resolved {
        Ok(view) => Ok(call_page(&ws, &view, "resolved")),
        Err(e) => refused_page(&s, signed_in, (&ws, &call), e, Some(protected.form)).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(evidence: &str, evidence_id: &str, outcome: &str) -> ResolveForm {
        ResolveForm {
            request_id: RequestId::new().to_string(),
            evidence: evidence.to_owned(),
            evidence_id: evidence_id.to_owned(),
            outcome: outcome.to_owned(),
            explanation: "seen in the ledger".to_owned(),
            ..ResolveForm::default()
        }
    }

    #[test]
    fn a_typed_id_wins_over_the_chosen_record() {
        let chosen = EvidenceId::new().to_string();
        let typed = EvidenceId::new().to_string();
        let req = form(&chosen, "", "failed").request().unwrap();
        assert_eq!(req.source_version_id.to_string(), chosen);
        assert_eq!(req.outcome, ResolutionOutcome::Failed);
        let req = form(&chosen, &typed, "failed").request().unwrap();
        assert_eq!(req.source_version_id.to_string(), typed);
        let req = form(OTHER, &typed, "not_applied").request().unwrap();
        assert_eq!(req.source_version_id.to_string(), typed);
        let req = form("", &format!(" {typed} "), "succeeded")
            .request()
            .unwrap();
        assert_eq!(req.source_version_id.to_string(), typed);
    }

    #[test]
    fn missing_or_malformed_fields_are_named() {
        let message = |f: ResolveForm| match f.request() {
            Err(AppError::Refused { code, message }) => {
                assert_eq!(code, ErrorCode::InvalidRequest);
                message
            }
            other => panic!("not refused: {other:?}"),
        };
        assert!(message(form(OTHER, "", "failed")).contains("choose the evidence record"));
        assert!(
            message(form(OTHER, "ticket-7", "failed")).contains("`ticket-7` is not an evidence id")
        );
        let id = EvidenceId::new().to_string();
        assert!(message(form(&id, "", "maybe")).contains("outcome `maybe`"));
        let mut no_key = form(&id, "", "failed");
        no_key.request_id.clear();
        assert!(message(no_key).contains("request id"));
    }
}
