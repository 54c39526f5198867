//! Resolving and inserting submitted calls. Group commit: submissions that arrive while a
//! batch of inserts is being written share the next one, one statement and one commit for all
//! of them (see [`crate::batcher`]); their resolves share batches too, one statement for each,
//! whether inserts are batched or not (a resolve only reads). A lone submission is resolved and
//! inserted at once, by the single-row statements — or by the statement that resolves it, when
//! it was made from a remembered resolve (see [`super::resolves`]). When a lease of its runner
//! waits in this process, a call is inserted already leased and handed to that lease (see
//! [`super::handoff`]): a lone one, or as many of a batch as the lease has room for.

use super::handoff::{Claim, Handoffs};
use super::leasing::{lease_refusal, work_item};
use super::reconcile::central_bindings;
use crate::batcher::Batcher;
use crate::db::{
    CallOrigin, CallRow, Datastore, HandedRow, HandedTo, LeasedRow, NewCall, ResolveRequest,
    Speculated, SubmitContext, SubmitKeys,
};
use crate::error::{AppError, AppResult};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use switchyard_protocol::api::CENTRAL_RUNNER;

/// One submission's insert and its answer: the inserted row, or `None` when its request_id
/// was taken.
type Insert = Batcher<(NewCall, CallOrigin), Result<Option<CallRow>, sqlx::Error>>;

/// One submission's resolve and what it read (see [`Datastore::call_submit_resolve`]).
type Resolve = Batcher<ResolveRequest, Result<Option<SubmitContext>, sqlx::Error>>;

/// Where submitted calls are resolved and inserted.
pub(super) struct Submissions {
    resolves: Resolve,
    inserts: Inserts,
    db: Datastore,
    handoffs: Arc<Handoffs>,
    /// The central credentials file, whose bindings are part of a central call's target.
    credentials_file: Option<PathBuf>,
    /// Submissions being inserted now: a lone one is handed off by its own statement; the
    /// others share batches, which hand off theirs together, so that a busy server keeps its
    /// group commit.
    inserting: AtomicUsize,
}

/// How submitted calls are inserted: together, or each on its own.
enum Inserts {
    /// Inserts each call by its own statement.
    OneByOne,
    /// Inserts the calls that wait at the same moment together.
    Batched(Insert),
}

/// Most resolves read together. A resolve only reads, so resolves are batched whatever
/// `--submit-batch-max` says of inserts.
const RESOLVE_BATCH_MAX: usize = 64;

impl Submissions {
    /// Batches of at most `max` inserts (1 inserts each on its own), handing calls to the
    /// leases waiting in `handoffs`.
    pub(super) fn new(
        db: &Datastore,
        max: usize,
        handoffs: Arc<Handoffs>,
        credentials_file: Option<PathBuf>,
    ) -> Self {
        let inserts = if max <= 1 {
            Inserts::OneByOne
        } else {
            let (db, handoffs, credentials_file) =
                (db.clone(), handoffs.clone(), credentials_file.clone());
            Inserts::Batched(Batcher::spawn(max, move |calls| {
                insert_batch(
                    db.clone(),
                    handoffs.clone(),
                    credentials_file.clone(),
                    calls,
                )
            }))
        };
        let resolving = db.clone();
        Self {
            resolves: Batcher::spawn(RESOLVE_BATCH_MAX, move |requests| {
                resolve_batch(resolving.clone(), requests)
            }),
            inserts,
            db: db.clone(),
            handoffs,
            credentials_file,
            inserting: AtomicUsize::new(0),
        }
    }

    /// What a submission naming `keys` decides on (see [`Datastore::call_submit_resolve`]),
    /// with its fingerprint when `fingerprinted`: read with the others that wait at the same
    /// moment.
    pub(super) async fn resolve(
        &self,
        keys: &SubmitKeys<'_>,
        fingerprinted: bool,
    ) -> AppResult<Option<SubmitContext>> {
        match self
            .resolves
            .submit(ResolveRequest::new(keys, fingerprinted))
            .await
        {
            Some(read) => Ok(read?),
            None => Err(AppError::Internal(
                "the submissions' batched resolves stopped".into(),
            )),
        }
    }

    /// Inserts `call` unless its request_id is taken (see [`Datastore::call_insert_from`]).
    pub(super) async fn insert(
        &self,
        call: NewCall,
        origin: CallOrigin,
    ) -> AppResult<Option<CallRow>> {
        let inserting = Inserting::enter(&self.inserting);
        // A receipt lookup's lease reads the call it looks up; it is never handed off.
        if inserting.alone
            && origin.lookup_of.is_none()
            && let Some(claim) = self.handoffs.claim(&call.runner_ref, 1)
        {
            return self.hand_off(call, origin, claim).await;
        }
        match &self.inserts {
            Inserts::OneByOne => Ok(self.db.call_insert_from(&call, origin).await?),
            Inserts::Batched(insert) => match insert.submit((call, origin)).await {
                Some(inserted) => Ok(inserted?),
                None => Err(AppError::Internal(
                    "the submissions' batched inserts stopped".into(),
                )),
            },
        }
    }

    /// A lone submission's place among those being inserted: `None` when others are being
    /// inserted (a submission then shares their batches).
    pub(super) fn lone(&self) -> Option<Inserting<'_>> {
        let inserting = Inserting::enter(&self.inserting);
        inserting.alone.then_some(inserting)
    }

    /// Inserts the call of a lone submission (`_lone` holds its place) — made from a resolve of
    /// `keys` whose fingerprint was `fingerprint` — in the statement that resolves `keys`
    /// again, if that resolve reads the same; handed to a lease of its runner that waits here,
    /// as [`Submissions::insert`] hands a lone call.
    pub(super) async fn insert_speculated(
        &self,
        _lone: Inserting<'_>,
        keys: &SubmitKeys<'_>,
        fingerprint: &str,
        call: NewCall,
        origin: CallOrigin,
    ) -> AppResult<Speculated<CallRow>> {
        let claim = self.handoffs.claim(&call.runner_ref, 1);
        let bindings = match claim {
            Some(_) => central_bindings_for(&call.runner_ref, self.credentials_file.as_deref()),
            None => Value::Null,
        };
        let epoch = claim.as_ref().map(|claim| claim.epoch().0);
        let speculated = self
            .db
            .call_submit_speculated(keys, fingerprint, &call, origin, epoch, &bindings)
            .await?;
        Ok(match speculated {
            Speculated::Inserted(handed) => {
                Speculated::Inserted(self.deliver(handed, claim).await?)
            }
            // Nothing inserted (a replay, say): the lease waits on, unclaimed, rather than
            // wake to look.
            Speculated::Read(found) => {
                if let Some(claim) = claim {
                    self.handoffs.unclaim(&call.runner_ref, claim);
                }
                Speculated::Read(found)
            }
        })
    }

    /// Inserts `call` leased to the lease `claim` holds and gives it to that lease; queued as
    /// any other when that lease is no longer live.
    async fn hand_off(
        &self,
        call: NewCall,
        origin: CallOrigin,
        claim: Claim,
    ) -> AppResult<Option<CallRow>> {
        let bindings = central_bindings_for(&call.runner_ref, self.credentials_file.as_deref());
        let epoch = claim.epoch();
        match self
            .db
            .call_insert_handed(&call, origin, epoch.0, &bindings)
            .await?
        {
            Some(handed) => Ok(Some(self.deliver(handed, Some(claim)).await?)),
            None => Ok(None),
        }
    }

    /// Gives a call inserted leased under `claim`'s epoch to that lease (see [`hand_over`]).
    async fn deliver(&self, handed: HandedRow, claim: Option<Claim>) -> AppResult<CallRow> {
        let HandedRow { call: row, leased } = handed;
        if let (Some(leased), Some(claim)) = (leased, claim) {
            hand_over(
                &self.db,
                &self.handoffs,
                &row.runner_ref,
                claim,
                vec![leased],
            )
            .await?;
        }
        Ok(row)
    }
}

/// The central credential bindings that are part of the dispatch target of a call of
/// `runner_ref` inserted leased (none for a device's call).
fn central_bindings_for(runner_ref: &str, credentials_file: Option<&std::path::Path>) -> Value {
    if runner_ref == CENTRAL_RUNNER {
        central_bindings(credentials_file)
    } else {
        Value::Null
    }
}

/// Gives the calls inserted leased under `claim`'s epoch to that lease. A call the lease's
/// checks refuse is failed, as a lease fails it; calls whose lease stopped waiting meanwhile
/// are queued again. A claim given none tells its lease to look.
async fn hand_over(
    db: &Datastore,
    handoffs: &Handoffs,
    runner_ref: &str,
    claim: Claim,
    leased: Vec<LeasedRow>,
) -> Result<(), sqlx::Error> {
    let epoch = claim.epoch();
    let mut items = Vec::with_capacity(leased.len());
    let mut failed = Ok(());
    for row in leased {
        match lease_refusal(&row) {
            None => items.push(work_item(row, epoch)),
            Some((code, message)) => {
                if let Err(error) = db.call_fail_leased(row.id, epoch.0, code, message).await {
                    failed = Err(error);
                }
            }
        }
    }
    if let Err(calls) = claim.give(items) {
        handoffs.requeue(runner_ref, &calls).await;
    }
    failed
}

/// One submission being inserted, counted in [`Submissions::inserting`] while it lives.
pub(super) struct Inserting<'a> {
    count: &'a AtomicUsize,
    /// No other submission was being inserted when it began.
    alone: bool,
}

impl<'a> Inserting<'a> {
    fn enter(count: &'a AtomicUsize) -> Self {
        let alone = count.fetch_add(1, Ordering::AcqRel) == 0;
        Self { count, alone }
    }
}

impl Drop for Inserting<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Resolves `requests` in one statement; if that fails, each on its own, so that each gets
/// its own answer.
async fn resolve_batch(
    db: Datastore,
    requests: Vec<ResolveRequest>,
) -> Vec<Result<Option<SubmitContext>, sqlx::Error>> {
    let db = &db;
    together_or_each(&requests, move |requests| {
        db.call_submit_resolve_many(requests)
    })
    .await
}

/// Inserts `calls` in one statement, those of a runner whose lease waits here leased to that
/// lease (as many as it has room for) and given to it; if that fails (a profile deleted
/// meanwhile fails its foreign key, say), the leases are given nothing and the calls inserted
/// queued, together, then each on its own, so that one bad call fails alone.
async fn insert_batch(
    db: Datastore,
    handoffs: Arc<Handoffs>,
    credentials_file: Option<PathBuf>,
    calls: Vec<(NewCall, CallOrigin)>,
) -> Vec<Result<Option<CallRow>, sqlx::Error>> {
    let claims = BatchClaims::claim(&handoffs, &calls);
    if !claims.leases.is_empty() {
        let bindings = if claims.leases.iter().any(|l| l.runner_ref == CENTRAL_RUNNER) {
            central_bindings(credentials_file.as_deref())
        } else {
            Value::Null
        };
        let handed = HandedTo {
            epochs: &claims.epochs,
            bindings: &bindings,
        };
        match db.call_insert_many(&calls, Some(handed)).await {
            Ok(rows) => return claims.deliver(&db, &handoffs, rows).await,
            Err(error) => {
                // Dropped, the claims tell their leases to look.
                drop(claims);
                tracing::debug!(%error, "a batch handed to waiting leases failed");
            }
        }
    }
    let db = &db;
    together_or_each(&calls, move |calls| async move {
        let rows = db.call_insert_many(calls, None).await?;
        Ok(rows
            .into_iter()
            .map(|row| row.map(|row| row.call))
            .collect())
    })
    .await
}

/// The waiting leases a batch's calls are handed to, one per runner, and each call's epoch.
struct BatchClaims<'a> {
    leases: Vec<BatchClaim<'a>>,
    /// The epoch each call of the batch is inserted leased under, in the batch's order.
    epochs: Vec<Option<i64>>,
}

/// One waiting lease a batch's calls are handed to.
struct BatchClaim<'a> {
    runner_ref: &'a str,
    claim: Claim,
    /// The calls of the batch assigned to it, at most its room.
    assigned: usize,
}

impl<'a> BatchClaims<'a> {
    /// Claims a waiting lease for each runner of `calls` that has one, and assigns to it that
    /// runner's calls up to its room (a receipt lookup's lease reads the call it looks up, so
    /// it is never handed off).
    fn claim(handoffs: &Handoffs, calls: &'a [(NewCall, CallOrigin)]) -> Self {
        let handed_calls = |runner_ref: &str| {
            calls
                .iter()
                .filter(|(call, origin)| {
                    call.runner_ref == runner_ref && origin.lookup_of.is_none()
                })
                .count()
        };
        let mut leases: Vec<BatchClaim<'a>> = Vec::new();
        let mut without: Vec<&str> = Vec::new();
        let mut epochs = Vec::with_capacity(calls.len());
        for (call, origin) in calls {
            let runner_ref = call.runner_ref.as_str();
            let at = if origin.lookup_of.is_some() || without.contains(&runner_ref) {
                None
            } else if let Some(at) = leases.iter().position(|l| l.runner_ref == runner_ref) {
                Some(at)
            } else if let Some(claim) = handoffs.claim(runner_ref, handed_calls(runner_ref)) {
                leases.push(BatchClaim {
                    runner_ref,
                    claim,
                    assigned: 0,
                });
                Some(leases.len() - 1)
            } else {
                without.push(runner_ref);
                None
            };
            let epoch = at.and_then(|at| {
                let lease = &mut leases[at];
                (lease.assigned < lease.claim.room()).then(|| {
                    lease.assigned += 1;
                    lease.claim.epoch().0
                })
            });
            epochs.push(epoch);
        }
        Self { leases, epochs }
    }

    /// Gives each lease the calls `rows` (the batch's answers) inserted leased to it, and
    /// answers the submissions with their rows.
    async fn deliver(
        self,
        db: &Datastore,
        handoffs: &Handoffs,
        rows: Vec<Option<HandedRow>>,
    ) -> Vec<Result<Option<CallRow>, sqlx::Error>> {
        let mut leased: Vec<Vec<LeasedRow>> = self.leases.iter().map(|_| Vec::new()).collect();
        let mut answers = Vec::with_capacity(rows.len());
        for row in rows {
            let Some(HandedRow {
                call,
                leased: lease,
            }) = row
            else {
                answers.push(Ok(None));
                continue;
            };
            // Inserted leased, a call was given its runner's claim (one per runner).
            if let Some(lease) = lease
                && let Some(at) = self
                    .leases
                    .iter()
                    .position(|l| l.runner_ref == call.runner_ref)
            {
                leased[at].push(lease);
            }
            answers.push(Ok(Some(call)));
        }
        for (lease, calls) in self.leases.into_iter().zip(leased) {
            if let Err(error) = hand_over(db, handoffs, lease.runner_ref, lease.claim, calls).await
            {
                tracing::warn!(%error, "a refused call of a handed batch could not be failed");
            }
        }
        answers
    }
}

/// The answers to `requests`, written together by `write`, which answers each request of
/// a batch in order; if that fails, each written on its own, so that one bad request fails
/// alone.
async fn together_or_each<'a, I, O, F>(
    requests: &'a [I],
    write: impl Fn(&'a [I]) -> F,
) -> Vec<Result<O, sqlx::Error>>
where
    F: Future<Output = Result<Vec<O>, sqlx::Error>>,
{
    match write(requests).await {
        Ok(answers) => answers.into_iter().map(Ok).collect(),
        Err(e) if requests.len() == 1 => vec![Err(e)],
        Err(e) => {
            tracing::debug!(error = %e, "a batch of submissions failed; writing one by one");
            let mut answers = Vec::with_capacity(requests.len());
            for request in requests {
                let answer = write(std::slice::from_ref(request))
                    .await
                    .and_then(|answer| {
                        answer.into_iter().next().ok_or_else(|| {
                            sqlx::Error::Protocol("a batch of one answered nothing".into())
                        })
                    });
                answers.push(answer);
            }
            answers
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_protocol::runner::Epoch;
    use uuid::Uuid;

    fn call(runner_ref: &str) -> NewCall {
        NewCall {
            id: Uuid::now_v7(),
            workspace_id: Uuid::nil(),
            request_id: Uuid::new_v4(),
            payload_digest: vec![0; 32],
            profile_id: Uuid::nil(),
            connection_id: Uuid::nil(),
            connection_revision: 1,
            environment_id: Uuid::nil(),
            tool_name: "noop".into(),
            arguments: serde_json::json!({}),
            client_session_id: None,
            timeout_seconds: 30,
            runner_ref: runner_ref.into(),
            created_by: Uuid::nil(),
        }
    }

    #[tokio::test]
    async fn a_batch_claims_each_waiting_lease_once_for_its_runners_calls_up_to_its_room() {
        let handoffs = Handoffs::unconnected();
        let _central = handoffs.offer(CENTRAL_RUNNER, Epoch(4), 2);
        let _device = handoffs.offer("device:a", Epoch(9), 8);
        let plain = CallOrigin::default();
        let lookup = CallOrigin {
            lookup_of: Some(Uuid::now_v7()),
            ..plain
        };
        let calls = vec![
            (call(CENTRAL_RUNNER), plain),
            (call("device:a"), plain),
            (call(CENTRAL_RUNNER), lookup),
            (call(CENTRAL_RUNNER), plain),
            (call("device:b"), plain),
            (call(CENTRAL_RUNNER), plain),
        ];
        let claims = BatchClaims::claim(&handoffs, &calls);
        assert_eq!(
            claims.epochs,
            [Some(4), Some(9), None, Some(4), None, None],
            "a lookup is never handed; a runner with no waiting lease queues; a lease gets no \
             more than its room"
        );
        let rooms: Vec<(&str, usize)> = claims
            .leases
            .iter()
            .map(|l| (l.runner_ref, l.claim.room()))
            .collect();
        assert_eq!(rooms, [(CENTRAL_RUNNER, 2), ("device:a", 1)]);
        assert!(
            handoffs.claim("device:a", 1).is_none(),
            "each lease is claimed once"
        );
    }
}
