//! The server's instruments: counters and histograms recorded on the call path, rendered in
//! the Prometheus text format by `/metrics` (served on its own listener, see `crate::serve`)
//! together with gauges a scrape reads from the database (`crate::app` reads them).
//!
//! What it guarantees:
//!
//! - **Recording is cheap and does no I/O**: a counter is one atomic addition, a histogram
//!   sample two, into fixed buckets (`histogram.rs`), so memory does not grow between scrapes.
//!   The duration histogram finds its series under a read lock (`operations.rs`). Nothing here
//!   reads the database; scrape-time gauges are read by the scrape, never by a call.
//! - **Every label value comes from a bounded set**: enums (states, placements, decisions,
//!   outcomes), connection namespaces and catalog tool names (admission runs only catalog
//!   tools; at most [`MAX_OPERATION_SERIES`] series, past it `_other`), device ids. Arguments,
//!   submitters, request ids and secrets never become labels, so ten thousand distinct calls
//!   add no series.
//! - **One recorder per [`crate::app::App`]**, nothing process-global: two servers in one
//!   process (the tests) keep their own figures.

mod devices;
mod histogram;
mod operations;
mod route;
mod text;

pub use devices::DEVICE_REPORT_TTL;
pub use operations::{MAX_OPERATION_SERIES, OPERATION_DURATION, OTHER};
pub use route::metrics_router;

use crate::db::{ActiveCalls, DeviceSeen, FinishedCall};
use histogram::{APPROVAL_BUCKETS, CALL_BUCKETS, Histogram};
use operations::{Method, Operations};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use switchyard_protocol::reconcile::{CallKind, ResolutionOutcome};
use switchyard_protocol::state::ALL_STATES;
use switchyard_protocol::{CallState, ConnectionId, DeviceId, RunnerRef};
use text::{Exposition, Kind};

/// The states a call ends in (for now: `unknown` may still be settled), as counted by
/// `switchyard_calls_finished_total`.
const FINISHED: [CallState; 7] = [
    CallState::Succeeded,
    CallState::ToolError,
    CallState::Failed,
    CallState::Cancelled,
    CallState::Expired,
    CallState::Unknown,
    CallState::Declined,
];

/// The active states, each reported even when no call is in it.
const ACTIVE: [CallState; 4] = [
    CallState::AwaitingApproval,
    CallState::Queued,
    CallState::Leased,
    CallState::Running,
];

/// Where a call runs, as a label value.
const PLACEMENTS: [&str; 2] = ["central", "device"];

fn placement(runner: RunnerRef) -> usize {
    match runner {
        RunnerRef::Central => 0,
        RunnerRef::Device(_) => 1,
    }
}

/// How an approval question ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// A person approved it.
    Approved,
    /// A person declined it.
    Declined,
    /// Nobody answered in time.
    Expired,
}

impl Decision {
    const ALL: [Decision; 3] = [Decision::Approved, Decision::Declined, Decision::Expired];

    fn as_str(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Declined => "declined",
            Decision::Expired => "expired",
        }
    }
}

/// What settled an unknown call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettledBy {
    /// A person's resolution with evidence.
    Resolution,
    /// A receipt lookup against the connector.
    Lookup,
    /// A device runner's receipt that arrived after the call became unknown.
    LateReceipt,
}

impl SettledBy {
    const ALL: [SettledBy; 3] = [
        SettledBy::Resolution,
        SettledBy::Lookup,
        SettledBy::LateReceipt,
    ];

    fn as_str(self) -> &'static str {
        match self {
            SettledBy::Resolution => "resolution",
            SettledBy::Lookup => "lookup",
            SettledBy::LateReceipt => "late_receipt",
        }
    }
}

/// How an OAuth token renewal ended (`switchyard_oauth_renewals_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// A new access token was obtained and stored.
    Ok,
    /// The authorization server refused for good (`invalid_grant`, a forgotten client): the
    /// connection needs authorization again.
    Rejected,
    /// It failed for now (no answer in time, a server error): the call failed, nothing sent.
    Failed,
}

impl Renewal {
    const ALL: [Renewal; 3] = [Renewal::Ok, Renewal::Rejected, Renewal::Failed];

    fn as_str(self) -> &'static str {
        match self {
            Renewal::Ok => "ok",
            Renewal::Rejected => "rejected",
            Renewal::Failed => "failed",
        }
    }
}

const OUTCOMES: [ResolutionOutcome; 3] = [
    ResolutionOutcome::Succeeded,
    ResolutionOutcome::NotApplied,
    ResolutionOutcome::Failed,
];

/// The position of `value` in `table`: every table here lists every variant.
fn index<T: PartialEq, const N: usize>(table: &[T; N], value: &T) -> usize {
    table.iter().position(|v| v == value).unwrap_or(0)
}

/// What a scrape read from the database, to render beside this process's figures.
#[derive(Debug, Default)]
pub struct Scraped {
    /// The calls in each active state, by placement.
    pub active: Vec<ActiveCalls>,
    /// Devices that are not revoked, with their last sight.
    pub devices: Vec<DeviceSeen>,
    /// Connection namespaces, which label the duration histogram.
    pub connections: HashMap<ConnectionId, String>,
}

/// This process's counters and histograms, and the devices that poll it.
#[derive(Debug)]
pub struct Metrics {
    /// By admission: queued, held for approval.
    submitted: [AtomicU64; 2],
    /// By state, as in [`ALL_STATES`].
    finished: [AtomicU64; ALL_STATES.len()],
    /// By placement.
    lease_wait: [Histogram; 2],
    /// As in [`Decision::ALL`].
    approval_wait: [Histogram; 3],
    /// As in [`SettledBy::ALL`], then [`OUTCOMES`].
    settled: [[AtomicU64; 3]; 3],
    /// As in [`Renewal::ALL`].
    renewals: [AtomicU64; 3],
    operations: Operations,
    devices: devices::DeviceReports,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            submitted: Default::default(),
            finished: Default::default(),
            lease_wait: std::array::from_fn(|_| Histogram::new(CALL_BUCKETS)),
            approval_wait: std::array::from_fn(|_| Histogram::new(APPROVAL_BUCKETS)),
            settled: Default::default(),
            renewals: Default::default(),
            operations: Operations::default(),
            devices: devices::DeviceReports::default(),
        }
    }
}

impl Metrics {
    /// A call was created by a submission: queued, or held for approval.
    pub fn call_submitted(&self, held: bool) {
        self.submitted[usize::from(held)].fetch_add(1, Relaxed);
    }

    /// `count` calls left the active states for `state`.
    pub fn calls_finished(&self, state: CallState, count: u64) {
        self.finished[index(&ALL_STATES, &state)].fetch_add(count, Relaxed);
    }

    /// A runner's completion was recorded: counted as finished, and its running time (when it
    /// was started) sampled by method, connection and tool.
    pub fn call_completed(&self, call: &FinishedCall) {
        self.calls_finished(call.state, 1);
        let ran = call
            .started_at
            .zip(call.finished_at)
            .and_then(|(started, finished)| (finished - started).to_std().ok());
        let Some(ran) = ran else { return };
        let method = match call.kind {
            CallKind::Tool | CallKind::Lookup => Method::ToolsCall,
            CallKind::Discovery => Method::ToolsList,
        };
        let key = (call.connection_id, method, call.tool_name.as_str());
        self.operations.record(key, call.state, ran);
    }

    /// A runner leased a call that had waited `waited` since its submission.
    pub fn call_leased(&self, runner: RunnerRef, waited: Duration) {
        self.lease_wait[placement(runner)].record(waited);
    }

    /// An approval question was answered or expired after `waited`.
    pub fn approval_answered(&self, decision: Decision, waited: Duration) {
        self.approval_wait[index(&Decision::ALL, &decision)].record(waited);
    }

    /// An unknown call was settled `by` a resolution, a lookup or a late receipt.
    pub fn unknown_settled(&self, by: SettledBy, outcome: ResolutionOutcome) {
        let (by, outcome) = (index(&SettledBy::ALL, &by), index(&OUTCOMES, &outcome));
        self.settled[by][outcome].fetch_add(1, Relaxed);
    }

    /// An OAuth token renewal (a token request with a refresh token) ended as `result`.
    pub fn oauth_renewal(&self, result: Renewal) {
        self.renewals[index(&Renewal::ALL, &result)].fetch_add(1, Relaxed);
    }

    /// A device runner polled (a heartbeat or a lease request), reporting its outbox depth
    /// when it knows it.
    pub fn device_polled(&self, device: DeviceId, outbox: Option<u32>) {
        self.devices.polled(device, outbox);
    }

    /// Everything, in the Prometheus text format: this process's figures and `db`'s.
    pub fn render(&self, db: &Scraped) -> String {
        let mut text = Exposition::default();
        let name = "switchyard_calls_submitted_total";
        text.family(
            name,
            Kind::Counter,
            "Calls created by submissions, by where they went first (queued, awaiting_approval)",
        );
        for (i, admission) in ["queued", "awaiting_approval"].into_iter().enumerate() {
            let value = self.submitted[i].load(Relaxed);
            text.sample(name, &[("admission", admission)], value);
        }
        let name = "switchyard_calls_finished_total";
        text.family(
            name,
            Kind::Counter,
            "Calls that left the active states, by the state they ended in",
        );
        for state in FINISHED {
            let value = self.finished[index(&ALL_STATES, &state)].load(Relaxed);
            text.sample(name, &[("state", state.as_str())], value);
        }
        render_active(&db.active, &mut text);
        let name = "switchyard_call_lease_wait_seconds";
        text.family(
            name,
            Kind::Histogram,
            "From submission to the runner's lease, by placement",
        );
        for (i, placement) in PLACEMENTS.into_iter().enumerate() {
            let snapshot = self.lease_wait[i].snapshot();
            text.histogram(name, &[("placement", placement)], CALL_BUCKETS, &snapshot);
        }
        let name = "switchyard_approval_wait_seconds";
        text.family(
            name,
            Kind::Histogram,
            "From the approval question to its answer, by decision",
        );
        for (i, decision) in Decision::ALL.into_iter().enumerate() {
            let snapshot = self.approval_wait[i].snapshot();
            let labels = [("decision", decision.as_str())];
            text.histogram(name, &labels, APPROVAL_BUCKETS, &snapshot);
        }
        self.operations.render(&db.connections, &mut text);
        let name = "switchyard_unknown_settled_total";
        text.family(
            name,
            Kind::Counter,
            "Unknown calls settled, by how (resolution, lookup, late_receipt) and outcome",
        );
        for (i, by) in SettledBy::ALL.into_iter().enumerate() {
            for (j, outcome) in OUTCOMES.into_iter().enumerate() {
                let labels = [("by", by.as_str()), ("outcome", outcome.as_str())];
                text.sample(name, &labels, self.settled[i][j].load(Relaxed));
            }
        }
        let name = "switchyard_oauth_renewals_total";
        text.family(
            name,
            Kind::Counter,
            "OAuth token renewals of central connections, by result (ok, rejected, failed)",
        );
        for (i, result) in Renewal::ALL.into_iter().enumerate() {
            text.sample(
                name,
                &[("result", result.as_str())],
                self.renewals[i].load(Relaxed),
            );
        }
        render_last_seen(&db.devices, &mut text);
        self.devices.render(&mut text);
        text.finish()
    }
}

/// `switchyard_calls` and `switchyard_calls_oldest_age_seconds`, every active state and
/// placement, 0 where there is no call.
fn render_active(active: &[ActiveCalls], text: &mut Exposition) {
    let found = |state: CallState, central: bool| {
        active
            .iter()
            .find(|row| row.state == state.as_str() && row.central == central)
            .map_or((0, 0.0), |row| (row.count, row.oldest_seconds))
    };
    let name = "switchyard_calls";
    text.family(
        name,
        Kind::Gauge,
        "Calls in each active state (awaiting_approval, queued, leased, running), by placement",
    );
    for state in ACTIVE {
        for placement in PLACEMENTS {
            let labels = [("state", state.as_str()), ("placement", placement)];
            text.sample(name, &labels, found(state, placement == "central").0);
        }
    }
    let name = "switchyard_calls_oldest_age_seconds";
    text.family(
        name,
        Kind::Gauge,
        "Seconds since the oldest call in each active state was submitted, by placement",
    );
    for state in ACTIVE {
        for placement in PLACEMENTS {
            let labels = [("state", state.as_str()), ("placement", placement)];
            text.sample(name, &labels, found(state, placement == "central").1);
        }
    }
}

/// `switchyard_device_last_seen_timestamp_seconds`, of devices seen at least once.
fn render_last_seen(devices: &[DeviceSeen], text: &mut Exposition) {
    let name = "switchyard_device_last_seen_timestamp_seconds";
    text.family(
        name,
        Kind::Gauge,
        "When each device that is not revoked was last seen (Unix time; written at most every 30 s); absent if never",
    );
    for device in devices {
        if let Some(at) = device.last_seen_at {
            #[allow(clippy::cast_precision_loss)]
            let at = at.timestamp_millis() as f64 / 1000.0;
            text.sample(name, &[("device", &device.id.to_string())], at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use switchyard_protocol::CallId;

    /// The series of a rendering: each sample line without its value.
    fn series(text: &str) -> BTreeSet<String> {
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.rsplit_once(' ').map(|(series, _)| series.to_owned()))
            .collect()
    }

    /// Ten thousand distinct calls, each its own id, of one tool: their counts change, their
    /// series do not. (Arguments, submitters and request ids never reach a recorder at all.)
    #[test]
    fn ten_thousand_distinct_calls_add_no_series() {
        let metrics = Metrics::default();
        let connection = ConnectionId::new();
        let scraped = Scraped {
            connections: HashMap::from([(connection, "github".to_owned())]),
            ..Scraped::default()
        };
        let started = chrono::Utc::now();
        let call = |state| FinishedCall {
            id: CallId::new(),
            connection_id: connection,
            tool_name: "search".to_owned(),
            kind: CallKind::Tool,
            state,
            started_at: Some(started),
            finished_at: Some(started + chrono::Duration::milliseconds(40)),
        };
        for state in [CallState::Succeeded, CallState::ToolError] {
            metrics.call_completed(&call(state));
        }
        let before = series(&metrics.render(&scraped));
        for i in 0..10_000 {
            metrics.call_submitted(i % 3 == 0);
            metrics.call_leased(RunnerRef::Central, Duration::from_millis(i));
            let state = if i % 2 == 0 {
                CallState::Succeeded
            } else {
                CallState::ToolError
            };
            metrics.call_completed(&call(state));
        }
        let after = metrics.render(&scraped);
        assert_eq!(before, series(&after));
        assert!(after.contains("switchyard_calls_finished_total{state=\"succeeded\"} 5001\n"));
        assert!(after.contains(
            "mcp_server_operation_duration_seconds_count{mcp_method_name=\"tools/call\",\
             connection=\"github\",gen_ai_tool_name=\"search\",error_type=\"tool_error\"} 5001\n"
        ));
    }
}
