//! A connection's cached tools, seen through one profile, and the Run tool form generated from
//! a tool's input schema. The profile, and so the environment, is fixed by the page's address:
//! a submission names them explicitly, so a profile moved to another environment meanwhile is
//! refused instead of silently running elsewhere.

use super::WebState;
use super::error::{WebError, WebResult};
use super::page::{Chrome, encode_segment, html, when};
use super::schema_form::{self, FieldErrors, Item};
use super::session::{FormFields, Protected, SignedIn};
use crate::app::Actor;
use crate::error::AppError;
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde_json::Value;
use switchyard_protocol::api::{
    ConnectionView, DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS, ProfileView, SubmitCall, ToolView,
};
use switchyard_protocol::{ErrorCode, RequestId};

/// The profile, environment and connection a tools page works in.
struct Context {
    ws: String,
    profile: ProfileView,
    environment: String,
    connection: ConnectionView,
    can_use: bool,
}

async fn context(
    s: &WebState,
    actor: &Actor,
    ws: &str,
    profile: &str,
    connection: &str,
) -> WebResult<Context> {
    let workspace = s.app.workspace_get(actor, ws).await?;
    let profile = s.app.profile_get(actor, ws, profile).await?;
    let connection = s.app.connection_get(actor, ws, connection).await?;
    if !profile.connection_ids.contains(&connection.id) {
        return Err(WebError::refused(
            ErrorCode::ConnectionNotInProfile,
            format!(
                "profile `{}` does not include connection `{}`",
                profile.name, connection.name
            ),
        ));
    }
    let environment = s
        .app
        .environment_list(actor, ws)
        .await?
        .into_iter()
        .find(|e| e.id == profile.environment_id)
        .map(|e| e.name)
        .unwrap_or_default();
    let can_use = profile
        .grants
        .iter()
        .any(|g| g.user_id == actor.user.id && g.use_);
    Ok(Context {
        ws: workspace.name,
        profile,
        environment,
        connection,
        can_use,
    })
}

struct ToolRow {
    name: String,
    path: String,
    description: String,
    available: bool,
    hints: String,
    schema: String,
    discovered: String,
}

/// Annotation hints as words; hints are shown, never trusted.
fn hints(annotations: Option<&Value>) -> String {
    let Some(Value::Object(map)) = annotations else {
        return String::new();
    };
    map.iter()
        .filter_map(|(key, value)| match (key.strip_suffix("Hint"), value) {
            (Some(hint), Value::Bool(b)) => Some(format!("{hint}: {b}")),
            (None, Value::String(title)) if key == "title" => Some(format!("title: {title}")),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn tool_row(t: &ToolView) -> ToolRow {
    ToolRow {
        name: t.name.clone(),
        path: encode_segment(&t.name),
        description: t.description.clone().unwrap_or_default(),
        available: t.available,
        hints: hints(t.annotations.as_ref()),
        schema: serde_json::to_string_pretty(&t.input_schema).unwrap_or_default(),
        discovered: when(&t.discovered_at),
    }
}

#[derive(Template)]
#[template(path = "tools.html")]
struct ToolsPage {
    chrome: Chrome,
    ws: String,
    profile: String,
    environment: String,
    connection: String,
    last_discovery: String,
    can_use: bool,
    tools: Vec<ToolRow>,
}

/// `GET /workspaces/{ws}/profiles/{profile}/connections/{connection}/tools`.
pub(super) async fn list(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path((ws, profile, connection)): Path<(String, String, String)>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let ctx = context(&s, actor, &ws, &profile, &connection).await?;
    let tools = s.app.tool_list(actor, &ws, &connection).await?;
    html(&ToolsPage {
        chrome: Chrome::in_workspace(&signed_in, &ctx.ws, "profiles"),
        last_discovery: ctx
            .connection
            .last_discovery_at
            .as_ref()
            .map(when)
            .unwrap_or_else(|| "never".to_owned()),
        ws: ctx.ws,
        profile: ctx.profile.name,
        environment: ctx.environment,
        connection: ctx.connection.name,
        can_use: ctx.can_use,
        tools: tools.iter().map(tool_row).collect(),
    })
}

#[derive(Template)]
#[template(path = "run.html")]
struct RunPage {
    chrome: Chrome,
    ws: String,
    profile: String,
    environment: String,
    environment_id: String,
    connection: String,
    runner: String,
    tool: ToolRow,
    can_use: bool,
    request_id: String,
    session: String,
    items: Option<Vec<Item>>,
    raw: String,
    raw_mode: bool,
    timeout: String,
    error: Option<String>,
}

/// Query of the Run tool page: the tool session to keep using.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct RunQuery {
    session: Option<String>,
}

/// A client session id chosen by the page: letters, digits and `._:-`, at most 64.
fn valid_session(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
}

fn fresh_session() -> WebResult<String> {
    Ok(format!("web-{}", &crate::app::random_secret()?[..16]))
}

async fn find_tool(
    s: &WebState,
    actor: &Actor,
    ws: &str,
    connection: &str,
    tool: &str,
) -> WebResult<ToolView> {
    s.app
        .tool_list(actor, ws, connection)
        .await?
        .into_iter()
        .find(|t| t.name == tool && t.available)
        .ok_or_else(|| {
            WebError::refused(
                ErrorCode::ToolNotFound,
                format!(
                    "connection `{connection}` offers no tool `{tool}`; discover its tools again"
                ),
            )
        })
}

/// `GET …/tools/{tool}/run`: the form, with a fresh request_id.
pub(super) async fn run_form(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path((ws, profile, connection, tool)): Path<(String, String, String, String)>,
    Query(q): Query<RunQuery>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let ctx = context(&s, actor, &ws, &profile, &connection).await?;
    let tool = find_tool(&s, actor, &ws, &connection, &tool).await?;
    let session = match q.session {
        Some(id) if valid_session(&id) => id,
        _ => fresh_session()?,
    };
    let items = schema_form::items(&tool.input_schema, None, &FieldErrors::new());
    html(&RunPage {
        chrome: Chrome::in_workspace(&signed_in, &ctx.ws, "profiles"),
        raw_mode: items.is_none(),
        raw: schema_form::skeleton(&tool.input_schema),
        items,
        request_id: RequestId::new().to_string(),
        session,
        timeout: DEFAULT_TIMEOUT_SECONDS.to_string(),
        error: None,
        ..run_page_context(&signed_in, ctx, &tool)
    })
}

/// The parts of a Run tool page that come from its context.
fn run_page_context(signed_in: &SignedIn, ctx: Context, tool: &ToolView) -> RunPage {
    RunPage {
        chrome: Chrome::in_workspace(signed_in, &ctx.ws, "profiles"),
        ws: ctx.ws,
        profile: ctx.profile.name,
        environment: ctx.environment,
        environment_id: ctx.profile.environment_id.to_string(),
        connection: ctx.connection.name,
        runner: ctx.connection.runner,
        tool: tool_row(tool),
        can_use: ctx.can_use,
        request_id: String::new(),
        session: String::new(),
        items: None,
        raw: String::new(),
        raw_mode: false,
        timeout: String::new(),
        error: None,
    }
}

/// `POST …/tools/{tool}/run`: submits the call and opens its inspector; a form that cannot be
/// read comes back with its values and what is wrong.
pub(super) async fn run_submit(
    State(s): State<WebState>,
    Path((ws, profile, connection, tool)): Path<(String, String, String, String)>,
    protected: Protected<FormFields>,
) -> WebResult<Response> {
    let signed_in = &protected.signed_in;
    let form = &protected.form;
    let actor = &signed_in.session.actor;
    let ctx = context(&s, actor, &ws, &profile, &connection).await?;
    let tool = find_tool(&s, actor, &ws, &connection, &tool).await?;
    let field = |name: &str| form.get(name).unwrap_or("").to_owned();
    let raw_mode = field("mode") == "raw";
    let session = field("session");
    let request_id: Option<RequestId> = field("request_id").parse().ok();
    let timeout: Option<u32> = field("timeout")
        .trim()
        .parse()
        .ok()
        .filter(|t| (1..=MAX_TIMEOUT_SECONDS).contains(t));

    let mut field_errors = FieldErrors::new();
    let mut problems = Vec::new();
    let arguments = if raw_mode {
        match serde_json::from_str::<Value>(&field("raw")) {
            Ok(value @ Value::Object(_)) => Some(value),
            Ok(_) => {
                problems.push(
                    "the raw arguments must be a JSON object, e.g. {\"text\": \"hello\"}"
                        .to_owned(),
                );
                None
            }
            Err(e) => {
                problems.push(format!(
                    "the raw arguments are not valid JSON (line {}, column {})",
                    e.line(),
                    e.column()
                ));
                None
            }
        }
    } else {
        match schema_form::arguments(&tool.input_schema, form) {
            Ok(value) => Some(value),
            Err(errors) => {
                problems.push(format!("{} argument(s) need attention", errors.len()));
                field_errors = errors;
                None
            }
        }
    };
    if timeout.is_none() {
        problems.push(format!(
            "the timeout must be a whole number of seconds from 1 to {MAX_TIMEOUT_SECONDS}"
        ));
    }
    if !valid_session(&session) || request_id.is_none() {
        problems.push("the form is damaged; reload the page".to_owned());
    }
    let submitted = match (arguments, timeout, request_id) {
        (Some(arguments), Some(timeout), Some(request_id)) if problems.is_empty() => {
            let call = SubmitCall {
                request_id,
                profile_id: ctx.profile.id.to_string(),
                connection_id: ctx.connection.id.to_string(),
                tool_name: tool.name.clone(),
                arguments,
                environment_id: Some(field("environment_id")),
                client_session_id: Some(session.clone()),
                timeout_seconds: Some(timeout),
                operation_id: None,
            };
            match s.app.call_submit(actor, &ws, call).await {
                Ok((call, _)) => {
                    return Ok(
                        Redirect::to(&format!("/workspaces/{}/calls/{}", ctx.ws, call.id))
                            .into_response(),
                    );
                }
                Err(AppError::Refused { code, message }) => Some((code, message)),
                Err(e) => return Err(WebError(e)),
            }
        }
        _ => None,
    };
    let (status, error) = match submitted {
        Some((code, message)) => (
            StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY),
            message,
        ),
        None => (StatusCode::UNPROCESSABLE_ENTITY, problems.join("; ")),
    };
    let items = schema_form::items(&tool.input_schema, Some(form), &field_errors);
    let page = RunPage {
        raw_mode: raw_mode || items.is_none(),
        items,
        raw: field("raw"),
        // Nothing was created under the old id, but a fresh one keeps a refused id (say, one
        // reused after going Back) from being sent again.
        request_id: RequestId::new().to_string(),
        session: if valid_session(&session) {
            session
        } else {
            fresh_session()?
        },
        timeout: field("timeout"),
        error: Some(error),
        ..run_page_context(signed_in, ctx, &tool)
    };
    Ok((status, html(&page)?).into_response())
}
