//! What this device agreed to run. Every leased call carries the spec digest the device's
//! owner accepted for its connection (`ConnectionTarget::accepted_spec_digest`); the runner
//! computes the digest of the spec it actually received and runs the call only when the two
//! are equal. Otherwise the call fails — `spec_changed`, or `placement_pending` when nothing
//! was accepted — before its credentials are resolved, a session is opened or a start is
//! asked for: nothing starts and nothing credential-bearing is sent.
//!
//! Beside that check, the outbox keeps a pin per connection: the digest of the spec this
//! device last ran ([`crate::outbox::Outbox::spec_pins`]). A spec that differs from the pin
//! runs only through the check above (a matching accepted digest), and the change is pinned
//! and logged with both digests before anything starts, so the device's own record says when
//! what it runs changed. See docs/ACCESS.md for what this protects against and what not.

use crate::launch::{
    LaunchFuture, LaunchResolver, NoticeFuture, RenewFuture, ResolveLaunch, SessionLaunch,
};
use crate::outbox::{Outbox, OutboxError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use switchyard_protocol::ConnectionId;
use switchyard_protocol::api::{CallError, SpecDigest};
use switchyard_protocol::runner::LeasedCall;

/// The pins of one outbox, read once and kept in memory; written through on a change.
pub(crate) struct SpecPins {
    outbox: Arc<Outbox>,
    pinned: Mutex<HashMap<ConnectionId, SpecDigest>>,
}

impl SpecPins {
    /// The pins `outbox` holds.
    pub(crate) fn load(outbox: Arc<Outbox>) -> Result<Self, OutboxError> {
        let pinned = Mutex::new(outbox.spec_pins()?);
        Ok(Self { outbox, pinned })
    }

    /// `resolver`, run only for a call whose spec passes [`SpecPins::check`].
    pub(crate) fn guard(self: Arc<Self>, resolver: LaunchResolver) -> LaunchResolver {
        Arc::new(Pinned {
            pins: self,
            inner: resolver,
        })
    }

    /// Whether `call` may run: its spec's digest is the one the owner accepted. A spec other
    /// than the pinned one is pinned before the call goes on.
    fn check(&self, call: &LeasedCall) -> Result<(), CallError> {
        let target = &call.connection;
        let received = target.spec.digest();
        match &target.accepted_spec_digest {
            Some(accepted) if *accepted == received => {}
            Some(accepted) => {
                tracing::warn!(connection = %target.connection_id, %received, %accepted, "refusing a call: its spec is not the one the device's owner accepted");
                return Err(CallError::new(
                    "spec_changed",
                    format!(
                        "the connector's spec (digest {received}) is not the one the device's owner accepted ({accepted}); nothing was started, and the owner must accept the new spec"
                    ),
                ));
            }
            None => {
                tracing::warn!(connection = %target.connection_id, %received, "refusing a call: the device's owner has not accepted its connection");
                return Err(CallError::new(
                    "placement_pending",
                    "the device's owner has not accepted this connection on the device; nothing was started".to_owned(),
                ));
            }
        }
        let mut pinned = self.pinned.lock().unwrap_or_else(PoisonError::into_inner);
        let previous = pinned.get(&target.connection_id);
        if previous == Some(&received) {
            return Ok(());
        }
        if let Err(error) = self.outbox.pin_spec(target.connection_id, &received) {
            return Err(CallError::new(
                "outbox_failed",
                format!(
                    "cannot pin the connection's spec in the outbox: {error}; nothing was started"
                ),
            ));
        }
        match previous {
            Some(previous) => {
                tracing::warn!(connection = %target.connection_id, %previous, now = %received, "running a new spec for this connection, accepted by the device's owner");
            }
            None => {
                tracing::info!(connection = %target.connection_id, digest = %received, "pinned the spec this device runs for the connection");
            }
        }
        pinned.insert(target.connection_id, received);
        Ok(())
    }
}

/// A resolver run only for calls whose spec passes [`SpecPins::check`].
struct Pinned {
    pins: Arc<SpecPins>,
    inner: LaunchResolver,
}

impl ResolveLaunch for Pinned {
    fn launch(&self, call: &LeasedCall) -> LaunchFuture {
        match self.pins.check(call) {
            Ok(()) => self.inner.launch(call),
            Err(error) => Box::pin(async move { Err(error) }),
        }
    }

    fn renew(&self, call: &LeasedCall, refused: &SessionLaunch) -> RenewFuture {
        match self.pins.check(call) {
            Ok(()) => self.inner.renew(call, refused),
            Err(error) => Box::pin(async move { Some(Err(error)) }),
        }
    }

    fn refused_renewed(&self, call: &LeasedCall) -> NoticeFuture {
        self.inner.refused_renewed(call)
    }
}
