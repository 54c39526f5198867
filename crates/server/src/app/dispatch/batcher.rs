//! Group commit for one kind of request: requests that arrive while a batch is being written
//! wait for the next one, which takes all of them (up to a maximum) in one write. A lone
//! request is written at once, so batching costs an idle system nothing and a busy one writes
//! fewer, larger statements.

use std::future::Future;
use tokio::sync::{mpsc, oneshot};

/// One request and where its answer goes.
type Pending<I, O> = (I, oneshot::Sender<O>);

/// The sending side; the writing task ends once every clone of it is dropped.
pub(crate) struct Batcher<I, O> {
    tx: mpsc::UnboundedSender<Pending<I, O>>,
}

impl<I: Send + 'static, O: Send + 'static> Batcher<I, O> {
    /// Starts the task that writes batches of at most `max` requests with `write`, which
    /// answers each request of its batch, in order.
    pub(crate) fn spawn<W, F>(max: usize, mut write: W) -> Self
    where
        W: FnMut(Vec<I>) -> F + Send + 'static,
        F: Future<Output = Vec<O>> + Send,
    {
        let (tx, mut rx) = mpsc::unbounded_channel::<Pending<I, O>>();
        tokio::spawn(async move {
            let mut pending = Vec::with_capacity(max);
            while rx.recv_many(&mut pending, max.max(1)).await > 0 {
                let (requests, answer_to): (Vec<I>, Vec<oneshot::Sender<O>>) =
                    pending.drain(..).unzip();
                let answers = write(requests).await;
                debug_assert_eq!(answers.len(), answer_to.len());
                for (answer, to) in answers.into_iter().zip(answer_to) {
                    // A requester that gave up no longer needs its answer.
                    let _ = to.send(answer);
                }
            }
        });
        Self { tx }
    }

    /// Queues `request` at once and returns its answer to wait for: `None` if the writing task
    /// is gone or dropped the request unanswered.
    pub(crate) fn submit(&self, request: I) -> impl Future<Output = Option<O>> + use<I, O> {
        let (to, answer) = oneshot::channel();
        let queued = self.tx.send((request, to)).is_ok();
        async move { if queued { answer.await.ok() } else { None } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn requests_that_arrive_while_a_batch_is_written_share_the_next_one() {
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let (first_written, mut written) = mpsc::unbounded_channel::<()>();
        let (release, released) = tokio::sync::watch::channel(false);
        let seen = Arc::clone(&sizes);
        let batcher = Batcher::spawn(16, move |batch: Vec<u32>| {
            seen.lock().unwrap().push(batch.len());
            let first_written = first_written.clone();
            let mut released = released.clone();
            async move {
                let _ = first_written.send(());
                // The first batch is held until the test says so; later ones go through.
                let _ = released.wait_for(|r| *r).await;
                batch.into_iter().map(|n| n * 10).collect()
            }
        });
        let first = batcher.submit(1);
        written.recv().await.unwrap();
        // Queued while the first batch is held.
        let rest: Vec<_> = (2..=5).map(|n| batcher.submit(n)).collect();
        release.send(true).unwrap();
        assert_eq!(first.await, Some(10));
        let answers = futures::future::join_all(rest).await;
        assert_eq!(answers, vec![Some(20), Some(30), Some(40), Some(50)]);
        assert_eq!(*sizes.lock().unwrap(), vec![1, 4]);
    }

    #[tokio::test]
    async fn a_request_the_writer_leaves_unanswered_ends_with_none_rather_than_hanging() {
        let silent: Batcher<u32, u32> = Batcher::spawn(4, |_| async { Vec::new() });
        assert_eq!(silent.submit(7).await, None);
    }
}
