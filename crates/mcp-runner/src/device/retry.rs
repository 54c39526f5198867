//! Asking an unavailable server again, with backoff, until it answers or the runner stops.

use super::client::ApiFailure;
use crate::backoff::Backoff;
use std::future::Future;
use tokio_util::sync::CancellationToken;

/// Runs `request` until it gets an answer other than [`ApiFailure::Unavailable`], backing off
/// between tries; `None` once `stop` is cancelled first.
pub(crate) async fn until_answered<T, F, Fut>(
    stop: &CancellationToken,
    what: &str,
    mut request: F,
) -> Option<Result<T, ApiFailure>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ApiFailure>>,
{
    let mut backoff = Backoff::default();
    loop {
        let answer = tokio::select! {
            answer = request() => answer,
            () = stop.cancelled() => return None,
        };
        match answer {
            Err(ApiFailure::Unavailable(reason)) => {
                let delay = backoff.next_delay();
                tracing::warn!(%reason, retry_in = ?delay, "cannot {what}");
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = stop.cancelled() => return None,
                }
            }
            answer => return Some(answer),
        }
    }
}
