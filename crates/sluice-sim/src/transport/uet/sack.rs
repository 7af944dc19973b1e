//! The receiver's record of PSNs that arrived out of order (`_epsn_rx_bitmap`), one bit each
//! in 64-bit words that start at or below the first missing PSN, and the 64-bit window of it
//! an ACK carries.

use std::collections::VecDeque;

/// Received PSNs at and above a base, as bits.
#[derive(Clone, Debug, Default)]
pub struct RxBitmap {
    /// The PSN of bit 0 of the first word: a multiple of 64.
    base: u64,
    words: VecDeque<u64>,
}

impl RxBitmap {
    fn word(&self, psn: u64) -> u64 {
        if psn < self.base {
            return 0;
        }
        self.words.get(((psn - self.base) / 64) as usize).copied().unwrap_or(0)
    }

    /// Whether `psn` is recorded.
    pub fn get(&self, psn: u64) -> bool {
        self.word(psn) >> (psn % 64) & 1 == 1
    }

    /// Records `psn`, which is at or above the base.
    pub fn set(&mut self, psn: u64) {
        debug_assert!(psn >= self.base, "PSN {psn} below the bitmap's base {}", self.base);
        let i = ((psn - self.base) / 64) as usize;
        if self.words.len() <= i {
            self.words.resize(i + 1, 0);
        }
        self.words[i] |= 1 << (psn % 64);
    }

    /// Forgets `psn`.
    pub fn clear(&mut self, psn: u64) {
        if psn >= self.base {
            if let Some(w) = self.words.get_mut(((psn - self.base) / 64) as usize) {
                *w &= !(1 << (psn % 64));
            }
        }
    }

    /// Drops the words wholly below `expected`, the first missing PSN.
    pub fn advance(&mut self, expected: u64) {
        while self.base + 64 <= expected && !self.words.is_empty() {
            self.words.pop_front();
            self.base += 64;
        }
        if self.words.is_empty() {
            self.base = expected / 64 * 64;
        }
    }

    /// The 64 PSNs from `from`: bit `i` set where PSN `from + i` is recorded.
    pub fn window(&self, from: u64) -> u64 {
        let shift = from % 64;
        let low = self.word(from) >> shift;
        if shift == 0 {
            low
        } else {
            low | self.word(from + 64) << (64 - shift)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_joins_two_words_at_any_offset() {
        let mut b = RxBitmap::default();
        for psn in [3, 63, 64, 100, 127, 128, 200] {
            b.set(psn);
        }
        assert!(b.get(63) && b.get(64) && !b.get(65));
        let w = b.window(60);
        let want: u64 = [3u64, 4, 40].iter().map(|i| 1 << i).sum();
        assert_eq!(w, want, "PSNs 63, 64 and 100 from 60; 127 is past its 64");
        assert_eq!(b.window(128), 1, "PSN 200 is past its 64");
        b.clear(64);
        assert!(!b.get(64));
        // Advancing past a word drops it, and what is above keeps its place.
        b.advance(130);
        assert!(!b.get(63) && b.get(200) && b.get(128));
        assert_eq!(b.window(137), 1 << 63);
    }
}
