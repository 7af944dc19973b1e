//! Tail Loss Probe (RFC 8985, section 7), a baseline TLT is compared against: when a flow's
//! outstanding data goes unacknowledged for a probe timeout (two smoothed RTTs, plus the peer's
//! delayed-ACK time when one segment is in flight, never beyond the RTO), the sender sends one
//! probe, a new segment if there is one and else its last segment again, so the ACK the probe
//! draws starts SACK recovery instead of a timeout.
//!
//! RFC 8985 pairs the probe with RACK's time-based loss detection. sluice's sender detects loss
//! by SACK (RFC 6675), so it applies RACK's rule to the probe alone: once the probe is delivered,
//! every byte sent before it and still not acknowledged is lost.

use super::stack::JIFFY;
use crate::event::TimerSlot;
use crate::time::Time;

/// One sender's probe state.
#[derive(Clone, Debug, Default)]
pub struct TailLossProbe {
    /// The probe timer.
    pub timer: TimerSlot,
    /// The timer fired: the next segment is the probe.
    due: bool,
    /// First byte of the probe in flight.
    outstanding: Option<u64>,
    /// Added to 2 SRTT when one segment is in flight (the peer may delay its ACK).
    one_segment_extra: Time,
    /// Added to 2 SRTT when more are.
    extra: Time,
    /// Probes sent.
    pub probes: u64,
}

impl TailLossProbe {
    /// Probe state for a peer that delays ACKs by up to `delayed_ack` (RFC 8985).
    pub fn new(delayed_ack: Time) -> TailLossProbe {
        TailLossProbe { one_segment_extra: delayed_ack, ..TailLossProbe::default() }
    }

    /// Probe state as Linux's `tcp_schedule_loss_probe` (net/ipv4/tcp_output.c): 2 SRTT plus
    /// `rto_min` when one segment is in flight, plus `TCP_TIMEOUT_MIN` (two jiffies) otherwise.
    pub fn linux(rto_min: Time) -> TailLossProbe {
        TailLossProbe { one_segment_extra: rto_min, extra: JIFFY.saturating_mul(2), ..TailLossProbe::default() }
    }

    /// The probe timeout: 2 SRTT plus the extra for what is in flight, at most `rto`.
    pub fn timeout(&self, srtt: Time, rto: Time, one_segment: bool) -> Time {
        let pto = srtt.saturating_mul(2) + if one_segment { self.one_segment_extra } else { self.extra };
        pto.min(rto)
    }

    /// True while no probe is in flight (one per episode: the RTO follows an unanswered probe).
    pub fn may_arm(&self) -> bool {
        self.outstanding.is_none() && !self.due
    }

    /// The timer fired: send the probe next.
    pub fn fire(&mut self) {
        self.due = true;
    }

    /// True when the next segment must be the probe.
    pub fn is_due(&self) -> bool {
        self.due
    }

    /// The probe starting at `seq` leaves.
    pub fn sent(&mut self, seq: u64) {
        self.due = false;
        self.outstanding = Some(seq);
        self.probes += 1;
    }

    /// An ACK arrived: returns where the probe started if this ACK shows it delivered (its first
    /// byte cumulatively acknowledged or SACKed), ending the episode.
    pub fn delivered(&mut self, covered: impl Fn(u64) -> bool) -> Option<u64> {
        let p = self.outstanding.filter(|&p| covered(p))?;
        self.outstanding = None;
        Some(p)
    }

    /// A retransmission timeout ends the episode.
    pub fn on_timeout(&mut self) {
        self.due = false;
        self.outstanding = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_is_two_srtt_plus_the_delayed_ack_for_one_segment_capped_at_the_rto() {
        let t = TailLossProbe::new(Time::from_us(40));
        let (srtt, rto) = (Time::from_us(20), Time::from_ms(4));
        assert_eq!(t.timeout(srtt, rto, false), Time::from_us(40));
        assert_eq!(t.timeout(srtt, rto, true), Time::from_us(80));
        assert_eq!(t.timeout(Time::from_ms(3), rto, false), rto);
    }

    #[test]
    fn linuxs_timeout_adds_rto_min_for_one_segment_and_two_jiffies_for_more() {
        let t = TailLossProbe::linux(Time::from_ms(10));
        let (srtt, rto) = (Time::from_ms(1), Time::from_ms(30));
        assert_eq!(t.timeout(srtt, rto, false), Time::from_ms(2 + 8));
        assert_eq!(t.timeout(srtt, rto, true), Time::from_ms(2 + 10));
        assert_eq!(t.timeout(Time::from_ms(12), rto, false), rto, "never beyond the RTO");
    }

    #[test]
    fn one_probe_per_episode() {
        let mut t = TailLossProbe::new(Time::ZERO);
        assert!(t.may_arm());
        t.fire();
        assert!(t.is_due() && !t.may_arm());
        t.sent(5000);
        assert!(!t.may_arm());
        assert_eq!(t.delivered(|s| s < 5000), None, "not yet");
        assert_eq!(t.delivered(|s| s <= 5000), Some(5000));
        assert!(t.may_arm());
    }
}
