//! `switchyard connection diagnose`: the checks in order, `--json`, and exit 9 with the
//! failure class when a check failed.

use super::harness::{Server, set_up_demo};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// The check names of a human diagnosis, in the order printed, with their status.
fn printed_checks(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().take(2).map(str::to_owned).collect())
        .filter_map(|cells: Vec<String>| match cells.as_slice() {
            [status, check] if ["passed", "failed", "skipped"].contains(&status.as_str()) => {
                Some((check.clone(), status.clone()))
            }
            _ => None,
        })
        .collect()
}

#[sqlx::test(migrations = false)]
async fn diagnose_prints_the_checks_and_exits_9_when_one_failed(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    set_up_demo(&cli);

    let healthy = cli.run(&["connection", "diagnose", "demo", "fx"]).success();
    let checks = printed_checks(&healthy.stdout);
    let names: Vec<&str> = checks.iter().map(|(check, _)| check.as_str()).collect();
    assert_eq!(
        names,
        [
            "enabled",
            "approved",
            "transport",
            "credentials",
            "catalog",
            "grants",
            "handshake"
        ],
        "{}",
        healthy.stdout
    );
    assert!(
        checks.iter().all(|(_, status)| status == "passed"),
        "{}",
        healthy.stdout
    );
    let json = cli
        .run(&["--json", "connection", "diagnose", "demo", "fx"])
        .success()
        .json();
    assert_eq!(json["passed"], true, "{json}");

    cli.run(&[
        "connector",
        "add",
        "missing",
        "--stdio",
        "--",
        "/nonexistent/switchyard-no-such-server",
    ])
    .success();
    cli.run(&["connector", "approve", "missing"]).success();
    cli.run(&[
        "connection",
        "create",
        "demo",
        "missing",
        "--connector",
        "missing",
    ])
    .success();
    let broken = cli
        .run(&[
            "connection",
            "diagnose",
            "demo",
            "missing",
            "--timeout-ms",
            "5000",
        ])
        .code(9);
    let checks = printed_checks(&broken.stdout);
    assert_eq!(
        checks.last(),
        Some(&("handshake".to_owned(), "failed".to_owned())),
        "{}",
        broken.stdout
    );
    assert!(
        broken.stdout.contains("failure: executable_not_found"),
        "{}",
        broken.stdout
    );
    assert!(
        broken
            .stderr
            .contains("error[diagnose_failed]: connection missing: failed: catalog, grants, handshake (executable_not_found)"),
        "{}",
        broken.stderr
    );
    let json = cli
        .run(&["--json", "connection", "diagnose", "demo", "missing"])
        .code(9)
        .json();
    assert_eq!(json["failure"], "executable_not_found", "{json}");
}
