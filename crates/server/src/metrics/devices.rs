//! What device runners tell this process when they poll: when each last did, and the depth of
//! its receipt outbox. Each replica knows the runners that talk to it; a device silent here
//! for [`DEVICE_REPORT_TTL`] is forgotten (its `last_seen` gauge, read from the database, keeps
//! telling). A poll takes a short lock on a map with one entry per device: it happens once a
//! heartbeat (every ~10 s) or lease request of each device, not once a call.

use super::text::{Exposition, Kind};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};
use switchyard_protocol::DeviceId;

/// How long a device's last report is kept without another.
pub const DEVICE_REPORT_TTL: Duration = Duration::from_secs(600);

#[derive(Clone, Copy, Debug)]
struct Report {
    at: Instant,
    outbox: Option<u32>,
}

/// The latest report of each device that polled this process lately.
#[derive(Debug, Default)]
pub(super) struct DeviceReports {
    reports: Mutex<HashMap<DeviceId, Report>>,
}

impl DeviceReports {
    /// A poll from `device` now; `outbox` when the poll reported it (a heartbeat of a runner
    /// that reports it), else the last one reported stays.
    pub(super) fn polled(&self, device: DeviceId, outbox: Option<u32>) {
        let at = Instant::now();
        let mut reports = self.reports.lock().unwrap_or_else(PoisonError::into_inner);
        let report = reports.entry(device).or_insert(Report { at, outbox: None });
        report.at = at;
        if outbox.is_some() {
            report.outbox = outbox;
        }
    }

    /// The poll lag and outbox gauges, after forgetting devices silent for longer than
    /// [`DEVICE_REPORT_TTL`].
    pub(super) fn render(&self, text: &mut Exposition) {
        let reports: Vec<(String, Report)> = {
            let mut reports = self.reports.lock().unwrap_or_else(PoisonError::into_inner);
            reports.retain(|_, report| report.at.elapsed() < DEVICE_REPORT_TTL);
            reports
                .iter()
                .map(|(device, report)| (device.to_string(), *report))
                .collect()
        };
        let lag = "switchyard_device_poll_lag_seconds";
        text.family(
            lag,
            Kind::Gauge,
            "Seconds since the device's runner last polled this server process (heartbeat or lease request)",
        );
        for (device, report) in &reports {
            let seconds = report.at.elapsed().as_secs_f64();
            text.sample(lag, &[("device", device)], seconds);
        }
        let outbox = "switchyard_device_outbox_receipts";
        text.family(
            outbox,
            Kind::Gauge,
            "Receipts in the device runner's outbox not yet acknowledged, as its last heartbeat reported",
        );
        for (device, report) in &reports {
            if let Some(depth) = report.outbox {
                text.sample(outbox, &[("device", device)], depth);
            }
        }
    }
}
