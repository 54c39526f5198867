//! The benchmark's smoke run: `switchyard-bench --smoke` runs every measurement briefly and
//! writes results.json with the keys the issue promises. Speed is not asserted.

use super::harness::{bin_dir, database_url, scratch};
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::process::Command;
use switchyard_testkit::bins;

#[track_caller]
fn number(json: &Value, path: &[&str]) -> f64 {
    let mut at = json;
    for key in path {
        at = &at[*key];
    }
    at.as_f64()
        .unwrap_or_else(|| panic!("results.json has no number at {}: {json:#}", path.join(".")))
}

#[sqlx::test(migrations = false)]
async fn the_smoke_run_writes_every_promised_figure(_: PgPoolOptions, db: PgConnectOptions) {
    let dir = scratch("smoke");
    let out = dir.join("results.json");
    let output = Command::new(crate::harness::binary(bins::BENCH))
        .args(["--smoke", "--database-url", &database_url(&db), "--bin-dir"])
        .arg(bin_dir())
        .arg("--out")
        .arg(&out)
        .arg("--work-dir")
        .arg(dir.join("work"))
        .output()
        .expect("run switchyard-bench");
    assert!(
        output.status.success(),
        "switchyard-bench --smoke failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table.contains("direct rmcp call (baseline)") && table.contains("target"),
        "{table}"
    );

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("results.json")).expect("JSON");
    for placement in ["central", "device"] {
        for p in ["p50", "p99", "p999"] {
            number(&json, &["added_latency_ms", placement, p]);
        }
    }
    for key in ["per_call", "batched"] {
        assert!(
            json["throughput_calls_per_s"].get(key).is_some(),
            "no throughput_calls_per_s.{key}: {json:#}"
        );
    }
    assert!(number(&json, &["throughput_calls_per_s", "per_call"]) > 0.0);
    number(&json, &["replay_ms", "p50"]);
    assert_eq!(number(&json, &["idle_runners", "count"]), 10.0);
    assert!(number(&json, &["idle_runners", "server_rss_bytes"]) > 0.0);
    number(&json, &["baseline_direct_ms", "p50"]);
    number(&json, &["baseline_direct_ms", "p99"]);
    // The durable floor was measured with the latencies, and each of its samples' four
    // commits was timed.
    let floor = number(&json, &["floor_ms", "p50"]);
    let commit = number(&json, &["floor_parts_ms", "postgres_commit", "p50"]);
    let sync = number(&json, &["floor_parts_ms", "outbox_sync", "p50"]);
    assert!(commit > 0.0 && sync > 0.0, "{:#}", json["floor_parts_ms"]);
    assert_eq!(
        number(&json, &["floor_parts_ms", "postgres_commit", "count"]),
        4.0 * number(&json, &["floor_ms", "count"]),
        "{:#}",
        json["floor_parts_ms"]
    );
    assert!(floor > 0.0, "{:#}", json["floor_ms"]);
    // `/mcp`: its call in the same rounds, beside the REST call, and `tools/list` of what the
    // smoke plan grants (20 tools, over two of the fixture's connections).
    for key in [
        "mcp_call_ms",
        "mcp_added_latency_ms",
        "mcp_added_over_api_ms",
    ] {
        number(&json, &[key, "p50"]);
        number(&json, &[key, "p99"]);
    }
    number(&json, &["mcp_added_over_floor", "mcp_over_api", "p50"]);
    assert_eq!(number(&json, &["mcp_tools_list", "tools"]), 20.0);
    assert!(number(&json, &["mcp_tools_list", "ms", "p50"]) > 0.0);
    assert_eq!(
        number(&json, &["mcp_call_ms", "count"]),
        number(&json, &["added_latency_ms", "central", "count"]),
        "the /mcp call is measured in the REST call's rounds"
    );
    assert!(
        table.contains("/mcp tools/call over the REST call"),
        "{table}"
    );
    // The one correctness figure among them: concurrent duplicates make exactly one call.
    assert_eq!(
        number(&json, &["replay", "calls_created"]),
        1.0,
        "{:#}",
        json["replay"]
    );
    assert!(
        json["targets"].as_array().is_some_and(|t| !t.is_empty()),
        "no targets: {json:#}"
    );
}
