//! The CC engine's per-flow rate limiter: a token bucket that holds a flow to an application's
//! target rate, allowing bursts of a few packets.

use crate::time::{Rate, Time};

/// A token bucket in bytes.
#[derive(Clone, Copy, Debug)]
pub struct TokenBucket {
    rate: Rate,
    /// Largest number of tokens the bucket holds.
    burst: u64,
    tokens: u64,
    /// When `tokens` was last brought up to date.
    at: Time,
}

impl TokenBucket {
    /// A full bucket refilling at `rate` up to `burst` bytes.
    pub fn new(rate: Rate, burst: u64) -> TokenBucket {
        TokenBucket { rate, burst, tokens: burst, at: Time::ZERO }
    }

    fn refill(&mut self, now: Time) {
        if now > self.at {
            let added = self.rate.bytes_in(now - self.at);
            if self.tokens + added >= self.burst {
                (self.tokens, self.at) = (self.burst, now);
            } else {
                // Advance only by the time the whole bytes took, so fractions are not lost.
                self.tokens += added;
                self.at += Time((added as u128 * 8_000_000_000_000 / self.rate.0 as u128) as u64);
            }
        }
    }

    /// When a packet of `bytes` may leave (now, if the bucket holds enough tokens).
    pub fn ready_at(&mut self, now: Time, bytes: u64) -> Time {
        self.refill(now);
        if self.tokens >= bytes {
            now
        } else {
            now + self.rate.tx_time(bytes - self.tokens)
        }
    }

    /// Takes the tokens of a packet sent now.
    pub fn consume(&mut self, now: Time, bytes: u64) {
        self.refill(now);
        self.tokens = self.tokens.saturating_sub(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_run_rate_is_the_bucket_rate_after_one_burst() {
        let rate = Rate(1_000_000_000);
        let mut b = TokenBucket::new(rate, 3000);
        let mut now = Time::ZERO;
        let mut sent = 0u64;
        while now < Time::from_secs_f64(1e-3) {
            now = b.ready_at(now, 1500);
            b.consume(now, 1500);
            sent += 1500;
        }
        // 1 Gb/s for 1 ms is 125,000 bytes, plus the initial 3000-byte burst, within a packet.
        assert!(sent.abs_diff(128_000) <= 1500, "{sent}");
    }
}
