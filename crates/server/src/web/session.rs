//! Cookie sessions and CSRF protection.
//!
//! Signing in exchanges a personal API token for a random session id held in the
//! `switchyard_session` cookie (HttpOnly, SameSite=Strict, Path=/, Secure when configured); the
//! database keeps only its hash. Every form carries the session's CSRF token, checked in
//! constant time before the handler runs ([`Protected`]); the sign-in form, which has no session
//! yet, uses a double-submit cookie instead. Cross-site requests are refused by their `Origin`
//! and `Sec-Fetch-Site` headers as well. No token or secret is ever put in browser storage or
//! echoed into a page.

use super::WebState;
use super::error::WebError;
use crate::app::WebSession;
use axum::extract::{Form, FromRequest, FromRequestParts, Request};
use axum::http::header::{COOKIE, HOST, LOCATION, ORIGIN};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use std::time::Duration;
use switchyard_protocol::ErrorCode;

/// The session cookie.
pub const SESSION_COOKIE: &str = "switchyard_session";
/// The sign-in form's double-submit cookie.
pub const SIGN_IN_COOKIE: &str = "switchyard_signin";

/// The value of cookie `name`, if the request sent it.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
        .filter(|value| !value.is_empty())
}

/// A `Set-Cookie` value for a cookie only the server reads; `max_age` of zero deletes it.
pub fn set_cookie(name: &str, value: &str, max_age: Duration, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let text = format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        max_age.as_secs()
    );
    // Names are constants and values are hex: always a valid header value.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("invalid=; Max-Age=0"))
}

/// Compares secrets in time independent of where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Whether a state-changing request comes from this site: `Sec-Fetch-Site` must not say
/// cross-site and an `Origin`, when sent, must name the host the request was sent to.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if matches!(fetch_site, Some("cross-site" | "same-site")) {
        return false;
    }
    let Some(origin) = headers.get(ORIGIN) else {
        return true;
    };
    let host = headers.get(HOST).and_then(|v| v.to_str().ok());
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest.trim_end_matches('/'));
    matches!((origin_host, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h))
}

fn cross_site() -> WebError {
    WebError::refused(
        ErrorCode::Forbidden,
        "this form came from another site; reload the page and try again",
    )
}

/// A signed-in request: the live session and its id.
#[derive(Clone, Debug)]
pub struct SignedIn {
    /// The session.
    pub session: WebSession,
    /// The cookie's session id (a secret: never render it).
    pub session_id: String,
}

/// The answer to a request that needs a session and has none: pages redirect to the sign-in
/// form (coming back afterwards), anything else is refused.
#[derive(Debug)]
pub enum SignInRequired {
    /// Go to the sign-in page, then back to this path.
    Redirect(String),
    /// Refused outright (forms, streams).
    Refused,
}

impl IntoResponse for SignInRequired {
    fn into_response(self) -> Response {
        match self {
            SignInRequired::Redirect(next) => {
                let location = format!("/sign-in?next={}", encode_query(&next));
                let location = HeaderValue::from_str(&location)
                    .unwrap_or(HeaderValue::from_static("/sign-in"));
                (StatusCode::SEE_OTHER, [(LOCATION, location)]).into_response()
            }
            SignInRequired::Refused => WebError::refused(
                ErrorCode::Unauthenticated,
                "you are signed out; sign in again",
            )
            .into_response(),
        }
    }
}

/// Percent-encodes a query value.
pub fn encode_query(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl FromRequestParts<WebState> for SignedIn {
    type Rejection = SignInRequired;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &WebState,
    ) -> Result<Self, Self::Rejection> {
        let reject = || {
            if parts.method == Method::GET && !is_stream(&parts.headers) {
                let next = parts
                    .uri
                    .path_and_query()
                    .map(|p| p.as_str())
                    .unwrap_or("/");
                SignInRequired::Redirect(next.to_owned())
            } else {
                SignInRequired::Refused
            }
        };
        let Some(session_id) = cookie(&parts.headers, SESSION_COOKIE) else {
            return Err(reject());
        };
        match state
            .app
            .web_session_resume(session_id, state.config.session_times())
            .await
        {
            Ok(session) => Ok(SignedIn {
                session,
                session_id: session_id.to_owned(),
            }),
            Err(crate::error::AppError::Refused { .. }) => Err(reject()),
            Err(e) => {
                tracing::error!(error = %e, "session lookup failed");
                Err(SignInRequired::Refused)
            }
        }
    }
}

fn is_stream(headers: &HeaderMap) -> bool {
    headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"))
}

/// A form that names its CSRF token.
pub trait CsrfForm {
    /// The submitted CSRF token, if any.
    fn csrf(&self) -> Option<&str>;
}

/// A form with only a CSRF token (buttons such as Cancel or Sign out).
#[derive(Debug, serde::Deserialize)]
pub struct CsrfOnly {
    /// The CSRF token.
    #[serde(default)]
    pub csrf: String,
}

impl CsrfForm for CsrfOnly {
    fn csrf(&self) -> Option<&str> {
        Some(&self.csrf)
    }
}

/// Every field of a form, in order (for forms whose fields are generated).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(transparent)]
pub struct FormFields(pub Vec<(String, String)>);

impl FormFields {
    /// The first value of field `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

impl CsrfForm for FormFields {
    fn csrf(&self) -> Option<&str> {
        self.get("csrf")
    }
}

/// A signed-in, same-site form submission whose CSRF token matches the session's.
#[derive(Debug)]
pub struct Protected<T> {
    /// Who submitted it.
    pub signed_in: SignedIn,
    /// The form.
    pub form: T,
}

impl<T> FromRequest<WebState> for Protected<T>
where
    T: CsrfForm + DeserializeOwned + Send,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &WebState) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = req.into_parts();
        let signed_in = SignedIn::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        if !same_origin(&parts.headers) {
            return Err(cross_site().into_response());
        }
        let Form(form) = Form::<T>::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(|e| {
                WebError::refused(
                    ErrorCode::InvalidRequest,
                    format!("the form could not be read: {}", e.body_text()),
                )
                .into_response()
            })?;
        match form.csrf() {
            Some(token) if same_secret(token, &signed_in.session.csrf_token) => {
                Ok(Protected { signed_in, form })
            }
            _ => Err(WebError::refused(
                ErrorCode::Forbidden,
                "the form's security token is missing or stale; reload the page and try again",
            )
            .into_response()),
        }
    }
}

/// Checks a sign-in form: same site, and its token equals the double-submit cookie.
pub fn check_sign_in_form(headers: &HeaderMap, submitted: &str) -> Result<(), WebError> {
    if !same_origin(headers) {
        return Err(cross_site());
    }
    match cookie(headers, SIGN_IN_COOKIE) {
        Some(expected) if same_secret(expected, submitted) => Ok(()),
        _ => Err(WebError::refused(
            ErrorCode::Forbidden,
            "the sign-in form expired; reload the page and try again",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn cookies_are_found_by_exact_name() {
        let h = headers(&[
            ("cookie", "a=1; switchyard_session_x=2"),
            ("cookie", "switchyard_session=abc"),
        ]);
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie(&h, "missing"), None);
    }

    #[test]
    fn cookies_are_http_only_and_strict() {
        let v = set_cookie(SESSION_COOKIE, "ff", Duration::from_secs(60), true);
        assert_eq!(
            v.to_str().unwrap(),
            "switchyard_session=ff; Path=/; HttpOnly; SameSite=Strict; Max-Age=60; Secure"
        );
    }

    #[test]
    fn cross_site_requests_are_told_apart() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8787")])));
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:8787"),
            ("origin", "http://127.0.0.1:8787")
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:8787"),
            ("origin", "http://evil.test")
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:8787"),
            ("origin", "null")
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:8787"),
            ("sec-fetch-site", "cross-site")
        ])));
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
    }
}
