//! RTT estimation and the retransmission timeout: RFC 6298's, or Linux's.

use super::stack::JIFFY;
use crate::time::Time;

/// Smoothed RTT, RTT variance and the RTO with exponential backoff.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    srtt: Option<Time>,
    rttvar: Time,
    min_rtt: Time,
    rto_min: Time,
    rto_max: Time,
    rto_init: Time,
    backoff: u32,
    /// Linux's estimator, in place of RFC 6298's.
    linux: Option<LinuxRtt>,
}

/// Linux's `tcp_rtt_estimator` state (net/ipv4/tcp_input.c), in picoseconds, scaled as the
/// kernel scales it: `srtt8` is 8 x srtt, `mdev`, `mdev_max` and `rttvar` are 4 x deviations.
#[derive(Clone, Debug, Default)]
struct LinuxRtt {
    srtt8: u64,
    mdev: i64,
    mdev_max: u64,
    rttvar: u64,
    /// The highest sequence sent when the current RTT's variance window began.
    rtt_seq: u64,
}

impl RttEstimator {
    /// A fresh RFC 6298 estimator (RTO = `rto_init` until the first sample).
    pub fn new(rto_min: Time, rto_init: Time, rto_max: Time) -> Self {
        RttEstimator {
            srtt: None,
            rttvar: Time::ZERO,
            min_rtt: Time::MAX,
            rto_min,
            rto_max,
            rto_init: rto_init.max(rto_min),
            backoff: 0,
            linux: None,
        }
    }

    /// A fresh estimator as Linux's: the variance term never falls below `rto_min` within a
    /// round trip, so the RTO is at least srtt + rto_min, counted in whole jiffies.
    pub fn linux(rto_min: Time, rto_init: Time, rto_max: Time) -> Self {
        RttEstimator { linux: Some(LinuxRtt::default()), ..RttEstimator::new(rto_min, rto_init, rto_max) }
    }

    /// Folds in one RTT measurement taken when `una` was acknowledged and `nxt` was the next
    /// sequence to send (Linux's estimator opens a variance window per round trip).
    pub fn sample(&mut self, r: Time, una: u64, nxt: u64) {
        self.min_rtt = self.min_rtt.min(r);
        if let Some(l) = self.linux.as_mut() {
            l.sample(r, una, nxt, self.rto_min);
            self.srtt = Some(Time(l.srtt8 >> 3));
            return;
        }
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = Time(r.0 / 2);
            }
            Some(s) => {
                let err = s.0.abs_diff(r.0);
                self.rttvar = Time((3 * self.rttvar.0 + err) / 4);
                self.srtt = Some(Time((7 * s.0 + r.0) / 8));
            }
        }
    }

    /// Smoothed RTT (zero before the first sample).
    pub fn srtt(&self) -> Time {
        self.srtt.unwrap_or(Time::ZERO)
    }

    /// Smallest RTT seen (zero before the first sample).
    pub fn min_rtt(&self) -> Time {
        if self.min_rtt == Time::MAX {
            Time::ZERO
        } else {
            self.min_rtt
        }
    }

    /// The current RTO including backoff, capped: RFC 6298's max(rto_min, srtt + 4 rttvar), or
    /// Linux's srtt + rttvar in whole jiffies (`__tcp_set_rto`), shifted left once per expiry.
    pub fn rto(&self) -> Time {
        let base = match (self.srtt, &self.linux) {
            (None, _) => self.rto_init,
            (Some(s), None) => (s + self.rttvar.saturating_mul(4)).max(self.rto_min),
            (Some(_), Some(l)) => Time(((l.srtt8 >> 3) + l.rttvar).div_ceil(JIFFY.ps()) * JIFFY.ps()),
        };
        base.saturating_mul(1u64 << self.backoff.min(30)).min(self.rto_max)
    }

    /// Doubles the RTO after an expiry.
    pub fn back_off(&mut self) {
        self.backoff = (self.backoff + 1).min(30);
    }

    /// Clears the backoff once new data is acknowledged.
    pub fn reset_backoff(&mut self) {
        self.backoff = 0;
    }
}

impl LinuxRtt {
    /// `tcp_rtt_estimator`: srtt gains 1/8 of the error, mdev 1/4 of it (1/32 while the RTT
    /// falls), and rttvar follows the round trip's largest mdev, decaying by a quarter of its
    /// excess once a round trip, never below `rto_min`.
    fn sample(&mut self, r: Time, una: u64, nxt: u64, rto_min: Time) {
        let m = r.ps() as i64;
        if self.srtt8 == 0 {
            self.srtt8 = (m as u64) << 3;
            self.mdev = m << 1;
            self.rttvar = (self.mdev as u64).max(rto_min.ps());
            self.mdev_max = self.rttvar;
            self.rtt_seq = nxt;
        } else {
            let mut err = m - (self.srtt8 >> 3) as i64;
            self.srtt8 = (self.srtt8 as i64 + err) as u64;
            if err < 0 {
                err = -err - (self.mdev >> 2);
                if err > 0 {
                    err >>= 3;
                }
            } else {
                err -= self.mdev >> 2;
            }
            self.mdev += err;
            if self.mdev as u64 > self.mdev_max {
                self.mdev_max = self.mdev as u64;
                self.rttvar = self.rttvar.max(self.mdev_max);
            }
            if una > self.rtt_seq {
                if self.mdev_max < self.rttvar {
                    self.rttvar -= (self.rttvar - self.mdev_max) >> 2;
                }
                self.rtt_seq = nxt;
                self.mdev_max = rto_min.ps();
            }
        }
        self.srtt8 = self.srtt8.max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rto_follows_rfc6298_with_floor_and_backoff() {
        let mut e = RttEstimator::new(Time::from_ms(1), Time::from_ms(3), Time::from_ms(100));
        assert_eq!(e.rto(), Time::from_ms(3));
        e.sample(Time::from_us(100), 0, 0);
        // srtt 100us, rttvar 50us: 300us, floored at 1ms.
        assert_eq!(e.rto(), Time::from_ms(1));
        e.sample(Time::from_ms(2), 0, 0);
        // rttvar = (3*50 + 1900)/4 = 512.5us; srtt = (700 + 2000)/8 = 337.5us.
        assert_eq!(e.srtt(), Time(337_500_000));
        assert_eq!(e.rto(), Time(337_500_000 + 4 * 512_500_000));
        e.back_off();
        e.back_off();
        assert_eq!(e.rto(), Time((337_500_000 + 4 * 512_500_000) * 4));
        for _ in 0..10 {
            e.back_off();
        }
        assert_eq!(e.rto(), Time::from_ms(100));
        assert_eq!(e.min_rtt(), Time::from_us(100));
    }
}

#[cfg(test)]
mod linux_tests {
    use super::*;

    /// `tcp_rtt_estimator` and `__tcp_set_rto` by hand, with a 10 ms rto_min and 4 ms jiffies.
    #[test]
    fn linuxs_rto_is_srtt_plus_at_least_rto_min_in_whole_jiffies() {
        let mut e = RttEstimator::linux(Time::from_ms(10), Time::from_ms(1_000), Time::from_ms(120_000));
        assert_eq!(e.rto(), Time::from_ms(1_000), "TCP_TIMEOUT_INIT before a sample");
        // First sample 1 ms: srtt 1 ms, mdev 2 ms (x4 scale), rttvar max(2, 10) = 10 ms:
        // 11 ms, rounded up to 12 ms. RFC 6298 would give max(10, 1 + 4 x 0.5) = 10 ms.
        e.sample(Time::from_ms(1), 0, 100);
        assert_eq!(e.srtt(), Time::from_ms(1));
        assert_eq!(e.rto(), Time::from_ms(12));
        // A sample of 9 ms within the same round (una not past 100): err 8 ms, srtt 2 ms;
        // mdev 2 + (8 - 0.5) = 9.5 ms < mdev_max 10 ms, so rttvar stays 10: 12 ms.
        e.sample(Time::from_ms(9), 50, 200);
        assert_eq!(e.srtt(), Time::from_ms(2));
        assert_eq!(e.rto(), Time::from_ms(12));
        // Next round, 25 ms: err 23 ms, srtt 4.875 ms; mdev 9.5 + 23 - 2.375 = 30.125 ms, the
        // new rttvar: 35 ms, rounded up to 36 ms.
        e.sample(Time::from_ms(25), 150, 300);
        assert_eq!(e.srtt(), Time(4_875_000_000));
        assert_eq!(e.rto(), Time::from_ms(36));
        // Falling RTTs (1 ms) move mdev by an eighth of their excess only, and each round trip
        // takes a quarter off rttvar's excess over rto_min; the RTO never goes below srtt + 10.
        let mut last = e.rto();
        for round in 0..40u64 {
            e.sample(Time::from_ms(1), 300 + 100 * round + 1, 400 + 100 * round);
            assert!(
                e.rto() <= last && e.rto() >= e.srtt() + Time::from_ms(10),
                "round {round}: {} after {last}",
                e.rto()
            );
            last = e.rto();
        }
        assert_eq!(e.rto(), Time::from_ms(12), "back to srtt (1 ms) + rto_min, in jiffies");
        e.back_off();
        assert_eq!(e.rto(), Time::from_ms(24));
    }
}
