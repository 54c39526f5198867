//! The core chaos cases, each once, with deterministic assertions: a device runner SIGKILLed
//! mid-call, a server replica restarted under load, and PostgreSQL backends killed under a
//! device's long-poll. `scripts/chaos.sh` repeats these (and more) with random timing.

use super::harness::stack;
use nix::sys::signal::Signal;
use serde_json::json;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::time::{Duration, Instant};
use switchyard_bench::chaos::cases::kill_backends;
use switchyard_bench::chaos::invariants::{self, executions};
use switchyard_bench::chaos::workload;
use switchyard_bench::stack::{Device, Stack};
use switchyard_bench::stack::{read_call, submit, wait_settled};
use switchyard_protocol::CallState;
use switchyard_protocol::api::CallView;
use switchyard_testkit::api::Api;
use switchyard_testkit::poll::{Bound, Check};

const DEADLINE: Duration = Duration::from_secs(60);

/// Polls a call until `done` holds, within the deadline.
async fn wait_until(api: &Api, id: &str, what: &str, done: impl Fn(&CallView) -> bool) -> CallView {
    Bound::new(DEADLINE, Duration::from_millis(50))
        .until(async || {
            let call = read_call(api, id).await.expect("read the call");
            Ok(if done(&call) {
                Check::Done(call)
            } else {
                Check::NotYet(format!("call {id} did not become {what}: {call:?}"))
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// How many `tools/call` requests for `request_id` the MCP server behind `stdin_copy` received.
fn requests_received(stdin_copy: &std::path::Path, request_id: &str) -> usize {
    std::fs::read_to_string(stdin_copy)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains("\"tools/call\"") && line.contains(request_id))
        .count()
}

/// Pairs a device whose connection runs the fixture behind `tee`, so the test sees every
/// request its MCP server received: the device, and the file that copies the server's stdin.
async fn teed_device(stack: &Stack) -> (Device, std::path::PathBuf) {
    // The device's MCP server behind `tee`, so the test sees every request it received.
    let stdin_copy = stack.dir.join("mcp-stdin");
    let fixture = stack.bins.fixture.display().to_string();
    let script = r#"tee -a "$1" | "$2" stdio --count-file "$3""#;
    let args = [
        script,
        "sh",
        &stdin_copy.display().to_string(),
        &fixture,
        &stack.count_file.display().to_string(),
    ];
    stack
        .connector(
            "teed",
            "sh",
            &std::iter::once("-c")
                .chain(args)
                .map(str::to_owned)
                .collect::<Vec<_>>(),
        )
        .await
        .expect("connector");
    let device = stack
        .pair_device_on("edge", &stack.url(0), "teed")
        .await
        .expect("pair");
    (device, stdin_copy)
}

/// Waits, within the deadline, until the MCP server behind `tee` has received `request_id`.
async fn wait_received(stdin_copy: &std::path::Path, request_id: &str) {
    let started = Instant::now();
    while requests_received(stdin_copy, request_id) == 0 {
        assert!(
            started.elapsed() < DEADLINE,
            "the MCP server never received the call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[sqlx::test(migrations = false)]
async fn a_device_runner_killed_mid_call_leaves_the_call_unknown_and_never_sends_it_again(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let stack = stack(&db, "runner-kill").await;
    let (device, stdin_copy) = teed_device(&stack).await;
    let outbox = stack.dir.join("outbox");
    let log = stack.dir.join("runner.log");
    let mut runner = stack
        .start_runner(&device, &outbox, &log, &[])
        .await
        .expect("runner");

    let slow = device.target.call("slow", json!({ "seconds": 30 }));
    let (_, call) = submit(&stack.api, &slow).await.expect("submit");
    let id = call.id.to_string();
    wait_until(&stack.api, &id, "running", |c| {
        c.state == CallState::Running
    })
    .await;
    let request_id = slow.request_id.to_string();
    wait_received(&stdin_copy, &request_id).await;
    runner.kill();

    // The runner is lost: once its lease expires the call is unknown, never queued again.
    let lost = wait_until(&stack.api, &id, "unknown", |c| {
        c.state != CallState::Running
    })
    .await;
    assert_eq!(lost.state, CallState::Unknown, "{lost:?}");
    assert_eq!(
        lost.error.as_ref().map(|e| e.code.as_str()),
        Some("runner_lost"),
        "{lost:?}"
    );

    // The runner comes back and works; the cut-off call stays unknown and was sent once.
    let _runner = stack
        .start_runner(&device, &outbox, &log, &[])
        .await
        .expect("runner again");
    let count = device.target.call("count", json!({ "label": "after" }));
    let (_, after) = submit(&stack.api, &count).await.expect("submit");
    let after = wait_settled(&stack.api, &after.id.to_string(), DEADLINE)
        .await
        .expect("settle");
    assert_eq!(after.state, CallState::Succeeded, "{after:?}");
    assert_eq!(
        executions(&stack.count_file).get(&count.request_id.0),
        Some(&1)
    );
    let still = read_call(&stack.api, &id).await.expect("read");
    assert_eq!(still.state, CallState::Unknown, "{still:?}");
    assert_eq!(
        requests_received(&stdin_copy, &request_id),
        1,
        "the cut-off call was sent again"
    );
}

#[sqlx::test(migrations = false)]
async fn a_device_runner_killed_and_restarted_at_once_reports_its_cut_off_call_unknown(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let stack = stack(&db, "runner-restart").await;
    let (device, stdin_copy) = teed_device(&stack).await;
    let outbox = stack.dir.join("outbox");
    let log = stack.dir.join("runner.log");
    let mut runner = stack
        .start_runner(&device, &outbox, &log, &[])
        .await
        .expect("runner");
    let slow = device.target.call("slow", json!({ "seconds": 30 }));
    let (_, call) = submit(&stack.api, &slow).await.expect("submit");
    let id = call.id.to_string();
    // Sent to the MCP server, so its start is in the outbox (recorded before sending).
    wait_received(&stdin_copy, &slow.request_id.to_string()).await;
    runner.signal(Signal::SIGKILL).expect("SIGKILL");
    let _ = runner.wait_exit(DEADLINE).await;

    // The same process identity resumes its live lease and finds the call started in its
    // outbox: it reports it unknown itself, without waiting for the lease to expire.
    let _runner = stack
        .start_runner(&device, &outbox, &log, &[])
        .await
        .expect("runner again");
    let settled = wait_until(&stack.api, &id, "settled", |c| {
        c.state != CallState::Running
    })
    .await;
    assert_eq!(settled.state, CallState::Unknown, "{settled:?}");
    assert_eq!(
        settled.error.as_ref().map(|e| e.code.as_str()),
        Some("runner_restarted"),
        "{settled:?}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_server_replica_restarted_under_load_loses_and_duplicates_nothing(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let mut stack = stack(&db, "replica-restart").await;
    stack.add_replica().await.expect("second replica");
    let device = stack
        .pair_device("edge", &stack.url(1))
        .await
        .expect("pair");
    let _runner = stack
        .start_runner(
            &device,
            &stack.dir.join("outbox"),
            &stack.dir.join("runner.log"),
            &[],
        )
        .await
        .expect("runner");
    let apis = vec![stack.api.clone(), stack.api.with_url(&stack.url(1))];
    let central = workload::stream(apis.clone(), stack.central.clone(), 40.0, 40);
    let on_device = workload::stream(apis, device.target.clone(), 40.0, 40);

    // Crash the replica under load: once both streams have calls in the database.
    let started = Instant::now();
    loop {
        let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM calls")
            .fetch_one(&stack.pool)
            .await
            .expect("count calls");
        if stored >= 10 {
            break;
        }
        assert!(started.elapsed() < DEADLINE, "the workload stored no calls");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stack.crash_server(0).await;
    // The outage itself: the replica stays down for half a second before it restarts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stack.restart_server(0).await.expect("restart replica 0");

    let mut submitted = central.await.expect("central workload");
    submitted.extend(on_device.await.expect("device workload"));
    let tally = invariants::check(&stack.pool, &stack.count_file, &submitted, DEADLINE)
        .await
        .expect("check");
    assert_eq!(tally.calls, 80);
    assert!(tally.clean(), "{tally:#?}");
    assert_eq!(
        tally.succeeded + tally.not_run + tally.uncertain,
        80,
        "{tally:#?}"
    );
}

#[sqlx::test(migrations = false)]
async fn killed_postgres_backends_do_not_strand_a_device_long_poll(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let stack = stack(&db, "backend-kill").await;
    let device = stack
        .pair_device("edge", &stack.url(0))
        .await
        .expect("pair");
    let _runner = stack
        .start_runner(
            &device,
            &stack.dir.join("outbox"),
            &stack.dir.join("runner.log"),
            &[],
        )
        .await
        .expect("runner");
    for all in [false, true] {
        // The runner is idle in its long-poll when the listeners' (or all) backends die.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let killed = kill_backends(&stack.pool, all)
            .await
            .expect("terminate backends");
        assert!(killed >= 1, "no backend was listening");
        let started = Instant::now();
        let count = device
            .target
            .call("count", json!({ "label": "after-kill" }));
        let (_, call) = submit(&stack.api, &count).await.expect("submit");
        let call = wait_settled(&stack.api, &call.id.to_string(), DEADLINE)
            .await
            .expect("settle");
        assert_eq!(call.state, CallState::Succeeded, "{call:?}");
        // A lost wake-up would leave the long-poll waiting out its 25 seconds.
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the call took {:?}",
            started.elapsed()
        );
        assert_eq!(
            executions(&stack.count_file).get(&count.request_id.0),
            Some(&1)
        );
    }
}
