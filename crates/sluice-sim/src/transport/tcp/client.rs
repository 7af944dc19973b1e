//! The client end of a TCP connection: the active opener, which sends the data. It owns the
//! SYN and its proposal, decides at the SYN-ACK which algorithm runs (in-band negotiation), sends
//! the data through its [`Sender`] with its pacer and rate limiter, runs the sender's timers, and
//! closes: its FIN rides on the last data byte, it acknowledges the server's FIN and waits out
//! TIME_WAIT. It learns of the server only through the server's packets.

use crate::ids::FlowId;
use super::connection::{IntStacks, Route, State};
use super::{Segment, Sender, TcpConfig};
use crate::cc::negotiation::{negotiate, Negotiation, Offer, Support};
use crate::cc::{CcFactory, EcnMode, FlowContext};
use crate::context::{Cx, Event, TimerKind};
use crate::event::TimerFire;
use crate::transport::pacer::TokenBucket;
use crate::packet::tcp_int::TcpInt;
use crate::packet::{flags, Caps, Colour, Ecn, Packet};
use crate::time::Time;
use crate::transport::Io;

/// What the client decides with when the SYN-ACK arrives.
pub struct Proposal {
    /// What the class's algorithm needs from the peer and the path.
    pub offer: Offer,
    /// The client's stack supports TCP-INT.
    pub local_int: bool,
    /// The algorithm to run instead when the offer fails, and its flow context.
    pub fallback: (CcFactory, FlowContext),
    /// Every flow carries the TCP-INT option when both stacks support it (telemetry).
    pub int_all_flows: bool,
}

/// The client end of a TCP connection.
pub struct TcpClient {
    route: Route,
    /// The data-sending half.
    pub sender: Sender,
    /// The RFC 9293 state.
    pub state: State,
    /// How negotiation ended.
    pub negotiation: Negotiation,
    proposal: Option<Box<Proposal>>,
    int: IntStacks,
    limiter: Option<TokenBucket>,
    handshake: bool,
    time_wait: Time,
    /// Wire bytes of a segment without payload or options.
    bare_frame: u32,
    /// When the client entered TIME_WAIT.
    pub time_wait_since: Option<Time>,
    /// The colour of control packets the client builds itself (the last ACK).
    ctrl_colour: Colour,
    /// The copy of the SYN cookie the SYN-ACK carried, echoed on the client's segments.
    cookie: u32,
    /// Data packets sent, which a sprayed flow's entropy counts by.
    sprayed: u32,
}

/// What a client in TIME_WAIT keeps (Linux's timewait mini-socket): enough to acknowledge a
/// retransmitted FIN, and how long it waits.
pub struct TimeWait {
    /// The acknowledgement it sends, less the numbers taken from the FIN.
    pub ack: Packet,
    /// How long TIME_WAIT lasts from the last FIN.
    pub lasts: Time,
}

impl TcpClient {
    /// A client not yet opened. Without a handshake it starts established with the class's
    /// algorithm as configured ("not_negotiated"), using TCP-INT when both stacks are configured
    /// to; with one, `proposal` decides at the SYN-ACK.
    pub fn new(cfg: &TcpConfig, route: Route, sender: Sender, int: IntStacks, proposal: Proposal, limiter: Option<TokenBucket>) -> TcpClient {
        let mut c = TcpClient {
            route,
            sender,
            state: State::Closed,
            negotiation: Negotiation::NotNegotiated,
            proposal: None,
            int,
            limiter,
            handshake: cfg.handshake,
            time_wait: cfg.time_wait,
            bare_frame: cfg.frame(0),
            sprayed: 0,
            time_wait_since: None,
            ctrl_colour: if cfg.tlt { Colour::Control } else { Colour::Unimportant },
            cookie: 0,
        };
        if c.handshake {
            c.proposal = Some(Box::new(proposal));
        } else {
            // No handshake, no negotiation: both stacks use TCP-INT when both support it.
            let both = proposal.local_int && int.server;
            if both && (proposal.int_all_flows || c.sender.cc_needs_int()) {
                c.sender.enable_int(int.encoding, int.latency_unit);
            }
            if both && c.sender.cc_needs_hop_records() {
                c.sender.enable_hop_records();
            }
            c.state = State::Established;
        }
        c
    }

    /// The client's host takes no part in negotiation (it has no agent): the SYN proposes
    /// nothing and the class's algorithm runs as configured.
    pub fn set_silent(&mut self) {
        self.proposal = None;
    }

    /// Opens the connection: the SYN (or, without a handshake, the data) may go.
    pub fn open(&mut self, io: &mut Io, cx: &mut Cx) {
        if self.handshake {
            self.state = State::SynSent;
        }
        io.activate = true;
        if let Some(iv) = self.sender.cc.tick_interval() {
            cx.schedule(cx.now + iv, Event::Timer(FlowId(self.route.flow), TimerKind::CcTick, 0));
        }
    }

    /// Where the connection's packets go.
    pub fn route(&self) -> Route {
        self.route
    }

    /// True if the client adds options switches rewrite per hop (TCP-INT, HPCC's records).
    pub fn carries_path_options(&self) -> bool {
        self.sender.int_enabled() || self.sender.hop_records_enabled()
    }

    /// The proxy's NIC spliced this connection (the proxy is its client) and has seen the close
    /// go through end to end: every byte has reached the backend, and the client is closed
    /// without a packet of its own.
    pub fn spliced_closed(&mut self, io: &mut Io) {
        io.closed = !self.done();
        self.state = State::Closed;
        self.sender.rto_timer.cancel();
        io.completed = true;
    }

    /// When the pacer and rate limiter let the next segment out.
    #[inline]
    pub fn ready_at(&mut self, now: Time) -> Time {
        let mut ready = self.sender.pace_next;
        // Linux paces a TSO packet as a whole: its frames follow the first unpaced.
        if ready > now && self.sender.mid_tso_packet() {
            ready = now;
        }
        if let Some(tb) = self.limiter.as_mut() {
            ready = ready.max(tb.ready_at(now, self.bare_frame as u64 + self.sender.win.mss));
        }
        ready
    }

    /// True if the client could send something now, ignoring pacing.
    #[inline]
    pub fn has_sendable(&self) -> bool {
        self.sender.has_sendable()
    }

    /// The next segment as a packet, with the per-transmission bookkeeping.
    pub fn next_packet(&mut self, cx: &mut Cx) -> Option<Packet> {
        let now = cx.now;
        let continuing = self.sender.win.pacing_rate.is_some() && self.sender.mid_tso_packet();
        let seg = self.sender.next_segment(now)?;
        let pkt = self.segment_packet(seg, cx);
        if seg.len > 0 {
            cx.counters.data_packets += 1;
        }
        if seg.flags & flags::FIN != 0 && self.state == State::Established {
            self.state = State::FinWait1;
        }
        let s = &mut self.sender;
        if let Some(rate) = s.win.pacing_rate {
            // A TSO packet's frames add up to its pacing delay, counted from its first
            // (tcp_update_skb_after_send: the next departure moves on by the packet's length).
            let from = if continuing { s.pace_next } else { now };
            s.pace_next = from + rate.tx_time(pkt.wire_bytes as u64);
        }
        if let Some(tb) = self.limiter.as_mut() {
            tb.consume(now, pkt.wire_bytes as u64);
        }
        // A probe restarts the RTO (RFC 8985, 7.3): the timeout follows an unanswered probe.
        let probe = s.tlp.as_ref().is_some_and(|t| !t.may_arm()) && s.rto_timer.deadline().is_some_and(|d| d < now + s.rtt.rto());
        if s.rto_timer.deadline().is_none() || probe {
            let at = now + s.rtt.rto();
            if let Some((t, gen)) = s.rto_timer.arm(at) {
                cx.schedule(t, Event::Timer(FlowId(self.route.flow), TimerKind::Rto, gen));
            }
        }
        self.arm_probe(cx);
        Some(pkt)
    }

    /// Starts, moves or stops the Tail Loss Probe timer after a transmission or an ACK.
    fn arm_probe(&mut self, cx: &mut Cx) {
        let s = &mut self.sender;
        let Some(pto) = s.probe_timeout() else {
            if let Some(t) = s.tlp.as_mut() {
                t.timer.cancel();
            }
            return;
        };
        if let Some((t, gen)) = s.tlp.as_mut().and_then(|t| t.timer.arm(cx.now + pto)) {
            cx.schedule(t, Event::Timer(FlowId(self.route.flow), TimerKind::LossProbe, gen));
        }
    }

    /// Turns a sender's segment into a packet: options, the ECN codepoint, negotiation bits.
    fn segment_packet(&mut self, seg: Segment, cx: &mut Cx) -> Packet {
        let hash = if self.route.spray && seg.len > 0 { self.entropy() } else { self.route.hash_fwd };
        let s = &self.sender;
        let int = s.int_enabled().then(TcpInt::default);
        let mut wire_bytes = self.bare_frame + seg.len as u32 + if int.is_some() { crate::packet::tcp_int::LEN as u32 } else { 0 };
        let mut hops = None;
        if s.hop_records_enabled() {
            wire_bytes += crate::packet::hpcc_int::HEADER_BYTES;
            if seg.len > 0 {
                hops = Some(cx.hops.alloc());
            }
        }
        let mut caps = Caps::default();
        let syn = seg.flags & flags::SYN != 0;
        if let (true, Some(p)) = (syn, self.proposal.as_deref()) {
            caps.set(Caps::PROPOSED);
            caps.set(Caps::PATH_ALL_INT);
            caps.set(Caps::PATH_ECN);
            caps.set(p.offer.wants());
            if p.int_all_flows {
                caps.set(Caps::WANTS_INT);
            }
        }
        if !syn && s.ecn_mode() == EcnMode::PerPacket {
            caps.set(Caps::ECHO_EACH_MARK);
        }
        Packet {
            seq: seg.seq,
            payload: seg.len as u32,
            wire_bytes,
            flags: seg.flags,
            ecn: if s.ecn_mode() == EcnMode::Off || syn { Ecn::NotEct } else { Ecn::Ect },
            ts: cx.now,
            int,
            hops,
            caps,
            cookie: self.cookie,
            colour: seg.colour,
            hash,
            ..self.route.forward()
        }
    }

    /// A sprayed flow's next data packet's ECMP hash.
    #[cold]
    fn entropy(&mut self) -> u32 {
        let n = self.sprayed;
        self.sprayed = n.wrapping_add(1);
        self.route.entropy(n)
    }

    /// Takes a packet from the server; `io.closed` if that closed the client.
    pub fn on_packet(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        let was = self.done();
        self.segment(pkt, io, cx);
        io.closed = !was && self.done();
    }

    /// Runs one of the client's timers; `io.closed` if that closed the client.
    pub fn on_timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
        let was = self.done();
        self.timer(kind, gen, io, cx);
        io.closed = !was && self.done();
    }

    /// Takes a packet from the server.
    fn segment(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        let was_time_wait = self.state == State::TimeWait;
        if self.state == State::SynSent && pkt.has(flags::SYN) && pkt.has(flags::ACK) {
            self.decide(pkt.caps);
            self.cookie = pkt.cookie;
            self.state = State::Established;
        }
        if self.sender.phase != super::Phase::Done || pkt.has(flags::SYN) {
            let out = match pkt.hops {
                None => self.sender.on_ack(pkt, now),
                Some(hi) => {
                    let out = self.sender.on_ack_with_hops(pkt, Some(cx.hops.get(hi)), now);
                    cx.hops.free(hi);
                    out
                }
            };
            io.echo = pkt.int.is_some() && self.sender.last_echo.is_some();
            if out.completed {
                io.completed = true;
            } else {
                let s = &mut self.sender;
                if !s.needs_timer() {
                    s.rto_timer.cancel();
                } else if out.una_advanced || s.rto_timer.deadline().is_none() {
                    if let Some((t, gen)) = s.rto_timer.arm(now + s.rtt.rto()) {
                        cx.schedule(t, Event::Timer(FlowId(self.route.flow), TimerKind::Rto, gen));
                    }
                }
                io.activate |= out.may_send;
                self.arm_probe(cx);
            }
        } else if let Some(hi) = pkt.hops {
            cx.hops.free(hi);
        }
        if !self.handshake {
            if io.completed {
                self.state = State::Closed;
            }
            return;
        }
        io.interim |= pkt.payload > 0 && !pkt.has(flags::FIN);
        let fin_acked = self.sender.size().is_some_and(|s| pkt.has(flags::ACK) && pkt.ack > s);
        if fin_acked {
            self.state = match self.state {
                State::FinWait1 => State::FinWait2,
                State::Closing => State::TimeWait,
                s => s,
            };
            if self.state == State::TimeWait && self.time_wait_since.is_none() {
                self.time_wait_since = Some(now);
            }
        }
        if pkt.has(flags::FIN) {
            // Acknowledge the server's FIN; wait out TIME_WAIT (again, for a retransmitted FIN).
            let ack = Packet {
                seq: self.sender.nxt + 1,
                ack: pkt.seq + pkt.payload as u64 + 1,
                flags: flags::ACK,
                ts: now,
                ts_echo: pkt.ts,
                wire_bytes: self.bare_frame,
                colour: self.ctrl_colour,
                ..self.route.forward()
            };
            io.replies.push(ack);
            // The response rides on the FIN; a retransmitted FIN brings it again.
            io.response = matches!(self.state, State::FinWait1 | State::FinWait2);
            self.state = match self.state {
                State::FinWait2 | State::TimeWait => State::TimeWait,
                _ => State::Closing,
            };
            if self.state == State::TimeWait {
                self.time_wait_since = Some(now);
            }
        }
        // The client's close is done (its FIN acknowledged, the server's answered): destroying
        // the TCB is work for a host whose CPU is modelled.
        io.work.teardown |= self.state == State::TimeWait && !was_time_wait;
    }

    /// True once the client has nothing left to receive: it waits out TIME_WAIT, or is closed.
    pub fn done(&self) -> bool {
        matches!(self.state, State::TimeWait | State::Closed)
    }

    /// Whether the connection opens and closes with a handshake.
    pub fn handshake(&self) -> bool {
        self.handshake
    }

    /// What the client keeps while it waits out TIME_WAIT, if it does.
    pub fn time_wait(&self) -> Option<TimeWait> {
        (self.state == State::TimeWait).then(|| TimeWait {
            ack: Packet {
                seq: self.sender.nxt + 1,
                flags: flags::ACK,
                wire_bytes: self.bare_frame,
                colour: self.ctrl_colour,
                ..self.route.forward()
            },
            lasts: self.time_wait,
        })
    }

    /// When the client is fully closed: the end of its TIME_WAIT.
    pub fn closes_at(&self) -> Option<Time> {
        self.time_wait_since.map(|t| t + self.time_wait)
    }

    /// Decides from the SYN-ACK whether the class's algorithm runs. A fallback's ECN mode
    /// reaches the server on the client's segments ([`Caps::ECHO_EACH_MARK`]).
    fn decide(&mut self, answer: Caps) {
        let Some(p) = self.proposal.take() else { return };
        let support = Support {
            answered: answer.has(Caps::ANSWERED),
            local_int: p.local_int,
            peer_int: answer.has(Caps::PEER_INT),
            path_int: answer.has(Caps::PATH_ANY_INT),
            path_all_int: answer.has(Caps::PATH_ALL_INT),
            path_ecn: answer.has(Caps::PATH_ECN),
        };
        self.negotiation = negotiate(p.offer, support);
        let (factory, ctx) = &p.fallback;
        let fallback = (self.negotiation != Negotiation::Accepted).then(|| factory(ctx));
        // A class whose fallback is the same algorithm keeps the instance it started with.
        if let Some(cc) = fallback.filter(|cc| cc.name() != self.sender.cc_name()) {
            self.sender.replace_cc(cc);
        }
        let both = support.local_int && support.peer_int;
        if both && (p.int_all_flows || self.sender.cc_needs_int()) {
            self.sender.enable_int(self.int.encoding, self.int.latency_unit);
        }
        if both && self.sender.cc_needs_hop_records() {
            self.sender.enable_hop_records();
        }
    }

    /// Runs one of the client's timers (retransmission, loss probe, the algorithm's tick).
    fn timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        let flow = self.route.flow;
        match kind {
            TimerKind::Rto => match self.sender.rto_timer.fire(now, gen) {
                TimerFire::Stale => {}
                TimerFire::Reschedule(t, g) => cx.schedule(t, Event::Timer(FlowId(flow), TimerKind::Rto, g)),
                TimerFire::Expired => {
                    if self.sender.needs_timer() {
                        self.sender.on_timeout(now);
                        io.activate = true;
                    }
                }
            },
            TimerKind::LossProbe => {
                let Some(t) = self.sender.tlp.as_mut() else { return };
                match t.timer.fire(now, gen) {
                    TimerFire::Stale => {}
                    TimerFire::Reschedule(at, g) => cx.schedule(at, Event::Timer(FlowId(flow), TimerKind::LossProbe, g)),
                    TimerFire::Expired => {
                        self.sender.on_probe_timer();
                        io.activate = true;
                    }
                }
            }
            TimerKind::CcTick => {
                let s = &mut self.sender;
                if s.phase == super::Phase::Done {
                    return;
                }
                s.cc.on_tick(now, &mut s.win);
                if let Some(iv) = s.cc.tick_interval() {
                    cx.schedule(now + iv, Event::Timer(FlowId(flow), TimerKind::CcTick, 0));
                }
                io.activate = true;
            }
            TimerKind::DelayedAck | TimerKind::PeerRto | TimerKind::TimeWait | TimerKind::PeerClosed => {}
        }
    }
}
