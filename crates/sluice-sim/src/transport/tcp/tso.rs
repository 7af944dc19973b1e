//! Linux's TSO packets on the sender (`transport.tso`, the `linux` stack on a NIC with
//! segmentation offload). Linux sends new data in packets of up to 64 KB, each of which the NIC
//! cuts into frames, and decides what goes only when something calls `tcp_write_xmit`: an ACK,
//! or the application writing. Then, packet by packet, it takes at most half the window at once
//! (`tcp_cwnd_test`), a packet no larger than `tcp_tso_autosize` allows, and holds back a packet
//! while too little of the window is free (`tcp_tso_should_defer`); all in
//! `net/ipv4/tcp_output.c`. What it lets go is this sender's allowance, sent a frame at a time.

use crate::time::{Rate, Time};
use std::collections::VecDeque;

/// `sk_gso_max_size`: a device's default, the largest packet TCP builds.
const GSO_MAX_SIZE: u64 = 65_536;
/// `net.ipv4.tcp_min_tso_segs`.
const MIN_TSO_SEGS: u64 = 2;
/// `net.ipv4.tcp_tso_rtt_log`: flows with a minimum RTT under 2^9 us get full-sized packets.
const TSO_RTT_LOG: u32 = 9;
/// `net.ipv4.tcp_tso_win_divisor`: a third of the window free is enough to send.
const TSO_WIN_DIVISOR: u64 = 3;
/// A packet is never held back when the last one left this long ago.
const DEFER_AFTER_IDLE: Time = Time::from_ms(1);

/// The sender's TSO state.
#[derive(Debug, Default)]
pub struct Tso {
    /// The packets `tcp_write_xmit` let go, in segments the NIC has not taken yet, oldest first.
    to_send: VecDeque<u64>,
    /// The NIC has taken part of the first of them: it sends the rest before another flow's,
    /// as a NIC sends a TSO packet's frames back to back.
    started: bool,
    /// Something that calls `tcp_write_xmit` happened (an ACK, a write) and is not yet acted on.
    kicked: bool,
    /// The end and send time of each packet not wholly acknowledged (the retransmit queue's
    /// `skb->tstamp`), oldest first.
    packets: VecDeque<(u64, Time)>,
}

/// What `tcp_write_xmit` reads of the connection, in bytes.
#[derive(Clone, Copy, Debug)]
pub struct XmitState {
    /// Now.
    pub now: Time,
    /// Next new byte.
    pub nxt: u64,
    /// End of the data written so far.
    pub data_end: u64,
    /// The data's last byte carries a FIN.
    pub fin_at_end: bool,
    /// Congestion window.
    pub cwnd: u64,
    /// Slow-start threshold.
    pub ssthresh: u64,
    /// Bytes in flight.
    pub pipe: u64,
    /// Maximum segment size.
    pub mss: u64,
    /// In fast or RTO recovery (`icsk_ca_state` Recovery or Loss).
    pub in_recovery: bool,
    /// The last transmission (`tcp_wstamp_ns` of an unpaced flow).
    pub last_tx: Time,
    /// Smoothed RTT (zero before the first sample).
    pub srtt: Time,
    /// Minimum RTT seen (`Time::MAX` before the first sample).
    pub min_rtt: Time,
    /// The algorithm's pacing rate, if it sets one; otherwise `tcp_update_pacing_rate`'s.
    pub pacing_rate: Option<Rate>,
}

impl Tso {
    /// An ACK arrived or the application wrote: `tcp_write_xmit` runs before the next send.
    pub fn kick(&mut self) {
        self.kicked = true;
    }

    /// Whether new data may go (or may be released by a pending `tcp_write_xmit`).
    #[inline]
    pub fn may_send(&self) -> bool {
        !self.to_send.is_empty() || self.kicked
    }

    /// Segments released and not yet sent.
    pub fn allowance(&self) -> u64 {
        self.to_send.iter().sum()
    }

    /// The NIC is part-way through a packet.
    #[inline]
    pub fn mid_packet(&self) -> bool {
        self.started
    }

    /// Runs `tcp_write_xmit` if an ACK or a write asked for it since the last run.
    pub fn write_xmit(&mut self, s: &XmitState) {
        if !std::mem::take(&mut self.kicked) {
            return;
        }
        let goal = tso_autosize(s) * s.mss;
        // What an earlier run let go has left TCP already (it waits in a qdisc on Linux).
        let pending = self.allowance() * s.mss;
        let (mut seq, mut pipe) = ((s.nxt + pending).min(s.data_end), s.pipe + pending);
        while seq < s.data_end {
            let (cwnd_segs, pipe_segs) = (s.cwnd.div_ceil(s.mss), pipe.div_ceil(s.mss));
            if pipe_segs >= cwnd_segs {
                break;
            }
            // tcp_cwnd_test: at most half the window at once, so that two packets are in flight.
            let quota = (cwnd_segs / 2).max(1).min(cwnd_segs - pipe_segs) * s.mss;
            // The packet at the head of the write queue: what is left of one TSO packet's worth.
            let len = goal.min(s.data_end - seq);
            let tail = seq + goal >= s.data_end;
            if len > s.mss && self.should_defer(s, seq, len, tail, pipe, goal) {
                break;
            }
            // tcp_mss_split_point: as much of the packet as the quota lets go.
            let send = len.min(quota.min(goal));
            self.packets.push_back((seq + send, s.now));
            self.to_send.push_back(send.div_ceil(s.mss));
            seq += send;
            pipe += send;
        }
    }

    /// `tcp_tso_should_defer`: wait for more of the window to open rather than send a small
    /// packet now.
    fn should_defer(&self, s: &XmitState, seq: u64, len: u64, tail: bool, pipe: u64, goal: u64) -> bool {
        if s.in_recovery || s.now.saturating_sub(s.last_tx) > DEFER_AFTER_IDLE {
            return false;
        }
        let limit = s.cwnd.saturating_sub(pipe);
        if limit >= goal || (!tail && limit >= len) || limit >= s.cwnd / TSO_WIN_DIVISOR {
            return false;
        }
        // If the next ACK is likely to come too late (the oldest packet left under half an RTT
        // ago), do not wait for it.
        let Some(&(_, sent)) = self.packets.front() else { return false };
        if s.now.saturating_sub(sent) < Time(s.srtt.0 / 2) {
            return false;
        }
        // A whole tail packet that fits waits for more data only if the application may add some.
        limit <= len || !(s.fin_at_end && seq + len == s.data_end)
    }

    /// The NIC takes the next segment of what was let go, if any.
    #[inline]
    pub fn take(&mut self) -> bool {
        let Some(left) = self.to_send.front_mut() else { return false };
        *left -= 1;
        self.started = *left > 0;
        if *left == 0 {
            self.to_send.pop_front();
        }
        true
    }

    /// The cumulative ACK reached `una`: packets wholly below it leave the retransmit queue.
    pub fn acked(&mut self, una: u64) {
        while self.packets.front().is_some_and(|&(end, _)| end <= una) {
            self.packets.pop_front();
        }
    }

    /// An RTO: everything outstanding will be sent again, and the released allowance with it.
    pub fn reset(&mut self) {
        self.to_send.clear();
        self.started = false;
        self.packets.clear();
        self.kicked = true;
    }
}

/// `tcp_tso_autosize`: segments per packet, about a millisecond at the pacing rate, plus
/// 64 KB halved for each doubling of the minimum RTT above 512 us; at most 64 KB, at least two.
fn tso_autosize(s: &XmitState) -> u64 {
    let rate = match s.pacing_rate {
        Some(r) => r.bps() / 8,
        None => tcp_update_pacing_rate(s),
    };
    let mut bytes = rate >> 10;
    let r = if s.min_rtt == Time::MAX { 0 } else { (s.min_rtt.ps() / 1_000_000) >> TSO_RTT_LOG };
    if r < 32 {
        bytes = bytes.saturating_add(GSO_MAX_SIZE >> r);
    }
    (bytes.min(GSO_MAX_SIZE) / s.mss).max(MIN_TSO_SEGS)
}

/// `tcp_update_pacing_rate` in bytes/s: twice the window's rate in slow start (below half of
/// ssthresh), 1.2 times after (`tcp_pacing_ss_ratio`, `tcp_pacing_ca_ratio`).
fn tcp_update_pacing_rate(s: &XmitState) -> u64 {
    let ratio = if s.cwnd < s.ssthresh / 2 { 200 } else { 120 };
    let window = s.cwnd.max(s.pipe) as u128 * ratio / 100;
    match s.srtt.ps() {
        0 => u64::MAX,
        srtt => (window * 1_000_000_000_000 / srtt as u128).min(u64::MAX as u128) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1448;

    fn state(cwnd_segs: u64, pipe_segs: u64, now: Time) -> XmitState {
        XmitState {
            now,
            nxt: 0,
            data_end: u64::MAX,
            fin_at_end: false,
            cwnd: cwnd_segs * MSS,
            ssthresh: 2 * MSS,
            pipe: pipe_segs * MSS,
            mss: MSS,
            in_recovery: false,
            last_tx: now,
            srtt: Time::from_ms(4),
            min_rtt: Time::from_us(100),
            pacing_rate: None,
        }
    }

    #[test]
    fn autosize_gives_a_full_packet_under_512_us_and_a_millisecond_of_rate_above() {
        // Under 2^9 us the minimum RTT adds 64 KB: 45 segments of 1448 bytes.
        assert_eq!(tso_autosize(&state(10, 0, Time::ZERO)), 45);
        // At 10 ms, 64 KB >> 19 adds nothing: 1.2 x 100 segments per 10 ms is 17.4 MB/s,
        // 16,968 bytes per 1/1024 s, 11 segments.
        let s = XmitState { min_rtt: Time::from_ms(10), srtt: Time::from_ms(10), ..state(100, 0, Time::ZERO) };
        assert_eq!(tso_autosize(&s), 16_968 / MSS);
        // A slow flow still gets two segments.
        let slow = XmitState { pacing_rate: Some(Rate(1_000_000)), ..s };
        assert_eq!(tso_autosize(&slow), 2);
    }

    #[test]
    fn a_write_releases_half_the_window_at_once_and_the_rest_as_the_next_packet() {
        // tcp_cwnd_test lets half of a 10-segment window go as one packet, then the rest.
        let mut t = Tso::default();
        t.kick();
        t.write_xmit(&state(10, 0, Time::ZERO));
        assert_eq!(t.allowance(), 10);
        assert_eq!(t.packets.iter().map(|p| p.0 / MSS).collect::<Vec<_>>(), vec![5, 10]);
        // Nothing more without another ACK or write.
        t.write_xmit(&state(10, 0, Time::ZERO));
        assert_eq!(t.allowance(), 10);
    }

    #[test]
    fn a_packet_waits_until_a_third_of_the_window_is_free() {
        let now = Time::from_ms(10);
        let with_oldest_sent = |at: Time, free: u64| {
            let mut t = Tso { packets: VecDeque::from([(MSS, at)]), ..Tso::default() };
            t.kick();
            t.write_xmit(&XmitState { nxt: 100 * MSS, ..state(12, 12 - free, now) });
            t.allowance()
        };
        // The oldest packet left 3 ms ago, more than half the 4 ms RTT: its ACK is due, so a
        // free third (4 of 12 segments) is needed.
        let long_ago = now - Time::from_ms(3);
        assert_eq!(with_oldest_sent(long_ago, 3), 0, "deferred with a quarter free");
        assert_eq!(with_oldest_sent(long_ago, 4), 4, "sent with a third free");
        // Sent 1 ms ago: its ACK will not come for another RTT's half, so nothing waits for it.
        assert_eq!(with_oldest_sent(now - Time::from_ms(1), 1), 1);
        // Nothing left for over a millisecond: no deferral either.
        let mut t = Tso { packets: VecDeque::from([(MSS, long_ago)]), ..Tso::default() };
        t.kick();
        t.write_xmit(&XmitState { last_tx: now - Time::from_ms(2), ..state(12, 11, now) });
        assert_eq!(t.allowance(), 1);
    }

    #[test]
    fn a_whole_tail_with_its_fin_goes_but_one_without_waits_for_more_data() {
        let now = Time::from_ms(10);
        let tail = |fin: bool| {
            let mut t = Tso { packets: VecDeque::from([(MSS, now - Time::from_ms(3))]), ..Tso::default() };
            t.kick();
            t.write_xmit(&XmitState { data_end: 3 * MSS, fin_at_end: fin, ..state(30, 26, now) });
            t.allowance()
        };
        assert_eq!(tail(true), 3);
        assert_eq!(tail(false), 0);
    }

    #[test]
    fn an_ack_below_a_packets_end_keeps_it_queued() {
        let mut t = Tso { packets: VecDeque::from([(10, Time::ZERO), (20, Time::from_us(1))]), ..Tso::default() };
        t.acked(15);
        assert_eq!(t.packets.len(), 1);
        t.acked(20);
        assert!(t.packets.is_empty());
    }
}
