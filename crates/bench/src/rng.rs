//! A small seeded random source (xorshift64*), so a chaos run can be repeated from its seed and
//! the latency rounds' shuffled orders are the same in every run.

use std::time::Duration;

/// A seeded pseudo-random source.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A source starting from `seed` (0 is replaced by a fixed odd constant).
    pub fn new(seed: u64) -> Rng {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// A seed from the clock, for runs that do not ask for one.
    pub fn clock_seed() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when n is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// A duration between `low` and `high`, uniformly.
    pub fn between(&mut self, low: Duration, high: Duration) -> Duration {
        let span = high.saturating_sub(low).as_micros() as u64;
        low + Duration::from_micros(self.below(span + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_sequence_within_bounds() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..1000 {
            let x = a.between(Duration::from_millis(10), Duration::from_millis(20));
            assert_eq!(
                x,
                b.between(Duration::from_millis(10), Duration::from_millis(20))
            );
            assert!((Duration::from_millis(10)..=Duration::from_millis(20)).contains(&x));
            assert!(a.below(3) < 3 && b.below(3) < 3);
        }
    }
}
