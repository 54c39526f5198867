//! The approval gate: a call that needs a person waits `awaiting_approval` where no runner
//! leases it, runs exactly once when someone with Approve says yes, never when they decline
//! or nobody answers in time or it is cancelled; retries attach to the same question; nobody
//! approves their own call, and nobody without the right approves at all. Executions are
//! counted by the fixture.

use crate::harness::*;
use serde_json::{Value, json};
use sqlx::PgPool;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// `acme` from `setup_workspace` with a count file; `approver` (member, Approve on `main`) and
/// `bob` (member, Use only); calls of `count` ask under the tool's `always` policy.
struct Gate {
    server: TestServer,
    approver: Client,
    bob: Client,
    counter: String,
    _scratch: Scratch,
}

impl Gate {
    async fn new(pool: PgPool) -> Self {
        let scratch = scratch_dir("approvals");
        let counter = scratch.path("count");
        let server = TestServer::start(pool).await;
        let Gated {
            approver,
            bob,
            policies,
        } = approval_gate(&server, &counter).await;
        assert_eq!(
            policies["policies"],
            json!([
                {"connection_id": policies["policies"][0]["connection_id"], "connection_name": "fixture", "tool": null, "policy": "default"},
                {"connection_id": policies["policies"][0]["connection_id"], "connection_name": "fixture", "tool": "count", "policy": "always"},
            ])
        );
        Self {
            server,
            approver,
            bob,
            counter,
            _scratch: scratch,
        }
    }

    /// Submits `body` as the owner; answers the call.
    async fn submit(&self, body: &Value) -> Value {
        self.server
            .owner
            .post("/api/v1/workspaces/acme/calls", body.clone())
            .await
            .ok()
    }

    /// Runs an `echo` call (default policy) to the end: the central runner is live and took
    /// everything it could lease meanwhile.
    async fn runner_drained(&self) {
        let echo = self.submit(&call_body("echo", json!({"text": "x"}))).await;
        let done = self
            .server
            .owner
            .wait_call("acme", echo["id"].as_str().unwrap(), WAIT)
            .await;
        assert_eq!(done["state"], "succeeded");
    }

    async fn answer(&self, who: &Client, call: &Value, verb: &str, body: Value) -> Answer {
        who.post(
            &format!(
                "/api/v1/workspaces/acme/approvals/{}/{verb}",
                call["id"].as_str().unwrap()
            ),
            body,
        )
        .await
    }

    async fn state_of(&self, call: &Value) -> Value {
        self.server
            .owner
            .get(&format!(
                "/api/v1/workspaces/acme/calls/{}",
                call["id"].as_str().unwrap()
            ))
            .await
            .ok()
    }
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_approved_call_runs_once_and_retries_attach_to_one_question(pool: PgPool) {
    let gate = Gate::new(pool.clone()).await;
    let body = call_body("count", json!({"label": "held"}));
    let held = gate.submit(&body).await;
    assert_eq!(held["state"], "awaiting_approval");

    // Three concurrent retries of the same request: the same call, no second question.
    let retries = (0..3).map(|_| {
        let (client, body) = (gate.server.owner.clone(), body.clone());
        tokio::spawn(async move { client.post("/api/v1/workspaces/acme/calls", body).await })
    });
    for retry in futures::future::join_all(retries).await {
        let retry = retry.unwrap();
        assert_eq!(retry.status.as_u16(), 200, "a retry creates nothing");
        assert_eq!(retry.ok()["id"], held["id"]);
    }
    let questions: i64 = sqlx::query_scalar("SELECT count(*) FROM approvals")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(questions, 1);

    // The runner leases what it may; the held call is not among it.
    gate.runner_drained().await;
    assert_eq!(gate.state_of(&held).await["state"], "awaiting_approval");
    assert_eq!(count_lines(&gate.counter), 0, "ran before it was approved");

    // The question shows what is asked, bound to the exact arguments.
    let listed = gate
        .approver
        .get("/api/v1/workspaces/acme/approvals")
        .await
        .ok();
    assert_eq!(listed["approvals"].as_array().unwrap().len(), 1);
    let shown = gate
        .approver
        .get(&format!(
            "/api/v1/workspaces/acme/approvals/{}",
            held["id"].as_str().unwrap()
        ))
        .await
        .ok();
    assert_eq!(shown["tool_name"], "count");
    assert_eq!(shown["connection_name"], "fixture");
    assert_eq!(shown["arguments"], json!({"label": "held"}));
    assert_eq!(shown["asked_by_name"], "owner");
    assert_eq!(
        (shown["why"].as_str(), shown["policy"].as_str()),
        (Some("always"), Some("always"))
    );
    assert_eq!(shown["state"], "pending");
    assert_eq!(shown["payload_digest"].as_str().unwrap().len(), 64);

    let approved = gate
        .answer(&gate.approver, &held, "approve", json!({}))
        .await
        .ok();
    assert_eq!(approved["state"], "approved");
    assert_eq!(approved["decided_by_name"], "approver");
    let done = gate
        .server
        .owner
        .wait_call("acme", held["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(count_lines(&gate.counter), 1);

    // A second answer changes nothing; a retry now reads the finished call.
    gate.answer(&gate.approver, &held, "approve", json!({}))
        .await
        .refused(409, "approval_decided");
    let again = gate
        .server
        .owner
        .post("/api/v1/workspaces/acme/calls", body)
        .await;
    assert_eq!(again.ok()["state"], "succeeded");
    assert_eq!(count_lines(&gate.counter), 1, "ran more than once");
}

#[sqlx::test(migrations = "../../migrations")]
async fn only_someone_else_holding_approve_may_answer(pool: PgPool) {
    let gate = Gate::new(pool.clone()).await;
    let held = gate
        .submit(&call_body("count", json!({"label": "mine"})))
        .await;
    assert_eq!(held["state"], "awaiting_approval");

    // The submitter holds Approve, but never on their own call.
    let message = gate
        .answer(&gate.server.owner, &held, "approve", json!({}))
        .await
        .refused(403, "self_approval");
    assert!(message.contains("someone else"), "{message}");
    // Use is not Approve.
    let message = gate
        .answer(&gate.bob, &held, "approve", json!({}))
        .await
        .refused(403, "forbidden");
    assert!(message.contains("--approve"), "{message}");
    // Not a member: nothing to see.
    let nora = gate.server.user("nora").await;
    gate.answer(&nora, &held, "approve", json!({}))
        .await
        .refused(404, "workspace_not_found");
    // A member with no grant on the profile cannot even read the question.
    let carol = gate.server.user("carol").await;
    gate.server
        .owner
        .post(
            "/api/v1/workspaces/acme/members",
            json!({"user": "carol", "role": "member"}),
        )
        .await
        .ok();
    gate.answer(&carol, &held, "decline", json!({}))
        .await
        .refused(404, "approval_not_found");
    // Revoked Approve is gone at once.
    gate.server
        .owner
        .post(
            "/api/v1/workspaces/acme/profiles/main/grants/revoke",
            json!({"user": "approver", "approve": true}),
        )
        .await
        .ok();
    gate.answer(&gate.approver, &held, "approve", json!({}))
        .await
        .refused(404, "approval_not_found");

    gate.runner_drained().await;
    assert_eq!(gate.state_of(&held).await["state"], "awaiting_approval");
    assert_eq!(count_lines(&gate.counter), 0);
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_declined_call_never_runs_and_its_caller_reads_the_reason(pool: PgPool) {
    let gate = Gate::new(pool.clone()).await;
    let held = gate
        .submit(&call_body("count", json!({"label": "no"})))
        .await;
    let declined = gate
        .answer(
            &gate.approver,
            &held,
            "decline",
            json!({"reason": "not during the freeze"}),
        )
        .await
        .ok();
    assert_eq!(declined["state"], "declined");
    assert_eq!(declined["reason"], "not during the freeze");
    let call = gate
        .server
        .owner
        .wait_call("acme", held["id"].as_str().unwrap(), WAIT)
        .await;
    assert_eq!(call["state"], "declined");
    assert_eq!(result_text(&call), "not during the freeze");
    assert_eq!(call["error"]["code"], "approval_declined", "{call}");

    gate.runner_drained().await;
    assert_eq!(count_lines(&gate.counter), 0, "a declined call ran");
    gate.answer(&gate.approver, &held, "approve", json!({}))
        .await
        .refused(409, "approval_decided");

    // The answer is in the audit log, by whom and why; so is the classification it rests on.
    let log = gate
        .server
        .owner
        .get("/api/v1/workspaces/acme/audit")
        .await
        .ok();
    let log = log.as_array().unwrap();
    let answer = log
        .iter()
        .find(|e| e["action"] == "approval.declined")
        .unwrap_or_else(|| panic!("no approval.declined entry in {log:?}"));
    assert_eq!(answer["actor"]["name"], "approver");
    assert_eq!(answer["object"]["id"], held["id"]);
    assert_eq!(answer["after"]["reason"], "not during the freeze");
    assert!(
        log.iter()
            .any(|e| e["action"] == "tool.classified" && e["object"]["name"] == "count"),
        "no tool.classified entry for `count` in {log:?}"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn a_cancelled_held_call_never_runs_and_its_question_is_closed(pool: PgPool) {
    let gate = Gate::new(pool.clone()).await;
    let body = call_body("count", json!({"label": "changed my mind"}));
    let held = gate.submit(&body).await;
    assert_eq!(held["state"], "awaiting_approval");
    let id = held["id"].as_str().unwrap().to_owned();

    // A reader waiting on the call is answered once it is cancelled (woken: well before its
    // wait of a minute would end).
    let waiter = {
        let owner = gate.server.owner.clone();
        let path = format!("/api/v1/workspaces/acme/calls/{id}?wait_ms=60000");
        tokio::spawn(async move { owner.get(&path).await.ok() })
    };
    let cancelled = gate
        .server
        .owner
        .post(
            &format!("/api/v1/workspaces/acme/calls/{id}/cancel"),
            json!({}),
        )
        .await
        .ok();
    assert_eq!(cancelled["outcome"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["call"]["state"], "cancelled");
    assert_eq!(cancelled["call"]["error"]["code"], "cancelled");
    let woken = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiting reader was not woken")
        .unwrap();
    assert_eq!(woken["state"], "cancelled");
    // Closing the question is an approval decision the log names, with who made it.
    let log = gate
        .server
        .owner
        .get("/api/v1/workspaces/acme/audit")
        .await
        .ok();
    let entry = log
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "approval.cancelled")
        .unwrap_or_else(|| panic!("no approval.cancelled entry in {log}"));
    assert_eq!(entry["actor"]["name"], "owner", "{entry}");
    assert_eq!(entry["object"]["id"], id.as_str(), "{entry}");

    // The question is closed: no longer pending, and answering it is refused.
    let listed = gate
        .approver
        .get("/api/v1/workspaces/acme/approvals")
        .await
        .ok();
    let states: Vec<&str> = listed["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["cancelled"]);
    let message = gate
        .answer(&gate.approver, &held, "approve", json!({}))
        .await
        .refused(409, "approval_decided");
    assert!(message.contains("cancelled"), "{message}");

    // A retry of its request_id reads the cancelled call; cancelling again changes nothing.
    let again = gate.submit(&body).await;
    assert_eq!(
        (again["id"].as_str(), again["state"].as_str()),
        (Some(id.as_str()), Some("cancelled"))
    );
    let twice = gate
        .server
        .owner
        .post(
            &format!("/api/v1/workspaces/acme/calls/{id}/cancel"),
            json!({}),
        )
        .await
        .ok();
    assert_eq!(twice["outcome"], "already_finished");
    gate.runner_drained().await;
    assert_eq!(count_lines(&gate.counter), 0, "a cancelled call ran");
}

/// An approval and a cancel sent at once: exactly one of them closes the question, the other
/// is told so, and the call runs only when the approval won (and the cancel came too late to
/// stop it).
#[sqlx::test(migrations = "../../migrations")]
async fn an_approval_racing_a_cancel_closes_the_question_once(pool: PgPool) {
    let gate = Gate::new(pool.clone()).await;
    let mut approvals_won = 0;
    for round in 0..6 {
        let held = gate
            .submit(&call_body(
                "count",
                json!({"label": format!("race {round}")}),
            ))
            .await;
        let id = held["id"].as_str().unwrap().to_owned();
        let cancel_path = format!("/api/v1/workspaces/acme/calls/{id}/cancel");
        let (approved, cancelled) = tokio::join!(
            gate.answer(&gate.approver, &held, "approve", json!({})),
            gate.server.owner.post(&cancel_path, json!({})),
        );
        let cancelled = cancelled.ok();
        let question = gate
            .approver
            .get(&format!("/api/v1/workspaces/acme/approvals/{id}"))
            .await
            .ok();
        if approved.status.is_success() {
            approvals_won += 1;
            assert_eq!(question["state"], "approved", "{question}");
        } else {
            assert_eq!(approved.code(), "approval_decided", "{:?}", approved.body);
            assert_eq!(question["state"], "cancelled", "{question}");
            assert_eq!(cancelled["outcome"], "cancelled", "{cancelled}");
        }
        let done = gate.server.owner.wait_call("acme", &id, WAIT).await;
        assert!(
            ["succeeded", "cancelled"].contains(&done["state"].as_str().unwrap()),
            "{done}"
        );
    }
    gate.runner_drained().await;
    assert!(
        count_lines(&gate.counter) <= approvals_won,
        "a call ran that no approval let through"
    );
}

#[sqlx::test(migrations = "../../migrations")]
async fn an_unanswered_call_expires_after_the_workspace_timeout(pool: PgPool) {
    let gate = Gate::new(pool.clone()).await;
    // Only admins set it; none is a valid choice.
    gate.bob
        .send(
            reqwest::Method::PUT,
            "/api/v1/workspaces/acme/approval-timeout",
            Some(json!({"seconds": 1})),
        )
        .await
        .refused(403, "forbidden");
    let timeout = gate
        .server
        .owner
        .send(
            reqwest::Method::PUT,
            "/api/v1/workspaces/acme/approval-timeout",
            Some(json!({"seconds": 1})),
        )
        .await
        .ok();
    assert_eq!(timeout, json!({"seconds": 1}));

    let held = gate
        .submit(&call_body("count", json!({"label": "late"})))
        .await;
    assert_eq!(held["state"], "awaiting_approval");
    let call = gate
        .server
        .owner
        .wait_call_until("acme", held["id"].as_str().unwrap(), WAIT, |c| {
            c["state"] != "awaiting_approval"
        })
        .await;
    assert_eq!(call["state"], "expired", "{call}");
    assert_eq!(call["error"]["code"], "approval_expired");
    gate.answer(&gate.approver, &held, "approve", json!({}))
        .await
        .refused(409, "approval_decided");
    gate.runner_drained().await;
    assert_eq!(count_lines(&gate.counter), 0, "an expired call ran");
    // The expiry is in the audit log, by the system, committed with it.
    let log = gate
        .server
        .owner
        .get("/api/v1/workspaces/acme/audit")
        .await
        .ok();
    let log = log.as_array().unwrap();
    let expiry = log
        .iter()
        .find(|e| e["action"] == "approval.expired")
        .unwrap_or_else(|| panic!("no approval.expired entry in {log:?}"));
    assert_eq!(
        (
            expiry["actor"]["kind"].as_str(),
            expiry["actor"]["name"].as_str()
        ),
        (Some("system"), Some("switchyard"))
    );
    assert_eq!(expiry["object"]["id"], held["id"]);
    assert_eq!(expiry["after"]["state"], "expired");

    // No expiry: a question waits.
    let none = gate
        .server
        .owner
        .send(
            reqwest::Method::PUT,
            "/api/v1/workspaces/acme/approval-timeout",
            Some(json!({"seconds": null})),
        )
        .await
        .ok();
    assert_eq!(none, json!({"seconds": null}));
}
