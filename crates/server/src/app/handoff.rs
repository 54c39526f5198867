//! Handing new calls straight to a lease that waits for them: a submission — or a batch of
//! them — for a runner whose lease waits on an empty queue (in this process) inserts its calls
//! already leased under that lease's epoch and passes the work items to it, so a call costs one
//! row version and one commit where it would cost two (the insert's, then the lease
//! statement's) and the lease is not woken to look.
//!
//! - A waiting lease offers itself here ([`Handoffs::offer`]), with its room, for as long as it
//!   waits; a submission or a batch claims one offer ([`Handoffs::claim`]) for as many calls as
//!   it has for that runner, up to the lease's room, so one insert at most fills a lease and
//!   the lease knows how much room the claim left it.
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
    waiting: Mutex<Registry>,
}

/// The offers of the leases that wait, and how many calls each claimed one was claimed for.
#[derive(Debug, Default)]
struct Registry {
    offers: HashMap<String, Vec<Offer>>,
    /// By offer id, until the lease that made the offer stops waiting.
    claimed: HashMap<u64, usize>,
}

impl Registry {
    /// Withdraws offer `id` of `runner_ref`: false when it is not here (claimed).
    fn withdraw(&mut self, runner_ref: &str, id: u64) -> bool {
        let Some(offers) = self.offers.get_mut(runner_ref) else {
            return false;
        };
        let Some(at) = offers.iter().position(|offer| offer.id == id) else {
            return false;
        };
        offers.swap_remove(at);
        if offers.is_empty() {
            self.offers.remove(runner_ref);
        }
        true
    }
}

/// A waiting lease's offer, as the registry holds it.
#[derive(Debug)]
struct Offer {
    id: u64,
    epoch: Epoch,
    room: usize,
    to: oneshot::Sender<Vec<LeasedCall>>,
}

/// A claim on a waiting lease: at most [`Claim::room`] calls are to be inserted leased under
/// [`Claim::epoch`] and given to the lease, together, with [`Claim::give`].
#[derive(Debug)]
pub(crate) struct Claim {
    id: u64,
    epoch: Epoch,
    /// The room of the lease's offer.
    offered: usize,
    /// The calls claimed, at most `offered`.
    room: usize,
    to: oneshot::Sender<Vec<LeasedCall>>,
}

/// A waiting lease's side of its offer; dropping it withdraws the offer, and queues again a
/// call it was given but never took.
#[derive(Debug)]
pub(crate) struct OfferSlot<'a> {
    handoffs: &'a Handoffs,
    runner_ref: &'a str,
    id: u64,
    from: oneshot::Receiver<Vec<LeasedCall>>,
}

impl Handoffs {
    /// An empty registry; calls that find no lease are queued again through `db`.
    pub(crate) fn new(db: Datastore) -> Self {
        Self {
            db,
            next_offer: AtomicU64::new(0),
            waiting: Mutex::new(Registry::default()),
        }
    }

    /// Offers a lease of `runner_ref` under `epoch`, with room for `room` calls (at least
    /// one), that is about to wait for calls.
    pub(crate) fn offer<'a>(
        &'a self,
        runner_ref: &'a str,
        epoch: Epoch,
        room: usize,
    ) -> OfferSlot<'a> {
        let id = self.next_offer.fetch_add(1, Ordering::Relaxed);
        let (to, from) = oneshot::channel();
        self.lock()
            .offers
            .entry(runner_ref.to_owned())
            .or_default()
            .push(Offer {
                id,
                epoch,
                room: room.max(1),
                to,
            });
        OfferSlot {
            handoffs: self,
            runner_ref,
            id,
            from,
        }
    }

    /// Claims the newest offer of a lease of `runner_ref` that still waits, if there is one,
    /// for `calls` calls (at least one; no more than the lease has room for).
    pub(crate) fn claim(&self, runner_ref: &str, calls: usize) -> Option<Claim> {
        let mut registry = self.lock();
        let Registry { offers, claimed } = &mut *registry;
        let offers = offers.get_mut(runner_ref)?;
        let claim = loop {
            let Some(offer) = offers.pop() else {
                break None;
            };
            if !offer.to.is_closed() {
                let room = calls.clamp(1, offer.room);
                claimed.insert(offer.id, room);
                break Some(Claim {
                    id: offer.id,
                    epoch: offer.epoch,
                    offered: offer.room,
                    room,
                    to: offer.to,
                });
            }
        };
        if offers.is_empty() {
            registry.offers.remove(runner_ref);
        }
        claim
    }

    /// Gives back `claim`, on a lease of `runner_ref`, that its submission did not use (it
    /// gave it nothing): the lease goes on waiting, as if never claimed, unless it stopped.
    pub(crate) fn unclaim(&self, runner_ref: &str, claim: Claim) {
        if claim.to.is_closed() {
            return;
        }
        let mut registry = self.lock();
        registry.claimed.remove(&claim.id);
        registry
            .offers
            .entry(runner_ref.to_owned())
            .or_default()
            .push(Offer {
                id: claim.id,
                epoch: claim.epoch,
                room: claim.offered,
                to: claim.to,
            });
    }

    /// Withdraws offer `id` of `runner_ref`: false when a submission claimed it already.
    fn withdraw(&self, runner_ref: &str, id: u64) -> bool {
        self.lock().withdraw(runner_ref, id)
    }

    /// How many calls offer `id` was claimed for (0 when it was not claimed).
    fn claimed(&self, id: u64) -> usize {
        self.lock().claimed.get(&id).copied().unwrap_or(0)
    }

    /// Forgets offer `id` of `runner_ref`, whose lease stops waiting: withdrawn, or the count
    /// of its claim dropped.
    fn forget(&self, runner_ref: &str, id: u64) {
        let mut registry = self.lock();
        if !registry.withdraw(runner_ref, id) {
            registry.claimed.remove(&id);
        }
    }

    /// Puts `calls`, handed off but never taken by a lease, back in the queue.
    pub(crate) async fn requeue(&self, runner_ref: &str, calls: &[LeasedCall]) {
        requeue(&self.db, runner_ref, calls).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Claim {
    /// The epoch of the lease claimed.
    pub(crate) fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// How many calls are claimed (at least one, at most the lease's room).
    pub(crate) fn room(&self) -> usize {
        self.room
    }

    /// Gives `calls` (no more than [`Claim::room`]) to the lease claimed; hands them back when
    /// that lease stopped waiting.
    pub(crate) fn give(self, calls: Vec<LeasedCall>) -> Result<(), Vec<LeasedCall>> {
        debug_assert!(calls.len() <= self.room);
        self.to.send(calls)
    }
}

impl OfferSlot<'_> {
    /// The calls a submission gives this lease; `None` once the claim is dropped without any
    /// (its calls were queued, refused or taken by earlier submissions of their request_ids).
    pub(crate) async fn given(&mut self) -> Option<Vec<LeasedCall>> {
        (&mut self.from)
            .await
            .ok()
            .filter(|calls| !calls.is_empty())
    }

    /// Withdraws the offer of a lease that stops waiting: false when a submission claimed it
    /// already, and its calls are one insert away ([`OfferSlot::given_soon`]).
    pub(crate) fn withdraw(&self) -> bool {
        self.handoffs.withdraw(self.runner_ref, self.id)
    }

    /// How many calls the claim on this offer is for, once [`OfferSlot::withdraw`] found it
    /// claimed: the lease's room beyond them is its own.
    pub(crate) fn claimed(&self) -> usize {
        self.handoffs.claimed(self.id)
    }

    /// [`OfferSlot::given`] for a claimed offer, waiting at most [`CLAIMED_WAIT`] — past the
    /// lease's own wait if need be: the calls are one insert away, and a lease that does not
    /// take them makes them go back to the queue.
    pub(crate) async fn given_soon(&mut self) -> Option<Vec<LeasedCall>> {
        tokio::time::timeout(CLAIMED_WAIT, self.given())
            .await
            .ok()
            .flatten()
    }
}

impl Drop for OfferSlot<'_> {
    fn drop(&mut self) {
        self.handoffs.forget(self.runner_ref, self.id);
        self.from.close();
        if let Ok(calls) = self.from.try_recv() {
            // Given, but its lease is gone: back to the queue, off this thread's drop.
            let db = self.handoffs.db.clone();
            let runner_ref = self.runner_ref.to_owned();
            tokio::spawn(async move { requeue(&db, &runner_ref, &calls).await });
        }
    }
}

/// Puts `calls`, handed off but never taken by a lease, back in the queue; should that fail,
/// the runner's heartbeat finds them unheld.
async fn requeue(db: &Datastore, runner_ref: &str, calls: &[LeasedCall]) {
    for call in calls {
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
}

#[cfg(test)]
impl Handoffs {
    /// A registry for unit tests, whose database they never reach.
    pub(crate) fn unconnected() -> Self {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .expect("a lazy pool");
        Self::new(Datastore::new(pool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_protocol::api::ConnectorSpec;
    use switchyard_protocol::runner::ConnectionTarget;

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

    fn ids(calls: &[LeasedCall]) -> Vec<switchyard_protocol::ids::CallId> {
        calls.iter().map(|call| call.call_id).collect()
    }

    #[tokio::test]
    async fn a_claim_carries_its_lease_room_and_gives_it_several_calls() {
        let handoffs = Handoffs::unconnected();
        let mut offer = handoffs.offer("central", Epoch(2), 3);
        let claim = handoffs.claim("central", 5).expect("the waiting lease");
        assert_eq!(claim.room(), 3, "no more than the lease's room");
        let calls: Vec<LeasedCall> = (0..3).map(|_| work_item(Epoch(2))).collect();
        let sent = ids(&calls);
        claim.give(calls).expect("the lease still waits");
        assert_eq!(offer.given().await.map(|calls| ids(&calls)), Some(sent));
    }

    #[tokio::test]
    async fn a_lease_whose_offer_was_claimed_knows_the_room_the_claim_took() {
        let handoffs = Handoffs::unconnected();
        let offer = handoffs.offer("central", Epoch(2), 8);
        let claim = handoffs.claim("central", 3).expect("the waiting lease");
        assert_eq!(claim.room(), 3);
        assert!(!offer.withdraw(), "claimed");
        assert_eq!(offer.claimed(), 3);
        // Given back unused, the offer has its whole room again.
        handoffs.unclaim("central", claim);
        assert_eq!(offer.claimed(), 0);
        assert_eq!(handoffs.claim("central", 20).map(|c| c.room()), Some(8));
    }

    #[tokio::test]
    async fn a_claim_given_no_calls_tells_its_lease_none_came() {
        let handoffs = Handoffs::unconnected();
        let mut offer = handoffs.offer("central", Epoch(2), 4);
        let claim = handoffs.claim("central", 1).expect("the waiting lease");
        claim.give(Vec::new()).expect("the lease still waits");
        assert!(offer.given().await.is_none());
    }

    #[tokio::test]
    async fn an_offer_is_claimed_once_and_receives_the_call_given() {
        let handoffs = Handoffs::unconnected();
        assert!(handoffs.claim("device:a", 1).is_none(), "nothing waits yet");
        let mut offer = handoffs.offer("device:a", Epoch(3), 1);
        assert!(
            handoffs.claim("device:b", 1).is_none(),
            "another runner's lease"
        );
        let claim = handoffs.claim("device:a", 1).expect("the waiting lease");
        assert_eq!(claim.epoch(), Epoch(3));
        assert!(handoffs.claim("device:a", 1).is_none(), "claimed once");
        let call = work_item(Epoch(3));
        let id = call.call_id;
        claim.give(vec![call]).expect("the lease still waits");
        assert_eq!(offer.given().await.map(|calls| ids(&calls)), Some(vec![id]));
    }

    #[tokio::test]
    async fn an_offer_given_back_unused_is_claimed_again_and_withdrawn_as_one_never_claimed() {
        let handoffs = Handoffs::unconnected();
        let mut offer = handoffs.offer("device:a", Epoch(5), 1);
        let claim = handoffs.claim("device:a", 1).expect("the waiting lease");
        handoffs.unclaim("device:a", claim);
        let claim = handoffs.claim("device:a", 1).expect("waiting again");
        assert_eq!(claim.epoch(), Epoch(5));
        let call = work_item(Epoch(5));
        let id = call.call_id;
        claim.give(vec![call]).expect("the lease still waits");
        assert_eq!(offer.given().await.map(|calls| ids(&calls)), Some(vec![id]));

        let other = handoffs.offer("device:a", Epoch(6), 1);
        handoffs.unclaim("device:a", handoffs.claim("device:a", 1).unwrap());
        assert!(other.withdraw(), "given back, it was never claimed");
        assert!(handoffs.claim("device:a", 1).is_none());
        drop(other);
        // A lease that stopped waiting is not offered again by a claim given back.
        let gone = handoffs.offer("device:b", Epoch(7), 1);
        let claim = handoffs.claim("device:b", 1).unwrap();
        drop(gone);
        handoffs.unclaim("device:b", claim);
        assert!(handoffs.claim("device:b", 1).is_none());
    }

    #[tokio::test]
    async fn a_withdrawn_offer_is_not_claimed_and_a_claimed_one_waits_for_its_call() {
        let handoffs = Handoffs::unconnected();
        let offer = handoffs.offer("device:a", Epoch(1), 1);
        assert!(offer.withdraw());
        assert!(handoffs.claim("device:a", 1).is_none(), "withdrawn");

        let mut offer = handoffs.offer("device:a", Epoch(1), 1);
        let claim = handoffs.claim("device:a", 1).expect("the waiting lease");
        assert!(!offer.withdraw(), "claimed already");
        let call = work_item(Epoch(1));
        let id = call.call_id;
        let (given, ()) = tokio::join!(offer.given_soon(), async move {
            tokio::task::yield_now().await;
            claim.give(vec![call]).expect("the lease takes it");
        });
        assert_eq!(given.map(|calls| ids(&calls)), Some(vec![id]));
    }

    #[tokio::test]
    async fn a_claim_whose_lease_is_gone_gets_its_call_back() {
        let handoffs = Handoffs::unconnected();
        let offer = handoffs.offer("device:a", Epoch(1), 1);
        let claim = handoffs.claim("device:a", 1).expect("the waiting lease");
        drop(offer);
        let call = work_item(Epoch(1));
        let id = call.call_id;
        let back = claim.give(vec![call]).expect_err("no lease to take it");
        assert_eq!(ids(&back), vec![id]);
        assert!(handoffs.claim("device:a", 1).is_none());
    }

    #[tokio::test]
    async fn a_dropped_claim_tells_its_lease_no_call_comes() {
        let handoffs = Handoffs::unconnected();
        let mut offer = handoffs.offer("device:a", Epoch(1), 1);
        drop(handoffs.claim("device:a", 1).expect("the waiting lease"));
        assert!(offer.given().await.is_none());
    }
}
