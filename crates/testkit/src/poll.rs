//! Waiting for something with a bound. Tests and benchmarks wait for what another process does
//! (a call settles, a log line appears, a file fills); each wait checks at an interval and
//! gives up after a bound with an [`Error::TimedOut`] that says what was still not so, never
//! hangs and never stands in for a sleep of a guessed length.

use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// What one check found: done with a value, or not yet and why not (the message a timeout
/// reports, so the last check's state is in the failure).
#[derive(Clone, Debug)]
pub enum Check<T> {
    /// The condition holds; the wait returns this value.
    Done(T),
    /// Not yet: what is still not so, e.g. "call 0190… is still running".
    NotYet(String),
}

/// How long to wait and how often to look.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// Give up once this much time has passed since the first check.
    pub within: Duration,
    /// The pause between checks.
    pub every: Duration,
}

impl Bound {
    /// Checks every `every`, for at most `within`.
    pub const fn new(within: Duration, every: Duration) -> Bound {
        Bound { within, every }
    }

    /// Runs `check` now and then after every pause until it is [`Check::Done`]; an error from
    /// `check` ends the wait with that error. After the bound, [`Error::TimedOut`] with the last
    /// [`Check::NotYet`] message. The check always runs at least once.
    pub async fn until<T>(self, mut check: impl AsyncFnMut() -> Result<Check<T>>) -> Result<T> {
        let started = Instant::now();
        loop {
            let why_not = match check().await? {
                Check::Done(value) => return Ok(value),
                Check::NotYet(why_not) => why_not,
            };
            if started.elapsed() >= self.within {
                return Err(Error::TimedOut {
                    what: why_not,
                    within: self.within,
                });
            }
            tokio::time::sleep(self.every).await;
        }
    }

    /// Checks `done` until it holds; after the bound, [`Error::TimedOut`] saying `what` is not
    /// so yet.
    pub async fn until_true(self, what: &str, mut done: impl FnMut() -> bool) -> Result<()> {
        self.until(async || {
            Ok(if done() {
                Check::Done(())
            } else {
                Check::NotYet(format!("not yet: {what}"))
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_returns_what_the_check_found() {
        let mut checks = 0;
        let found = Bound::new(Duration::from_secs(5), Duration::from_millis(1))
            .until(async || {
                checks += 1;
                Ok(if checks == 3 {
                    Check::Done(checks)
                } else {
                    Check::NotYet(format!("only {checks} checks"))
                })
            })
            .await
            .expect("done on the third check");
        assert_eq!(found, 3);
    }

    #[tokio::test]
    async fn a_wait_past_its_bound_reports_the_last_check() {
        let mut checks = 0;
        let error = Bound::new(Duration::from_millis(30), Duration::from_millis(5))
            .until(async || -> Result<Check<()>> {
                checks += 1;
                Ok(Check::NotYet(format!(
                    "still nothing after {checks} checks"
                )))
            })
            .await
            .expect_err("never done");
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("still nothing after {checks} checks")),
            "{message}"
        );
        assert!(message.contains("gave up after 30ms"), "{message}");
    }
}
