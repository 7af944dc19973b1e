//! Delivery-rate estimation, as in Linux `tcp_rate.c` and draft-cheng-iccrg-delivery-rate-estimation:
//! every segment remembers the connection's delivery state when it was sent, so the ACK that
//! delivers it measures the rate over the interval in between.

use crate::time::{Rate, Time};
use std::collections::VecDeque;

/// The connection's delivery state at the moment one segment was last sent.
#[derive(Clone, Copy, Debug)]
struct TxRecord {
    seq: u64,
    end: u64,
    sent: Time,
    /// Bytes delivered when the segment was sent.
    delivered: u64,
    /// When that count last grew.
    delivered_time: Time,
    /// Start of the send interval this segment closes.
    first_sent_time: Time,
    is_app_limited: bool,
    /// Already counted as delivered (by SACK); counted once only.
    acked: bool,
}

/// What one ACK measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateSample {
    /// Bytes delivered per second over the interval; `None` when the ACK gives no valid sample.
    pub delivery_rate: Option<Rate>,
    /// Bytes delivered over the interval.
    pub delivered: u64,
    /// The longer of the send and ACK intervals of the sample.
    pub interval: Time,
    /// Connection `delivered` when the most recently sent segment this ACK delivered was sent.
    pub prior_delivered: u64,
    /// That segment left while the application had nothing more to send.
    pub is_app_limited: bool,
}

/// The sample being assembled while one ACK is processed: from the most recently sent segment.
#[derive(Clone, Copy, Debug)]
struct Pending {
    prior_delivered: u64,
    prior_time: Time,
    send_elapsed: Time,
    is_app_limited: bool,
    sent: Time,
    end: u64,
}

/// A flow's delivery-rate estimator.
#[derive(Debug, Default)]
pub struct RateSampler {
    /// Bytes delivered over the connection's life.
    delivered: u64,
    /// When `delivered` last grew.
    delivered_time: Time,
    /// Send time of the most recently delivered segment: where the next send interval starts.
    first_sent_time: Time,
    /// While nonzero, segments sent are app-limited; cleared once `delivered` passes it.
    app_limited_until: u64,
    /// Segments not yet cumulatively acknowledged, in sequence order.
    segs: VecDeque<TxRecord>,
    pending: Option<Pending>,
}

impl RateSampler {
    /// Bytes delivered (cumulatively acked or SACKed) over the connection's life.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Records a (re)transmission of `[seq, seq + len)`; `idle` says nothing was outstanding.
    pub fn on_send(&mut self, seq: u64, len: u64, now: Time, idle: bool) {
        if idle {
            // A send interval must not span an idle period, or the rate would be underestimated.
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        let rec = TxRecord {
            seq,
            end: seq + len,
            sent: now,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            is_app_limited: self.app_limited_until != 0,
            acked: false,
        };
        if self.segs.back().is_none_or(|b| b.end <= seq) {
            self.segs.push_back(rec);
            return;
        }
        // A retransmission: the copy now in flight is the one that will be delivered.
        let first = self.segs.partition_point(|r| r.end <= seq);
        for r in self.segs.range_mut(first..).take_while(|r| r.seq < seq + len) {
            *r = TxRecord { seq: r.seq, end: r.end, acked: r.acked, ..rec };
        }
    }

    /// Notes that the sender ran out of data with `in_flight` bytes outstanding: samples are
    /// app-limited until that much more has been delivered.
    pub fn on_app_limited(&mut self, in_flight: u64) {
        self.app_limited_until = (self.delivered + in_flight).max(1);
    }

    /// Counts the segments lying wholly in the newly SACKed range `[start, end)`.
    pub fn on_sacked(&mut self, start: u64, end: u64, now: Time) {
        let mut i = self.segs.partition_point(|r| r.end <= start);
        while let Some(r) = self.segs.get(i).copied().filter(|r| r.seq < end) {
            if !r.acked && r.seq >= start && r.end <= end {
                self.segs[i].acked = true;
                self.deliver(&r, now);
            }
            i += 1;
        }
    }

    /// Counts and forgets the segments below the cumulative ACK `una`.
    pub fn on_cumulative(&mut self, una: u64, now: Time) {
        while let Some(r) = self.segs.front().copied().filter(|r| r.end <= una) {
            self.segs.pop_front();
            if !r.acked {
                self.deliver(&r, now);
            }
        }
    }

    fn deliver(&mut self, r: &TxRecord, now: Time) {
        self.delivered += r.end - r.seq;
        self.delivered_time = now;
        // The sample comes from the most recently sent segment the ACK covers (RFC draft 3.3).
        let newer = self.pending.is_none_or(|p| (r.sent, r.end) > (p.sent, p.end));
        if newer {
            self.pending = Some(Pending {
                prior_delivered: r.delivered,
                prior_time: r.delivered_time,
                send_elapsed: r.sent.saturating_sub(r.first_sent_time),
                is_app_limited: r.is_app_limited,
                sent: r.sent,
                end: r.end,
            });
            self.first_sent_time = r.sent;
        }
    }

    /// Ends the current ACK and returns its sample. Intervals shorter than `min_rtt` are
    /// rejected: they come from ACK compression and would overestimate the rate.
    pub fn sample(&mut self, min_rtt: Time) -> RateSample {
        if self.app_limited_until != 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        let Some(p) = self.pending.take() else { return RateSample::default() };
        // ACK-rate and send-rate can each be inflated by bunching; the longer interval is safe.
        let interval = p.send_elapsed.max(self.delivered_time.saturating_sub(p.prior_time));
        let delivered = self.delivered - p.prior_delivered;
        let valid = interval > Time::ZERO && interval >= min_rtt;
        let delivery_rate =
            valid.then(|| Rate((delivered as u128 * 8 * 1_000_000_000_000 / interval.ps() as u128) as u64));
        RateSample {
            delivery_rate,
            delivered,
            interval,
            prior_delivered: p.prior_delivered,
            is_app_limited: p.is_app_limited,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn us(n: u64) -> Time {
        Time::from_us(n)
    }

    /// Sends `n` segments from `seq0`, one every `gap` starting at `t0`.
    fn send(rs: &mut RateSampler, seq0: u64, n: u64, t0: Time, gap: Time) {
        for i in 0..n {
            rs.on_send(seq0 + i * MSS, MSS, t0 + gap.saturating_mul(i), false);
        }
    }

    #[test]
    fn steady_stream_measures_the_sending_rate() {
        // One segment per microsecond (8 Gb/s of payload), each acked 10 us after it left; at
        // each microsecond the ACK is processed before the next send.
        let mut rs = RateSampler::default();
        let mut samples = Vec::new();
        for t in 0..50u64 {
            if t >= 10 {
                rs.on_cumulative((t - 9) * MSS, us(t));
                samples.push(rs.sample(us(10)));
            }
            if t < 40 {
                rs.on_send(t * MSS, MSS, us(t), t == 0);
            }
        }
        assert_eq!(rs.delivered(), 40 * MSS);
        // The first window measures from the idle start: i + 1 segments over 10 + i us.
        for (i, s) in samples[..10].iter().enumerate() {
            let i = i as u64;
            assert_eq!((s.delivered, s.interval, s.prior_delivered), ((i + 1) * MSS, us(10 + i), 0));
        }
        // Then every ACK sees one window (10 segments) per RTT (10 us): exactly the send rate.
        for (i, s) in samples[10..].iter().enumerate() {
            let i = i as u64 + 10;
            assert_eq!((s.delivered, s.interval, s.prior_delivered), (10 * MSS, us(10), (i - 9) * MSS));
            assert_eq!(s.delivery_rate, Some(Rate(8_000_000_000)));
            assert!(!s.is_app_limited);
        }
    }

    #[test]
    fn compressed_acks_do_not_inflate_the_rate() {
        // A at 0 us, B..K at 1..10 us; A's ACK comes late (20 us), L leaves at 21 us, and the
        // ACKs of B..L arrive in one burst 100 ns later. The ACK interval (1.1 us) would claim
        // 80 Gb/s; the send interval since A left (21 us) bounds the sample.
        let mut rs = RateSampler::default();
        rs.on_send(0, MSS, Time::ZERO, true);
        send(&mut rs, MSS, 10, us(1), us(1));
        rs.on_cumulative(MSS, us(20));
        assert_eq!(rs.sample(Time::ZERO).interval, us(20));
        rs.on_send(11 * MSS, MSS, us(21), false);
        rs.on_cumulative(12 * MSS, us(21) + Time::from_ns(100));
        let s = rs.sample(Time::ZERO);
        assert_eq!((s.delivered, s.prior_delivered, s.interval), (11 * MSS, MSS, us(21)));
        assert_eq!(s.delivery_rate, Some(Rate(11 * MSS * 8 * 1_000_000_000_000 / us(21).ps())));
    }

    #[test]
    fn short_intervals_are_rejected_against_min_rtt() {
        let mut rs = RateSampler::default();
        send(&mut rs, 0, 2, Time::ZERO, us(1));
        rs.on_cumulative(MSS, us(3));
        let s = rs.sample(us(5));
        assert_eq!((s.delivered, s.interval, s.delivery_rate), (MSS, us(3), None));
        // No ACK of new data: no sample at all.
        assert_eq!(rs.sample(us(5)), RateSample::default());
    }

    #[test]
    fn sacked_segments_count_once_and_retransmissions_restart_their_clock() {
        let mut rs = RateSampler::default();
        send(&mut rs, 0, 5, Time::ZERO, us(1));
        // Segment 0 lost; 1..5 SACKed at 10..13 us.
        for i in 1..5 {
            rs.on_sacked(MSS, (i + 1) * MSS, us(9 + i));
            rs.sample(Time::ZERO);
        }
        assert_eq!(rs.delivered(), 4 * MSS);
        // Retransmit segment 0 at 20 us; its ACK covers everything but delivers only it.
        rs.on_send(0, MSS, us(20), false);
        rs.on_cumulative(5 * MSS, us(30));
        let s = rs.sample(Time::ZERO);
        assert_eq!(rs.delivered(), 5 * MSS);
        assert_eq!(s.prior_delivered, 4 * MSS, "state of the retransmission, not the original");
        assert_eq!(s.delivered, MSS);
        // Send interval 20 - 4 us (last delivered send time); ACK interval 30 - 13 us.
        assert_eq!(s.interval, us(17));
    }

    #[test]
    fn app_limited_until_the_outstanding_data_is_delivered() {
        let mut rs = RateSampler::default();
        send(&mut rs, 0, 4, Time::ZERO, us(1));
        rs.on_app_limited(4 * MSS);
        send(&mut rs, 4 * MSS, 2, us(4), us(1));
        let mut flags = Vec::new();
        for i in 0..6 {
            rs.on_cumulative((i + 1) * MSS, us(10 + i));
            flags.push(rs.sample(Time::ZERO).is_app_limited);
        }
        assert_eq!(flags, [false, false, false, false, true, true]);
        // Delivered passed the mark (4 MSS): what is sent now is not app-limited.
        rs.on_send(6 * MSS, MSS, us(20), true);
        rs.on_cumulative(7 * MSS, us(30));
        assert!(!rs.sample(Time::ZERO).is_app_limited);
    }
}
