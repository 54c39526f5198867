//! Added latency on an idle system: one call at a time, submit → result visible to the caller.
//! The caller submits as `mcp call --wait` does (`POST …/calls?wait_ms=`), so the server
//! answers the submission as soon as the completion is recorded; a call not settled by then is
//! read with `?wait_ms=` until it is.

use crate::error::{Error, Result};
use crate::stack::{Target, settled, submit_waiting, wait_settled};
use crate::stats::ms;
use serde_json::json;
use std::time::{Duration, Instant};
use switchyard_protocol::CallState;
use switchyard_testkit::api::Api;

/// Submits `warmup + count` noop calls one after another; returns the measured end-to-end
/// times of the last `count`, in milliseconds. Every call must succeed.
pub async fn end_to_end(
    api: &Api,
    target: &Target,
    warmup: usize,
    count: usize,
) -> Result<Vec<f64>> {
    let mut samples = Vec::with_capacity(count);
    for i in 0..warmup + count {
        let elapsed = one_call(api, target).await?;
        if i >= warmup {
            samples.push(elapsed);
        }
    }
    Ok(samples)
}

/// One noop call on `target`, submit → outcome, in milliseconds. It must succeed.
pub async fn one_call(api: &Api, target: &Target) -> Result<f64> {
    let started = Instant::now();
    let (_, call) = submit_waiting(
        api,
        &target.call("noop", json!({})),
        Duration::from_secs(25),
    )
    .await?;
    let call = if settled(call.state) {
        call
    } else {
        wait_settled(api, &call.id.to_string(), Duration::from_secs(30)).await?
    };
    let elapsed = started.elapsed();
    if call.state != CallState::Succeeded {
        return Err(Error::Setup(format!(
            "a noop call on {} ended {}: {:?}",
            target.connection, call.state, call.error
        )));
    }
    Ok(ms(elapsed))
}
