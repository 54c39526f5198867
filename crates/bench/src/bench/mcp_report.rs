//! The `/mcp` figures of a run: a `tools/call` through the endpoint beside the REST API's call
//! and the direct call of the same rounds, each as a multiple of the durable floor, and
//! `tools/list` for an agent granted many tools; their target and their lines of the table.

use super::mcp::ToolsList;
use super::report::Check;
use crate::stats::{Summary, ratio};
use serde::Serialize;
use std::fmt::Write;

/// The most `/mcp` may add to the call path it rides on (the REST API's), at p50, in ms.
pub const ADDED_OVER_API_P50_MS: f64 = 0.5;

/// A figure as a multiple of the durable floor of the same run, percentile by percentile.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct OverFloor {
    /// p50 over the floor's p50.
    pub p50: f64,
    /// p99 over the floor's p99.
    pub p99: f64,
}

impl OverFloor {
    /// `added` over `floor`.
    pub fn of(added: &Summary, floor: &Summary) -> OverFloor {
        OverFloor {
            p50: ratio(added.p50, floor.p50),
            p99: ratio(added.p99, floor.p99),
        }
    }
}

/// What the latency rounds' added latencies are as multiples of the floor.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct AddedOverFloor {
    /// The REST API's central call over the direct call.
    pub central: OverFloor,
    /// The same call through `/mcp` over the direct call.
    pub mcp: OverFloor,
    /// `/mcp` over the REST API's call.
    pub mcp_over_api: OverFloor,
}

/// The `/mcp` figures (flattened into the results: every key starts with `mcp_`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct McpFigures {
    /// The protocol version rmcp's client negotiated with `/mcp`.
    pub mcp_protocol_version: String,
    /// A `tools/call` of the fixture's `noop` on the central connection through `/mcp` by an
    /// agent, request → result, one at a time on a warm session.
    pub mcp_call_ms: Summary,
    /// `mcp_call_ms` minus the direct call, percentile by percentile.
    pub mcp_added_latency_ms: Summary,
    /// `mcp_call_ms` minus the REST API's central call (submit → visible) of the same rounds:
    /// what the endpoint adds to the call path it rides on.
    pub mcp_added_over_api_ms: Summary,
    /// The added latencies as multiples of the durable floor.
    pub mcp_added_over_floor: AddedOverFloor,
    /// `tools/list` for an agent granted many tools.
    pub mcp_tools_list: ToolsList,
}

impl McpFigures {
    /// The figures of `call` (through `/mcp`) beside `central` (the REST API's call),
    /// `baseline` (the direct call) and `floor`, all of the same rounds, and `tools_list`.
    pub fn new(
        protocol_version: String,
        call: Summary,
        central: &Summary,
        baseline: &Summary,
        floor: &Summary,
        tools_list: ToolsList,
    ) -> McpFigures {
        let added = call.minus(baseline);
        let over_api = call.minus(central);
        McpFigures {
            mcp_protocol_version: protocol_version,
            mcp_added_over_floor: AddedOverFloor {
                central: OverFloor::of(&central.minus(baseline), floor),
                mcp: OverFloor::of(&added, floor),
                mcp_over_api: OverFloor::of(&over_api, floor),
            },
            mcp_call_ms: call,
            mcp_added_latency_ms: added,
            mcp_added_over_api_ms: over_api,
            mcp_tools_list: tools_list,
        }
    }

    /// The endpoint's target against these figures.
    pub fn checks(&self) -> Vec<Check> {
        let over = &self.mcp_added_over_api_ms;
        vec![Check {
            figure: "/mcp tools/call over the REST call, p50".into(),
            target: format!("≤ {ADDED_OVER_API_P50_MS} ms"),
            measured: format!(
                "{:.2} ms ({:.2}× the floor)",
                over.p50, self.mcp_added_over_floor.mcp_over_api.p50
            ),
            met: over.count > 0 && over.p50 <= ADDED_OVER_API_P50_MS,
        }]
    }

    /// The figures' lines of the latency table (`row` writes one summary).
    pub fn write_rows(&self, out: &mut String, row: impl Fn(&mut String, &str, &Summary)) {
        row(out, "/mcp tools/call (an agent)", &self.mcp_call_ms);
        row(out, "/mcp: added", &self.mcp_added_latency_ms);
        row(
            out,
            "/mcp: added over the REST call",
            &self.mcp_added_over_api_ms,
        );
        let f = &self.mcp_added_over_floor;
        let _ = writeln!(
            out,
            "  × the floor (p50/p99): central added {:.2}/{:.2}, /mcp added {:.2}/{:.2}, /mcp over REST {:.2}/{:.2} ({})",
            f.central.p50,
            f.central.p99,
            f.mcp.p50,
            f.mcp.p99,
            f.mcp_over_api.p50,
            f.mcp_over_api.p99,
            self.mcp_protocol_version
        );
        let l = &self.mcp_tools_list;
        row(out, &format!("/mcp tools/list, {} tools", l.tools), &l.ms);
        let _ = writeln!(
            out,
            "  ({} connections, an answer of {:.0} kB)",
            l.connections,
            l.answer_bytes as f64 / 1e3
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_judged_against_the_rest_call_of_the_same_rounds() {
        let summary = |p50: f64, p99: f64| Summary {
            count: 100,
            p50,
            p99,
            ..Summary::default()
        };
        let (baseline, floor) = (summary(0.1, 0.3), summary(2.0, 4.0));
        let central = summary(3.1, 8.3);
        let met = McpFigures::new(
            "2025-11-25".into(),
            summary(3.5, 9.3),
            &central,
            &baseline,
            &floor,
            ToolsList::default(),
        );
        assert!((met.mcp_added_over_api_ms.p50 - 0.4).abs() < 1e-9);
        assert!((met.mcp_added_over_floor.mcp.p50 - 1.7).abs() < 1e-9);
        assert!((met.mcp_added_over_floor.mcp_over_api.p99 - 0.25).abs() < 1e-9);
        assert!(met.checks().iter().all(|c| c.met));
        let missed = McpFigures::new(
            "2025-11-25".into(),
            summary(3.7, 9.3),
            &central,
            &baseline,
            &floor,
            ToolsList::default(),
        );
        assert!(missed.checks().iter().all(|c| !c.met));
    }
}
