//! A workspace's audit log, as `switchyard audit list` and `audit verify` show it: newest
//! first, a page at a time (keyset on `seq`), with the result of walking the hash chain. Only
//! the workspace's admins and installation owners may read it; the app layer decides
//! ([`crate::app::App::audit_list`], [`crate::app::App::audit_verify`]).

use super::WebState;
use super::catalog::{AuditRow, audit_row};
use super::error::{WebError, WebResult};
use super::page::{Chrome, html};
use super::session::SignedIn;
use crate::app::AuditQuery;
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::Html;
use switchyard_protocol::ErrorCode;
use switchyard_protocol::api::{AuditBreakKind, AuditVerification};

/// How many entries a page shows.
const PAGE_SIZE: u32 = 50;

/// `?before=SEQ`: the page of entries older than `SEQ`.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct AuditPageQuery {
    before: Option<String>,
}

/// What walking the chain found, in words.
struct Verified {
    intact: bool,
    text: String,
}

fn verified(v: &AuditVerification) -> Verified {
    match &v.broken {
        None => Verified {
            intact: true,
            text: format!(
                "Chain intact: {} entries verified up to seq {}.",
                v.entries, v.head_seq
            ),
        },
        Some(broken) => Verified {
            intact: false,
            text: format!(
                "Chain broken at seq {} ({}): {}",
                broken.seq,
                match broken.kind {
                    AuditBreakKind::Edited => "an entry was edited",
                    AuditBreakKind::Removed => "entries were removed",
                    AuditBreakKind::Reordered => "entries were reordered",
                    AuditBreakKind::Truncated => "entries at the end are missing",
                },
                broken.message
            ),
        },
    }
}

#[derive(Template)]
#[template(path = "audit.html")]
struct AuditPage {
    chrome: Chrome,
    ws: String,
    verified: Verified,
    entries: Vec<AuditRow>,
    /// Whether this is a later page (so a link back to the newest is offered).
    paged: bool,
    /// The `before` of the next (older) page, when there is one.
    older: Option<i64>,
}

/// `GET /workspaces/{ws}/audit`.
pub(super) async fn page(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path(ws): Path<String>,
    Query(q): Query<AuditPageQuery>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let before = match q.before.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
        Some(text) => Some(text.parse::<i64>().map_err(|_| {
            WebError::refused(
                ErrorCode::InvalidRequest,
                format!("`before` must be an entry's seq, a whole number; `{text}` is not"),
            )
        })?),
        None => None,
    };
    // One more than a page tells whether an older page exists.
    let query = AuditQuery {
        before,
        limit: Some(PAGE_SIZE + 1),
        ..AuditQuery::default()
    };
    let mut entries = s.app.audit_list(actor, &ws, query).await?;
    let verification = s.app.audit_verify(actor, &ws).await?;
    let workspace = s.app.workspace_get(actor, &ws).await?;
    let more = entries.len() > PAGE_SIZE as usize;
    entries.truncate(PAGE_SIZE as usize);
    html(&AuditPage {
        chrome: Chrome::in_workspace(&signed_in, &workspace.name, "audit"),
        ws: workspace.name,
        verified: verified(&verification),
        older: entries.last().filter(|_| more).map(|e| e.seq),
        entries: entries.iter().map(audit_row).collect(),
        paged: before.is_some(),
    })
}
