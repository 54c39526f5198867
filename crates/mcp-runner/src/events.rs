//! Session lifecycle events on their way to the control plane.
//!
//! Events are queued without waiting and delivered in order by one reporter task, so a slow
//! control plane never holds up a call or the executor loop, and a session's `SessionStarted`
//! always arrives before its `SessionClosed`.

use crate::control::ControlPlane;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use switchyard_protocol::ConnectionId;
use switchyard_protocol::runner::LifecycleEvent;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Where the executor puts lifecycle events; cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct EventSink {
    events: mpsc::UnboundedSender<LifecycleEvent>,
}

impl EventSink {
    /// Queues `event` for the reporter.
    pub(crate) fn send(&self, event: LifecycleEvent) {
        if self.events.send(event).is_err() {
            // Only after the reporter has stopped, which it does last.
            tracing::debug!("lifecycle event dropped: the reporter has stopped");
        }
    }
}

/// Starts the reporter task for `control`. It ends once every [`EventSink`] is dropped and the
/// queue is empty.
pub(crate) fn spawn_reporter<C: ControlPlane>(control: Arc<C>) -> (EventSink, JoinHandle<()>) {
    let (events, mut queue) = mpsc::unbounded_channel();
    let reporter = tokio::spawn(async move {
        while let Some(event) = queue.recv().await {
            control.report_event(event).await;
        }
    });
    (EventSink { events }, reporter)
}

/// The `ProcessExited` event for stdio server `pid` of `connection_id` ending with `status`.
pub(crate) fn process_exited(
    connection_id: ConnectionId,
    pid: u32,
    status: ExitStatus,
) -> LifecycleEvent {
    LifecycleEvent::ProcessExited {
        connection_id,
        pid,
        status: status.code(),
        signal: status.signal().map(signal_name),
    }
}

/// `SIGTERM` for 15; a number the platform does not name stays a number.
fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map(|signal| signal.as_str().to_owned())
        .unwrap_or_else(|_| format!("signal {signal}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_become_codes_or_signal_names() {
        let connection_id = ConnectionId::new();
        // A raw wait status: exit code in the high byte, terminating signal in the low bits.
        let exited = ExitStatus::from_raw(3 << 8);
        let killed = ExitStatus::from_raw(9);

        assert_eq!(
            process_exited(connection_id, 42, exited),
            LifecycleEvent::ProcessExited {
                connection_id,
                pid: 42,
                status: Some(3),
                signal: None,
            }
        );
        assert_eq!(
            process_exited(connection_id, 42, killed),
            LifecycleEvent::ProcessExited {
                connection_id,
                pid: 42,
                status: None,
                signal: Some("SIGKILL".to_owned()),
            }
        );
    }
}
