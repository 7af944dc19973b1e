//! The receiving end (`UecSink`, `uec.cpp:2547-2947`): it takes packets in any order, records
//! which PSNs arrived, delivers bytes in order to the application, and answers with ACKs that
//! carry the first missing PSN and a 64-PSN bitmap, or with a NACK for a trimmed header.
//!
//! Under receiver credit (RCCC) it also keeps the highest pull target the sender asked for and
//! the pull number granted; its host's pull pacer (`host/pull.rs`) asks it for each PULL.

use super::sack::RxBitmap;
use super::wire::{self, AR, LAST_HOP, PULL, QUANTUM, RTS, RTX, RTX_ECHO};
use super::{UetConfig, HEADER};
use crate::cc::{OversubscribedParams, ReceiverCredit};
use crate::context::{Cx, Event, TimerKind};
use crate::ids::FlowId;
use crate::packet::{flags, Ecn, Packet, CONTROL_PRIO, INITIAL_TTL};
use crate::transport::tcp::{RangeSet, Route};
use crate::transport::Io;

/// Credit a PULL grants at most, in quanta: 16,384 bytes (`_credit_per_pull`, which the
/// reference fixes from its default MSS of 4096 bytes whatever the MTU).
pub const PULL_QUANTA: u64 = 64;

/// The receiver's side of receiver credit.
#[derive(Clone, Copy, Debug)]
struct Grants {
    /// The highest pull target heard, in quanta (`_highest_pull_target`).
    target: u64,
    /// The pull number granted so far (`_latest_pull`).
    latest: u64,
    /// Waiting in the pacer's active list (`_in_pull`).
    in_pull: bool,
    /// Slow pulls stop once this much unrequested credit is out: the speculative window, in
    /// whole quanta.
    slow_cap: u64,
    /// The last PULL's EV, counting 1 to 127 and round to 0 (`nextEntropy`).
    ev: u16,
    /// The host's oversubscription control's constants, where the algorithm runs it.
    oversubscribed: Option<OversubscribedParams>,
}

/// The receiving end of a UET connection.
pub struct UetReceiver {
    route: Route,
    ack_frame: u32,
    /// ACK at least every this many bytes (`_bytes_unacked_threshold`).
    threshold: u64,
    /// The first PSN not yet received (`_expected_epsn`).
    expected: u64,
    /// PSNs received above `expected`.
    ooo: RxBitmap,
    ooo_count: u64,
    /// Bytes of every new data packet, headers included: what the sender counts in flight by.
    recvd_bytes: u64,
    /// Bytes since the last ACK, duplicates included (`_accepted_bytes`).
    accepted: u64,
    /// Some data packet arrived: the first one is acknowledged at once.
    got_any: bool,
    /// The sender asked for an ACK while PSNs were missing: ACK once none is.
    ack_request: bool,
    /// Bytes held above `rcv_nxt`.
    held: RangeSet,
    /// Receiver credit, where the flow runs with it.
    grants: Option<Grants>,
    /// Bytes delivered in order.
    pub rcv_nxt: u64,
}

impl UetReceiver {
    /// A receiver for `route`'s flow, granting `credit` where its algorithm asks for it.
    pub fn new(cfg: &UetConfig, route: Route, credit: Option<ReceiverCredit>) -> UetReceiver {
        UetReceiver {
            route,
            ack_frame: cfg.ack_frame(),
            threshold: cfg.sack_threshold.0,
            expected: 0,
            ooo: RxBitmap::default(),
            ooo_count: 0,
            recvd_bytes: 0,
            accepted: 0,
            got_any: false,
            ack_request: false,
            held: RangeSet::default(),
            grants: credit.map(|c| Grants { target: wire::INIT_PULL, latest: wire::INIT_PULL, in_pull: false, slow_cap: c.cap / QUANTUM, ev: 0, oversubscribed: c.oversubscribed }),
            rcv_nxt: 0,
        }
    }

    /// Takes a data packet or a trimmed header.
    pub fn on_packet(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        if pkt.is_trimmed() {
            return self.trimmed(pkt, io, cx);
        }
        if wire::has(pkt, RTS) {
            return self.rts(pkt, io, cx);
        }
        if pkt.payload == 0 {
            return;
        }
        let psn = wire::psn(pkt);
        let ce = pkt.ecn == Ecn::Ce;
        let size = pkt.payload as u64 + HEADER as u64;
        // Counted before the duplicate test, as the reference does (`uec.cpp:2604`).
        self.accepted += size;
        self.take_target(pkt, cx);
        if self.has(psn) {
            cx.counters.uet.spurious += 1;
            let base = if ce { psn } else { self.sack_base(psn) };
            return self.ack(pkt, base, ce, io);
        }
        let mut force = !self.got_any;
        self.got_any = true;
        self.recvd_bytes += size;
        self.deliver(pkt.seq, pkt.seq + pkt.payload as u64, io);
        let requested = wire::has(pkt, AR);
        if requested {
            force = true;
            self.ack_request = true;
        }
        if self.mark(psn) && self.ack_request {
            force = true;
            self.ack_request = false;
        }
        if ce || self.accepted >= self.threshold || force {
            let base = if ce || requested { psn } else { self.sack_base(psn) };
            self.ack(pkt, base, ce, io);
        }
    }

    /// Whether `psn` had arrived.
    fn has(&self, psn: u64) -> bool {
        psn < self.expected || self.ooo.get(psn)
    }

    /// Records a new `psn`'s arrival; true when the cumulative PSN moved and nothing above it
    /// is missing.
    fn mark(&mut self, psn: u64) -> bool {
        if psn == self.expected {
            self.expected += 1;
            while self.ooo.get(self.expected) {
                self.ooo.clear(self.expected);
                self.expected += 1;
                self.ooo_count -= 1;
            }
            self.ooo.advance(self.expected);
            self.ooo_count == 0
        } else {
            debug_assert!(psn < self.expected + super::MAX_OUTSTANDING, "the sender keeps at most MAX_OUTSTANDING PSNs out");
            self.ooo.set(psn);
            self.ooo_count += 1;
            false
        }
    }

    /// A higher pull target puts the flow on the pacer's active list (`handlePullTarget`).
    fn take_target(&mut self, pkt: &Packet, cx: &mut Cx) {
        let Some(g) = self.grants.as_mut() else { return };
        let pt = wire::pull_target(pkt);
        if pt > g.target {
            g.target = pt;
            if !g.in_pull {
                g.in_pull = true;
                self.ask_pacer(cx);
            }
        }
    }

    /// A trim or an RTS asks for a pull even when the target did not move.
    fn want_pull(&mut self, cx: &mut Cx) {
        if let Some(g) = self.grants.as_mut().filter(|g| !g.in_pull) {
            g.in_pull = true;
            self.ask_pacer(cx);
        }
    }

    /// Puts the flow on its host's pull pacer (`requestPull`): an event at this instant, so
    /// that flows without credit pay nothing on their way through the host.
    fn ask_pacer(&self, cx: &mut Cx) {
        cx.schedule(cx.now, Event::PullRequest(FlowId(self.route.flow)));
    }

    /// An RTS: its PSN counts as arrived (its bytes do not), and it is acknowledged at once,
    /// the ACK marked as its answer (`processRts`).
    fn rts(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        self.take_target(pkt, cx);
        self.want_pull(cx);
        let psn = wire::psn(pkt);
        if self.has(psn) {
            cx.counters.uet.spurious += 1;
            let base = self.sack_base(psn);
            return self.ack(pkt, base, false, io);
        }
        if self.mark(psn) {
            self.ack_request = false;
        }
        self.ack(pkt, psn, false, io);
    }

    /// A trimmed header: a NACK, so the sender resends at once, unless the data had arrived.
    fn trimmed(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        let psn = wire::psn(pkt);
        if self.has(psn) {
            let base = self.sack_base(psn);
            return self.ack(pkt, base, false, io);
        }
        self.take_target(pkt, cx);
        // Hosts never count TTL down, so a header cut at the last switch still has its TTL.
        let last_hop = pkt.ttl == pkt.trim_ttl();
        let mut nack = self.control(pkt, flags::ACK | flags::NACK | if pkt.ecn == Ecn::Ce { flags::ECE } else { 0 });
        nack.seq = psn;
        wire::set_feedback(&mut nack, 0, psn, self.recvd_bytes);
        if last_hop {
            nack.caps.0 |= LAST_HOP;
        }
        cx.counters.uet.headers_nacked += 1;
        io.replies.push(nack);
        self.want_pull(cx);
    }

    /// Whether the flow still wants credit it has not been granted (`backlog() > 0`).
    pub fn wants_credit(&self) -> bool {
        self.grants.is_some_and(|g| g.target > g.latest)
    }

    /// Whether a slow pull may grant more: none is wanted, and the credit granted beyond the
    /// target is under the speculative window.
    pub fn takes_slow_pulls(&self) -> bool {
        self.grants.is_some_and(|g| g.target <= g.latest && g.latest - g.target < g.slow_cap)
    }

    /// The constants of the oversubscription control the flow asks its host to run, if any.
    pub fn oversubscribed(&self) -> Option<OversubscribedParams> {
        self.grants.and_then(|g| g.oversubscribed)
    }

    /// Takes the flow off the pacer's active list.
    pub fn leave_pull_queue(&mut self) {
        if let Some(g) = self.grants.as_mut() {
            g.in_pull = false;
        }
    }

    /// A PULL, and the quanta it grants (`pull`): up to a PULL's worth towards the target, or,
    /// for a slow pull, `slow` quanta whatever the target.
    pub fn pull(&mut self, slow: Option<u64>) -> (Packet, u64) {
        let g = self.grants.as_mut().expect("only a flow under receiver credit is pulled");
        let prev = g.latest;
        match slow {
            None => g.latest = (g.latest + PULL_QUANTA).min(g.target.max(prev)),
            Some(q) => g.latest += q,
        }
        g.ev = (g.ev + 1) & 127;
        let pull = Packet {
            seq: g.latest,
            wire_bytes: self.ack_frame,
            flags: flags::ACK | flags::REVERSE,
            prio: CONTROL_PRIO,
            hash: self.route.entropy_rev(g.ev as u32),
            cookie: g.ev as u32,
            caps: crate::packet::Caps(PULL),
            ..self.route.reverse()
        };
        (pull, g.latest - prev)
    }

    /// Hands the bytes now in order to the application.
    fn deliver(&mut self, start: u64, end: u64, io: &mut Io) {
        if end > self.rcv_nxt {
            self.held.insert(start.max(self.rcv_nxt), end);
        }
        let from = self.rcv_nxt;
        while let Some(e) = self.held.take_at(self.rcv_nxt) {
            self.rcv_nxt = e;
        }
        if self.rcv_nxt > from {
            io.delivered = Some((from, self.rcv_nxt - from));
        }
    }

    /// Where an ACK's bitmap starts: as far back as 63 PSNs, but above the cumulative ACK.
    fn sack_base(&self, psn: u64) -> u64 {
        (psn.saturating_sub(63)).max(self.expected + 1)
    }

    /// An ACK for `data`, its bitmap from PSN `base`.
    fn ack(&mut self, data: &Packet, base: u64, ce: bool, io: &mut Io) {
        let mut a = self.control(data, flags::ACK | if ce { flags::ECE } else { 0 });
        a.seq = base;
        wire::set_feedback(&mut a, self.ooo.window(base), wire::psn(data), self.recvd_bytes);
        if wire::has(data, RTX) {
            a.caps.0 |= RTX_ECHO;
        }
        if wire::has(data, RTS) {
            a.caps.0 |= RTS;
        }
        self.accepted = 0;
        io.replies.push(a);
    }

    /// A packet back to the sender, on the path of the EV `data` came on, ahead of all data.
    fn control(&self, data: &Packet, flags: u8) -> Packet {
        let ev = wire::ev(data);
        Packet {
            ack: self.expected,
            wire_bytes: self.ack_frame,
            flags: flags | flags::REVERSE,
            prio: CONTROL_PRIO,
            hash: self.route.entropy_rev(ev as u32),
            cookie: ev as u32,
            ts_echo: data.ts,
            hops_echo: Some(INITIAL_TTL.saturating_sub(data.ttl)),
            ..self.route.reverse()
        }
    }

    /// The sender's close reaching the receiver ([`TimerKind::PeerClosed`]) closes it.
    pub fn on_timer(&mut self, kind: TimerKind, io: &mut Io, _cx: &mut Cx) {
        if kind == TimerKind::PeerClosed {
            io.closed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Bench;
    use crate::packet::{fabric, Caps};
    use crate::time::Bytes;

    const MSS: u32 = 4086;

    fn receiver(threshold: u64) -> UetReceiver {
        let cfg = UetConfig { sack_threshold: Bytes(threshold), ..UetConfig::default() };
        UetReceiver::new(&cfg, Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 0, spray: false }, None)
    }

    fn data(psn: u64, bits: u8) -> Packet {
        Packet { seq: psn * MSS as u64, ack: psn, payload: MSS, ttl: 60, caps: Caps(bits), cookie: psn as u32 + 7, ecn: Ecn::Ect, ..Packet::default() }
    }

    fn take(r: &mut UetReceiver, pkt: &Packet) -> Io {
        take_counting(r, pkt, &mut Bench::new())
    }

    fn take_counting(r: &mut UetReceiver, pkt: &Packet, b: &mut Bench) -> Io {
        let mut io = Io::default();
        r.on_packet(pkt, &mut io, &mut b.cx());
        io
    }

    /// The PSNs whose arrival was answered, over `psns` arriving in order.
    fn answered(r: &mut UetReceiver, psns: impl IntoIterator<Item = u64>) -> Vec<u64> {
        psns.into_iter().filter(|&p| !take(r, &data(p, 0)).replies.is_empty()).collect()
    }

    #[test]
    fn the_first_packet_and_then_every_sack_threshold_of_bytes_are_acked() {
        let mut r = receiver(16_384);
        // 4150 bytes a packet: the first, then each fourth (16,600 >= 16,384).
        assert_eq!(answered(&mut r, 0..13), [0, 4, 8, 12]);
        let mut r = receiver(4_000);
        assert_eq!(answered(&mut r, 0..13), (0..13).collect::<Vec<_>>());
        // What the ACK of PSN 12 says.
        let mut r = receiver(16_384);
        let io = (0..13).map(|p| take(&mut r, &data(p, 0))).last().unwrap();
        let a = &io.replies[0];
        assert!(a.has(flags::ACK) && a.has(flags::REVERSE) && !a.has(flags::NACK));
        assert_eq!((wire::psn(a), wire::acked_psn(a), wire::recvd_bytes(a)), (13, 12, 13 * 4150));
        assert_eq!((wire::ev(a), a.prio, a.hash), (19, CONTROL_PRIO, r.route.entropy_rev(19)), "the EV echoed, on its own way back");
    }

    #[test]
    fn a_marked_packet_is_acked_at_once_from_its_own_psn() {
        let mut r = receiver(16_384);
        answered(&mut r, 0..5);
        let mut ce = data(7, 0);
        ce.ecn = Ecn::Ce;
        let io = take(&mut r, &ce);
        let a = &io.replies[0];
        assert_eq!((a.seq, wire::psn(a), wire::bitmap(a)), (7, 5, 1), "base 7, cumulative 5, bit 0 for PSN 7");
        assert!(a.has(flags::ECE));
        // The count restarts there: the next ACK comes four packets later.
        assert_eq!(answered(&mut r, 8..13), [11]);
    }

    #[test]
    fn the_bitmap_reaches_back_63_psns_but_not_below_the_cumulative_ack() {
        let mut r = receiver(1);
        answered(&mut r, 0..10);
        let a = take(&mut r, &data(100, 0)).replies.remove(0);
        assert_eq!((a.seq, wire::bitmap(&a)), (37, 1 << 63));
        let a = take(&mut r, &data(20, 0)).replies.remove(0);
        assert_eq!((a.seq, wire::bitmap(&a)), (11, 1 << 9), "PSN 100 is past this one's 64");
    }

    #[test]
    fn a_duplicate_is_acked_at_once_and_counted() {
        let mut r = receiver(16_384);
        answered(&mut r, 0..3);
        let mut b = Bench::new();
        let io = take_counting(&mut r, &data(1, wire::RTX), &mut b);
        assert_eq!(b.counters.uet.spurious, 1);
        let a = &io.replies[0];
        assert_eq!((a.seq, wire::psn(a)), (4, 3));
        assert!(wire::has(a, RTX_ECHO), "it answers a retransmission");
        assert_eq!(wire::recvd_bytes(a), 3 * 4150, "a duplicate adds no bytes received");
        assert_eq!(io.delivered, None);
    }

    #[test]
    fn an_ack_request_is_answered_now_and_again_once_the_gap_fills() {
        let mut r = receiver(16_384);
        assert_eq!(answered(&mut r, 0..2), [0]);
        let a = take(&mut r, &data(3, AR)).replies.remove(0);
        assert_eq!((a.seq, wire::psn(&a)), (3, 2));
        let a = take(&mut r, &data(2, 0)).replies.remove(0);
        assert_eq!(wire::psn(&a), 4, "the gap filled: a forced ACK");
        assert!(take(&mut r, &data(4, 0)).replies.is_empty(), "and the request is spent");
    }

    #[test]
    fn a_trimmed_header_is_nacked_unless_its_data_arrived() {
        let mut r = receiver(16_384);
        answered(&mut r, 0..3);
        let mut h = data(5, 0);
        h.ecn = Ecn::Ce;
        h.fabric = fabric::TRIMMED | (60 << 1);
        let mut b = Bench::new();
        let io = take_counting(&mut r, &h, &mut b);
        let n = &io.replies[0];
        assert!(n.has(flags::NACK) && n.has(flags::ECE) && wire::has(n, LAST_HOP), "cut at the last switch, after a mark");
        assert_eq!((n.seq, wire::psn(n), wire::recvd_bytes(n)), (5, 3, 3 * 4150));
        assert_eq!((b.counters.uet.headers_nacked, r.recvd_bytes, io.delivered), (1, 3 * 4150, None));
        // Cut two switches earlier, and for data that is here: not last hop; an ACK.
        h.fabric = fabric::TRIMMED | (62 << 1);
        h.ecn = Ecn::Ect;
        assert!(!wire::has(&take(&mut r, &h).replies[0], LAST_HOP));
        h.ack = 1;
        let a = take(&mut r, &h).replies.remove(0);
        assert!(!a.has(flags::NACK) && a.has(flags::ACK));
    }

    #[test]
    fn bytes_are_delivered_in_order_when_the_short_last_packet_comes_first() {
        let mut r = receiver(16_384);
        let last = Packet { payload: 100, ..data(1, AR) };
        assert_eq!(take(&mut r, &last).delivered, None);
        assert_eq!(take(&mut r, &data(0, 0)).delivered, Some((0, MSS as u64 + 100)));
        assert_eq!(r.rcv_nxt, MSS as u64 + 100);
    }

    /// A receiver granting credit with a speculative window of 8 packets.
    fn granting() -> UetReceiver {
        let route = Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 0, spray: false };
        UetReceiver::new(&UetConfig::default(), route, Some(ReceiverCredit { cap: 8 * 4150, windowed: false, oversubscribed: None }))
    }

    /// Takes `pkt`; its report, and whether the receiver asked its pacer for credit.
    fn take_asking(r: &mut UetReceiver, pkt: &Packet) -> (Io, bool) {
        let mut b = Bench::new();
        let io = take_counting(r, pkt, &mut b);
        let asked = std::iter::from_fn(|| b.q.pop()).any(|(_, ev)| matches!(ev, Event::PullRequest(FlowId(0))));
        (io, asked)
    }

    fn asks(r: &mut UetReceiver, pkt: &Packet) -> bool {
        take_asking(r, pkt).1
    }

    fn targeting(psn: u64, target: u64) -> Packet {
        let mut p = data(psn, 0);
        wire::set_pull_target(&mut p, wire::INIT_PULL + target);
        p
    }

    #[test]
    fn a_higher_pull_target_asks_the_pacer_once_and_pulls_grant_up_to_it() {
        let mut r = granting();
        assert!(asks(&mut r, &targeting(0, 100)), "the first target puts the flow on the pacer");
        assert!(!asks(&mut r, &targeting(1, 150)), "already waiting: once");
        assert!(!asks(&mut r, &targeting(2, 120)) && r.wants_credit(), "a lower target changes nothing");
        // Pulls grant 64 quanta (16 KB) at a time, and no further than the target.
        let grants: Vec<u64> = (0..3).map(|_| r.pull(None).1).collect();
        assert_eq!(grants, [64, 64, 22]);
        let (p, granted) = r.pull(None);
        assert_eq!((granted, p.seq - wire::INIT_PULL), (0, 150), "met: the pull number stands");
        assert!(!r.wants_credit());
        assert!(p.has(flags::ACK) && p.has(flags::REVERSE) && wire::has(&p, PULL) && p.prio == CONTROL_PRIO);
        // Each PULL takes the next of 128 EVs, 1 first.
        assert_eq!(wire::ev(&p), 4);
        // Off the active list, a higher target asks again.
        r.leave_pull_queue();
        assert!(asks(&mut r, &targeting(3, 151)));
    }

    #[test]
    fn slow_pulls_grant_a_pull_whatever_the_target_up_to_the_speculative_window() {
        let mut r = granting();
        take(&mut r, &targeting(0, 10));
        r.pull(None);
        r.leave_pull_queue();
        // 8 x 4150 bytes is 129 whole quanta: slow pulls run while less than that is granted
        // beyond the target.
        let mut slow = 0;
        while r.takes_slow_pulls() {
            assert_eq!(r.pull(Some(PULL_QUANTA)).1, 64);
            slow += 1;
        }
        assert_eq!(slow, 3, "0, 64 and 128 quanta beyond it take one more; 192 does not");
    }

    #[test]
    fn an_rts_counts_its_psn_not_its_bytes_and_is_acked_at_once_asking_for_credit() {
        let mut r = granting();
        take(&mut r, &data(0, 0));
        let mut rts = Packet { ack: 1, wire_bytes: 64, caps: Caps(RTS | AR), ..Packet::default() };
        wire::set_pull_target(&mut rts, wire::INIT_PULL + 5);
        let (io, asked) = take_asking(&mut r, &rts);
        assert!(asked);
        let a = &io.replies[0];
        assert!(wire::has(a, RTS) && !a.has(flags::NACK));
        assert_eq!((wire::psn(a), wire::acked_psn(a), wire::recvd_bytes(a)), (2, 1, 4150), "cumulative past the RTS; only data counts bytes");
        // A duplicate RTS is answered again, as one.
        let mut b = Bench::new();
        let again = take_counting(&mut r, &rts, &mut b);
        assert!(wire::has(&again.replies[0], RTS));
        assert_eq!(b.counters.uet.spurious, 1);
    }

    #[test]
    fn a_trimmed_header_under_credit_asks_for_a_pull_even_at_the_same_target() {
        let mut r = granting();
        assert!(asks(&mut r, &targeting(0, 10)));
        r.pull(None);
        r.leave_pull_queue();
        let mut h = targeting(1, 10);
        h.fabric = fabric::TRIMMED | (62 << 1);
        let (io, asked) = take_asking(&mut r, &h);
        assert!(asked && io.replies[0].has(flags::NACK));
        // Without credit, nothing is asked.
        let mut plain = receiver(16_384);
        assert!(!asks(&mut plain, &h));
    }
}
