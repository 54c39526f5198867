//! Connectors, installation-wide: anyone signed in may read them; installation owners add
//! them, import them (JSON, TOML or YAML), approve stdio commands and inspect HTTP servers.
//! Pasted import documents are never echoed back: they may hold environment values.

use super::WebState;
use super::error::{WebError, WebResult};
use super::page::{Chrome, NoticeQuery, encode_segment, html, when};
use super::session::{CsrfForm, CsrfOnly, Protected, SignedIn};
use super::workspaces::target_line;
use crate::app::{ConnectorInspection, ImportFormat};
use crate::error::AppError;
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Redirect, Response};
use switchyard_protocol::api::{
    ConnectorSpec, ConnectorView, CreateConnector, ImportReport, Transport,
};

struct ConnectorRow {
    name: String,
    path: String,
    transport: &'static str,
    target: String,
    env: String,
    revision: i64,
    approved: bool,
    retired: bool,
    created: String,
}

/// In place of a connector's command or URL, for readers who may not manage connectors.
pub(super) const WITHHELD_TARGET: &str = "(shown to installation owners)";

fn row(c: &ConnectorView) -> ConnectorRow {
    let transport = match c.target.transport() {
        Transport::Stdio => "stdio",
        Transport::Http => "http",
    };
    let env = match c.target.spec() {
        Some(ConnectorSpec::Stdio { env, .. }) => env.join(", "),
        _ => String::new(),
    };
    ConnectorRow {
        name: c.name.clone(),
        path: encode_segment(&c.name),
        transport,
        target: c
            .target
            .spec()
            .map(target_line)
            .unwrap_or_else(|| WITHHELD_TARGET.to_owned()),
        env,
        revision: c.revision,
        approved: c.approved,
        retired: c.retired.is_some(),
        created: when(&c.created_at),
    }
}

/// What the add-connector form held, to show it again after a refusal (never secrets: a
/// connector holds none).
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct CreateForm {
    #[serde(default)]
    csrf: String,
    name: String,
    transport: String,
    #[serde(default)]
    command: String,
    #[serde(default)]
    args: String,
    #[serde(default)]
    env: String,
    #[serde(default)]
    url: String,
}

impl CsrfForm for CreateForm {
    fn csrf(&self) -> Option<&str> {
        Some(&self.csrf)
    }
}

/// The import form.
#[derive(serde::Deserialize)]
pub(super) struct ImportForm {
    #[serde(default)]
    csrf: String,
    format: String,
    document: String,
}

impl CsrfForm for ImportForm {
    fn csrf(&self) -> Option<&str> {
        Some(&self.csrf)
    }
}

#[derive(Template)]
#[template(path = "connectors.html")]
struct ConnectorsPage {
    chrome: Chrome,
    connectors: Vec<ConnectorRow>,
    add: CreateForm,
    add_error: Option<String>,
    import_error: Option<String>,
    report: Option<ImportReport>,
}

async fn list_page(
    s: &WebState,
    signed_in: &SignedIn,
    page: impl FnOnce(Chrome, Vec<ConnectorRow>) -> ConnectorsPage,
) -> WebResult<Html<String>> {
    let connectors = s.app.connector_list(&signed_in.session.actor).await?;
    html(&page(
        Chrome::new(signed_in, "connectors"),
        connectors.iter().map(row).collect(),
    ))
}

/// `GET /connectors`.
pub(super) async fn list(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Query(q): Query<NoticeQuery>,
) -> WebResult<Html<String>> {
    list_page(&s, &signed_in, |chrome, connectors| ConnectorsPage {
        chrome: chrome.with_notice(q.notice.as_deref()),
        connectors,
        add: CreateForm {
            transport: "stdio".to_owned(),
            ..CreateForm::default()
        },
        add_error: None,
        import_error: None,
        report: None,
    })
    .await
}

fn status_of(e: &AppError) -> StatusCode {
    match e {
        AppError::Refused { code, .. } => {
            StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::BAD_REQUEST)
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// `POST /connectors`: adds one connector (owners only).
pub(super) async fn create(
    State(s): State<WebState>,
    protected: Protected<CreateForm>,
) -> WebResult<Response> {
    let signed_in = &protected.signed_in;
    let form = protected.form;
    let spec = if form.transport == "http" {
        ConnectorSpec::Http {
            url: form.url.trim().to_owned(),
        }
    } else {
        ConnectorSpec::Stdio {
            command: form.command.trim().to_owned(),
            args: form
                .args
                .lines()
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
            env: form
                .env
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|e| !e.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    };
    let request = CreateConnector {
        name: form.name.trim().to_owned(),
        spec,
    };
    match s
        .app
        .connector_create(&signed_in.session.actor, request)
        .await
    {
        Ok(created) => Ok(Redirect::to(&format!(
            "/connectors/{}?notice=created",
            encode_segment(&created.name)
        ))
        .into_response()),
        Err(e @ AppError::Refused { .. }) => {
            let status = status_of(&e);
            let message = refusal_message(e);
            let body = list_page(&s, signed_in, |chrome, connectors| ConnectorsPage {
                chrome,
                connectors,
                add: CreateForm {
                    csrf: String::new(),
                    ..form
                },
                add_error: Some(message),
                import_error: None,
                report: None,
            })
            .await?;
            Ok((status, body).into_response())
        }
        Err(e) => Err(WebError(e)),
    }
}

fn refusal_message(e: AppError) -> String {
    match e {
        AppError::Refused { message, .. } => message,
        other => other.to_string(),
    }
}

/// `POST /connectors/import`: imports a JSON, TOML or YAML document (owners only).
pub(super) async fn import(
    State(s): State<WebState>,
    protected: Protected<ImportForm>,
) -> WebResult<Response> {
    let signed_in = &protected.signed_in;
    let format = match protected.form.format.as_str() {
        "toml" => ImportFormat::Toml,
        "yaml" => ImportFormat::Yaml,
        _ => ImportFormat::Json,
    };
    let (status, report, import_error) = match s
        .app
        .connector_import_text(&signed_in.session.actor, format, &protected.form.document)
        .await
    {
        Ok(report) => (StatusCode::OK, Some(report), None),
        Err(e @ AppError::Refused { .. }) => (status_of(&e), None, Some(refusal_message(e))),
        Err(e) => return Err(WebError(e)),
    };
    let body = list_page(&s, signed_in, |chrome, connectors| ConnectorsPage {
        chrome,
        connectors,
        add: CreateForm {
            transport: "stdio".to_owned(),
            ..CreateForm::default()
        },
        add_error: None,
        import_error,
        report,
    })
    .await?;
    Ok((status, body).into_response())
}

#[derive(Template)]
#[template(path = "connector.html")]
struct ConnectorPage {
    chrome: Chrome,
    c: ConnectorRow,
    inspection: Option<ConnectorInspection>,
    inspect_error: Option<String>,
}

async fn detail_page(
    s: &WebState,
    signed_in: &SignedIn,
    key: &str,
    notice: Option<&str>,
    inspected: Option<Result<ConnectorInspection, String>>,
) -> WebResult<Html<String>> {
    let connector = s.app.connector_get(&signed_in.session.actor, key).await?;
    let (inspection, inspect_error) = match inspected {
        Some(Ok(inspection)) => (Some(inspection), None),
        Some(Err(message)) => (None, Some(message)),
        None => (None, None),
    };
    html(&ConnectorPage {
        chrome: Chrome::new(signed_in, "connectors").with_notice(notice),
        c: row(&connector),
        inspection,
        inspect_error,
    })
}

/// `GET /connectors/{connector}`.
pub(super) async fn detail(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path(key): Path<String>,
    Query(q): Query<NoticeQuery>,
) -> WebResult<Html<String>> {
    detail_page(&s, &signed_in, &key, q.notice.as_deref(), None).await
}

/// `POST /connectors/{connector}/approve`: approves the current command and arguments.
pub(super) async fn approve(
    State(s): State<WebState>,
    Path(key): Path<String>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    let approved = s
        .app
        .connector_approve(&protected.signed_in.session.actor, &key)
        .await?;
    Ok(Redirect::to(&format!(
        "/connectors/{}?notice=approved",
        encode_segment(&approved.name)
    )))
}

/// `POST /connectors/{connector}/inspect`: a bounded look at an HTTP connector's server.
pub(super) async fn inspect(
    State(s): State<WebState>,
    Path(key): Path<String>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Response> {
    let signed_in = &protected.signed_in;
    let (status, inspected) = match s
        .app
        .connector_inspect(&signed_in.session.actor, &key)
        .await
    {
        Ok(inspection) => (StatusCode::OK, Ok(inspection)),
        Err(e @ AppError::Refused { .. }) => (status_of(&e), Err(refusal_message(e))),
        Err(e) => return Err(WebError(e)),
    };
    Ok((
        status,
        detail_page(&s, signed_in, &key, None, Some(inspected)).await?,
    )
        .into_response())
}
