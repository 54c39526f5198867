//! `switchyard tool list|classify`: a connection's catalog with hints, state and
//! classification, and the classification's two mandatory flags.

use super::harness::{Server, set_up_demo};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// The cells of `tool list`'s row for `tool`.
#[track_caller]
fn row<'a>(listing: &'a str, tool: &str) -> Vec<&'a str> {
    listing
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cells| cells.first() == Some(&tool))
        .unwrap_or_else(|| panic!("no row for {tool} in\n{listing}"))
}

#[sqlx::test(migrations = false)]
async fn tools_are_listed_with_hints_and_classified_with_both_fields(
    _: PgPoolOptions,
    db: PgConnectOptions,
) {
    let server = Server::start(&db).await;
    let cli = server.cli();
    // Discovers the fixture's tools and classifies each with `tool classify`.
    set_up_demo(&cli);

    let listing = cli.run(&["tool", "list", "demo", "fx"]).success().stdout;
    assert!(
        listing.starts_with("NAME") && listing.contains("CLASSIFICATION"),
        "{listing}"
    );
    assert_eq!(
        row(&listing, "lookup"),
        ["lookup", "read-only", "classified", "read-only/low", "-"]
    );
    assert_eq!(
        row(&listing, "echo"),
        ["echo", "-", "classified", "side-effect/low", "-"]
    );

    let run = cli
        .run(&[
            "tool",
            "classify",
            "demo",
            "fx",
            "echo",
            "--read-only",
            "--risk",
            "medium",
        ])
        .success();
    assert_eq!(
        run.stdout.trim_end(),
        "classified echo of fx: read-only/medium"
    );
    let tools = cli
        .run(&["--json", "tool", "list", "demo", "fx"])
        .success()
        .json();
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap();
    assert_eq!(
        echo["classification"],
        serde_json::json!({"side_effect": false, "risk": "medium"}),
        "{echo}"
    );

    // Exactly one of --side-effect and --read-only, and a risk the server knows.
    for args in [
        &["tool", "classify", "demo", "fx", "echo", "--risk", "low"][..],
        &[
            "tool",
            "classify",
            "demo",
            "fx",
            "echo",
            "--risk",
            "low",
            "--read-only",
            "--side-effect",
        ],
        &["tool", "classify", "demo", "fx", "echo", "--read-only"],
        &[
            "tool",
            "classify",
            "demo",
            "fx",
            "echo",
            "--read-only",
            "--risk",
            "extreme",
        ],
    ] {
        let run = cli.run(args).code(2);
        assert!(
            run.stderr.contains("--side-effect") || run.stderr.contains("--risk"),
            "{args:?}: {}",
            run.stderr
        );
    }
    let run = cli
        .run(&[
            "tool",
            "classify",
            "demo",
            "fx",
            "nope",
            "--read-only",
            "--risk",
            "low",
        ])
        .code(4);
    assert!(run.stderr.contains("tool_not_found"), "{}", run.stderr);
}
