//! One flow: its identity and outcome, kept for the outputs, and its two live ends, each released
//! when it closes so memory follows the flows in flight. The bytes its application
//! receives are counted here, apart from the transport's own state, so the exactly-once,
//! in-order check is independent of what it checks.

use crate::ids::{FlowId, HostId};
use crate::cc::negotiation::Negotiation;
use crate::packet::Packet;
use crate::time::Time;
use crate::transport::tcp::{Sender, TcpClient, TcpServer, TimeWait, TimeoutRecord, TltCounts};
use crate::transport::{ClientEnd, ServerEnd, Side};
use std::collections::VecDeque;

pub mod build;
mod table;
pub mod waits;
pub use table::FlowTable;

/// The proxy's part of one request: what it reads before it picks a backend, and which.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relay {
    /// Bytes of header the proxy reads before it connects to the backend.
    pub header: u64,
    /// The backend host the header names.
    pub backend: usize,
}

/// How far the proxy is with one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Splicing {
    /// Not asked yet: the backend connection is not open, or data waits beyond a gap.
    Waiting,
    /// The NIC relays.
    Spliced,
    /// The host relays to the end (no splicing NIC, a full table, or per-hop options).
    OnHost,
}

/// The proxy's state for a client connection (the front) or its backend connection (the back).
#[derive(Clone, Copy, Debug)]
pub enum RelayEnd {
    /// The client's connection to the proxy.
    Front {
        /// What the request asks of the proxy.
        relay: Relay,
        /// The application and tag that hear when the backend has the request.
        app: (u32, u32),
        /// The backend connection, once opened.
        back: Option<FlowId>,
        /// Whether the NIC relays.
        splicing: Splicing,
    },
    /// The proxy's connection to the backend, relaying flow `front`.
    Back {
        /// The client connection it relays.
        front: FlowId,
    },
}

/// One flow.
pub struct Flow {
    /// Flow id (index in the arena).
    pub id: FlowId,
    /// Sending host.
    pub src: HostId,
    /// Receiving host.
    pub dst: HostId,
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
    /// The client's end (sender, requester) while it runs: it closes from its own host's events.
    pub client: Option<ClientEnd>,
    /// The server's end (receiver, responder) while it runs.
    pub server: Option<ServerEnd>,
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

/// What stays of the client's end once it is released.
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

crate::ids::indexed_by!(FlowId => Flow);

impl Flow {
    /// A flow not started yet.
    #[allow(clippy::too_many_arguments)]
    pub fn new(id: FlowId, src: HostId, dst: HostId, class: u16, prio: u8, size: Option<u64>, start: Time, ends: (ClientEnd, ServerEnd)) -> Flow {
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
            client: Some(ends.0),
            server: Some(ends.1),
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

    /// The TCP client, while it runs.
    pub fn tcp_client(&self) -> Option<&TcpClient> {
        self.client.as_ref().and_then(ClientEnd::tcp)
    }

    /// The TCP client, mutably (a probe may wrap the algorithm before the run).
    pub fn tcp_client_mut(&mut self) -> Option<&mut TcpClient> {
        self.client.as_mut().and_then(ClientEnd::tcp_mut)
    }

    /// The TCP server, while it runs.
    pub fn tcp_server(&self) -> Option<&TcpServer> {
        self.server.as_ref().and_then(ServerEnd::tcp)
    }

    /// Whether end `side` still runs.
    #[inline]
    pub fn is_open(&self, side: Side) -> bool {
        match side {
            Side::Client => self.client.is_some(),
            Side::Server => self.server.is_some(),
        }
    }

    /// End `side` closed, at its own host, and goes: a client leaves what the outputs report
    /// and what TIME_WAIT needs.
    pub fn close_end(&mut self, side: Side) {
        match side {
            Side::Client => {
                if let Some(c) = self.tcp_client() {
                    let (at, tw) = (c.closes_at(), c.time_wait().map(Box::new));
                    (self.closed_at, self.time_wait) = (at, tw);
                }
                self.release_client();
            }
            Side::Server => self.server = None,
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

    /// The TCP sender, while the client runs.
    pub fn sender(&self) -> Option<&Sender> {
        self.tcp_client().map(|c| &c.sender)
    }

    /// How connection-setup negotiation ended.
    pub fn negotiation(&self) -> Negotiation {
        match &self.client {
            Some(c) => c.negotiation(),
            None => self.kept.negotiation.unwrap_or(Negotiation::NotNegotiated),
        }
    }

    /// The registry name of the algorithm the flow ran.
    pub fn cc_name(&self) -> &'static str {
        self.client.as_ref().map_or(self.kept.cc_name, ClientEnd::cc_name)
    }

    /// Whether the flow's segments carried the TCP-INT option.
    pub fn int_enabled(&self) -> bool {
        self.sender().map_or(self.kept.int_enabled, Sender::int_enabled)
    }

    /// Segments retransmitted.
    pub fn retransmits(&self) -> u64 {
        self.client.as_ref().map_or(self.kept.retransmits, ClientEnd::retransmits)
    }

    /// TLT's counters, when the flow used TLT.
    pub fn tlt(&self) -> Option<TltCounts> {
        match &self.client {
            Some(c) => c.tlt_counts(),
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
        match &self.client {
            Some(c) => c.timeouts(),
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
    pub fn spliced_to(&self) -> Option<FlowId> {
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
        self.release_client();
        self.server = None;
        self.waiting = true;
    }

    /// Whether the connection waits to be built at the flow's start.
    pub fn waits_to_connect(&self) -> bool {
        self.waiting
    }

    /// Takes its ends, built anew as the flow starts.
    pub fn connect(&mut self, fresh: Flow) {
        (self.client, self.server) = (fresh.client, fresh.server);
        self.kept = Kept::default();
        self.waiting = false;
    }

    /// Takes the server's share of the record from `other`, this flow as a shard that runs the
    /// server's host kept it (`world/threads.rs`); the rest is the client's.
    pub(crate) fn take_server_side(&mut self, other: &mut Flow) {
        std::mem::swap(&mut self.server, &mut other.server);
        std::mem::swap(&mut self.delivery_fault, &mut other.delivery_fault);
        self.app_received = other.app_received;
        self.rx_done = other.rx_done;
    }

    /// Drops the client's state, keeping what the outputs report.
    fn release_client(&mut self) {
        if let Some(c) = self.client.take() {
            self.kept.negotiation = Some(c.negotiation());
            self.kept.cc_name = c.cc_name();
            self.kept.retransmits = c.retransmits();
            self.kept.timeouts = c.timeouts().to_vec();
            self.kept.tlt = c.tlt_counts();
            if let Some(c) = c.tcp() {
                self.kept.int_enabled = c.sender.int_enabled();
                self.kept.loss_probes = c.sender.tlp.as_ref().map(|t| t.probes);
            }
        }
    }
}
