//! `mcp.server.operation.duration` (the MCP semantic conventions), by connection, method, tool
//! and outcome. A series is kept per (connection id, method, tool name) — tool names come from
//! the connection's catalog, since only catalog tools run — at most [`MAX_OPERATION_SERIES`]
//! of them; further ones are recorded together as [`OTHER`]. Recording takes a read lock
//! (a write lock only the first time a series is seen) and two atomic additions; connection
//! ids become namespaces only when a scrape renders them.

use super::histogram::{CALL_BUCKETS, Histogram, Snapshot};
use super::text::{Exposition, Kind};
use std::collections::{BTreeMap, HashMap};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;
use switchyard_protocol::{CallState, ConnectionId};

/// The most (connection, method, tool) series the duration histogram keeps; further ones are
/// recorded as ([`OTHER`], [`OTHER`]). Catalogs bound them already: this is the backstop.
pub const MAX_OPERATION_SERIES: usize = 2000;

/// The label value of what is past the cap, or of a connection the scrape did not find.
pub const OTHER: &str = "_other";

/// The family's name in Prometheus form.
pub const OPERATION_DURATION: &str = "mcp_server_operation_duration_seconds";

/// The MCP method an operation was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// A tool call, or a receipt lookup (a call of the connection's receipt tool).
    ToolsCall,
    /// A device's discovery of its connection's catalog.
    ToolsList,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Method::ToolsCall => "tools/call",
            Method::ToolsList => "tools/list",
        }
    }

    fn index(self) -> usize {
        match self {
            Method::ToolsCall => 0,
            Method::ToolsList => 1,
        }
    }
}

/// The states a runner's completion records: the conventions' `error.type` is the state on
/// all but the first.
const OUTCOMES: [CallState; 4] = [
    CallState::Succeeded,
    CallState::ToolError,
    CallState::Failed,
    CallState::Unknown,
];

/// One histogram per outcome.
#[derive(Debug)]
struct Outcomes([Histogram; OUTCOMES.len()]);

impl Default for Outcomes {
    fn default() -> Self {
        Self(std::array::from_fn(|_| Histogram::new(CALL_BUCKETS)))
    }
}

#[derive(Debug, Default)]
struct Series {
    by_tool: HashMap<(ConnectionId, Method), HashMap<String, Outcomes>>,
    len: usize,
}

/// The operation durations of one process.
#[derive(Debug, Default)]
pub(super) struct Operations {
    series: RwLock<Series>,
    /// Past the cap, by method.
    other: [Outcomes; 2],
}

impl Operations {
    /// Records an operation of `method` on `tool` of `connection` that ended `state` after
    /// `ran`. A state a completion does not record is ignored.
    pub(super) fn record(
        &self,
        (connection, method, tool): (ConnectionId, Method, &str),
        state: CallState,
        ran: Duration,
    ) {
        let Some(outcome) = OUTCOMES.iter().position(|s| *s == state) else {
            return;
        };
        let record = |outcomes: &Outcomes| outcomes.0[outcome].record(ran);
        {
            let series = self.series.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(found) = find(&series, connection, method, tool) {
                return record(found);
            }
        }
        let mut series = self.series.write().unwrap_or_else(PoisonError::into_inner);
        if find(&series, connection, method, tool).is_none() {
            if series.len >= MAX_OPERATION_SERIES {
                drop(series);
                return record(&self.other[method.index()]);
            }
            series.len += 1;
            series
                .by_tool
                .entry((connection, method))
                .or_default()
                .insert(tool.to_owned(), Outcomes::default());
        }
        if let Some(found) = find(&series, connection, method, tool) {
            record(found);
        }
    }

    /// The family, its connections named by `names` (their namespaces; [`OTHER`] when not
    /// there). Series that render alike (two workspaces' connections of one namespace) are
    /// summed; series with no observation are left out.
    pub(super) fn render(&self, names: &HashMap<ConnectionId, String>, text: &mut Exposition) {
        // (method, connection, tool, outcome) → what the series with those labels observed.
        let mut rendered: BTreeMap<(Method, String, String, usize), Snapshot> = BTreeMap::new();
        let mut add = |method: Method, connection: &str, tool: &str, outcomes: &Outcomes| {
            for (outcome, histogram) in outcomes.0.iter().enumerate() {
                let snapshot = histogram.snapshot();
                if snapshot.count() > 0 {
                    let labels = (method, connection.to_owned(), tool.to_owned(), outcome);
                    rendered.entry(labels).or_default().add(&snapshot);
                }
            }
        };
        {
            let series = self.series.read().unwrap_or_else(PoisonError::into_inner);
            for ((connection, method), tools) in &series.by_tool {
                let name = names.get(connection).map_or(OTHER, String::as_str);
                for (tool, outcomes) in tools {
                    add(*method, name, tool, outcomes);
                }
            }
        }
        for method in [Method::ToolsCall, Method::ToolsList] {
            add(method, OTHER, OTHER, &self.other[method.index()]);
        }
        text.family(
            OPERATION_DURATION,
            Kind::Histogram,
            "MCP operations the runners completed, from the start ack to the recorded answer \
             (mcp.server.operation.duration), by method, connection (namespace), tool and \
             error type",
        );
        for ((method, connection, tool, outcome), snapshot) in &rendered {
            let mut labels = vec![
                ("mcp_method_name", method.as_str()),
                ("connection", connection.as_str()),
            ];
            if *method == Method::ToolsCall {
                labels.push(("gen_ai_tool_name", tool.as_str()));
            }
            if *outcome > 0 {
                labels.push(("error_type", OUTCOMES[*outcome].as_str()));
            }
            text.histogram(OPERATION_DURATION, &labels, CALL_BUCKETS, snapshot);
        }
    }
}

fn find<'a>(
    series: &'a Series,
    connection: ConnectionId,
    method: Method,
    tool: &str,
) -> Option<&'a Outcomes> {
    series.by_tool.get(&(connection, method))?.get(tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(operations: &Operations, names: &HashMap<ConnectionId, String>) -> String {
        let mut text = Exposition::default();
        operations.render(names, &mut text);
        text.finish()
    }

    #[test]
    fn series_past_the_cap_are_other_and_known_ones_stay() {
        let operations = Operations::default();
        let github = ConnectionId::new();
        let names = HashMap::from([(github, "github".to_owned())]);
        let second = Duration::from_secs(1);
        for i in 0..MAX_OPERATION_SERIES {
            let tool = format!("tool{i}");
            let key = (github, Method::ToolsCall, tool.as_str());
            operations.record(key, CallState::Succeeded, second);
        }
        let key = (github, Method::ToolsCall, "one_more");
        operations.record(key, CallState::Succeeded, second);
        let key = (github, Method::ToolsCall, "tool7");
        operations.record(key, CallState::Succeeded, second);
        let text = rendered(&operations, &names);
        assert!(text.contains(
            "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",\
             connection=\"_other\",gen_ai_tool_name=\"_other\"} 1\n"
        ));
        assert!(text.contains(
            "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",\
             connection=\"github\",gen_ai_tool_name=\"tool7\"} 2\n"
        ));
        assert!(!text.contains("one_more"));
    }

    #[test]
    fn connections_are_named_when_rendered_and_alike_ones_summed() {
        let operations = Operations::default();
        let (a, b, unnamed) = (
            ConnectionId::new(),
            ConnectionId::new(),
            ConnectionId::new(),
        );
        let names = HashMap::from([(a, "gh".to_owned()), (b, "gh".to_owned())]);
        let second = Duration::from_secs(1);
        operations.record((a, Method::ToolsCall, "echo"), CallState::ToolError, second);
        operations.record((b, Method::ToolsCall, "echo"), CallState::ToolError, second);
        operations.record(
            (unnamed, Method::ToolsList, "-"),
            CallState::Unknown,
            second,
        );
        let text = rendered(&operations, &names);
        assert!(text.contains(
            "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",\
             connection=\"gh\",gen_ai_tool_name=\"echo\",error_type=\"tool_error\"} 2\n"
        ));
        assert!(text.contains(
            "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/list\",\
             connection=\"_other\",error_type=\"unknown\"} 1\n"
        ));
    }
}
