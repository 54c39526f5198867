//! Reading and inserting submitted calls. Group commit: submissions that arrive while a batch
//! of inserts is being written share the next one, one statement and one commit for all of
//! them (see [`super::batcher`]); their submit reads share batches too, one statement for
//! each, whether inserts are batched or not (a read only reads). A lone submission is read and
//! inserted at once, by the single-row statements; when a lease of its runner waits in this
//! process, its call is inserted already leased and handed to that lease (see
//! [`super::handoff`]).

use super::batcher::Batcher;
use super::handoff::{Claim, Handoffs};
use super::leasing::{lease_refusal, observe_lease, work_item};
use super::notices::Announcer;
use crate::app::reconcile::central_bindings;
use crate::db::{CallRow, Datastore, HandedRow, NewCall, SubmitContext, SubmitRead};
use crate::error::{AppError, AppResult};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use switchyard_protocol::CallState;

/// One submission's insert and its answer: the inserted row, or `None` when its request_id
/// was taken.
type Insert = Batcher<NewCall, Result<Option<CallRow>, sqlx::Error>>;

/// One submission's read and what it found (see [`Datastore::call_submit_read`]).
type Read = Batcher<SubmitRead, Result<Option<SubmitContext>, sqlx::Error>>;

/// Where submitted calls are read and inserted.
pub(crate) struct Submissions {
    reads: Read,
    inserts: Inserts,
    db: Datastore,
    announcer: Arc<Announcer>,
    handoffs: Arc<Handoffs>,
    /// The central credentials file, whose bindings are part of a central call's target.
    credentials_file: Option<PathBuf>,
    /// Where a handed call's lease is counted.
    metrics: Arc<crate::metrics::Metrics>,
    /// Submissions being inserted now: a lone one is handed off by its own statement; the
    /// others share batches, so that a busy server keeps its group commit.
    inserting: AtomicUsize,
}

/// How submitted calls are inserted: together, or each on its own.
enum Inserts {
    /// Inserts each call by its own statement.
    OneByOne,
    /// Inserts the calls that wait at the same moment together.
    Batched(Insert),
}

/// Most submit reads made together. A read only reads, so reads are batched whatever
/// `--submit-batch-max` says of inserts.
const READ_BATCH_MAX: usize = 64;

impl Submissions {
    /// Batches of at most `max` inserts (1 inserts each on its own), handing lone calls to
    /// the leases waiting in `handoffs`.
    pub(crate) fn new(
        db: &Datastore,
        announcer: Arc<Announcer>,
        handoffs: Arc<Handoffs>,
        max: usize,
        credentials_file: Option<PathBuf>,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Self {
        let inserts = if max <= 1 {
            Inserts::OneByOne
        } else {
            let (db, announcer) = (db.clone(), Arc::clone(&announcer));
            Inserts::Batched(Batcher::spawn(max, move |calls| {
                insert_batch(db.clone(), Arc::clone(&announcer), calls)
            }))
        };
        let reading = db.clone();
        Self {
            reads: Batcher::spawn(READ_BATCH_MAX, move |reads| {
                read_batch(reading.clone(), reads)
            }),
            inserts,
            db: db.clone(),
            announcer,
            handoffs,
            credentials_file,
            metrics,
            inserting: AtomicUsize::new(0),
        }
    }

    /// What a submission decides on (see [`Datastore::call_submit_read`]), read with the
    /// others that wait at the same moment.
    pub(crate) async fn read(&self, read: SubmitRead) -> AppResult<Option<SubmitContext>> {
        match self.reads.submit(read).await {
            Some(found) => Ok(found?),
            None => Err(AppError::Internal(
                "the submissions' batched reads stopped".into(),
            )),
        }
    }

    /// Inserts `call` unless its request_id is taken (see [`Datastore::call_insert`]).
    pub(crate) async fn insert(&self, call: NewCall) -> AppResult<Option<CallRow>> {
        let inserting = Inserting::enter(&self.inserting);
        // A receipt lookup's lease reads the call it looks up; it is never handed off.
        if inserting.alone
            && call.origin.lookup_of.is_none()
            && let Some(claim) = self.handoffs.claim(call.runner_ref)
        {
            return self.hand_off(call, claim).await;
        }
        match &self.inserts {
            Inserts::OneByOne => {
                let inserted = self.db.call_insert(&call).await?;
                self.announcer.send(inserted.wakeups);
                Ok(inserted.value)
            }
            Inserts::Batched(insert) => match insert.submit(call).await {
                Some(inserted) => Ok(inserted?),
                None => Err(AppError::Internal(
                    "the submissions' batched inserts stopped".into(),
                )),
            },
        }
    }

    /// Inserts `call` leased to the lease `claim` holds and gives it to that lease; queued as
    /// any other when that lease is no longer live. A call the lease's checks refuse is
    /// failed, as a lease fails it; one whose lease stopped waiting meanwhile is queued again.
    async fn hand_off(&self, call: NewCall, claim: Claim) -> AppResult<Option<CallRow>> {
        let bindings = if call.runner_ref.is_central() {
            central_bindings(self.credentials_file.as_deref()).await
        } else {
            Value::Null
        };
        let epoch = claim.epoch();
        let inserted = self.db.call_insert_handed(&call, epoch, &bindings).await?;
        self.announcer.send(inserted.wakeups);
        let Some(HandedRow { call: row, leased }) = inserted.value else {
            return Ok(None);
        };
        let Some(leased) = leased else {
            // Queued (the lease is no longer live): the dropped claim tells its lease to look.
            return Ok(Some(row));
        };
        match lease_refusal(&leased) {
            None => {
                observe_lease(&self.metrics, row.runner_ref, &leased);
                if let Err(call) = claim.give(work_item(leased, epoch)) {
                    self.handoffs.requeue(row.runner_ref, &[*call]).await;
                }
            }
            Some((code, message)) => {
                let failed = self
                    .db
                    .call_fail_leased(leased.id, epoch, code, message)
                    .await?;
                if failed {
                    self.metrics.calls_finished(CallState::Failed, 1);
                }
            }
        }
        Ok(Some(row))
    }
}

/// One submission being inserted, counted in [`Submissions::inserting`] while it lives.
struct Inserting<'a> {
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

/// Reads `reads` in one statement; if that fails, each on its own, so that each gets its own
/// answer.
async fn read_batch(
    db: Datastore,
    reads: Vec<SubmitRead>,
) -> Vec<Result<Option<SubmitContext>, sqlx::Error>> {
    let db = &db;
    together_or_each(&reads, move |reads| db.call_submit_read_many(reads)).await
}

/// Inserts `calls` in one statement; if that fails (a profile deleted meanwhile fails its
/// foreign key, say), each on its own, so that one bad call fails alone.
async fn insert_batch(
    db: Datastore,
    announcer: Arc<Announcer>,
    calls: Vec<NewCall>,
) -> Vec<Result<Option<CallRow>, sqlx::Error>> {
    let (db, announcer) = (&db, &announcer);
    together_or_each(&calls, move |calls| async move {
        let inserted = db.call_insert_many(calls).await?;
        announcer.send(inserted.wakeups);
        Ok(inserted.value)
    })
    .await
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
