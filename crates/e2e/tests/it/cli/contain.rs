//! Containment with the real `switchyard-server`: a stdio server it starts cannot read the
//! server's environment through `/proc`, holds no capabilities, and dies with the server, its
//! group and scratch home included.

use super::harness::{Server, call_and_wait, set_up_demo, set_up_demo_with};
use crate::runner::fixture::{live_group_members, wait_until};
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::path::Path;
use std::time::Duration;

/// Exit code of `mcp call --wait` for a tool error.
const TOOL_ERROR: i32 = 6;

/// The text of a finished call's result.
#[track_caller]
fn text(call: &Value) -> &str {
    call["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {call}"))
}

/// Fields of `/proc/<pid>/stat` after the command name: state, ppid, pgrp, ….
#[track_caller]
fn stat_fields(stat: &str) -> Vec<&str> {
    let (_, after_comm) = stat.rsplit_once(')').expect("a stat line");
    after_comm.split_whitespace().collect()
}

#[sqlx::test(migrations = false)]
async fn a_stdio_server_cannot_read_the_server_environment(_: PgPoolOptions, db: PgConnectOptions) {
    let marker = format!("marker-{}", uuid::Uuid::new_v4());
    let server = Server::start_with_env(&db, &[("CONTAINMENT_MARKER", &marker)]).await;
    let cli = server.cli();
    set_up_demo(&cli);
    let environ = format!("/proc/{}/environ", server.pid());
    if nix::unistd::geteuid().is_root() {
        // Root with CAP_SYS_PTRACE (this test, not the server's child) can read it: the marker
        // is there to be found.
        let seen = std::fs::read(&environ).expect("root reads the environment");
        assert!(String::from_utf8_lossy(&seen).contains(&marker));
    }

    let status = call_and_wait(&cli, "read_file", json!({ "path": "/proc/self/stat" }), 0);
    let fields = stat_fields(text(&status));
    assert_eq!(
        fields[1],
        server.pid().to_string(),
        "the fixture is the server's child"
    );
    let read = call_and_wait(&cli, "read_file", json!({ "path": environ }), TOOL_ERROR);

    assert!(text(&read).contains("Permission denied"), "{read}");
    assert!(!read.to_string().contains(&marker), "{read}");
    assert!(
        !server.log_text().contains(&marker),
        "nor is it in the server's log"
    );
}

#[sqlx::test(migrations = false)]
async fn a_killed_server_leaves_no_process_of_a_warm_session(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    set_up_demo_with(&cli, &["--grandchild"]);
    let stat = call_and_wait(&cli, "read_file", json!({ "path": "/proc/self/stat" }), 0);
    let pgid: u32 = stat_fields(text(&stat))[2]
        .parse()
        .expect("a process group id");
    let home = text(&call_and_wait(&cli, "cwd", json!({}), 0)).to_owned();
    let members = live_group_members(pgid);
    assert!(
        members.len() >= 2,
        "the warm fixture and its grandchild run in group {pgid}: {members:?}"
    );
    assert!(Path::new(&home).is_dir(), "{home}");

    server.stop();

    wait_until(
        Duration::from_secs(10),
        "no process of the session's group is left",
        || live_group_members(pgid).is_empty(),
    )
    .await;
    wait_until(
        Duration::from_secs(10),
        "the session's scratch home is removed",
        || !Path::new(&home).exists(),
    )
    .await;
}
