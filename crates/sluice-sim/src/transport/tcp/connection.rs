//! A TCP connection as one element with both of its ends: the client (the active opener, which
//! sends the data) and the server (which receives it), each with its RFC 9293 state. It owns the
//! handshake with in-band negotiation (the SYN proposes, switches mark what the path offers, the
//! SYN-ACK answers, the client decides), the data path through its [`Sender`] and [`Receiver`],
//! the close in both directions, and its timers.
//!
//! Sequence numbers are byte offsets of the data from 0; the SYN takes none, each FIN takes one
//! (the client's FIN is byte `size`; the server's follows its response, byte `response` of its own
//! direction).
//!
//! A host's NIC may carry out parts of the server's side (AccelTCP, `host/offload.rs`): answer
//! the SYN statelessly with a cookie ([`TcpConnection::syn_ack`], then
//! [`TcpConnection::accept_verified`]), and own the close once the application answered
//! ([`TcpConnection::hand_over_close`], [`TcpConnection::nic_closed`]).

use super::{AckPlan, Receiver, Segment, Sender, TcpConfig};
use crate::cc::negotiation::{negotiate, Negotiation, Offer, Support};
use crate::cc::{CcFactory, EcnMode, FlowContext};
use crate::context::{Cx, Event, TimerKind};
use crate::event::{TimerFire, TimerSlot};
use crate::host::pacer::TokenBucket;
use crate::packet::tcp_int::{IntEncoding, TcpInt};
use crate::packet::{flags, Caps, Colour, Ecn, Packet, INITIAL_TTL};
use crate::time::Time;
use crate::transport::{Io, Side};

/// One end's state (RFC 9293, section 3.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// No connection.
    Closed,
    /// The server waits for a SYN.
    Listen,
    /// The client sent its SYN.
    SynSent,
    /// The server answered a SYN.
    SynReceived,
    /// Open.
    Established,
    /// The client sent its FIN.
    FinWait1,
    /// The client's FIN is acknowledged; it waits for the server's.
    FinWait2,
    /// Both FINs were sent and the client's is not yet acknowledged.
    Closing,
    /// The client acknowledged the server's FIN and waits out stray segments.
    TimeWait,
    /// The server received the client's FIN.
    CloseWait,
    /// The server sent its FIN and waits for its acknowledgement.
    LastAck,
}

/// Where a connection's packets go.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    /// Flow id.
    pub flow: u32,
    /// Client host.
    pub src: u32,
    /// Server host.
    pub dst: u32,
    /// ECMP hash of client-to-server packets.
    pub hash_fwd: u32,
    /// ECMP hash of server-to-client packets.
    pub hash_rev: u32,
    /// Switch priority queue.
    pub prio: u8,
}

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

/// The TCP-INT settings of both stacks.
#[derive(Clone, Copy, Debug)]
pub struct IntStacks {
    /// INTval encoding and latency unit senders decode echoes with.
    pub encoding: IntEncoding,
    /// Unit of the latency fields.
    pub latency_unit: Time,
    /// The server's stack supports TCP-INT.
    pub server: bool,
}

/// How many times the server sends its FIN before it gives up (Linux `tcp_orphan_retries`).
const FIN_TRIES: u32 = 8;

/// A TCP connection.
pub struct TcpConnection {
    route: Route,
    /// The client's data-sending half.
    pub sender: Sender,
    /// The server's data-receiving half.
    pub receiver: Receiver,
    /// The client's state.
    pub client: State,
    /// The server's state.
    pub server: State,
    /// How negotiation ended.
    pub negotiation: Negotiation,
    proposal: Option<Box<Proposal>>,
    int: IntStacks,
    limiter: Option<TokenBucket>,
    handshake: bool,
    time_wait: Time,
    /// Wire bytes of a segment without payload or options.
    bare_frame: u32,
    /// The client's FIN position, once the server has seen it.
    fin_at: Option<u64>,
    /// The server's FIN retransmission timer and attempts.
    fin_timer: TimerSlot,
    fin_tries: u32,
    fin_rto: Time,
    /// When the client entered TIME_WAIT.
    pub time_wait_since: Option<Time>,
    /// The colour of control packets the connection builds itself (SYN-ACK, FINs, the last ACK).
    ctrl_colour: Colour,
    /// Bytes the server's application answers with, on its FIN (a request/response transaction).
    response: u32,
    /// The client's copy of the SYN cookie its SYN-ACK carried, echoed on its segments.
    cookie: u32,
    /// The server's stack creates a quasi-TCB at the handshake (AccelTCP's lazy TCB).
    lazy_tcb: bool,
    /// The server holds only a quasi-TCB so far.
    quasi: bool,
}

impl TcpConnection {
    /// A connection not yet opened. Without a handshake it starts established with the class's
    /// algorithm as configured ("not_negotiated"); with one, `proposal` decides at the SYN-ACK.
    pub fn new(
        cfg: &TcpConfig,
        route: Route,
        sender: Sender,
        int: IntStacks,
        proposal: Proposal,
        limiter: Option<TokenBucket>,
    ) -> TcpConnection {
        let receiver = Receiver::new(cfg, sender.ecn_mode());
        let mut c = TcpConnection {
            route,
            sender,
            receiver,
            client: State::Closed,
            server: State::Listen,
            negotiation: Negotiation::NotNegotiated,
            proposal: None,
            int,
            limiter,
            handshake: cfg.handshake,
            time_wait: cfg.time_wait,
            bare_frame: cfg.frame(0),
            fin_at: None,
            fin_timer: TimerSlot::default(),
            fin_tries: 0,
            fin_rto: cfg.rto_init.max(cfg.rto_min),
            time_wait_since: None,
            ctrl_colour: if cfg.tlt { Colour::Control } else { Colour::Unimportant },
            response: 0,
            cookie: 0,
            lazy_tcb: false,
            quasi: false,
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
            c.client = State::Established;
            c.server = State::Established;
        }
        c
    }

    /// Opens the connection: the SYN (or, without a handshake, the data) may go.
    pub fn open(&mut self, io: &mut Io, cx: &mut Cx) {
        if self.handshake {
            self.client = State::SynSent;
        }
        io.activate = true;
        if let Some(iv) = self.sender.cc.tick_interval() {
            cx.schedule(cx.now + iv, Event::Timer(self.route.flow, TimerKind::CcTick, 0));
        }
    }

    /// Makes the connection one request/response transaction: the server answers the request
    /// with `bytes` on its FIN (at most one segment, checked by the scenario).
    pub fn set_response(&mut self, bytes: u32) {
        self.response = bytes;
    }

    /// The SYN-ACK answering `syn`, carrying `cookie`, without any state: what a NIC that
    /// answers SYNs with cookies sends.
    pub fn syn_ack(&self, syn: &Packet, cookie: u32) -> Packet {
        let mut syn_ack = self.server_ctrl(flags::SYN | flags::ACK, 0, 0);
        syn_ack.ts_echo = syn.ts;
        syn_ack.cookie = cookie;
        // The answer: what the path offered, and what this stack supports.
        syn_ack.caps = Caps(syn.caps.0 & !(Caps::WANTS_INT | Caps::WANTS_HOP_RECORDS | Caps::WANTS_ECN));
        if self.int.server {
            syn_ack.caps.set(Caps::PEER_INT);
        }
        syn_ack
    }

    /// True while the server has no state for this connection (it has not seen the SYN, or its
    /// NIC answered it).
    pub fn server_listening(&self) -> bool {
        self.server == State::Listen
    }

    /// The NIC verified the cookie on the handshake's ACK: the server's stack takes the
    /// connection as if it had answered the SYN itself.
    pub fn accept_verified(&mut self) {
        if self.server == State::Listen {
            self.server = State::SynReceived;
        }
    }

    /// The server's NIC takes over the close the application just made (its FIN is sent, and
    /// the NIC retransmits it): the connection drops its own FIN timer.
    pub fn hand_over_close(&mut self) {
        if self.server == State::LastAck {
            self.fin_timer.cancel();
        }
    }

    /// The server's NIC finished the close it took over (its FIN was acknowledged, or it gave
    /// up): the server is closed.
    pub fn nic_closed(&mut self, io: &mut Io) {
        if self.server == State::LastAck {
            self.server = State::Closed;
            self.check_closed(io);
        }
    }

    /// The server's stack creates a small quasi-TCB when the handshake completes and the full
    /// TCB only when a second request arrives (AccelTCP's lazy TCB, for connections that carry
    /// one transaction).
    pub fn set_lazy_tcb(&mut self) {
        self.lazy_tcb = true;
    }

    /// Where the connection's packets go.
    pub fn route(&self) -> Route {
        self.route
    }

    /// True if either end adds options switches rewrite per hop (TCP-INT, HPCC's records).
    pub fn carries_path_options(&self) -> bool {
        self.sender.int_enabled() || self.sender.hop_records_enabled()
    }

    /// The proxy's NIC spliced this connection to another and has seen the close go through end
    /// to end: the proxy host's end (`side`) is closed without a packet of its own. On the
    /// backend connection (the proxy is its client) every byte has reached the backend.
    pub fn spliced_closed(&mut self, side: Side, io: &mut Io) {
        match side {
            Side::Server => {
                self.server = State::Closed;
                self.receiver.delack_timer.cancel();
            }
            Side::Client => {
                self.client = State::Closed;
                self.sender.rto_timer.cancel();
                io.completed = true;
            }
        }
        self.check_closed(io);
    }

    /// The server's interim response of `bytes` before its FIN (a proxy's `100 Continue`),
    /// acknowledging what it has received.
    pub fn interim_response(&self, bytes: u32) -> Packet {
        let mut p = self.server_ctrl(flags::ACK, 0, self.receiver.rcv_nxt);
        p.payload = bytes;
        p.wire_bytes += bytes;
        p
    }

    /// True when the client's segment `pkt` acknowledges the server's FIN.
    pub fn acks_server_fin(&self, pkt: &Packet) -> bool {
        pkt.has(flags::ACK) && pkt.ack > self.response as u64
    }

    /// When the pacer and rate limiter let the next segment out.
    #[inline]
    pub fn ready_at(&mut self, now: Time) -> Time {
        let mut ready = self.sender.pace_next;
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

    /// The client's next segment as a packet, with the per-transmission bookkeeping.
    pub fn next_packet(&mut self, cx: &mut Cx) -> Option<Packet> {
        let now = cx.now;
        let seg = self.sender.next_segment(now)?;
        let pkt = self.segment_packet(seg, cx);
        if seg.len > 0 {
            cx.counters.data_packets += 1;
        }
        if seg.flags & flags::FIN != 0 && self.client == State::Established {
            self.client = State::FinWait1;
        }
        let s = &mut self.sender;
        if let Some(rate) = s.win.pacing_rate {
            s.pace_next = now + rate.tx_time(pkt.wire_bytes as u64);
        }
        if let Some(tb) = self.limiter.as_mut() {
            tb.consume(now, pkt.wire_bytes as u64);
        }
        // A probe restarts the RTO (RFC 8985, 7.3): the timeout follows an unanswered probe.
        let probe = s.tlp.as_ref().is_some_and(|t| !t.may_arm()) && s.rto_timer.deadline().is_some_and(|d| d < now + s.rtt.rto());
        if s.rto_timer.deadline().is_none() || probe {
            let at = now + s.rtt.rto();
            if let Some((t, gen)) = s.rto_timer.arm(at) {
                cx.schedule(t, Event::Timer(self.route.flow, TimerKind::Rto, gen));
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
            cx.schedule(t, Event::Timer(self.route.flow, TimerKind::LossProbe, gen));
        }
    }

    /// Turns a sender's segment into a packet: options, the ECN codepoint, negotiation bits.
    fn segment_packet(&mut self, seg: Segment, cx: &mut Cx) -> Packet {
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
        if let (true, Some(p)) = (seg.flags & flags::SYN != 0, self.proposal.as_deref()) {
            caps.set(Caps::PATH_ALL_INT);
            caps.set(Caps::PATH_ECN);
            if p.offer.needs_int || p.int_all_flows {
                caps.set(Caps::WANTS_INT);
            }
            if p.offer.needs_hop_records {
                caps.set(Caps::WANTS_HOP_RECORDS);
            }
            if p.offer.needs_ecn {
                caps.set(Caps::WANTS_ECN);
            }
        }
        let r = self.route;
        Packet {
            flow: r.flow,
            src: r.src,
            dst: r.dst,
            hash: r.hash_fwd,
            seq: seg.seq,
            payload: seg.len as u32,
            wire_bytes,
            flags: seg.flags,
            ecn: if s.ecn_mode() == EcnMode::Off || seg.flags & flags::SYN != 0 { Ecn::NotEct } else { Ecn::Ect },
            ttl: INITIAL_TTL,
            prio: r.prio,
            ts: cx.now,
            int,
            hops,
            caps,
            cookie: self.cookie,
            colour: seg.colour,
            ..Packet::default()
        }
    }

    /// Takes a packet arriving at `side`'s host.
    pub fn on_packet(&mut self, side: Side, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        match side {
            Side::Server => self.server_receive(pkt, io, cx),
            Side::Client => self.client_receive(pkt, io, cx),
        }
    }

    /// A control packet from the server to the client (SYN-ACK, FIN).
    fn server_ctrl(&self, flags: u8, seq: u64, ack: u64) -> Packet {
        let r = self.route;
        Packet {
            flow: r.flow,
            src: r.dst,
            dst: r.src,
            hash: r.hash_rev,
            seq,
            ack,
            flags: flags | flags::REVERSE,
            ttl: INITIAL_TTL,
            prio: r.prio,
            wire_bytes: self.bare_frame,
            colour: self.ctrl_colour,
            ..Packet::default()
        }
    }

    fn server_receive(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        if pkt.is_syn() {
            if matches!(self.server, State::Listen | State::SynReceived) {
                io.work.setup = self.server == State::Listen;
                self.server = State::SynReceived;
                io.replies.push(self.syn_ack(pkt, 0));
            }
            return;
        }
        if self.server == State::SynReceived {
            self.server = State::Established;
            self.quasi = self.lazy_tcb;
            io.work.accepted = !self.quasi;
            io.work.quasi_tcb = self.quasi;
        }
        if self.server == State::LastAck {
            if self.acks_server_fin(pkt) {
                self.server = State::Closed;
                self.fin_timer.cancel();
                io.work.teardown = true;
                self.check_closed(io);
            }
            return;
        }
        if pkt.payload == 0 && !pkt.has(flags::FIN) {
            return;
        }
        // The server echoes what the client's data carries once it sees it.
        if pkt.int.is_some() && self.receiver.int_echo.is_none() && self.int.server {
            self.receiver.int_echo = Some(None);
        }
        if pkt.hops.is_some() {
            self.receiver.hop_records = true;
        }
        let (early, plan, delivered) = self.receiver.on_segment(pkt, now);
        if delivered.1 > 0 {
            io.delivered = Some(delivered);
            if self.quasi && delivered.0 > 0 {
                // Data beyond the first segment: more than one transaction, so a full TCB now.
                self.quasi = false;
                io.work.accepted = true;
            }
        }
        if pkt.has(flags::FIN) {
            self.fin_at = Some(pkt.seq + pkt.payload as u64);
        }
        let r = self.route;
        let template = Packet { flow: r.flow, src: r.src, dst: r.dst, prio: r.prio, ..Packet::default() };
        if let Some(mut a) = early {
            // The early ACK covers the earlier segments: it echoes their records.
            a.hops = self.receiver.hops_held.take();
            a.hash = r.hash_rev;
            io.replies.push(a);
        }
        if let Some(stale) = pkt.hops.and_then(|new| self.receiver.hops_held.replace(new)) {
            // Delayed ACK: only the latest segment's records are echoed.
            cx.hops.free(stale);
        }
        let fin_in_order = self.fin_at == Some(self.receiver.rcv_nxt) && self.server == State::Established;
        match plan {
            AckPlan::Now => {
                let mut a = self.receiver.build_ack(&template);
                a.hops = self.receiver.hops_held.take();
                a.hash = r.hash_rev;
                if fin_in_order {
                    // Every byte and the FIN are in: the application has read the stream,
                    // answers (a transaction's response) and closes, so the ACK of the FIN
                    // carries the response and the server's own FIN.
                    a.ack += 1;
                    a.flags |= flags::FIN;
                    a.payload = self.response;
                    a.wire_bytes += self.response;
                    self.server = State::LastAck;
                    io.work.answered = true;
                    self.arm_fin_timer(cx);
                }
                io.replies.push(a);
            }
            AckPlan::Delay(at) => {
                if self.receiver.delack_timer.deadline().is_none() {
                    if let Some((t, gen)) = self.receiver.delack_timer.arm(at) {
                        cx.schedule(t, Event::Timer(r.flow, TimerKind::DelayedAck, gen));
                    }
                }
            }
        }
    }

    /// The server's FIN|ACK with its response, as first sent and as retransmitted.
    pub fn server_fin(&self) -> Packet {
        let mut fin_ack = self.server_ctrl(flags::FIN | flags::ACK, 0, self.receiver.rcv_nxt + 1);
        fin_ack.payload = self.response;
        fin_ack.wire_bytes += self.response;
        fin_ack
    }

    fn arm_fin_timer(&mut self, cx: &mut Cx) {
        let at = cx.now + Time(self.fin_rto.0.saturating_mul(1 << self.fin_tries.min(16)));
        if let Some((t, gen)) = self.fin_timer.arm(at) {
            cx.schedule(t, Event::Timer(self.route.flow, TimerKind::PeerRto, gen));
        }
    }

    fn client_receive(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        let was_time_wait = self.client == State::TimeWait;
        if self.client == State::SynSent && pkt.has(flags::SYN) && pkt.has(flags::ACK) {
            self.decide(pkt.caps);
            self.cookie = pkt.cookie;
            self.client = State::Established;
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
                        cx.schedule(t, Event::Timer(self.route.flow, TimerKind::Rto, gen));
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
                self.client = State::Closed;
                self.server = State::Closed;
                io.closed = true;
            }
            return;
        }
        io.interim |= pkt.payload > 0 && !pkt.has(flags::FIN);
        let fin_acked = self.sender.size().is_some_and(|s| pkt.has(flags::ACK) && pkt.ack > s);
        if fin_acked {
            self.client = match self.client {
                State::FinWait1 => State::FinWait2,
                State::Closing => State::TimeWait,
                s => s,
            };
            if self.client == State::TimeWait && self.time_wait_since.is_none() {
                self.time_wait_since = Some(now);
            }
        }
        if pkt.has(flags::FIN) {
            // Acknowledge the server's FIN; wait out TIME_WAIT (again, for a retransmitted FIN).
            let r = self.route;
            let ack = Packet {
                flow: r.flow,
                src: r.src,
                dst: r.dst,
                hash: r.hash_fwd,
                seq: self.sender.nxt + 1,
                ack: pkt.seq + pkt.payload as u64 + 1,
                flags: flags::ACK,
                ttl: INITIAL_TTL,
                prio: r.prio,
                ts: now,
                ts_echo: pkt.ts,
                wire_bytes: self.bare_frame,
                colour: self.ctrl_colour,
                ..Packet::default()
            };
            io.replies.push(ack);
            // The response rides on the FIN; a retransmitted FIN brings it again.
            io.response = matches!(self.client, State::FinWait1 | State::FinWait2);
            self.client = match self.client {
                State::FinWait2 | State::TimeWait => State::TimeWait,
                _ => State::Closing,
            };
            if self.client == State::TimeWait {
                self.time_wait_since = Some(now);
            }
        }
        // The client's close is done (its FIN acknowledged, the server's answered): destroying
        // the TCB is work for a host whose CPU is modelled.
        io.work.teardown |= self.client == State::TimeWait && !was_time_wait;
        self.check_closed(io);
    }

    /// The connection is done once the server closed and the client waits out TIME_WAIT: no
    /// packet can reach it any more (the server retransmits nothing once closed).
    fn check_closed(&mut self, io: &mut Io) {
        if self.server == State::Closed && matches!(self.client, State::TimeWait | State::Closed) {
            io.closed = true;
        }
    }

    /// When the connection is fully closed: the end of the client's TIME_WAIT.
    pub fn closes_at(&self) -> Option<Time> {
        self.time_wait_since.map(|t| t + self.time_wait)
    }

    /// The client decides from the SYN-ACK whether its class's algorithm runs.
    fn decide(&mut self, answer: Caps) {
        let Some(p) = self.proposal.take() else { return };
        let support = Support {
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
            // The client's data now tells the server how to echo marks.
            self.receiver.set_ecn_mode(self.sender.ecn_mode());
        }
        let both = support.local_int && support.peer_int;
        if both && (p.int_all_flows || self.sender.cc_needs_int()) {
            self.sender.enable_int(self.int.encoding, self.int.latency_unit);
        }
        if both && self.sender.cc_needs_hop_records() {
            self.sender.enable_hop_records();
        }
    }

    /// Runs one of the connection's timers.
    pub fn on_timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        let flow = self.route.flow;
        match kind {
            TimerKind::Rto => match self.sender.rto_timer.fire(now, gen) {
                TimerFire::Stale => {}
                TimerFire::Reschedule(t, g) => cx.schedule(t, Event::Timer(flow, TimerKind::Rto, g)),
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
                    TimerFire::Reschedule(at, g) => cx.schedule(at, Event::Timer(flow, TimerKind::LossProbe, g)),
                    TimerFire::Expired => {
                        self.sender.on_probe_timer();
                        io.activate = true;
                    }
                }
            }
            TimerKind::DelayedAck => {
                if self.receiver.delack_timer.fire(now, gen) != TimerFire::Expired || !self.receiver.has_unacked() {
                    return;
                }
                let r = self.route;
                let template = Packet { flow, src: r.src, dst: r.dst, prio: r.prio, ..Packet::default() };
                let mut a = self.receiver.build_ack(&template);
                a.hops = self.receiver.hops_held.take();
                a.hash = r.hash_rev;
                io.replies.push(a);
            }
            TimerKind::CcTick => {
                let s = &mut self.sender;
                if s.phase == super::Phase::Done {
                    return;
                }
                s.cc.on_tick(now, &mut s.win);
                if let Some(iv) = s.cc.tick_interval() {
                    cx.schedule(now + iv, Event::Timer(flow, TimerKind::CcTick, 0));
                }
                io.activate = true;
            }
            TimerKind::PeerRto => match self.fin_timer.fire(now, gen) {
                TimerFire::Stale => {}
                TimerFire::Reschedule(t, g) => cx.schedule(t, Event::Timer(flow, TimerKind::PeerRto, g)),
                TimerFire::Expired => {
                    if self.server != State::LastAck {
                        return;
                    }
                    self.fin_tries += 1;
                    if self.fin_tries >= FIN_TRIES {
                        // The client is gone: give up, as Linux does after its orphan retries.
                        self.server = State::Closed;
                        self.check_closed(io);
                        return;
                    }
                    io.replies.push(self.server_fin());
                    self.arm_fin_timer(cx);
                }
            },
            TimerKind::TimeWait => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Bench;
    use crate::time::Rate;

    impl Bench {
        /// Moves the clock past `dt`.
        fn later(&mut self, dt: Time) {
            self.now += dt;
        }
        /// Gives `pkt` to `side` and returns what the connection reported.
        fn deliver(&mut self, c: &mut TcpConnection, side: Side, pkt: &Packet) -> Io {
            let mut io = Io::default();
            c.on_packet(side, pkt, &mut io, &mut self.cx());
            io
        }
        /// Runs pending timers of `kind` at their times until one acts (stale ones do nothing).
        fn fire(&mut self, c: &mut TcpConnection, kind: TimerKind) -> Io {
            loop {
                let (t, ev) = self.q.pop().expect("a pending timer");
                if let Event::Timer(_, k, gen) = ev {
                    if k == kind {
                        self.now = t;
                        let server = c.server;
                        let mut io = Io::default();
                        c.on_timer(k, gen, &mut io, &mut self.cx());
                        if io.activate || !io.replies.is_empty() || c.server != server {
                            return io;
                        }
                    }
                }
            }
        }
    }

    fn connection(size: u64) -> TcpConnection {
        let cfg = TcpConfig { handshake: true, time_wait: Time::from_us(50), ..TcpConfig::default() };
        let ctx = FlowContext { mss: cfg.mss(), init_cwnd: 10 * cfg.mss(), link_rate: Rate::gbps(10), base_rtt: Time::from_us(10) };
        let reno = crate::cc::factory("newreno", &toml::Table::new()).unwrap();
        let sender = Sender::new(&cfg, Some(size), reno(&ctx));
        let route = Route { flow: 0, src: 0, dst: 1, hash_fwd: 1, hash_rev: 2, prio: 0 };
        let int = IntStacks { encoding: IntEncoding::default(), latency_unit: Time(1000), server: false };
        let offer = Offer { needs_int: false, needs_ecn: false, needs_hop_records: false };
        let proposal = Proposal { offer, local_int: false, fallback: (reno, ctx), int_all_flows: false };
        TcpConnection::new(&cfg, route, sender, int, proposal, None)
    }

    /// Opens a connection through its handshake and sends its one data segment, which carries
    /// the client's FIN; returns that segment.
    fn open_and_send(b: &mut Bench, c: &mut TcpConnection) -> Packet {
        let mut io = Io::default();
        c.open(&mut io, &mut b.cx());
        assert_eq!(c.client, State::SynSent);
        let syn = c.next_packet(&mut b.cx()).unwrap();
        assert!(syn.is_syn());
        b.later(Time::from_us(5));
        let syn_ack = b.deliver(c, Side::Server, &syn).replies.pop().unwrap();
        assert_eq!(c.server, State::SynReceived);
        b.later(Time::from_us(5));
        b.deliver(c, Side::Client, &syn_ack);
        assert_eq!((c.client, c.negotiation), (State::Established, Negotiation::Accepted));
        let data = c.next_packet(&mut b.cx()).unwrap();
        assert!(data.has(flags::FIN) && data.payload == 1000);
        assert_eq!(c.client, State::FinWait1);
        data
    }

    #[test]
    fn a_lost_server_fin_is_sent_again_and_the_connection_closes() {
        let (mut b, mut c) = (Bench::new(), connection(1000));
        let data = open_and_send(&mut b, &mut c);
        b.later(Time::from_us(5));
        let io = b.deliver(&mut c, Side::Server, &data);
        assert_eq!(io.delivered, Some((0, 1000)));
        let fin_ack = io.replies[0];
        assert!(fin_ack.has(flags::FIN) && fin_ack.ack == 1001 && !fin_ack.is_forward());
        assert_eq!(c.server, State::LastAck);
        // The FIN|ACK is lost: the server's own timer sends it again.
        let sent_at = b.now;
        let io = b.fire(&mut c, TimerKind::PeerRto);
        assert!(b.now > sent_at);
        let again = io.replies[0];
        assert_eq!((again.flags, again.ack), (fin_ack.flags, fin_ack.ack));
        b.later(Time::from_us(5));
        let io = b.deliver(&mut c, Side::Client, &again);
        assert!(io.completed, "the FIN|ACK acknowledges the last byte too");
        assert_eq!(c.client, State::TimeWait);
        let ack = io.replies[0];
        assert!(ack.is_forward() && ack.ack == 1 && !ack.has(flags::FIN));
        let client_acked_at = b.now;
        b.later(Time::from_us(5));
        let io = b.deliver(&mut c, Side::Server, &ack);
        assert_eq!(c.server, State::Closed);
        assert!(io.closed);
        assert_eq!(c.closes_at(), Some(client_acked_at + Time::from_us(50)));
    }

    #[test]
    fn a_lost_client_fin_is_retransmitted_with_the_data() {
        let (mut b, mut c) = (Bench::new(), connection(1000));
        let _lost = open_and_send(&mut b, &mut c);
        // The segment with the data and the FIN is lost: the RTO sends both again.
        let io = b.fire(&mut c, TimerKind::Rto);
        assert!(io.activate);
        let again = c.next_packet(&mut b.cx()).unwrap();
        assert!(again.has(flags::FIN) && again.seq == 0 && again.payload == 1000);
        assert_eq!(c.sender.retransmits, 1);
        let fin_ack = b.deliver(&mut c, Side::Server, &again).replies[0];
        let ack = b.deliver(&mut c, Side::Client, &fin_ack).replies[0];
        let io = b.deliver(&mut c, Side::Server, &ack);
        assert!(io.closed && c.server == State::Closed && c.client == State::TimeWait);
    }

    #[test]
    fn a_server_that_never_hears_back_gives_up_after_its_retries() {
        let (mut b, mut c) = (Bench::new(), connection(1000));
        let data = open_and_send(&mut b, &mut c);
        b.deliver(&mut c, Side::Server, &data);
        let mut sent = 1;
        loop {
            let io = b.fire(&mut c, TimerKind::PeerRto);
            if c.server == State::Closed {
                break;
            }
            sent += io.replies.len();
        }
        assert_eq!(sent as u32, FIN_TRIES, "the first FIN and its retransmissions");
    }
}
