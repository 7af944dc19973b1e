//! Transports, and the one interface hosts drive them through (in smoltcp's shape): take an
//! arriving packet, give the next packet the NIC may send now, run a timer that is due. A
//! transport owns its state machine and its timers; TCP is one implementation, and a new
//! transport is one more variant of [`Transport`] and one more folder.

pub mod tcp;

use crate::cc::negotiation::Negotiation;
use crate::context::{Cx, TimerKind};
use crate::packet::Packet;
use crate::time::Time;
use tcp::TcpConnection;

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
    /// Both ends are closed: the connection's state may be released.
    pub closed: bool,
    /// The ACK carried a TCP-INT echo the sender decoded.
    pub echo: bool,
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
    }
}

/// A connection of one of sluice's transports.
pub enum Transport {
    /// TCP.
    Tcp(Box<TcpConnection>),
}

impl Transport {
    /// Takes a packet arriving at `side`'s host.
    #[inline]
    pub fn on_packet(&mut self, side: Side, pkt: &Packet, io: &mut Io, cx: &mut Cx) {
        match self {
            Transport::Tcp(c) => c.on_packet(side, pkt, io, cx),
        }
    }

    /// The client's next packet, if its window, pacer and rate limiter let one out now.
    #[inline]
    pub fn next_packet(&mut self, cx: &mut Cx) -> Option<Packet> {
        match self {
            Transport::Tcp(c) => c.next_packet(cx),
        }
    }

    /// When the pacer and rate limiter let the client's next packet out (now or later).
    #[inline]
    pub fn ready_at(&mut self, now: Time) -> Time {
        match self {
            Transport::Tcp(c) => c.ready_at(now),
        }
    }

    /// True if the client could send something now, ignoring pacing.
    #[inline]
    pub fn has_sendable(&self) -> bool {
        match self {
            Transport::Tcp(c) => c.has_sendable(),
        }
    }

    /// Runs one of the connection's timers (of generation `gen`) that came due.
    pub fn on_timer(&mut self, kind: TimerKind, gen: u32, io: &mut Io, cx: &mut Cx) {
        match self {
            Transport::Tcp(c) => c.on_timer(kind, gen, io, cx),
        }
    }

    /// Opens the connection (sends the SYN, or starts sending data without a handshake).
    pub fn open(&mut self, io: &mut Io, cx: &mut Cx) {
        match self {
            Transport::Tcp(c) => c.open(io, cx),
        }
    }

    /// How connection-setup negotiation ended.
    pub fn negotiation(&self) -> Negotiation {
        match self {
            Transport::Tcp(c) => c.negotiation,
        }
    }

    /// The TCP connection, if this is one.
    pub fn tcp(&self) -> Option<&TcpConnection> {
        match self {
            Transport::Tcp(c) => Some(c),
        }
    }

    /// The TCP connection, mutably.
    pub fn tcp_mut(&mut self) -> Option<&mut TcpConnection> {
        match self {
            Transport::Tcp(c) => Some(c),
        }
    }
}
