//! The web UI over plain HTTP: session cookies, CSRF, what is stored, the event stream, the
//! calls list's filters and pages, forms that come back with their errors, the governance
//! forms (`governance`), the Diagnose button (`diagnose`), a central connection's credentials
//! (`credentials`), and settling unknown calls,
//! evidence, audit and agents (`settling`).

mod credentials;
mod cut_off;
mod diagnose;
mod governance;
mod settling;

use crate::harness::*;
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::json;
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use std::collections::BTreeMap;
use std::time::Duration;
use switchyard_server::app::{App, AppConfig, CallQuery};
use switchyard_server::db::{Datastore, PageFrom};
use switchyard_testkit::poll::{Bound, Check};

/// A browser-like client: follows no redirects, keeps cookies by hand.
struct WebClient {
    base: String,
    http: reqwest::Client,
    cookies: BTreeMap<String, String>,
    /// The `Set-Cookie` headers of the last answer.
    set_cookies: Vec<String>,
}

struct Page {
    status: StatusCode,
    location: Option<String>,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Page {
    /// The value of the first hidden `csrf` field.
    #[track_caller]
    fn csrf(&self) -> String {
        hidden(&self.body, "csrf").unwrap_or_else(|| panic!("no csrf field in {}", self.body))
    }
}

/// A request carrying `fields` as an `application/x-www-form-urlencoded` body, as a browser
/// submits a form.
fn form_request<'a>(
    request: reqwest::RequestBuilder,
    fields: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> reqwest::RequestBuilder {
    fn encode(text: &str) -> String {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                    (b as char).to_string()
                }
                b' ' => "+".to_owned(),
                _ => format!("%{b:02X}"),
            })
            .collect()
    }
    let body = fields
        .into_iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    request
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
}

fn hidden(body: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = body.find(&marker)? + marker.len();
    Some(body[start..start + body[start..].find('"')?].to_owned())
}

impl WebClient {
    fn new(server: &TestServer) -> Self {
        WebClient {
            base: format!("http://{}", server.addr),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: BTreeMap::new(),
            set_cookies: Vec::new(),
        }
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Page {
        let cookie = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let request = if cookie.is_empty() {
            request
        } else {
            request.header(COOKIE, cookie)
        };
        let response = request.send().await.expect("request sent");
        self.set_cookies = response
            .headers()
            .get_all(SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        for set in &self.set_cookies {
            let (pair, _) = set.split_once(';').unwrap_or((set, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        let status = response.status();
        let headers = response.headers().clone();
        let location = headers
            .get(LOCATION)
            .map(|v| v.to_str().unwrap().to_owned());
        Page {
            status,
            location,
            headers,
            body: response.text().await.unwrap(),
        }
    }

    async fn get(&mut self, path: &str) -> Page {
        let request = self.http.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        let request = form_request(
            self.http.post(format!("{}{path}", self.base)),
            form.iter().map(|(k, v)| (*k, *v)),
        );
        self.send(request).await
    }

    async fn post_fields(&mut self, path: &str, form: Vec<(&str, String)>) -> Page {
        let request = form_request(
            self.http.post(format!("{}{path}", self.base)),
            form.iter().map(|(k, v)| (*k, v.as_str())),
        );
        self.send(request).await
    }

    /// Signs in through the form and returns the session's CSRF token.
    async fn sign_in(&mut self, token: &str) -> String {
        let form = self.get("/sign-in").await;
        let signed = self
            .post(
                "/sign-in",
                &[
                    ("token", token),
                    ("csrf", &form.csrf()),
                    ("next", "/workspaces"),
                ],
            )
            .await;
        assert_eq!(
            (signed.status, signed.location.as_deref()),
            (StatusCode::SEE_OTHER, Some("/workspaces")),
            "{}",
            signed.body
        );
        self.get("/workspaces").await.csrf()
    }
}

#[sqlx::test(migrations = "../../migrations")]
async fn sign_in_makes_a_strict_http_only_session_and_sign_out_ends_it(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let token = server.owner.token().to_owned();
    let mut web = WebClient::new(&server);

    let form = web.get("/sign-in").await;
    assert_eq!(form.status, StatusCode::OK);
    assert!(
        form.body
            .contains(r#"type="password" id="token" name="token" required autocomplete="off""#),
        "{}",
        form.body
    );
    assert!(
        web.set_cookies[0].contains("HttpOnly; SameSite=Strict"),
        "{:?}",
        web.set_cookies
    );
    let csrf = form.csrf();

    // Without the double-submit cookie the form is refused, token or not.
    let mut stranger = WebClient::new(&server);
    let refused = stranger
        .post("/sign-in", &[("token", &token), ("csrf", &csrf)])
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    // A wrong token is refused and never echoed.
    let wrong = web
        .post(
            "/sign-in",
            &[("token", "sy_wrong-token-canary"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(!wrong.body.contains("sy_wrong-token-canary"));

    let csrf = wrong.csrf();
    let signed = web
        .post(
            "/sign-in",
            &[
                ("token", &token),
                ("csrf", &csrf),
                ("next", "https://evil.test/"),
            ],
        )
        .await;
    assert_eq!(
        (signed.status, signed.location.as_deref()),
        (StatusCode::SEE_OTHER, Some("/workspaces"))
    );
    let session_cookie = web
        .set_cookies
        .iter()
        .find(|c| c.starts_with("switchyard_session="))
        .expect("session cookie")
        .clone();
    assert!(
        session_cookie.contains("; Path=/; HttpOnly; SameSite=Strict; Max-Age="),
        "{session_cookie}"
    );
    assert!(!session_cookie.contains("Secure"), "dev serves plain http");
    let session_id = web.cookies["switchyard_session"].clone();

    // Only the session id's hash is stored; neither it nor the token appears anywhere.
    let stored: Vec<Vec<u8>> = sqlx::query_scalar("SELECT id_hash FROM web_sessions")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(stored, vec![Sha256::digest(session_id.as_bytes()).to_vec()]);
    let dump = dump_database(&pool).await;
    assert!(!dump.contains(&session_id) && !dump.contains(&token));

    let page = web.get("/workspaces").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Signed in as <strong>owner</strong>"));
    assert!(!page.body.contains(&token) && !page.body.contains(&session_id));
    assert_eq!(page.headers["cache-control"], "no-store");
    assert!(
        page.headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'")
    );
    let csrf = page.csrf();

    // Sign-out needs the session's token and a same-site request.
    assert_eq!(
        web.post("/sign-out", &[("csrf", "0000")]).await.status,
        StatusCode::FORBIDDEN
    );
    let cross_site = form_request(
        web.http
            .post(format!("{}/sign-out", web.base))
            .header("origin", "http://evil.test"),
        [("csrf", csrf.as_str())],
    );
    assert_eq!(web.send(cross_site).await.status, StatusCode::FORBIDDEN);
    let out = web.post("/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(
        (out.status, out.location.as_deref()),
        (StatusCode::SEE_OTHER, Some("/sign-in?notice=signed-out"))
    );
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM web_sessions")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
    // The old cookie, replayed, no longer works.
    let mut replay = WebClient::new(&server);
    replay
        .cookies
        .insert("switchyard_session".into(), session_id);
    let page = replay.get("/workspaces").await;
    assert_eq!(
        (page.status, page.location.as_deref()),
        (StatusCode::SEE_OTHER, Some("/sign-in?next=/workspaces"))
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn revoking_the_token_ends_its_sessions_and_cookies_can_be_secure(pool: PgPool) {
    let server = TestServer::start_with(pool.clone(), |c| c.web.secure_cookies = true).await;
    let browser = server
        .owner
        .post("/api/v1/tokens", json!({"name": "browser"}))
        .await
        .ok();
    let mut web = WebClient::new(&server);
    let form = web.get("/sign-in").await;
    assert!(
        web.set_cookies[0].ends_with("; Secure"),
        "{:?}",
        web.set_cookies
    );
    web.post(
        "/sign-in",
        &[
            ("token", browser["secret"].as_str().unwrap()),
            ("csrf", &form.csrf()),
        ],
    )
    .await;
    assert!(
        web.set_cookies.iter().all(|c| c.ends_with("; Secure")),
        "{:?}",
        web.set_cookies
    );
    assert_eq!(web.get("/workspaces").await.status, StatusCode::OK);
    let revoke = format!(
        "/api/v1/tokens/{}/revoke",
        browser["token"]["id"].as_str().unwrap()
    );
    server.owner.post(&revoke, json!({})).await.ok();
    assert_eq!(
        web.get("/workspaces").await.status,
        StatusCode::SEE_OTHER,
        "a revoked token's session ends"
    );
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM web_sessions")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(sessions, 0, "and is deleted with the revocation");
}

#[sqlx::test(migrations = "../../migrations")]
async fn forms_need_the_csrf_token_and_other_workspaces_do_not_exist(pool: PgPool) {
    // No runner takes calls here, so the call stays queued until cancelled.
    hold_central_runner(&pool).await;
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let call = server
        .owner
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("echo", json!({"text": "x"})),
        )
        .await
        .ok();
    let id = call["id"].as_str().unwrap();
    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(server.owner.token()).await;

    let cancel = format!("/workspaces/acme/calls/{id}/cancel");
    assert_eq!(web.post(&cancel, &[]).await.status, StatusCode::FORBIDDEN);
    assert_eq!(
        web.post(&cancel, &[("csrf", "f00d")]).await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        server
            .owner
            .get(&format!("/api/v1/workspaces/acme/calls/{id}"))
            .await
            .ok()["state"],
        "queued"
    );
    let done = web.post(&cancel, &[("csrf", &csrf)]).await;
    assert_eq!(
        done.location,
        Some(format!("/workspaces/acme/calls/{id}?notice=cancelled"))
    );
    assert_eq!(
        server
            .owner
            .get(&format!("/api/v1/workspaces/acme/calls/{id}"))
            .await
            .ok()["state"],
        "cancelled"
    );
    let inspector = web.get(done.location.as_deref().unwrap()).await;
    assert!(
        inspector
            .body
            .contains("The call was cancelled before it was sent.")
    );
    assert!(inspector.body.contains(r#"data-settled="true""#));

    // Another user, not a member: the workspace and the call do not exist for them.
    let eve = server.user("eve").await;
    let mut eve_web = WebClient::new(&server);
    eve_web.sign_in(eve.token()).await;
    for path in [
        "/workspaces/acme",
        &format!("/workspaces/acme/calls/{id}"),
        &format!("/workspaces/acme/calls/{id}/events"),
    ] {
        let page = eve_web.get(path).await;
        assert_eq!(page.status, StatusCode::NOT_FOUND, "{path}");
        assert!(page.body.contains("workspace_not_found"), "{path}");
    }
    assert_eq!(
        eve_web.get("/no/such/page").await.status,
        StatusCode::NOT_FOUND
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_event_stream_sends_the_call_until_it_settles(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let call = server
        .owner
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("echo", json!({"text": "streamed"})),
        )
        .await
        .ok();
    let mut web = WebClient::new(&server);
    web.sign_in(server.owner.token()).await;
    let stream = web
        .get(&format!(
            "/workspaces/acme/calls/{}/events",
            call["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(stream.status, StatusCode::OK);
    assert_eq!(stream.headers["content-type"], "text/event-stream");
    // The body ends because the stream ends once the call has settled.
    let events: Vec<serde_json::Value> = stream
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let last = events.last().expect("at least one event");
    assert_eq!(
        (last["state"].as_str(), last["settled"].as_bool()),
        (Some("succeeded"), Some(true))
    );
    assert!(last["output_html"].as_str().unwrap().contains("streamed"));
    assert!(
        events.iter().rev().skip(1).all(|e| e["settled"] == false),
        "only the last event is settled"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_calls_list_filters_and_pages_newest_first(pool: PgPool) {
    hold_central_runner(&pool).await;
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let mut ids = Vec::new();
    for n in 0..7 {
        let call = server
            .owner
            .post(
                "/api/v1/workspaces/acme/calls",
                call_body("echo", json!({"text": n.to_string()})),
            )
            .await
            .ok();
        ids.push(call["id"].as_str().unwrap().to_owned());
    }
    for id in &ids[1..3] {
        server
            .owner
            .post(
                &format!("/api/v1/workspaces/acme/calls/{id}/cancel"),
                json!({}),
            )
            .await
            .ok();
    }
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();

    let app = App::new(Datastore::new(pool.clone()), AppConfig::default());
    let owner = app.authenticate(server.owner.token()).await.unwrap();
    let page = |from| CallQuery {
        from,
        ..CallQuery::default()
    };
    let mut seen = Vec::new();
    let mut from = PageFrom::Newest;
    let mut pages = Vec::new();
    loop {
        let p = app.call_page(&owner, "acme", page(from), 3).await.unwrap();
        seen.extend(p.calls.iter().map(|c| c.id.to_string()));
        pages.push(p.clone());
        match p.older {
            Some(older) => from = PageFrom::Before(older),
            None => break,
        }
    }
    assert_eq!(seen, newest_first, "every call once, newest first");
    assert_eq!(
        pages.iter().map(|p| p.calls.len()).collect::<Vec<_>>(),
        [3, 3, 1]
    );
    assert!(pages[0].newer.is_none() && pages[1].newer.is_some());
    // Back from the last page: the same middle page.
    let back = app
        .call_page(
            &owner,
            "acme",
            page(PageFrom::After(pages[2].calls[0].id)),
            3,
        )
        .await
        .unwrap();
    assert_eq!(
        back.calls.iter().map(|c| c.id).collect::<Vec<_>>(),
        pages[1].calls.iter().map(|c| c.id).collect::<Vec<_>>()
    );

    // Filters, in the page: only the two cancelled calls, each linking to its inspector.
    let mut web = WebClient::new(&server);
    web.sign_in(server.owner.token()).await;
    let list = web
        .get("/workspaces/acme/calls?state=cancelled&connection=fixture&runner=central")
        .await;
    assert_eq!(list.status, StatusCode::OK);
    let linked: Vec<&String> = ids
        .iter()
        .filter(|id| {
            list.body
                .contains(&format!("href=\"/workspaces/acme/calls/{id}\""))
        })
        .collect();
    assert_eq!(linked, vec![&ids[1], &ids[2]]);
    let future = web
        .get("/workspaces/acme/calls?since=2999-01-01T00:00")
        .await;
    assert!(future.body.contains("No calls match this filter."));
    let bad = web.get("/workspaces/acme/calls?state=sleeping").await;
    assert!(bad.body.contains("`sleeping` is not a call state"));
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_run_form_reads_typed_and_raw_arguments_and_returns_errors(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let mut web = WebClient::new(&server);
    web.sign_in(server.owner.token()).await;
    let run = "/workspaces/acme/profiles/main/connections/fixture/tools/slow/run";
    let form = web.get(run).await;
    assert!(
        form.body
            .contains(r#"type="number" step="any" id="arg-1" name="arg/seconds""#),
        "{}",
        form.body
    );
    let csrf = form.csrf();
    let request_id = hidden(&form.body, "request_id").unwrap();
    let session = hidden(&form.body, "session").unwrap();
    let environment = hidden(&form.body, "environment_id").unwrap();
    let fields = |seconds: &'static str, mode: &'static str, raw: &'static str| {
        vec![
            ("csrf", csrf.clone()),
            ("request_id", request_id.clone()),
            ("session", session.clone()),
            ("environment_id", environment.clone()),
            ("mode", mode.to_owned()),
            ("arg/seconds", seconds.to_owned()),
            ("raw", raw.to_owned()),
            ("timeout", "30".to_owned()),
        ]
    };
    let refused = web.post_fields(run, fields("soon", "form", "")).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        refused.body.contains("`soon` is not a number"),
        "{}",
        refused.body
    );
    assert!(
        refused.body.contains(r#"value="soon""#),
        "the value comes back to be fixed"
    );
    let raw_refused = web.post_fields(run, fields("", "raw", "[1]")).await;
    assert!(raw_refused.body.contains("must be a JSON object"));
    let calls = calls_stored(&pool).await;
    assert_eq!(calls, 0, "nothing was submitted");

    let submitted = web
        .post_fields(run, fields("", "raw", r#"{"seconds": 0.1}"#))
        .await;
    assert_eq!(
        submitted.status,
        StatusCode::SEE_OTHER,
        "{}",
        submitted.body
    );
    let call = server
        .owner
        .wait_call(
            "acme",
            submitted.location.unwrap().rsplit('/').next().unwrap(),
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(
        (call["state"].as_str(), call["request_id"].as_str()),
        (Some("succeeded"), Some(request_id.as_str()))
    );
    assert_eq!(
        (
            call["arguments"].clone(),
            call["client_session_id"].as_str()
        ),
        (json!({"seconds": 0.1}), Some(session.as_str()))
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn connectors_import_from_yaml_in_the_web_form(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(server.owner.token()).await;
    let (url, _fixture) = http_fixture(&[], &[]);
    let yaml = format!(
        "mcpServers:\n  remote:\n    url: {url}\n  tools:\n    command: tools-server\n    env:\n      SECRET_KEY: canary-77aa\n"
    );
    let page = web
        .post(
            "/connectors/import",
            &[("csrf", &csrf), ("format", "yaml"), ("document", &yaml)],
        )
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("Imported 2 connector(s)"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("canary-77aa"));
    assert_eq!(
        server.owner.get("/api/v1/connectors/tools").await.ok()["env"],
        json!(["SECRET_KEY"])
    );
    // A broken document is refused with a position, and not echoed back.
    let broken = web
        .post(
            "/connectors/import",
            &[
                ("csrf", &csrf),
                ("format", "yaml"),
                ("document", "mcpServers: {x: [canary-99"),
            ],
        )
        .await;
    assert_eq!(broken.status, StatusCode::BAD_REQUEST);
    assert!(
        broken.body.contains("has an error at line") && !broken.body.contains("canary-99"),
        "{}",
        broken.body
    );
    // An HTTP endpoint that does not answer the MCP handshake is refused on the form, and
    // nothing is stored.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/mcp", listener.local_addr().unwrap())
    };
    let refused = web
        .post(
            "/connectors",
            &[
                ("csrf", &csrf),
                ("name", "gone"),
                ("transport", "http"),
                ("url", &closed),
            ],
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        refused.body.contains("MCP handshake failed"),
        "{}",
        refused.body
    );
    server
        .owner
        .get("/api/v1/connectors/gone")
        .await
        .refused(404, "connector_not_found");
    // Non-owners read connectors but get no forms, and are refused if they post anyway.
    let bob = server.user("bob").await;
    let mut bob_web = WebClient::new(&server);
    let bob_csrf = bob_web.sign_in(bob.token()).await;
    let list = bob_web.get("/connectors").await;
    assert!(list.body.contains("remote") && !list.body.contains("action=\"/connectors/import\""));
    let refused = bob_web
        .post(
            "/connectors/import",
            &[("csrf", &bob_csrf), ("format", "json"), ("document", "{}")],
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_session_holds_a_bounded_number_of_live_call_views(pool: PgPool) {
    let server = TestServer::start_with(pool.clone(), |c| c.web.streams_per_session = 2).await;
    setup_workspace(&server, "acme", &[]).await;
    let call = server
        .owner
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("slow", json!({"seconds": 30})),
        )
        .await
        .ok();
    let mut web = WebClient::new(&server);
    web.sign_in(server.owner.token()).await;
    let cookie = web
        .cookies
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ");
    let url = format!(
        "{}/workspaces/acme/calls/{}/events",
        web.base,
        call["id"].as_str().unwrap()
    );
    let open = || web.http.get(&url).header(COOKIE, &cookie).send();
    // Two live views stay open (their bodies unread); a third is refused.
    let first = open().await.unwrap();
    let second = open().await.unwrap();
    assert_eq!(
        (first.status(), second.status()),
        (StatusCode::OK, StatusCode::OK)
    );
    let third = open().await.unwrap();
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(third.text().await.unwrap().contains("too_many_streams"));
    // One closed gives its place back, once the server notices (at its next write: the
    // stream's keep-alive comes at least every 15 s).
    drop(first);
    let again = Bound::new(Duration::from_secs(40), Duration::from_millis(250))
        .until(async || {
            let answer = open().await.unwrap();
            Ok(if answer.status() == StatusCode::OK {
                Check::Done(answer)
            } else {
                Check::NotYet(format!("a new live view answers {}", answer.status()))
            })
        })
        .await
        .expect("a place came back");
    assert_eq!(again.status(), StatusCode::OK);
    drop(second);
}

/// Markup an attacker would plant, as a device name, a tool's result and its error.
const CANARY: &str = r#"<script>alert(1)</script>"><img src=x onerror=alert(2)>"#;

/// No page or stream fragment carries the canary as markup.
#[track_caller]
fn assert_inert(what: &str, body: &str) {
    assert!(
        !body.contains("<script>alert(1)") && !body.contains("<img src=x"),
        "{what} renders the canary as markup:\n{body}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn planted_markup_renders_inert_on_every_page_and_stream(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    // Results become evidence, shown on the calls' evidence pages.
    server
        .owner
        .send(
            reqwest::Method::PUT,
            "/api/v1/workspaces/acme/capture-policy",
            Some(json!({"capture_managed_tool_results": true})),
        )
        .await
        .ok();
    let mut ids = Vec::new();
    for (tool, arguments) in [
        ("echo", json!({ "text": CANARY })),
        ("fail", json!({ "message": CANARY })),
    ] {
        let call = server
            .owner
            .post("/api/v1/workspaces/acme/calls", call_body(tool, arguments))
            .await
            .ok();
        let id = call["id"].as_str().unwrap().to_owned();
        server
            .owner
            .wait_call_until("acme", &id, Duration::from_secs(30), |c| {
                c["lineage"]["evidence_ids"]
                    .as_array()
                    .is_some_and(|e| !e.is_empty())
            })
            .await;
        ids.push(id);
    }
    let started = crate::devices::start_pairing(&server, CANARY).await;
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/devices/approve",
            json!({"code": started["code"], "profile": "main"}),
        )
        .await
        .ok();

    // A hostile MCP server's tool description, as discovery stores it verbatim.
    sqlx::query("UPDATE tools SET description = $1 WHERE name = 'echo'")
        .bind(CANARY)
        .execute(&pool)
        .await
        .unwrap();

    let mut web = WebClient::new(&server);
    web.sign_in(server.owner.token()).await;
    let tools = "/workspaces/acme/profiles/main/connections/fixture/tools";
    let mut pages = vec![
        "/workspaces/acme/calls".to_owned(),
        "/workspaces/acme/devices".to_owned(),
        "/workspaces/acme/members".to_owned(),
        "/workspaces/acme/audit".to_owned(),
        "/workspaces/acme/agents".to_owned(),
        "/workspaces/acme/profiles/main".to_owned(),
        "/tokens".to_owned(),
        tools.to_owned(),
        format!("{tools}/echo/run"),
    ];
    for id in &ids {
        pages.push(format!("/workspaces/acme/calls/{id}"));
        pages.push(format!("/workspaces/acme/calls/{id}/events"));
        pages.push(format!("/workspaces/acme/calls/{id}/evidence"));
    }
    let mut escaped = 0;
    for path in &pages {
        let page = web.get(path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert_inert(path, &page.body);
        escaped += usize::from(page.body.contains("&#60;script&#62;alert(1)"));
    }
    assert!(
        escaped >= 5,
        "the canary is shown, escaped, where it belongs ({escaped} pages)"
    );
}
