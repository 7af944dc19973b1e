//! The receiving end (`UecSink`, `uec.cpp:2571-2793`): it takes packets in any order, records
//! which PSNs arrived, delivers bytes in order to the application, and answers with ACKs that
//! carry the first missing PSN and a 64-PSN bitmap, or with a NACK for a trimmed header.

use super::sack::RxBitmap;
use super::wire::{self, AR, LAST_HOP, RTX, RTX_ECHO};
use super::{UetConfig, HEADER};
use crate::context::{Cx, TimerKind};
use crate::packet::{flags, Ecn, Packet, CONTROL_PRIO, INITIAL_TTL};
use crate::transport::tcp::{RangeSet, Route};
use crate::transport::Io;

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
    /// Bytes delivered in order.
    pub rcv_nxt: u64,
}

impl UetReceiver {
    /// A receiver for `route`'s flow.
    pub fn new(cfg: &UetConfig, route: Route) -> UetReceiver {
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
            rcv_nxt: 0,
        }
    }

    /// Takes a data packet or a trimmed header.
    pub fn on_packet(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        if pkt.is_trimmed() {
            return self.trimmed(pkt, io, cx);
        }
        if pkt.payload == 0 {
            return;
        }
        let psn = wire::psn(pkt);
        let ce = pkt.ecn == Ecn::Ce;
        let size = pkt.payload as u64 + HEADER as u64;
        // Counted before the duplicate test, as the reference does (`uec.cpp:2604`).
        self.accepted += size;
        if psn < self.expected || self.ooo.get(psn) {
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
        if psn == self.expected {
            self.expected += 1;
            while self.ooo.get(self.expected) {
                self.ooo.clear(self.expected);
                self.expected += 1;
                self.ooo_count -= 1;
            }
            self.ooo.advance(self.expected);
            if self.ooo_count == 0 && self.ack_request {
                force = true;
                self.ack_request = false;
            }
        } else {
            debug_assert!(psn < self.expected + super::MAX_OUTSTANDING, "the sender keeps at most MAX_OUTSTANDING PSNs out");
            self.ooo.set(psn);
            self.ooo_count += 1;
        }
        if ce || self.accepted >= self.threshold || force {
            let base = if ce || requested { psn } else { self.sack_base(psn) };
            self.ack(pkt, base, ce, io);
        }
    }

    /// A trimmed header: a NACK, so the sender resends at once, unless the data had arrived.
    fn trimmed(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        let psn = wire::psn(pkt);
        if psn < self.expected || self.ooo.get(psn) {
            let base = self.sack_base(psn);
            return self.ack(pkt, base, false, io);
        }
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
        UetReceiver::new(&cfg, Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 0, spray: false })
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
        assert_eq!((a.seq, wire::psn(a), wire::bitmap(&a)), (7, 5, 1), "base 7, cumulative 5, bit 0 for PSN 7");
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
        assert_eq!((a.seq, wire::psn(&a)), (4, 3));
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
}
