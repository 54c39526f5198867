//! Group commit of submitted calls' inserts: submissions that arrive while a batch of inserts
//! is being written share the next one, one statement and one commit for all of them (see
//! [`crate::batcher`]). A lone submission is inserted at once, by the single-row statement.

use crate::batcher::Batcher;
use crate::db::{CallOrigin, CallRow, Datastore, NewCall};
use crate::error::{AppError, AppResult};

/// One submission's insert and its answer: the inserted row, or `None` when its request_id
/// was taken.
type Insert = Batcher<(NewCall, CallOrigin), Result<Option<CallRow>, sqlx::Error>>;

/// Where submitted calls are inserted: together, or each on its own.
pub(super) enum Submissions {
    /// Inserts each call by its own statement.
    OneByOne(Datastore),
    /// Inserts the calls that wait at the same moment together.
    Batched(Insert),
}

impl Submissions {
    /// Batches of at most `max` inserts; 1 inserts each on its own.
    pub(super) fn new(db: &Datastore, max: usize) -> Self {
        if max <= 1 {
            return Self::OneByOne(db.clone());
        }
        let db = db.clone();
        Self::Batched(Batcher::spawn(max, move |calls| {
            insert_batch(db.clone(), calls)
        }))
    }

    /// Inserts `call` unless its request_id is taken (see [`Datastore::call_insert_from`]).
    pub(super) async fn insert(
        &self,
        call: NewCall,
        origin: CallOrigin,
    ) -> AppResult<Option<CallRow>> {
        match self {
            Self::OneByOne(db) => Ok(db.call_insert_from(&call, origin).await?),
            Self::Batched(batcher) => match batcher.submit((call, origin)).await {
                Some(inserted) => Ok(inserted?),
                None => Err(AppError::Internal(
                    "the submissions' batched inserts stopped".into(),
                )),
            },
        }
    }
}

/// Inserts `calls` in one statement; if that fails (a profile deleted meanwhile fails its
/// foreign key, say), each on its own, so that one bad call fails alone.
async fn insert_batch(
    db: Datastore,
    calls: Vec<(NewCall, CallOrigin)>,
) -> Vec<Result<Option<CallRow>, sqlx::Error>> {
    match db.call_insert_many(&calls).await {
        Ok(inserted) => inserted.into_iter().map(Ok).collect(),
        Err(e) if calls.len() == 1 => vec![Err(e)],
        Err(e) => {
            tracing::debug!(error = %e, "a batch of submissions failed; inserting one by one");
            let mut answers = Vec::with_capacity(calls.len());
            for (call, origin) in &calls {
                answers.push(db.call_insert_from(call, *origin).await);
            }
            answers
        }
    }
}
