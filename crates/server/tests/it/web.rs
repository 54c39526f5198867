//! The call inspector in a real browser (headless Chromium) against a real server and
//! database: what an operator does, and what they see. Every page is checked for console
//! errors; screenshots of the main pages are saved under `target/screenshots/`.

use crate::browser::{Browser, PATIENCE};
use crate::harness::*;
use serde_json::json;
use sqlx::PgPool;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long a call may take to settle in these tests (the first one starts the fixture).
const SETTLE: Duration = Duration::from_secs(60);

/// Signs in through the form and lands on the workspaces page.
async fn sign_in(browser: &Browser, base: &str, token: &str) {
    browser.goto(&format!("{base}/")).await;
    browser.find("#token").await;
    browser.fill("#token", token).await;
    browser.click("form button[type=submit]").await;
    browser.wait_for_text("h1", "Workspaces").await;
}

/// The state the inspector shows now.
async fn shown_state(browser: &Browser) -> String {
    browser.text("#call-state").await
}

async fn wait_for_state(browser: &Browser, states: &[&str], within: Duration) {
    let script = format!(
        "const e = document.querySelector('#call-state'); return !!e && {}.includes(e.textContent.trim());",
        json!(states)
    );
    browser
        .wait_until(
            &script,
            &format!("the inspector showing one of {states:?}"),
            within,
        )
        .await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_operator_signs_in_runs_echo_and_watches_it_succeed_live(pool: PgPool) {
    hold_central_runner(&pool).await;
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let base = format!("http://{}", server.addr);
    let token = server.owner.token().to_owned();
    let browser = Browser::start().await;

    // Signed out, every page leads to the sign-in form.
    browser.goto(&format!("{base}/workspaces/acme/calls")).await;
    assert!(
        browser
            .url()
            .await
            .contains("/sign-in?next=/workspaces/acme/calls"),
        "{}",
        browser.url().await
    );
    browser.screenshot("sign-in").await;
    // A wrong token is refused without being echoed.
    browser.fill("#token", "sy_not-a-real-token").await;
    browser.click("form button[type=submit]").await;
    browser.wait_for_text("#sign-in-error", "not valid").await;
    let page = browser
        .execute("return document.documentElement.outerHTML", vec![])
        .await;
    assert!(!page.as_str().unwrap().contains("sy_not-a-real-token"));
    // The refusal is a 401 page, which the console reports as a failed load, and only that.
    let errors = browser.console_errors().await;
    assert!(
        errors.iter().all(|e| e.contains("status of 401")),
        "{errors:?}"
    );

    sign_in(&browser, &base, &token).await;
    // The session cookie is HttpOnly and nothing is kept in browser storage.
    let storage = browser
        .execute(
            "return [document.cookie, localStorage.length, sessionStorage.length]",
            vec![],
        )
        .await;
    assert_eq!(storage, json!(["", 0, 0]));
    let page = browser
        .execute("return document.documentElement.outerHTML", vec![])
        .await;
    assert!(
        !page.as_str().unwrap().contains(&token),
        "the token was echoed into a page"
    );
    browser.screenshot("workspaces").await;

    // Workspaces → connections → a connection → its profile's cached tools.
    browser.click("a[href='/workspaces/acme']").await;
    browser.wait_for_text("h1", "Connections").await;
    assert_eq!(browser.text("td .badge").await, "ready");
    browser.screenshot("connections").await;
    browser
        .click("a[href='/workspaces/acme/connections/fixture']")
        .await;
    browser.wait_for_text("#events-h", "Lifecycle events").await;
    assert!(
        browser
            .text("table.dense")
            .await
            .contains("discovery_succeeded")
    );
    browser.screenshot("connection").await;
    // Its Diagnose button: every check, in order, passed.
    browser
        .click("form[action='/workspaces/acme/connections/fixture/diagnose'] button")
        .await;
    browser.wait_for_text("h1", "Diagnosis of fixture").await;
    assert_eq!(browser.text("[data-diagnosis]").await, "all passed");
    assert_eq!(
        browser.text("tr[data-check='handshake'] .badge").await,
        "passed"
    );
    browser.screenshot("diagnosis").await;
    browser.click("a[href='/workspaces/acme/profiles']").await;
    browser.wait_for_text("h1", "Profiles").await;
    assert!(
        browser
            .text("table")
            .await
            .contains("owner: Use, Manage, Share")
    );
    browser.screenshot("profiles").await;
    browser
        .goto(&format!("{base}/workspaces/acme/connections/fixture"))
        .await;
    browser
        .click("a[href='/workspaces/acme/profiles/main/connections/fixture/tools']")
        .await;
    browser.wait_for_text("h1", "Cached tools of fixture").await;
    browser.screenshot("tools").await;
    browser.assert_no_console_errors().await;

    // Run tool: the form is generated from echo's input schema.
    browser
        .click("a[href='/workspaces/acme/profiles/main/connections/fixture/tools/echo/run']")
        .await;
    browser.wait_for_text("h1", "Run echo").await;
    assert_eq!(browser.text("label[for='arg-1']").await, "text required");
    browser
        .fill("[name='arg/text']", "hello from the browser")
        .await;
    browser.screenshot("run-form").await;
    browser
        .click("form[data-run-form] button[type=submit]")
        .await;

    // The inspector opens on the queued call and follows it without a reload.
    browser
        .wait_until(
            "return location.pathname.includes('/calls/')",
            "the inspector opening",
            PATIENCE,
        )
        .await;
    assert_eq!(shown_state(&browser).await, "queued");
    browser.execute("window.sameDocument = true", vec![]).await;
    browser.screenshot("inspector-queued").await;
    release_central_runner(&pool).await;
    wait_for_state(&browser, &["succeeded"], SETTLE).await;
    assert_eq!(
        browser
            .execute("return window.sameDocument === true", vec![])
            .await,
        json!(true),
        "the page was reloaded"
    );
    assert_eq!(
        browser.text("[data-call-state]").await,
        "succeeded",
        "the heading badge follows too"
    );
    let output = browser.text("#call-output").await;
    assert!(output.contains("hello from the browser"), "{output}");
    let status = browser.text("#call-status").await;
    for step in ["Submitted", "Leased", "Started", "Finished", "Total"] {
        assert!(
            status.contains(step),
            "{step} missing from the timeline: {status}"
        );
    }
    assert!(
        browser.find_all("#cancel-call").await.is_empty(),
        "a finished call offers no Cancel"
    );
    browser.screenshot("inspector-succeeded").await;
    browser.assert_no_console_errors().await;

    // The calls list filters by state and links to the inspector.
    let call_path: String = browser
        .execute("return location.pathname", vec![])
        .await
        .as_str()
        .unwrap()
        .to_owned();
    browser.goto(&format!("{base}/workspaces/acme/calls")).await;
    browser.select("#f-state", "succeeded").await;
    browser.click("form.filters button[type=submit]").await;
    browser
        .wait_until(
            "return location.search.includes('state=succeeded')",
            "the filter applying",
            PATIENCE,
        )
        .await;
    assert_eq!(browser.find_all("table.calls tbody tr").await.len(), 1);
    browser.screenshot("calls").await;
    browser
        .click(&format!("table.calls a[href='{call_path}']"))
        .await;
    browser.wait_for_text("h1", "Call echo").await;
    browser.assert_no_console_errors().await;

    // Sign out ends the session on the server.
    browser
        .click("header form[action='/sign-out'] button")
        .await;
    browser
        .wait_for_text(".notice", "You are signed out.")
        .await;
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM web_sessions")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(sessions, 0);
    browser.goto(&format!("{base}/workspaces")).await;
    assert!(
        browser.url().await.contains("/sign-in"),
        "{}",
        browser.url().await
    );
    browser.assert_no_console_errors().await;
    browser.quit().await;
    server.stop().await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_slow_call_is_cancelled_and_its_session_ended_from_the_inspector(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let base = format!("http://{}", server.addr);
    let browser = Browser::start().await;
    sign_in(&browser, &base, server.owner.token()).await;

    browser
        .goto(&format!(
            "{base}/workspaces/acme/profiles/main/connections/fixture/tools/slow/run"
        ))
        .await;
    browser.fill("[name='arg/seconds']", "600").await;
    browser.fill("#timeout", "900").await;
    browser
        .click("form[data-run-form] button[type=submit]")
        .await;
    wait_for_state(&browser, &["running"], SETTLE).await;
    browser.wait_for_text("#call-status", "Started").await;
    browser.screenshot("inspector-running").await;

    browser.click("#cancel-call").await;
    browser
        .wait_for_text(".notice", "Cancellation was requested")
        .await;
    // The fixture stops on MCP cancellation without answering: the effect of a request that
    // was sent is unknown, never "cancelled".
    wait_for_state(&browser, &["unknown"], SETTLE).await;
    browser.wait_for_text("#call-output", "cancelled").await;
    browser.screenshot("inspector-cancelled").await;

    // End tool session drains the page's session; the runner reports it closed.
    browser.click("form[action$='/release'] button").await;
    browser
        .wait_for_text(".notice", "The tool session is draining")
        .await;
    browser
        .click("dl.facts a[href='/workspaces/acme/connections/fixture']")
        .await;
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let events = browser.text("table.dense").await;
        if events.contains("session_closed") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no session_closed event: {events}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        browser
            .goto(&format!("{base}/workspaces/acme/connections/fixture"))
            .await;
    }
    browser.assert_no_console_errors().await;
    browser.quit().await;
    server.stop().await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn devices_are_approved_by_code_and_connectors_imported_and_inspected(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let base = format!("http://{}", server.addr);
    let browser = Browser::start().await;
    sign_in(&browser, &base, server.owner.token()).await;

    // A device asks to pair; the operator approves its code in the browser.
    let started = server
        .anonymous()
        .post("/api/v1/pairing", json!({"device_name": "build-box"}))
        .await
        .ok();
    let code = started["code"].as_str().unwrap();
    browser
        .goto(&format!("{base}/workspaces/acme/devices"))
        .await;
    browser.fill("#pairing-code", &code.to_lowercase()).await;
    browser.select("#pairing-profile", "main").await;
    browser
        .click("form[action$='/devices/approve'] button")
        .await;
    browser.wait_for_text(".notice", "Approved.").await;
    assert!(browser.text("table").await.contains("build-box"));
    browser.screenshot("devices").await;
    let poll = json!({"poll_secret": started["poll_secret"]});
    let status = server
        .anonymous()
        .post(
            &format!(
                "/api/v1/pairing/{}/poll",
                started["pairing_id"].as_str().unwrap()
            ),
            poll,
        )
        .await
        .ok();
    assert_eq!(status["status"], "approved", "{status}");
    assert!(status["credential"].is_string());
    browser
        .click("button[aria-label='Revoke device build-box']")
        .await;
    browser.wait_for_text(".notice", "revoked").await;
    assert!(browser.text("table").await.contains("revoked"));
    browser.assert_no_console_errors().await;

    // Connectors: import TOML (values dropped), approve the stdio command.
    browser.goto(&format!("{base}/connectors")).await;
    browser.select("#import-format", "toml").await;
    let document = "[mcp_servers.files]\ncommand = \"npx\"\nargs = [\"-y\", \"files-server\"]\nenv = { API_KEY = \"canary-4e1d\" }\n";
    browser.fill("#import-document", document).await;
    browser
        .click("form[action='/connectors/import'] button")
        .await;
    browser
        .wait_for_text("#report-h", "Imported 1 connector(s)")
        .await;
    let report = browser.text("section[aria-labelledby='report-h']").await;
    assert!(
        report.contains("API_KEY") && !report.contains("canary-4e1d"),
        "{report}"
    );
    browser.screenshot("connectors").await;
    browser.click("a[href='/connectors/files']").await;
    browser
        .click("form[action='/connectors/files/approve'] button")
        .await;
    browser.wait_for_text("h1 .badge", "runnable").await;
    let dump = dump_database(&pool).await;
    assert!(
        !dump.contains("canary-4e1d"),
        "an imported environment value was stored"
    );

    // An HTTP connector's metadata, read without calling a tool.
    let mut fixture = Command::new(fixture_bin())
        .args(["http", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = read_announcement(&mut fixture, "listening on");
    let _fixture = ChildGuard(fixture);
    server
        .owner
        .post(
            "/api/v1/connectors",
            json!({"name": "remote", "transport": "http", "url": url}),
        )
        .await
        .ok();
    browser.goto(&format!("{base}/connectors/remote")).await;
    browser
        .click("form[action='/connectors/remote/inspect'] button")
        .await;
    browser.wait_for_text("#inspection-h", "tool(s)").await;
    assert!(
        browser
            .text("section[aria-labelledby='inspection-h']")
            .await
            .contains("echo")
    );
    browser.screenshot("connector-inspected").await;
    browser.assert_no_console_errors().await;

    // A connection declared OAuth shows that it needs authorization, and how to give it.
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "remote", "connector": "remote"}),
        )
        .await
        .ok();
    server
        .owner
        .put(
            "/api/v1/workspaces/acme/connections/remote/auth",
            json!({"kind": "oauth"}),
        )
        .await
        .ok();
    browser.goto(&format!("{base}/workspaces/acme")).await;
    assert_eq!(
        browser
            .text("tr:has(a[href='/workspaces/acme/connections/remote']) [data-auth]")
            .await,
        "oauth needs_authorization"
    );
    browser
        .click("a[href='/workspaces/acme/connections/remote']")
        .await;
    assert_eq!(browser.text("#auth-state").await, "needs_authorization");
    let hint = browser.text("#auth-hint").await;
    assert!(hint.contains("switchyard auth acme remote"), "{hint}");
    browser.screenshot("connection-auth").await;
    browser.assert_no_console_errors().await;
    browser.quit().await;
    server.stop().await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_question_appears_live_on_the_approvals_page_and_runs_once_approved(pool: PgPool) {
    let scratch = scratch_dir("browser-approvals");
    let counter = scratch.path("count");
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &["--count-file", &counter]).await;
    let approver = server.user("approver").await;
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/members",
            json!({"user": "approver", "role": "member"}),
        )
        .await
        .ok();
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"user": "approver", "approve": true}),
        )
        .await
        .ok();
    server
        .owner
        .put(
            "/api/v1/workspaces/acme/profiles/main/approval-policy",
            json!({"connection": "fixture", "tool": "count", "policy": "always"}),
        )
        .await
        .ok();
    let base = format!("http://{}", server.addr);
    let browser = Browser::start().await;
    sign_in(&browser, &base, approver.token()).await;

    // The approver opens the Approvals page from the workspace's navigation; it goes live.
    browser.goto(&format!("{base}/workspaces/acme")).await;
    browser.click("a[href='/workspaces/acme/approvals']").await;
    browser.wait_for_text("h1", "Approvals").await;
    browser
        .wait_until(
            "return document.getElementById('approvals').dataset.live === 'true'",
            "the Approvals page going live",
            PATIENCE,
        )
        .await;
    assert_eq!(
        browser.text("#approvals-empty").await,
        "No call is waiting for approval."
    );
    browser.execute("window.sameDocument = true", vec![]).await;

    // A call that needs a person: its question appears without a reload.
    let submit = async |label: &str| {
        let call = server
            .owner
            .post(
                "/api/v1/workspaces/acme/calls",
                call_body("count", json!({"label": label})),
            )
            .await
            .ok();
        assert_eq!(call["state"], "awaiting_approval", "{call}");
        call["id"].as_str().unwrap().to_owned()
    };
    let card = |id: &str| format!("[data-approval='{id}']");
    let wanted = submit("approve me in the browser").await;
    let card_text = browser.text(&card(&wanted)).await;
    for shown in [
        "count on fixture",
        "owner",
        "\"label\": \"approve me in the browser\"",
    ] {
        assert!(card_text.contains(shown), "`{shown}` missing: {card_text}");
    }
    assert_eq!(
        browser
            .execute(
                "return document.getElementById('approvals-empty').hidden",
                vec![]
            )
            .await,
        json!(true)
    );

    // Another, declined elsewhere, disappears by itself; the first stays.
    let other = submit("declined through the API").await;
    browser.find(&card(&other)).await;
    approver
        .post(
            &format!("/api/v1/workspaces/acme/approvals/{other}/decline"),
            json!({"reason": "not this one"}),
        )
        .await
        .ok();
    browser
        .wait_until(
            &format!("return !document.querySelector(\"[data-approval='{other}']\")"),
            "the answered question disappearing",
            PATIENCE,
        )
        .await;
    assert_eq!(browser.find_all(&card(&wanted)).await.len(), 1);
    assert_eq!(
        browser
            .execute("return window.sameDocument === true", vec![])
            .await,
        json!(true),
        "the page was reloaded"
    );
    browser.screenshot("approvals").await;

    // Approved by a click: the call runs, once.
    browser
        .click(&format!("{} button[data-approve]", card(&wanted)))
        .await;
    browser
        .wait_for_text(".notice", "Approved: the call is queued")
        .await;
    assert!(browser.find_all(&card(&wanted)).await.is_empty());
    let done = server.owner.wait_call("acme", &wanted, SETTLE).await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(
        count_lines(&counter),
        1,
        "one execution, of the approved call"
    );
    browser.assert_no_console_errors().await;
    browser.quit().await;
    server.stop().await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_operator_resolves_an_unknown_call_citing_evidence_they_read(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let owner = &server.owner;
    owner
        .send(
            reqwest::Method::PUT,
            "/api/v1/workspaces/acme/capture-policy",
            Some(json!({"capture_managed_tool_results": true})),
        )
        .await
        .ok();
    let submit = |tool: &'static str, arguments: serde_json::Value| async move {
        let call = owner
            .post("/api/v1/workspaces/acme/calls", call_body(tool, arguments))
            .await
            .ok();
        owner
            .wait_call("acme", call["id"].as_str().unwrap(), SETTLE)
            .await
    };
    // A ticket lookup whose result is captured as evidence, then a call whose answer is lost.
    let ticket = submit("echo", json!({"text": "ticket 42 does not exist"})).await;
    let ticket_id = ticket["id"].as_str().unwrap().to_owned();
    let evidence = owner
        .wait_call_until("acme", &ticket_id, SETTLE, |c| {
            c["lineage"]["evidence_ids"]
                .as_array()
                .is_some_and(|e| !e.is_empty())
        })
        .await["lineage"]["evidence_ids"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let lost = submit("crash", json!({})).await;
    assert_eq!(lost["state"], "unknown", "{lost}");
    let lost_id = lost["id"].as_str().unwrap().to_owned();

    let base = format!("http://{}", server.addr);
    let browser = Browser::start().await;
    sign_in(&browser, &base, owner.token()).await;

    // The operator reads the ticket call's evidence page and copies the record's id.
    browser
        .goto(&format!("{base}/workspaces/acme/calls/{ticket_id}"))
        .await;
    browser.click("#evidence-link").await;
    browser.wait_for_text("h1", "Evidence of call").await;
    browser
        .wait_for_text("section.evidence", "ticket 42 does not exist")
        .await;
    let shown_id = browser.text("section.evidence h2 code").await;
    assert_eq!(shown_id, evidence);
    browser.screenshot("evidence").await;

    // On the unknown call, they resolve it citing that record, with a reason.
    browser
        .goto(&format!("{base}/workspaces/acme/calls/{lost_id}"))
        .await;
    wait_for_state(&browser, &["unknown"], PATIENCE).await;
    browser
        .wait_for_text("#settle-h", "Settle this unknown call")
        .await;
    browser.fill("#resolve-evidence-id", &shown_id).await;
    browser.select("#resolve-outcome", "not_applied").await;
    browser
        .fill("#resolve-explanation", "the ticket system has no ticket 42")
        .await;
    browser.screenshot("inspector-settle").await;
    browser.click("#resolve-call").await;
    browser.wait_for_text(".notice", "Resolved").await;
    assert_eq!(shown_state(&browser).await, "resolved");
    assert!(browser.find_all("#settle").await.is_empty());
    browser.screenshot("inspector-resolved").await;

    let settled = owner
        .get(&format!("/api/v1/workspaces/acme/calls/{lost_id}"))
        .await
        .ok();
    assert_eq!(
        (
            settled["resolution_outcome"].as_str(),
            settled["resolution"]["source_version_id"].as_str(),
            settled["resolution"]["explanation"].as_str(),
        ),
        (
            Some("not_applied"),
            Some(evidence.as_str()),
            Some("the ticket system has no ticket 42")
        ),
        "{settled}"
    );
    browser.assert_no_console_errors().await;
    browser.quit().await;
    server.stop().await;
}
