//! Governance in the inspector over plain HTTP: classifying tools on a connection's page, the
//! connection's recent audit history, and answering approval questions on the Approvals page —
//! each checked through the API, with CSRF and the app's rights enforced.

use super::*;
use serde_json::Value;

/// The table row of tool `tool` on a connection page.
#[track_caller]
fn tool_row<'a>(body: &'a str, tool: &str) -> &'a str {
    let start = body
        .find(&format!("<tr data-tool=\"{tool}\">"))
        .unwrap_or_else(|| panic!("no row for tool `{tool}` in {body}"));
    let end = start + body[start..].find("</tr>").expect("the row ends");
    &body[start..end]
}

/// The classification of `tool` of connection `connection` in `acme`, through the API.
async fn classification(server: &TestServer, connection: &str, tool: &str) -> Value {
    let tools = server
        .owner
        .get(&format!(
            "/api/v1/workspaces/acme/connections/{connection}/tools"
        ))
        .await
        .ok();
    tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == tool)
        .unwrap_or_else(|| panic!("no tool `{tool}` in {tools}"))["classification"]
        .clone()
}

/// Adds user `name` to `acme` as a plain member.
#[sqlx::test(migrations = "../../migrations")]
async fn an_admin_classifies_tools_on_the_connection_page_and_sees_its_history(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    // A second connection, discovered and not classified: the form offers the suggestions.
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "raw", "connector": "fixture-acme"}),
        )
        .await
        .ok();
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/connections/raw/discover",
            json!({}),
        )
        .await
        .ok();
    let bob = server.member("acme", "bob", "member").await;
    let page = "/workspaces/acme/connections/raw";

    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(server.owner.token()).await;
    let shown = web.get(page).await;
    assert_eq!(shown.status, StatusCode::OK);
    // No hint at all: every hint says so, and the fail-safe choice is pre-selected.
    let echo = tool_row(&shown.body, "echo");
    assert!(
        echo.contains("<code>readOnlyHint</code>: no hint")
            && echo.contains("<code>openWorldHint</code>: no hint"),
        "{echo}"
    );
    assert!(echo.contains(">unclassified<"), "{echo}");
    assert!(
        echo.contains(r#"<option value="side-effecting" selected>"#)
            && echo.contains(r#"<option value="high" selected>"#),
        "{echo}"
    );
    // Hints shown as given; they move the suggestion, never the state.
    let count = tool_row(&shown.body, "count");
    assert!(
        count.contains("<code>destructiveHint</code>: false")
            && count.contains("<code>openWorldHint</code>: no hint"),
        "{count}"
    );
    assert!(
        count.contains(r#"<option value="medium" selected>"#),
        "{count}"
    );
    let lookup = tool_row(&shown.body, "lookup");
    assert!(
        lookup.contains("<code>readOnlyHint</code>: true")
            && lookup.contains(r#"<option value="read-only" selected>"#)
            && lookup.contains(r#"<option value="low" selected>"#),
        "{lookup}"
    );

    // Without the CSRF token, or with a value that is no choice, nothing changes.
    let classify = format!("{page}/tools/echo/classify");
    let fields = |csrf: &str, risk: &str| {
        vec![
            ("csrf", csrf.to_owned()),
            ("effect", "read-only".to_owned()),
            ("risk", risk.to_owned()),
        ]
    };
    let refused = web.post_fields(&classify, fields("", "medium")).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let refused = web.post_fields(&classify, fields(&csrf, "extreme")).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(
        refused.body.contains("low, medium or high"),
        "{}",
        refused.body
    );
    assert_eq!(classification(&server, "raw", "echo").await, Value::Null);

    let classified = web.post_fields(&classify, fields(&csrf, "medium")).await;
    assert_eq!(
        (classified.status, classified.location.as_deref()),
        (
            StatusCode::SEE_OTHER,
            Some("/workspaces/acme/connections/raw?notice=classified#tools-h")
        ),
        "{}",
        classified.body
    );
    assert_eq!(
        classification(&server, "raw", "echo").await,
        json!({"side_effect": false, "risk": "medium"})
    );
    let shown = web
        .get("/workspaces/acme/connections/raw?notice=classified")
        .await;
    assert!(shown.body.contains("Classified: the tool can be called"));
    let echo = tool_row(&shown.body, "echo");
    assert!(
        echo.contains(">classified<") && echo.contains("read-only, medium risk"),
        "{echo}"
    );
    // Classified: the form starts from the classification, not the suggestion.
    assert!(
        echo.contains(r#"<option value="read-only" selected>"#)
            && echo.contains(r#"<option value="medium" selected>"#),
        "{echo}"
    );
    // The admin sees the connection's recent audit history, the classification first.
    let history = &shown.body[shown
        .body
        .find("Recent audit history")
        .expect("an admin sees the audit history")..];
    let first = &history[history.find("<tbody>").unwrap()..];
    let first = &first[..first.find("</tr>").unwrap()];
    assert!(
        first.contains("<td>owner</td>")
            && first.contains("tool.classified")
            && first.contains("tool echo"),
        "{first}"
    );
    assert!(history.contains("connection.created"), "{history}");

    // A plain member reads the catalog, gets no form and no history, and is refused a post.
    let mut bob_web = WebClient::new(&server);
    let bob_csrf = bob_web.sign_in(bob.token()).await;
    let seen = bob_web.get(page).await;
    assert_eq!(seen.status, StatusCode::OK);
    assert!(tool_row(&seen.body, "echo").contains("read-only, medium risk"));
    assert!(!seen.body.contains("/classify\""), "{}", seen.body);
    assert!(!seen.body.contains("Recent audit history"), "{}", seen.body);
    let refused = bob_web
        .post_fields(&classify, fields(&bob_csrf, "high"))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.body.contains("forbidden"), "{}", refused.body);
    assert_eq!(
        classification(&server, "raw", "echo").await,
        json!({"side_effect": false, "risk": "medium"})
    );
}

/// `approval_gate`'s workspace on a new server, with its approver and Use-only member.
async fn gated(pool: PgPool, counter: &str) -> (TestServer, Client, Client) {
    let server = TestServer::start(pool).await;
    let Gated { approver, bob, .. } = approval_gate(&server, counter).await;
    (server, approver, bob)
}

async fn call_state(server: &TestServer, id: &str) -> Value {
    server
        .owner
        .get(&format!("/api/v1/workspaces/acme/calls/{id}"))
        .await
        .ok()["state"]
        .clone()
}

#[sqlx::test(migrations = "../../migrations")]
async fn approvers_answer_on_the_approvals_page_and_the_app_decides(pool: PgPool) {
    let scratch = scratch_dir("web-approvals");
    let counter = scratch.path("count");
    let (server, approver, bob) = gated(pool, &counter).await;
    let held = server
        .owner
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("count", json!({"label": "<b>held</b>"})),
        )
        .await
        .ok();
    assert_eq!(held["state"], "awaiting_approval");
    let id = held["id"].as_str().unwrap().to_owned();
    let held_first = id.clone();
    let approve = format!("/workspaces/acme/approvals/{id}/approve");

    // The approver sees the question with its exact arguments, escaped, and the buttons.
    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(approver.token()).await;
    let page = web.get("/workspaces/acme/approvals").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body
            .contains(r#"<a href="/workspaces/acme/approvals" aria-current="page">Approvals</a>"#),
        "the nav links the page"
    );
    let card = &page.body[page
        .body
        .find(&format!("data-approval=\"{id}\""))
        .expect("the question is shown")..];
    for shown in [
        "<code>count</code> on fixture",
        "<dd>main</dd>",
        "<dd>owner",
        "the policy is `always`: every call asks",
        "&#60;b&#62;held&#60;/b&#62;",
        "data-approve",
        "data-decline",
    ] {
        assert!(card.contains(shown), "`{shown}` missing from {card}");
    }
    assert!(!page.body.contains("<b>held</b>"), "arguments unescaped");

    // Without the CSRF token nothing is answered.
    let refused = web.post(&approve, &[]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(call_state(&server, &id).await, "awaiting_approval");

    // Bob (Use, no Approve) sees the question without buttons and is refused an answer.
    let mut bob_web = WebClient::new(&server);
    let bob_csrf = bob_web.sign_in(bob.token()).await;
    let seen = bob_web.get("/workspaces/acme/approvals").await;
    assert!(seen.body.contains(&format!("data-approval=\"{id}\"")));
    assert!(!seen.body.contains("data-approve"), "{}", seen.body);
    let refused = bob_web.post(&approve, &[("csrf", &bob_csrf)]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(
        refused.body.contains("role=\"alert\"") && refused.body.contains("Approve grant"),
        "{}",
        refused.body
    );
    // Carol, a member with no grant on the profile, sees neither the question nor its arguments.
    let carol = server.member("acme", "carol", "member").await;
    let mut carol_web = WebClient::new(&server);
    carol_web.sign_in(carol.token()).await;
    let unseen = carol_web.get("/workspaces/acme/approvals").await;
    assert_eq!(unseen.status, StatusCode::OK);
    assert!(
        !unseen.body.contains(&id) && !unseen.body.contains("held"),
        "{}",
        unseen.body
    );
    // The owner holds Approve but asked: no buttons, a note, and the app's refusal of a
    // forged answer is shown on the page with the reason they typed kept.
    let mut owner_web = WebClient::new(&server);
    let owner_csrf = owner_web.sign_in(server.owner.token()).await;
    let own = owner_web.get("/workspaces/acme/approvals").await;
    assert!(own.body.contains(&format!("data-approval=\"{id}\"")));
    assert!(!own.body.contains("data-approve"), "{}", own.body);
    assert!(own.body.contains("You asked this"), "{}", own.body);
    let refused = owner_web.post(&approve, &[("csrf", &owner_csrf)]).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(
        refused.body.contains("you submitted this call"),
        "{}",
        refused.body
    );
    // A reason the app refuses (too long) comes back in its card, to shorten, not retype.
    let long = "freeze ".repeat(300);
    let refused = web
        .post(
            &format!("/workspaces/acme/approvals/{id}/decline"),
            &[("csrf", &csrf), ("reason", &long)],
        )
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(
        refused.body.contains(&format!(r#"value="{long}""#)),
        "the typed reason is kept: {}",
        refused.body
    );
    assert_eq!(call_state(&server, &id).await, "awaiting_approval");

    // The approver approves: the call is queued and runs once; the question is gone.
    let approved = web.post(&approve, &[("csrf", &csrf)]).await;
    assert_eq!(
        (approved.status, approved.location.as_deref()),
        (
            StatusCode::SEE_OTHER,
            Some("/workspaces/acme/approvals?notice=approval-approved")
        ),
        "{}",
        approved.body
    );
    let done = server
        .owner
        .wait_call("acme", &id, Duration::from_secs(60))
        .await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(count_lines(&counter), 1);
    let page = web.get(approved.location.as_deref().unwrap()).await;
    assert!(page.body.contains("Approved: the call is queued"));
    assert!(!page.body.contains(&format!("data-approval=\"{id}\"")));

    // Declined with a reason: the caller reads the reason as the result; nothing runs.
    let held = server
        .owner
        .post(
            "/api/v1/workspaces/acme/calls",
            call_body("count", json!({"label": "no"})),
        )
        .await
        .ok();
    let id = held["id"].as_str().unwrap();
    let declined = web
        .post(
            &format!("/workspaces/acme/approvals/{id}/decline"),
            &[("csrf", &csrf), ("reason", "not during the freeze")],
        )
        .await;
    assert_eq!(
        declined.location.as_deref(),
        Some("/workspaces/acme/approvals?notice=approval-declined"),
        "{}",
        declined.body
    );
    let call = server
        .owner
        .wait_call("acme", id, Duration::from_secs(60))
        .await;
    assert_eq!(call["state"], "declined");
    assert_eq!(result_text(&call), "not during the freeze");
    assert_eq!(count_lines(&counter), 1, "a declined call ran");
    // Answered already: the page says so.
    let again = web
        .post(
            &format!("/workspaces/acme/approvals/{id}/approve"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.body.contains("declined already"), "{}", again.body);

    // Both answers are listed as answered, newest first, with who answered and why.
    let page = web.get("/workspaces/acme/approvals").await;
    let answered = &page.body[page
        .body
        .find("id=\"answered\"")
        .expect("the Answered table")..];
    let declined_at = answered
        .find(&format!("data-answered=\"{id}\""))
        .expect("the declined question is listed");
    let approved_at = answered
        .find(&format!("data-answered=\"{held_first}\""))
        .expect("the approved question is listed");
    assert!(declined_at < approved_at, "newest first: {answered}");
    let declined_row = &answered[declined_at..approved_at];
    for shown in ["declined", "approver", "not during the freeze"] {
        assert!(
            declined_row.contains(shown),
            "`{shown}` missing from {declined_row}"
        );
    }
    assert!(answered[approved_at..].contains("approved"));
}
