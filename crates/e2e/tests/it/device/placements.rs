//! A device owner decides what runs on the device, end to end: a workspace admin places a
//! connection on a member's device, the member accepts it with the `switchyard` CLI, the real
//! runner runs it; the admin repoints the connector while a call waits, and the runner refuses
//! that call `spec_changed` before anything starts (the fixture's count ledger proves it).

use super::harness::{DEADLINE, Runner, Server, WORKSPACE, scratch};
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::path::Path;
use std::process::Command;
use switchyard_protocol::RequestId;
use switchyard_protocol::api::{ConnectorSpec, SubmitCall};
use switchyard_testkit::api::{Answer, Api};
use switchyard_testkit::bins;
use switchyard_testkit::poll::{Bound, Check};
use switchyard_testkit::{pairing, setup};

/// The fixture over stdio, recording each `count` in the ledger `count_file`.
fn counting(count_file: &Path) -> ConnectorSpec {
    setup::stdio(
        &crate::harness::binary(bins::FIXTURE).display().to_string(),
        &[
            "stdio".to_owned(),
            "--count-file".to_owned(),
            count_file.display().to_string(),
        ],
    )
}

/// Lines in a count ledger: real executions of `count`.
fn executions(count_file: &Path) -> usize {
    std::fs::read_to_string(count_file)
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

/// Submits `count` on `dfx` under profile `dev` as `api`; any answer.
async fn submit(api: &Api) -> Answer {
    api.try_post(
        &format!("/workspaces/{WORKSPACE}/calls"),
        &SubmitCall {
            request_id: RequestId::new(),
            profile_id: "dev".to_owned(),
            connection_id: "dfx".to_owned(),
            tool_name: "count".to_owned(),
            arguments: json!({}),
            environment_id: None,
            client_session_id: None,
            timeout_seconds: Some(30),
            operation_id: None,
        },
    )
    .await
    .expect("submit")
}

#[track_caller]
fn refused(answer: &Answer, status: u16, code: &str) {
    assert_eq!(
        (answer.status, answer.body["error"]["code"].as_str()),
        (status, Some(code)),
        "{}",
        answer.body
    );
}

/// Polls call `id` until it is no longer queued, leased or running; returns it.
async fn settled(api: &Api, id: &str) -> Value {
    Bound::new(DEADLINE, std::time::Duration::from_millis(100))
        .until(async || {
            let view = api
                .get(&format!("/workspaces/{WORKSPACE}/calls/{id}"))
                .await?;
            Ok(match view["state"].as_str() {
                Some("queued" | "leased" | "running") => {
                    Check::NotYet(format!("call {id} did not settle: {view}"))
                }
                _ => Check::Done(view),
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `switchyard ARGS` as the user with `token`; exit code, stdout and stderr.
fn cli(server: &Server, token: &str, config: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(crate::harness::binary(bins::CLI))
        .args(args)
        .env_remove("SWITCHYARD_DEVICE_PROFILE")
        .env("SWITCHYARD_URL", server.url())
        .env("SWITCHYARD_TOKEN", token)
        .env("SWITCHYARD_CONFIG_DIR", config)
        .env("SWITCHYARD_DEVICE_KEYRING", "off")
        .output()
        .expect("run switchyard");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text)
}

#[sqlx::test(migrations = false)]
async fn a_device_runs_what_its_owner_accepted_and_refuses_a_spec_changed_since(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let dir = scratch("placements");
    let (ledger, repointed) = (dir.join("count"), dir.join("count-repointed"));
    let alice = server.api();
    let bob_token = server.create_user("bob").await;
    let bob = alice.with_token(Some(&bob_token));

    // Alice, workspace admin and installation owner; bob, a member who pairs his device.
    setup::workspace(&alice, WORKSPACE)
        .await
        .expect("workspace");
    alice
        .post(
            &format!("/workspaces/{WORKSPACE}/members"),
            &json!({"user": "bob"}),
        )
        .await
        .expect("add bob");
    setup::profile(&alice, WORKSPACE, "main", &[], "bob")
        .await
        .expect("profile main, Use for bob");
    let paired = pairing::pair(&bob, WORKSPACE, "bobs-box", "main")
        .await
        .expect("bob pairs his device");
    let config = dir.join("config");
    pairing::save_identity(&config, server.url(), &paired).expect("save the identity");

    // Alice places a connection on bob's device and gives herself Use on it.
    setup::approved_connector(&alice, "counter", counting(&ledger))
        .await
        .expect("connector");
    setup::connection(&alice, WORKSPACE, "dfx", "counter", Some(paired.device_id))
        .await
        .expect("place on bob's device");
    setup::profile(&alice, WORKSPACE, "dev", &["dfx"], "alice")
        .await
        .expect("profile dev");
    let mut runner = Runner::start(&config, &dir.join("outbox"), &dir.join("runner.log"), &[]);
    runner.wait_for_log("lease epoch").await;

    // Pending: refused, nothing queued, nothing ran.
    refused(&submit(&alice).await, 409, "placement_pending");
    let calls = alice
        .get(&format!("/workspaces/{WORKSPACE}/calls"))
        .await
        .expect("list calls");
    assert_eq!(calls["calls"].as_array().map(Vec::len), Some(0), "{calls}");

    // Alice may not accept for bob; bob accepts with the CLI, by names.
    let (code, text) = cli(
        &server,
        server.token(),
        &config,
        &["device", "accept", WORKSPACE, "bobs-box", "dfx"],
    );
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("only the owner of a device"), "{text}");
    let (code, text) = cli(
        &server,
        &bob_token,
        &config,
        &["device", "placements", WORKSPACE],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("pending") && text.contains(&ledger.display().to_string()),
        "{text}"
    );
    let (code, text) = cli(
        &server,
        &bob_token,
        &config,
        &["device", "accept", WORKSPACE, "bobs-box", "dfx"],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("accepted connection dfx on device bobs-box"),
        "{text}"
    );
    // Accepted: the device's runner lists its tools, and alice classifies them.
    setup::discover_classified(&alice, WORKSPACE, "dfx")
        .await
        .expect("discover dfx on bob's device and classify its tools");

    let ran = submit(&alice).await.successful("submit").expect("accepted");
    let done = settled(&alice, ran.body["id"].as_str().unwrap()).await;
    assert_eq!(done["state"], "succeeded", "{done}\n{}", runner.log_text());
    assert_eq!(executions(&ledger), 1);

    // A call waits while the runner is stopped; alice repoints the connector meanwhile. The
    // server took the call under bob's consent and cannot take it back: the runner must refuse.
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
    let waiting = submit(&alice).await.successful("submit").expect("accepted");
    setup::edit_connector(&alice, "counter", counting(&repointed))
        .await
        .expect("repoint the connector");
    let mut runner = Runner::start(&config, &dir.join("outbox"), &dir.join("runner-2.log"), &[]);
    let refused_call = settled(&alice, waiting.body["id"].as_str().unwrap()).await;
    assert_eq!(
        (
            refused_call["state"].as_str(),
            refused_call["error"]["code"].as_str()
        ),
        (Some("failed"), Some("spec_changed")),
        "{refused_call}\n{}",
        runner.log_text()
    );
    assert_eq!(executions(&ledger), 1, "the old target did not run again");
    assert_eq!(executions(&repointed), 0, "the new target never ran");
    assert!(
        !runner.log_text().contains("MCP session started"),
        "nothing was started: {}",
        runner.log_text()
    );

    // New calls are refused until bob accepts the new spec; then they run there.
    refused(&submit(&alice).await, 409, "spec_changed");
    setup::accept_placement(&bob, WORKSPACE, paired.device_id, "dfx")
        .await
        .expect("bob accepts the new spec");
    let ran = submit(&alice).await.successful("submit").expect("accepted");
    let done = settled(&alice, ran.body["id"].as_str().unwrap()).await;
    assert_eq!(done["state"], "succeeded", "{done}\n{}", runner.log_text());
    assert_eq!(executions(&repointed), 1);
    runner.signal(Signal::SIGTERM);
    assert_eq!(runner.wait_exit().await, Some(0), "{}", runner.log_text());
}
