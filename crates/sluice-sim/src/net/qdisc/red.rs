//! RED marking with ns-3's `RedQueueDisc` semantics in byte mode: an EWMA of the queue (decayed
//! over idle time), a linear probability from `kmin` to `kmax` reaching `pmax`, the gentle region
//! from `kmax` to twice `kmax` where it rises to 1, and the count-based spacing that makes marks
//! uniform rather than geometric (with ns-3's `Wait` option). A packet RED would drop is marked
//! instead (ECN), also above the forced threshold (ns-3's `UseHardDrop = false`).
//!
//! With `weight = 1`, `gentle = false` and `spacing = "none"` it is the instantaneous, per-packet
//! RED of the HPCC simulator's and the UEC reference's switches, but for two details that are
//! ns-3's: the first packet after the queue reaches `kmin` only arms the count and is not marked,
//! and a queue at exactly `kmin` or `kmax` counts as past it (theirs judge `>`).

use crate::time::{Rate, Time};

/// How marks are spaced once the average is between the thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spacing {
    /// Each packet is marked independently with the linear probability.
    None,
    /// ns-3 with `Wait = false`: p / (1 - count p), marks spaced uniformly.
    Uniform,
    /// ns-3's default `Wait = true`: no mark until count p reaches 1, then p / (2 - count p).
    Wait,
}

/// RED's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RedParams {
    /// Lower threshold on the average queue, bytes.
    pub kmin: u64,
    /// Upper threshold, bytes.
    pub kmax: u64,
    /// Marking probability at `kmax`.
    pub pmax: f64,
    /// EWMA weight of the newest queue sample (ns-3's QW; 1 = the instantaneous queue).
    pub weight: f64,
    /// Gentle region between `kmax` and `2 kmax`.
    pub gentle: bool,
    /// Mark spacing.
    pub spacing: Spacing,
    /// Mean packet size for byte-mode counting and idle decay (ns-3's MeanPktSize).
    pub mean_packet: u64,
}

/// RED's state on one port.
#[derive(Clone, Copy, Debug)]
pub struct Red {
    /// The parameters.
    pub params: RedParams,
    avg: f64,
    /// Bytes arrived since the last mark (ns-3's m_countBytes).
    count_bytes: u64,
    /// Packets arrived since the last mark (ns-3's m_count).
    count: u64,
    /// Set once the average has crossed `kmin` (ns-3's m_old).
    above: bool,
    /// The queue went empty at this time and has not received a packet since.
    idle_since: Option<Time>,
}

/// What RED decides for an arriving packet, before any random draw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RedDecision {
    /// Below the thresholds, or spacing holds the mark back.
    Pass,
    /// Above the forced threshold: mark.
    Forced,
    /// Mark with this probability.
    Early(f64),
}

impl Red {
    /// Fresh state.
    pub fn new(params: RedParams) -> Red {
        Red { params, avg: 0.0, count_bytes: 0, count: 0, above: false, idle_since: Some(Time::ZERO) }
    }

    /// The current average queue, bytes.
    pub fn average(&self) -> f64 {
        self.avg
    }

    /// Updates the average for a packet of `size` bytes arriving to `queue_bytes` at `now` on a
    /// port of `rate`, and says what to do with it.
    pub fn on_arrival(&mut self, queue_bytes: u64, size: u64, now: Time, rate: Rate) -> RedDecision {
        let p = &self.params;
        let w = p.weight;
        self.avg = if w >= 1.0 {
            self.idle_since = None;
            queue_bytes as f64
        } else {
            // Over idle time ns-3 decays the average as if `m` mean-size packets had left.
            let m = self.idle_since.take().map_or(0, |since| {
                now.saturating_sub(since).0 / rate.tx_time(p.mean_packet).0.max(1)
            });
            self.avg * (1.0 - w).powf(m as f64 + 1.0) + w * queue_bytes as f64
        };
        self.count += 1;
        self.count_bytes += size;
        let (kmin, kmax) = (p.kmin as f64, p.kmax as f64);
        if !(self.avg >= kmin && queue_bytes > 1) {
            self.above = false;
            return RedDecision::Pass;
        }
        let forced = if p.gentle { self.avg >= 2.0 * kmax } else { self.avg >= kmax };
        if forced {
            self.count = 0;
            self.count_bytes = 0;
            return RedDecision::Forced;
        }
        if !self.above {
            // The average just crossed kmin: restart the count so the next mark is spaced.
            self.count = 1;
            self.count_bytes = size;
            self.above = true;
            return RedDecision::Pass;
        }
        let pb = if p.gentle && self.avg >= kmax {
            (1.0 - p.pmax) / kmax * self.avg + 2.0 * p.pmax - 1.0
        } else {
            p.pmax * (self.avg - kmin) / (kmax - kmin).max(1.0)
        }
        .min(1.0);
        let pa = match p.spacing {
            Spacing::None => pb,
            spacing => {
                // Byte mode counts mean-size packets, with ns-3's integer division.
                let count = (self.count_bytes / p.mean_packet.max(1)) as f64;
                let spaced = match spacing {
                    Spacing::Wait if count * pb < 1.0 => 0.0,
                    Spacing::Wait if count * pb < 2.0 => pb / (2.0 - count * pb),
                    Spacing::Uniform if count * pb < 1.0 => pb / (1.0 - count * pb),
                    _ => 1.0,
                };
                if spaced < 1.0 {
                    spaced * size as f64 / p.mean_packet.max(1) as f64
                } else {
                    spaced
                }
            }
        };
        RedDecision::Early(pa.min(1.0))
    }

    /// Records that the packet was marked: the count restarts.
    pub fn on_mark(&mut self) {
        self.count = 0;
        self.count_bytes = 0;
    }

    /// Records that the queue went empty at `now` (the average then decays over the idle time).
    pub fn on_empty(&mut self, now: Time) {
        self.idle_since = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(weight: f64, gentle: bool, spacing: Spacing) -> RedParams {
        RedParams { kmin: 100_000, kmax: 200_000, pmax: 0.1, weight, gentle, spacing, mean_packet: 1000 }
    }

    #[test]
    fn instantaneous_red_is_linear_between_thresholds() {
        let mut r = Red::new(params(1.0, false, Spacing::None));
        let rate = Rate::gbps(100);
        assert_eq!(r.on_arrival(50_000, 1000, Time(1), rate), RedDecision::Pass);
        // The first packet above kmin only arms the count (ns-3's m_old).
        assert_eq!(r.on_arrival(150_000, 1000, Time(2), rate), RedDecision::Pass);
        assert_eq!(r.on_arrival(150_000, 1000, Time(3), rate), RedDecision::Early(0.05));
        assert_eq!(r.on_arrival(200_000, 1000, Time(4), rate), RedDecision::Forced);
    }

    #[test]
    fn gentle_region_rises_from_pmax_to_one() {
        let mut r = Red::new(params(1.0, true, Spacing::None));
        let rate = Rate::gbps(100);
        r.on_arrival(150_000, 1000, Time(1), rate);
        match r.on_arrival(300_000, 1000, Time(2), rate) {
            RedDecision::Early(p) => assert!((p - 0.55).abs() < 1e-12, "halfway from 0.1 to 1: {p}"),
            d => panic!("{d:?}"),
        }
        assert_eq!(r.on_arrival(400_000, 1000, Time(3), rate), RedDecision::Forced);
    }

    #[test]
    fn wait_spacing_holds_marks_until_count_times_p_reaches_one() {
        let mut r = Red::new(params(1.0, false, Spacing::Wait));
        let rate = Rate::gbps(100);
        r.on_arrival(150_000, 1000, Time(1), rate);
        // pb = 0.05: no mark for counts below 20 mean-size packets.
        for i in 2..20 {
            assert_eq!(r.on_arrival(150_000, 1000, Time(i), rate), RedDecision::Early(0.0), "count {i}");
        }
        match r.on_arrival(150_000, 1000, Time(20), rate) {
            RedDecision::Early(p) => assert!((p - 0.05).abs() < 1e-12, "count 20: 0.05 / (2 - 1) = {p}"),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn the_average_follows_the_ewma_and_decays_when_idle() {
        let mut r = Red::new(params(0.5, false, Spacing::None));
        let rate = Rate::gbps(8);
        r.on_arrival(0, 1000, Time(0), rate);
        r.on_arrival(1000, 1000, Time(1), rate);
        assert_eq!(r.average(), 500.0);
        // Idle for 4 mean-packet times (1 us each at 8 Gb/s): the average halves 4 times for
        // the idle time and once for the arrival itself, which finds the queue empty.
        r.on_empty(Time(1_000_000));
        r.on_arrival(0, 1000, Time(5_000_000), rate);
        assert!((r.average() - 500.0 / 32.0).abs() < 1e-9, "{}", r.average());
    }
}
