//! Idempotent replay: a retried submission (same request_id, same payload) is answered with
//! the existing call, and concurrent duplicates create exactly one call.

use crate::error::{Error, Result};
use crate::stack::{Target, submit, wait_settled};
use crate::stats::{Summary, ms};
use serde::Serialize;
use serde_json::json;
use sqlx::PgPool;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use switchyard_testkit::api::Api;

/// What the replay measurement found.
#[derive(Clone, Debug, Serialize)]
pub struct Replay {
    /// Time to answer a duplicate of a finished call, sequentially.
    pub duplicate_ms: Summary,
    /// How many duplicates were sent at once.
    pub concurrent_duplicates: usize,
    /// Distinct call ids they were answered with.
    pub distinct_answers: usize,
    /// Calls stored for that request_id.
    pub calls_created: i64,
}

/// Measures `count` sequential duplicates of one finished call, then sends `concurrent`
/// identical new submissions at once.
pub async fn replay(
    api: &Api,
    pool: &PgPool,
    target: &Target,
    count: usize,
    concurrent: usize,
) -> Result<Replay> {
    let original = target.call("noop", json!({}));
    let (status, call) = submit(api, &original).await?;
    if status != 201 {
        return Err(Error::Setup(format!(
            "a fresh request_id answered {status}, not 201"
        )));
    }
    wait_settled(api, &call.id.to_string(), Duration::from_secs(30)).await?;
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        let (status, again) = submit(api, &original).await?;
        samples.push(ms(started.elapsed()));
        if status != 200 || again.id != call.id {
            return Err(Error::Setup(format!(
                "a duplicate answered {status} with call {} (expected 200 with {})",
                again.id, call.id
            )));
        }
    }

    let duplicate = target.call("noop", json!({}));
    let answers = futures::future::join_all((0..concurrent).map(|_| submit(api, &duplicate))).await;
    let mut ids = BTreeSet::new();
    for answer in answers {
        ids.insert(answer?.1.id);
    }
    let calls_created: i64 = sqlx::query_scalar("SELECT count(*) FROM calls WHERE request_id = $1")
        .bind(duplicate.request_id.0)
        .fetch_one(pool)
        .await?;
    Ok(Replay {
        duplicate_ms: Summary::of(&samples),
        concurrent_duplicates: concurrent,
        distinct_answers: ids.len(),
        calls_created,
    })
}
