//! Signing in and out. The token is pasted once, exchanged for a session and never echoed,
//! stored in the browser or written to the log.

use super::WebState;
use super::error::{WebError, WebResult};
use super::page::html;
use super::session::{
    CsrfOnly, Protected, SESSION_COOKIE, SIGN_IN_COOKIE, check_sign_in_form, set_cookie,
};
use crate::app::random_secret;
use crate::error::AppError;
use askama::Template;
use axum::extract::{Form, Query, State};
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{AppendHeaders, IntoResponse, Redirect, Response};
use std::time::Duration;
use switchyard_protocol::ErrorCode;

/// How long a sign-in form stays usable.
const SIGN_IN_FORM_TTL: Duration = Duration::from_secs(3600);

#[derive(Template)]
#[template(path = "sign_in.html")]
struct SignInPage {
    csrf: String,
    next: String,
    error: Option<String>,
    notice: Option<&'static str>,
}

/// Query of the sign-in page.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct SignInQuery {
    next: Option<String>,
    notice: Option<String>,
}

/// The sign-in form.
#[derive(serde::Deserialize)]
pub(super) struct SignInForm {
    token: String,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    next: String,
}

/// `GET /`: the workspaces (which ask for a sign-in first when needed).
pub(super) async fn home() -> Redirect {
    Redirect::to("/workspaces")
}

/// `GET /sign-in`.
pub(super) async fn form(
    State(s): State<WebState>,
    Query(q): Query<SignInQuery>,
) -> WebResult<Response> {
    let notice = match q.notice.as_deref() {
        Some("signed-out") => Some("You are signed out."),
        Some("token-revoked") => {
            Some("The token this session signed in with is revoked, so you are signed out.")
        }
        _ => None,
    };
    sign_in_page(
        &s,
        StatusCode::OK,
        safe_next(q.next.as_deref()),
        None,
        notice,
    )
}

/// `POST /sign-in`: checks the form's double-submit token, then exchanges the API token for a
/// session cookie.
pub(super) async fn submit(
    State(s): State<WebState>,
    headers: HeaderMap,
    Form(form): Form<SignInForm>,
) -> WebResult<Response> {
    check_sign_in_form(&headers, &form.csrf)?;
    let next = safe_next(Some(&form.next));
    match s
        .app
        .web_session_start(&form.token, s.config.session_times())
        .await
    {
        Ok(created) => {
            let secure = s.config.secure_cookies;
            let location =
                HeaderValue::from_str(&next).unwrap_or(HeaderValue::from_static("/workspaces"));
            Ok((
                StatusCode::SEE_OTHER,
                AppendHeaders([
                    (
                        SET_COOKIE,
                        set_cookie(
                            SESSION_COOKIE,
                            &created.session_id,
                            s.config.session_lifetime,
                            secure,
                        ),
                    ),
                    (
                        SET_COOKIE,
                        set_cookie(SIGN_IN_COOKIE, "", Duration::ZERO, secure),
                    ),
                    (LOCATION, location),
                ]),
            )
                .into_response())
        }
        Err(AppError::Refused {
            code: ErrorCode::Unauthenticated,
            message,
        }) => sign_in_page(&s, StatusCode::UNAUTHORIZED, next, Some(message), None),
        Err(e) => Err(WebError(e)),
    }
}

/// `POST /sign-out`: ends the session on the server and clears the cookie.
pub(super) async fn sign_out(
    State(s): State<WebState>,
    protected: Protected<CsrfOnly>,
) -> WebResult<Response> {
    s.app
        .web_session_end(&protected.signed_in.session_id)
        .await?;
    Ok(signed_out(&s, "/sign-in?notice=signed-out"))
}

/// The answer once a session has ended: the cookie cleared and a redirect to `location`.
pub(super) fn signed_out(s: &WebState, location: &'static str) -> Response {
    (
        StatusCode::SEE_OTHER,
        AppendHeaders([
            (
                SET_COOKIE,
                set_cookie(SESSION_COOKIE, "", Duration::ZERO, s.config.secure_cookies),
            ),
            (LOCATION, HeaderValue::from_static(location)),
        ]),
    )
        .into_response()
}

/// The sign-in page with a fresh double-submit token in its form and cookie.
fn sign_in_page(
    s: &WebState,
    status: StatusCode,
    next: String,
    error: Option<String>,
    notice: Option<&'static str>,
) -> WebResult<Response> {
    let csrf = random_secret()?;
    let cookie = set_cookie(
        SIGN_IN_COOKIE,
        &csrf,
        SIGN_IN_FORM_TTL,
        s.config.secure_cookies,
    );
    let body = html(&SignInPage {
        csrf,
        next,
        error,
        notice,
    })?;
    Ok((status, [(SET_COOKIE, cookie)], body).into_response())
}

/// Where to go after signing in: a path on this site only, never another origin.
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(path)
            if path.starts_with('/')
                && !path.starts_with("//")
                && !path.starts_with("/\\")
                && !path.starts_with("/sign-")
                && !path.chars().any(|c| c.is_control()) =>
        {
            path.to_owned()
        }
        _ => "/workspaces".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(
            safe_next(Some("/workspaces/acme/calls?state=running")),
            "/workspaces/acme/calls?state=running"
        );
        for bad in [
            "https://evil.test/",
            "//evil.test/",
            "/\\evil.test",
            "/sign-out",
            "javascript:alert(1)",
            "/a\nb",
        ] {
            assert_eq!(safe_next(Some(bad)), "/workspaces", "{bad}");
        }
        assert_eq!(safe_next(None), "/workspaces");
    }
}
