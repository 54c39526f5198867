//! Handing a new call straight to a lease that waits for it: a lone submission for a runner
//! whose lease waits on an empty queue (in this process) inserts its call already leased under
//! that lease's epoch and passes the work item to it, so the call costs one row version and one
//! commit where it would cost two (the insert's, then the lease statement's) and the lease is
//! not woken to look.
//!
//! - A waiting lease offers itself here ([`Handoffs::offer`]) for as long as it waits; a
//!   submission claims one offer ([`Handoffs::claim`]) for its one call.
//! - The insert checks in its own statement that the epoch is the runner's live lease, and
//!   records the dispatch target as the lease statement does; under a lease no longer live the
//!   call is queued and announced as any other.
//! - A lease that stops waiting (its deadline, an announcement, the server stopping, its
//!   request dropped) withdraws its offer; if a submission claimed it meanwhile, the lease
//!   takes the call it is given (and, woken by an announcement, looks for the others beside
//!   that insert, so that a queued call does not wait behind it). A call that still finds no
//!   lease — sent to one that was dropped, or claimed by a submission whose lease had gone —
//!   is put back in the queue and announced, so the next lease takes it. Should even that
//!   write fail, the runner's heartbeat finds the leased call it does not hold and it is
//!   queued again then, as for any lease answer lost after its commit.

use super::notices::Announcer;
use crate::db::Datastore;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchyard_protocol::RunnerRef;
use switchyard_protocol::runner::{Epoch, LeasedCall};
use tokio::sync::oneshot;

/// How long a lease whose offer was claimed waits for the call past the moment it stopped
/// waiting: the claimer's insert is a single statement.
const CLAIMED_WAIT: Duration = Duration::from_secs(1);

/// The leases of this process that wait for a call, by runner.
#[derive(Debug)]
pub(crate) struct Handoffs {
    db: Datastore,
    announcer: Arc<Announcer>,
    next_offer: AtomicU64,
    waiting: Mutex<HashMap<RunnerRef, Vec<Offer>>>,
}

/// A waiting lease's offer, as the registry holds it.
#[derive(Debug)]
struct Offer {
    id: u64,
    epoch: Epoch,
    to: oneshot::Sender<LeasedCall>,
}

/// A claim on a waiting lease: one call is to be inserted leased under [`Claim::epoch`] and
/// given to the lease with [`Claim::give`]. Dropped unused, it tells the lease to look.
#[derive(Debug)]
pub(crate) struct Claim {
    epoch: Epoch,
    to: oneshot::Sender<LeasedCall>,
}

/// A waiting lease's side of its offer; dropping it withdraws the offer, and queues again a
/// call it was given but never took.
#[derive(Debug)]
pub(crate) struct OfferSlot<'a> {
    handoffs: &'a Handoffs,
    runner: RunnerRef,
    id: u64,
    from: oneshot::Receiver<LeasedCall>,
}

impl Handoffs {
    /// An empty registry; calls that find no lease are queued again through `db`, and
    /// announced through `announcer`.
    pub(crate) fn new(db: Datastore, announcer: Arc<Announcer>) -> Self {
        Self {
            db,
            announcer,
            next_offer: AtomicU64::new(0),
            waiting: Mutex::default(),
        }
    }

    /// Offers a lease of `runner` under `epoch` that is about to wait for calls.
    pub(crate) fn offer(&self, runner: RunnerRef, epoch: Epoch) -> OfferSlot<'_> {
        let id = self.next_offer.fetch_add(1, Ordering::Relaxed);
        let (to, from) = oneshot::channel();
        self.lock()
            .entry(runner)
            .or_default()
            .push(Offer { id, epoch, to });
        OfferSlot {
            handoffs: self,
            runner,
            id,
            from,
        }
    }

    /// Claims the newest offer of a lease of `runner` that still waits, if there is one.
    pub(crate) fn claim(&self, runner: RunnerRef) -> Option<Claim> {
        let mut waiting = self.lock();
        let offers = waiting.get_mut(&runner)?;
        let claim = loop {
            let Some(offer) = offers.pop() else {
                break None;
            };
            if !offer.to.is_closed() {
                break Some(Claim {
                    epoch: offer.epoch,
                    to: offer.to,
                });
            }
        };
        if offers.is_empty() {
            waiting.remove(&runner);
        }
        claim
    }

    /// Withdraws offer `id` of `runner`: false when a submission claimed it already.
    fn withdraw(&self, runner: RunnerRef, id: u64) -> bool {
        let mut waiting = self.lock();
        let Some(offers) = waiting.get_mut(&runner) else {
            return false;
        };
        let Some(at) = offers.iter().position(|offer| offer.id == id) else {
            return false;
        };
        offers.swap_remove(at);
        if offers.is_empty() {
            waiting.remove(&runner);
        }
        true
    }

    /// Puts `calls`, handed off but never taken by a lease, back in the queue.
    pub(crate) async fn requeue(&self, runner: RunnerRef, calls: &[LeasedCall]) {
        requeue(&self.db, &self.announcer, runner, calls).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RunnerRef, Vec<Offer>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Claim {
    /// The epoch of the lease claimed.
    pub(crate) fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Gives `call` to the lease claimed; hands it back when that lease stopped waiting.
    pub(crate) fn give(self, call: LeasedCall) -> Result<(), Box<LeasedCall>> {
        self.to.send(call).map_err(Box::new)
    }
}

impl OfferSlot<'_> {
    /// The call a submission gives this lease; `None` once the claim is dropped without one
    /// (its call was queued, refused or its request_id taken).
    pub(crate) async fn given(&mut self) -> Option<LeasedCall> {
        (&mut self.from).await.ok()
    }

    /// Withdraws the offer of a lease that stops waiting: false when a submission claimed it
    /// already, and its call is one insert away ([`OfferSlot::given_soon`]).
    pub(crate) fn withdraw(&self) -> bool {
        self.handoffs.withdraw(self.runner, self.id)
    }

    /// [`OfferSlot::given`] for a claimed offer, waiting at most [`CLAIMED_WAIT`] — past the
    /// lease's own wait if need be: the call is one insert away, and a lease that does not
    /// take it makes it go back to the queue.
    pub(crate) async fn given_soon(&mut self) -> Option<LeasedCall> {
        tokio::time::timeout(CLAIMED_WAIT, self.given())
            .await
            .ok()
            .flatten()
    }
}

impl Drop for OfferSlot<'_> {
    fn drop(&mut self) {
        self.handoffs.withdraw(self.runner, self.id);
        self.from.close();
        if let Ok(call) = self.from.try_recv() {
            // Given, but its lease is gone: back to the queue, off this thread's drop.
            let (db, announcer, runner) = (
                self.handoffs.db.clone(),
                Arc::clone(&self.handoffs.announcer),
                self.runner,
            );
            tokio::spawn(async move { requeue(&db, &announcer, runner, &[call]).await });
        }
    }
}

/// Puts `calls`, handed off but never taken by a lease, back in the queue and announces them;
/// should that fail, the runner's heartbeat finds them unheld.
async fn requeue(db: &Datastore, announcer: &Announcer, runner: RunnerRef, calls: &[LeasedCall]) {
    for call in calls {
        match db
            .call_requeue_handed(call.call_id, runner, call.epoch)
            .await
        {
            Ok(requeued) => announcer.send(requeued.wakeups),
            Err(error) => tracing::warn!(
                %error,
                call = %call.call_id,
                "a handed-off call that reached no lease could not be queued again; the runner's heartbeat will"
            ),
        }
    }
}

#[cfg(test)]
impl Handoffs {
    /// A registry for unit tests, whose database they never reach.
    pub(crate) fn unconnected() -> Self {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .expect("a lazy pool");
        let announcer = Announcer {
            local: Arc::default(),
            remote: super::notices::Notices::new(pool.clone()),
        };
        Self::new(Datastore::new(pool), Arc::new(announcer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_protocol::api::ConnectorSpec;
    use switchyard_protocol::runner::ConnectionTarget;
    use switchyard_protocol::{CallId, ConnectionId, DeviceId, RequestId};

    fn work_item(epoch: Epoch) -> LeasedCall {
        LeasedCall {
            traceparent: None,
            call_id: CallId::new(),
            request_id: RequestId::new(),
            epoch,
            connection: ConnectionTarget {
                connection_id: ConnectionId::new(),
                revision: 1,
                spec: ConnectorSpec::Http {
                    url: "http://127.0.0.1:1/mcp".into(),
                },
                accepted_spec_digest: None,
                auth_kind: None,
            },
            tool_name: "echo".into(),
            arguments: serde_json::json!({}),
            timeout_seconds: 30,
            client_session_id: None,
            profile_id: switchyard_protocol::ProfileId::new(),
            submitter: switchyard_protocol::runner::Submitter::User(
                switchyard_protocol::UserId::new(),
            ),
            kind: Default::default(),
        }
    }

    fn device(n: u128) -> RunnerRef {
        RunnerRef::Device(DeviceId(uuid::Uuid::from_u128(n)))
    }

    #[tokio::test]
    async fn an_offer_is_claimed_once_and_receives_the_call_given() {
        let handoffs = Handoffs::unconnected();
        assert!(handoffs.claim(device(1)).is_none(), "nothing waits yet");
        let mut offer = handoffs.offer(device(1), Epoch(3));
        assert!(
            handoffs.claim(device(2)).is_none(),
            "another runner's lease"
        );
        let claim = handoffs.claim(device(1)).expect("the waiting lease");
        assert_eq!(claim.epoch(), Epoch(3));
        assert!(handoffs.claim(device(1)).is_none(), "claimed once");
        let call = work_item(Epoch(3));
        let id = call.call_id;
        claim.give(call).expect("the lease still waits");
        assert_eq!(offer.given().await.map(|call| call.call_id), Some(id));
    }

    #[tokio::test]
    async fn a_withdrawn_offer_is_not_claimed_and_a_claimed_one_waits_for_its_call() {
        let handoffs = Handoffs::unconnected();
        let offer = handoffs.offer(device(1), Epoch(1));
        assert!(offer.withdraw());
        assert!(handoffs.claim(device(1)).is_none(), "withdrawn");

        let mut offer = handoffs.offer(device(1), Epoch(1));
        let claim = handoffs.claim(device(1)).expect("the waiting lease");
        assert!(!offer.withdraw(), "claimed already");
        let call = work_item(Epoch(1));
        let id = call.call_id;
        let (given, ()) = tokio::join!(offer.given_soon(), async move {
            tokio::task::yield_now().await;
            claim.give(call).expect("the lease takes it");
        });
        assert_eq!(given.map(|call| call.call_id), Some(id));
    }

    #[tokio::test]
    async fn a_claim_whose_lease_is_gone_gets_its_call_back() {
        let handoffs = Handoffs::unconnected();
        let offer = handoffs.offer(device(1), Epoch(1));
        let claim = handoffs.claim(device(1)).expect("the waiting lease");
        drop(offer);
        let call = work_item(Epoch(1));
        let id = call.call_id;
        let back = claim.give(call).expect_err("no lease to take it");
        assert_eq!(back.call_id, id);
        assert!(handoffs.claim(device(1)).is_none());
    }

    #[tokio::test]
    async fn a_dropped_claim_tells_its_lease_no_call_comes() {
        let handoffs = Handoffs::unconnected();
        let mut offer = handoffs.offer(device(1), Epoch(1));
        drop(handoffs.claim(device(1)).expect("the waiting lease"));
        assert!(offer.given().await.is_none());
    }
}
