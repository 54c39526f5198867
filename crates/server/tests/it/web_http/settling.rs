//! The inspector's pages for what was CLI-only: settling an unknown call from its page (Look
//! up the receipt, Resolve), a call's evidence page, the audit page and the agents pages —
//! each form checked through the API, each refusal shown on the page with nothing written.

use super::*;
use crate::reconcile::published_evidence;
use reqwest::Method;
use serde_json::Value;
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(60);

/// Runs `tool` in `acme` through the API and waits until it is no longer on its way.
async fn run_to_end(server: &TestServer, tool: &str, arguments: Value) -> Value {
    let call = server
        .owner
        .post("/api/v1/workspaces/acme/calls", call_body(tool, arguments))
        .await
        .ok();
    server
        .owner
        .wait_call("acme", call["id"].as_str().unwrap(), WAIT)
        .await
}

async fn capture_on(server: &TestServer) {
    server
        .owner
        .send(
            Method::PUT,
            "/api/v1/workspaces/acme/capture-policy",
            Some(json!({"capture_managed_tool_results": true})),
        )
        .await
        .ok();
}

async fn call_api(server: &TestServer, id: &str) -> Value {
    server
        .owner
        .get(&format!("/api/v1/workspaces/acme/calls/{id}"))
        .await
        .ok()
}

/// The message of a page's refusal (`role="alert"`), unescaped enough to read.
#[track_caller]
fn alert(body: &str) -> &str {
    let start = body
        .find("role=\"alert\"")
        .unwrap_or_else(|| panic!("no refusal on the page: {body}"));
    let text = &body[start + body[start..].find('>').unwrap() + 1..];
    &text[..text.find("</p>").unwrap()]
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_unknown_call_is_resolved_on_its_page_and_a_refusal_writes_nothing(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    capture_on(&server).await;
    let evidence = published_evidence(&server, "acme", "ticket 42 does not exist").await;
    let crashed = run_to_end(&server, "crash", json!({})).await;
    assert_eq!(crashed["state"], "unknown", "{crashed}");
    let id = crashed["id"].as_str().unwrap();
    let page = format!("/workspaces/acme/calls/{id}");
    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(server.owner.token()).await;

    let shown = web.get(&page).await;
    assert_eq!(shown.status, StatusCode::OK);
    for what in [
        "Settle this unknown call",
        "Look up the receipt",
        "This call has no evidence record of its own",
        "not applied: the effect did not happen",
        &format!("href=\"/workspaces/acme/calls/{id}/evidence\""),
    ] {
        assert!(shown.body.contains(what), "no `{what}` on {}", shown.body);
    }
    let request_id = hidden(
        &shown.body[shown.body.find("resolve-form").unwrap()..],
        "request_id",
    )
    .expect("the resolve form's request id");
    let resolve = format!("{page}/resolve");
    let form = |evidence: &str, outcome: &str, reason: &str| {
        vec![
            ("csrf", csrf.clone()),
            ("request_id", request_id.clone()),
            ("evidence_id", evidence.to_owned()),
            ("outcome", outcome.to_owned()),
            ("explanation", reason.to_owned()),
        ]
    };

    // Refusals come back on the call's page with the app's message and the form as typed.
    let unknown_record = Uuid::new_v4().to_string();
    let refused = web
        .post_fields(
            &resolve,
            form(&unknown_record, "not_applied", "the ledger says no"),
        )
        .await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND);
    assert!(
        alert(&refused.body).contains("no readable evidence record"),
        "{}",
        refused.body
    );
    assert!(refused.body.contains(">the ledger says no</textarea>"));
    assert!(
        refused
            .body
            .contains(&format!("value=\"{unknown_record}\""))
    );
    let refused = web
        .post_fields(&resolve, form(&evidence, "", "the ledger says no"))
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(
        alert(&refused.body).contains("outcome `` is not one of"),
        "{}",
        refused.body
    );
    let refused = web
        .post_fields(&resolve, form(&evidence, "not_applied", "   "))
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    assert!(
        alert(&refused.body).contains("explanation"),
        "{}",
        refused.body
    );
    let unchanged = call_api(&server, id).await;
    assert_eq!(unchanged["state"], "unknown");
    assert!(unchanged["resolution"].is_null(), "{unchanged}");

    // A member without Use on the profile may not settle it.
    let bob = server.member("acme", "bob", "member").await;
    let mut bobs = WebClient::new(&server);
    let bob_csrf = bobs.sign_in(bob.token()).await;
    let mut bob_form = form(&evidence, "succeeded", "not mine to say");
    bob_form[0].1 = bob_csrf;
    assert_eq!(
        bobs.post_fields(&resolve, bob_form).await.status,
        StatusCode::FORBIDDEN
    );

    let resolved = web
        .post_fields(
            &resolve,
            form(&evidence, "not_applied", "the ledger says no"),
        )
        .await;
    assert_eq!(
        (resolved.status, resolved.location.as_deref()),
        (
            StatusCode::SEE_OTHER,
            Some(format!("{page}?notice=resolved").as_str())
        ),
        "{}",
        resolved.body
    );
    let call = call_api(&server, id).await;
    assert_eq!(
        (
            call["state"].as_str(),
            call["resolution_outcome"].as_str(),
            call["resolution"]["source"].as_str(),
            call["resolution"]["source_version_id"].as_str(),
            call["resolution"]["explanation"].as_str(),
        ),
        (
            Some("resolved"),
            Some("not_applied"),
            Some("caller"),
            Some(evidence.as_str()),
            Some("the ledger says no")
        ),
        "{call}"
    );
    assert_eq!(
        call["error"]["code"], crashed["error"]["code"],
        "the attempt is kept"
    );
    let after = web.get(&format!("{page}?notice=resolved")).await;
    assert!(after.body.contains("Resolved: the outcome is recorded"));
    assert!(!after.body.contains("Settle this unknown call"));
    // The same submission again (a double click) changes nothing.
    let again = web
        .post_fields(
            &resolve,
            form(&evidence, "not_applied", "the ledger says no"),
        )
        .await;
    assert_eq!(again.status, StatusCode::SEE_OTHER);
    assert_eq!(
        call_api(&server, id).await["resolution"],
        call["resolution"]
    );

    // The evidence page shows the cited record, with the output it keeps.
    let evidence_page = web.get(&format!("{page}/evidence")).await;
    assert_eq!(evidence_page.status, StatusCode::OK);
    let body = &evidence_page.body;
    assert!(
        body.contains(&format!("Evidence <code>{evidence}</code>")),
        "{body}"
    );
    assert!(body.contains("cited by the resolution"));
    assert!(body.contains("ticket 42 does not exist"));
    let record = server
        .owner
        .get(&format!("/api/v1/workspaces/acme/evidence/{evidence}"))
        .await
        .ok();
    assert!(body.contains(&format!(
        "href=\"/workspaces/acme/calls/{}\"",
        record["call_id"].as_str().unwrap()
    )));
    // A call with no evidence says how evidence is captured.
    let fine = run_to_end(&server, "crash", json!({})).await;
    let none = web
        .get(&format!(
            "/workspaces/acme/calls/{}/evidence",
            fine["id"].as_str().unwrap()
        ))
        .await;
    assert!(
        none.body
            .contains("No evidence record is linked to this call"),
        "{}",
        none.body
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn look_up_the_receipt_settles_a_lost_answer_from_the_call_page(pool: PgPool) {
    let scratch = scratch_dir("web-reconcile");
    let counter = scratch.path("count");
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &["--count-file", &counter]).await;
    let lost = run_to_end(&server, "count_then_crash", json!({"label": "once"})).await;
    assert_eq!(lost["state"], "unknown", "{lost}");
    let id = lost["id"].as_str().unwrap();
    let page = format!("/workspaces/acme/calls/{id}");
    let mut web = WebClient::new(&server);
    let csrf = web.sign_in(server.owner.token()).await;
    let shown = web.get(&page).await;
    let request_id = hidden(
        &shown.body[shown.body.find("/reconcile").unwrap()..],
        "request_id",
    )
    .expect("the lookup form's request id");
    let lookup = [("csrf", csrf.as_str()), ("request_id", request_id.as_str())];

    // No receipt policy yet: refused on the page, and no lookup was queued.
    let refused = web.post(&format!("{page}/reconcile"), &lookup).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert!(
        alert(&refused.body).contains("has no approved receipt policy"),
        "{}",
        refused.body
    );
    let unchanged = call_api(&server, id).await;
    assert_eq!(unchanged["state"], "unknown");
    assert!(
        unchanged["lineage"]["lookup_call_ids"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{unchanged}"
    );

    server
        .owner
        .send(
            Method::PUT,
            "/api/v1/workspaces/acme/connections/fixture/receipt-policy",
            Some(json!({"tool": "lookup", "arguments": {"request_id": "{{request_id}}"}})),
        )
        .await
        .ok();
    let queued = web.post(&format!("{page}/reconcile"), &lookup).await;
    assert_eq!(
        (queued.status, queued.location.as_deref()),
        (
            StatusCode::SEE_OTHER,
            Some(format!("{page}?notice=lookup-queued").as_str())
        ),
        "{}",
        queued.body
    );
    // Sending the same form again shows the same lookup instead of asking twice.
    assert_eq!(
        web.post(&format!("{page}/reconcile"), &lookup).await.status,
        StatusCode::SEE_OTHER
    );
    let settled = server
        .owner
        .wait_call_until("acme", id, WAIT, |c| c["state"] == "resolved")
        .await;
    assert_eq!(settled["resolution_outcome"], "succeeded", "{settled}");
    assert_eq!(settled["resolution"]["source"], "observation");
    assert_eq!(
        settled["lineage"]["lookup_call_ids"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "{settled}"
    );
    assert_eq!(count_lines(&counter), 1, "the lookup only read");
    let after = web.get(&page).await;
    assert!(!after.body.contains("Settle this unknown call"));
    assert!(after.body.contains("resolved"));
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_audit_page_pages_newest_first_and_verifies_the_chain(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    // Enough changes for two pages.
    for n in 0..50 {
        server
            .owner
            .post(
                "/api/v1/workspaces/acme/environments",
                json!({"name": format!("env-{n}")}),
            )
            .await
            .ok();
    }
    let api: Vec<i64> = server
        .owner
        .get("/api/v1/workspaces/acme/audit")
        .await
        .ok()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    let verify = server
        .owner
        .get("/api/v1/workspaces/acme/audit/verify")
        .await
        .ok();
    let mut web = WebClient::new(&server);
    web.sign_in(server.owner.token()).await;
    let seqs = |body: &str| -> Vec<i64> {
        body.split("<tr>\n      <td>")
            .skip(1)
            .map(|row| row[..row.find('<').unwrap()].parse().unwrap())
            .collect()
    };

    let first = web.get("/workspaces/acme/audit").await;
    assert_eq!(first.status, StatusCode::OK);
    assert!(
        first
            .body
            .contains("href=\"/workspaces/acme/audit\" aria-current=\"page\"")
    );
    assert!(
        first.body.contains(&format!(
            "Chain intact: {} entries verified up to seq {}.",
            verify["entries"], verify["head_seq"]
        )),
        "{}",
        first.body
    );
    assert!(first.body.contains("environment.created"), "{}", first.body);
    let shown = seqs(&first.body);
    assert_eq!(shown, api[..50], "newest first, as the API lists them");
    let older = format!("/workspaces/acme/audit?before={}", shown[49]);
    assert!(first.body.contains(&format!("href=\"{older}\"")));
    let second = web.get(&older).await;
    assert_eq!(seqs(&second.body), api[50..], "the rest, oldest last");
    assert!(!second.body.contains("id=\"audit-older\""));

    // Members who are not admins read no audit log; a malformed page is named.
    let bob = server.member("acme", "bob", "member").await;
    let mut bobs = WebClient::new(&server);
    bobs.sign_in(bob.token()).await;
    let refused = bobs.get("/workspaces/acme/audit").await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(
        refused.body.contains("only admins of workspace"),
        "{}",
        refused.body
    );
    let bad = web.get("/workspaces/acme/audit?before=yesterday").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("`yesterday` is not"));
}

#[sqlx::test(migrations = "../../migrations")]
async fn the_agents_pages_show_the_tools_an_agent_sees_and_what_it_does_not(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let owner = &server.owner;
    owner
        .post("/api/v1/workspaces/acme/agents", json!({"name": "bot"}))
        .await
        .ok();
    owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"agent": "bot", "use": true}),
        )
        .await
        .ok();
    owner
        .send(
            Method::PUT,
            "/api/v1/workspaces/acme/agents/bot/connections/fixture",
            Some(json!({"read_only": true})),
        )
        .await
        .ok();
    let sees = owner
        .get("/api/v1/workspaces/acme/agents/bot/tools")
        .await
        .ok();
    let dropped = sees["dropped"].as_array().unwrap();
    assert!(
        dropped.iter().any(|d| d["reason"] == "not_read_only"),
        "{sees}"
    );

    // Any member reads them.
    let bob = server.member("acme", "bob", "member").await;
    let mut web = WebClient::new(&server);
    web.sign_in(bob.token()).await;
    let list = web.get("/workspaces/acme/agents").await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(
        list.body.contains("href=\"/workspaces/acme/agents/bot\""),
        "{}",
        list.body
    );
    let page = web.get("/workspaces/acme/agents/bot").await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    assert!(
        body.contains("href=\"/workspaces/acme/profiles/main\""),
        "{body}"
    );
    for tool in sees["tools"].as_array().unwrap() {
        assert!(
            body.contains(&format!(
                "<td><code>{}</code></td>",
                tool["name"].as_str().unwrap()
            )),
            "{tool} missing from {body}"
        );
    }
    for d in dropped {
        let row = format!(
            "<td><code>{}</code></td><td><code>{}</code></td>",
            d["tool"].as_str().unwrap(),
            d["reason"].as_str().unwrap()
        );
        assert!(body.contains(&row), "{d} missing from {body}");
    }
    let missing = web.get("/workspaces/acme/agents/nobody").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}
