//! Who asks: the principals of the matrix, and how each presents itself — a bearer token to
//! `/api/v1`, a signed-in cookie session (with its CSRF token) to the inspector.

use crate::harness::TestServer;
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};

/// The principals, in the order of the matrix's columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Principal {
    /// No credential at all.
    Anonymous,
    /// A user of the installation who is no member of the workspace.
    NonMember,
    /// A plain member of the workspace, with no grant on its profile.
    Member,
    /// An admin of the workspace (who made it, and its profile: Manage and Share, not Use).
    Admin,
    /// A member holding exactly Use on the profile.
    UseOnly,
    /// A member holding exactly Manage on the profile.
    ManageOnly,
    /// A member holding exactly Share on the profile.
    ShareOnly,
    /// The installation owner, a plain member of the workspace with no grant.
    Owner,
    /// A paired, approved device of the workspace, bound to the profile.
    Device,
    /// A device of the workspace that was revoked.
    RevokedDevice,
    /// A live device of the other workspace.
    OtherDevice,
}

impl Principal {
    /// Every principal, in column order.
    pub const ALL: [Principal; 11] = [
        Principal::Anonymous,
        Principal::NonMember,
        Principal::Member,
        Principal::Admin,
        Principal::UseOnly,
        Principal::ManageOnly,
        Principal::ShareOnly,
        Principal::Owner,
        Principal::Device,
        Principal::RevokedDevice,
        Principal::OtherDevice,
    ];

    /// The column's position.
    pub fn index(self) -> usize {
        Principal::ALL.iter().position(|p| *p == self).unwrap()
    }
}

/// A signed-in inspector session.
#[derive(Clone, Debug)]
pub struct WebSession {
    /// The `switchyard_session` cookie's value.
    pub cookie: String,
    /// The session's CSRF token, as its forms carry it.
    pub csrf: String,
}

/// One principal's identity.
#[derive(Clone, Debug)]
pub struct Who {
    /// A short name (the user's or device's), for `{me}` and for messages.
    pub name: String,
    /// What it sends as `Authorization: Bearer`.
    pub bearer: Option<String>,
    /// Whether it is a user (users sign in to the inspector; nothing else can).
    pub is_user: bool,
    /// Its inspector session, once signed in.
    pub web: Option<WebSession>,
}

impl Who {
    /// No credential.
    pub fn anonymous() -> Self {
        Who {
            name: "anonymous".into(),
            bearer: None,
            is_user: false,
            web: None,
        }
    }

    /// A user and their personal API token.
    pub fn user(name: &str, token: &str) -> Self {
        Who {
            name: name.into(),
            bearer: Some(token.into()),
            is_user: true,
            web: None,
        }
    }

    /// A device and its credential.
    pub fn device(name: &str, credential: &str) -> Self {
        Who {
            name: name.into(),
            bearer: Some(credential.into()),
            is_user: false,
            web: None,
        }
    }
}

/// A client that follows no redirects.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The value of cookie `name` set by an answer.
pub fn set_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next()?.split_once('='))
        .find(|(key, value)| *key == name && !value.is_empty())
        .map(|(_, value)| value.to_owned())
}

/// The value of the first hidden `csrf` field of a page.
pub fn csrf_field(body: &str) -> Option<String> {
    let marker = "name=\"csrf\" value=\"";
    let start = body.find(marker)? + marker.len();
    Some(body[start..start + body[start..].find('"')?].to_owned())
}

/// A fresh sign-in form: its double-submit cookie and CSRF field.
pub async fn sign_in_form(http: &reqwest::Client, base: &str) -> (String, String) {
    let form = http.get(format!("{base}/sign-in")).send().await.unwrap();
    let cookie = set_cookie(&form, "switchyard_signin").expect("the sign-in cookie");
    let csrf = csrf_field(&form.text().await.unwrap()).expect("the sign-in csrf field");
    (cookie, csrf)
}

/// Signs `token` in through the form; the session, or `None` when the form refuses it.
pub async fn sign_in(server: &TestServer, token: &str) -> Option<WebSession> {
    let http = http();
    let base = format!("http://{}", server.addr);
    let (signin_cookie, csrf) = sign_in_form(&http, &base).await;
    let signed = http
        .post(format!("{base}/sign-in"))
        .header(COOKIE, format!("switchyard_signin={signin_cookie}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(&[("token", token), ("csrf", &csrf)]))
        .send()
        .await
        .unwrap();
    if signed.status() != StatusCode::SEE_OTHER || signed.headers().get(LOCATION).is_none() {
        return None;
    }
    let cookie = set_cookie(&signed, "switchyard_session")?;
    let page = http
        .get(format!("{base}/workspaces"))
        .header(COOKIE, format!("switchyard_session={cookie}"))
        .send()
        .await
        .unwrap();
    let csrf = csrf_field(&page.text().await.unwrap()).expect("a csrf field on /workspaces");
    Some(WebSession { cookie, csrf })
}

/// Fields as an `application/x-www-form-urlencoded` body, as a browser submits a form.
pub fn form_body(fields: &[(&str, &str)]) -> String {
    fn encode(text: &str) -> String {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    }
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}
