//! One reliable-connected queue pair as its two ends, which meet only through packets: the
//! [`Requester`] (the sending NIC), which cuts the flow into MTU packets, paces them at the
//! congestion controller's rate and repairs losses, and the [`Responder`] (the receiving NIC),
//! which acknowledges, NACKs what is out of order and sends CNPs. The requester flags each
//! message's last packet (`flags::FIN`, the "last" of RoCE's opcodes), which is how the responder
//! knows a message ended.
//!
//! Sequence numbers are byte offsets (packet `i` carries bytes `i x mtu ..`), so a PSN is
//! `seq / mtu`. The requester's rate is the algorithm's pacing rate (line rate when it sets
//! none) and its window, when the algorithm keeps one (HPCC), caps the bytes in flight; DCQCN and
//! TIMELY leave the window open and act on the rate alone.
//!
//! - **Go-back-N**: the responder accepts only the packet it expects; anything later is dropped
//!   and answered with one NACK naming the expected packet (again only after `nack_interval`),
//!   and the requester resends from there. A timeout resends from the oldest unacknowledged.
//! - **IRN**: the responder keeps out-of-order packets and answers each with a NACK carrying the
//!   cumulative ACK and the packet that arrived (a one-block SACK). The requester marks what was
//!   received, resends the holes below the highest received, then continues with new data; new
//!   packets in flight never exceed the BDP cap. Its timer is RTO_low while few packets are in
//!   flight, RTO_high otherwise, and a timeout resends every hole.
//! - **SACK**: IRN's selective repeat without its BDP cap and with one timeout, `rdma.rto` (the
//!   TLT paper's "DCQCN+SACK", its simulator's IRN with `IRN_NO_BDPFC`).
//! - **CNPs**, to algorithms that react to notifications (`EcnMode::Classic`): paced, a
//!   CE-marked packet makes the responder send a CNP unless it sent one less than
//!   `cnp_interval` ago; `every_ack`, the ACK or NACK of a CE-marked packet carries the CNP flag
//!   and the requester takes each as a CNP. Algorithms that read per-packet marks
//!   (`EcnMode::PerPacket`) get them echoed on ACKs.
//! - **Control priority**: with `ack_priority = "control"`, ACKs, NACKs and CNPs travel at
//!   [`CONTROL_PRIO`], ahead of every data queue.
//! - **TLT** (EuroSys 2021), by rate (section 4.2): the last packet of the message, the first
//!   packet of each retransmission and, when asked, every N-th packet are important. By window
//!   (section 4.1, what the TLT paper's RDMA simulator runs for queue pairs that repair
//!   selectively and for HPCC): the first packet and the first after each echo are important,
//!   the responder answers an important packet with an echo, and an echo that finds nothing new
//!   to send forces a piece of the oldest unacknowledged unimportant bytes out, important, so
//!   the echoes keep coming until every loss is repaired. ACKs, NACKs and CNPs are control
//!   packets.

use crate::ids::FlowId;
use super::{AckPriority, ClassNic, CnpMode, RdmaConfig, RdmaTlt, Recovery, TltMarking};
use crate::cc::{AckSignals, CongestionControl, CongestionEvent, EcnMode, Window};
use crate::context::{Cx, Event, TimerKind};
use crate::event::{TimerFire, TimerSlot};
use crate::packet::hpcc_int::{HopIdx, HEADER_BYTES};
use crate::packet::{flags, Colour, Ecn, Packet, SackBlock, CONTROL_PRIO, INITIAL_TTL};
use crate::time::{Rate, Time};
use crate::transport::tcp::{RangeSet, Route, TimeoutRecord, TltCounts, TltSender};
use crate::transport::Io;
#[cfg(test)]
use crate::transport::Side;

/// TLT's rate-based marking at a requester.
#[derive(Clone, Debug, Default)]
struct RateMarking {
    /// Mark every this many packets (0: only the last packet and the first retransmission).
    every: u32,
    since: u32,
    /// The next packet starts a retransmission.
    retransmission: bool,
    counts: TltCounts,
}

impl RateMarking {
    fn colour(&mut self, last: bool) -> Colour {
        self.since += 1;
        let periodic = self.every > 0 && self.since >= self.every;
        if last || periodic || std::mem::take(&mut self.retransmission) {
            self.since = 0;
            self.counts.important_packets += 1;
            Colour::Important
        } else {
            Colour::Unimportant
        }
    }
}

/// How a queue pair marks TLT's important packets.
#[derive(Clone, Debug)]
enum Marking {
    Rate(RateMarking),
    Window(TltSender),
}

/// The sending end of a queue pair.
pub struct Requester {
    route: Route,
    /// Data packets sent, which a sprayed flow's entropy counts by.
    sprayed: u32,
    recovery: Recovery,
    mtu: u64,
    /// Bytes the flow sends (`u64::MAX` for an endless flow).
    size: u64,
    frame_overhead: u32,
    rto_high: Time,
    rto_low: Time,
    rto_low_packets: u64,
    /// IRN's cap on packets in flight.
    irn_cap: u64,
    line_rate: Rate,
    /// Window and rate shared with the algorithm.
    pub win: Window,
    /// The flow's congestion controller.
    pub cc: Box<dyn CongestionControl>,
    ecn_mode: EcnMode,
    hop_records: bool,
    /// Bytes acknowledged.
    pub una: u64,
    /// Next byte to send; go-back-N moves it back.
    nxt: u64,
    /// One past the highest byte sent.
    high: u64,
    /// IRN: bytes the responder holds above `una`.
    sacked: RangeSet,
    /// IRN: holes below this are lost and resent (0 outside recovery).
    lost_below: u64,
    /// IRN: the hole search resumes here.
    retx_next: u64,
    pace_next: Time,
    rto_timer: TimerSlot,
    min_rtt: Time,
    srtt: Time,
    delivered: u64,
    done: bool,
    /// The application appends messages: the queue pair outlives each one.
    /// The application appends messages to this queue pair.
    pub persistent: bool,
    tlt: Option<Marking>,
    /// Packets resent.
    pub retransmits: u64,
    /// Retransmission timeouts, in order.
    pub timeouts: Vec<TimeoutRecord>,
    last_tx: Time,
}

/// The receiving end of a queue pair.
pub struct Responder {
    route: Route,
    recovery: Recovery,
    ack_frame: u32,
    ack_interval: u32,
    cnp: CnpMode,
    cnp_interval: Time,
    /// Priority of ACKs, NACKs and CNPs.
    control_prio: u8,
    nack_interval: Time,
    /// How the requester's algorithm takes CE marks: CNPs or per-packet echoes.
    ecn_mode: EcnMode,
    /// TLT is on: ACKs, NACKs and CNPs are control packets.
    tlt: bool,
    /// TLT marks by window: an important packet's ACK or NACK is its echo.
    echoes: bool,
    /// Bytes received in order.
    pub rcv_nxt: u64,
    /// The end of the last message whose last packet arrived.
    msg_end: u64,
    /// IRN: out-of-order bytes the responder holds.
    ooo: RangeSet,
    unacked: u32,
    ce_unacked: bool,
    last_nack: Option<(u64, Time)>,
    last_cnp: Option<Time>,
    /// Window-based TLT: an important packet arrived that the next ACK or NACK echoes.
    echo_due: bool,
    hops_held: Option<HopIdx>,
    /// CNPs the responder sent (with `every_ack`, ACKs that carried the CNP flag).
    pub cnps: u64,
}

/// A RoCEv2 reliable-connected queue pair: its two ends.
pub struct QueuePair {
    /// The sending end.
    pub requester: Requester,
    /// The receiving end.
    pub responder: Responder,
}

impl QueuePair {
    /// A queue pair for a flow of `size` bytes (`None`: endless) whose algorithm is `cc`, with
    /// the requester's line rate and the path's bandwidth-delay product in bytes (IRN's cap);
    /// `nic` is what its class chose where sources differ.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cfg: &RdmaConfig,
        nic: ClassNic,
        tlt: Option<RdmaTlt>,
        route: Route,
        size: Option<u64>,
        mut cc: Box<dyn CongestionControl>,
        line_rate: Rate,
        bdp: u64,
    ) -> QueuePair {
        let mtu = cfg.mtu as u64;
        let mut win = Window { cwnd: u64::MAX / 4, ssthresh: u64::MAX / 4, pacing_rate: None, mss: mtu };
        cc.init(&mut win);
        let hop_records = cc.needs_hop_records();
        let extra = if hop_records { HEADER_BYTES } else { 0 };
        let ecn_mode = cc.ecn_mode();
        let marking = tlt.map(|t| match (t.marking, cfg.recovery) {
            (TltMarking::Window, _) | (TltMarking::Auto, Recovery::Irn | Recovery::Sack) => {
                let mut w = TltSender::default();
                w.mark_next();
                Marking::Window(w)
            }
            _ => Marking::Rate(RateMarking { every: t.every, ..RateMarking::default() }),
        });
        let echoes = matches!(marking, Some(Marking::Window(_)));
        let requester = Requester {
            route,
            sprayed: 0,
            recovery: cfg.recovery,
            mtu,
            size: size.unwrap_or(u64::MAX),
            frame_overhead: cfg.frame(0) + extra,
            rto_high: cfg.rto(),
            rto_low: cfg.rto_low,
            rto_low_packets: cfg.rto_low_packets as u64,
            irn_cap: cfg.irn_window.map_or(bdp.div_ceil(mtu).max(1), u64::from),
            line_rate,
            ecn_mode,
            win,
            cc,
            hop_records,
            una: 0,
            nxt: 0,
            high: 0,
            sacked: RangeSet::default(),
            lost_below: 0,
            retx_next: 0,
            pace_next: Time::ZERO,
            rto_timer: TimerSlot::default(),
            min_rtt: Time::MAX,
            srtt: Time::ZERO,
            delivered: 0,
            done: false,
            persistent: false,
            tlt: marking,
            retransmits: 0,
            timeouts: Vec::new(),
            last_tx: Time::ZERO,
        };
        let responder = Responder {
            route,
            recovery: cfg.recovery,
            ack_frame: cfg.ack_frame() + extra,
            ack_interval: cfg.ack_interval,
            cnp: nic.cnp,
            cnp_interval: cfg.cnp_interval,
            control_prio: match nic.ack_priority {
                AckPriority::Data => route.prio,
                AckPriority::Control => CONTROL_PRIO,
            },
            nack_interval: cfg.nack_interval,
            ecn_mode,
            tlt: tlt.is_some(),
            echoes,
            rcv_nxt: 0,
            msg_end: 0,
            ooo: RangeSet::default(),
            unacked: 0,
            ce_unacked: false,
            last_nack: None,
            last_cnp: None,
            echo_due: false,
            hops_held: None,
            cnps: 0,
        };
        QueuePair { requester, responder }
    }

    /// Sends no per-hop records even when the algorithm wants them (an end without INT support).
    pub fn without_hop_records(mut self) -> QueuePair {
        if self.requester.hop_records {
            self.requester.hop_records = false;
            self.requester.frame_overhead -= HEADER_BYTES;
            self.responder.ack_frame -= HEADER_BYTES;
        }
        self
    }

    /// Both ends, each to its own host.
    pub fn into_ends(self) -> (Requester, Responder) {
        (self.requester, self.responder)
    }
}

#[cfg(test)]
impl QueuePair {
    fn tlt_counts(&self) -> Option<TltCounts> {
        self.requester.tlt_counts()
    }
    fn has_sendable(&self) -> bool {
        self.requester.has_sendable()
    }
    fn ready_at(&self, now: Time) -> Time {
        self.requester.ready_at(now)
    }
    fn next_packet(&mut self, cx: &mut Cx) -> Option<Packet> {
        self.requester.next_packet(cx)
    }
    fn on_packet(&mut self, side: Side, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        match side {
            Side::Server => self.responder.respond(pkt, io, cx),
            Side::Client => self.requester.on_feedback(pkt, io, cx),
        }
    }
    fn on_timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
        self.requester.on_timer(kind, gen, io, cx)
    }
}

impl Requester {
    /// TLT's counters, when the requester marks.
    pub fn tlt_counts(&self) -> Option<TltCounts> {
        self.tlt.as_ref().map(|t| match t {
            Marking::Rate(r) => r.counts,
            Marking::Window(w) => w.counts,
        })
    }

    /// Queues a further message of `bytes`; returns the flow's new size.
    pub fn append(&mut self, bytes: u64) -> u64 {
        self.size = self.size.saturating_add(bytes);
        self.size
    }

    /// The rate the requester sends at: the algorithm's, or line rate.
    fn rate(&self) -> Rate {
        self.win.pacing_rate.unwrap_or(self.line_rate).min(self.line_rate)
    }

    /// Starts the algorithm's tick, if it has one; the first packet may go at once.
    pub fn open(&mut self, io: &mut Io, cx: &mut Cx) {
        io.activate = true;
        if let Some(iv) = self.cc.tick_interval() {
            cx.schedule(cx.now + iv, Event::Timer(FlowId(self.route.flow), TimerKind::CcTick, 0));
        }
    }

    /// When the rate limiter lets the next packet out.
    #[inline]
    pub fn ready_at(&self, _now: Time) -> Time {
        self.pace_next
    }

    /// Bytes in flight: sent, not acknowledged, not known received.
    fn in_flight(&self) -> u64 {
        self.high - self.una - self.sacked.bytes()
    }

    /// The next hole IRN resends, if it is recovering one.
    fn next_hole(&self) -> Option<u64> {
        if self.lost_below <= self.una {
            return None;
        }
        self.sacked.next_gap(self.retx_next.max(self.una), self.lost_below).map(|(s, _)| s)
    }

    /// Whether the window (and IRN's cap) lets a new packet out.
    fn window_open(&self) -> bool {
        let outstanding = match self.recovery {
            Recovery::Gbn => self.nxt - self.una,
            Recovery::Irn | Recovery::Sack => self.in_flight(),
        };
        if outstanding >= self.win.cwnd {
            return false;
        }
        self.recovery != Recovery::Irn || (self.high - self.una).div_ceil(self.mtu) < self.irn_cap
    }

    /// True if the requester could send now, ignoring the rate limiter.
    #[inline]
    pub fn has_sendable(&self) -> bool {
        !self.done && (self.next_hole().is_some() || (self.nxt < self.size && self.window_open()) || self.force_due())
    }

    /// The piece window-based TLT forces out now, if it is due (it counts as sent important).
    fn forced_piece(&mut self) -> Option<(u64, u64)> {
        if !self.force_due() {
            return None;
        }
        let in_recovery = self.lost_below > self.una;
        let (una, high, mtu) = (self.una, self.high, self.mtu);
        match self.tlt.as_mut() {
            Some(Marking::Window(t)) => Some(t.proactive(una, high, mtu, in_recovery)),
            _ => None,
        }
    }

    /// Window-based TLT: an echo came back, nothing new may go, and unimportant bytes are
    /// outstanding, so a piece of them goes out important.
    fn force_due(&self) -> bool {
        matches!(&self.tlt, Some(Marking::Window(t)) if t.wants_important() && t.has_unimportant())
    }

    /// Bytes the requester could send now (for a host port's queue samples).
    pub fn sendable_bytes(&self) -> u64 {
        if self.done || !self.window_open() {
            return 0;
        }
        (self.size - self.nxt).min(self.win.cwnd.saturating_sub(self.in_flight()))
    }

    /// The requester's next packet, if its window and rate let one out now.
    pub fn next_packet(&mut self, cx: &mut Cx) -> Option<Packet> {
        let now = cx.now;
        if self.done || self.pace_next > now {
            return None;
        }
        let hole = self.next_hole();
        let (seq, len, retransmit, colour) = match hole {
            Some(s) => (s, self.mtu.min(self.size - s), true, None),
            None if self.nxt < self.size && self.window_open() => (self.nxt, self.mtu.min(self.size - self.nxt), self.nxt < self.high, None),
            None => {
                let (s, e) = self.forced_piece()?;
                (s, e - s, true, Some(Colour::Important))
            }
        };
        if retransmit {
            self.retransmits += 1;
        }
        if hole.is_some() {
            self.retx_next = seq + len;
        } else if colour.is_none() {
            self.nxt = seq + len;
            self.high = self.high.max(self.nxt);
        }
        let last = seq + len == self.size;
        let colour = colour.unwrap_or_else(|| match self.tlt.as_mut() {
            None => Colour::Unimportant,
            Some(Marking::Rate(r)) => r.colour(last),
            Some(Marking::Window(w)) => w.colour_data(seq, seq + len, last, false),
        });
        let mut pkt = Packet {
            seq,
            payload: len as u32,
            wire_bytes: self.frame_overhead + len as u32,
            ecn: if self.ecn_mode == EcnMode::Off { Ecn::NotEct } else { Ecn::Ect },
            ts: now,
            colour,
            flags: if last { flags::FIN } else { 0 },
            hops: self.hop_records.then(|| cx.hops.alloc()),
            ..self.route.forward()
        };
        if self.route.spray {
            pkt.hash = self.route.entropy(self.sprayed);
            self.sprayed = self.sprayed.wrapping_add(1);
        }
        cx.counters.data_packets += 1;
        self.pace_next = now + self.rate().tx_time(pkt.wire_bytes as u64);
        self.last_tx = now;
        if self.rto_timer.deadline().is_none() {
            self.arm_rto(cx);
        }
        Some(pkt)
    }

    /// (Re)starts the retransmission timer: IRN's RTO_low while few packets are in flight.
    fn arm_rto(&mut self, cx: &mut Cx) {
        let low = self.recovery == Recovery::Irn && self.in_flight().div_ceil(self.mtu) <= self.rto_low_packets;
        let at = cx.now + if low { self.rto_low } else { self.rto_high };
        if let Some((t, gen)) = self.rto_timer.arm(at) {
            cx.schedule(t, Event::Timer(FlowId(self.route.flow), TimerKind::Rto, gen));
        }
    }

    /// Takes the responder's feedback: ACKs, NACKs, CNPs, TLT's echoes; `io.closed` when every
    /// byte is acknowledged (the queue pair is destroyed at this end).
    pub fn on_feedback(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        let hops = pkt.hops.map(|hi| {
            let stack = *cx.hops.get(hi);
            cx.hops.free(hi);
            stack
        });
        if self.done {
            return;
        }
        if !pkt.has(flags::ACK) {
            if pkt.has(flags::ECE) {
                self.cc.on_congestion(CongestionEvent::Ecn, now, &mut self.win);
                io.activate = true;
            }
            return;
        }
        let ack = pkt.ack.min(self.high);
        let advanced = ack > self.una;
        let mut newly = 0;
        if advanced {
            newly = ack - self.una - self.sacked.remove_below(ack);
            self.una = ack;
            self.nxt = self.nxt.max(ack);
            self.retx_next = self.retx_next.max(ack);
        }
        let nack = pkt.has(flags::NACK);
        if nack {
            match self.recovery {
                Recovery::Gbn => {
                    if self.nxt > ack {
                        self.nxt = ack;
                        self.start_retransmission(false);
                    }
                }
                Recovery::Irn | Recovery::Sack => {
                    for (s, e) in pkt.sack_ranges() {
                        let (s, e) = (s.max(self.una), e.min(self.high));
                        if e > s {
                            newly += self.sacked.insert(s, e);
                        }
                    }
                    let highest = self.sacked.high().unwrap_or(self.una);
                    if highest > self.lost_below {
                        if self.lost_below <= self.una {
                            self.retx_next = self.una;
                            self.start_retransmission(false);
                        }
                        self.lost_below = highest;
                    }
                }
            }
        }
        if let Some(Marking::Window(t)) = self.tlt.as_mut() {
            t.on_ack(pkt.colour == Colour::Echo, self.una, pkt.sack_ranges());
        }
        let rtt = (now >= pkt.ts_echo && pkt.ts_echo > Time::ZERO).then(|| now - pkt.ts_echo);
        if let Some(r) = rtt {
            self.min_rtt = self.min_rtt.min(r);
            self.srtt = if self.srtt == Time::ZERO { r } else { Time((self.srtt.0 * 7 + r.0) / 8) };
        }
        self.delivered += newly;
        let ce = pkt.has(flags::ECE);
        let signals = AckSignals {
            now,
            acked_bytes: newly,
            ce_bytes: if ce { newly.max(1) } else { 0 },
            ece: ce,
            rtt,
            min_rtt: self.min_rtt,
            srtt: self.srtt,
            in_flight: self.in_flight(),
            snd_una: self.una,
            snd_nxt: self.high,
            in_recovery: self.lost_below > self.una,
            path_hops: pkt.hops_echo,
            hops,
            delivered: self.delivered,
            ..AckSignals::default()
        };
        self.cc.on_ack(&signals, &mut self.win);
        if ce && self.ecn_mode == EcnMode::Classic {
            // `every_ack`: the flag is the CNP, taken after the acknowledgement it rides on.
            self.cc.on_congestion(CongestionEvent::Ecn, now, &mut self.win);
        }
        if self.una >= self.size && self.persistent {
            // Every message so far is acknowledged; the next append wakes the queue pair.
            self.rto_timer.cancel();
            io.completed = true;
            return;
        }
        if self.una >= self.size {
            self.done = true;
            self.rto_timer.cancel();
            io.completed = true;
            io.closed = true;
            return;
        }
        if self.high == self.una {
            self.rto_timer.cancel();
        } else if advanced || nack {
            self.arm_rto(cx);
        }
        io.activate = true;
    }

    /// The next packet sent starts a retransmission (TLT by rate marks it; by window, a
    /// timeout makes the next packet important, as there is no echo left to wait for).
    fn start_retransmission(&mut self, timeout: bool) {
        match self.tlt.as_mut() {
            Some(Marking::Rate(r)) => r.retransmission = true,
            Some(Marking::Window(w)) if timeout => w.mark_next(),
            _ => {}
        }
    }

    /// Runs one of the queue pair's timers.
    pub fn on_timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        let flow = self.route.flow;
        match kind {
            TimerKind::Rto => match self.rto_timer.fire(now, gen) {
                TimerFire::Stale => {}
                TimerFire::Reschedule(t, g) => cx.schedule(t, Event::Timer(FlowId(flow), TimerKind::Rto, g)),
                TimerFire::Expired => {
                    if self.done || self.high == self.una {
                        return;
                    }
                    self.timeouts.push(TimeoutRecord { fired: now, last_tx: self.last_tx });
                    self.cc.on_congestion(CongestionEvent::Timeout, now, &mut self.win);
                    match self.recovery {
                        Recovery::Gbn => self.nxt = self.una,
                        Recovery::Irn | Recovery::Sack => {
                            self.lost_below = self.high;
                            self.retx_next = self.una;
                        }
                    }
                    self.start_retransmission(true);
                    self.arm_rto(cx);
                    io.activate = true;
                }
            },
            TimerKind::CcTick => {
                if self.done {
                    return;
                }
                self.cc.on_tick(now, &mut self.win);
                if let Some(iv) = self.cc.tick_interval() {
                    cx.schedule(now + iv, Event::Timer(FlowId(flow), TimerKind::CcTick, 0));
                }
                io.activate = true;
            }
            TimerKind::LossProbe | TimerKind::DelayedAck | TimerKind::PeerRto | TimerKind::TimeWait | TimerKind::PeerClosed => {}
        }
    }
}

impl Responder {
    /// Whether the responder holds a per-hop record stack it has not echoed yet.
    pub fn holds_hop_stack(&self) -> bool {
        self.hops_held.is_some()
    }

    /// The requester's close reaching the responder ([`TimerKind::PeerClosed`]: a responder has
    /// no close of its own) closes it (`io.closed`), freeing what it holds.
    pub fn on_timer(&mut self, kind: TimerKind, io: &mut Io, cx: &mut Cx) {
        if kind == TimerKind::PeerClosed {
            if let Some(h) = self.hops_held.take() {
                cx.hops.free(h);
            }
            io.closed = true;
        }
    }

    /// Takes a data packet: acknowledges it, echoes what TLT asks, sends CNPs and NACKs.
    pub fn respond(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        if pkt.payload == 0 {
            return;
        }
        if let Some(stale) = pkt.hops.and_then(|new| self.hops_held.replace(new)) {
            // Only the latest packet's records are echoed.
            cx.hops.free(stale);
        }
        let ce = pkt.ecn == Ecn::Ce;
        let paced = self.cnp == CnpMode::Paced;
        if ce && paced && self.ecn_mode == EcnMode::Classic && self.last_cnp.is_none_or(|t| now >= t + self.cnp_interval) {
            self.last_cnp = Some(now);
            self.cnps += 1;
            io.replies.push(self.control(flags::ECE, 0, pkt));
        }
        self.ce_unacked |= ce;
        let important = pkt.colour == Colour::Important;
        self.echo_due |= important && self.echoes;
        let (seq, end) = (pkt.seq, pkt.seq + pkt.payload as u64);
        if pkt.has(flags::FIN) {
            self.msg_end = self.msg_end.max(end);
        }
        if seq == self.rcv_nxt {
            let start = self.rcv_nxt;
            self.rcv_nxt = end;
            if let Some((_, e)) = self.ooo.containing(self.rcv_nxt) {
                self.rcv_nxt = e;
            }
            self.ooo.remove_below(self.rcv_nxt);
            io.delivered = Some((start, self.rcv_nxt - start));
            self.unacked += 1;
            let end_of_message = self.msg_end > start && self.rcv_nxt >= self.msg_end;
            if self.unacked >= self.ack_interval
                || end_of_message
                || important
                || !self.ooo.is_empty()
            {
                self.send_ack(0, pkt, io);
            }
        } else if seq < self.rcv_nxt || self.ooo.bytes_in(seq, end) == end - seq {
            // A duplicate: acknowledge again, so a lost ACK costs no timeout.
            self.send_ack(0, pkt, io);
        } else {
            match self.recovery {
                Recovery::Gbn => {
                    let repeat = self.last_nack.is_some_and(|(e, t)| e == self.rcv_nxt && now < t + self.nack_interval);
                    // An important packet is always answered: its echo keeps TLT's clock going.
                    if !repeat || self.echo_due {
                        self.last_nack = Some((self.rcv_nxt, now));
                        self.send_ack(flags::NACK, pkt, io);
                    }
                }
                Recovery::Irn | Recovery::Sack => {
                    self.ooo.insert(seq, end);
                    self.send_ack(flags::NACK, pkt, io);
                }
            }
        }
    }

    /// An ACK (or with `extra` = NACK, a NACK) for `data`, echoing its timestamp, its CE marks
    /// since the last ACK and the held per-hop records.
    fn send_ack(&mut self, extra: u8, data: &Packet, io: &mut Io) {
        let mut a = self.control(flags::ACK | extra, self.rcv_nxt, data);
        if std::mem::take(&mut self.ce_unacked) {
            match self.ecn_mode {
                EcnMode::PerPacket => a.flags |= flags::ECE,
                EcnMode::Classic if self.cnp == CnpMode::EveryAck => {
                    a.flags |= flags::ECE;
                    self.cnps += 1;
                }
                _ => {}
            }
        }
        if extra & flags::NACK != 0 && self.recovery != Recovery::Gbn {
            let off = |s: u64| (s - self.rcv_nxt).min(u32::MAX as u64) as u32;
            a.sack[0] = SackBlock { start: off(data.seq), end: off(data.seq + data.payload as u64) };
            a.sack_len = 1;
        }
        if std::mem::take(&mut self.echo_due) {
            a.colour = Colour::Echo;
        }
        a.hops = self.hops_held.take();
        self.unacked = 0;
        io.replies.push(a);
    }

    /// A packet from the responder back to the requester.
    fn control(&self, flags: u8, ack: u64, data: &Packet) -> Packet {
        Packet {
            ack,
            wire_bytes: self.ack_frame,
            flags: flags | flags::REVERSE,
            prio: self.control_prio,
            ts_echo: data.ts,
            hops_echo: Some(INITIAL_TTL.saturating_sub(data.ttl)),
            colour: if self.tlt { Colour::Control } else { Colour::Unimportant },
            ..self.route.reverse()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Bench;

    /// A fixed-rate algorithm that counts the CNPs it sees.
    struct Fixed(u32, EcnMode);
    impl CongestionControl for Fixed {
        fn name(&self) -> &'static str {
            "fixed"
        }
        fn ecn_mode(&self) -> EcnMode {
            self.1
        }
        fn on_ack(&mut self, _: &AckSignals, _: &mut Window) {}
        fn on_congestion(&mut self, ev: CongestionEvent, _: Time, _: &mut Window) {
            if ev == CongestionEvent::Ecn {
                self.0 += 1;
            }
        }
        fn state(&self) -> Vec<(&'static str, f64)> {
            vec![("cnps", self.0 as f64)]
        }
    }

    /// Every packet the requester may send now, advancing the clock past its pacing.
    fn drain(b: &mut Bench, qp: &mut QueuePair) -> Vec<Packet> {
        let mut out = Vec::new();
        while qp.has_sendable() {
            b.now = b.now.max(qp.ready_at(b.now));
            match qp.next_packet(&mut b.cx()) {
                Some(p) => out.push(p),
                None => break,
            }
        }
        out
    }

    /// Gives `pkt` to `side` and returns what the queue pair reported.
    fn deliver(b: &mut Bench, qp: &mut QueuePair, side: Side, pkt: &Packet) -> Io {
        let mut io = Io::default();
        qp.on_packet(side, pkt, &mut io, &mut b.cx());
        io
    }

    fn qp(recovery: Recovery, size: u64, mode: EcnMode) -> QueuePair {
        let cfg = RdmaConfig { recovery, ..RdmaConfig::default() };
        let route = Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 0, spray: false };
        QueuePair::new(&cfg, ClassNic::default(), None, route, Some(size), Box::new(Fixed(0, mode)), Rate::gbps(25), 100_000)
    }

    /// Sends `size` bytes through a responder that loses the packets whose index is in `lose`
    /// (once each), carrying every reply back; returns the queue pair and the bytes delivered in
    /// order to the application.
    fn run(recovery: Recovery, size: u64, lose: &[u64]) -> (QueuePair, u64) {
        let mut lost: Vec<u64> = lose.to_vec();
        run_dropping(qp(recovery, size, EcnMode::Off), |p| match lost.iter().position(|&l| l == p.seq / 1000) {
            Some(i) => {
                lost.remove(i);
                true
            }
            None => false,
        })
    }

    /// Runs `q` to completion through a network that drops the data packets `drop` picks.
    fn run_dropping(mut q: QueuePair, mut drop: impl FnMut(&Packet) -> bool) -> (QueuePair, u64) {
        let mut b = Bench::new();
        let mut delivered = 0;
        for _ in 0..10_000 {
            if q.requester.done {
                break;
            }
            let sent = drain(&mut b, &mut q);
            if sent.is_empty() {
                // Nothing to send: let the retransmission timer fire.
                let (t, ev) = b.q.pop().expect("a timer is armed while data is unacknowledged");
                b.now = t;
                if let Event::Timer(_, kind, gen) = ev {
                    let mut io = Io::default();
                    let mut cx = b.cx();
                    q.on_timer(kind, gen, &mut io, &mut cx);
                }
                continue;
            }
            for p in sent {
                if drop(&p) {
                    continue;
                }
                let io = deliver(&mut b, &mut q, Side::Server, &p);
                if let Some((start, len)) = io.delivered {
                    assert_eq!(start, delivered, "delivered in order, exactly once");
                    delivered += len;
                }
                for a in io.replies {
                    deliver(&mut b, &mut q, Side::Client, &a);
                }
            }
        }
        (q, delivered)
    }

    #[test]
    fn go_back_n_resends_from_the_lost_packet() {
        // 20 packets, packet 5 lost: the NACK sends the requester back to 5, so 5..19 go twice.
        let (q, delivered) = run(Recovery::Gbn, 20_000, &[5]);
        assert!(q.requester.done);
        assert_eq!(delivered, 20_000);
        assert_eq!(q.requester.retransmits, 15, "packets 5 to 19 resent");
        assert!(q.requester.timeouts.is_empty(), "the NACK repaired the loss");
    }

    #[test]
    fn irn_resends_only_the_lost_packet() {
        let (q, delivered) = run(Recovery::Irn, 20_000, &[5, 12]);
        assert!(q.requester.done);
        assert_eq!(delivered, 20_000);
        assert_eq!(q.requester.retransmits, 2, "only packets 5 and 12");
        assert!(q.requester.timeouts.is_empty());
    }

    #[test]
    fn sack_resends_only_the_losses_without_irns_cap_or_low_timeout() {
        let (q, delivered) = run(Recovery::Sack, 20_000, &[5, 12]);
        assert!(q.requester.done);
        assert_eq!(delivered, 20_000);
        assert_eq!(q.requester.retransmits, 2, "only packets 5 and 12");
        // IRN stops at one BDP in flight (100 packets here); SACK does not.
        let mut b = Bench::new();
        let (mut irn, mut sack) = (qp(Recovery::Irn, 1_000_000, EcnMode::Off), qp(Recovery::Sack, 1_000_000, EcnMode::Off));
        assert_eq!(drain(&mut b, &mut irn).len(), 100);
        assert_eq!(drain(&mut b, &mut sack).len(), 1_000);
        // A lost tail waits for the 4 ms timeout, not IRN's 100 us RTO_low.
        let (q, _) = run(Recovery::Sack, 5_000, &[4]);
        let t = &q.requester.timeouts[0];
        assert_eq!(t.fired - t.last_tx, Time::from_ms(4));
    }

    #[test]
    fn a_lost_tail_times_out_and_is_resent() {
        for rec in [Recovery::Gbn, Recovery::Irn, Recovery::Sack] {
            let (q, delivered) = run(rec, 5_000, &[4]);
            assert!(q.requester.done, "{rec:?}");
            assert_eq!(delivered, 5_000);
            assert_eq!(q.requester.timeouts.len(), 1, "{rec:?}: nothing after the tail to reveal its loss");
            assert_eq!(q.requester.retransmits, 1);
        }
    }

    #[test]
    fn tlt_marks_the_last_packet_the_first_retransmission_and_every_nth() {
        let cfg = RdmaConfig::default();
        let route = Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 0, spray: false };
        let mut b = Bench::new();
        let mut q = QueuePair::new(
            &cfg,
            ClassNic::default(),
            Some(RdmaTlt { every: 4, marking: TltMarking::Auto }),
            route,
            Some(10_000),
            Box::new(Fixed(0, EcnMode::Off)),
            Rate::gbps(25),
            100_000,
        );
        let sent = drain(&mut b, &mut q);
        let important: Vec<u64> = sent.iter().filter(|p| p.colour == Colour::Important).map(|p| p.seq / 1000).collect();
        // Every 4th (3, 7) and the last (9).
        assert_eq!(important, vec![3, 7, 9]);
        // A NACK for packet 2 sends the requester back: packet 2 goes important.
        let nack = Packet { ack: 2000, flags: flags::ACK | flags::NACK | flags::REVERSE, ..Packet::default() };
        deliver(&mut b, &mut q, Side::Client, &nack);
        let resent = drain(&mut b, &mut q);
        assert_eq!((resent[0].seq, resent[0].colour), (2000, Colour::Important));
        assert_eq!(resent[1].colour, Colour::Unimportant);
        // ACKs are control packets.
        let io = deliver(&mut b, &mut q, Side::Server, &sent[0]);
        assert_eq!(io.replies[0].colour, Colour::Control);
        assert_eq!(q.tlt_counts().unwrap().important_packets, 3 + important_after(&resent));
    }

    /// A queue pair of `recovery` that marks for TLT as `marking`.
    fn tlt_qp(recovery: Recovery, marking: TltMarking, size: u64) -> QueuePair {
        let cfg = RdmaConfig { recovery, ..RdmaConfig::default() };
        let route = Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 0, spray: false };
        let tlt = Some(RdmaTlt { every: 0, marking });
        QueuePair::new(&cfg, ClassNic::default(), tlt, route, Some(size), Box::new(Fixed(0, EcnMode::Off)), Rate::gbps(25), 100_000)
    }

    #[test]
    fn window_marking_repairs_a_burst_of_colour_drops_without_a_timeout() {
        // A switch past its colour threshold drops the unimportant packets of the first
        // transmission and of the first retransmission, as a still-full port does.
        fn colour_drops() -> impl FnMut(&Packet) -> bool {
            let mut seen = std::collections::HashMap::new();
            move |p: &Packet| {
                let n = seen.entry(p.seq).or_insert(0);
                *n += 1;
                p.colour == Colour::Unimportant && *n <= 2
            }
        }
        let (q, delivered) = run_dropping(tlt_qp(Recovery::Sack, TltMarking::Auto, 10_000), colour_drops());
        assert!(q.requester.done);
        assert_eq!(delivered, 10_000);
        assert!(q.requester.timeouts.is_empty(), "every echo forces the next piece out: {:?}", q.requester.timeouts);
        // Only packet 0 (important) arrives; 1-9 come back one forced full packet per echo (loss
        // is probable each time), and nothing else is resent.
        assert_eq!(q.tlt_counts().unwrap().proactive_retransmissions, 9);
        assert_eq!(q.requester.retransmits, 9);
        // By rate, the last packet's NACK starts one retransmission whose unimportant packets
        // are dropped again, and nothing reveals them but the timeout.
        let (q, delivered) = run_dropping(tlt_qp(Recovery::Sack, TltMarking::Rate, 10_000), colour_drops());
        assert_eq!(delivered, 10_000);
        assert_eq!(q.requester.timeouts.len(), 1);
    }

    #[test]
    fn window_marking_keeps_one_important_packet_in_flight_and_echoes_it() {
        let mut b = Bench::new();
        let mut q = tlt_qp(Recovery::Irn, TltMarking::Auto, 10_000);
        let sent = drain(&mut b, &mut q);
        let colours: Vec<Colour> = sent.iter().map(|p| p.colour).collect();
        assert_eq!(colours[0], Colour::Important, "the first packet, as the TLT simulator's NIC marks it");
        assert!(colours[1..].iter().all(|&c| c == Colour::Unimportant), "{colours:?}");
        // The important packet's ACK is its echo; the others' are control packets.
        let io = deliver(&mut b, &mut q, Side::Server, &sent[0]);
        assert_eq!(io.replies[0].colour, Colour::Echo);
        let io = deliver(&mut b, &mut q, Side::Server, &sent[2]);
        assert_eq!((io.replies[0].has(flags::NACK), io.replies[0].colour), (true, Colour::Control));
        // Go-back-N marks by rate unless asked: the last packet alone.
        let mut g = tlt_qp(Recovery::Gbn, TltMarking::Auto, 10_000);
        let important: Vec<u64> = drain(&mut b, &mut g).iter().filter(|p| p.colour == Colour::Important).map(|p| p.seq).collect();
        assert_eq!(important, vec![9_000]);
    }

    fn important_after(sent: &[Packet]) -> u64 {
        sent.iter().filter(|p| p.colour == Colour::Important).count() as u64
    }

    #[test]
    fn cnps_are_spaced_by_the_interval() {
        let mut b = Bench::new();
        let mut q = qp(Recovery::Gbn, 1_000_000, EcnMode::Classic);
        let mut cnps = 0;
        // 100 CE-marked packets over 99 us: a CNP at 0, 50 and 100 us would need 100 us.
        for i in 0..100u64 {
            b.now = Time::from_us(i);
            let p = Packet { seq: i * 1000, payload: 1000, ecn: Ecn::Ce, ts: b.now, ..Packet::default() };
            let io = deliver(&mut b, &mut q, Side::Server, &p);
            cnps += io.replies.iter().filter(|a| !a.has(flags::ACK) && a.has(flags::ECE)).count();
        }
        assert_eq!(cnps, 2, "at 0 and 50 us");
        assert_eq!(q.responder.cnps, 2);
    }

    #[test]
    fn every_ack_of_a_marked_packet_carries_a_cnp_that_reaches_the_algorithm() {
        // The HPCC simulator's receiver flags each ACK of a CE-marked packet, without pacing.
        let mut b = Bench::new();
        let nic = ClassNic { cnp: CnpMode::EveryAck, ack_priority: AckPriority::Control };
        let cfg = RdmaConfig::default();
        let route = Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 3, spray: false };
        let mut q = QueuePair::new(&cfg, nic, None, route, Some(1_000_000), Box::new(Fixed(0, EcnMode::Classic)), Rate::gbps(25), 100_000);
        let mut flagged = 0;
        for i in 0..10u64 {
            b.now = Time::from_us(i);
            let ecn = if i % 2 == 0 { Ecn::Ce } else { Ecn::Ect };
            let p = Packet { seq: i * 1000, payload: 1000, ecn, ts: b.now, ..Packet::default() };
            let io = deliver(&mut b, &mut q, Side::Server, &p);
            assert_eq!(io.replies.len(), 1, "one ACK per packet and no separate CNP");
            let ack = io.replies[0];
            assert!(ack.has(flags::ACK));
            assert_eq!(ack.prio, CONTROL_PRIO, "ACKs travel ahead of the data");
            assert_eq!(ack.has(flags::ECE), ecn == Ecn::Ce, "packet {i}");
            flagged += ack.has(flags::ECE) as u64;
            deliver(&mut b, &mut q, Side::Client, &ack);
        }
        assert_eq!((flagged, q.responder.cnps), (5, 5));
        assert_eq!(q.requester.cc.state(), vec![("cnps", 5.0)], "each flagged ACK is one CNP to the algorithm");
    }

    #[test]
    fn acks_stay_in_their_class_queue_by_default() {
        let mut b = Bench::new();
        let cfg = RdmaConfig::default();
        let route = Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 3, spray: false };
        let mut q = QueuePair::new(&cfg, ClassNic::default(), None, route, Some(10_000), Box::new(Fixed(0, EcnMode::Classic)), Rate::gbps(25), 100_000);
        let p = Packet { seq: 0, payload: 1000, ecn: Ecn::Ce, ..Packet::default() };
        let io = deliver(&mut b, &mut q, Side::Server, &p);
        assert_eq!(io.replies.len(), 2, "a paced CNP and the ACK");
        assert!(io.replies.iter().all(|r| r.prio == 3));
        assert!(!io.replies.iter().find(|r| r.has(flags::ACK)).unwrap().has(flags::ECE), "the ACK carries no CNP");
    }
}
