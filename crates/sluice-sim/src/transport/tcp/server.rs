//! The server end of a TCP connection: the passive opener, which receives the data. It answers
//! the SYN (or lets its NIC answer with a cookie), takes the data through its [`Receiver`] with
//! delayed ACKs and the ECN echo the client's segments ask for, answers a transaction's request
//! on its FIN, and retransmits that FIN until it is acknowledged or it gives up. It learns of
//! the client only through the client's packets.

use crate::ids::FlowId;
use super::connection::{Route, State};
use super::{AckPlan, Receiver, TcpConfig};
use crate::cc::EcnMode;
use crate::context::{Cx, Event, TimerKind};
use crate::event::{TimerFire, TimerSlot};
use crate::packet::{flags, Caps, Colour, Packet};
use crate::time::Time;
use crate::transport::Io;

/// How many times the server sends its FIN before it gives up (Linux `tcp_orphan_retries`).
pub const FIN_TRIES: u32 = 8;

/// The server end of a TCP connection.
pub struct TcpServer {
    route: Route,
    /// The data-receiving half.
    pub receiver: Receiver,
    /// The RFC 9293 state.
    pub state: State,
    /// The server's stack supports TCP-INT.
    int: bool,
    /// Wire bytes of a segment without payload or options.
    bare_frame: u32,
    /// The client's FIN position, once the server has seen it.
    fin_at: Option<u64>,
    /// The FIN retransmission timer and attempts.
    fin_timer: TimerSlot,
    fin_tries: u32,
    fin_rto: Time,
    /// The colour of control packets the server builds itself (SYN-ACK, FINs).
    ctrl_colour: Colour,
    /// Bytes the application answers with, on its FIN (a request/response transaction).
    response: u32,
    /// The stack creates a quasi-TCB at the handshake (AccelTCP's lazy TCB).
    lazy_tcb: bool,
    /// The server holds only a quasi-TCB so far.
    quasi: bool,
    /// A client segment carried options switches rewrite per hop.
    path_options: bool,
    /// The host does not negotiate (no agent): its SYN-ACK carries no answer.
    silent: bool,
}

impl TcpServer {
    /// A server listening for the connection (with a handshake) or already established, echoing
    /// marks as `ecn_mode` until the client's segments say otherwise; `int` if its stack
    /// supports TCP-INT.
    pub fn new(cfg: &TcpConfig, route: Route, ecn_mode: EcnMode, int: bool) -> TcpServer {
        TcpServer {
            route,
            receiver: Receiver::new(cfg, ecn_mode),
            state: if cfg.handshake { State::Listen } else { State::Established },
            int,
            bare_frame: cfg.frame(0),
            fin_at: None,
            fin_timer: TimerSlot::default(),
            fin_tries: 0,
            fin_rto: cfg.rto_init.max(cfg.rto_min),
            ctrl_colour: if cfg.tlt { Colour::Control } else { Colour::Unimportant },
            response: 0,
            lazy_tcb: false,
            quasi: false,
            path_options: false,
            silent: false,
        }
    }

    /// The host takes no part in negotiation (it has no agent): the SYN-ACK carries no answer.
    pub fn set_silent(&mut self) {
        self.silent = true;
    }

    /// Makes the connection one request/response transaction: the server answers the request
    /// with `bytes` on its FIN (at most one segment, checked by the scenario).
    pub fn set_response(&mut self, bytes: u32) {
        self.response = bytes;
    }

    /// The stack creates a small quasi-TCB when the handshake completes and the full TCB only
    /// when a second request arrives (AccelTCP's lazy TCB, for connections that carry one
    /// transaction).
    pub fn set_lazy_tcb(&mut self) {
        self.lazy_tcb = true;
    }

    /// Where the connection's packets go.
    pub fn route(&self) -> Route {
        self.route
    }

    /// The SYN-ACK answering `syn`, carrying `cookie`, without any state: what a NIC that
    /// answers SYNs with cookies sends.
    pub fn syn_ack(&self, syn: &Packet, cookie: u32) -> Packet {
        let mut syn_ack = self.ctrl(flags::SYN | flags::ACK, 0, 0);
        syn_ack.ts_echo = syn.ts;
        syn_ack.cookie = cookie;
        // The answer: what the path offered, and what this stack supports.
        if self.silent {
            return syn_ack;
        }
        syn_ack.caps = Caps(syn.caps.0 & !(Caps::WANTS_INT | Caps::WANTS_HOP_RECORDS | Caps::WANTS_ECN | Caps::PROPOSED));
        syn_ack.caps.set(Caps::ANSWERED);
        if self.int {
            syn_ack.caps.set(Caps::PEER_INT);
        }
        syn_ack
    }

    /// True while the server has no state for this connection (it has not seen the SYN, or its
    /// NIC answered it).
    pub fn listening(&self) -> bool {
        self.state == State::Listen
    }

    /// The NIC verified the cookie on the handshake's ACK: the stack takes the connection as if
    /// it had answered the SYN itself.
    pub fn accept_verified(&mut self) {
        if self.state == State::Listen {
            self.state = State::SynReceived;
        }
    }

    /// The NIC takes over the close the application just made (its FIN is sent, and the NIC
    /// retransmits it): the server drops its own FIN timer.
    pub fn hand_over_close(&mut self) {
        if self.state == State::LastAck {
            self.fin_timer.cancel();
        }
    }

    /// The NIC finished the close it took over (its FIN was acknowledged, or it gave up): the
    /// server is closed (`io.closed`).
    pub fn nic_closed(&mut self, io: &mut Io, cx: &mut Cx) {
        let was = self.state;
        if was == State::LastAck {
            self.state = State::Closed;
        }
        self.closed_if(was, io, cx);
    }

    /// True if the client's segments carried options switches rewrite per hop (TCP-INT, HPCC's
    /// records).
    pub fn carries_path_options(&self) -> bool {
        self.path_options
    }

    /// The proxy's NIC spliced this connection (the proxy is its server) and has seen the close
    /// go through end to end: the server is closed without a packet of its own (`io.closed`).
    pub fn spliced_closed(&mut self, io: &mut Io, cx: &mut Cx) {
        let was = self.state;
        self.state = State::Closed;
        self.receiver.delack_timer.cancel();
        self.closed_if(was, io, cx);
    }

    /// The interim response of `bytes` before the FIN (a proxy's `100 Continue`), acknowledging
    /// what the server has received.
    pub fn interim_response(&self, bytes: u32) -> Packet {
        let mut p = self.ctrl(flags::ACK, 0, self.receiver.rcv_nxt);
        p.payload = bytes;
        p.wire_bytes += bytes;
        p
    }

    /// True when the client's segment `pkt` acknowledges the server's FIN.
    pub fn acks_fin(&self, pkt: &Packet) -> bool {
        pkt.has(flags::ACK) && pkt.ack > self.response as u64
    }

    /// A control packet to the client (SYN-ACK, FIN).
    fn ctrl(&self, flags: u8, seq: u64, ack: u64) -> Packet {
        Packet { seq, ack, flags: flags | flags::REVERSE, wire_bytes: self.bare_frame, colour: self.ctrl_colour, ..self.route.reverse() }
    }

    /// Takes a packet from the client; `io.closed` if that closed the server.
    pub fn on_packet(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        let was = self.state;
        self.segment(pkt, io, cx);
        self.closed_if(was, io, cx);
    }

    /// Runs one of the server's timers; `io.closed` if that closed the server.
    pub fn on_timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
        let was = self.state;
        if kind == TimerKind::PeerClosed {
            // Without a handshake the server has no close of its own: the client's completion
            // reaches it one path delay later, as a close would.
            self.state = State::Closed;
        } else {
            self.timer(kind, gen, io, cx);
        }
        self.closed_if(was, io, cx);
    }

    /// Reports the server's close if it just happened (from `was`), freeing the hop records its
    /// receiver held.
    fn closed_if(&mut self, was: State, io: &mut Io, cx: &mut Cx) {
        if was != State::Closed && self.state == State::Closed {
            if let Some(h) = self.receiver.hops_held.take() {
                cx.hops.free(h);
            }
            io.closed = true;
        }
    }

    /// Takes a packet from the client.
    fn segment(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        self.path_options |= pkt.int.is_some() || pkt.hops.is_some();
        if pkt.is_syn() {
            if matches!(self.state, State::Listen | State::SynReceived) {
                io.work.setup = self.state == State::Listen;
                self.state = State::SynReceived;
                io.replies.push(self.syn_ack(pkt, 0));
            }
            return;
        }
        if self.state == State::SynReceived {
            self.state = State::Established;
            self.quasi = self.lazy_tcb;
            io.work.accepted = !self.quasi;
            io.work.quasi_tcb = self.quasi;
        }
        if self.state == State::LastAck {
            if self.acks_fin(pkt) {
                self.state = State::Closed;
                self.fin_timer.cancel();
                io.work.teardown = true;
            }
            return;
        }
        if pkt.payload == 0 && !pkt.has(flags::FIN) {
            return;
        }
        // The server echoes what the client's data carries once it sees it.
        if pkt.int.is_some() && self.receiver.int_echo.is_none() && self.int {
            self.receiver.int_echo = Some(None);
        }
        if pkt.hops.is_some() {
            self.receiver.hop_records = true;
        }
        // The client's algorithm (the one negotiation settled on) says how marks are echoed.
        let per_packet = pkt.caps.has(Caps::ECHO_EACH_MARK);
        self.receiver.set_ecn_mode(if per_packet { EcnMode::PerPacket } else { EcnMode::Classic });
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
        let fin_in_order = self.fin_at == Some(self.receiver.rcv_nxt) && self.state == State::Established;
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
                    self.state = State::LastAck;
                    io.work.answered = true;
                    self.arm_fin_timer(cx);
                }
                io.replies.push(a);
            }
            AckPlan::Delay(at) => {
                if self.receiver.delack_timer.deadline().is_none() {
                    if let Some((t, gen)) = self.receiver.delack_timer.arm(at) {
                        cx.schedule(t, Event::Timer(FlowId(r.flow), TimerKind::DelayedAck, gen));
                    }
                }
            }
        }
    }

    /// The FIN|ACK with the response, as first sent and as retransmitted.
    pub fn fin(&self) -> Packet {
        let mut fin_ack = self.ctrl(flags::FIN | flags::ACK, 0, self.receiver.rcv_nxt + 1);
        fin_ack.payload = self.response;
        fin_ack.wire_bytes += self.response;
        fin_ack
    }

    fn arm_fin_timer(&mut self, cx: &mut Cx) {
        let at = cx.now + Time(self.fin_rto.0.saturating_mul(1 << self.fin_tries.min(16)));
        if let Some((t, gen)) = self.fin_timer.arm(at) {
            cx.schedule(t, Event::Timer(FlowId(self.route.flow), TimerKind::PeerRto, gen));
        }
    }

    /// Runs one of the server's timers (the delayed ACK, the FIN's retransmission).
    fn timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
        let now = cx.now;
        let flow = self.route.flow;
        match kind {
            TimerKind::DelayedAck => {
                match self.receiver.delack_timer.fire(now, gen) {
                    // An immediate ACK cancelled the timer and a later segment armed it again
                    // past this event: the ACK is due then.
                    TimerFire::Reschedule(t, g) => {
                        return cx.schedule(t, Event::Timer(FlowId(flow), TimerKind::DelayedAck, g))
                    }
                    TimerFire::Expired if self.receiver.has_unacked() => {}
                    _ => return,
                }
                let r = self.route;
                let template = Packet { flow, src: r.src, dst: r.dst, prio: r.prio, ..Packet::default() };
                let mut a = self.receiver.build_ack(&template);
                a.hops = self.receiver.hops_held.take();
                a.hash = r.hash_rev;
                io.replies.push(a);
            }
            TimerKind::PeerRto => match self.fin_timer.fire(now, gen) {
                TimerFire::Stale => {}
                TimerFire::Reschedule(t, g) => cx.schedule(t, Event::Timer(FlowId(flow), TimerKind::PeerRto, g)),
                TimerFire::Expired => {
                    if self.state != State::LastAck {
                        return;
                    }
                    self.fin_tries += 1;
                    if self.fin_tries >= FIN_TRIES {
                        // The client is gone: give up, as Linux does after its orphan retries.
                        self.state = State::Closed;
                        return;
                    }
                    io.replies.push(self.fin());
                    self.arm_fin_timer(cx);
                }
            },
            TimerKind::Rto | TimerKind::LossProbe | TimerKind::CcTick | TimerKind::TimeWait | TimerKind::PeerClosed => {}
        }
    }
}
