//! Exponential backoff between retries of an unavailable control plane.

use std::time::Duration;

/// First delay before retrying an unavailable control plane.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
/// Longest delay between retries.
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Delays that double from 100 ms up to 2 s.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            next: BACKOFF_FIRST,
        }
    }
}

impl Backoff {
    /// The delay before the next retry.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (delay * 2).min(BACKOFF_MAX);
        delay
    }

    /// Starts over after a success.
    pub(crate) fn reset(&mut self) {
        self.next = BACKOFF_FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_limit_and_resets() {
        let mut backoff = Backoff::default();
        let delays: Vec<u128> = (0..7).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 2000, 2000]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), BACKOFF_FIRST);
    }
}
