//! The world: every element in arenas indexed by small integers, the clock, and the one `match`
//! that dispatches events to the element they concern. Elements own their behaviour (switches and
//! ports in `net/`, NICs in `host/`, connections in `transport/`); the world only routes events
//! to them and carries out what they report.

use crate::cc::{CcFactory, EcnMode, FlowContext};
use crate::context::{Counters, Cx, Event, SampleKind, Streams, TimerKind};
use crate::event::EventQueue;
use crate::flow::Flow;
use crate::host::cpu::{Cpu, CpuConfig};
use crate::host::nic::Nic;
use crate::host::offload::{Offload, OffloadConfig};
use crate::host::pacer::TokenBucket;
use crate::host::splice::Relayed;
use crate::host::telemetry::{TelemetryLog, TelemetryRow};
use crate::net::capture::{Capture, CaptureSpec};
use crate::net::circuit::{CircuitParts, Tor};
use crate::net::link::{Flying, Link};
use crate::net::pfc::{Pfc, PfcConfig};
use crate::net::port::{Port, TxMeter};
use crate::net::qdisc::{Discipline, SharedBuffer};
use crate::net::routing::Routes;
use crate::net::switch::{ecmp_pick, IntStamping, Switch};
use crate::net::topology::{Graph, NodeKind};
use crate::packet::hpcc_int::HopSlab;
use crate::packet::tcp_int::IntEncoding;
use crate::packet::Packet;
use crate::prefetch::{prefetch, prefetch_bytes};
use crate::time::{Rate, Time};
use crate::transport::rdma::{ClassNic, QueuePair, RdmaConfig, RdmaTlt};
use crate::transport::tcp::{IntStacks, Proposal, Route, Sender, State, TcpConfig, TcpConnection};
use crate::transport::{Io, Side, Transport};
use crate::workload::app::{App, AppIo, Request};
use crate::workload::proxy::{RelayEnd, Splicing};
use crate::workload::FlowSpec;
use std::collections::HashMap;

pub use crate::net::naming::node_names;

/// What a node is, with its index in the matching arena.
#[derive(Clone, Copy, Debug)]
enum Role {
    Host(u32),
    Switch(u32),
}

/// A traffic class as the run uses it.
pub struct ClassRuntime {
    /// Class name.
    pub name: String,
    /// Algorithm registry name.
    pub cc: String,
    /// Builds the algorithm for each flow.
    pub factory: CcFactory,
    /// Switch priority queue.
    pub priority: u8,
    /// The algorithm flows fall back to when negotiation fails, and its builder.
    pub fallback: (String, CcFactory),
    /// The class's flows run on RDMA queue pairs instead of TCP.
    pub rdma: bool,
    /// What its queue pairs' NICs do where sources differ.
    pub nic: ClassNic,
}

/// How `fct_buckets.csv` groups flows by size.
#[derive(Clone, Debug, PartialEq)]
pub enum Bucketing {
    /// Equal-count buckets of this percent of the flows each.
    Percent(f64),
    /// Explicit ascending upper edges in bytes.
    Edges(Vec<u64>),
}

impl Default for Bucketing {
    fn default() -> Self {
        Bucketing::Percent(5.0)
    }
}

/// TCP-INT as the run uses it.
#[derive(Clone, Debug)]
pub struct IntRuntime {
    /// Stamping per switch ordinal; `None` for legacy switches.
    pub switches: Vec<Option<IntStamping>>,
    /// The fabric-wide encoding senders decode echoes with.
    pub encoding: IntEncoding,
    /// Unit of the latency fields.
    pub latency_unit: Time,
    /// Transmit-rate window of INT switch ports.
    pub util_window: Time,
    /// Every flow carries the option.
    pub all_flows: bool,
    /// Per host ordinal: the stack supports TCP-INT.
    pub host_supports: Vec<bool>,
}

/// Everything a world is built from, validated by the scenario.
pub struct Parts {
    /// Seed of every random stream.
    pub seed: u64,
    /// End time, if any.
    pub duration: Option<Time>,
    /// Stop when every finite flow finished.
    pub stop_when_done: bool,
    /// Shared buffer per switch, and its dynamic-threshold factor.
    pub buffer: (u64, f64),
    /// Strict-priority queues per switch port.
    pub priorities: u8,
    /// The queue discipline of each switch port, by global port id (host ports: unused).
    pub disciplines: Vec<Discipline>,
    /// TCP settings.
    pub tcp: TcpConfig,
    /// RDMA queue-pair settings, and TLT's every-N marking when TLT is on.
    pub rdma: (RdmaConfig, Option<RdmaTlt>),
    /// Classes by index; `default` is always present.
    pub classes: Vec<ClassRuntime>,
    /// Every flow, sorted by start time.
    pub flows: Vec<FlowSpec>,
    /// Closed-loop applications that open flows during the run.
    pub apps: Vec<Box<dyn App>>,
    /// Ports whose queues are sampled.
    pub queue_ports: Vec<u32>,
    /// Queue sampling period.
    pub queue_interval: Time,
    /// Flows whose windows are sampled (empty list = all; None = no sampling).
    pub cwnd_flows: Option<Vec<u32>>,
    /// Window sampling period.
    pub cwnd_interval: Time,
    /// How `fct_buckets.csv` groups flows.
    pub bucketing: Bucketing,
    /// Telemetry rows: interval and flows (`None`: no rows, histograms only).
    pub telemetry: Option<(Time, Option<Vec<u32>>)>,
    /// TCP-INT configuration.
    pub int: IntRuntime,
    /// Packet capture.
    pub capture: Option<CaptureSpec>,
    /// PFC: each switch's settings, from its ports.
    pub pfc: Option<PfcSettings>,
    /// The circuit side of a reconfigurable network's ToRs.
    pub circuit: Option<CircuitParts>,
    /// Hosts with a modelled CPU.
    pub cpu: Option<CpuConfig>,
    /// Hosts whose NIC offloads connection setup and teardown.
    pub offload: Option<OffloadConfig>,
}

/// Bytes of the interim response a proxy sends when it is ready for a request's body
/// (`HTTP/1.1 100 Continue` and its blank line).
const CONTINUE_BYTES: u32 = 25;

/// Builds a switch's PFC settings from its ports (their rates and delays size the headroom).
pub type PfcSettings = Box<dyn Fn(&[Port]) -> PfcConfig>;

/// One queue-depth sample.
#[derive(Clone, Copy, Debug)]
pub struct QueueSample {
    /// Sample time.
    pub t: Time,
    /// Global port id.
    pub port: u32,
    /// Bytes queued (at a host: control packets and the data its flows' windows let out).
    pub bytes: u64,
}

/// One congestion-window sample, with the algorithm's named state.
#[derive(Clone, Debug)]
pub struct CwndSample {
    /// Sample time.
    pub t: Time,
    /// Flow id.
    pub flow: u32,
    /// Window in bytes.
    pub cwnd: u64,
    /// The algorithm's state variables at that time, in the order it names them.
    pub state: Vec<(&'static str, f64)>,
}

/// Bytes of ports beyond which they no longer stay in a core's cache (the 1-2 MB of a server
/// core's L2): a 10,240-host fat tree has 12 MB, ws320 0.4 MB.
const PORTS_CACHED: usize = 2 << 20;

/// The simulated datacenter.
pub struct World {
    q: EventQueue<Event>,
    /// Simulated time: the last event's, or the end time once the run reached it.
    clock: Time,
    roles: Vec<Role>,
    node_names: Vec<String>,
    /// Ports of node n are `port_base[n]..port_base[n + 1]`.
    port_base: Vec<u32>,
    /// The event loop routes the next packet a switch receives ahead, to prefetch its egress
    /// port: only where the ports outgrow the cache, as elsewhere routing twice costs more.
    route_ahead: bool,
    ports: Vec<Port>,
    switches: Vec<Switch>,
    nics: Vec<Nic>,
    routes: Routes,
    flows: Vec<Flow>,
    /// Persistent connections by (source, destination, class).
    connections: HashMap<(usize, usize, usize), u32>,
    /// Flows known at build time, started in order by a chain of events; later ones come from apps.
    static_flows: usize,
    /// The static flows' specs, from which each one's connection is built when it starts.
    specs: Vec<FlowSpec>,
    next_start: usize,
    apps: Vec<Box<dyn App>>,
    app_io: AppIo,
    io: Io,
    requests: Vec<Request>,
    classes: Vec<ClassRuntime>,
    tcp: TcpConfig,
    rdma: (RdmaConfig, Option<RdmaTlt>),
    rng: Streams,
    counters: Counters,
    unfinished: usize,
    endless: usize,
    end: Option<Time>,
    stop_when_done: bool,
    stopped: bool,
    events: u64,
    seed: u64,
    queue_ports: Vec<u32>,
    queue_interval: Time,
    queue_samples: Vec<QueueSample>,
    cwnd_flows: Vec<u32>,
    cwnd_interval: Time,
    cwnd_samples: Vec<CwndSample>,
    bucketing: Bucketing,
    int: IntRuntime,
    telemetry: TelemetryLog,
    capture: Option<Box<Capture>>,
    /// HPCC per-hop record stacks of the packets (and receivers) that hold one.
    hops: HopSlab,
    /// The packets on the wires.
    flying: Flying,
    /// The circuit schedule of a reconfigurable network.
    circuit: Option<CircuitParts>,
    /// Each host's CPU, where it is modelled; empty when no host's is, so the packet path
    /// checks a length only.
    cpus: Vec<Option<Box<Cpu>>>,
    /// Each host's NIC offload, where it has one; empty when no host has one.
    offloads: Vec<Option<Box<Offload>>>,
}

/// The circuit side of node `n` when it is a ToR of the reconfigurable network `c`: the ToRs
/// follow the hosts, and the packet and circuit switches follow the ToRs.
fn tor_of(c: &CircuitParts, graph: &Graph, n: usize, ports: &[(usize, usize)]) -> Option<Box<Tor>> {
    let first_tor = graph.hosts().len();
    let rack = n.checked_sub(first_tor).filter(|&r| r < c.racks as usize)?;
    let (eps, ocs) = (first_tor + c.racks as usize, first_tor + c.racks as usize + 1);
    let local = |peer: usize| ports.iter().position(|&(_, p)| p == peer).map(|i| i as u16);
    let uplinks = (local(eps)?, local(ocs)?);
    let tor = Tor::new(rack as u16, c.racks, c.hosts_per_rack, uplinks, c.schedule.clone(), c.sizing, c.ece_signal);
    Some(Box::new(tor))
}

/// Mixes a flow's endpoints and id into an ECMP hash (stands in for the 5-tuple).
fn flow_hash(src: u32, dst: u32, id: u32, reverse: bool) -> u32 {
    let mut x = ((src as u64) << 40) ^ ((dst as u64) << 20) ^ id as u64 ^ ((reverse as u64) << 63);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x as u32
}

/// Borrows the context elements act through out of the world's own fields.
macro_rules! cx {
    ($w:ident, $now:expr) => {
        Cx {
            now: $now,
            events: &mut $w.q,
            counters: &mut $w.counters,
            hops: &mut $w.hops,
            flying: &mut $w.flying,
            rng: &mut $w.rng,
            capture: $w.capture.as_deref_mut(),
        }
    };
}

impl World {
    /// Builds the world from validated parts over `graph`: ports, switches, NICs, every flow.
    pub fn new(graph: &Graph, p: Parts) -> World {
        let routes = Routes::compute(graph);
        let node_ports = graph.ports();
        let node_names = node_names(graph);
        let (mut nh, mut ns) = (0u32, 0u32);
        let roles: Vec<Role> = graph
            .nodes
            .iter()
            .map(|kind| match kind {
                NodeKind::Host => {
                    nh += 1;
                    Role::Host(nh - 1)
                }
                NodeKind::Switch { .. } => {
                    ns += 1;
                    Role::Switch(ns - 1)
                }
            })
            .collect();
        let bands = p.priorities.max(1) as usize;
        let mut ports = Vec::new();
        let mut port_base = Vec::with_capacity(graph.nodes.len() + 1);
        for (n, plist) in node_ports.iter().enumerate() {
            port_base.push(ports.len() as u32);
            for (local, &(li, peer)) in plist.iter().enumerate() {
                let l = &graph.links[li];
                let link = Link { delay: l.delay, loss: l.loss, in_flight: Default::default() };
                let b = if matches!(roles[n], Role::Switch(_)) { bands } else { 1 };
                let mut port = Port::new(n as u32, local as u16, peer as u32, l.rate, link, b);
                if let Some(d) = p.disciplines.get(ports.len()) {
                    port.discipline = *d;
                }
                ports.push(port);
            }
        }
        port_base.push(ports.len() as u32);
        // Each port's peer port: the one at the far end of the same link, facing back.
        for n in 0..node_ports.len() {
            for (local, &(li, peer)) in node_ports[n].iter().enumerate() {
                let back = node_ports[peer].iter().position(|&(l2, _)| l2 == li).expect("links are bidirectional");
                ports[port_base[n] as usize + local].peer_port = port_base[peer] + back as u32;
            }
        }
        let mut switches = Vec::new();
        let mut nics = Vec::new();
        for (n, role) in roles.iter().enumerate() {
            match *role {
                Role::Switch(s) => switches.push(Switch {
                    node: n as u32,
                    first_port: port_base[n],
                    buffer: SharedBuffer { size: p.buffer.0, used: 0, alpha: p.buffer.1 },
                    salt: flow_hash(s, n as u32, 0x5eed, false),
                    int: p.int.switches[s as usize],
                    pfc: p.pfc.as_ref().map(|cfg| Pfc::new(cfg(&ports[port_base[n] as usize..port_base[n + 1] as usize]))),
                    tor: p.circuit.as_ref().and_then(|c| tor_of(c, graph, n, &node_ports[n])),
                }),
                Role::Host(h) => nics.push(Nic { host: h, port: port_base[n], ..Nic::default() }),
            }
        }
        for sw in switches.iter().filter(|s| s.int.is_some()) {
            let n = sw.node as usize;
            for port in &mut ports[port_base[n] as usize..port_base[n + 1] as usize] {
                port.meter = Some(TxMeter::new(p.int.util_window));
            }
        }
        let capture = p.capture.map(|c| {
            let host_ports = ports.iter().map(|port| matches!(roles[port.node as usize], Role::Host(_))).collect();
            Box::new(Capture::new(c, host_ports))
        });
        let mut world = World {
            q: EventQueue::new(),
            clock: Time::ZERO,
            roles,
            node_names,
            port_base,
            route_ahead: ports.len() * std::mem::size_of::<Port>() > PORTS_CACHED,
            ports,
            switches,
            nics,
            routes,
            flows: Vec::with_capacity(p.flows.len()),
            connections: HashMap::new(),
            static_flows: p.flows.len(),
            specs: Vec::new(),
            next_start: 0,
            apps: p.apps,
            app_io: AppIo::default(),
            io: Io::default(),
            requests: Vec::new(),
            classes: p.classes,
            tcp: p.tcp,
            rdma: p.rdma,
            rng: Streams::new(p.seed),
            counters: Counters::default(),
            unfinished: 0,
            endless: 0,
            end: p.duration,
            stop_when_done: p.stop_when_done,
            stopped: false,
            events: 0,
            seed: p.seed,
            queue_ports: p.queue_ports,
            queue_interval: p.queue_interval,
            queue_samples: Vec::new(),
            cwnd_flows: Vec::new(),
            cwnd_interval: p.cwnd_interval,
            cwnd_samples: Vec::new(),
            bucketing: p.bucketing,
            capture,
            int: p.int,
            telemetry: match p.telemetry {
                Some((interval, flows)) => TelemetryLog::new(interval, flows),
                None => TelemetryLog::new(Time::ZERO, Some(Vec::new())),
            },
            hops: HopSlab::default(),
            flying: Flying::default(),
            circuit: p.circuit,
            cpus: Vec::new(),
            offloads: Vec::new(),
        };
        let hosts = world.nics.len() as u32;
        if let Some(c) = p.cpu.as_ref().filter(|c| !c.hosts.is_empty()) {
            world.cpus = (0..hosts).map(|h| c.hosts.contains(&(h as usize)).then(|| Box::new(Cpu::new(h, c)))).collect();
        }
        if let Some(o) = p.offload.as_ref().filter(|o| !o.hosts.is_empty()) {
            world.offloads = (0..hosts).map(|h| o.hosts.contains(&(h as usize)).then(|| Box::new(Offload::new(h, o, p.seed)))).collect();
        }
        for spec in &p.flows {
            let f = world.add_flow(spec);
            // Built to fill in the record (the flow's real MSS, base RTT and ideal FCT); the
            // connection itself waits for the flow's start, so memory grows with the flows
            // that have started, not with the whole workload.
            world.flows[f as usize].wait_to_connect();
        }
        world.specs = p.flows;
        for (a, app) in world.apps.iter().enumerate() {
            world.q.push(app.start_time(), Event::AppStart(a as u32));
        }
        world.cwnd_flows = match p.cwnd_flows {
            Some(v) if !v.is_empty() => v,
            Some(_) => (0..world.flows.len() as u32).collect(),
            None => Vec::new(),
        };
        if let Some(f) = world.flows.first() {
            world.q.push(f.start, Event::FlowStart(0));
        }
        if !world.queue_ports.is_empty() {
            world.q.push(Time::ZERO, Event::Sample(SampleKind::Queues));
        }
        if !world.cwnd_flows.is_empty() {
            world.q.push(Time::ZERO, Event::Sample(SampleKind::Cwnd));
        }
        if let Some(end) = world.end {
            world.q.push(end, Event::End);
        }
        if world.circuit.is_some() {
            world.q.push(Time::ZERO, Event::Circuit);
        }
        world
    }

    /// Adds a flow; flows known at build time must be added in start-time order.
    fn add_flow(&mut self, spec: &FlowSpec) -> u32 {
        let flow = self.new_flow(spec, self.flows.len() as u32);
        self.push_flow(flow, spec)
    }

    /// Flow `id` of `spec`, with its record filled in and its connection built.
    fn new_flow(&self, spec: &FlowSpec, id: u32) -> Flow {
        let (src, dst) = (spec.src as u32, spec.dst as u32);
        let hash_fwd = flow_hash(src, dst, id, false);
        let hash_rev = flow_hash(dst, src, id, true);
        let class = &self.classes[spec.class];
        let link_rate = self.ports[self.nics[spec.src].port as usize].rate;
        if class.rdma {
            return self.new_queue_pair(spec, id, hash_fwd, hash_rev, link_rate);
        }
        let mss = self.tcp.mss();
        let mut ctx = FlowContext { mss, init_cwnd: self.tcp.init_cwnd as u64 * mss, link_rate, base_rtt: Time::ZERO };
        // What the algorithm needs decides the options its segments carry, and so the flow's
        // real MSS, which its base RTT and ideal FCT are measured at.
        let (needs_int, needs_hops) = {
            let probe = (class.factory)(&ctx);
            (probe.needs_int(), probe.needs_hop_records())
        };
        let both_int = self.int.host_supports[spec.src] && self.int.host_supports[spec.dst];
        let mut flow_mss = mss;
        if both_int && (needs_int || self.int.all_flows) {
            flow_mss -= crate::packet::tcp_int::LEN as u64;
        }
        if both_int && needs_hops {
            flow_mss -= crate::packet::hpcc_int::HEADER_BYTES as u64;
        }
        // The algorithm's T is the path's round trip at full frames of the configured MTU, as
        // the HPCC simulator computes it; the flow's record uses its own first frame.
        let frame_at = |m: u64| self.tcp.frame(spec.size.unwrap_or(m).min(m)) as u64;
        ctx.base_rtt = self.path_rtt(src, dst, hash_fwd, hash_rev, frame_at(mss));
        let base_rtt = if flow_mss == mss { ctx.base_rtt } else { self.path_rtt(src, dst, hash_fwd, hash_rev, frame_at(flow_mss)) };
        let sender = Sender::new(&self.tcp, spec.size, (class.factory)(&ctx));
        let offer = crate::cc::negotiation::Offer {
            needs_int: sender.cc_needs_int(),
            needs_ecn: self.tcp.ecn && sender.cc.ecn_mode() == EcnMode::PerPacket,
            needs_hop_records: sender.cc_needs_hop_records(),
        };
        let route = Route { flow: id, src, dst, hash_fwd, hash_rev, prio: class.priority };
        let int = IntStacks {
            encoding: self.int.encoding,
            latency_unit: self.int.latency_unit,
            server: self.int.host_supports[spec.dst],
        };
        let proposal = Proposal {
            offer,
            local_int: self.int.host_supports[spec.src],
            fallback: (class.fallback.1.clone(), ctx),
            int_all_flows: self.int.all_flows,
        };
        // A burst of two full frames lets the limiter keep a window-limited flow busy.
        let limiter = spec.qos.target_rate.map(|r| TokenBucket::new(r, 2 * self.tcp.frame(mss) as u64));
        let mut conn = TcpConnection::new(&self.tcp, route, sender, int, proposal, limiter);
        if let Some(r) = spec.response {
            conn.set_response(r);
        }
        if self.offloads.get(spec.dst).and_then(Option::as_deref).is_some_and(|o| o.lazy_tcb) {
            conn.set_lazy_tcb();
        }
        let mut flow = Flow::new(id, src, dst, spec.class as u16, class.priority, spec.size, spec.start, Transport::Tcp(Box::new(conn)));
        flow.base_rtt = base_rtt;
        if let Some(s) = spec.size {
            flow.ideal_fct = base_rtt + link_rate.tx_time(self.tcp.wire_bytes_at(s, flow_mss));
        }
        flow
    }

    /// Flow `id` of an RDMA class, as a queue pair; its algorithm's T is the path's round trip
    /// at full packets, and IRN's cap one bandwidth-delay product of it.
    fn new_queue_pair(&self, spec: &FlowSpec, id: u32, hash_fwd: u32, hash_rev: u32, link_rate: Rate) -> Flow {
        let (src, dst) = (spec.src as u32, spec.dst as u32);
        let class = &self.classes[spec.class];
        let (cfg, tlt) = &self.rdma;
        let mtu = cfg.mtu as u64;
        let full = self.path_rtt_with(src, dst, hash_fwd, hash_rev, cfg.frame(mtu) as u64, cfg.ack_frame() as u64);
        let ctx = FlowContext { mss: mtu, init_cwnd: link_rate.bytes_in(full).max(mtu), link_rate, base_rtt: full };
        let first = cfg.frame(spec.size.unwrap_or(mtu).min(mtu)) as u64;
        let base_rtt = self.path_rtt_with(src, dst, hash_fwd, hash_rev, first, cfg.ack_frame() as u64);
        let route = Route { flow: id, src, dst, hash_fwd, hash_rev, prio: class.priority };
        let mut qp = QueuePair::new(cfg, class.nic, *tlt, route, spec.size, (class.factory)(&ctx), link_rate, link_rate.bytes_in(full));
        if !(self.int.host_supports[spec.src] && self.int.host_supports[spec.dst]) {
            // Per-hop records need INT at both ends, as on TCP; there is no handshake to ask.
            qp = qp.without_hop_records();
        }
        let ideal = spec.size.map(|s| base_rtt + link_rate.tx_time(cfg.wire_bytes(s)));
        let mut flow = Flow::new(id, src, dst, spec.class as u16, class.priority, spec.size, spec.start, Transport::Rdma(Box::new(qp)));
        flow.base_rtt = base_rtt;
        if let Some(t) = ideal {
            flow.ideal_fct = t;
        }
        flow
    }

    /// Builds flow `f`'s connection now, if it still waits for its start: a probe can then wrap
    /// its algorithm before the run, and a packet ahead of the start finds the server listening.
    #[inline]
    pub fn connect_now(&mut self, f: u32) {
        if self.flows[f as usize].waits_to_connect() {
            self.connect_waiting(f);
        }
    }

    /// Builds a waiting flow's connection; out of line, as the stack checks on every packet.
    #[cold]
    #[inline(never)]
    fn connect_waiting(&mut self, f: u32) {
        let fresh = self.new_flow(&self.specs[f as usize], f);
        self.flows[f as usize].connect(fresh.transport);
    }

    /// Records a new flow's QoS and counts it among the finite or endless flows.
    fn push_flow(&mut self, mut flow: Flow, spec: &FlowSpec) -> u32 {
        flow.deadline = spec.qos.deadline;
        flow.response = spec.response;
        match spec.size {
            Some(_) => self.unfinished += 1,
            None => self.endless += 1,
        }
        let id = flow.id;
        self.flows.push(flow);
        id
    }

    /// Round trip with empty queues along the flow's ECMP path: propagation both ways, the first
    /// frame's serialization at each hop after the first (store and forward), and the ACK's
    /// serialization at every hop back. A one-packet flow takes exactly its ideal FCT.
    fn path_rtt(&self, src: u32, dst: u32, hash_fwd: u32, hash_rev: u32, frame: u64) -> Time {
        self.path_rtt_with(src, dst, hash_fwd, hash_rev, frame, self.tcp.frame(0) as u64)
    }

    /// [`Self::path_rtt`] with the transport's own ACK frame.
    fn path_rtt_with(&self, src: u32, dst: u32, hash_fwd: u32, hash_rev: u32, frame: u64, ack_frame: u64) -> Time {
        let forward = self.walk(src, dst, hash_fwd, |i, port| {
            port.link.delay + if i == 0 { Time::ZERO } else { port.rate.tx_time(frame) }
        });
        let back = self.walk(dst, src, hash_rev, |_, port| port.link.delay + port.rate.tx_time(ack_frame));
        forward + back
    }

    /// Sums `cost(hop index, egress port)` along the path a packet with `hash` takes.
    fn walk(&self, from: u32, to: u32, hash: u32, mut cost: impl FnMut(usize, &Port) -> Time) -> Time {
        let mut total = Time::ZERO;
        let mut port = self.nics[from as usize].port as usize;
        for i in 0..256 {
            total += cost(i, &self.ports[port]);
            let node = self.ports[port].peer_node as usize;
            let sw = match self.roles[node] {
                Role::Host(_) => break,
                Role::Switch(s) => s as usize,
            };
            let hops = self.routes.next_hops(node, to as usize);
            if hops.is_empty() {
                break;
            }
            let local = hops[ecmp_pick(hash, self.switches[sw].salt, hops.len())];
            port = self.port_base[node] as usize + local as usize;
        }
        total
    }

    /// Runs until the end time, the last flow finishing (when asked), or no events remain.
    /// `progress` is called now and then with the current simulated time.
    pub fn run(&mut self, progress: &mut dyn FnMut(Time)) {
        while !self.stopped {
            let Some((now, ev)) = self.q.pop() else { break };
            self.prefetch_ahead();
            self.clock = now;
            self.events += 1;
            self.step(now, ev);
            if self.events & 0xffff == 0 {
                progress(now);
            }
        }
    }

    /// Starts loading what the next events will touch, so it arrives while this one runs: a
    /// run's time goes to memory misses on ports and packets more than to instructions.
    #[inline(always)]
    fn prefetch_ahead(&self) {
        let (next, after) = self.q.next_two_in_slot();
        // Two events ahead: the packet arriving and the port it arrives from, or the port whose
        // serializer frees up.
        match after {
            Some(Event::Arrive(p, place)) => {
                let port = &self.ports[p as usize];
                prefetch_bytes(port as *const Port as *const u8, 64);
                prefetch_bytes(&port.link.in_flight as *const _ as *const u8, 32);
                if let Some(pkt) = self.flying.address(place) {
                    prefetch_bytes(pkt as *const u8, std::mem::size_of::<Packet>());
                }
            }
            Some(Event::TxDone(p)) => prefetch(&self.ports[p as usize]),
            _ => {}
        }
        // Next: the wire's handle of the packet behind the arriving one, whose arrival it
        // schedules, and the port a switch will send the packet out of (the arrival's port and
        // packet are in cache by now). In a large fabric that port is a memory miss otherwise.
        if let Some(Event::Arrive(p, place)) = next {
            let port = &self.ports[p as usize];
            if let Some(behind) = port.link.in_flight.get(1) {
                prefetch(behind);
            }
            if self.route_ahead {
                self.prefetch_egress(port.peer_node, place);
            }
        }
    }

    /// Routes the packet in `place`, about to reach `node`, ahead, and prefetches the port a
    /// switch there will send it out of. Out of line, so the loop stays as lean where it is off.
    #[inline(never)]
    fn prefetch_egress(&self, node: u32, place: u32) {
        if let Role::Switch(s) = self.roles[node as usize] {
            let sw = &self.switches[s as usize];
            if let Some(egress) = sw.route(self.flying.get(place), &self.routes) {
                if let Some(out) = self.ports.get(sw.first_port as usize + egress) {
                    prefetch_bytes(out as *const Port as *const u8, 4 * 64);
                }
            }
        }
    }

    /// The one dispatch: each event goes to the element it concerns.
    fn step(&mut self, now: Time, ev: Event) {
        match ev {
            Event::Arrive(p, place) => {
                let port = &mut self.ports[p as usize];
                let (node, ingress) = (port.peer_node, port.peer_port);
                let (_, head) = port.link.in_flight.pop_front().expect("an arrival event for the head packet");
                debug_assert_eq!(head, place);
                if let Some(&(next, behind)) = port.link.in_flight.front() {
                    self.q.push(next, Event::Arrive(p, behind));
                }
                let mut pkt = self.flying.take(head);
                if pkt.is_pfc() {
                    self.on_pfc_frame(ingress, &pkt, now);
                    return;
                }
                match self.roles[node as usize] {
                    Role::Switch(s) => {
                        let sw = &mut self.switches[s as usize];
                        let ports = &mut self.ports[sw.first_port as usize..self.port_base[node as usize + 1] as usize];
                        let mut cx = cx!(self, now);
                        sw.receive((ingress - sw.first_port) as u16, &mut pkt, ports, &self.routes, &mut cx);
                    }
                    Role::Host(h) => self.host_receive(h, pkt, now),
                }
            }
            Event::TxDone(p) => {
                let node = self.ports[p as usize].node;
                match self.roles[node as usize] {
                    Role::Switch(s) => {
                        let sw = &mut self.switches[s as usize];
                        let first = sw.first_port as usize;
                        let ports = &mut self.ports[first..self.port_base[node as usize + 1] as usize];
                        let mut cx = cx!(self, now);
                        sw.dequeue(p as usize - first, ports, &mut cx);
                    }
                    Role::Host(h) => {
                        self.ports[p as usize].tx_event_pending = false;
                        self.nic_send(h, now);
                    }
                }
            }
            Event::PauseEnd(p) => self.pause_ended(p, now),
            Event::NicWake(h) => {
                self.nics[h as usize].wake_at = None;
                self.nic_send(h, now);
            }
            Event::FlowStart(f) => {
                if (f as usize) < self.static_flows {
                    self.next_start = f as usize + 1;
                    if self.next_start < self.static_flows {
                        self.q.push(self.flows[self.next_start].start, Event::FlowStart(self.next_start as u32));
                    }
                    self.connect_now(f);
                }
                self.with_transport(f, now, |t, io, cx| t.open(io, cx));
            }
            Event::Timer(f, kind, gen) => self.on_timer(f, kind, gen, now),
            Event::CpuDone(h, core) => self.cpu_done(h, core as usize, now),
            Event::NicTick(h) => self.nic_tick(h, now),
            Event::End => {
                self.stopped = true;
                // Not an event of the network: keep the count to the simulation's own work.
                self.events -= 1;
            }
            Event::AppStart(a) => {
                let mut io = std::mem::take(&mut self.app_io);
                self.apps[a as usize].start(now, &mut io);
                self.apply_app_io(a, io, now);
            }
            Event::AppTimer(a, tag) => {
                let mut io = std::mem::take(&mut self.app_io);
                self.apps[a as usize].on_timer(tag, now, &mut io);
                self.apply_app_io(a, io, now);
            }
            Event::Circuit => {
                for sw in self.switches.iter_mut().filter(|s| s.tor.is_some()) {
                    let node = sw.node as usize;
                    let ports = &mut self.ports[sw.first_port as usize..self.port_base[node + 1] as usize];
                    let mut cx = cx!(self, now);
                    sw.serve_uplinks(ports, &mut cx);
                }
                if let Some(next) = self.circuit.as_ref().and_then(|c| c.schedule.next_change(now)) {
                    self.q.push(next, Event::Circuit);
                }
            }
            Event::Sample(SampleKind::Queues) => {
                for &p in &self.queue_ports {
                    let port = &self.ports[p as usize];
                    let bytes = match self.roles[port.node as usize] {
                        Role::Switch(s) => self.switches[s as usize].queued_bytes(port),
                        Role::Host(h) => self.nics[h as usize].backlog_bytes(&self.flows),
                    };
                    self.queue_samples.push(QueueSample { t: now, port: p, bytes });
                }
                self.q.push(now + self.queue_interval, Event::Sample(SampleKind::Queues));
            }
            Event::Sample(SampleKind::Cwnd) => {
                for i in 0..self.cwnd_flows.len() {
                    let f = self.cwnd_flows[i];
                    if self.flows[f as usize].start <= now {
                        // Its start may come later in this instant: its window is the initial one.
                        self.connect_now(f);
                    }
                    let flow = &self.flows[f as usize];
                    if let (true, None, Some(t)) = (flow.start <= now, flow.finish, flow.transport.as_ref()) {
                        let (win, cc) = t.congestion();
                        self.cwnd_samples.push(CwndSample { t: now, flow: f, cwnd: win.cwnd, state: cc.state() });
                    }
                }
                self.q.push(now + self.cwnd_interval, Event::Sample(SampleKind::Cwnd));
            }
        }
    }

    /// Lets flow `f`'s transport act (`act`), then carries out what it reported.
    fn with_transport(&mut self, f: u32, now: Time, act: impl FnOnce(&mut Transport, &mut Io, &mut Cx)) {
        let Some(mut io) = self.act_on_transport(f, now, act) else { return };
        // A timer's replies come from the server's host (the delayed ACK, the FIN).
        let dst = self.flows[f as usize].dst;
        self.apply(f, dst, &mut io, now);
        self.io = io;
    }

    /// Lets flow `f`'s transport act and returns what it reported (the world's reused record),
    /// or nothing if the connection is gone.
    fn act_on_transport(&mut self, f: u32, now: Time, act: impl FnOnce(&mut Transport, &mut Io, &mut Cx)) -> Option<Io> {
        let t = self.flows[f as usize].transport.as_mut()?;
        let mut io = std::mem::take(&mut self.io);
        io.reset();
        let mut cx = cx!(self, now);
        act(t, &mut io, &mut cx);
        Some(io)
    }

    /// A PFC frame arrived on global port `at`: that port (facing back to the sender) pauses or
    /// resumes the priority, and sends what waited when it resumes.
    fn on_pfc_frame(&mut self, at: u32, frame: &Packet, now: Time) {
        let port = &mut self.ports[at as usize];
        let duration = crate::net::pfc::pause_time(frame.pause_quanta, port.rate);
        port.pause.on_frame(frame.prio, duration, now);
        if frame.pause_quanta > 0 {
            // Look again when the pause runs out, unless a resume or a refresh comes first.
            self.q.push(now + duration, Event::PauseEnd(at));
            return;
        }
        self.pause_ended(at, now);
    }

    /// Port `p` may have been released by a resume or by its pause running out.
    fn pause_ended(&mut self, p: u32, now: Time) {
        let node = self.ports[p as usize].node;
        match self.roles[node as usize] {
            Role::Switch(s) => {
                let sw = &mut self.switches[s as usize];
                let first = sw.first_port as usize;
                let ports = &mut self.ports[first..self.port_base[node as usize + 1] as usize];
                let mut cx = cx!(self, now);
                sw.unpaused(p as usize - first, ports, &mut cx);
            }
            Role::Host(h) => self.nic_send(h, now),
        }
    }

    /// A packet reaches host `h`: its NIC's offload or its connection takes it, and the world
    /// carries out the rest (once the host's CPU has done the work, where it is modelled).
    fn host_receive(&mut self, h: u32, pkt: Packet, now: Time) {
        self.counters.packets_delivered += 1;
        let capture = self.capture.is_some();
        if let Some(off) = self.offloads.get_mut(h as usize).and_then(Option::as_deref_mut) {
            if let Some(r) = off.relay(&pkt, capture) {
                self.spliced(h, r, now);
                return;
            }
        }
        self.host_stack(h, pkt, now);
    }

    /// Host `h`'s NIC relayed a segment of a spliced connection: the rewritten segment goes on,
    /// and the host takes the share that is its own.
    #[cold]
    fn spliced(&mut self, h: u32, r: Relayed, now: Time) {
        if let Some(out) = r.out {
            self.nics[h as usize].ctrl.push_back(out);
        }
        if let Some((front, back)) = r.closed {
            self.spliced_closed(h, front, back, now);
        }
        match r.to_host {
            Some(own) => self.host_stack(h, own, now),
            None => self.nic_send(h, now),
        }
    }

    /// The stack of host `h` (its NIC's offload first) takes a packet.
    fn host_stack(&mut self, h: u32, pkt: Packet, now: Time) {
        let f = pkt.flow;
        // A packet ahead of its flow's start (forged, or injected) finds the server listening.
        self.connect_now(f);
        let flow = &mut self.flows[f as usize];
        let side = if h == flow.dst { Side::Server } else { Side::Client };
        if flow.transport.is_none() {
            // A closed connection takes nothing more.
            let mut cx = cx!(self, now);
            cx.release(&pkt);
            return;
        }
        let mut io = std::mem::take(&mut self.io);
        io.reset();
        if side == Side::Server && self.nic_takes(h, f, &pkt, &mut io, now) {
            self.apply(f, h, &mut io, now);
            self.io = io;
            return;
        }
        let flow = &mut self.flows[f as usize];
        let t = flow.transport.as_mut().expect("checked above");
        let mut cx = cx!(self, now);
        t.on_packet(side, &pkt, &mut io, &mut cx);
        self.after_stack(h, f, true, io, now);
    }

    /// What the host stack did with a packet (`rx`) or a timer happens now, or, on a host with a
    /// modelled CPU, when the core its flow maps to has done the work. A close the application
    /// made then goes to the NIC if it offloads teardown (the host pays for the handover whether
    /// or not the NIC's table has room).
    fn after_stack(&mut self, h: u32, f: u32, rx: bool, mut io: Io, now: Time) {
        match self.cpus.get_mut(h as usize).and_then(Option::as_deref_mut) {
            None => {
                self.offload_close(h, f, &io, now);
                self.apply(f, h, &mut io, now);
                self.io = io;
            }
            Some(cpu) => {
                let hand_over = io.work.answered && self.offloads.get(h as usize).and_then(Option::as_ref).is_some_and(|o| o.teardown);
                let mut cycles = cpu.costs.of(rx, &io, hand_over);
                if let Some(&RelayEnd::Front { relay, .. }) = self.flows[f as usize].relay.as_deref() {
                    // A proxy's request work is parsing the header, not answering on the close;
                    // what it reads it writes on to the backend.
                    cycles.0[crate::host::cpu::Op::App as usize] = 0;
                    if let Some((start, n)) = io.delivered {
                        let connects = start < relay.header && start + n >= relay.header;
                        cycles.merge(&cpu.costs.relay(n, n.div_ceil(self.tcp.mss()), connects));
                    }
                }
                let mut cx = cx!(self, now);
                cpu.submit(f, io, cycles, &mut cx);
            }
        }
    }

    /// A core of host `h` finished its job: what the job's packet or timer made the host do
    /// happens now, the application's close going to the NIC first if it offloads teardown.
    #[cold]
    fn cpu_done(&mut self, h: u32, core: usize, now: Time) {
        let cpu = self.cpus.get_mut(h as usize).and_then(Option::as_deref_mut).expect("a CPU event for a host with a CPU");
        let mut cx = cx!(self, now);
        let Some(mut job) = cpu.finish(core, &mut cx) else { return };
        self.offload_close(h, job.flow, &job.io, now);
        self.apply(job.flow, h, &mut job.io, now);
    }

    /// Runs a connection timer. The server's own timers (delayed ACK, FIN retransmission) are
    /// work for its host's CPU, where one is modelled.
    fn on_timer(&mut self, f: u32, kind: TimerKind, gen: u32, now: Time) {
        let dst = self.flows[f as usize].dst;
        let server_timer = matches!(kind, TimerKind::DelayedAck | TimerKind::PeerRto);
        if !(server_timer && self.cpus.get(dst as usize).is_some_and(Option::is_some)) {
            self.with_transport(f, now, |t, io, cx| t.on_timer(kind, gen, io, cx));
            return;
        }
        let Some(io) = self.act_on_transport(f, now, |t, io, cx| t.on_timer(kind, gen, io, cx)) else { return };
        if io.replies.is_empty() && !io.closed {
            // A stale or rescheduled timer: no work.
            self.io = io;
            return;
        }
        self.after_stack(dst, f, false, io, now);
    }

    /// Host `h`'s NIC offload, if it has one, looks at `pkt` for flow `f`'s server first; true
    /// if it consumed it.
    fn nic_takes(&mut self, h: u32, f: u32, pkt: &Packet, io: &mut Io, now: Time) -> bool {
        let Some(off) = self.offloads.get_mut(h as usize).and_then(Option::as_deref_mut) else { return false };
        let Some(conn) = self.flows[f as usize].transport.as_mut().and_then(Transport::tcp_mut) else { return false };
        let consumed = off.on_segment(conn, pkt, io, now);
        if consumed {
            let mut cx = cx!(self, now);
            cx.release(pkt);
        }
        consumed
    }

    /// If flow `f`'s server application closed (its FIN in `io`), host `h`'s NIC may take the
    /// close over.
    fn offload_close(&mut self, h: u32, f: u32, io: &Io, now: Time) {
        if !io.work.answered {
            return;
        }
        let Some(off) = self.offloads.get_mut(h as usize).and_then(Option::as_deref_mut) else { return };
        let Some(conn) = self.flows[f as usize].transport.as_mut().and_then(Transport::tcp_mut) else { return };
        if let Some(at) = off.hand_over(conn, f, &io.replies, now) {
            self.q.push(at, Event::NicTick(h));
        }
    }

    /// Host `h`'s offload timer wheel ticks: FINs not yet acknowledged go out again; closes the
    /// NIC gave up on end.
    #[cold]
    fn nic_tick(&mut self, h: u32, now: Time) {
        let off = self.offloads.get_mut(h as usize).and_then(Option::as_deref_mut).expect("a NIC tick for a host with an offload");
        if off.tick_at != Some(now) {
            return; // superseded by an earlier tick
        }
        let (mut resend, mut gave_up) = (Vec::new(), Vec::new());
        if let Some(at) = off.tick(now, &mut resend, &mut gave_up) {
            self.q.push(at, Event::NicTick(h));
        }
        self.nics[h as usize].ctrl.extend(resend);
        for f in gave_up {
            let mut io = std::mem::take(&mut self.io);
            io.reset();
            if let Some(c) = self.flows[f as usize].transport.as_mut().and_then(Transport::tcp_mut) {
                c.nic_closed(&mut io);
            }
            self.apply(f, h, &mut io, now);
            self.io = io;
        }
        self.nic_send(h, now);
    }

    /// Carries out what a connection reported: replies from host `h`, bytes for the
    /// application, completion, release, and waking the client's NIC.
    fn apply(&mut self, f: u32, h: u32, io: &mut Io, now: Time) {
        if !io.replies.is_empty() {
            self.nics[h as usize].ctrl.extend(io.replies.drain(..));
        }
        if io.echo {
            if let Some(s) = self.flows[f as usize].sender() {
                if let Some(echo) = s.last_echo {
                    let row = TelemetryRow { t: now, flow: f, srtt: s.rtt.srtt(), cwnd: s.win.cwnd, echo };
                    self.telemetry.record(row);
                }
            }
        }
        if let Some((start, len)) = io.delivered {
            self.flows[f as usize].app_receive(start, len);
            self.deliver_to_app(f, now);
        }
        if self.flows[f as usize].relay.is_some() {
            self.relay_step(f, h, now);
        }
        // Only a flow that expects a response (a transaction) takes the server's FIN as one: the
        // backend's FIN on a proxy's relayed connection is not a second completion.
        if io.response && self.flows[f as usize].response.is_some() {
            self.response_to_app(f, now);
        }
        let flow = &mut self.flows[f as usize];
        if io.completed && flow.finish.is_none() {
            flow.finish = Some(now);
            if flow.size.is_some() && !flow.transport.as_ref().is_some_and(Transport::is_persistent) {
                self.unfinished -= 1;
            }
            self.stop_if_done();
        }
        let flow = &mut self.flows[f as usize];
        if io.closed {
            flow.release();
        }
        if io.interim {
            // The server is ready for the rest: the client's application writes it.
            if let Some(c) = flow.tcp_mut() {
                c.sender.set_written(u64::MAX);
                io.activate = true;
            }
        }
        if io.activate && flow.transport.is_some() {
            let src = flow.src;
            self.nics[src as usize].activate(flow);
            if src != h {
                self.nic_send(src, now);
            }
        }
        self.nic_send(h, now);
    }

    /// The proxy on host `h` acts on a change to one of a request's connections (`f`, the
    /// client's or the backend's): once it has the header it connects to the backend the header
    /// names, writes on what it has read, and asks its NIC to splice once both connections allow.
    fn relay_step(&mut self, f: u32, h: u32, now: Time) {
        let front = match self.flows[f as usize].relay.as_deref() {
            Some(&RelayEnd::Front { .. }) if self.flows[f as usize].dst == h => f,
            Some(&RelayEnd::Back { front }) if self.flows[f as usize].src == h => front,
            _ => return,
        };
        let flow = &self.flows[front as usize];
        let got = flow.bytes_delivered();
        let Some(&RelayEnd::Front { relay, app, back, splicing }) = flow.relay.as_deref() else { return };
        match back {
            Some(b) => {
                let back = &mut self.flows[b as usize];
                if let Some(c) = back.tcp_mut() {
                    c.sender.set_written(got);
                    self.nics[h as usize].activate(back);
                }
            }
            None if got >= relay.header => {
                let spec = FlowSpec {
                    src: h as usize,
                    dst: relay.backend,
                    size: flow.size,
                    start: now,
                    class: flow.class as usize,
                    ..FlowSpec::default()
                };
                let b = self.add_flow(&spec);
                let back = &mut self.flows[b as usize];
                back.app = Some(app);
                back.relay = Some(Box::new(RelayEnd::Back { front }));
                if let Some(c) = back.tcp_mut() {
                    c.sender.set_written(got);
                }
                if let Some(RelayEnd::Front { back, .. }) = self.flows[front as usize].relay.as_deref_mut() {
                    *back = Some(b);
                }
                self.with_transport(b, now, |t, io, cx| t.open(io, cx));
            }
            None => {}
        }
        if splicing == Splicing::Waiting {
            self.relay_ready(h, front, now);
        }
    }

    /// Once the backend connection of the client connection `front` is established, the proxy on
    /// host `h` asks its NIC to splice the two (if the NIC splices, the table has room, and
    /// nothing of the request waits beyond a gap, which the NIC could no longer hand the host),
    /// else relays on the host, and tells the client to send the body (`100 Continue`).
    fn relay_ready(&mut self, h: u32, front: u32, now: Time) {
        let Some(&RelayEnd::Front { back: Some(b), .. }) = self.flows[front as usize].relay.as_deref() else { return };
        let (Some(fa), Some(fb)) = (self.flows[front as usize].tcp(), self.flows[b as usize].tcp()) else { return };
        if fb.client != State::Established || fa.server != State::Established {
            return;
        }
        let size = self.flows[front as usize].size.unwrap_or(u64::MAX);
        let spliced = self.offloads.get_mut(h as usize).and_then(Option::as_deref_mut).is_some_and(|o| o.try_splice(fa, fb, size));
        let splicing = if spliced { Splicing::Spliced } else { Splicing::OnHost };
        let go = (fa.receiver.rcv_nxt < size).then(|| fa.interim_response(CONTINUE_BYTES));
        if let Some(RelayEnd::Front { splicing: s, .. }) = self.flows[front as usize].relay.as_deref_mut() {
            *s = splicing;
        }
        let mut cycles = crate::host::cpu::Cycles::default();
        if let Some(cpu) = self.cpus.get(h as usize).and_then(Option::as_deref) {
            if splicing == Splicing::Spliced {
                cycles.add(crate::host::cpu::Op::Handover, cpu.costs.handover);
            }
            if go.is_some() {
                cycles.add(crate::host::cpu::Op::Tx, cpu.costs.tx_packet);
            }
        }
        self.host_job(h, front, cycles, now);
        if let Some(p) = go {
            self.nics[h as usize].ctrl.push_back(p);
        }
    }

    /// Host `h`'s NIC saw the close of a spliced pair go through end to end and tells the host:
    /// the proxy's ends of both connections are closed.
    #[cold]
    fn spliced_closed(&mut self, h: u32, front: u32, back: u32, now: Time) {
        for (f, side) in [(front, Side::Server), (back, Side::Client)] {
            let Some(mut io) = self.act_on_transport(f, now, |t, io, _| {
                if let Some(c) = t.tcp_mut() {
                    c.spliced_closed(side, io);
                }
            }) else {
                continue;
            };
            self.apply(f, h, &mut io, now);
            self.io = io;
        }
        if let Some(cpu) = self.cpus.get(h as usize).and_then(Option::as_deref) {
            let mut cycles = crate::host::cpu::Cycles::default();
            cycles.add(crate::host::cpu::Op::Handover, cpu.costs.handover);
            self.host_job(h, front, cycles, now);
        }
    }

    /// Queues work of `cycles` for flow `f` on host `h`'s CPU, where it is modelled, with no
    /// outcome of its own: it only keeps the core busy.
    fn host_job(&mut self, h: u32, f: u32, cycles: crate::host::cpu::Cycles, now: Time) {
        let Some(cpu) = self.cpus.get_mut(h as usize).and_then(Option::as_deref_mut) else { return };
        if cycles.total() == 0 {
            return;
        }
        let mut cx = cx!(self, now);
        cpu.submit(f, Io::default(), cycles, &mut cx);
    }

    /// Lets host `h`'s NIC put its next packet on the wire.
    #[inline]
    fn nic_send(&mut self, h: u32, now: Time) {
        let nic = &mut self.nics[h as usize];
        let port = &mut self.ports[nic.port as usize];
        let mut cx = cx!(self, now);
        nic.send(port, &mut self.flows, &mut cx);
    }

    /// Tells the flow's application what the receiver now has in full: the whole flow, or on a
    /// persistent connection each message up to the bytes delivered in order.
    fn deliver_to_app(&mut self, f: u32, now: Time) {
        let flow = &mut self.flows[f as usize];
        let delivered = flow.bytes_delivered();
        let transaction = flow.response.is_some();
        let (Some((a, flow_tag)), false) = (flow.app, transaction) else {
            // A transaction's application hears of the response instead.
            if flow.rx_done.is_none() && flow.size == Some(delivered) {
                flow.rx_done = Some(now);
            }
            return;
        };
        let persistent = flow.transport.as_ref().is_some_and(Transport::is_persistent);
        let complete = if persistent {
            flow.messages.front().is_some_and(|&(end, _)| end <= delivered)
        } else {
            flow.rx_done.is_none() && flow.size == Some(delivered)
        };
        if !complete {
            return;
        }
        let mut io = std::mem::take(&mut self.app_io);
        if persistent {
            while let Some(&(end, tag)) = flow.messages.front() {
                if end > delivered {
                    break;
                }
                flow.messages.pop_front();
                self.apps[a as usize].on_delivered(tag, now, &mut io);
            }
        } else {
            flow.rx_done = Some(now);
            self.apps[a as usize].on_delivered(flow_tag, now, &mut io);
        }
        self.apply_app_io(a, io, now);
    }

    /// A transaction's response reached its client: the application that opened it hears.
    fn response_to_app(&mut self, f: u32, now: Time) {
        let flow = &mut self.flows[f as usize];
        if flow.answered.is_some() {
            return;
        }
        flow.answered = Some(now);
        let Some((a, tag)) = flow.app else { return };
        let mut io = std::mem::take(&mut self.app_io);
        self.apps[a as usize].on_delivered(tag, now, &mut io);
        self.apply_app_io(a, io, now);
    }

    /// Carries out what an application asked for: new flows, timers, completed requests.
    fn apply_app_io(&mut self, a: u32, mut io: AppIo, now: Time) {
        for (spec, tag) in io.open.drain(..) {
            let f = self.add_flow(&spec);
            let flow = &mut self.flows[f as usize];
            match spec.relay {
                // The proxy hears of the request; the client hears when the backend has it.
                Some(relay) => {
                    flow.relay =
                        Some(Box::new(RelayEnd::Front { relay, app: (a, tag), back: None, splicing: Splicing::Waiting }));
                    if flow.size.is_some_and(|s| s > relay.header) {
                        // The client sends the header and waits for the proxy's `100 Continue`.
                        if let Some(c) = flow.tcp_mut() {
                            c.sender.set_written(relay.header);
                        }
                    }
                }
                None => flow.app = Some((a, tag)),
            }
            self.q.push(spec.start.max(now), Event::FlowStart(f));
        }
        for (spec, tag) in io.send.drain(..) {
            let size = spec.size.expect("messages have a size");
            let key = (spec.src, spec.dst, spec.class);
            let live = self.connections.get(&key).copied().filter(|&f| self.flows[f as usize].transport.is_some());
            if let Some(f) = live {
                let flow = &mut self.flows[f as usize];
                let t = flow.transport.as_mut().expect("a live connection has a transport");
                let (new_size, established) = t.append(size);
                flow.size = new_size;
                flow.messages.push_back((flow.size.expect("a persistent connection has a size"), tag));
                if established {
                    let src = flow.src;
                    self.nics[src as usize].activate(flow);
                    self.nic_send(src, now);
                }
            } else {
                let f = self.add_flow(&spec);
                // A connection outlives its messages: the run ends without waiting for it.
                self.unfinished -= 1;
                let flow = &mut self.flows[f as usize];
                flow.transport.as_mut().expect("a new connection has a transport").make_persistent();
                flow.app = Some((a, 0));
                flow.messages.push_back((size, tag));
                self.connections.insert(key, f);
                self.q.push(spec.start.max(now), Event::FlowStart(f));
            }
        }
        for (at, tag) in io.timers.drain(..) {
            self.q.push(at, Event::AppTimer(a, tag));
        }
        self.requests.append(&mut io.completed);
        self.app_io = io;
        self.stop_if_done();
    }

    /// Stops the run when asked to finish with the traffic and nothing more can start.
    fn stop_if_done(&mut self) {
        if self.stop_when_done
            && self.unfinished == 0
            && self.endless == 0
            && self.next_start >= self.static_flows
            && self.apps.iter().all(|a| a.done())
        {
            self.stopped = true;
        }
    }

    // ---- inspection -------------------------------------------------------------------------

    /// Hands `pkt` to host `h` now, as if it had just arrived from the network: a crafted
    /// segment (a forged ACK, a stray SYN) for tests and attack studies. It counts as sent.
    pub fn inject(&mut self, h: u32, pkt: Packet) {
        self.counters.packets_sent += 1;
        self.host_receive(h, pkt, self.clock);
    }
    /// Each host's CPU, where it is modelled.
    pub fn cpus(&self) -> &[Option<Box<Cpu>>] {
        &self.cpus
    }
    /// Each host's NIC offload, where it has one.
    pub fn offloads(&self) -> &[Option<Box<Offload>>] {
        &self.offloads
    }
    /// The current simulated time.
    pub fn now(&self) -> Time {
        self.clock
    }
    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.events
    }
    /// The run's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// Every flow, by id.
    pub fn flows(&self) -> &[Flow] {
        &self.flows
    }
    /// One flow, mutably: a probe may wrap the flow's algorithm before the run to watch the
    /// signals it gets.
    pub fn flow_mut(&mut self, id: u32) -> &mut Flow {
        &mut self.flows[id as usize]
    }
    /// Completed requests (and incast rounds) of closed-loop applications, in completion order.
    pub fn requests(&self) -> &[Request] {
        &self.requests
    }
    /// Whether closed-loop applications open flows as the run goes.
    pub fn has_applications(&self) -> bool {
        !self.apps.is_empty()
    }
    /// Traffic classes, by index.
    pub fn classes(&self) -> &[ClassRuntime] {
        &self.classes
    }
    /// Packet counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    /// Queue samples recorded.
    pub fn queue_samples(&self) -> &[QueueSample] {
        &self.queue_samples
    }
    /// Window samples recorded.
    pub fn cwnd_samples(&self) -> &[CwndSample] {
        &self.cwnd_samples
    }
    /// Packets captured for `trace.pcap`, if the scenario asked.
    pub fn capture(&self) -> Option<&Capture> {
        self.capture.as_deref()
    }
    /// TCP-INT echoes received by senders.
    pub fn telemetry(&self) -> &TelemetryLog {
        &self.telemetry
    }
    /// How the scenario asked flows to be bucketed by size.
    pub fn bucketing(&self) -> &Bucketing {
        &self.bucketing
    }
    /// HPCC per-hop record stacks: how many are in use and the slab's high-water mark.
    pub fn hop_slab(&self) -> &HopSlab {
        &self.hops
    }
    /// Every port, by global id.
    pub fn ports(&self) -> &[Port] {
        &self.ports
    }
    /// Every switch, by ordinal.
    pub fn switches(&self) -> &[Switch] {
        &self.switches
    }
    /// One switch, mutably: a test may corrupt its accounting to check the conservation check.
    pub fn switch_mut(&mut self, s: usize) -> &mut Switch {
        &mut self.switches[s]
    }
    /// The packets on the wires, mutably: a test may leak one to check the conservation check.
    pub fn flying_mut(&mut self) -> &mut Flying {
        &mut self.flying
    }
    /// A node's display name ("h3", "sw0").
    pub fn node_name(&self, node: u32) -> &str {
        &self.node_names[node as usize]
    }

    /// The circuit schedule, in a reconfigurable network.
    pub fn circuit(&self) -> Option<&CircuitParts> {
        self.circuit.as_ref()
    }

    /// True when switches run PFC.
    pub fn pfc_enabled(&self) -> bool {
        self.switches.iter().any(|s| s.pfc.is_some())
    }

    /// True if node `n` is a switch.
    pub fn is_switch(&self, n: u32) -> bool {
        matches!(self.roles[n as usize], Role::Switch(_))
    }
    /// Number of hosts.
    pub fn host_count(&self) -> usize {
        self.nics.len()
    }
    /// The host link rate of host `h`.
    pub fn host_rate(&self, h: u32) -> Rate {
        self.ports[self.nics[h as usize].port as usize].rate
    }

    /// Checks conservation: every packet sent is delivered, dropped or still in the network;
    /// every switch's buffer holds exactly what its queues hold; every application got each
    /// byte once and in order, as counted apart from the transport.
    pub fn check_conservation(&self) -> Result<(), String> {
        let c = &self.counters;
        let in_flight = |p: &Port| p.link.in_flight.iter().filter(|&&(_, i)| !self.flying.get(i).is_pfc()).count();
        let on_wires: usize = self.ports.iter().map(|p| p.link.in_flight.len()).sum();
        if self.flying.len() != on_wires {
            return Err(format!("wire store broken: {} packets stored != {} on the wires", self.flying.len(), on_wires));
        }
        let in_voqs = self.switches.iter().filter_map(|s| s.tor.as_deref()).map(|t| t.queued().count() as u64).sum::<u64>();
        let in_network: u64 = self.ports.iter().map(|p| (p.queue.len() + in_flight(p)) as u64).sum::<u64>() + in_voqs;
        if c.packets_sent != c.packets_delivered + c.drops() + in_network {
            return Err(format!(
                "packet conservation broken: sent {} != delivered {} + dropped {} + in network {}",
                c.packets_sent,
                c.packets_delivered,
                c.drops(),
                in_network
            ));
        }
        for sw in &self.switches {
            let n = sw.node as usize;
            let ports = &self.ports[self.port_base[n] as usize..self.port_base[n + 1] as usize];
            let queued: u64 = ports.iter().map(|p| p.queue.bytes()).sum();
            if queued != sw.buffer.used {
                return Err(format!(
                    "buffer accounting broken at {}: {} bytes used != {} bytes queued",
                    self.node_names[n], sw.buffer.used, queued
                ));
            }
            if let Some(pfc) = &sw.pfc {
                let lossless: u64 =
                    ports.iter().flat_map(|p| p.queue.iter()).filter(|p| pfc.cfg.is_lossless(p.prio)).map(|p| p.wire_bytes as u64).sum();
                if lossless != pfc.held_total() {
                    return Err(format!(
                        "PFC accounting broken at {}: {} bytes held by ingress != {} lossless bytes queued",
                        self.node_names[n],
                        pfc.held_total(),
                        lossless
                    ));
                }
            }
        }
        // Every hop-record stack in use is held by a packet in the network or a NIC queue, or by
        // a receiver about to echo it; anything else leaked or was freed twice.
        let voqs = self.switches.iter().filter_map(|s| s.tor.as_deref()).flat_map(|t| t.queued());
        let queued = self.ports.iter().flat_map(|p| p.queue.iter().chain(p.link.in_flight.iter().map(|&(_, i)| self.flying.get(i)))).chain(voqs);
        // Replies a host's CPU has not finished producing are held by the host.
        let cpu_jobs = || self.cpus.iter().flatten().flat_map(|c| c.jobs());
        let held_by_packets = queued
            .chain(self.nics.iter().flat_map(|n| n.ctrl.iter()))
            .chain(cpu_jobs().flat_map(|j| j.io.replies.iter()))
            .filter(|p| p.hops.is_some())
            .count();
        let mut in_cpu: HashMap<u32, u64> = HashMap::new();
        for j in cpu_jobs() {
            *in_cpu.entry(j.flow).or_default() += j.io.delivered.map_or(0, |d| d.1);
        }
        let held_by_receivers = self.flows.iter().filter(|f| f.transport.as_ref().is_some_and(Transport::holds_hop_stack)).count();
        if held_by_packets + held_by_receivers != self.hops.in_use() {
            return Err(format!(
                "hop-record conservation broken: {} stacks in use != {} held by packets and receivers",
                self.hops.in_use(),
                held_by_packets + held_by_receivers
            ));
        }
        // Bytes a host's CPU is still handing over count as delivered.
        let got_by = |f: &Flow| f.bytes_delivered() + in_cpu.get(&f.id).copied().unwrap_or(0);
        for f in &self.flows {
            if let Some(fault) = f.delivery_fault() {
                return Err(fault.to_string());
            }
            let got = got_by(f);
            // A spliced client connection's bytes end at the proxy's application below the splice
            // point and at the backend's above it.
            let end_to_end = f.spliced_to().map_or(got, |b| got.max(got_by(&self.flows[b as usize])));
            let ends = match f.transport.as_ref() {
                Some(Transport::Tcp(c)) => Some((c.receiver.rcv_nxt, c.sender.una)),
                Some(Transport::Rdma(q)) => Some((q.received(), q.acknowledged())),
                None => None,
            };
            if let Some((in_order, acked)) = ends {
                if got != in_order {
                    return Err(format!("flow {}: the application got {got} bytes but the receiver holds {in_order} in order", f.id));
                }
                if acked > end_to_end {
                    return Err(format!("flow {}: sender saw {acked} acknowledged but the application got {end_to_end}", f.id));
                }
            }
            if let Some(size) = f.size {
                if got > size {
                    return Err(format!("flow {}: delivered {got} of {size} bytes", f.id));
                }
                if f.finish.is_some() && end_to_end != size {
                    return Err(format!("flow {}: finished with {end_to_end} of {size} bytes delivered", f.id));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{AckSignals, CongestionControl, CongestionEvent, Window};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// Opens the window by one segment per 100 us tick and never on ACKs.
    struct Ticker(Arc<AtomicU64>);

    impl CongestionControl for Ticker {
        fn name(&self) -> &'static str {
            "ticker"
        }
        fn on_ack(&mut self, _: &AckSignals, _: &mut Window) {}
        fn on_congestion(&mut self, _: CongestionEvent, _: Time, _: &mut Window) {}
        fn on_tick(&mut self, _: Time, win: &mut Window) {
            self.0.fetch_add(1, Ordering::Relaxed);
            win.cwnd += win.mss;
        }
        fn tick_interval(&self) -> Option<Time> {
            Some(Time::from_us(100))
        }
    }

    #[test]
    fn ticks_run_at_the_asked_interval_and_let_the_flow_send() {
        let text = r#"
[sim]
duration = "1ms"
[topology]
kind = "star"
hosts = 2
host_rate = "10Gbps"
host_delay = "300us"
[[workloads]]
kind = "bulk"
senders = [0]
receiver = 1
"#;
        let loaded = crate::scenario::parse(text, "t.toml", std::path::Path::new("."), &[]).unwrap();
        let mut world = crate::scenario::build(&loaded).unwrap();
        let ticks = Arc::new(AtomicU64::new(0));
        world.connect_now(0);
        world.flows[0].tcp_mut().unwrap().sender.cc = Box::new(Ticker(ticks.clone()));
        world.run(&mut |_| {});
        // Ticks at 100, 200, ..., 900 us; the one at 1 ms comes after the end.
        assert_eq!(ticks.load(Ordering::Relaxed), 9);
        let s = world.flows[0].sender().unwrap();
        let mss = world.tcp.mss();
        assert_eq!(s.win.cwnd, 19 * mss);
        // The round trip (1.2 ms) outlasts the run: only the ticks let more than the initial
        // window out.
        assert_eq!(s.in_flight(), 19 * mss, "each tick's segment went out");
    }
}
