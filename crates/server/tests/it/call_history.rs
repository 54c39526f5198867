//! The calls history (`GET …/calls`): keyset pages under concurrent submissions, each
//! filter, refused filters and cursors, and summaries that carry no arguments or results.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::collections::HashSet;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);
const CALLS: &str = "/api/v1/workspaces/acme/calls";

/// Submits `tool` with `arguments` as `client` and waits for it to settle; the call.
async fn run(client: &Client, tool: &str, arguments: Value) -> Value {
    let call = client
        .post(
            &format!("{CALLS}?wait_ms=20000"),
            call_body(tool, arguments),
        )
        .await
        .ok();
    client
        .wait_call("acme", call["id"].as_str().unwrap(), WAIT)
        .await
}

/// The ids of a page's calls.
fn ids(page: &Value) -> Vec<String> {
    page["calls"]
        .as_array()
        .unwrap_or_else(|| panic!("a page: {page}"))
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Every page of `query` (`&`-joined filters, possibly empty) read `limit` at a time: the ids
/// in order, and how many pages it took.
async fn walk(client: &Client, query: &str, limit: u32) -> (Vec<String>, usize) {
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    for pages in 1.. {
        let mut path = format!("{CALLS}?limit={limit}&{query}");
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let page = client.get(&path).await.ok();
        listed.extend(ids(&page));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (listed, pages),
        }
    }
    unreachable!()
}

#[sqlx::test(migrations = "../../migrations")]
async fn paging_lists_every_call_once_while_others_are_submitted(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    // The calls stay queued: what is paged is the history, not the runner.
    hold_central_runner(&pool).await;
    let mut before = HashSet::new();
    for n in 0..45 {
        let call = server
            .owner
            .post(
                CALLS,
                call_body("echo", json!({"text": format!("before {n}")})),
            )
            .await
            .ok();
        before.insert(call["id"].as_str().unwrap().to_owned());
    }

    // Another task submits while the history is paged, a few calls per page read.
    let submitter = server.owner.clone();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let during = tokio::spawn(async move {
        let mut ids = Vec::new();
        let mut started = Some(started_tx);
        for n in 0..40 {
            let call = submitter
                .post(
                    CALLS,
                    call_body("echo", json!({"text": format!("during {n}")})),
                )
                .await
                .ok();
            ids.push(call["id"].as_str().unwrap().to_owned());
            if let Some(started) = started.take() {
                let _ = started.send(());
            }
        }
        ids
    });
    started_rx.await.expect("the submitter started");
    let (listed, pages) = walk(&server.owner, "", 4).await;
    let during: HashSet<String> = during.await.unwrap().into_iter().collect();

    let unique: HashSet<&String> = listed.iter().collect();
    assert_eq!(
        unique.len(),
        listed.len(),
        "a call listed twice: {listed:?}"
    );
    for id in &before {
        assert!(
            listed.contains(id),
            "call {id} (there before paging) never listed"
        );
    }
    for id in &listed {
        assert!(
            before.contains(id) || during.contains(id),
            "{id} is no call of this test"
        );
    }
    assert!(pages >= 45 / 4, "{pages} pages");
    // Newest first, page after page.
    let order: Vec<&String> = listed.iter().filter(|id| before.contains(*id)).collect();
    let mut by_time: Vec<(String, String)> = sqlx::query_as(
        "SELECT id::text, to_char(created_at, 'YYYY-MM-DD HH24:MI:SS.US') FROM calls",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    by_time.retain(|(id, _)| before.contains(id));
    by_time.sort_by(|a, b| (&b.1, &b.0).cmp(&(&a.1, &a.0)));
    let expected: Vec<&String> = by_time.iter().map(|(id, _)| id).collect();
    assert_eq!(order, expected, "not newest first");
    server.stop().await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn each_filter_narrows_the_history(pool: PgPool) {
    let server = TestServer::start(pool.clone()).await;
    setup_workspace(&server, "acme", &[]).await;
    let bob = server.member("acme", "bob", "member").await;
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants",
            json!({"user": "bob", "use": true}),
        )
        .await
        .ok();
    // A second connection with no calls.
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/connections",
            json!({"name": "quiet", "connector": "fixture-acme"}),
        )
        .await
        .ok();

    let first = run(&server.owner, "echo", json!({"text": "one"})).await;
    let failed = run(&server.owner, "fail", json!({"message": "no"})).await;
    let bobs = run(&bob, "echo", json!({"text": "bob's"})).await;
    let last = run(&server.owner, "echo", json!({"text": "last"})).await;
    assert_eq!(failed["state"], "tool_error", "{failed}");
    let id = |call: &Value| call["id"].as_str().unwrap().to_owned();
    let all = vec![id(&last), id(&bobs), id(&failed), id(&first)];
    let listed = |query: &'static str| {
        let owner = server.owner.clone();
        async move { walk(&owner, query, 200).await.0 }
    };

    assert_eq!(listed("").await, all);
    assert_eq!(listed("state=tool_error").await, vec![id(&failed)]);
    assert_eq!(
        listed("state=succeeded&tool=echo").await,
        vec![id(&last), id(&bobs), id(&first)]
    );
    assert_eq!(listed("tool=fail").await, vec![id(&failed)]);
    assert_eq!(listed("connection=fixture").await, all);
    assert!(listed("connection=quiet").await.is_empty());
    assert_eq!(listed("submitter=bob").await, vec![id(&bobs)]);
    let owner_id = server.owner.get("/api/v1/me").await.ok()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let by_owner = walk(&server.owner, &format!("submitter={owner_id}"), 200)
        .await
        .0;
    assert_eq!(by_owner, vec![id(&last), id(&failed), id(&first)]);
    assert_eq!(listed("placement=central").await, all);
    let elsewhere = format!("placement=device:{}", uuid::Uuid::new_v4());
    assert!(walk(&server.owner, &elsewhere, 200).await.0.is_empty());
    // A time range: from the failed call (included) to the last (excluded).
    let range = format!(
        "since={}&until={}",
        failed["created_at"].as_str().unwrap(),
        last["created_at"].as_str().unwrap()
    );
    assert_eq!(
        walk(&server.owner, &range, 200).await.0,
        vec![id(&bobs), id(&failed)]
    );
    // Filters hold across pages.
    let (paged, pages) = walk(&server.owner, "tool=echo", 1).await;
    assert_eq!((paged, pages), (vec![id(&last), id(&bobs), id(&first)], 3));

    // Bob reads only calls on profiles he holds Use on: all of them here; once his Use is
    // revoked, none, whatever the filter.
    assert_eq!(walk(&bob, "", 2).await.0, all);
    server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants/revoke",
            json!({"user": "bob", "use": true}),
        )
        .await
        .ok();
    assert!(walk(&bob, "submitter=bob", 2).await.0.is_empty());
    server.stop().await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_filter_it_cannot_take_is_refused_naming_it(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    for (query, names) in [
        ("state=finished", "`state`"),
        ("limit=0", "`limit`"),
        ("limit=201", "`limit`"),
        ("limit=many", "`limit`"),
        ("since=yesterday", "`since`"),
        ("until=2026-13-01T00:00:00Z", "`until`"),
        (
            "since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z",
            "`since`",
        ),
        ("placement=nowhere", "`placement`"),
        ("connection=nope", "`connection`"),
        ("submitter=nobody", "`submitter`"),
        ("submitter=device:12", "`submitter`"),
        ("stat=failed", "`state`"),
    ] {
        let message = server
            .owner
            .get(&format!("{CALLS}?{query}"))
            .await
            .refused(400, "invalid_filter");
        assert!(message.contains(names), "{query}: {message}");
    }
    server.stop().await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_garbled_edited_or_borrowed_cursor_is_refused(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    setup_workspace(&server, "other", &[]).await;
    for _ in 0..3 {
        run(&server.owner, "echo", json!({"text": "x"})).await;
    }
    let page = server.owner.get(&format!("{CALLS}?limit=1")).await.ok();
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    // The cursor works as given.
    server
        .owner
        .get(&format!("{CALLS}?limit=1&cursor={cursor}"))
        .await
        .ok();

    let mut edited = cursor.clone().into_bytes();
    let at = edited.len() / 2;
    edited[at] = if edited[at] == b'A' { b'B' } else { b'A' };
    let edited = String::from_utf8(edited).unwrap();
    for bad in [
        edited.as_str(),
        "garbage",
        "c1.",
        &cursor[..cursor.len() - 4],
    ] {
        let message = server
            .owner
            .get(&format!("{CALLS}?limit=1&cursor={bad}"))
            .await
            .refused(400, "invalid_cursor");
        assert!(message.contains("next_cursor"), "{message}");
    }
    // Another filter, or another workspace, than the cursor was issued for.
    server
        .owner
        .get(&format!("{CALLS}?limit=1&state=succeeded&cursor={cursor}"))
        .await
        .refused(400, "invalid_cursor");
    server
        .owner
        .get(&format!(
            "/api/v1/workspaces/other/calls?limit=1&cursor={cursor}"
        ))
        .await
        .refused(400, "invalid_cursor");
    server.stop().await;
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_summary_carries_no_arguments_or_results(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let call = run(
        &server.owner,
        "echo",
        json!({"text": "argument-and-result-7781"}),
    )
    .await;
    assert_eq!(call["state"], "succeeded", "{call}");
    let failed = run(
        &server.owner,
        "fail",
        json!({"message": "failure-text-5521"}),
    )
    .await;
    assert_eq!(failed["state"], "tool_error", "{failed}");

    let page = server.owner.get(CALLS).await.ok();
    let text = page.to_string();
    assert!(!text.contains("argument-and-result-7781"), "{page}");
    assert!(!text.contains("failure-text-5521"), "{page}");
    for summary in page["calls"].as_array().unwrap() {
        for field in ["arguments", "result", "error", "result_truncated"] {
            assert!(summary.get(field).is_none(), "{field} in {summary}");
        }
    }
    let summary = &page["calls"][1];
    assert_eq!(summary["id"], call["id"]);
    assert_eq!(summary["state"], "succeeded");
    assert_eq!(summary["tool_name"], "echo");
    assert_eq!(summary["runner"], "central");
    assert_eq!(
        summary["submitted_by"],
        server.owner.get("/api/v1/me").await.ok()["id"]
    );
    assert!(summary["finished_at"].is_string(), "{summary}");
    // The call itself, read under Use, still has both.
    let read = server
        .owner
        .get(&format!("{CALLS}/{}", call["id"].as_str().unwrap()))
        .await
        .ok();
    assert_eq!(result_text(&read), "argument-and-result-7781");
    server.stop().await;
}
