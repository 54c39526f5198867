//! Handing a new call straight to a lease that waits for one: a submission for a runner whose
//! lease waits on an empty queue (in this process) inserts its call already leased under that
//! lease's epoch and passes the work item to it, so the call costs one commit where it would
//! cost two (the insert's, then the lease statement's) and the lease is not woken to look.
//!
//! - A waiting lease offers itself here ([`Handoffs::offer`]) for as long as it waits; a
//!   submission claims one offer ([`Handoffs::claim`]), so at most one call goes to a lease.
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

use crate::db::Datastore;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use switchyard_protocol::runner::{Epoch, LeasedCall};
use tokio::sync::oneshot;

/// How long a lease whose offer was claimed waits for the call past the moment it stopped
/// waiting: the claimer's insert is a single statement.
const CLAIMED_WAIT: Duration = Duration::from_secs(1);

/// The leases of this process that wait for a call, by runner.
#[derive(Debug)]
pub(crate) struct Handoffs {
    db: Datastore,
    next_offer: AtomicU64,
    waiting: Mutex<HashMap<String, Vec<Offer>>>,
}

/// A waiting lease's offer, as the registry holds it.
#[derive(Debug)]
struct Offer {
    id: u64,
    epoch: Epoch,
    to: oneshot::Sender<Box<LeasedCall>>,
}

/// A submission's claim on a waiting lease: its call is to be inserted leased under
/// [`Claim::epoch`] and given to the lease with [`Claim::give`].
#[derive(Debug)]
pub(crate) struct Claim {
    id: u64,
    epoch: Epoch,
    to: oneshot::Sender<Box<LeasedCall>>,
}

/// A waiting lease's side of its offer; dropping it withdraws the offer, and queues again a
/// call it was given but never took.
#[derive(Debug)]
pub(crate) struct OfferSlot<'a> {
    handoffs: &'a Handoffs,
    runner_ref: &'a str,
    id: u64,
    from: oneshot::Receiver<Box<LeasedCall>>,
}

impl Handoffs {
    /// An empty registry; calls that find no lease are queued again through `db`.
    pub(crate) fn new(db: Datastore) -> Self {
        Self {
            db,
            next_offer: AtomicU64::new(0),
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// Offers a lease of `runner_ref` under `epoch` that is about to wait for a call.
    pub(crate) fn offer<'a>(&'a self, runner_ref: &'a str, epoch: Epoch) -> OfferSlot<'a> {
        let id = self.next_offer.fetch_add(1, Ordering::Relaxed);
        let (to, from) = oneshot::channel();
        self.lock()
            .entry(runner_ref.to_owned())
            .or_default()
            .push(Offer { id, epoch, to });
        OfferSlot {
            handoffs: self,
            runner_ref,
            id,
            from,
        }
    }

    /// Claims the newest offer of a lease of `runner_ref` that still waits, if there is one.
    pub(crate) fn claim(&self, runner_ref: &str) -> Option<Claim> {
        let mut waiting = self.lock();
        let offers = waiting.get_mut(runner_ref)?;
        let claim = loop {
            let Some(offer) = offers.pop() else {
                break None;
            };
            if !offer.to.is_closed() {
                break Some(Claim {
                    id: offer.id,
                    epoch: offer.epoch,
                    to: offer.to,
                });
            }
        };
        if offers.is_empty() {
            waiting.remove(runner_ref);
        }
        claim
    }

    /// Gives back `claim`, on a lease of `runner_ref`, that its submission did not use (it
    /// inserted nothing): the lease goes on waiting, as if never claimed, unless it stopped.
    pub(crate) fn unclaim(&self, runner_ref: &str, claim: Claim) {
        if claim.to.is_closed() {
            return;
        }
        self.lock()
            .entry(runner_ref.to_owned())
            .or_default()
            .push(Offer {
                id: claim.id,
                epoch: claim.epoch,
                to: claim.to,
            });
    }

    /// Withdraws offer `id` of `runner_ref`: false when a submission claimed it already.
    fn withdraw(&self, runner_ref: &str, id: u64) -> bool {
        let mut waiting = self.lock();
        let Some(offers) = waiting.get_mut(runner_ref) else {
            return false;
        };
        let Some(at) = offers.iter().position(|offer| offer.id == id) else {
            return false;
        };
        offers.swap_remove(at);
        if offers.is_empty() {
            waiting.remove(runner_ref);
        }
        true
    }

    /// Puts `call`, handed off but never taken by a lease, back in the queue.
    pub(crate) async fn requeue(&self, runner_ref: &str, call: &LeasedCall) {
        requeue(&self.db, runner_ref, call).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Offer>>> {
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
        self.to.send(Box::new(call))
    }
}

impl OfferSlot<'_> {
    /// The call a submission gives this lease; `None` once the claim is dropped without one
    /// (the call was queued, refused or taken by an earlier submission of its request_id).
    pub(crate) async fn given(&mut self) -> Option<LeasedCall> {
        (&mut self.from).await.ok().map(|call| *call)
    }

    /// Withdraws the offer of a lease that stops waiting: false when a submission claimed it
    /// already, and its call is one insert away ([`OfferSlot::given_soon`]).
    pub(crate) fn withdraw(&self) -> bool {
        self.handoffs.withdraw(self.runner_ref, self.id)
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
        self.handoffs.withdraw(self.runner_ref, self.id);
        self.from.close();
        if let Ok(call) = self.from.try_recv() {
            // Given, but its lease is gone: back to the queue, off this thread's drop.
            let db = self.handoffs.db.clone();
            let runner_ref = self.runner_ref.to_owned();
            tokio::spawn(async move { requeue(&db, &runner_ref, &call).await });
        }
    }
}

/// Puts `call`, handed off but never taken by a lease, back in the queue; should that fail,
/// the runner's heartbeat finds it unheld.
async fn requeue(db: &Datastore, runner_ref: &str, call: &LeasedCall) {
    if let Err(error) = db
        .call_requeue_handed(call.call_id.0, runner_ref, call.epoch.0)
        .await
    {
        tracing::warn!(
            %error,
            call = %call.call_id.0,
            "a handed-off call that reached no lease could not be queued again; the runner's heartbeat will"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_protocol::api::ConnectorSpec;
    use switchyard_protocol::runner::ConnectionTarget;

    /// A registry whose database is never reached by these tests.
    fn handoffs() -> Handoffs {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .expect("a lazy pool");
        Handoffs::new(Datastore::new(pool))
    }

    fn work_item(epoch: Epoch) -> LeasedCall {
        LeasedCall {
            call_id: uuid::Uuid::now_v7().into(),
            request_id: uuid::Uuid::now_v7().into(),
            epoch,
            connection: ConnectionTarget {
                connection_id: uuid::Uuid::now_v7().into(),
                revision: 1,
                spec: ConnectorSpec::Http {
                    url: "http://127.0.0.1:1/mcp".into(),
                },
            },
            tool_name: "echo".into(),
            arguments: serde_json::json!({}),
            timeout_seconds: 30,
            client_session_id: None,
        }
    }

    #[tokio::test]
    async fn an_offer_is_claimed_once_and_receives_the_call_given() {
        let handoffs = handoffs();
        assert!(handoffs.claim("device:a").is_none(), "nothing waits yet");
        let mut offer = handoffs.offer("device:a", Epoch(3));
        assert!(
            handoffs.claim("device:b").is_none(),
            "another runner's lease"
        );
        let claim = handoffs.claim("device:a").expect("the waiting lease");
        assert_eq!(claim.epoch(), Epoch(3));
        assert!(handoffs.claim("device:a").is_none(), "claimed once");
        let call = work_item(Epoch(3));
        let id = call.call_id;
        claim.give(call).expect("the lease still waits");
        assert_eq!(offer.given().await.map(|c| c.call_id), Some(id));
    }

    #[tokio::test]
    async fn an_offer_given_back_unused_is_claimed_again_and_withdrawn_as_one_never_claimed() {
        let handoffs = handoffs();
        let mut offer = handoffs.offer("device:a", Epoch(5));
        let claim = handoffs.claim("device:a").expect("the waiting lease");
        handoffs.unclaim("device:a", claim);
        let claim = handoffs.claim("device:a").expect("waiting again");
        assert_eq!(claim.epoch(), Epoch(5));
        let call = work_item(Epoch(5));
        let id = call.call_id;
        claim.give(call).expect("the lease still waits");
        assert_eq!(offer.given().await.map(|c| c.call_id), Some(id));

        let other = handoffs.offer("device:a", Epoch(6));
        handoffs.unclaim("device:a", handoffs.claim("device:a").unwrap());
        assert!(other.withdraw(), "given back, it was never claimed");
        assert!(handoffs.claim("device:a").is_none());
        drop(other);
        // A lease that stopped waiting is not offered again by a claim given back.
        let gone = handoffs.offer("device:b", Epoch(7));
        let claim = handoffs.claim("device:b").unwrap();
        drop(gone);
        handoffs.unclaim("device:b", claim);
        assert!(handoffs.claim("device:b").is_none());
    }

    #[tokio::test]
    async fn a_withdrawn_offer_is_not_claimed_and_a_claimed_one_waits_for_its_call() {
        let handoffs = handoffs();
        let offer = handoffs.offer("device:a", Epoch(1));
        assert!(offer.withdraw());
        assert!(handoffs.claim("device:a").is_none(), "withdrawn");

        let mut offer = handoffs.offer("device:a", Epoch(1));
        let claim = handoffs.claim("device:a").expect("the waiting lease");
        assert!(!offer.withdraw(), "claimed already");
        let call = work_item(Epoch(1));
        let id = call.call_id;
        let (given, ()) = tokio::join!(offer.given_soon(), async move {
            tokio::task::yield_now().await;
            claim.give(call).expect("the lease takes it");
        });
        assert_eq!(given.map(|c| c.call_id), Some(id));
    }

    #[tokio::test]
    async fn a_claim_whose_lease_is_gone_gets_its_call_back() {
        let handoffs = handoffs();
        let offer = handoffs.offer("device:a", Epoch(1));
        let claim = handoffs.claim("device:a").expect("the waiting lease");
        drop(offer);
        let call = work_item(Epoch(1));
        let id = call.call_id;
        let back = claim.give(call).expect_err("no lease to take it");
        assert_eq!(back.call_id, id);
        assert!(handoffs.claim("device:a").is_none());
    }

    #[tokio::test]
    async fn a_dropped_claim_tells_its_lease_no_call_comes() {
        let handoffs = handoffs();
        let mut offer = handoffs.offer("device:a", Epoch(1));
        drop(handoffs.claim("device:a").expect("the waiting lease"));
        assert!(offer.given().await.is_none());
    }
}
