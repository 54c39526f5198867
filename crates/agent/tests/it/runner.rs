//! `switchyard mcp-runner`: the helper is found beside the `switchyard` executable, runs with
//! the directory and profile, receives signals itself and decides the exit status.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use switchyard_testkit::scratch;

/// A copy of the `switchyard` binary alone in a fresh directory.
fn lone_switchyard(test: &str) -> PathBuf {
    let dir = scratch::kept("switchyard-agent-it", test).expect("a scratch directory");
    let exe = dir.join("switchyard");
    crate::exclusive::write(|| std::fs::copy(env!("CARGO_BIN_EXE_switchyard"), &exe))
        .expect("copy switchyard");
    exe
}

/// Writes an executable shell script `switchyard-mcp-runner` next to `exe`.
fn fake_helper(exe: &Path, script: &str) {
    let helper = exe.with_file_name("switchyard-mcp-runner");
    crate::exclusive::write(|| std::fs::write(&helper, format!("#!/bin/sh\n{script}")))
        .expect("write helper");
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Starting a command through [`crate::exclusive`].
trait Exclusive {
    /// Runs it to the end.
    fn run(&mut self) -> std::io::Result<std::process::Output>;
    /// Starts it.
    fn start(&mut self) -> std::io::Result<std::process::Child>;
}

impl Exclusive for Command {
    fn run(&mut self) -> std::io::Result<std::process::Output> {
        crate::exclusive::output(self)
    }

    fn start(&mut self) -> std::io::Result<std::process::Child> {
        crate::exclusive::spawn(self)
    }
}

fn switchyard(exe: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(exe);
    command
        .args(args)
        .env_remove("SWITCHYARD_TOKEN")
        .env_remove("SWITCHYARD_DEVICE_PROFILE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

#[test]
fn a_missing_helper_exits_2_naming_where_it_looked() {
    let exe = lone_switchyard("runner-missing");
    let output = switchyard(&exe, &["mcp-runner", "state"])
        .run()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let expected = exe.with_file_name("switchyard-mcp-runner");
    assert!(
        stderr.contains(&format!("{} does not exist", expected.display())),
        "{stderr}"
    );
}

#[test]
fn the_helper_gets_the_directory_and_profile_and_decides_the_exit_status() {
    let exe = lone_switchyard("runner-args");
    fake_helper(&exe, "echo \"args: $*\"\nexit 7\n");
    let output = switchyard(
        &exe,
        &["mcp-runner", "/var/lib/runner", "--profile", "laptop"],
    )
    .run()
    .expect("run");
    assert_eq!(output.status.code(), Some(7));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "args: /var/lib/runner --profile laptop\n"
    );

    let output = switchyard(&exe, &["mcp-runner", "state"])
        .env("SWITCHYARD_DEVICE_PROFILE", "from-env")
        .run()
        .expect("run");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "args: state --profile from-env\n"
    );

    let output = switchyard(&exe, &["mcp-runner", "state", "--profile", "no/slash"])
        .run()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn sigterm_to_switchyard_reaches_the_helper() {
    let exe = lone_switchyard("runner-signal");
    fake_helper(
        &exe,
        "trap 'echo got-term; exit 143' TERM\necho ready\nwhile :; do sleep 0.05; done\n",
    );
    let mut child = switchyard(&exe, &["mcp-runner", "state"])
        .start()
        .expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("ready"));
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    kill(pid, Signal::SIGTERM).expect("send SIGTERM");
    assert_eq!(
        lines.next().and_then(Result::ok).as_deref(),
        Some("got-term")
    );
    assert_eq!(child.wait().expect("wait").code(), Some(143));
}
