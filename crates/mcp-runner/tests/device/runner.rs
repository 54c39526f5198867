//! The `switchyard-mcp-runner` binary's local checks, made before anything is sent: a
//! directory others can read, an identity for another server or none at all, and an outbox in
//! use by another process. The runner's work against a real server is tested end to end in
//! `crates/e2e` (`device::runner`).

use crate::harness::{DEADLINE, scratch, start_runner};
use nix::sys::signal::Signal;
use std::os::unix::fs::PermissionsExt;
use switchyard_mcp_runner::identity::{DeviceIdentity, IdentityStore, KeyringChoice};
use switchyard_protocol::{DeviceId, WorkspaceId};

/// Saves a device identity for a server nothing listens on; returns the config directory.
fn unreachable_identity(test: &str) -> std::path::PathBuf {
    let config = scratch(test).join("config");
    IdentityStore::open(config.clone(), KeyringChoice::Off)
        .expect("open the identity store")
        .save(&DeviceIdentity {
            profile: "default".to_owned(),
            // Port 9 (discard): connections are refused.
            server_url: "http://127.0.0.1:9".to_owned(),
            device_id: DeviceId::new(),
            workspace_id: WorkspaceId::new(),
            credential: "sy_dev_not-a-real-credential".to_owned(),
        })
        .expect("save the identity");
    config
}

#[tokio::test]
async fn local_setup_problems_exit_2_before_anything_is_sent() {
    let config = unreachable_identity("local-setup");
    let dir = scratch("local-setup-dirs");

    let open = dir.join("open");
    std::fs::create_dir(&open).expect("create");
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut runner = start_runner(&config, &open, &dir.join("open.log"), &[]);
    assert_eq!(
        runner.wait_exit(DEADLINE).await.expect("the runner exits"),
        Some(2),
        "{}",
        runner.log_text()
    );
    assert!(
        runner
            .log_text()
            .contains(&format!("run `chmod 700 {}`", open.display())),
        "{}",
        runner.log_text()
    );

    let private = dir.join("private");
    let mut other_server = start_runner(
        &config,
        &private,
        &dir.join("server.log"),
        &[("SWITCHYARD_URL", "http://switchyard.example")],
    );
    assert_eq!(
        other_server
            .wait_exit(DEADLINE)
            .await
            .expect("the runner exits"),
        Some(2)
    );
    assert!(
        other_server
            .log_text()
            .contains("is paired with http://127.0.0.1:9, not http://switchyard.example"),
        "{}",
        other_server.log_text()
    );

    let mut no_profile = start_runner(
        &config,
        &private,
        &dir.join("profile.log"),
        &[("SWITCHYARD_DEVICE_PROFILE", "laptop")],
    );
    assert_eq!(
        no_profile
            .wait_exit(DEADLINE)
            .await
            .expect("the runner exits"),
        Some(2)
    );
    assert!(
        no_profile
            .log_text()
            .contains("no device profile `laptop`: pair this device first"),
        "{}",
        no_profile.log_text()
    );
    assert!(!private.exists(), "nothing was created for a refused start");
}

#[tokio::test]
async fn a_second_process_on_the_same_outbox_is_refused() {
    let config = unreachable_identity("same-outbox");
    let dir = scratch("same-outbox-dirs");
    let outbox = dir.join("outbox");
    // The server is unreachable: the first keeps trying to take its lease, holding the outbox.
    let mut first = start_runner(&config, &outbox, &dir.join("first.log"), &[]);
    first
        .wait_for_log("cannot take the runner lease", 1, DEADLINE)
        .await
        .expect("the runner logs it");

    let mut second = start_runner(&config, &outbox, &dir.join("second.log"), &[]);

    assert_eq!(
        second.wait_exit(DEADLINE).await.expect("the runner exits"),
        Some(2),
        "{}",
        second.log_text()
    );
    assert!(
        second
            .log_text()
            .contains("is in use by another runner process"),
        "{}",
        second.log_text()
    );
    // Stopping while waiting for the lease is a clean stop.
    first.signal(Signal::SIGTERM).expect("signal the runner");
    assert_eq!(
        first.wait_exit(DEADLINE).await.expect("the runner exits"),
        Some(0),
        "{}",
        first.log_text()
    );
}
