//! An L7 proxy between closed-loop clients and backends (AccelTCP's HAProxy experiment): each
//! client keeps a number of requests outstanding, each request a new connection to the proxy
//! carrying a header and a body. The proxy reads the header, connects to the backend it names
//! (round robin across the backends), and relays the rest: on its host, or, when its NIC
//! splices, by joining the two connections on the NIC. A request completes when its last byte
//! reaches the backend.

use super::app::{App, AppIo, Request};
use super::{Classify, FlowSpec, Qos};
pub use crate::flow::{Relay, RelayEnd, Splicing};
use crate::flow::FlowTable;
use crate::ids::{FlowId, HostId};
use crate::time::Time;

/// What the proxy on a host does after one of a request's connections changed.
pub struct RelayStep {
    /// The request's client connection.
    pub front: FlowId,
    /// The backend connection, written on: its NIC may send.
    pub write: Option<FlowId>,
    /// The backend connection to open, the header being in.
    pub connect: Option<FlowSpec>,
    /// The proxy has not asked its NIC to splice yet.
    pub waiting: bool,
}

/// The proxy on host `h` acts on a change to one of a request's connections (`f`, the client's
/// or the backend's): once it has the header it asks for the backend connection the header
/// names; it writes on what it has read.
pub fn relay_step(flows: &mut FlowTable, f: FlowId, h: HostId, now: Time) -> Option<RelayStep> {
    let front = match flows[f].relay.as_deref() {
        Some(&RelayEnd::Front { .. }) if flows[f].dst == h => f,
        Some(&RelayEnd::Back { front }) if flows[f].src == h => front,
        _ => return None,
    };
    let flow = &flows[front];
    let got = flow.bytes_delivered();
    let &RelayEnd::Front { relay, back, splicing, .. } = flow.relay.as_deref()? else { return None };
    let mut step = RelayStep { front, write: None, connect: None, waiting: splicing == Splicing::Waiting };
    match back {
        Some(b) => {
            if let Some(c) = flows[b].tcp_client_mut() {
                c.sender.set_written(got);
                step.write = Some(b);
            }
        }
        None if got >= relay.header => {
            step.connect = Some(FlowSpec {
                src: h.index(),
                dst: relay.backend,
                size: flow.size,
                start: now,
                class: flow.class as usize,
                ..FlowSpec::default()
            });
        }
        None => {}
    }
    Some(step)
}

/// Makes the new flow `b` the backend connection of client connection `front`, with what the
/// proxy has read so far written on it.
pub fn attach_backend(flows: &mut FlowTable, front: FlowId, b: FlowId) {
    let got = flows[front].bytes_delivered();
    let Some(&RelayEnd::Front { app, .. }) = flows[front].relay.as_deref() else { return };
    let back = &mut flows[b];
    back.app = Some(app);
    back.relay = Some(Box::new(RelayEnd::Back { front }));
    if let Some(c) = back.tcp_client_mut() {
        c.sender.set_written(got);
    }
    if let Some(RelayEnd::Front { back, .. }) = flows[front].relay.as_deref_mut() {
        *back = Some(b);
    }
}

/// The configuration of a proxied client population.
pub struct ProxyConfig {
    /// Client host ordinals.
    pub clients: Vec<usize>,
    /// The proxy's host ordinal.
    pub proxy: usize,
    /// Backend host ordinals.
    pub backends: Vec<usize>,
    /// Requests each client keeps outstanding.
    pub outstanding: usize,
    /// Header bytes of each request.
    pub header: u64,
    /// Body bytes after the header.
    pub body: u64,
    /// When clients start.
    pub start: Time,
    /// No request is issued at or after this time.
    pub stop: Time,
    /// Picks the class of each flow from its endpoints.
    pub class: Classify,
    /// QoS of every flow.
    pub qos: Qos,
}

/// Clients of an L7 proxy.
pub struct ProxyClients {
    cfg: ProxyConfig,
    /// When each slot's request was issued (`None`: idle). Slot `i` is client `i / outstanding`'s.
    slots: Vec<Option<Time>>,
    next_backend: usize,
    started: bool,
}

impl ProxyClients {
    /// The clients of `cfg`.
    pub fn new(cfg: ProxyConfig) -> ProxyClients {
        let slots = vec![None; cfg.clients.len() * cfg.outstanding];
        ProxyClients { cfg, slots, next_backend: 0, started: false }
    }

    fn issue(&mut self, slot: usize, now: Time, io: &mut AppIo) {
        if now >= self.cfg.stop {
            self.slots[slot] = None;
            return;
        }
        let client = self.cfg.clients[slot / self.cfg.outstanding];
        let backend = self.cfg.backends[self.next_backend % self.cfg.backends.len()];
        self.next_backend += 1;
        let spec = FlowSpec {
            src: client,
            dst: self.cfg.proxy,
            size: Some(self.cfg.header + self.cfg.body),
            start: now,
            class: (self.cfg.class)(client, self.cfg.proxy),
            qos: self.cfg.qos,
            response: None,
            relay: Some(Relay { header: self.cfg.header, backend }),
        };
        io.open.push((spec, slot as u32));
        self.slots[slot] = Some(now);
    }
}

impl App for ProxyClients {
    fn start_time(&self) -> Time {
        self.cfg.start
    }

    fn start(&mut self, now: Time, io: &mut AppIo) {
        self.started = true;
        // Slots start a microsecond apart: started together, every request would reach the
        // proxy's core at once and the population would run in lockstep waves.
        for slot in 0..self.slots.len() {
            self.slots[slot] = Some(now);
            io.timers.push((now + Time::from_us(slot as u64), slot as u32));
        }
    }

    fn on_timer(&mut self, tag: u32, now: Time, io: &mut AppIo) {
        self.issue(tag as usize, now, io);
    }

    fn on_delivered(&mut self, tag: u32, now: Time, io: &mut AppIo) {
        let slot = tag as usize;
        let Some(since) = self.slots[slot] else {
            debug_assert!(false, "a delivery for an idle slot");
            return;
        };
        let client = self.cfg.clients[slot / self.cfg.outstanding];
        io.completed.push(Request { class: (self.cfg.class)(client, self.cfg.proxy), start: since, end: now });
        self.issue(slot, now, io);
    }

    fn done(&self) -> bool {
        self.started && self.slots.iter().all(Option::is_none)
    }
}
