//! The Approvals page: the calls of a workspace waiting for a person, with everything needed
//! to answer them (tool, connection, profile, who asked and when, why it asks, the exact
//! arguments) and Approve and Decline buttons for holders of Approve. It follows the questions
//! over Server-Sent Events: a new question appears and an answered, expired or cancelled one disappears
//! without a reload. The app layer decides every answer; its refusal (such as
//! `self_approval`) comes back on the page. Below them, the questions already settled
//! (approved, declined, expired, cancelled) with who answered, when and why, as
//! `switchyard approval list` shows them.

use super::WebState;
use super::error::{WebError, WebResult};
use super::page::{Chrome, NoticeQuery, html, when};
use super::session::{CsrfForm, Protected, SignedIn};
use super::streams::StreamSlot;
use crate::app::Actor;
use crate::error::AppError;
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use futures::Stream;
use std::convert::Infallible;
use switchyard_protocol::approval::{ApprovalState, ApprovalView, DecideApproval};

/// A question as the page shows it.
struct Question {
    id: String,
    tool: String,
    connection: String,
    profile: String,
    asked_by: String,
    by_device: bool,
    asked_at: String,
    why: &'static str,
    policy: &'static str,
    expires: Option<String>,
    /// The exact arguments, pretty-printed; none once inputs have expired.
    arguments: Option<String>,
    /// The viewer may answer it (the app says: Approve on the profile, and not their own
    /// call): they get the buttons; the app still decides the answer.
    may_answer: bool,
    /// The viewer asked it.
    mine: bool,
    /// The decline reason typed before an answer the app refused, to type it no second time.
    reason: String,
}

impl Question {
    fn new(view: &ApprovalView, actor: &Actor) -> Self {
        Question {
            id: view.call_id.to_string(),
            tool: view.tool_name.clone(),
            connection: view.connection_name.clone(),
            profile: view.profile_name.clone(),
            asked_by: view.asked_by_name.clone(),
            by_device: view.asked_by_device.is_some(),
            asked_at: when(&view.asked_at),
            why: view.why.explain(),
            policy: view.policy.as_str(),
            expires: view.expires_at.as_ref().map(when),
            arguments: view
                .arguments
                .as_ref()
                .map(|a| serde_json::to_string_pretty(a).unwrap_or_default()),
            may_answer: view.may_answer,
            mine: view.asked_by == actor.user.id,
            reason: String::new(),
        }
    }
}

/// One question's card: the page and the stream render it alike.
#[derive(Template)]
#[template(path = "approval.html")]
struct QuestionCard<'a> {
    q: &'a Question,
    ws: &'a str,
    csrf: &'a str,
}

#[derive(Template)]
#[template(path = "approvals.html")]
struct ApprovalsPage {
    chrome: Chrome,
    ws: String,
    /// The rendered cards, newest first.
    cards: Vec<String>,
    /// An answer the app refused, said for a person.
    error: Option<String>,
    /// The newest settled questions, as of the page's load.
    answered: Vec<Answered>,
}

/// How many settled questions the page lists.
const ANSWERED_SHOWN: usize = 50;

/// A settled question, as the Answered table shows it.
struct Answered {
    id: String,
    tool: String,
    connection: String,
    asked_by: String,
    asked_at: String,
    state: &'static str,
    decided_by: String,
    decided_at: String,
    reason: String,
}

impl Answered {
    fn new(view: &ApprovalView) -> Self {
        Answered {
            id: view.call_id.to_string(),
            tool: view.tool_name.clone(),
            connection: view.connection_name.clone(),
            asked_by: view.asked_by_name.clone(),
            asked_at: when(&view.asked_at),
            state: view.state.as_str(),
            decided_by: view.decided_by_name.clone().unwrap_or_default(),
            decided_at: view.decided_at.as_ref().map(when).unwrap_or_default(),
            reason: view.reason.clone().unwrap_or_default(),
        }
    }
}

/// A refused answer's input, put back in its card: the call id and the reason typed.
type Typed<'a> = Option<(&'a str, &'a str)>;

/// The questions waiting for a person that the actor may read, newest first, as cards with
/// their call ids (`typed`: a reason to put back in its card).
async fn waiting(
    s: &WebState,
    actor: &Actor,
    ws: &str,
    csrf: &str,
    typed: Typed<'_>,
) -> WebResult<Vec<(String, String)>> {
    let list = s.app.approval_list(actor, ws).await?;
    list.approvals
        .iter()
        .filter(|a| a.state == ApprovalState::Pending)
        .map(|a| -> WebResult<(String, String)> {
            let mut q = Question::new(a, actor);
            if let Some((call, reason)) = typed
                && call == q.id
            {
                reason.clone_into(&mut q.reason);
            }
            let card = QuestionCard { q: &q, ws, csrf }.render()?;
            Ok((q.id, card))
        })
        .collect()
}

async fn render_page(
    s: &WebState,
    signed_in: &SignedIn,
    ws: &str,
    notice: Option<&str>,
    error: Option<(String, Typed<'_>)>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let workspace = s.app.workspace_get(actor, ws).await?;
    let (error, typed) = error.map_or((None, None), |(message, typed)| (Some(message), typed));
    let csrf = &signed_in.session.csrf_token;
    let cards = waiting(s, actor, &workspace.name, csrf, typed).await?;
    let answered = s
        .app
        .approval_list(actor, &workspace.name)
        .await?
        .approvals
        .iter()
        .filter(|a| a.state != ApprovalState::Pending)
        .take(ANSWERED_SHOWN)
        .map(Answered::new)
        .collect();
    html(&ApprovalsPage {
        chrome: Chrome::in_workspace(signed_in, &workspace.name, "approvals").with_notice(notice),
        ws: workspace.name,
        cards: cards.into_iter().map(|(_, card)| card).collect(),
        error,
        answered,
    })
}

/// `GET /workspaces/{ws}/approvals`.
pub(super) async fn page(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path(ws): Path<String>,
    Query(q): Query<NoticeQuery>,
) -> WebResult<Html<String>> {
    render_page(&s, &signed_in, &ws, q.notice.as_deref(), None).await
}

/// What an Approvals stream remembers between reads.
struct Watch {
    s: WebState,
    actor: Actor,
    session_id: String,
    csrf: String,
    ws: String,
    /// The call ids last sent, in order; none before the first event.
    last: Option<Vec<String>>,
    /// This stream's place among its session's; given back when the stream ends.
    _slot: StreamSlot,
}

/// The next `approvals` event: the waiting questions whenever the set changed (the first at
/// once), read every `stream_look`, until the session ends, the reader leaves the workspace,
/// or the server shuts down.
async fn next_event(mut watch: Watch) -> Option<(Result<Event, Infallible>, Watch)> {
    loop {
        if watch.last.is_some() {
            tokio::select! {
                _ = watch.s.shutdown.cancelled() => return None,
                _ = tokio::time::sleep(watch.s.config.stream_look) => {}
            }
            watch
                .s
                .app
                .web_session_require_live(&watch.session_id)
                .await
                .ok()?;
        }
        let cards = match waiting(&watch.s, &watch.actor, &watch.ws, &watch.csrf, None).await {
            Ok(cards) => cards,
            Err(WebError(AppError::Refused { .. })) => return None,
            Err(WebError(e)) => {
                tracing::error!(error = %e, "approvals event failed");
                return None;
            }
        };
        let ids: Vec<String> = cards.iter().map(|(id, _)| id.clone()).collect();
        if watch.last.as_ref() == Some(&ids) {
            continue;
        }
        watch.last = Some(ids);
        let items: Vec<serde_json::Value> = cards
            .into_iter()
            .map(|(id, card)| serde_json::json!({"id": id, "html": card}))
            .collect();
        let data = serde_json::json!({ "items": items });
        return Some((
            Ok(Event::default().event("approvals").data(data.to_string())),
            watch,
        ));
    }
}

/// `GET /workspaces/{ws}/approvals/events`: Server-Sent Events with the waiting questions'
/// cards.
pub(super) async fn events(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path(ws): Path<String>,
) -> WebResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let slot = s.streams.slot_for(&signed_in.session_id)?;
    let actor = signed_in.session.actor.clone();
    let workspace = s.app.workspace_get(&actor, &ws).await?;
    let watch = Watch {
        s,
        actor,
        session_id: signed_in.session_id,
        csrf: signed_in.session.csrf_token,
        ws: workspace.name,
        last: None,
        _slot: slot,
    };
    Ok(Sse::new(futures::stream::unfold(watch, next_event)).keep_alive(KeepAlive::default()))
}

/// The Approve and Decline forms.
#[derive(Debug, serde::Deserialize)]
pub(super) struct AnswerForm {
    #[serde(default)]
    csrf: String,
    /// The decliner's reason (the result the caller reads), or a note with an approval.
    #[serde(default)]
    reason: String,
}

impl CsrfForm for AnswerForm {
    fn csrf(&self) -> Option<&str> {
        Some(&self.csrf)
    }
}

/// Answers a question, then shows the page again: with a notice, or with the app's refusal.
async fn answer(
    s: WebState,
    ws: String,
    call: String,
    protected: Protected<AnswerForm>,
    approve: bool,
) -> WebResult<Response> {
    let signed_in = &protected.signed_in;
    let actor = &signed_in.session.actor;
    let reason = Some(protected.form.reason.trim().to_owned()).filter(|r| !r.is_empty());
    let req = DecideApproval { reason };
    let answered = if approve {
        s.app.approval_approve(actor, &ws, &call, req).await
    } else {
        s.app.approval_decline(actor, &ws, &call, req).await
    };
    match answered {
        Ok(_) => {
            let notice = if approve {
                "approval-approved"
            } else {
                "approval-declined"
            };
            Ok(Redirect::to(&format!(
                "/workspaces/{}/approvals?notice={notice}",
                super::page::encode_segment(&ws)
            ))
            .into_response())
        }
        Err(AppError::Refused { code, message }) => {
            let status =
                StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
            let typed = Some((call.as_str(), protected.form.reason.as_str()));
            let page = render_page(&s, signed_in, &ws, None, Some((message, typed))).await?;
            Ok((status, page).into_response())
        }
        Err(e) => Err(WebError(e)),
    }
}

/// `POST /workspaces/{ws}/approvals/{call}/approve`.
pub(super) async fn approve(
    State(s): State<WebState>,
    Path((ws, call)): Path<(String, String)>,
    protected: Protected<AnswerForm>,
) -> WebResult<Response> {
    answer(s, ws, call, protected, true).await
}

/// `POST /workspaces/{ws}/approvals/{call}/decline`.
pub(super) async fn decline(
    State(s): State<WebState>,
    Path((ws, call)): Path<(String, String)>,
    protected: Protected<AnswerForm>,
) -> WebResult<Response> {
    answer(s, ws, call, protected, false).await
}
