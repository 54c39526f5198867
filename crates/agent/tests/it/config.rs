//! `switchyard config validate`: the file is read locally, a mistake is reported with its line
//! and column and exit 2, and a secret written into the file is never printed back.

use std::path::PathBuf;
use std::process::{Command, Output};
use switchyard_testkit::scratch;

fn validate(test: &str, text: &str, json: bool) -> Output {
    let dir = scratch::kept("switchyard-agent-it", test).expect("a scratch directory");
    let file: PathBuf = dir.join("switchyard.toml");
    crate::exclusive::write(|| std::fs::write(&file, text)).expect("write the file");
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    if json {
        command.arg("--json");
    }
    command
        .args(["config", "validate"])
        .arg(&file)
        .env_remove("SWITCHYARD_TOKEN")
        // No server is asked: an unreachable one changes nothing.
        .env("SWITCHYARD_URL", "http://127.0.0.1:9");
    crate::exclusive::output(&mut command).expect("run switchyard")
}

#[test]
fn a_valid_file_prints_what_apply_would_set() {
    let out = validate(
        "config-valid",
        r#"
[mcp.sentry]
url = "https://mcp.sentry.dev/mcp"
auth = "oauth"

[mcp.files]
command = "files-server"
env = { FILES_TOKEN = "keyring:files" }
placement = "device:laptop"

[agent.triage]
mcp = ["mcp.sentry", { id = "mcp.files", tools = { read_only = true }, defer = true }]
mcp_announce = "never"
"#,
        true,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let desired: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(desired["mcp"]["sentry"]["transport"], "http");
    assert_eq!(desired["mcp"]["sentry"]["prefix_tools"], true);
    assert_eq!(
        desired["mcp"]["files"]["env"]["FILES_TOKEN"],
        "keyring:files"
    );
    assert_eq!(desired["mcp"]["files"]["placement"]["device"], "laptop");
    let files = &desired["agents"]["triage"]["mcp"]["files"];
    assert_eq!(files["read_only"], true);
    assert_eq!(files["defer"], true);
    assert_eq!(files["announce"], "never", "the agent's default applies");
    assert_eq!(
        desired["agents"]["triage"]["mcp"]["sentry"]["read_only"],
        false
    );
}

#[test]
fn every_mistake_is_reported_with_its_line_and_no_secret_is_echoed() {
    let secret = "ghp_Canary0123456789abcdefABCDEF012345";
    let out = validate(
        "config-invalid",
        &format!(
            "[mcp.github]\nurl = \"https://api.example.com/mcp\"\nauth = \"token\"\nheadr = \"X-Key\"\n\n[mcp.tool]\ncommand = \"srv\"\nenv = {{ KEY = \"{secret}\" }}\n"
        ),
        false,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("switchyard.toml:4:1: unknown field `headr`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("switchyard.toml:8:15: `mcp.tool.env.KEY` holds a token-shaped value"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("Canary") && out.stdout.is_empty(),
        "{stderr}"
    );
}
