//! HyStart, the exit from slow start that Linux's CUBIC runs (`net/ipv4/tcp_cubic.c`): slow start
//! ends, with ssthresh set to the window, once a round's ACKs have kept arriving close together
//! for longer than half the minimum RTT (the ACK train), or once a round's smallest RTT has risen
//! above the connection's minimum by an eighth of it, at least 4 ms and at most 16 ms (the delay
//! increase). Each step below names the kernel function it follows.

use super::{AckSignals, Window};
use crate::time::Time;

/// RTT samples a round takes before its smallest one is judged (`HYSTART_MIN_SAMPLES`).
const MIN_SAMPLES: u8 = 8;
/// The delay increase's bounds (`HYSTART_DELAY_MIN`, `HYSTART_DELAY_MAX`).
const DELAY_MIN: Time = Time::from_ms(4);
const DELAY_MAX: Time = Time::from_ms(16);
/// The window, in segments, below which HyStart does not judge (`hystart_low_window`).
const LOW_WINDOW: u64 = 16;
/// ACKs at most this far apart continue a train (`hystart_ack_delta_us`).
const ACK_DELTA: Time = Time::from_ms(2);
/// Delay samples are ignored this long after a reduction's epoch starts (`HZ` in `bictcp_acked`).
const AFTER_REDUCTION: Time = Time::from_ms(1_000);
/// The most a socket hands GSO at once (`sk_gso_max_size`, a device's default 64 KB); the ACK
/// train's threshold allows four of them at the pacing rate (`hystart_ack_delay`).
const GSO_MAX_SIZE: u128 = 65_536;

/// One connection's HyStart state (`struct bictcp`'s HyStart fields).
#[derive(Debug, Clone)]
pub struct HyStart {
    /// The exit point has been found; HyStart stays quiet until an RTO resets it.
    found: bool,
    /// When the current round began.
    round_start: Time,
    /// The round ends when an ACK passes this sequence number (`snd_nxt` at the round's start).
    end_seq: u64,
    /// The last ACK of the current train.
    last_ack: Time,
    /// The round's smallest RTT so far.
    curr_rtt: Time,
    /// RTT samples the round has taken.
    samples: u8,
    /// The connection's smallest RTT (`delay_min`), forgotten at an RTO.
    delay_min: Option<Time>,
    /// `snd_nxt` as of the last ACK, where a round restarted at an RTO ends.
    snd_nxt: u64,
}

impl HyStart {
    /// A connection's HyStart before its first ACK (`bictcp_init`): the first ACK of data opens
    /// the first round.
    pub fn new() -> Self {
        HyStart {
            found: false,
            round_start: Time::ZERO,
            end_seq: 0,
            last_ack: Time::ZERO,
            curr_rtt: Time::MAX,
            samples: 0,
            delay_min: None,
            snd_nxt: 0,
        }
    }

    /// One ACK, before the window grows: its RTT sample may end slow start (`bictcp_acked`), and
    /// an ACK past the round's end opens the next round (`bictcp_cong_avoid`). `epoch_start` is
    /// CUBIC's, whose first second after a reduction gives no delay samples.
    pub fn on_ack(&mut self, ack: &AckSignals, win: &mut Window, epoch_start: Option<Time>) {
        self.snd_nxt = ack.snd_nxt;
        if let Some(rtt) = ack.rtt {
            let settling = epoch_start.is_some_and(|e| ack.now.saturating_sub(e) < AFTER_REDUCTION);
            if !settling {
                let delay = rtt.max(Time::from_us(1));
                self.delay_min = Some(self.delay_min.map_or(delay, |d| d.min(delay)));
                if !self.found && win.cwnd < win.ssthresh && win.cwnd >= LOW_WINDOW * win.mss {
                    self.update(ack, delay, win);
                }
            }
        }
        // Linux raises the window, and so opens rounds, only outside a reduction.
        if !ack.in_recovery && win.cwnd < win.ssthresh && ack.snd_una > self.end_seq {
            self.new_round(ack.now, ack.snd_nxt);
        }
    }

    /// An RTO (`bictcp_state` entering `TCP_CA_Loss`): everything learned is forgotten and a round
    /// starts now, ending past what had been sent.
    pub fn on_timeout(&mut self, now: Time) {
        self.found = false;
        self.delay_min = None;
        self.new_round(now, self.snd_nxt);
    }

    /// `bictcp_hystart_reset`.
    fn new_round(&mut self, now: Time, snd_nxt: u64) {
        self.round_start = now;
        self.last_ack = now;
        self.end_seq = snd_nxt;
        self.curr_rtt = Time::MAX;
        self.samples = 0;
    }

    /// `hystart_update`: the ACK-train and the delay-increase tests, each ending slow start.
    fn update(&mut self, ack: &AckSignals, delay: Time, win: &mut Window) {
        let delay_min = self.delay_min.unwrap_or(delay);
        if ack.now.saturating_sub(self.last_ack) <= ACK_DELTA {
            self.last_ack = ack.now;
            // A sender Linux does not pace (CUBIC's, without the fq qdisc) halves the threshold.
            let threshold = Time((delay_min + ack_delay(ack, win)).ps() / 2);
            if ack.now.saturating_sub(self.round_start) > threshold {
                self.exit_slow_start(win);
            }
        }
        self.curr_rtt = self.curr_rtt.min(delay);
        if self.samples < MIN_SAMPLES {
            self.samples += 1;
        } else if self.curr_rtt > delay_min + Time(delay_min.ps() / 8).clamp(DELAY_MIN, DELAY_MAX) {
            self.exit_slow_start(win);
        }
    }

    fn exit_slow_start(&mut self, win: &mut Window) {
        self.found = true;
        win.ssthresh = win.cwnd;
    }
}

/// `hystart_ack_delay`: time for four GSO packets at the socket's pacing rate, at most 1 ms, which
/// allows for TSO and GRO batching at small RTTs. The pacing rate is `tcp_update_pacing_rate`'s:
/// the window over srtt, times 2 in slow start below half ssthresh and 1.2 above.
fn ack_delay(ack: &AckSignals, win: &Window) -> Time {
    if ack.srtt == Time::ZERO {
        return Time::ZERO;
    }
    let percent: u128 = if win.cwnd < win.ssthresh / 2 { 200 } else { 120 };
    let packets = (win.cwnd.max(ack.in_flight) / win.mss).max(1) as u128;
    // 4 GSO_MAX_SIZE / (mss * percent / 100 * packets / srtt), in picoseconds.
    let ps = 4 * GSO_MAX_SIZE * 100 * ack.srtt.ps() as u128 / (win.mss as u128 * percent * packets);
    Time(ps.min(Time::from_ms(1).ps() as u128) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1448;

    fn window(segments: u64) -> Window {
        Window { cwnd: segments * MSS, ssthresh: u64::MAX, pacing_rate: None, mss: MSS }
    }

    fn ack(now: Time, rtt: Time, snd_una: u64, snd_nxt: u64) -> AckSignals {
        AckSignals {
            now,
            rtt: Some(rtt),
            srtt: rtt,
            min_rtt: rtt,
            acked_bytes: MSS,
            snd_una,
            snd_nxt,
            ..Default::default()
        }
    }

    /// A round whose ACKs come every 120 us (a 100 Mb/s bottleneck's frame time) at a 300 us
    /// minimum RTT: the train ends slow start once it has lasted over half of 300 us plus the
    /// 1 ms GSO allowance, 650 us, and not before.
    #[test]
    fn an_ack_train_longer_than_half_the_min_rtt_and_gso_allowance_ends_slow_start() {
        let mut h = HyStart::new();
        let mut w = window(20);
        let rtt = Time::from_us(300);
        // The first ACK of data, more than 2 ms after anything, opens the round; snd_nxt is 20
        // segments on.
        h.on_ack(&ack(Time::from_ms(10), rtt, MSS, 21 * MSS), &mut w, None);
        let mut exited_at = None;
        for i in 1..20u64 {
            let now = Time::from_us(10_000 + 120 * i);
            h.on_ack(&ack(now, rtt, (i + 1) * MSS, 21 * MSS), &mut w, None);
            if w.ssthresh != u64::MAX && exited_at.is_none() {
                exited_at = Some(i);
            }
        }
        // 120 us * 5 = 600 us <= 650 us; 720 us > 650 us.
        assert_eq!(exited_at, Some(6));
        assert_eq!(w.ssthresh, 20 * MSS);
    }

    /// ACKs more than 2 ms apart break the train, so only a rising RTT can end slow start: after
    /// eight samples, a round whose smallest RTT exceeds the minimum by max(min/8, 4 ms).
    #[test]
    fn a_round_whose_smallest_rtt_rises_4ms_over_the_minimum_ends_slow_start() {
        let mut h = HyStart::new();
        let mut w = window(16);
        let base = Time::from_ms(10);
        let mut now = Time::from_ms(100);
        let mut una = MSS;
        // Round 1 sets delay_min = 10 ms.
        h.on_ack(&ack(now, base, una, 1_000 * MSS), &mut w, None);
        // Round 2 (new round once the ACK passes end_seq) with RTTs 10 + 4 ms: not above.
        let round = |h: &mut HyStart, w: &mut Window, rtt: Time, now: &mut Time, una: &mut u64| {
            let end = h.end_seq;
            *una = end + MSS;
            for _ in 0..10 {
                *now += Time::from_ms(3);
                h.on_ack(&ack(*now, rtt, *una, *una + 1_000 * MSS), w, None);
                *una += 1;
            }
        };
        round(&mut h, &mut w, base + Time::from_ms(4), &mut now, &mut una);
        assert_eq!(w.ssthresh, u64::MAX, "a rise of exactly 4 ms does not exit");
        round(&mut h, &mut w, base + Time::from_us(4_100), &mut now, &mut una);
        assert_eq!(w.ssthresh, 16 * MSS);
        assert!(h.found);
    }

    /// Below 16 segments HyStart only watches; an RTO forgets the minimum RTT and what was found.
    #[test]
    fn small_windows_are_not_judged_and_an_rto_starts_over() {
        let mut h = HyStart::new();
        let mut w = window(15);
        for i in 0..40u64 {
            h.on_ack(&ack(Time::from_us(1_000 + 120 * i), Time::from_us(300), (i + 1) * MSS, 100 * MSS), &mut w, None);
        }
        assert_eq!(w.ssthresh, u64::MAX);
        assert_eq!(h.delay_min, Some(Time::from_us(300)));
        h.found = true;
        h.on_timeout(Time::from_ms(500));
        assert!(!h.found && h.delay_min.is_none());
        assert_eq!((h.round_start, h.end_seq), (Time::from_ms(500), 100 * MSS));
    }

    /// `hystart_ack_delay` is four 64 KB GSO packets at twice the window's rate, capped at 1 ms.
    #[test]
    fn the_gso_allowance_follows_the_pacing_rate() {
        let w = window(100);
        let a = |srtt_us| AckSignals { srtt: Time::from_us(srtt_us), ..Default::default() };
        // 100 segments over 20 us at 200 %: 14.48 GB/s; 262,144 B takes 18.1 us.
        let d = ack_delay(&a(20), &w);
        assert_eq!(d.ps() / 1_000_000, 18, "{d:?}");
        assert_eq!(ack_delay(&a(2_000), &w), Time::from_ms(1));
    }
}
