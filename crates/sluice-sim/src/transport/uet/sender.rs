//! The sending end (`UecSrc` with sender-based congestion control, `uec.cpp:904-2430`): it cuts
//! the flow into packets with PSNs, sends each on the EV its path policy picks while the window
//! holds it, takes ACKs (cumulative PSN and SACK bitmap), resends a NACKed packet ahead of new
//! data, and on a timeout resends the packet sent earliest.
//!
//! Bytes in flight fall by the receiver's own count of bytes received, which each ACK carries,
//! not by the sizes of the packets acknowledged: a packet that was resent and then found
//! received is put back, so it is not counted twice.
//!
//! Under receiver credit (RCCC), a packet also needs credit: the sender starts with a
//! speculative window of it, drops what is left at its first feedback, and from then on is
//! given credit by the receiver's PULLs. Each data packet tells the receiver how much more it
//! wants (its pull target). When the timer finds the sender unable to resend, it sends an RTS:
//! a probe with no data that takes a PSN and asks the receiver for credit.

use super::paths::{Feedback, PathPolicy};
use super::wire::{self, AR, LAST_HOP, PULL, QUANTUM, RTS, RTX, RTX_ECHO};
use super::{Timers, TimeoutFeedback, UetConfig, ACK_BYTES, HEADER, MAX_OUTSTANDING};
use crate::cc::{AckSignals, CongestionControl, LossCause, LossSignals, ReceiverCredit, Window};
use crate::context::{Cx, Event, TimerKind};
use crate::event::{TimerFire, TimerSlot};
use crate::ids::FlowId;
use crate::packet::{flags, Caps, Ecn, Packet, CONTROL_PRIO};
use crate::time::Time;
use crate::transport::tcp::{Route, TimeoutRecord};
use crate::transport::Io;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::{BTreeSet, VecDeque};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Sent, and not known received or lost.
    InFlight,
    /// Lost (NACKed or timed out), waiting to be resent.
    Queued,
    /// Received, above the cumulative ACK.
    Sacked,
}

/// One PSN at or above the cumulative ACK: a data packet, or an RTS.
#[derive(Clone, Copy, Debug)]
struct Slot {
    sent_at: Time,
    seq: u64,
    /// Payload bytes; 0 for an RTS.
    len: u32,
    ev: u16,
    /// Times it was resent.
    tx: u8,
    state: State,
}

impl Slot {
    /// Bytes it counts for in windows and in flight: payload and UET header.
    fn bytes(&self) -> u64 {
        self.len as u64 + HEADER as u64
    }

    fn is_rts(&self) -> bool {
        self.len == 0
    }
}

/// The sender's side of receiver credit (`UecSrc`'s `_credit`, `_pull`, `_speculating`).
#[derive(Clone, Copy, Debug)]
struct Credit {
    /// Bytes it may send: any positive amount lets a whole packet go, so it can fall below zero.
    bytes: i64,
    /// The most it may hold, and what it starts with (`_configured_maxwnd`).
    cap: i64,
    /// The pull number granted so far, in quanta from [`wire::INIT_PULL`].
    pull: u64,
    /// Sending on the speculative window, before any ACK, NACK or PULL.
    speculating: bool,
    /// The algorithm's window limits sending as well.
    windowed: bool,
}

/// The sending end of a UET connection.
pub struct UetSender {
    route: Route,
    mss: u64,
    framing: u32,
    /// Bytes the flow sends (`u64::MAX`: endless).
    size: u64,
    /// The next new byte.
    next_byte: u64,
    /// The next new PSN (`_highest_sent`).
    next_psn: u64,
    /// The cumulative ACK: every PSN below it was received; `slots[0]` is this PSN.
    cum: u64,
    slots: VecDeque<Slot>,
    /// (send time, PSN) in the order sent; entries of packets since acknowledged, lost or
    /// resent are skipped when they reach the front.
    order: VecDeque<(Time, u64)>,
    /// PSNs waiting to be resent, lowest first.
    rtx: BTreeSet<u64>,
    /// Their bytes, headers included (`_rtx_backlog`).
    rtx_bytes: u64,
    /// Payload and header bytes in flight; the receiver's count can take it below zero for a
    /// moment, before a resent packet found received is put back.
    in_flight: i64,
    /// The receiver's count of bytes received, as last heard.
    recvd_bytes: u64,
    rto: Time,
    /// Least time between RTSs.
    rts_gap: Time,
    /// When the last RTS went.
    last_rts: Option<Time>,
    /// Receiver credit, where the algorithm runs with it.
    credit: Option<Credit>,
    /// The pull target the last data packet carried, which an RTS repeats.
    pull_target: u64,
    rto_timer: TimerSlot,
    /// The packet the timer runs for: (its send time, its PSN).
    rto_for: Option<(Time, u64)>,
    paths: PathPolicy,
    rng: Xoshiro256PlusPlus,
    timeout_feedback: TimeoutFeedback,
    /// The window the algorithm sets, in bytes with headers.
    pub win: Window,
    /// The flow's congestion controller.
    pub cc: Box<dyn CongestionControl>,
    /// Bytes acknowledged cumulatively.
    pub una: u64,
    done: bool,
    /// The application appends messages to this connection.
    pub persistent: bool,
    /// Packets resent.
    pub retransmits: u64,
    /// Retransmission timeouts, in order.
    pub timeouts: Vec<TimeoutRecord>,
    last_tx: Time,
}

impl UetSender {
    /// A sender of `size` bytes (`None`: endless) on `route`.
    pub fn new(cfg: &UetConfig, route: Route, size: Option<u64>, mut cc: Box<dyn CongestionControl>, timers: Timers, paths: PathPolicy, rng: Xoshiro256PlusPlus) -> UetSender {
        let mss = cfg.mss();
        let mut win = Window { cwnd: cfg.mtu as u64, ssthresh: u64::MAX, pacing_rate: None, mss };
        cc.init(&mut win);
        let credit = cc.receiver_credit().map(|ReceiverCredit { cap, windowed, .. }| Credit { bytes: cap as i64, cap: cap as i64, pull: wire::INIT_PULL, speculating: true, windowed });
        UetSender {
            route,
            mss,
            framing: cfg.framing,
            size: size.unwrap_or(u64::MAX),
            next_byte: 0,
            next_psn: 0,
            cum: 0,
            slots: VecDeque::new(),
            order: VecDeque::new(),
            rtx: BTreeSet::new(),
            rtx_bytes: 0,
            in_flight: 0,
            recvd_bytes: 0,
            rto: timers.rto,
            // The reference spaces RTSs by its network RTT, which only NSCC's setup sets: under
            // credit alone they go at every timeout (`sendRTS`, `uec.cpp:2174`).
            rts_gap: if credit.is_some_and(|c| !c.windowed) { Time::ZERO } else { timers.rts_gap },
            last_rts: None,
            credit,
            pull_target: 0,
            rto_timer: TimerSlot::default(),
            rto_for: None,
            paths,
            rng,
            timeout_feedback: cfg.timeout_feedback,
            win,
            cc,
            una: 0,
            done: false,
            persistent: false,
            retransmits: 0,
            timeouts: Vec::new(),
            last_tx: Time::ZERO,
        }
    }

    fn slot(&self, psn: u64) -> Option<&Slot> {
        psn.checked_sub(self.cum).and_then(|i| self.slots.get(i as usize))
    }

    fn slot_mut(&mut self, psn: u64) -> Option<&mut Slot> {
        psn.checked_sub(self.cum).and_then(|i| self.slots.get_mut(i as usize))
    }

    /// Bytes (payload and header) of the packet that goes next: the first lost one, else new data.
    fn next_bytes(&self) -> Option<u64> {
        match self.rtx.first() {
            Some(&psn) => self.slot(psn).map(Slot::bytes),
            None if self.next_psn - self.cum >= MAX_OUTSTANDING => None,
            None => (self.next_byte < self.size).then(|| self.mss.min(self.size - self.next_byte) + HEADER as u64),
        }
    }

    /// Whether the window holds the next packet (`can_send_NSCC`) and, under receiver credit,
    /// some credit is left (`can_send_RCCC`): `isSendPermitted`. Out of line, so that the
    /// NIC's scheduler keeps TCP's test inlined.
    #[inline(never)]
    pub fn has_sendable(&self) -> bool {
        !self.done && self.next_bytes().is_some_and(|b| self.credit.is_none_or(|c| c.bytes > 0) && (!self.windowed() || self.window_holds(b)))
    }

    /// Whether the algorithm's window limits sending: always, except under credit alone.
    fn windowed(&self) -> bool {
        self.credit.is_none_or(|c| c.windowed)
    }

    fn window_holds(&self, bytes: u64) -> bool {
        self.win.cwnd as i64 >= self.in_flight + bytes as i64
    }

    /// New bytes still to send, a header for each packet included (`_backlog`).
    fn backlog(&self) -> u64 {
        let left = self.size - self.next_byte;
        left.saturating_add(left.div_ceil(self.mss).saturating_mul(HEADER as u64))
    }

    /// What the receiver is asked to have granted by now, in quanta (`computePullTarget`): the
    /// bytes still to send, new and lost, no more than the window and one packet, nor than
    /// the cap, less the credit held; at least a packet while speculating.
    fn compute_pull_target(&self) -> u64 {
        let Some(c) = self.credit else { return 0 };
        let mtu = (self.mss + HEADER as u64) as i64;
        let mut pt = self.backlog().saturating_add(self.rtx_bytes).min(i64::MAX as u64 / 4) as i64;
        if c.windowed {
            pt = pt.min(self.win.cwnd as i64 + mtu);
        }
        pt = pt.min(c.cap) - c.bytes;
        if c.speculating && pt < mtu && self.next_byte < self.size {
            pt = mtu;
        }
        let pt = pt + (c.pull * QUANTUM) as i64;
        (pt.max(0) as u64).div_ceil(QUANTUM)
    }

    /// The first ACK, NACK or PULL ends speculation: what is left of the speculative credit
    /// goes, a debt stays (`stopSpeculating`).
    fn stop_speculating(&mut self) {
        if let Some(c) = self.credit.as_mut().filter(|c| c.speculating) {
            c.speculating = false;
            c.bytes = c.bytes.min(0);
        }
    }

    /// When the next packet may go: at once, as the NIC's port serialises it.
    #[inline]
    pub fn ready_at(&self, now: Time) -> Time {
        now
    }

    /// Bytes the window lets out now (for a host port's queue samples).
    pub fn sendable_bytes(&self) -> u64 {
        if self.done {
            return 0;
        }
        let room = (self.win.cwnd as i64 - self.in_flight).max(0) as u64;
        let lost: u64 = self.rtx.iter().filter_map(|&p| self.slot(p)).map(|s| s.len as u64).sum();
        (self.size - self.next_byte).saturating_add(lost).min(room)
    }

    /// Starts sending; the algorithm has no tick.
    pub fn open(&mut self, io: &mut Io) {
        io.activate = true;
    }

    /// Queues a further message of `bytes`; returns the flow's new size.
    pub fn append(&mut self, bytes: u64) -> u64 {
        self.size = self.size.saturating_add(bytes);
        self.size
    }

    /// The next packet, if the window holds it: a lost one first, else new data.
    pub fn next_packet(&mut self, cx: &mut Cx) -> Option<Packet> {
        if !self.has_sendable() {
            return None;
        }
        let now = cx.now;
        let ev = self.paths.next(self.next_psn, self.win.cwnd / self.mss, &mut self.rng);
        let (psn, seq, len, bits) = match self.rtx.pop_first() {
            Some(psn) => {
                let s = self.slot_mut(psn).expect("a queued PSN has its slot");
                s.state = State::InFlight;
                s.tx = s.tx.saturating_add(1);
                s.sent_at = now;
                s.ev = ev;
                let (seq, len, b) = (s.seq, s.len, s.bytes());
                self.spend(b);
                self.rtx_bytes -= b;
                self.in_flight += b as i64;
                self.retransmits += 1;
                cx.counters.uet.rtx += 1;
                // A resent packet always asks for its ACK (`uec.cpp:2147`).
                (psn, seq, len, AR | RTX)
            }
            None => {
                let len = self.mss.min(self.size - self.next_byte) as u32;
                let (psn, seq) = (self.next_psn, self.next_byte);
                self.slots.push_back(Slot { sent_at: now, seq, len, ev, tx: 0, state: State::InFlight });
                self.next_psn += 1;
                self.next_byte += len as u64;
                let b = len as u64 + HEADER as u64;
                self.spend(b);
                self.in_flight += b as i64;
                cx.counters.uet.new += 1;
                // The last packet, one after which another of its size would not fit, or the
                // last of the credit.
                let full = self.windowed() && self.in_flight + b as i64 >= self.win.cwnd as i64;
                let spent = self.credit.is_some_and(|c| c.bytes <= 0);
                (psn, seq, len, if self.next_byte == self.size || full || spent { AR } else { 0 })
            }
        };
        self.pull_target = self.compute_pull_target();
        self.order.push_back((now, psn));
        self.last_tx = now;
        cx.counters.data_packets += 1;
        if self.rto_timer.deadline().is_none() {
            self.arm_rto(now + self.rto, cx);
            self.rto_for = Some((now, psn));
        }
        let mut pkt = Packet {
            seq,
            ack: psn,
            payload: len,
            wire_bytes: len + HEADER + self.framing,
            hash: self.route.entropy(ev as u32),
            cookie: ev as u32,
            caps: Caps(bits),
            ecn: Ecn::Ect,
            ts: now,
            ..self.route.forward()
        };
        wire::set_pull_target(&mut pkt, self.pull_target);
        Some(pkt)
    }

    /// Takes a packet's bytes from the credit (`spendCredit`).
    fn spend(&mut self, bytes: u64) {
        if let Some(c) = self.credit.as_mut() {
            c.bytes -= bytes as i64;
        }
    }

    /// An RTS on PSN `psn` (a new one, or a lost one again), no more than one a `rts_gap` unless
    /// `again`; it carries the last pull target (`sendRTS`).
    fn send_rts(&mut self, again: Option<u64>, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        if again.is_none() && (self.last_rts.is_some_and(|t| now - t < self.rts_gap) || self.next_psn - self.cum >= MAX_OUTSTANDING) {
            return;
        }
        let ev = self.paths.next(self.next_psn, self.win.cwnd / self.mss, &mut self.rng);
        let (psn, bits) = match again {
            Some(psn) => {
                let s = self.slot_mut(psn).expect("a lost RTS has its slot");
                s.state = State::InFlight;
                s.tx = s.tx.saturating_add(1);
                s.sent_at = now;
                s.ev = ev;
                (psn, RTS | AR | RTX)
            }
            None => {
                let psn = self.next_psn;
                self.slots.push_back(Slot { sent_at: now, seq: self.next_byte, len: 0, ev, tx: 0, state: State::InFlight });
                self.next_psn += 1;
                self.last_rts = Some(now);
                (psn, RTS | AR)
            }
        };
        self.order.push_back((now, psn));
        cx.counters.uet.rts += 1;
        if self.rto_timer.deadline().is_none() {
            self.arm_rto(now + self.rto, cx);
            self.rto_for = Some((now, psn));
        }
        let mut rts = Packet {
            seq: self.next_byte,
            ack: psn,
            wire_bytes: ACK_BYTES + self.framing,
            prio: CONTROL_PRIO,
            hash: self.route.entropy(ev as u32),
            cookie: ev as u32,
            caps: Caps(bits),
            ts: now,
            ..self.route.forward()
        };
        wire::set_pull_target(&mut rts, self.pull_target);
        io.replies.push(rts);
    }

    fn arm_rto(&mut self, at: Time, cx: &mut Cx) {
        if let Some((t, gen)) = self.rto_timer.arm(at) {
            cx.schedule(t, Event::Timer(FlowId(self.route.flow), TimerKind::Rto, gen));
        }
    }

    /// Whether `psn`, sent at `sent_at`, is the packet the timer runs for.
    fn times(&self, sent_at: Time, psn: u64) -> bool {
        self.rto_for == Some((sent_at, psn))
    }

    /// Points the timer at the packet in flight that was sent earliest, `rto` after its send
    /// (or now, if that has passed): `recalculateRTO`.
    fn rearm_rto(&mut self, cx: &mut Cx) {
        self.rto_timer.cancel();
        self.rto_for = self.earliest_in_flight();
        if let Some((t, _)) = self.rto_for {
            self.arm_rto((t + self.rto).max(cx.now), cx);
        }
    }

    /// The packet in flight that was sent earliest, as (send time, PSN), dropping the entries
    /// ahead of it that no longer are.
    fn earliest_in_flight(&mut self) -> Option<(Time, u64)> {
        while let Some(&(t, psn)) = self.order.front() {
            if self.slot(psn).is_some_and(|s| s.state == State::InFlight && s.sent_at == t) {
                return Some((t, psn));
            }
            self.order.pop_front();
        }
        None
    }

    /// Takes an ACK or a NACK.
    pub fn on_packet(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        if self.done || !pkt.has(flags::ACK) {
            return;
        }
        if pkt.has(flags::NACK) {
            self.on_nack(pkt, io, cx)
        } else if wire::has(pkt, PULL) {
            self.on_pull(pkt, io, cx)
        } else {
            self.on_ack(pkt, io, cx)
        }
    }

    /// A PULL (`processPull`, `handlePull`): credit up to its pull number, no more than the cap.
    fn on_pull(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        cx.counters.uet.pulls += 1;
        self.stop_speculating();
        if let Some(c) = self.credit.as_mut().filter(|c| pkt.seq > c.pull) {
            c.bytes = (c.bytes + ((pkt.seq - c.pull) * QUANTUM) as i64).min(c.cap);
            c.pull = pkt.seq;
        }
        io.activate = true;
    }

    /// An ACK (`processAck`): the receiver's byte count, an RTT sample, the cumulative PSN,
    /// the bitmap, the path's feedback, the algorithm.
    fn on_ack(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        cx.counters.uet.acks += 1;
        let counted = wire::recvd_bytes(pkt);
        let newly = counted.saturating_sub(self.recvd_bytes);
        self.recvd_bytes = self.recvd_bytes.max(counted);
        self.in_flight -= newly as i64;
        // A sample only from a packet sent once, or resent once and answered as resent.
        let echo = wire::has(pkt, RTX_ECHO);
        let rtt = self
            .slot(wire::acked_psn(pkt))
            .filter(|s| s.state == State::InFlight && ((s.tx == 0 && !echo) || (s.tx == 1 && echo)))
            .map(|s| now - s.sent_at);
        let mut rearm = false;
        let cum = wire::psn(pkt).min(self.next_psn);
        while self.cum < cum {
            let s = self.slots.pop_front().expect("a PSN below next_psn has its slot");
            match s.state {
                State::Queued => self.unqueue(self.cum, s.bytes()),
                State::InFlight => rearm |= self.times(s.sent_at, self.cum),
                State::Sacked => {}
            }
            self.una = s.seq + s.len as u64;
            self.cum += 1;
        }
        let (base, mut bits) = (pkt.seq, wire::bitmap(pkt));
        while bits != 0 {
            let psn = base + bits.trailing_zeros() as u64;
            bits &= bits - 1;
            let Some(s) = self.slot(psn).copied() else { continue };
            match s.state {
                State::InFlight => rearm |= self.times(s.sent_at, psn),
                State::Queued => self.unqueue(psn, s.bytes()),
                State::Sacked => continue,
            }
            self.slot_mut(psn).expect("checked").state = State::Sacked;
        }
        if rearm {
            self.rearm_rto(cx);
        }
        let ece = pkt.has(flags::ECE);
        self.paths.feedback(wire::ev(pkt), if ece { Feedback::Ecn } else { Feedback::Good }, now);
        let signals = AckSignals {
            now,
            acked_bytes: newly,
            ce_bytes: if ece { newly } else { 0 },
            ece,
            rtt,
            in_flight: self.in_flight.max(0) as u64,
            snd_una: self.una,
            snd_nxt: self.next_byte,
            probe: wire::has(pkt, RTS),
            ..AckSignals::default()
        };
        self.cc.on_ack(&signals, &mut self.win);
        self.stop_speculating();
        if self.next_byte == self.size && self.cum == self.next_psn {
            self.rto_timer.cancel();
            io.completed = true;
            if !self.persistent {
                self.done = true;
                io.closed = true;
                return;
            }
        }
        io.activate = true;
    }

    /// A queued PSN turned out received: it leaves the queue, and its bytes, which the
    /// receiver's count has already taken out of flight, go back in.
    fn unqueue(&mut self, psn: u64, bytes: u64) {
        self.rtx.remove(&psn);
        self.rtx_bytes -= bytes;
        self.in_flight += bytes as i64;
    }

    /// A NACK (`processNack`): the trimmed packet is lost; it goes to the front of the queue.
    fn on_nack(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        cx.counters.uet.nacks += 1;
        let psn = pkt.seq;
        let Some(s) = self.slot(psn).copied().filter(|s| s.state == State::InFlight) else {
            cx.counters.uet.nacks_ignored += 1;
            return;
        };
        let (last_hop, ece) = (wire::has(pkt, LAST_HOP), pkt.has(flags::ECE));
        let loss = LossSignals {
            now,
            cause: LossCause::Trimmed,
            bytes: s.bytes(),
            rtt: Some(now - s.sent_at),
            last_hop,
            ece,
            in_flight: self.in_flight.max(0) as u64,
        };
        self.cc.on_loss(&loss, &mut self.win);
        self.stop_speculating();
        self.lose(psn, s.bytes());
        if self.times(s.sent_at, psn) {
            self.rearm_rto(cx);
        }
        // A header trimmed at the last hop says nothing against the path it took.
        let fb = match (last_hop, ece) {
            (false, _) => Feedback::Nack,
            (true, true) => Feedback::Ecn,
            (true, false) => Feedback::Good,
        };
        self.paths.feedback(wire::ev(pkt), fb, now);
        io.activate = true;
    }

    /// Takes `psn` out of flight and queues it to be resent.
    fn lose(&mut self, psn: u64, bytes: u64) {
        self.slot_mut(psn).expect("a lost PSN has its slot").state = State::Queued;
        self.in_flight -= bytes as i64;
        self.rtx.insert(psn);
        self.rtx_bytes += bytes;
    }

    /// Runs the retransmission timer: the packet sent earliest is lost.
    pub fn on_timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
        if kind != TimerKind::Rto {
            return;
        }
        let now = cx.now;
        match self.rto_timer.fire(now, gen) {
            TimerFire::Stale => {}
            TimerFire::Reschedule(t, g) => cx.schedule(t, Event::Timer(FlowId(self.route.flow), TimerKind::Rto, g)),
            TimerFire::Expired => {
                if self.done {
                    return;
                }
                let Some((_, psn)) = self.earliest_in_flight() else { return };
                let s = *self.slot(psn).expect("in flight");
                let ev = match self.timeout_feedback {
                    TimeoutFeedback::Unknown => 0,
                    TimeoutFeedback::Packet => s.ev,
                };
                self.paths.feedback(ev, Feedback::Timeout, now);
                self.timeouts.push(TimeoutRecord { fired: now, last_tx: self.last_tx });
                if s.is_rts() {
                    // A lost RTS goes again as one; the reference resends it as a 64-byte data
                    // packet behind the window and the credit.
                    self.rto_timer.cancel();
                    self.send_rts(Some(psn), io, cx);
                    self.rearm_rto(cx);
                    return;
                }
                let loss = LossSignals { now, cause: LossCause::Timeout, bytes: s.bytes(), rtt: None, last_hop: false, ece: false, in_flight: self.in_flight.max(0) as u64 };
                self.cc.on_loss(&loss, &mut self.win);
                let queued = !self.rtx.is_empty();
                self.lose(psn, s.bytes());
                self.rearm_rto(cx);
                io.activate = true;
                // The receiver may not know the sender waits: behind a queue of resends, or
                // with no window or credit for this one, an RTS asks it (`rtxTimerExpired`).
                if queued {
                    self.stop_speculating();
                    if self.credit.is_some() {
                        self.send_rts(None, io, cx);
                    }
                } else if (self.windowed() && !self.window_holds(s.bytes())) || self.credit.is_some_and(|c| c.bytes <= 0) {
                    self.send_rts(None, io, cx);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{CongestionEvent, FlowContext, UetFlow};
    use crate::context::{stream, Bench};
    use crate::time::Rate;
    use std::sync::{Arc, Mutex};

    /// A fixed window that records what it was told.
    struct Rec(u64, Arc<Mutex<Vec<String>>>);
    impl CongestionControl for Rec {
        fn name(&self) -> &'static str {
            "rec"
        }
        fn init(&mut self, win: &mut Window) {
            win.cwnd = self.0;
        }
        fn on_ack(&mut self, ack: &AckSignals, _: &mut Window) {
            self.1.lock().unwrap().push(format!("ack {} rtt {:?}", ack.acked_bytes, ack.rtt.map(|t| t.ns())));
        }
        fn on_loss(&mut self, loss: &LossSignals, _: &mut Window) {
            self.1.lock().unwrap().push(format!("{:?} {}", loss.cause, loss.bytes));
        }
        fn on_congestion(&mut self, _: CongestionEvent, _: Time, _: &mut Window) {}
    }

    const TIMERS: Timers = Timers { rto: Time::from_us(100), rts_gap: Time::from_us(12) };

    fn sender(size: u64, cwnd: u64) -> (UetSender, Arc<Mutex<Vec<String>>>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut rng = stream(7, 5);
        let paths = PathPolicy::new("oblivious", 64, &mut rng).unwrap();
        let route = Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 0, spray: false };
        let s = UetSender::new(&UetConfig::default(), route, Some(size), Box::new(Rec(cwnd, log.clone())), TIMERS, paths, rng);
        (s, log)
    }

    /// Every packet the window lets out now, 0.332 µs apart (4150 bytes at 100 Gb/s).
    fn drain(b: &mut Bench, s: &mut UetSender) -> Vec<Packet> {
        let mut out = Vec::new();
        while let Some(p) = s.next_packet(&mut b.cx()) {
            out.push(p);
            b.now += Time(332_000);
        }
        out
    }

    fn ack(cum: u64, base: u64, bitmap: u64, acked: u64, recvd: u64, bits: u8) -> Packet {
        let mut a = Packet { seq: base, ack: cum, flags: flags::ACK | flags::REVERSE, caps: Caps(bits), ..Packet::default() };
        wire::set_feedback(&mut a, bitmap, acked, recvd);
        a
    }

    fn nack(psn: u64, recvd: u64) -> Packet {
        let mut n = ack(0, psn, 0, psn, recvd, 0);
        n.flags |= flags::NACK;
        n
    }

    fn give(b: &mut Bench, s: &mut UetSender, pkt: &Packet) -> Io {
        let mut io = Io::default();
        s.on_packet(pkt, &mut io, &mut b.cx());
        io
    }

    #[test]
    fn two_megabytes_are_490_packets_with_a_short_last_one() {
        let mut b = Bench::new();
        let (mut s, _) = sender(2_000_000, 1 << 30);
        let pkts = drain(&mut b, &mut s);
        assert_eq!(pkts.len(), 490);
        assert_eq!(pkts.iter().map(|p| p.payload as u64 + 64).sum::<u64>(), 2_031_360);
        assert_eq!(pkts[489].payload + 64, 2010);
        assert_eq!(pkts[489].wire_bytes, 2010 + 38, "framing on the wire, not in the window");
        assert!(pkts.iter().enumerate().all(|(i, p)| wire::psn(p) == i as u64 && p.seq == i as u64 * 4086));
    }

    #[test]
    fn the_last_packet_a_full_window_and_every_resend_ask_for_an_ack() {
        let mut b = Bench::new();
        let (mut s, _) = sender(40_000, 4 * 4150);
        let ars: Vec<bool> = drain(&mut b, &mut s).iter().map(|p| wire::has(p, AR)).collect();
        // After the third, 12,450 in flight and 4150 more is exactly the window: it asks.
        assert_eq!(ars, [false, false, true, true]);
        give(&mut b, &mut s, &nack(1, 0));
        let resent = drain(&mut b, &mut s);
        assert_eq!((wire::psn(&resent[0]), resent[0].caps.0), (1, AR | RTX));
        let (mut s, _) = sender(3 * 4086, 1 << 30);
        let ars: Vec<bool> = drain(&mut b, &mut s).iter().map(|p| wire::has(p, AR)).collect();
        assert_eq!(ars, [false, false, true], "the last packet");
    }

    #[test]
    fn in_flight_falls_by_the_receivers_count_and_a_found_resend_goes_back() {
        let mut b = Bench::new();
        let (mut s, log) = sender(100_000, 1 << 30);
        drain(&mut b, &mut s);
        assert_eq!((s.next_psn, s.in_flight), (25, 100_000 + 25 * 64));
        let full = s.in_flight;
        // The receiver counts two packets: in flight falls by its count, whatever is acked.
        give(&mut b, &mut s, &ack(1, 2, 0b1, 2, 2 * 4150, 0));
        assert_eq!(s.in_flight, full - 2 * 4150);
        assert_eq!((s.cum, s.una), (1, 4086));
        // A NACK takes its packet out and queues it...
        give(&mut b, &mut s, &nack(5, 2 * 4150));
        assert_eq!(s.in_flight, full - 3 * 4150);
        assert_eq!(s.rtx.iter().copied().collect::<Vec<_>>(), [5]);
        // ...then the bitmap shows PSN 5 arrived after all (its header's NACK was late): out of
        // the queue, and its bytes, which the count takes out again, go back.
        give(&mut b, &mut s, &ack(1, 5, 0b1, 5, 3 * 4150, 0));
        assert!(s.rtx.is_empty());
        assert_eq!(s.in_flight, full - 3 * 4150);
        let log = log.lock().unwrap();
        assert_eq!(log[0], "ack 8300 rtt Some(7636)", "two counted, and PSN 2's round trip: sent at 0.664 µs, acked at 8.3");
        assert_eq!(log[1], "Trimmed 4150");
    }

    #[test]
    fn a_nack_resend_goes_ahead_of_new_data_and_stale_nacks_are_ignored() {
        let mut b = Bench::new();
        let (mut s, _) = sender(100_000, 3 * 4150);
        assert_eq!(drain(&mut b, &mut s).len(), 3);
        give(&mut b, &mut s, &ack(2, 2, 0, 1, 2 * 4150, 0));
        give(&mut b, &mut s, &nack(2, 2 * 4150));
        let next: Vec<u64> = drain(&mut b, &mut s).iter().map(wire::psn).collect();
        assert_eq!(next, [2, 3, 4], "PSN 2 again, then new data");
        give(&mut b, &mut s, &nack(0, 2 * 4150));
        give(&mut b, &mut s, &nack(2, 2 * 4150));
        give(&mut b, &mut s, &nack(2, 2 * 4150));
        assert_eq!((b.counters.uet.nacks, b.counters.uet.nacks_ignored), (4, 2), "PSN 0 was acked; PSN 2's second NACK finds it queued");
    }

    #[test]
    fn the_retransmission_timeout_is_fifteen_microseconds_and_six_queues() {
        let cfg = UetConfig::default();
        let net = |q| super::super::UetNetwork { network_rtt: Time::from_us(12), trimming: true, queue_bytes: q, oversubscription: 1.0 };
        assert_eq!(net(178_450).rto(&cfg, Rate::gbps(100)), Time(100_656_000));
        assert_eq!(net(415_000).rto(&cfg, Rate::gbps(400)), Time(64_800_000));
        let cfg = UetConfig { rto: crate::auto::Auto::Set(Time::from_us(40)), ..cfg };
        assert_eq!(net(415_000).rto(&cfg, Rate::gbps(400)), Time::from_us(40));
    }

    #[test]
    fn a_lost_window_times_out_packet_by_packet_each_at_its_own_deadline() {
        let mut b = Bench::new();
        let (mut s, log) = sender(10 * 4086, 1 << 30);
        let sent = drain(&mut b, &mut s);
        assert_eq!(sent.len(), 10);
        let mut fired = Vec::new();
        while let Some((t, ev)) = b.q.pop() {
            let Event::Timer(_, kind, gen) = ev else { continue };
            b.now = t;
            let before = s.rtx.len();
            give_timer(&mut b, &mut s, kind, gen);
            if s.rtx.len() > before {
                fired.push((t, *s.rtx.last().unwrap()));
            }
        }
        let want: Vec<(Time, u64)> = (0..10).map(|k| (Time(k * 332_000) + Time::from_us(100), k)).collect();
        assert_eq!(fired, want, "expiry k at its send + RTO, resending only PSN k");
        assert_eq!(s.timeouts.len(), 10);
        assert_eq!(log.lock().unwrap().iter().filter(|l| *l == "Timeout 4150").count(), 10);
    }

    fn give_timer(b: &mut Bench, s: &mut UetSender, kind: TimerKind, gen: u32) {
        let mut io = Io::default();
        s.on_timer(kind, gen, &mut io, &mut b.cx());
    }

    #[test]
    fn a_round_trip_is_sampled_from_a_first_send_or_an_answered_single_resend() {
        let mut b = Bench::new();
        let (mut s, log) = sender(100_000, 1 << 30);
        drain(&mut b, &mut s);
        // PSN 3 lost and resent once; an ACK of it without the echo is not its resend's.
        give(&mut b, &mut s, &nack(3, 0));
        drain(&mut b, &mut s);
        give(&mut b, &mut s, &ack(0, 3, 0, 3, 4150, 0));
        give(&mut b, &mut s, &ack(0, 3, 0, 3, 4150, RTX_ECHO));
        let log = log.lock().unwrap();
        assert!(log[1].ends_with("rtt None"), "{}", log[1]);
        assert!(!log[2].ends_with("rtt None"), "{}", log[2]);
    }

    #[test]
    fn the_flow_completes_at_the_final_cumulative_ack() {
        let mut b = Bench::new();
        let (mut s, _) = sender(3 * 4086, 1 << 30);
        drain(&mut b, &mut s);
        let io = give(&mut b, &mut s, &ack(2, 2, 0b1, 2, 3 * 4150, 0));
        assert!(!io.completed, "PSN 2 is only SACKed");
        let io = give(&mut b, &mut s, &ack(3, 4, 0, 1, 3 * 4150, 0));
        assert!(io.completed && io.closed);
        assert_eq!(s.una, 3 * 4086);
        assert!(s.rto_timer.deadline().is_none());
    }

    #[test]
    fn at_most_16384_psns_are_outstanding() {
        let mut b = Bench::new();
        let (mut s, _) = sender(100_000_000, u64::MAX / 4);
        assert_eq!(drain(&mut b, &mut s).len(), MAX_OUTSTANDING as usize);
        give(&mut b, &mut s, &ack(10, 11, 0, 9, 10 * 4150, 0));
        assert_eq!(drain(&mut b, &mut s).len(), 10);
    }

    #[test]
    fn an_algorithm_built_for_uet_starts_the_window() {
        let ctx = FlowContext {
            mss: 4086,
            init_cwnd: 0,
            link_rate: Rate::gbps(100),
            base_rtt: Time::from_us(12),
            size: None,
            deadline: None,
            uet: Some(UetFlow { network_rtt: Time::from_us(12), trimming: true, mtu: 4150, oversubscription: 1.0 }),
            stack: crate::transport::tcp::Stack::Rfc,
        };
        let cc = crate::cc::factory("nscc", &toml::Table::new()).unwrap()(&ctx);
        let mut rng = stream(7, 5);
        let paths = PathPolicy::new("mixed", 64, &mut rng).unwrap();
        let route = Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 0, spray: false };
        let s = UetSender::new(&UetConfig::default(), route, None, cc, TIMERS, paths, rng);
        assert_eq!(s.win.cwnd, 225_000, "1.5 x 150,000 bytes");
    }

    /// A sender of `size` bytes under `algo` with `params`, at 100 Gb/s on a 12 µs network.
    fn credited(size: u64, algo: &str, params: &str) -> UetSender {
        let ctx = FlowContext {
            mss: 4086,
            init_cwnd: 0,
            link_rate: Rate::gbps(100),
            base_rtt: Time::from_us(12),
            size: Some(size),
            deadline: None,
            uet: Some(UetFlow { network_rtt: Time::from_us(12), trimming: true, mtu: 4150, oversubscription: 1.0 }),
            stack: crate::transport::tcp::Stack::Rfc,
        };
        let cc = crate::cc::factory(algo, &params.parse::<toml::Table>().unwrap()).unwrap()(&ctx);
        let mut rng = stream(7, 5);
        let paths = PathPolicy::new("oblivious", 64, &mut rng).unwrap();
        let route = Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 0, spray: false };
        UetSender::new(&UetConfig::default(), route, Some(size), cc, TIMERS, paths, rng)
    }

    fn pull(n: u64) -> Packet {
        Packet { seq: wire::INIT_PULL + n, flags: flags::ACK | flags::REVERSE, caps: Caps(PULL), ..Packet::default() }
    }

    #[test]
    fn under_credit_the_speculative_window_goes_first_then_only_what_pulls_grant() {
        let mut b = Bench::new();
        let mut s = credited(100_000, "rccc", "credit = 4");
        // Four packets spend the 16,600 bytes; each asks for what it spent back, in quanta.
        let sent = drain(&mut b, &mut s);
        let targets: Vec<u64> = sent.iter().map(|p| wire::pull_target(p) - wire::INIT_PULL).collect();
        assert_eq!(targets, [17, 33, 49, 65], "4150, 8300, 12,450 and 16,600 bytes, rounded up to 256");
        assert_eq!(sent.iter().map(|p| wire::has(p, AR)).collect::<Vec<_>>(), [false, false, false, true], "the last of the credit asks for an ACK");
        // The first ACK ends speculation; there was nothing left to drop.
        give(&mut b, &mut s, &ack(1, 1, 0, 0, 4150, 0));
        assert!(drain(&mut b, &mut s).is_empty());
        // 17 quanta are 4352 bytes: any credit lets a whole packet go, so two go and leave a debt.
        let io = give(&mut b, &mut s, &pull(17));
        assert!(io.activate);
        assert_eq!(drain(&mut b, &mut s).len(), 2);
        assert_eq!(s.credit.unwrap().bytes, 4352 - 2 * 4150);
        // An old pull number grants nothing; a large one fills to the cap and no further.
        give(&mut b, &mut s, &pull(10));
        assert!(drain(&mut b, &mut s).is_empty());
        give(&mut b, &mut s, &pull(1000));
        assert_eq!(s.credit.unwrap().bytes, 16_600);
        assert_eq!(b.counters.uet.pulls, 3);
    }

    #[test]
    fn the_first_feedback_drops_what_is_left_of_the_speculative_credit() {
        let mut b = Bench::new();
        let mut s = credited(2 * 4086, "rccc", "credit = 4");
        assert_eq!(drain(&mut b, &mut s).len(), 2);
        assert_eq!(s.credit.unwrap().bytes, 8300);
        // A NACK ends speculation too: PSN 1 waits for credit, and its resend is asked for.
        give(&mut b, &mut s, &nack(1, 4150));
        assert_eq!(s.credit.unwrap().bytes, 0);
        assert!(!s.has_sendable());
        assert_eq!(s.compute_pull_target() - wire::INIT_PULL, 17, "the 4150 bytes queued to resend");
        give(&mut b, &mut s, &pull(17));
        let resent = drain(&mut b, &mut s);
        assert_eq!((resent.len(), wire::psn(&resent[0])), (1, 1));
    }

    #[test]
    fn with_nscc_both_the_window_and_credit_must_allow_a_packet() {
        let mut b = Bench::new();
        let mut s = credited(1_000_000, "nscc", "receiver_cc = true\ncwnd = 2");
        assert_eq!(s.credit.unwrap().cap, 225_000, "the speculative credit is NSCC's starting maxwnd");
        assert_eq!(drain(&mut b, &mut s).len(), 2, "credit for 54 packets, a window of 2");
        // The target asks for no more than the window and a packet, less the credit held.
        assert_eq!(s.compute_pull_target() - wire::INIT_PULL, 17, "8300 + 4150 is under the 216,700 held, but speculating asks for a packet");
        give(&mut b, &mut s, &ack(2, 2, 0, 1, 2 * 4150, 0));
        assert_eq!(s.credit.unwrap().bytes, 0);
        assert!(!s.has_sendable(), "the window has room, the credit is gone");
        assert!(s.compute_pull_target() > wire::INIT_PULL);
    }

    #[test]
    fn a_timer_with_no_credit_sends_an_rts_that_takes_a_psn() {
        let mut b = Bench::new();
        let mut s = credited(100_000, "rccc", "credit = 2");
        let sent = drain(&mut b, &mut s);
        give(&mut b, &mut s, &ack(0, 0, 0, 0, 0, 0));
        let (t, gen) = loop {
            let Some((t, Event::Timer(_, TimerKind::Rto, gen))) = b.q.pop() else { continue };
            break (t, gen);
        };
        b.now = t;
        let mut io = Io::default();
        s.on_timer(TimerKind::Rto, gen, &mut io, &mut b.cx());
        let rts = &io.replies[0];
        assert_eq!((wire::psn(rts), rts.payload, rts.prio), (2, 0, CONTROL_PRIO));
        assert!(wire::has(rts, RTS) && wire::has(rts, AR));
        assert_eq!(wire::pull_target(rts), wire::pull_target(&sent[1]), "it repeats the last target");
        assert_eq!((s.next_psn, b.counters.uet.rts), (3, 1));
        // Its ACK is a delay sample that may not lower the base RTT, and completes nothing.
        let io = give(&mut b, &mut s, &ack(0, 2, 0b1, 2, 0, RTS));
        assert!(!io.completed);
        assert_eq!(s.slot(2).unwrap().state, State::Sacked);
    }
}
