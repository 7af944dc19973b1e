//! RCCC's receiver oversubscription control (`OversubscribedCC`, the reference simulator's
//! `oversubscribed_cc.cpp`): on a fabric whose core carries less than its hosts can send, credit
//! paced at the receiver's line rate overruns the core, and trims and ECN marks there are what
//! tells. Each receiving host counts what reaches its flows and, about every 1.5 network RTTs,
//! scales the rate its pull pacer grants credit at:
//!
//! - trims not at the last hop take the rate down by their share of the packets received;
//! - `g`, a moving average of the CE-marked share of whole data packets, takes it down by
//!   `(g - target_congestion) * md` while above `target_congestion`;
//! - otherwise the rate grows by `ai`, doubling each interval while nothing is marked;
//! - the rate stays between `min_rate` (0.9 over the oversubscription ratio) and the line.
//!
//! The host counts into it and runs its timer (`host/pull.rs`); this file is the arithmetic.

use crate::time::Time;
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// The control's constants, as the reference names them (`_Ai`, `_Md`, `_alpha`,
/// `_target_congestion`, `_min_rate`, `_base_rtt`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OversubscribedParams {
    /// Additive increase, a share of the line rate.
    pub ai: f64,
    /// Multiplicative decrease per unit of `g` above the target.
    pub md: f64,
    /// Weight of the newest interval in `g`.
    pub alpha: f64,
    /// The marked share `g` may reach before the rate comes down.
    pub target_congestion: f64,
    /// The least share of the line rate credit is paced at.
    pub min_rate: f64,
    /// The network RTT the interval scales by.
    pub base_rtt: Time,
}

impl OversubscribedParams {
    /// The reference's constants on a fabric of oversubscription `ratio` and network RTT `rtt`:
    /// the rate never goes below 0.9 / `ratio` of the line (`setOversubscriptionRatio`), nor 1%.
    pub fn reference(ratio: f64, rtt: Time) -> OversubscribedParams {
        let min_rate = if ratio > 1.0 { (0.9 / ratio).max(0.01) } else { 0.01 };
        OversubscribedParams { ai: 0.01, md: 0.5, alpha: 0.5, target_congestion: 0.3, min_rate, base_rtt: rtt }
    }
}

/// What a receiving host counted in one interval (`data_received`, `ecn_received`,
/// `trimmed_received`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// Every packet its flows took: whole, trimmed, RTS.
    pub packets: u64,
    /// Whole data packets marked CE, duplicates included.
    pub ecn: u64,
    /// Trimmed headers cut at the switch before the host.
    pub trimmed_last_hop: u64,
    /// Trimmed headers cut further upstream: the core's congestion.
    pub trimmed_other: u64,
}

/// One receiving host's control: the share of its line rate it grants credit at.
#[derive(Clone, Debug)]
pub struct OversubscribedCc {
    params: OversubscribedParams,
    /// The share of the line rate credit is paced at (`_rate`).
    pub rate: f64,
    /// The marked share, averaged over intervals (`_g`).
    pub g: f64,
    /// Intervals since the last decrease (`_increase_count`).
    increases: u32,
    /// This interval's counts.
    pub received: Received,
    /// Draws each interval's jitter, so hosts do not act in step.
    rng: Xoshiro256PlusPlus,
}

impl OversubscribedCc {
    /// A control at line rate, jittering its intervals from `rng`.
    pub fn new(params: OversubscribedParams, rng: Xoshiro256PlusPlus) -> OversubscribedCc {
        OversubscribedCc { params, rate: 1.0, g: 0.0, increases: 0, received: Received::default(), rng }
    }

    /// The next interval: 1.5 network RTTs, jittered by ±25% (`nextInterval`).
    pub fn interval(&mut self) -> Time {
        let u: f64 = self.rng.gen();
        Time(((0.75 + u / 2.0) * 1.5 * self.params.base_rtt.ps() as f64) as u64)
    }

    /// The end of an interval: the rate from what was counted in it (`doCongestionControl`);
    /// the counts start again.
    pub fn adjust(&mut self) {
        let n = std::mem::take(&mut self.received);
        let p = &self.params;
        let whole = n.packets - n.trimmed_last_hop - n.trimmed_other;
        let fraction = if whole == 0 { 0.0 } else { n.ecn as f64 / whole as f64 };
        let mut decreased = false;
        if n.trimmed_other > 0 {
            self.rate -= n.trimmed_other as f64 / n.packets as f64;
            decreased = true;
        }
        self.g = self.g * (1.0 - p.alpha) + p.alpha * fraction;
        if self.g > p.target_congestion && p.md > 0.0 {
            self.rate *= 1.0 - (self.g - p.target_congestion) * p.md;
            decreased = true;
        }
        if decreased {
            self.increases = 0;
        } else {
            self.rate += if n.ecn == 0 { p.ai * 2f64.powi(self.increases.min(1_023) as i32) } else { p.ai };
            self.increases = self.increases.saturating_add(1);
        }
        self.rate = self.rate.clamp(p.min_rate, 1.0);
    }

    /// `intervals` ended while the host paced no credit and the timer slept: each is an
    /// interval with nothing counted after the first (which takes what came in meanwhile).
    /// Once `g` is under the target and the rate at the line, more of them only decay `g`.
    pub fn slept(&mut self, intervals: u64) {
        for done in 0..intervals {
            if done > 0 && self.received == Received::default() && self.g <= self.params.target_congestion && self.rate >= 1.0 {
                let left = intervals - done;
                self.g *= (1.0 - self.params.alpha).powi(left.min(i32::MAX as u64) as i32);
                self.increases = self.increases.saturating_add(left.min(u32::MAX as u64) as u32);
                return;
            }
            self.adjust();
        }
    }

    /// The mean interval, by which the intervals slept through are counted.
    pub fn mean_interval(&self) -> Time {
        Time((1.5 * self.params.base_rtt.ps() as f64) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::stream;

    fn control(ratio: f64) -> OversubscribedCc {
        OversubscribedCc::new(OversubscribedParams::reference(ratio, Time::from_us(10)), stream(1, 6))
    }

    fn counts(packets: u64, ecn: u64, trimmed_last_hop: u64, trimmed_other: u64) -> Received {
        Received { packets, ecn, trimmed_last_hop, trimmed_other }
    }

    #[test]
    fn the_floor_is_nine_tenths_over_the_ratio() {
        assert_eq!(OversubscribedParams::reference(4.0, Time::ZERO).min_rate, 0.225);
        assert_eq!(OversubscribedParams::reference(8.0, Time::ZERO).min_rate, 0.1125);
        assert_eq!(OversubscribedParams::reference(1000.0, Time::ZERO).min_rate, 0.01);
        assert_eq!(OversubscribedParams::reference(1.0, Time::ZERO).min_rate, 0.01, "forced on where nothing is oversubscribed");
    }

    #[test]
    fn upstream_trims_cut_the_rate_by_their_share_and_last_hop_trims_do_not() {
        let mut c = control(4.0);
        c.received = counts(100, 0, 30, 0);
        c.adjust();
        assert_eq!(c.rate, 1.0, "trims at the receiver's own ToR are the incast's, not the core's");
        c.received = counts(100, 0, 0, 20);
        c.adjust();
        assert!((c.rate - 0.8).abs() < 1e-12, "{}", c.rate);
    }

    #[test]
    fn marks_above_the_target_cut_the_rate_in_proportion() {
        let mut c = control(4.0);
        // 80 of 80 whole packets marked: g = 0.5, 0.2 above the target; the rate x (1 - 0.1).
        c.received = counts(100, 80, 20, 0);
        c.adjust();
        assert_eq!(c.g, 0.5);
        assert!((c.rate - 0.9).abs() < 1e-12, "{}", c.rate);
        // g halves with nothing marked: 0.25 is under the target; a plain increase.
        c.received = counts(100, 0, 0, 0);
        c.adjust();
        assert_eq!(c.g, 0.25);
        assert!((c.rate - 0.91).abs() < 1e-12, "{}", c.rate);
        // Then the increase doubles each unmarked interval: +0.02, +0.04.
        c.received = counts(100, 0, 0, 0);
        c.adjust();
        assert!((c.rate - 0.93).abs() < 1e-12, "{}", c.rate);
        c.received = counts(100, 0, 0, 0);
        c.adjust();
        assert!((c.rate - 0.97).abs() < 1e-12, "{}", c.rate);
        // A mark under the target holds the increase at ai.
        c.received = counts(100, 10, 0, 0);
        c.adjust();
        assert!((c.rate - 0.98).abs() < 1e-12, "{}", c.rate);
    }

    #[test]
    fn the_rate_stays_between_the_floor_and_the_line() {
        let mut c = control(4.0);
        for _ in 0..20 {
            c.received = counts(100, 0, 0, 90);
            c.adjust();
        }
        assert_eq!(c.rate, 0.225);
        for _ in 0..20 {
            c.adjust();
        }
        assert_eq!(c.rate, 1.0);
    }

    #[test]
    fn intervals_jitter_around_one_and_a_half_rtts() {
        let mut c = control(4.0);
        let draws: Vec<u64> = (0..1000).map(|_| c.interval().ps()).collect();
        assert!(draws.iter().all(|&t| (11_250_000..=18_750_000).contains(&t)), "within 0.75-1.25 of 15 µs");
        let mean = draws.iter().sum::<u64>() as f64 / 1000.0;
        assert!((mean / 15e6 - 1.0).abs() < 0.02, "{mean}");
    }

    #[test]
    fn sleeping_is_the_same_as_empty_intervals() {
        let mut a = control(8.0);
        a.received = counts(100, 90, 0, 10);
        a.adjust();
        let mut b = a.clone();
        a.received = counts(10, 5, 0, 0);
        b.received = a.received;
        a.slept(40);
        b.adjust();
        for _ in 1..40 {
            b.adjust();
        }
        assert_eq!((a.rate, a.g, a.increases), (b.rate, b.g, b.increases));
        assert_eq!(a.rate, 1.0);
    }
}
