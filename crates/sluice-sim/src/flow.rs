//! One flow: its identity and outcome, kept for the outputs, and its live transport, released
//! once the connection is done so memory follows the flows in flight. The bytes its application
//! receives are counted here, apart from the transport's own state, so the exactly-once,
//! in-order check is independent of what it checks.

use crate::cc::negotiation::Negotiation;
use crate::packet::Packet;
use crate::time::Time;
use crate::transport::tcp::{Sender, TcpConnection, TimeWait, TimeoutRecord, TltCounts};
use crate::transport::{Side, Transport};
use crate::workload::proxy::{RelayEnd, Splicing};
use std::collections::VecDeque;

/// One flow.
pub struct Flow {
    /// Flow id (index in the arena).
    pub id: u32,
    /// Sending host ordinal.
    pub src: u32,
    /// Receiving host ordinal.
    pub dst: u32,
    /// Class index.
    pub class: u16,
    /// Switch and NIC priority.
    pub prio: u8,
    /// Bytes to deliver (None = endless).
    pub size: Option<u64>,
    /// Start time.
    pub start: Time,
    /// When the sender had every byte acknowledged.
    pub finish: Option<Time>,
    /// Round trip of the flow's path with empty queues.
    pub base_rtt: Time,
    /// base RTT + size with headers at the sender's link rate, at the flow's own MSS.
    pub ideal_fct: Time,
    /// When the receiver had every byte.
    pub rx_done: Option<Time>,
    /// When the connection closed for good (after TIME_WAIT), if it did.
    pub closed_at: Option<Time>,
    /// The application's deadline for the flow, if it stated one.
    pub deadline: Option<Time>,
    /// The application that opened the flow and its tag, for closed-loop traffic.
    pub app: Option<(u32, u32)>,
    /// On a persistent connection: where each message the receiver still awaits ends, with its
    /// application tag, in sending order.
    pub messages: VecDeque<(u64, u32)>,
    /// The live transport; `None` once neither end runs.
    pub transport: Option<Transport>,
    /// Which ends still run, by [`Side`]: each end closes from its own host's events, and the
    /// transport is released once neither does.
    open: [bool; 2],
    /// A client that waits out TIME_WAIT answers a retransmitted FIN from this.
    time_wait: Option<Box<TimeWait>>,
    /// The flow sits in its NIC's scheduler.
    pub in_active: bool,
    /// A transaction: the bytes the server answers with on its FIN.
    pub response: Option<u32>,
    /// When the client received the server's response (a transaction).
    pub answered: Option<Time>,
    /// A proxied request: the proxy's state for this connection.
    pub relay: Option<Box<RelayEnd>>,
    app_received: u64,
    delivery_fault: Option<String>,
    kept: Kept,
    /// The connection is built when the flow starts; until then the record reports what an
    /// unopened one would.
    waiting: bool,
}

/// What stays of a transport once it is released.
#[derive(Default)]
struct Kept {
    negotiation: Option<Negotiation>,
    cc_name: &'static str,
    int_enabled: bool,
    retransmits: u64,
    timeouts: Vec<TimeoutRecord>,
    tlt: Option<TltCounts>,
    loss_probes: Option<u64>,
}

impl Flow {
    /// A flow not started yet.
    #[allow(clippy::too_many_arguments)]
    pub fn new(id: u32, src: u32, dst: u32, class: u16, prio: u8, size: Option<u64>, start: Time, transport: Transport) -> Flow {
        Flow {
            id,
            src,
            dst,
            class,
            prio,
            size,
            start,
            finish: None,
            base_rtt: Time::ZERO,
            ideal_fct: Time::ZERO,
            rx_done: None,
            closed_at: None,
            deadline: None,
            app: None,
            messages: VecDeque::new(),
            transport: Some(transport),
            open: [true; 2],
            time_wait: None,
            in_active: false,
            response: None,
            answered: None,
            relay: None,
            app_received: 0,
            delivery_fault: None,
            kept: Kept::default(),
            waiting: false,
        }
    }

    /// The TCP connection, while it lives.
    pub fn tcp(&self) -> Option<&TcpConnection> {
        self.transport.as_ref().and_then(Transport::tcp)
    }

    /// The TCP connection, mutably (a probe may wrap the algorithm before the run).
    pub fn tcp_mut(&mut self) -> Option<&mut TcpConnection> {
        self.transport.as_mut().and_then(Transport::tcp_mut)
    }

    /// The transport as end `side` acts on it, while that end runs.
    #[inline]
    pub fn end_mut(&mut self, side: Side) -> Option<&mut Transport> {
        if self.open[side as usize] {
            self.transport.as_mut()
        } else {
            None
        }
    }

    /// The transport as end `side` sees it, while that end runs.
    #[inline]
    pub fn end(&self, side: Side) -> Option<&Transport> {
        if self.open[side as usize] {
            self.transport.as_ref()
        } else {
            None
        }
    }

    /// Whether end `side` still runs.
    #[inline]
    pub fn is_open(&self, side: Side) -> bool {
        self.open[side as usize] && self.transport.is_some()
    }

    /// End `side` closed, at its own host: a client keeps what TIME_WAIT needs, and the
    /// transport is released once both ends are closed.
    pub fn close_end(&mut self, side: Side) {
        self.open[side as usize] = false;
        if side == Side::Client {
            if let Some(c) = self.tcp() {
                let (at, tw) = (c.closes_at(), c.client.time_wait().map(Box::new));
                (self.closed_at, self.time_wait) = (at, tw);
            }
        }
        if self.open == [false; 2] {
            self.release();
        }
    }

    /// A FIN reaches the closed client: in TIME_WAIT it is acknowledged again and TIME_WAIT
    /// starts over (RFC 9293, 3.10.7.4); the acknowledgement, if any.
    pub fn time_wait_answer(&mut self, fin: &Packet, now: Time) -> Option<Packet> {
        let tw = self.time_wait.as_deref()?;
        if self.closed_at.is_some_and(|end| now >= end) {
            return None;
        }
        self.closed_at = Some(now + tw.lasts);
        Some(Packet { ack: fin.seq + fin.payload as u64 + 1, ts: now, ts_echo: fin.ts, ..tw.ack })
    }

    /// The TCP sender, while the connection lives.
    pub fn sender(&self) -> Option<&Sender> {
        self.tcp().map(|c| &c.client.sender)
    }

    /// How connection-setup negotiation ended.
    pub fn negotiation(&self) -> Negotiation {
        match &self.transport {
            Some(t) => t.negotiation(),
            None => self.kept.negotiation.unwrap_or(Negotiation::NotNegotiated),
        }
    }

    /// The registry name of the algorithm the flow ran.
    pub fn cc_name(&self) -> &'static str {
        self.transport.as_ref().map_or(self.kept.cc_name, Transport::cc_name)
    }

    /// Whether the flow's segments carried the TCP-INT option.
    pub fn int_enabled(&self) -> bool {
        self.sender().map_or(self.kept.int_enabled, Sender::int_enabled)
    }

    /// Segments retransmitted.
    pub fn retransmits(&self) -> u64 {
        self.transport.as_ref().map_or(self.kept.retransmits, Transport::retransmits)
    }

    /// TLT's counters, when the flow used TLT.
    pub fn tlt(&self) -> Option<TltCounts> {
        match &self.transport {
            Some(t) => t.tlt_counts(),
            None => self.kept.tlt,
        }
    }

    /// Tail loss probes sent, when the flow used them.
    pub fn loss_probes(&self) -> Option<u64> {
        match self.sender() {
            Some(s) => s.tlp.as_ref().map(|t| t.probes),
            None => self.kept.loss_probes,
        }
    }

    /// Retransmission timeouts, in order.
    pub fn timeouts(&self) -> &[TimeoutRecord] {
        match &self.transport {
            Some(t) => t.timeouts(),
            None => &self.kept.timeouts,
        }
    }

    /// Bytes the receiving application got, in order and exactly once.
    pub fn bytes_delivered(&self) -> u64 {
        self.app_received
    }

    /// Hands the receiving application `len` bytes starting at byte `start`. Anything but the
    /// next bytes in order is a fault the conservation check reports.
    pub fn app_receive(&mut self, start: u64, len: u64) {
        if start != self.app_received && self.delivery_fault.is_none() {
            self.delivery_fault = Some(format!(
                "flow {}: the application got bytes {start}..{} after {} bytes (a gap or a duplicate)",
                self.id,
                start + len,
                self.app_received
            ));
        }
        self.app_received = self.app_received.max(start + len);
    }

    /// The backend connection a proxy's NIC spliced this client connection to, if it did:
    /// the bytes past the splice point reach the backend without the proxy's application.
    pub fn spliced_to(&self) -> Option<u32> {
        match self.relay.as_deref() {
            Some(&RelayEnd::Front { back, splicing: Splicing::Spliced, .. }) => back,
            _ => None,
        }
    }

    /// The first delivery fault, if any.
    pub fn delivery_fault(&self) -> Option<&str> {
        self.delivery_fault.as_deref()
    }

    /// Drops the unopened connection until the flow starts, keeping what the outputs report of
    /// it (the flow may never start before the run ends).
    pub fn wait_to_connect(&mut self) {
        self.release();
        self.waiting = true;
    }

    /// Whether the connection waits to be built at the flow's start.
    pub fn waits_to_connect(&self) -> bool {
        self.waiting
    }

    /// Takes its connection, built anew as the flow starts.
    pub fn connect(&mut self, transport: Option<Transport>) {
        self.transport = transport;
        self.kept = Kept::default();
        self.waiting = false;
    }

    /// Drops the transport's state, keeping what the outputs report.
    pub fn release(&mut self) {
        if let Some(t) = self.transport.take() {
            self.kept.negotiation = Some(t.negotiation());
            self.kept.cc_name = t.cc_name();
            self.kept.retransmits = t.retransmits();
            self.kept.timeouts = t.timeouts().to_vec();
            self.kept.tlt = t.tlt_counts();
            if let Some(c) = t.tcp() {
                let s = &c.client.sender;
                self.kept.int_enabled = s.int_enabled();
                self.kept.loss_probes = s.tlp.as_ref().map(|t| t.probes);
            }
        }
    }
}
