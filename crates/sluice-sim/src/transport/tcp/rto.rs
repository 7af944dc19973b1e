//! RTT estimation and the retransmission timeout of RFC 6298.

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
}

impl RttEstimator {
    /// A fresh estimator (RTO = `rto_init` until the first sample).
    pub fn new(rto_min: Time, rto_init: Time, rto_max: Time) -> Self {
        RttEstimator { srtt: None, rttvar: Time::ZERO, min_rtt: Time::MAX, rto_min, rto_max, rto_init: rto_init.max(rto_min), backoff: 0 }
    }

    /// Folds in one RTT measurement (alpha = 1/8, beta = 1/4).
    pub fn sample(&mut self, r: Time) {
        self.min_rtt = self.min_rtt.min(r);
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

    /// The current RTO including backoff: max(rto_min, srtt + 4 rttvar) << backoff, capped.
    pub fn rto(&self) -> Time {
        let base = match self.srtt {
            None => self.rto_init,
            Some(s) => (s + self.rttvar.saturating_mul(4)).max(self.rto_min),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rto_follows_rfc6298_with_floor_and_backoff() {
        let mut e = RttEstimator::new(Time::from_ms(1), Time::from_ms(3), Time::from_ms(100));
        assert_eq!(e.rto(), Time::from_ms(3));
        e.sample(Time::from_us(100));
        // srtt 100us, rttvar 50us: 300us, floored at 1ms.
        assert_eq!(e.rto(), Time::from_ms(1));
        e.sample(Time::from_ms(2));
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
