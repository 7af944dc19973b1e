//! Transports, and the one interface hosts drive them through (in smoltcp's shape): take an
//! arriving packet, give the next packet the NIC may send now, run a timer that is due. A
//! transport owns its state machine and its timers; TCP and RDMA are its implementations, each
//! a variant of [`Transport`] and a folder.

pub mod build;
pub mod rdma;
pub mod tcp;

use crate::cc::negotiation::Negotiation;
use crate::cc::{CongestionControl, Window};
use crate::context::{Cx, TimerKind};
use crate::packet::Packet;
use crate::time::Time;
use rdma::QueuePair;
use tcp::{TcpConnection, TimeoutRecord, TltCounts};

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

/// A connection of one of sluice's transports.
pub enum Transport {
    /// TCP.
    Tcp(Box<TcpConnection>),
    /// An RDMA queue pair (RoCEv2).
    Rdma(Box<QueuePair>),
}

impl Transport {
    /// Takes a packet arriving at `side`'s host.
    #[inline]
    pub fn on_packet(&mut self, side: Side, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        match self {
            Transport::Tcp(c) => c.on_packet(side, pkt, io, cx),
            Transport::Rdma(c) => c.on_packet(side, pkt, io, cx),
        }
    }

    /// The client's next packet, if its window, pacer and rate limiter let one out now.
    #[inline]
    pub fn next_packet(&mut self, cx: &mut Cx) -> Option<Packet> {
        match self {
            Transport::Tcp(c) => c.client.next_packet(cx),
            Transport::Rdma(c) => c.next_packet(cx),
        }
    }

    /// When the pacer and rate limiter let the client's next packet out (now or later).
    #[inline]
    pub fn ready_at(&mut self, now: Time) -> Time {
        match self {
            Transport::Tcp(c) => c.client.ready_at(now),
            Transport::Rdma(c) => c.ready_at(now),
        }
    }

    /// True if the client could send something now, ignoring pacing.
    #[inline]
    pub fn has_sendable(&self) -> bool {
        match self {
            Transport::Tcp(c) => c.client.has_sendable(),
            Transport::Rdma(c) => c.has_sendable(),
        }
    }

    /// Runs one of the connection's timers (of generation `gen`) that came due.
    pub fn on_timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
        match self {
            Transport::Tcp(c) => c.on_timer(kind, gen, io, cx),
            Transport::Rdma(c) => c.on_timer(kind, gen, io, cx),
        }
    }

    /// Opens the connection (sends the SYN, or starts sending data without a handshake).
    pub fn open(&mut self, io: &mut Io, cx: &mut Cx) {
        match self {
            Transport::Tcp(c) => c.client.open(io, cx),
            Transport::Rdma(c) => c.open(io, cx),
        }
    }

    /// How connection-setup negotiation ended.
    pub fn negotiation(&self) -> Negotiation {
        match self {
            Transport::Tcp(c) => c.client.negotiation,
            // A queue pair has no handshake: it runs the class's algorithm as configured.
            Transport::Rdma(_) => Negotiation::NotNegotiated,
        }
    }

    /// The TCP connection, if this is one.
    pub fn tcp(&self) -> Option<&TcpConnection> {
        match self {
            Transport::Tcp(c) => Some(c),
            Transport::Rdma(_) => None,
        }
    }

    /// The TCP connection, mutably.
    pub fn tcp_mut(&mut self) -> Option<&mut TcpConnection> {
        match self {
            Transport::Tcp(c) => Some(c),
            Transport::Rdma(_) => None,
        }
    }

    /// The RDMA queue pair, if this is one.
    pub fn rdma(&self) -> Option<&QueuePair> {
        match self {
            Transport::Rdma(q) => Some(q),
            Transport::Tcp(_) => None,
        }
    }

    /// The sender's window and its congestion controller.
    pub fn congestion(&self) -> (&Window, &dyn CongestionControl) {
        match self {
            Transport::Tcp(c) => (&c.client.sender.win, c.client.sender.cc.as_ref()),
            Transport::Rdma(q) => (&q.requester.win, q.requester.cc.as_ref()),
        }
    }

    /// The congestion controller, mutably (a probe may wrap it before the run).
    pub fn cc_mut(&mut self) -> &mut Box<dyn CongestionControl> {
        match self {
            Transport::Tcp(c) => &mut c.client.sender.cc,
            Transport::Rdma(q) => &mut q.requester.cc,
        }
    }

    /// The registry name of the algorithm the flow runs.
    pub fn cc_name(&self) -> &'static str {
        self.congestion().1.name()
    }

    /// Data packets resent.
    pub fn retransmits(&self) -> u64 {
        match self {
            Transport::Tcp(c) => c.client.sender.retransmits,
            Transport::Rdma(q) => q.requester.retransmits,
        }
    }

    /// Retransmission timeouts, in order.
    pub fn timeouts(&self) -> &[TimeoutRecord] {
        match self {
            Transport::Tcp(c) => &c.client.sender.timeouts,
            Transport::Rdma(q) => &q.requester.timeouts,
        }
    }

    /// TLT's counters, when the flow marks.
    pub fn tlt_counts(&self) -> Option<TltCounts> {
        match self {
            Transport::Tcp(c) => c.client.sender.tlt.as_ref().map(|t| t.counts),
            Transport::Rdma(q) => q.tlt_counts(),
        }
    }

    /// Bytes the sender could put on the wire now (a host port's queue sample counts them).
    pub fn sendable_bytes(&self) -> u64 {
        match self {
            Transport::Tcp(c) => c.client.sender.sendable_bytes(),
            Transport::Rdma(q) => q.sendable_bytes(),
        }
    }

    /// Whether the application appends messages to this connection.
    pub fn is_persistent(&self) -> bool {
        match self {
            Transport::Tcp(c) => c.client.sender.is_persistent(),
            Transport::Rdma(q) => q.is_persistent(),
        }
    }

    /// Whether the server end closes itself; if not, the client's close reaches it one path
    /// delay later as [`TimerKind::PeerClosed`].
    pub fn server_closes_itself(&self) -> bool {
        match self {
            Transport::Tcp(c) => c.server_closes_itself(),
            Transport::Rdma(_) => false,
        }
    }

    /// Keeps the connection open between the messages the application appends.
    pub fn make_persistent(&mut self) {
        match self {
            Transport::Tcp(c) => c.client.sender.make_persistent(),
            Transport::Rdma(q) => q.make_persistent(),
        }
    }

    /// Queues a further message of `bytes`; returns the flow's new size and whether the sender
    /// may send it now (a TCP connection still in its handshake waits).
    pub fn append(&mut self, bytes: u64) -> (Option<u64>, bool) {
        match self {
            Transport::Tcp(c) => {
                c.client.sender.append(bytes);
                (c.client.sender.size(), c.client.sender.phase == tcp::Phase::Established)
            }
            Transport::Rdma(q) => (Some(q.append(bytes)), true),
        }
    }

    /// Whether the receiving end holds a per-hop record stack it has not echoed.
    pub fn holds_hop_stack(&self) -> bool {
        match self {
            Transport::Tcp(c) => c.server.receiver.hops_held.is_some(),
            Transport::Rdma(q) => q.holds_hop_stack(),
        }
    }
}
