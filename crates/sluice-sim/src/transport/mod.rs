//! Transports, and the one interface hosts drive them through (in smoltcp's shape): take an
//! arriving packet, give the next packet the NIC may send now, run a timer that is due. A
//! transport's two ends each own their state machine and timers, and meet only through packets:
//! a [`ClientEnd`] at the flow's source and a [`ServerEnd`] at its destination. TCP, RDMA and
//! the Ultra Ethernet transport are the implementations, each a variant of both and a folder.

pub mod pacer;
pub mod rdma;
pub mod tcp;
pub mod uet;

use crate::cc::negotiation::Negotiation;
use crate::cc::{CongestionControl, Window};
use crate::context::{Cx, TimerKind};
use crate::packet::Packet;
use crate::time::Time;
use rdma::{Requester, Responder};
use tcp::{TcpClient, TcpServer, TimeoutRecord, TltCounts};
use uet::{UetReceiver, UetSender};

/// The transport of a class's flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClassTransport {
    /// TCP connections (`[transport]`).
    #[default]
    Tcp,
    /// RDMA reliable-connected queue pairs (`[rdma]`).
    Rdma,
    /// The Ultra Ethernet transport (`[uet]`).
    Uet,
}

impl ClassTransport {
    /// The name a scenario writes.
    pub fn name(self) -> &'static str {
        match self {
            ClassTransport::Tcp => "tcp",
            ClassTransport::Rdma => "rdma",
            ClassTransport::Uet => "uet",
        }
    }
}

/// Which end of a connection a packet reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The end that opened the connection and sends the data.
    Client,
    /// The end that accepted it and receives the data.
    Server,
}

/// What a transport tells its hosts after it handled a packet or a timer.
#[derive(Debug, Default)]
pub struct Io {
    /// Packets the host that received the packet (or owns the timer) sends now, in order.
    pub replies: Vec<Packet>,
    /// The client may have data the window lets out: put the flow on its NIC's scheduler.
    pub activate: bool,
    /// In-order bytes handed to the server's application: (first byte, count).
    pub delivered: Option<(u64, u64)>,
    /// Every data byte is acknowledged: the flow is complete.
    pub completed: bool,
    /// The end that acted closed: it takes nothing more, and its state goes once both ends have.
    pub closed: bool,
    /// The ACK carried a TCP-INT echo the sender decoded.
    pub echo: bool,
    /// The client received the server's response (the payload of the server's FIN).
    pub response: bool,
    /// The client received an interim response before the server's FIN (HTTP's `100 Continue`
    /// from a proxy ready for the request's body).
    pub interim: bool,
    /// What the host stack did, for a host whose CPU is modelled.
    pub work: Work,
}

/// The stack operations one packet or timer caused at a host, beyond receiving the packet and
/// sending the replies (which the CPU model counts itself).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// A SYN made the server create a half-open connection and answer it.
    pub setup: bool,
    /// The server created a full TCB (at the handshake, or when a connection that began with a
    /// quasi-TCB got a second request) and `accept()`ed it.
    pub accepted: bool,
    /// The handshake completed at a server with lazy TCBs: only a quasi-TCB.
    pub quasi_tcb: bool,
    /// The server's application read the request, answered it and closed.
    pub answered: bool,
    /// An end of the connection closed for good: FIN handling and TCB destruction.
    pub teardown: bool,
}

impl Io {
    /// Clears the record for the next call, keeping its buffer.
    pub fn reset(&mut self) {
        self.replies.clear();
        self.activate = false;
        self.delivered = None;
        self.completed = false;
        self.closed = false;
        self.echo = false;
        self.response = false;
        self.interim = false;
        self.work = Work::default();
    }
}

/// The end of a flow that opened the connection and sends the data, at the flow's source host.
pub enum ClientEnd {
    /// A TCP client.
    Tcp(Box<TcpClient>),
    /// An RDMA queue pair's requester (RoCEv2).
    Rdma(Box<Requester>),
    /// A UET sender.
    Uet(Box<UetSender>),
}

/// The end of a flow that accepted the connection and receives the data, at its destination.
pub enum ServerEnd {
    /// A TCP server.
    Tcp(Box<TcpServer>),
    /// An RDMA queue pair's responder.
    Rdma(Box<Responder>),
    /// A UET receiver.
    Uet(Box<UetReceiver>),
}

impl ClientEnd {
    /// Takes a packet from the server; `io.closed` if that closed the client.
    #[inline]
    pub fn on_packet(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        match self {
            ClientEnd::Tcp(c) => c.on_packet(pkt, io, cx),
            ClientEnd::Rdma(r) => r.on_feedback(pkt, io, cx),
            ClientEnd::Uet(u) => u.on_packet(pkt, io, cx),
        }
    }

    /// The next packet, if its window, pacer and rate limiter let one out now.
    #[inline]
    pub fn next_packet(&mut self, cx: &mut Cx) -> Option<Packet> {
        match self {
            ClientEnd::Tcp(c) => c.next_packet(cx),
            ClientEnd::Rdma(r) => r.next_packet(cx),
            ClientEnd::Uet(u) => u.next_packet(cx),
        }
    }

    /// The NIC is part-way through a TCP flow's TSO packet, whose frames go back to back.
    #[inline]
    pub fn mid_packet(&self) -> bool {
        matches!(self, ClientEnd::Tcp(c) if c.sender.mid_tso_packet())
    }

    /// When the pacer and rate limiter let the next packet out (now or later).
    #[inline]
    pub fn ready_at(&mut self, now: Time) -> Time {
        match self {
            ClientEnd::Tcp(c) => c.ready_at(now),
            ClientEnd::Rdma(r) => r.ready_at(now),
            ClientEnd::Uet(u) => u.ready_at(now),
        }
    }

    /// True if the client could send something now, ignoring pacing. The NIC's scheduler asks
    /// this of every active flow, so it stays inlined there (UET's answer is a call).
    #[inline(always)]
    pub fn has_sendable(&self) -> bool {
        match self {
            ClientEnd::Tcp(c) => c.has_sendable(),
            ClientEnd::Rdma(r) => r.has_sendable(),
            ClientEnd::Uet(u) => u.has_sendable(),
        }
    }

    /// Runs one of the client's timers (of generation `gen`) that came due; `io.closed` if that
    /// closed the client.
    pub fn on_timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
        match self {
            ClientEnd::Tcp(c) => c.on_timer(kind, gen, io, cx),
            ClientEnd::Rdma(r) => r.on_timer(kind, gen, io, cx),
            ClientEnd::Uet(u) => u.on_timer(kind, gen, io, cx),
        }
    }

    /// Opens the connection (sends the SYN, or starts sending data without a handshake).
    pub fn open(&mut self, io: &mut Io, cx: &mut Cx) {
        match self {
            ClientEnd::Tcp(c) => c.open(io, cx),
            ClientEnd::Rdma(r) => r.open(io, cx),
            ClientEnd::Uet(u) => u.open(io),
        }
    }

    /// How connection-setup negotiation ended.
    pub fn negotiation(&self) -> Negotiation {
        match self {
            ClientEnd::Tcp(c) => c.negotiation,
            // A queue pair has no handshake: it runs the class's algorithm as configured.
            ClientEnd::Rdma(_) => Negotiation::NotNegotiated,
            ClientEnd::Uet(_) => Negotiation::NotNegotiated,
        }
    }

    /// The TCP client, if this is one.
    pub fn tcp(&self) -> Option<&TcpClient> {
        match self {
            ClientEnd::Tcp(c) => Some(c),
            ClientEnd::Rdma(_) | ClientEnd::Uet(_) => None,
        }
    }

    /// The TCP client, mutably.
    pub fn tcp_mut(&mut self) -> Option<&mut TcpClient> {
        match self {
            ClientEnd::Tcp(c) => Some(c),
            ClientEnd::Rdma(_) | ClientEnd::Uet(_) => None,
        }
    }

    /// The queue pair's requester, if this is one.
    pub fn rdma(&self) -> Option<&Requester> {
        match self {
            ClientEnd::Rdma(r) => Some(r),
            ClientEnd::Tcp(_) | ClientEnd::Uet(_) => None,
        }
    }

    /// The UET sender, if this is one.
    pub fn uet(&self) -> Option<&UetSender> {
        match self {
            ClientEnd::Uet(u) => Some(u),
            ClientEnd::Tcp(_) | ClientEnd::Rdma(_) => None,
        }
    }

    /// The sender's window and its congestion controller.
    pub fn congestion(&self) -> (&Window, &dyn CongestionControl) {
        match self {
            ClientEnd::Tcp(c) => (&c.sender.win, c.sender.cc.as_ref()),
            ClientEnd::Rdma(r) => (&r.win, r.cc.as_ref()),
            ClientEnd::Uet(u) => (&u.win, u.cc.as_ref()),
        }
    }

    /// The congestion controller, mutably (a probe may wrap it before the run).
    pub fn cc_mut(&mut self) -> &mut Box<dyn CongestionControl> {
        match self {
            ClientEnd::Tcp(c) => &mut c.sender.cc,
            ClientEnd::Rdma(r) => &mut r.cc,
            ClientEnd::Uet(u) => &mut u.cc,
        }
    }

    /// The registry name of the algorithm the flow runs.
    pub fn cc_name(&self) -> &'static str {
        self.congestion().1.name()
    }

    /// Data packets resent.
    pub fn retransmits(&self) -> u64 {
        match self {
            ClientEnd::Tcp(c) => c.sender.retransmits,
            ClientEnd::Rdma(r) => r.retransmits,
            ClientEnd::Uet(u) => u.retransmits,
        }
    }

    /// Retransmission timeouts, in order.
    pub fn timeouts(&self) -> &[TimeoutRecord] {
        match self {
            ClientEnd::Tcp(c) => &c.sender.timeouts,
            ClientEnd::Rdma(r) => &r.timeouts,
            ClientEnd::Uet(u) => &u.timeouts,
        }
    }

    /// TLT's counters, when the flow marks.
    pub fn tlt_counts(&self) -> Option<TltCounts> {
        match self {
            ClientEnd::Tcp(c) => c.sender.tlt.as_ref().map(|t| t.counts),
            ClientEnd::Rdma(r) => r.tlt_counts(),
            ClientEnd::Uet(_) => None,
        }
    }

    /// Bytes the sender could put on the wire now (a host port's queue sample counts them).
    pub fn sendable_bytes(&self) -> u64 {
        match self {
            ClientEnd::Tcp(c) => c.sender.sendable_bytes(),
            ClientEnd::Rdma(r) => r.sendable_bytes(),
            ClientEnd::Uet(u) => u.sendable_bytes(),
        }
    }

    /// Bytes the server has acknowledged.
    pub fn acknowledged(&self) -> u64 {
        match self {
            ClientEnd::Tcp(c) => c.sender.una,
            ClientEnd::Rdma(r) => r.una,
            ClientEnd::Uet(u) => u.una,
        }
    }

    /// Whether the application appends messages to this connection.
    pub fn is_persistent(&self) -> bool {
        match self {
            ClientEnd::Tcp(c) => c.sender.is_persistent(),
            ClientEnd::Rdma(r) => r.persistent,
            ClientEnd::Uet(u) => u.persistent,
        }
    }

    /// Keeps the connection open between the messages the application appends.
    pub fn make_persistent(&mut self) {
        match self {
            ClientEnd::Tcp(c) => c.sender.make_persistent(),
            ClientEnd::Rdma(r) => r.persistent = true,
            ClientEnd::Uet(u) => u.persistent = true,
        }
    }

    /// Whether the server closes by itself (a TCP connection with a handshake); if not, this
    /// client's close reaches it one path delay later as [`TimerKind::PeerClosed`].
    pub fn peer_closes_itself(&self) -> bool {
        match self {
            ClientEnd::Tcp(c) => c.handshake(),
            ClientEnd::Rdma(_) => false,
            ClientEnd::Uet(_) => false,
        }
    }

    /// Queues a further message of `bytes`; returns the flow's new size and whether the sender
    /// may send it now (a TCP connection still in its handshake waits).
    pub fn append(&mut self, bytes: u64) -> (Option<u64>, bool) {
        match self {
            ClientEnd::Tcp(c) => {
                c.sender.append(bytes);
                (c.sender.size(), c.sender.phase == tcp::Phase::Established)
            }
            ClientEnd::Rdma(r) => (Some(r.append(bytes)), true),
            ClientEnd::Uet(u) => (Some(u.append(bytes)), true),
        }
    }
}

impl ServerEnd {
    /// Takes a packet from the client; `io.closed` if that closed the server.
    #[inline]
    pub fn on_packet(&mut self, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        match self {
            ServerEnd::Tcp(s) => s.on_packet(pkt, io, cx),
            ServerEnd::Rdma(r) => r.respond(pkt, io, cx),
            ServerEnd::Uet(u) => u.on_packet(pkt, io, cx),
        }
    }

    /// Runs one of the server's timers, or its peer's close reaching it
    /// ([`TimerKind::PeerClosed`]); `io.closed` if that closed the server.
    pub fn on_timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
        match self {
            ServerEnd::Tcp(s) => s.on_timer(kind, gen, io, cx),
            ServerEnd::Rdma(r) => r.on_timer(kind, io, cx),
            ServerEnd::Uet(u) => u.on_timer(kind, io, cx),
        }
    }

    /// The TCP server, if this is one.
    pub fn tcp(&self) -> Option<&TcpServer> {
        match self {
            ServerEnd::Tcp(s) => Some(s),
            ServerEnd::Rdma(_) | ServerEnd::Uet(_) => None,
        }
    }

    /// The TCP server, mutably.
    pub fn tcp_mut(&mut self) -> Option<&mut TcpServer> {
        match self {
            ServerEnd::Tcp(s) => Some(s),
            ServerEnd::Rdma(_) | ServerEnd::Uet(_) => None,
        }
    }

    /// The UET receiver, if this is one.
    pub fn uet(&self) -> Option<&UetReceiver> {
        match self {
            ServerEnd::Uet(u) => Some(u),
            ServerEnd::Tcp(_) | ServerEnd::Rdma(_) => None,
        }
    }

    /// The UET receiver, to grant credit from.
    pub fn uet_mut(&mut self) -> Option<&mut UetReceiver> {
        match self {
            ServerEnd::Uet(u) => Some(u),
            ServerEnd::Tcp(_) | ServerEnd::Rdma(_) => None,
        }
    }

    /// Bytes the server holds in order.
    pub fn received(&self) -> u64 {
        match self {
            ServerEnd::Tcp(s) => s.receiver.rcv_nxt,
            ServerEnd::Rdma(r) => r.rcv_nxt,
            ServerEnd::Uet(u) => u.rcv_nxt,
        }
    }

    /// Whether the server holds a per-hop record stack it has not echoed.
    pub fn holds_hop_stack(&self) -> bool {
        match self {
            ServerEnd::Tcp(s) => s.receiver.hops_held.is_some(),
            ServerEnd::Rdma(r) => r.holds_hop_stack(),
            ServerEnd::Uet(_) => false,
        }
    }
}
