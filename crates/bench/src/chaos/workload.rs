//! The chaos workload: a stream of side-effecting `count` calls, each retried with its own
//! request_id until the server answers — what a careful client does when the network or a
//! replica fails under it.

use crate::stack::{Target, submit};
use serde_json::json;
use std::time::{Duration, Instant};
use switchyard_protocol::api::SubmitCall;
use switchyard_testkit::api::Api;
use tokio::task::JoinHandle;
use uuid::Uuid;

/// How long a client keeps retrying one submission.
const RETRY_FOR: Duration = Duration::from_secs(90);

/// One call the workload submitted.
#[derive(Clone, Debug)]
pub struct Submitted {
    /// Its request_id (the oracle's key: the fixture records it per execution).
    pub request_id: Uuid,
    /// Whether some submission of it was answered (201 or 200).
    pub answered: bool,
    /// How many submissions it took.
    pub attempts: u32,
}

/// Submits `count` calls at `rate` per second on `target`, spreading them over `apis` (one per
/// replica) in turn; every call is retried (same request_id) until answered or `RETRY_FOR`.
pub fn stream(
    apis: Vec<Api>,
    target: Target,
    rate: f64,
    count: usize,
) -> JoinHandle<Vec<Submitted>> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
        let mut tasks = Vec::with_capacity(count);
        for i in 0..count {
            ticker.tick().await;
            let api = apis[i % apis.len()].clone();
            let call = target.call("count", json!({ "label": format!("chaos-{i}") }));
            tasks.push(tokio::spawn(submit_until_answered(api, call)));
        }
        let mut submitted = Vec::with_capacity(count);
        for task in tasks {
            if let Ok(s) = task.await {
                submitted.push(s);
            }
        }
        submitted
    })
}

async fn submit_until_answered(api: Api, call: SubmitCall) -> Submitted {
    let started = Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        if submit(&api, &call).await.is_ok() {
            return Submitted {
                request_id: call.request_id.0,
                answered: true,
                attempts,
            };
        }
        if started.elapsed() > RETRY_FOR {
            return Submitted {
                request_id: call.request_id.0,
                answered: false,
                attempts,
            };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
