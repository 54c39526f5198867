//! The calls list (filtered, keyset-paginated) and the call inspector: state as it happens
//! over Server-Sent Events, timing, outcome, retained output, cancellation and End tool
//! session, and for an unknown call the settle forms of [`super::settle`].

use super::WebState;
use super::error::{WebError, WebResult};
use super::output::{self, LaterSection, OutputItem};
use super::page::{Chrome, NoticeQuery, encode_segment, html, took, when, when_precise};
use super::session::{CsrfOnly, Protected, SignedIn, encode_query};
use super::settle::{Refusal, SettleModel};
use super::streams::StreamSlot;
use crate::app::{Actor, CallQuery, Principal};
use crate::db::PageFrom;
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, Redirect};
use chrono::{DateTime, NaiveDateTime, Utc};
use futures::Stream;
use std::collections::HashMap;
use std::convert::Infallible;
use switchyard_protocol::api::{CallView, CancelOutcome, ReleaseSession};
use switchyard_protocol::state::ALL_STATES;
use switchyard_protocol::{CallId, CallState, ErrorCode};

/// How many calls a page of the list shows.
const PAGE_SIZE: u32 = 25;

/// Whether a call's state can still change on its own (the stream stops after that).
fn settled(state: CallState) -> bool {
    !matches!(
        state,
        CallState::Queued | CallState::Leased | CallState::Running
    )
}

fn state_label(state: CallState) -> String {
    state.as_str().replace('_', " ")
}

/// The badge colour of a state.
fn tone(state: CallState) -> &'static str {
    match state {
        CallState::AwaitingApproval => "warn",
        CallState::Queued | CallState::Leased | CallState::Running => "live",
        CallState::Succeeded | CallState::Resolved => "ok",
        CallState::ToolError | CallState::Failed => "bad",
        CallState::Cancelled | CallState::Expired | CallState::Declined => "muted",
        CallState::Unknown => "warn",
    }
}

fn explanation(state: CallState) -> &'static str {
    match state {
        CallState::AwaitingApproval => {
            "Waiting for a person to approve it (see Approvals). Nothing has been sent."
        }
        CallState::Queued => "Waiting for its runner to lease it. Nothing has been sent.",
        CallState::Leased => {
            "Its runner holds it and is about to ask to start it. Nothing has been sent yet."
        }
        CallState::Running => {
            "The start was acknowledged: the request may have reached the MCP server."
        }
        CallState::Succeeded => "The MCP server answered with a result.",
        CallState::ToolError => "The MCP server answered with an error result (isError).",
        CallState::Failed => "It certainly had no effect: it failed before the request was sent.",
        CallState::Cancelled => "Cancelled before anything was sent.",
        CallState::Expired => {
            "No runner took it in time, or nobody approved it in time. Nothing was sent."
        }
        CallState::Declined => {
            "A person declined it; their reason is its result. Nothing was sent."
        }
        CallState::Unknown => {
            "It may or may not have taken effect: no answer was recorded. It is never retried by itself."
        }
        CallState::Resolved => "An unknown call, settled by a later observation or resolution.",
    }
}

/// Names of what a call refers to; they do not change during the call.
#[derive(Clone, Debug)]
struct Names {
    ws: String,
    profile: String,
    environment: String,
    connection: String,
}

impl Names {
    async fn load(s: &WebState, actor: &Actor, ws: &str, call: &CallView) -> WebResult<Self> {
        let workspace = s.app.workspace_get(actor, ws).await?;
        let profile = s
            .app
            .profile_get(actor, ws, &call.profile_id.to_string())
            .await?;
        let connection = s
            .app
            .connection_get(actor, ws, &call.connection_id.to_string())
            .await?;
        let environment = s
            .app
            .environment_list(actor, ws)
            .await?
            .into_iter()
            .find(|e| e.id == call.environment_id)
            .map(|e| e.name)
            .unwrap_or_default();
        Ok(Names {
            ws: workspace.name,
            profile: profile.name,
            environment,
            connection: connection.name,
        })
    }
}

/// One step of a call's timeline.
struct Step {
    label: &'static str,
    at: String,
    after: String,
}

/// Everything the inspector shows about a call.
struct CallModel {
    id: String,
    ws: String,
    tool: String,
    tool_path: String,
    profile: String,
    environment: String,
    connection: String,
    runner: String,
    request_id: String,
    session: Option<String>,
    timeout: u32,
    state: &'static str,
    state_label: String,
    tone: &'static str,
    explanation: &'static str,
    settled: bool,
    cancellable: bool,
    cancel_requested: Option<String>,
    timeline: Vec<Step>,
    total: Option<String>,
    error: Option<(String, String)>,
    output: Vec<OutputItem>,
    structured: Option<String>,
    has_result: bool,
    truncated: bool,
    retention_expired: Option<String>,
    arguments: Option<String>,
    later: Vec<LaterSection>,
}

impl CallModel {
    fn new(call: &CallView, names: &Names) -> Self {
        let mut timeline = vec![Step {
            label: "Submitted",
            at: when_precise(&call.created_at),
            after: String::new(),
        }];
        let mut previous = call.created_at;
        for (label, stamp) in [
            ("Leased", call.leased_at),
            ("Started", call.started_at),
            ("Finished", call.finished_at),
        ] {
            if let Some(at) = stamp {
                timeline.push(Step {
                    label,
                    at: when_precise(&at),
                    after: format!("+{}", took(&previous, &at)),
                });
                previous = at;
            }
        }
        let result = call.result.as_ref();
        CallModel {
            id: call.id.to_string(),
            ws: names.ws.clone(),
            tool: call.tool_name.clone(),
            tool_path: encode_segment(&call.tool_name),
            profile: names.profile.clone(),
            environment: names.environment.clone(),
            connection: names.connection.clone(),
            runner: call.runner.clone(),
            request_id: call.request_id.to_string(),
            session: call.client_session_id.clone(),
            timeout: call.timeout_seconds,
            state: call.state.as_str(),
            state_label: state_label(call.state),
            tone: tone(call.state),
            explanation: explanation(call.state),
            settled: settled(call.state),
            cancellable: !settled(call.state) && call.cancel_requested_at.is_none(),
            cancel_requested: call.cancel_requested_at.as_ref().map(when_precise),
            timeline,
            total: call
                .finished_at
                .as_ref()
                .map(|end| took(&call.created_at, end)),
            error: call
                .error
                .as_ref()
                .map(|e| (e.code.clone(), e.message.clone())),
            output: result.map(output::content_items).unwrap_or_default(),
            structured: result.and_then(output::structured),
            has_result: result.is_some(),
            truncated: call.result_truncated,
            retention_expired: call.retention_expired_at.as_ref().map(when),
            arguments: call
                .arguments
                .as_ref()
                .map(|a| serde_json::to_string_pretty(a).unwrap_or_default()),
            later: serde_json::to_value(call)
                .map(|v| output::later_sections(&v))
                .unwrap_or_default(),
        }
    }
}

#[derive(Template)]
#[template(path = "call_status.html")]
struct CallStatus<'a> {
    m: &'a CallModel,
    csrf: &'a str,
}

#[derive(Template)]
#[template(path = "call_output.html")]
struct CallOutput<'a> {
    m: &'a CallModel,
}

#[derive(Template)]
#[template(path = "call.html")]
struct CallPage {
    chrome: Chrome,
    m: CallModel,
    csrf: String,
    /// For an unknown tool call: Look up the receipt and Resolve.
    settle: Option<SettleModel>,
}

/// `GET /workspaces/{ws}/calls/{call}`: the inspector.
pub(super) async fn inspector(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path((ws, call)): Path<(String, String)>,
    Query(q): Query<NoticeQuery>,
) -> WebResult<Html<String>> {
    render(&s, &signed_in, &ws, &call, q.notice.as_deref(), None).await
}

/// The inspector page of `call`: with a notice after a redirect, or with a refused settle
/// form (its message, and the form as typed).
pub(super) async fn render(
    s: &WebState,
    signed_in: &SignedIn,
    ws: &str,
    call: &str,
    notice: Option<&str>,
    refusal: Option<Refusal>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let view = s.app.call_get(actor, ws, call).await?;
    let names = Names::load(s, actor, ws, &view).await?;
    let settle = SettleModel::for_call(s, actor, ws, &view, refusal).await?;
    html(&CallPage {
        chrome: Chrome::in_workspace(signed_in, &names.ws, "calls").with_notice(notice),
        csrf: signed_in.session.csrf_token.clone(),
        m: CallModel::new(&view, &names),
        settle,
    })
}

/// What an event stream remembers between polls.
struct Watch {
    s: WebState,
    actor: Actor,
    session_id: String,
    csrf: String,
    ws: String,
    call: String,
    names: Names,
    /// The call as last sent, serialized, to send only changes.
    last: Option<String>,
    /// A view read but not sent yet (the first one).
    pending: Option<CallView>,
    finished: bool,
    /// This stream's place among its session's; given back when the stream ends.
    _slot: StreamSlot,
}

/// One `call` event: the state and the two live regions, rendered by the same templates as the
/// page.
fn call_event(watch: &Watch, view: &CallView) -> Result<Event, askama::Error> {
    let m = CallModel::new(view, &watch.names);
    let data = serde_json::json!({
        "state": m.state,
        "state_label": m.state_label,
        "tone": m.tone,
        "settled": m.settled,
        "status_html": CallStatus { m: &m, csrf: &watch.csrf }.render()?,
        "output_html": CallOutput { m: &m }.render()?,
    });
    Ok(Event::default().event("call").data(data.to_string()))
}

/// The next event: the call whenever it changed — at once when it settles (its completion's
/// wake-up), else read again at least every `stream_look` — until it is settled, the session
/// ends, the reader loses Use, or the server shuts down.
async fn next_event(mut watch: Watch) -> Option<(Result<Event, Infallible>, Watch)> {
    if watch.finished {
        return None;
    }
    loop {
        let view = match watch.pending.take() {
            Some(view) => view,
            None => {
                let reader = Principal::User(watch.actor.clone());
                let app = &watch.s.app;
                let view = tokio::select! {
                    _ = watch.s.shutdown.cancelled() => return None,
                    view = app.call_wait_as(&reader, &watch.ws, &watch.call, watch.s.config.stream_look) => view.ok()?,
                };
                app.web_session_require_live(&watch.session_id).await.ok()?;
                view
            }
        };
        let serialized = serde_json::to_string(&view).ok()?;
        if watch.last.as_ref() == Some(&serialized) {
            continue;
        }
        watch.last = Some(serialized);
        watch.finished = settled(view.state);
        match call_event(&watch, &view) {
            Ok(event) => return Some((Ok(event), watch)),
            Err(e) => {
                tracing::error!(error = %e, "call event failed to render");
                return None;
            }
        }
    }
}

/// `GET /workspaces/{ws}/calls/{call}/events`: Server-Sent Events with the call's live regions.
pub(super) async fn events(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path((ws, call)): Path<(String, String)>,
) -> WebResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let slot = s.streams.slot_for(&signed_in.session_id)?;
    let actor = signed_in.session.actor.clone();
    let first = s.app.call_get(&actor, &ws, &call).await?;
    let names = Names::load(&s, &actor, &ws, &first).await?;
    let watch = Watch {
        s,
        actor,
        session_id: signed_in.session_id,
        csrf: signed_in.session.csrf_token,
        ws,
        call,
        names,
        last: None,
        pending: Some(first),
        finished: false,
        _slot: slot,
    };
    Ok(Sse::new(futures::stream::unfold(watch, next_event)).keep_alive(KeepAlive::default()))
}

/// `POST /workspaces/{ws}/calls/{call}/cancel`.
pub(super) async fn cancel(
    State(s): State<WebState>,
    Path((ws, call)): Path<(String, String)>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    let answer = s
        .app
        .call_cancel(&protected.signed_in.session.actor, &ws, &call)
        .await?;
    let notice = match answer.outcome {
        CancelOutcome::Cancelled => "cancelled",
        CancelOutcome::CancellationRequested => "cancellation-requested",
        CancelOutcome::AlreadyFinished => "already-finished",
    };
    Ok(Redirect::to(&format!(
        "/workspaces/{ws}/calls/{}?notice={notice}",
        answer.call.id
    )))
}

/// `POST /workspaces/{ws}/calls/{call}/release`: End tool session — drains the call's warm
/// session on its connection; calls already active there may finish.
pub(super) async fn release(
    State(s): State<WebState>,
    Path((ws, call)): Path<(String, String)>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    let actor = &protected.signed_in.session.actor;
    let view = s.app.call_get(actor, &ws, &call).await?;
    let session = view.client_session_id.ok_or_else(|| {
        WebError::refused(
            ErrorCode::InvalidRequest,
            "this call was not made in a tool session",
        )
    })?;
    s.app
        .session_release(
            actor,
            &ws,
            &session,
            ReleaseSession {
                connection_id: Some(view.connection_id.to_string()),
            },
        )
        .await?;
    Ok(Redirect::to(&format!(
        "/workspaces/{ws}/calls/{}?notice=released",
        view.id
    )))
}

/// Query of the calls list; empty values mean "any".
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct ListQuery {
    state: Option<String>,
    connection: Option<String>,
    runner: Option<String>,
    since: Option<String>,
    until: Option<String>,
    before: Option<String>,
    after: Option<String>,
}

fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// A `datetime-local` value, read as UTC.
fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    [
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%d %H:%M:%S",
    ]
    .iter()
    .find_map(|format| NaiveDateTime::parse_from_str(text, format).ok())
    .map(|t| t.and_utc())
}

struct ListRow {
    id: String,
    tool: String,
    connection: String,
    runner: String,
    state_label: String,
    tone: &'static str,
    submitted: String,
    duration: String,
}

struct Choice {
    value: String,
    selected: bool,
}

#[derive(Template)]
#[template(path = "calls.html")]
struct CallsPage {
    chrome: Chrome,
    ws: String,
    states: Vec<Choice>,
    connections: Vec<Choice>,
    runners: Vec<Choice>,
    since: String,
    until: String,
    problems: Vec<String>,
    rows: Vec<ListRow>,
    newer: Option<String>,
    older: Option<String>,
    filtered: bool,
}

fn choices(values: impl IntoIterator<Item = String>, current: Option<&str>) -> Vec<Choice> {
    values
        .into_iter()
        .map(|value| Choice {
            selected: current == Some(value.as_str()),
            value,
        })
        .collect()
}

/// `GET /workspaces/{ws}/calls`: the calls the reader may read, filtered and paginated.
pub(super) async fn list(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path(ws): Path<String>,
    Query(q): Query<ListQuery>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let workspace = s.app.workspace_get(actor, &ws).await?;
    let connections = s.app.connection_list(actor, &ws).await?;
    let mut problems = Vec::new();
    let mut query = CallQuery::default();
    if let Some(state) = given(&q.state) {
        match state.parse::<CallState>() {
            Ok(state) => query.state = Some(state),
            Err(_) => problems.push(format!("`{state}` is not a call state")),
        }
    }
    if let Some(connection) = given(&q.connection) {
        if connections.iter().any(|c| c.name == connection) {
            query.connection = Some(connection.to_owned());
        } else {
            problems.push(format!("there is no connection `{connection}`"));
        }
    }
    query.runner = given(&q.runner).map(str::to_owned);
    for (text, slot, what) in [
        (given(&q.since), &mut query.since, "From"),
        (given(&q.until), &mut query.until, "Until"),
    ] {
        if let Some(text) = text {
            match parse_time(text) {
                Some(t) => *slot = Some(t),
                None => problems.push(format!(
                    "{what} `{text}` is not a date and time like 2026-01-31T14:05"
                )),
            }
        }
    }
    let cursor = |text: Option<&str>| text.and_then(|t| t.parse::<CallId>().ok()).map(|id| id.0);
    query.from = match (cursor(given(&q.before)), cursor(given(&q.after))) {
        (Some(id), _) => PageFrom::Before(CallId(id)),
        (None, Some(id)) => PageFrom::After(CallId(id)),
        (None, None) => PageFrom::Newest,
    };
    let filtered = query.state.is_some()
        || query.connection.is_some()
        || query.runner.is_some()
        || query.since.is_some()
        || query.until.is_some();
    let page = s.app.call_page(actor, &ws, query, PAGE_SIZE).await?;

    let names: HashMap<String, String> = connections
        .iter()
        .map(|c| (c.id.to_string(), c.name.clone()))
        .collect();
    let mut runners: Vec<String> = connections.iter().map(|c| c.runner.clone()).collect();
    runners.push(switchyard_protocol::api::CENTRAL_RUNNER.to_owned());
    runners.sort();
    runners.dedup();
    // Links to other pages keep the filter.
    let filter_query: String = [
        ("state", &q.state),
        ("connection", &q.connection),
        ("runner", &q.runner),
        ("since", &q.since),
        ("until", &q.until),
    ]
    .iter()
    .filter_map(|(key, value)| given(value).map(|v| format!("&{key}={}", encode_query(v))))
    .collect();
    let base = format!("/workspaces/{}/calls", workspace.name);
    html(&CallsPage {
        chrome: Chrome::in_workspace(&signed_in, &workspace.name, "calls"),
        states: choices(
            ALL_STATES.iter().map(|s| s.as_str().to_owned()),
            given(&q.state),
        ),
        connections: choices(
            connections.iter().map(|c| c.name.clone()),
            given(&q.connection),
        ),
        runners: choices(runners, given(&q.runner)),
        since: given(&q.since).unwrap_or("").to_owned(),
        until: given(&q.until).unwrap_or("").to_owned(),
        problems,
        rows: page
            .calls
            .iter()
            .map(|c| ListRow {
                id: c.id.to_string(),
                tool: c.tool_name.clone(),
                connection: names
                    .get(&c.connection_id.to_string())
                    .cloned()
                    .unwrap_or_else(|| c.connection_id.to_string()),
                runner: c.runner.clone(),
                state_label: state_label(c.state),
                tone: tone(c.state),
                submitted: when(&c.created_at),
                duration: c
                    .finished_at
                    .as_ref()
                    .map(|end| took(&c.created_at, end))
                    .unwrap_or_default(),
            })
            .collect(),
        newer: page
            .newer
            .map(|id| format!("{base}?after={id}{filter_query}")),
        older: page
            .older
            .map(|id| format!("{base}?before={id}{filter_query}")),
        ws: workspace.name,
        filtered,
    })
}
