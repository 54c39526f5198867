//! `/metrics`, scraped as Prometheus would from its own listener: the series an operator
//! reads after running calls (central, held for approval, on a device), parsed from the text
//! format, and the bound on their number.

use crate::devices::*;
use crate::harness::*;
use serde_json::json;
use sqlx::PgPool;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use switchyard_testkit::poll::{Bound, Check};
use uuid::Uuid;

const CALLS: &str = "/api/v1/workspaces/acme/calls";

/// One sample: its series (name and labels) and value.
type Sample = ((String, BTreeMap<String, String>), f64);

/// A scrape, parsed.
struct Scrape {
    text: String,
    samples: Vec<Sample>,
}

impl Scrape {
    /// The value of the series `name` whose labels are exactly `labels`, if it is there.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.samples
            .iter()
            .find(|((n, l), _)| n == name && *l == want)
            .map(|(_, v)| *v)
    }

    /// [`Scrape::get`], which must be there.
    #[track_caller]
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{}", self.text))
    }

    /// Every series (name and labels), without values.
    fn series(&self) -> BTreeSet<(String, BTreeMap<String, String>)> {
        self.samples
            .iter()
            .map(|(series, _)| series.clone())
            .collect()
    }
}

/// Parses the text format: `name{k="v",…} value` lines; comments skipped.
#[track_caller]
fn parse(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line.rsplit_once(' ').expect("a sample line has a value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value: {line}"));
        let (name, labels) = match series.split_once('{') {
            None => (series.to_owned(), BTreeMap::new()),
            Some((name, rest)) => {
                let rest = rest.strip_suffix('}').expect("labels close");
                (name.to_owned(), parse_labels(rest))
            }
        };
        samples.push(((name, labels), value));
    }
    samples
}

/// `k="v",k2="v2"`, with `\"`, `\\` and `\n` escapes in values.
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = text.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            return labels;
        }
        assert_eq!(chars.next(), Some('"'), "label {key} is quoted");
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => break,
                },
                '"' => break,
                c => value.push(c),
            }
        }
        labels.insert(key, value);
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
}

/// Scrapes the server's `/metrics`; checks the answer is the text format.
async fn scrape(server: &TestServer) -> Scrape {
    let answer = reqwest::get(server.metrics_url()).await.expect("scrape");
    assert_eq!(answer.status().as_u16(), 200);
    let content_type = answer.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let text = answer.text().await.unwrap();
    Scrape {
        samples: parse(&text),
        text,
    }
}

/// Submits a call as `who` and waits for it to settle.
async fn run(
    server: &TestServer,
    who: &Client,
    tool: &str,
    arguments: serde_json::Value,
) -> String {
    let call = who.post(CALLS, call_body(tool, arguments)).await.ok();
    let id = call["id"].as_str().unwrap().to_owned();
    let done = server
        .owner
        .wait_call("acme", &id, Duration::from_secs(30))
        .await;
    done["state"].as_str().unwrap().to_owned()
}

#[sqlx::test(migrations = "../../migrations")]
async fn central_calls_are_counted_by_state_and_timed_by_connection_and_tool(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    for i in 0..3 {
        let state = run(
            &server,
            &server.owner,
            "echo",
            json!({"text": format!("hi {i}")}),
        )
        .await;
        assert_eq!(state, "succeeded");
    }
    assert_eq!(
        run(&server, &server.owner, "fail", json!({})).await,
        "tool_error"
    );

    let m = scrape(&server).await;
    let queued = [("admission", "queued")];
    assert_eq!(m.value("switchyard_calls_submitted_total", &queued), 4.0);
    let finished = "switchyard_calls_finished_total";
    assert_eq!(m.value(finished, &[("state", "succeeded")]), 3.0);
    assert_eq!(m.value(finished, &[("state", "tool_error")]), 1.0);
    // The MCP conventions' operation duration, by method, connection (namespace) and tool;
    // `error_type` only on failed operations.
    let echo = [
        ("mcp_method_name", "tools/call"),
        ("connection", "fixture"),
        ("gen_ai_tool_name", "echo"),
    ];
    let duration = "mcp_server_operation_duration_seconds";
    assert_eq!(m.value(&format!("{duration}_count"), &echo), 3.0);
    let sum = m.value(&format!("{duration}_sum"), &echo);
    assert!(sum > 0.0 && sum < 30.0, "{sum}");
    let mut inf = echo.to_vec();
    inf.push(("le", "+Inf"));
    assert_eq!(m.value(&format!("{duration}_bucket"), &inf), 3.0);
    let fail = [
        ("mcp_method_name", "tools/call"),
        ("connection", "fixture"),
        ("gen_ai_tool_name", "fail"),
        ("error_type", "tool_error"),
    ];
    assert_eq!(m.value(&format!("{duration}_count"), &fail), 1.0);
    // Every call waited for its lease; none is left in the queue or running.
    let central = [("placement", "central")];
    assert_eq!(
        m.value("switchyard_call_lease_wait_seconds_count", &central),
        4.0
    );
    for state in ["awaiting_approval", "queued", "leased", "running"] {
        let labels = [("state", state), ("placement", "central")];
        assert_eq!(m.value("switchyard_calls", &labels), 0.0, "{state}");
        assert_eq!(m.value("switchyard_calls_oldest_age_seconds", &labels), 0.0);
    }
    assert!(
        m.text
            .contains("# TYPE mcp_server_operation_duration_seconds histogram")
    );
    assert!(m.text.contains("# HELP switchyard_calls_finished_total "));
}

/// A hundred calls with distinct request ids, arguments and two submitters add no series:
/// only counts change. No argument reaches the text.
#[sqlx::test(migrations = "../../migrations")]
async fn distinct_calls_add_no_series(pool: PgPool) {
    let server = TestServer::start(pool).await;
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
    for who in [&server.owner, &bob] {
        assert_eq!(
            run(&server, who, "echo", json!({"text": "warm"})).await,
            "succeeded"
        );
    }
    let before = scrape(&server).await;

    let secrets: Vec<String> = (0..100).map(|_| Uuid::new_v4().to_string()).collect();
    let runs = secrets.iter().enumerate().map(|(i, secret)| {
        let who = if i % 2 == 0 { &server.owner } else { &bob };
        run(&server, who, "echo", json!({"text": secret}))
    });
    for state in futures::future::join_all(runs).await {
        assert_eq!(state, "succeeded");
    }

    let after = scrape(&server).await;
    assert_eq!(before.series(), after.series(), "{}", after.text);
    let succeeded = [("state", "succeeded")];
    assert_eq!(
        after.value("switchyard_calls_finished_total", &succeeded),
        102.0
    );
    for secret in &secrets {
        assert!(
            !after.text.contains(secret.as_str()),
            "an argument in the metrics"
        );
    }
}

#[sqlx::test(migrations = "../../migrations")]
async fn held_calls_and_the_approval_wait_are_measured(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let scratch = scratch_dir("metrics-approval");
    let gate = approval_gate(&server, &scratch.path("count")).await;
    let held = server
        .owner
        .post(CALLS, call_body("count", json!({"label": "x"})))
        .await
        .ok();
    assert_eq!(held["state"], "awaiting_approval");

    let m = scrape(&server).await;
    let waiting = [("state", "awaiting_approval"), ("placement", "central")];
    assert_eq!(m.value("switchyard_calls", &waiting), 1.0);
    let age = m.value("switchyard_calls_oldest_age_seconds", &waiting);
    assert!((0.0..60.0).contains(&age), "{age}");
    let admission = [("admission", "awaiting_approval")];
    assert_eq!(m.value("switchyard_calls_submitted_total", &admission), 1.0);

    let id = held["id"].as_str().unwrap();
    gate.approver
        .post(
            &format!("/api/v1/workspaces/acme/approvals/{id}/approve"),
            json!({}),
        )
        .await
        .ok();
    let done = server
        .owner
        .wait_call("acme", id, Duration::from_secs(30))
        .await;
    assert_eq!(done["state"], "succeeded");

    let m = scrape(&server).await;
    assert_eq!(m.value("switchyard_calls", &waiting), 0.0);
    let approved = [("decision", "approved")];
    assert_eq!(
        m.value("switchyard_approval_wait_seconds_count", &approved),
        1.0
    );
    let declined = [("decision", "declined")];
    assert_eq!(
        m.value("switchyard_approval_wait_seconds_count", &declined),
        0.0
    );
}

/// The test acts as the device runner: its poll and the outbox depth its heartbeat reports
/// show per device; its call is timed like a central one.
#[sqlx::test(migrations = "../../migrations")]
async fn a_device_runner_reports_its_outbox_and_is_seen_polling(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let device =
        setup_device_connection(&server, &scratch_dir("metrics-device").path("count")).await;
    let call = server
        .owner
        .post(CALLS, device_call_body("count", json!({"label": "x"})))
        .await
        .ok();
    let call = call["id"].as_str().unwrap().to_owned();
    let epoch = acquire_lease(&device, Uuid::new_v4()).await;
    device
        .client
        .post(
            "/api/v1/runner/heartbeat",
            json!({"epoch": epoch, "active": [], "outbox": 3}),
        )
        .await
        .ok();
    let leased = device
        .client
        .post(
            "/api/v1/runner/lease",
            json!({"epoch": epoch, "max": 8, "wait_ms": 20_000}),
        )
        .await
        .ok();
    assert_eq!(leased["calls"][0]["call_id"], call.as_str());
    let start = device
        .client
        .post(
            &format!("/api/v1/runner/calls/{call}/start"),
            json!({"epoch": epoch}),
        )
        .await
        .ok();
    assert_eq!(start["decision"], "proceed");
    let receipt = json!({
        "receipt_id": Uuid::new_v4(),
        "epoch": epoch,
        "completion": {"outcome": "succeeded", "result": {"content": [{"type": "text", "text": "counted x"}], "isError": false}},
    });
    let answer = device
        .client
        .post(&format!("/api/v1/runner/calls/{call}/complete"), receipt)
        .await
        .ok();
    assert_eq!(answer["status"], "recorded");

    let m = scrape(&server).await;
    let this = [("device", device.id.as_str())];
    assert_eq!(m.value("switchyard_device_outbox_receipts", &this), 3.0);
    let lag = m.value("switchyard_device_poll_lag_seconds", &this);
    assert!((0.0..60.0).contains(&lag), "{lag}");
    let count = [
        ("mcp_method_name", "tools/call"),
        ("connection", "local"),
        ("gen_ai_tool_name", "count"),
    ];
    assert_eq!(
        m.value("mcp_server_operation_duration_seconds_count", &count),
        1.0
    );
    let device_wait = [("placement", "device")];
    assert!(m.value("switchyard_call_lease_wait_seconds_count", &device_wait) >= 1.0);
    // The last sight is written by the liveness flusher, shortly after.
    let seen = Bound::new(Duration::from_secs(10), Duration::from_millis(50))
        .until(async || {
            let m = scrape(&server).await;
            Ok(
                match m.get("switchyard_device_last_seen_timestamp_seconds", &this) {
                    Some(at) => Check::Done(at),
                    None => Check::NotYet(format!("no last sight yet:\n{}", m.text)),
                },
            )
        })
        .await
        .expect("the device's last sight is reported");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - seen).abs() < 120.0, "{seen} vs {now}");
}

/// `/metrics` is served on its own listener only: the API's listener does not answer it, and
/// the metrics listener serves nothing else.
#[sqlx::test(migrations = "../../migrations")]
async fn metrics_have_a_listener_of_their_own(pool: PgPool) {
    let server = TestServer::start(pool).await;
    let on_api = reqwest::get(format!("http://{}/metrics", server.addr))
        .await
        .unwrap();
    assert_eq!(on_api.status().as_u16(), 404);
    let api_on_metrics = server.metrics_url().replace("/metrics", "/api/v1/me");
    let answer = reqwest::get(api_on_metrics).await.unwrap();
    assert_eq!(answer.status().as_u16(), 404);
    scrape(&server).await;
}

/// Queue depth while no runner takes the call, then its cancel, counted by its end state.
#[sqlx::test(migrations = "../../migrations")]
async fn a_queued_call_is_in_the_queue_gauge_and_its_cancel_is_counted(pool: PgPool) {
    hold_central_runner(&pool).await;
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let call = server
        .owner
        .post(CALLS, call_body("echo", json!({"text": "x"})))
        .await
        .ok();
    let queued = [("state", "queued"), ("placement", "central")];
    let m = scrape(&server).await;
    assert_eq!(m.value("switchyard_calls", &queued), 1.0);
    let age = m.value("switchyard_calls_oldest_age_seconds", &queued);
    assert!((0.0..60.0).contains(&age), "{age}");

    let id = call["id"].as_str().unwrap();
    let cancel = format!("{CALLS}/{id}/cancel");
    server.owner.post(&cancel, json!({})).await.ok();
    let m = scrape(&server).await;
    assert_eq!(m.value("switchyard_calls", &queued), 0.0);
    let finished = "switchyard_calls_finished_total";
    assert_eq!(m.value(finished, &[("state", "cancelled")]), 1.0);
    assert_eq!(m.value(finished, &[("state", "succeeded")]), 0.0);
}

/// A call cut mid-way ends `unknown` (its duration has `error_type="unknown"`); a person's
/// resolution settles it, counted by how and with what outcome.
#[sqlx::test(migrations = "../../migrations")]
async fn an_unknown_call_and_its_resolution_are_counted(pool: PgPool) {
    let server = TestServer::start(pool).await;
    setup_workspace(&server, "acme", &[]).await;
    let policy = json!({"capture_managed_tool_results": true});
    server
        .owner
        .put("/api/v1/workspaces/acme/capture-policy", policy)
        .await
        .ok();
    let evidence = crate::reconcile::published_evidence(&server, "acme", "not charged").await;
    let call = server
        .owner
        .post(CALLS, call_body("crash", json!({})))
        .await
        .ok();
    let id = call["id"].as_str().unwrap();
    let crashed = server
        .owner
        .wait_call("acme", id, Duration::from_secs(30))
        .await;
    assert_eq!(crashed["state"], "unknown");
    let m = scrape(&server).await;
    let finished = "switchyard_calls_finished_total";
    assert_eq!(m.value(finished, &[("state", "unknown")]), 1.0);
    let crash = [
        ("mcp_method_name", "tools/call"),
        ("connection", "fixture"),
        ("gen_ai_tool_name", "crash"),
        ("error_type", "unknown"),
    ];
    assert_eq!(
        m.value("mcp_server_operation_duration_seconds_count", &crash),
        1.0
    );
    let settled = "switchyard_unknown_settled_total";
    let by_resolution = [("by", "resolution"), ("outcome", "not_applied")];
    assert_eq!(m.value(settled, &by_resolution), 0.0);

    let body = json!({"request_id": Uuid::new_v4(), "outcome": "not_applied",
        "source_version_id": evidence, "explanation": "no charge in the ledger"});
    server
        .owner
        .post(&format!("{CALLS}/{id}/resolve"), body)
        .await
        .ok();
    let m = scrape(&server).await;
    assert_eq!(m.value(settled, &by_resolution), 1.0);
    assert_eq!(
        m.value(settled, &[("by", "lookup"), ("outcome", "not_applied")]),
        0.0
    );
}
