//! Taking access away in the inspector: the signed-in user's own API tokens (list, revoke),
//! a workspace's members (list; admins remove) and a profile's grants (revoked from the
//! profile page). Each form calls the same app-layer function as the API, which decides who
//! may; a refusal shows as the error page.

use super::WebState;
use super::error::{WebError, WebResult};
use super::page::{Chrome, NoticeQuery, encode_segment, html, when};
use super::session::{CsrfForm, CsrfOnly, Protected, SignedIn};
use super::sign_in::signed_out;
use crate::error::AppError;
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use chrono::Utc;
use switchyard_protocol::ErrorCode;
use switchyard_protocol::api::{GrantRequest, MemberRole};

struct TokenRow {
    id: String,
    name: String,
    created: String,
    expires: String,
    /// `active`, `expired` or `revoked`.
    state: &'static str,
    /// When it was revoked.
    revoked: Option<String>,
}

#[derive(Template)]
#[template(path = "tokens.html")]
struct TokensPage {
    chrome: Chrome,
    tokens: Vec<TokenRow>,
}

/// `GET /tokens`: the signed-in user's API tokens, revoked and expired ones included.
pub(super) async fn tokens(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Query(q): Query<NoticeQuery>,
) -> WebResult<Html<String>> {
    let now = Utc::now();
    let tokens = s.app.token_list(&signed_in.session.actor).await?;
    html(&TokensPage {
        chrome: Chrome::new(&signed_in, "tokens").with_notice(q.notice.as_deref()),
        tokens: tokens
            .into_iter()
            .map(|t| TokenRow {
                id: t.id.to_string(),
                state: match (&t.revoked_at, &t.expires_at) {
                    (Some(_), _) => "revoked",
                    (None, Some(at)) if *at <= now => "expired",
                    (None, _) => "active",
                },
                created: when(&t.created_at),
                expires: t
                    .expires_at
                    .as_ref()
                    .map_or_else(|| "never".to_owned(), when),
                revoked: t.revoked_at.as_ref().map(when),
                name: t.name,
            })
            .collect(),
    })
}

/// `POST /tokens/{token}/revoke`: back to the tokens page; when the token was the one this
/// session signed in with, the session ended with it, so to the sign-in page.
pub(super) async fn token_revoke(
    State(s): State<WebState>,
    Path(token): Path<String>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Response> {
    let signed_in = &protected.signed_in;
    s.app.token_revoke(&signed_in.session.actor, &token).await?;
    match s.app.web_session_require_live(&signed_in.session_id).await {
        Ok(()) => Ok(Redirect::to("/tokens?notice=token-revoked").into_response()),
        Err(AppError::Refused { .. }) => Ok(signed_out(&s, "/sign-in?notice=token-revoked")),
        Err(e) => Err(WebError(e)),
    }
}

struct MemberRow {
    name: String,
    admin: bool,
}

#[derive(Template)]
#[template(path = "members.html")]
struct MembersPage {
    chrome: Chrome,
    ws: String,
    members: Vec<MemberRow>,
    is_admin: bool,
}

/// `GET /workspaces/{ws}/members`.
pub(super) async fn members(
    State(s): State<WebState>,
    signed_in: SignedIn,
    Path(ws): Path<String>,
    Query(q): Query<NoticeQuery>,
) -> WebResult<Html<String>> {
    let actor = &signed_in.session.actor;
    let workspace = s.app.workspace_get(actor, &ws).await?;
    let members = s.app.member_list(actor, &ws).await?;
    html(&MembersPage {
        chrome: Chrome::in_workspace(&signed_in, &workspace.name, "members")
            .with_notice(q.notice.as_deref()),
        ws: workspace.name,
        is_admin: members
            .iter()
            .any(|m| m.user_id == actor.user.id && m.role == MemberRole::Admin),
        members: members
            .into_iter()
            .map(|m| MemberRow {
                admin: m.role == MemberRole::Admin,
                name: m.user_name,
            })
            .collect(),
    })
}

/// `POST /workspaces/{ws}/members/{user}/remove`: back to the members page, or to the
/// workspaces list when the admin removed themselves.
pub(super) async fn member_remove(
    State(s): State<WebState>,
    Path((ws, user)): Path<(String, String)>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Redirect> {
    let actor = &protected.signed_in.session.actor;
    let removed = s.app.member_remove(actor, &ws, &user).await?;
    Ok(if removed.member.user_id == actor.user.id {
        Redirect::to("/workspaces?notice=member-removed")
    } else {
        Redirect::to(&format!(
            "/workspaces/{}/members?notice=member-removed",
            encode_segment(&ws)
        ))
    })
}

/// The Revoke form of one grant on a profile.
#[derive(Debug, serde::Deserialize)]
pub(super) struct RevokeGrantForm {
    #[serde(default)]
    csrf: String,
    /// Whose grant.
    user: String,
    /// `use`, `manage` or `share`.
    grant: String,
}

impl CsrfForm for RevokeGrantForm {
    fn csrf(&self) -> Option<&str> {
        Some(&self.csrf)
    }
}

/// `POST /workspaces/{ws}/profiles/{profile}/grants/revoke`: takes one grant from a user, then
/// shows the profile again.
pub(super) async fn grant_revoke(
    State(s): State<WebState>,
    Path((ws, key)): Path<(String, String)>,
    protected: Protected<RevokeGrantForm>,
) -> WebResult<Redirect> {
    let actor = &protected.signed_in.session.actor;
    let form = protected.form;
    let mut req = GrantRequest {
        user: Some(form.user),
        agent: None,
        use_: false,
        manage: false,
        share: false,
        approve: false,
    };
    match form.grant.as_str() {
        "use" => req.use_ = true,
        "manage" => req.manage = true,
        "share" => req.share = true,
        "approve" => req.approve = true,
        other => {
            return Err(WebError::refused(
                ErrorCode::InvalidRequest,
                format!("`{other}` is not a grant: name `use`, `manage`, `share` or `approve`"),
            ));
        }
    }
    let profile = s.app.profile_revoke(actor, &ws, &key, req).await?;
    Ok(Redirect::to(&format!(
        "/workspaces/{}/profiles/{}?notice=grant-revoked",
        encode_segment(&ws),
        encode_segment(&profile.name)
    )))
}
