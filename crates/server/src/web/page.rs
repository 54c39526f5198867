//! What every page shares: the header ("chrome") with the signed-in user, the workspace
//! navigation and the sign-out form; fixed notices after a redirect; the error page; and the
//! formatting of times and durations.

use super::error::WebResult;
use super::session::SignedIn;
use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Utc};

/// The page header's data.
#[derive(Clone, Debug)]
pub struct Chrome {
    /// The signed-in user's name.
    pub user_name: String,
    /// Whether they are an installation owner (they manage connectors).
    pub is_owner: bool,
    /// The session's CSRF token, for the forms on the page.
    pub csrf: String,
    /// The workspace the page belongs to, by name.
    pub workspace: Option<String>,
    /// The navigation entry the page belongs to.
    pub section: &'static str,
    /// A fixed message after a redirect.
    pub notice: Option<&'static str>,
}

impl Chrome {
    /// The header of a page outside any workspace.
    pub fn new(signed_in: &SignedIn, section: &'static str) -> Self {
        let user = &signed_in.session.actor.user;
        Chrome {
            user_name: user.name.clone(),
            is_owner: user.is_owner,
            csrf: signed_in.session.csrf_token.clone(),
            workspace: None,
            section,
            notice: None,
        }
    }

    /// The header of a page of workspace `ws` (its name).
    pub fn in_workspace(signed_in: &SignedIn, ws: &str, section: &'static str) -> Self {
        Chrome {
            workspace: Some(ws.to_owned()),
            ..Chrome::new(signed_in, section)
        }
    }

    /// Adds the notice named by a `?notice=` code, if it is a known one.
    pub fn with_notice(mut self, code: Option<&str>) -> Self {
        self.notice = code.and_then(notice_text);
        self
    }

    /// `aria-current` for a navigation entry.
    pub fn current(&self, section: &str) -> &'static str {
        if self.section == section {
            "page"
        } else {
            "false"
        }
    }
}

/// The query of a page that may show a notice.
#[derive(Debug, Default, serde::Deserialize)]
pub struct NoticeQuery {
    /// A notice code (see [`notice_text`]).
    pub notice: Option<String>,
}

/// Notices are fixed texts chosen by code, so a link cannot make a page say anything else.
fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "signed-out" => "You are signed out.",
        "discovered" => "Discovery finished; the cached tools are up to date.",
        "cancelled" => "The call was cancelled before it was sent.",
        "cancellation-requested" => {
            "Cancellation was requested; the runner asks the MCP server to stop. Whatever it answers is recorded."
        }
        "already-finished" => "The call had already finished; nothing was cancelled.",
        "released" => "The tool session is draining: active calls may finish, then it closes.",
        "approved" => "Approved.",
        "approval-approved" => "Approved: the call is queued and runs once.",
        "approval-declined" => {
            "Declined: the call never runs, and its caller reads your reason as its result."
        }
        "classified" => {
            "Classified: the tool can be called, as its classification and the profile's approval policy say."
        }
        "revoked" => "The device was revoked; it is refused from its next request on.",
        "created" => "Created.",
        "retired" => "Retired: it runs nothing, and its queued calls failed. Its history stays.",
        "restored" => {
            "Restored. A restored connection's tools are granted again only by `profile set-tools`."
        }
        "placement-accepted" => "Accepted: the connection's calls run on your device.",
        "placement-declined" => "Declined: the connection's calls are refused on your device.",
        "token-revoked" => "The token was revoked; it is refused from its next request on.",
        "member-removed" => "The member was removed, with their grants in this workspace.",
        "lookup-queued" => {
            "The receipt lookup is queued: it asks the connector once, and an answer of applied or not applied settles the call. Reload to see its answer."
        }
        "resolved" => {
            "Resolved: the outcome is recorded beside the original attempt, citing the evidence."
        }
        "grant-revoked" => "The grant was revoked; a revoked Use stops the user's next call.",
        "credential-set" => {
            "The value is kept by the server, sealed with its installation key; the next call opens a new session with it."
        }
        _ => return None,
    })
}

/// Renders a template as an HTML answer.
pub fn html<T: Template>(template: &T) -> WebResult<Html<String>> {
    Ok(Html(template.render()?))
}

/// A time as people read it in an operator's log: to the second, in UTC.
pub fn when(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A time to the millisecond, for call timelines.
pub fn when_precise(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string()
}

/// How long it was from `from` to `to`, in the largest sensible unit.
pub fn took(from: &DateTime<Utc>, to: &DateTime<Utc>) -> String {
    let ms = (*to - *from).num_milliseconds().max(0);
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// The error page (also used outside a session, so it has no chrome).
#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage {
    /// HTTP status.
    pub status: u16,
    /// Its reason phrase.
    pub reason: &'static str,
    /// Stable error code.
    pub code: &'static str,
    /// What went wrong and what to do.
    pub message: String,
}

/// Any path the UI does not know.
pub(super) async fn not_found() -> Response {
    let page = ErrorPage {
        status: 404,
        reason: "Not Found",
        code: "not_found",
        message: "There is no page at this address.".to_owned(),
    };
    match page.render() {
        Ok(body) => (StatusCode::NOT_FOUND, Html(body)).into_response(),
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Percent-encodes one path segment (tool names come from MCP servers and may hold anything).
pub fn encode_segment(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        let t0 = DateTime::<Utc>::from_timestamp(1_700_000_000, 0).unwrap();
        let later = |ms: i64| t0 + chrono::Duration::milliseconds(ms);
        assert_eq!(took(&t0, &later(12)), "12 ms");
        assert_eq!(took(&t0, &later(1_234)), "1.2 s");
        assert_eq!(took(&t0, &later(125_000)), "2 min 5 s");
        assert_eq!(took(&later(5), &t0), "0 ms");
    }

    #[test]
    fn only_known_notices_show() {
        assert!(notice_text("released").is_some());
        assert!(notice_text("<script>").is_none());
    }
}
