//! Resolving and inserting submitted calls. Group commit: submissions that arrive while a
//! batch of inserts is being written share the next one, one statement and one commit for all
//! of them (see [`crate::batcher`]); their resolves share batches too, one statement for each,
//! whether inserts are batched or not (a resolve only reads). A lone submission is resolved and
//! inserted at once, by the single-row statements — or by the statement that resolves it, when
//! it was made from a remembered resolve (see [`super::resolves`]) — and when a lease of its
//! runner waits in this process, already leased and handed to that lease (see
//! [`super::handoff`]).

use super::handoff::{Claim, Handoffs};
use super::leasing::{lease_refusal, work_item};
use super::reconcile::central_bindings;
use crate::batcher::Batcher;
use crate::db::{
    CallOrigin, CallRow, Datastore, HandedRow, NewCall, ResolveRequest, Speculated, SubmitContext,
    SubmitKeys,
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
    /// Submissions being inserted now: a hand-off is for a lone one, so that a busy server
    /// keeps its group commit and its batched leases.
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
    /// Batches of at most `max` inserts (1 inserts each on its own), handing lone ones to the
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
            let db = db.clone();
            Inserts::Batched(Batcher::spawn(max, move |calls| {
                insert_batch(db.clone(), calls)
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
            && let Some(claim) = self.handoffs.claim(&call.runner_ref)
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
        let claim = self.handoffs.claim(&call.runner_ref);
        let bindings = self.bindings(&call, claim.is_some());
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
        let bindings = self.bindings(&call, true);
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

    /// The central credential bindings that are part of `call`'s dispatch target, when it is
    /// to be inserted leased (`handed`) to the central runner.
    fn bindings(&self, call: &NewCall, handed: bool) -> Value {
        if handed && call.runner_ref == CENTRAL_RUNNER {
            central_bindings(self.credentials_file.as_deref())
        } else {
            Value::Null
        }
    }

    /// Gives a call inserted leased under `claim`'s epoch to that lease. A call the lease's
    /// checks refuse is failed, as a lease fails it; one whose lease stopped waiting meanwhile
    /// is queued again.
    async fn deliver(&self, handed: HandedRow, claim: Option<Claim>) -> AppResult<CallRow> {
        let HandedRow { call: row, leased } = handed;
        let (Some(leased), Some(claim)) = (leased, claim) else {
            return Ok(row);
        };
        let epoch = claim.epoch();
        if let Some((code, message)) = lease_refusal(&leased) {
            self.db
                .call_fail_leased(row.id, epoch.0, code, message)
                .await?;
        } else if let Err(call) = claim.give(work_item(leased, epoch)) {
            self.handoffs.requeue(&row.runner_ref, &call).await;
        }
        Ok(row)
    }
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

/// Inserts `calls` in one statement; if that fails (a profile deleted meanwhile fails its
/// foreign key, say), each on its own, so that one bad call fails alone.
async fn insert_batch(
    db: Datastore,
    calls: Vec<(NewCall, CallOrigin)>,
) -> Vec<Result<Option<CallRow>, sqlx::Error>> {
    let db = &db;
    together_or_each(&calls, move |calls| db.call_insert_many(calls)).await
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
