//! The world: every element in arenas indexed by small integers, built from a scenario, and the
//! run loop that dispatches events in one place.

use crate::cc::negotiation::{negotiate, Negotiation, Offer, Support};
use crate::cc::{CcFactory, EcnMode, FlowContext};
use crate::event::{EventQueue, TimerFire};
use crate::host::nic::Nic;
use crate::host::pacer::TokenBucket;
use crate::net::link::Link;
use crate::net::port::{Port, TxMeter};
use crate::packet::hpcc_int::{HopRecord, HopSlab};
use crate::packet::tcp_int::TcpInt;
use crate::metrics::telemetry::{TelemetryLog, TelemetryRow};
use crate::scenario::IntRuntime;
use crate::net::queue::{EcnMarking, SharedBuffer};
use crate::net::routing::Routes;
use crate::net::switch::{ecmp_pick, Switch};
use crate::net::topology::{Graph, NodeKind};
use crate::packet::{flags, Ecn, Packet, ETHERNET_OVERHEAD, IPV4_HEADER, TCP_HEADER};
use crate::scenario::LoadedScenario;
use crate::time::{Rate, Time};
use crate::transport::tcp::{AckPlan, Phase, Receiver, Segment, Sender, TcpConfig};
use crate::workload::app::{App, AppIo, Request};
use crate::workload::FlowSpec;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::{HashMap, VecDeque};

/// Everything that happens, dispatched by one `match` in [`World::step`].
#[derive(Clone, Copy, Debug)]
enum Event {
    /// The head packet on the port's link reaches the far end.
    Arrive(u32),
    /// The port's serializer finished; it may start the next packet.
    TxDone(u32),
    /// A flow opens.
    FlowStart(u32),
    /// A flow's retransmission timer (flow, generation).
    Rto(u32, u32),
    /// A flow's delayed-ACK timer (flow, generation).
    DelayedAck(u32, u32),
    /// A host's pacer allows a flow to send again.
    NicWake(u32),
    /// A flow's congestion controller asked for a periodic `on_tick`.
    CcTick(u32),
    /// Record queue depths.
    SampleQueues,
    /// Record congestion windows.
    SampleCwnd,
    /// The scenario's end time: the run stops here.
    End,
    /// A closed-loop application starts.
    AppStart(u32),
    /// An application's timer (app, tag).
    AppTimer(u32, u32),
}

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
}

/// One flow: its identity, its TCP halves, and its outcome.
pub struct Flow {
    /// Flow id (index in the arena).
    pub id: u32,
    /// Sending host ordinal.
    pub src: u32,
    /// Receiving host ordinal.
    pub dst: u32,
    /// Class index.
    pub class: u16,
    /// Bytes to deliver (None = endless).
    pub size: Option<u64>,
    /// Start time.
    pub start: Time,
    /// When the sender had every byte acknowledged.
    pub finish: Option<Time>,
    /// Round trip of the flow's path with empty queues.
    pub base_rtt: Time,
    /// base RTT + size with headers at the sender's link rate.
    pub ideal_fct: Time,
    /// When the receiver had every byte.
    pub rx_done: Option<Time>,
    /// How connection-setup negotiation ended.
    pub negotiation: Negotiation,
    /// The application's deadline for the flow, if it stated one.
    pub deadline: Option<Time>,
    /// The NIC's rate limiter for an application's target rate.
    limiter: Option<TokenBucket>,
    /// The application that opened the flow and its tag, for closed-loop traffic.
    pub app: Option<(u32, u32)>,
    /// On a persistent connection: where each message the receiver still awaits ends, with its
    /// application tag, in sending order.
    messages: VecDeque<(u64, u32)>,
    /// Sender half.
    pub sender: Sender,
    /// Receiver half.
    pub receiver: Receiver,
    hash_fwd: u32,
    hash_rev: u32,
    prio: u8,
    in_active: bool,
}

/// Network-wide packet counters.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Packets put on a wire by a host.
    pub packets_sent: u64,
    /// Packets that reached their destination host.
    pub packets_delivered: u64,
    /// Drops at a full buffer.
    pub drops_buffer: u64,
    /// Drops by random link loss.
    pub drops_link_loss: u64,
    /// Drops by TTL expiry.
    pub drops_ttl: u64,
    /// Non-ECT packets dropped where an ECT packet would have been marked.
    pub drops_ecn_unable: u64,
    /// CE marks set by switches.
    pub ecn_marks: u64,
    /// Data segments sent (first transmissions and retransmissions).
    pub data_packets: u64,
}

impl Counters {
    /// All drops.
    pub fn drops(&self) -> u64 {
        self.drops_buffer + self.drops_link_loss + self.drops_ttl + self.drops_ecn_unable
    }
}

/// What to capture into `trace.pcap`.
#[derive(Clone, Debug)]
pub struct CaptureSpec {
    /// Per global port id: capture every packet that starts on its wire.
    pub ports: Vec<bool>,
    /// Flows whose packets are captured at their sending host's NIC.
    pub flows: Vec<u32>,
    /// Keep at most this many packets.
    pub max_packets: u64,
    /// Whole frames rather than headers.
    pub full_frames: bool,
}

/// Packets captured during the run, written to `trace.pcap` afterwards.
#[derive(Debug, Default)]
pub struct Capture {
    /// Per global port id: captured.
    ports: Vec<bool>,
    /// Per flow id: captured at its hosts' NICs.
    flows: Vec<bool>,
    max_packets: u64,
    /// Whole frames rather than headers.
    pub full_frames: bool,
    /// (time the packet started on the wire, the packet).
    pub packets: Vec<(Time, Packet)>,
    /// Packets past `max_packets`, not kept.
    pub overflow: u64,
}

/// One queue-depth sample.
#[derive(Clone, Copy, Debug)]
pub struct QueueSample {
    /// Sample time.
    pub t: Time,
    /// Global port id.
    pub port: u32,
    /// Bytes queued.
    pub bytes: u64,
}

/// One congestion-window sample.
#[derive(Clone, Copy, Debug)]
pub struct CwndSample {
    /// Sample time.
    pub t: Time,
    /// Flow id.
    pub flow: u32,
    /// Window in bytes.
    pub cwnd: u64,
}

/// The simulated datacenter.
pub struct World {
    q: EventQueue<Event>,
    /// Simulated time: the last event's, or the end time once the run reached it.
    clock: Time,
    roles: Vec<Role>,
    node_names: Vec<String>,
    /// Ports of node n are `port_base[n]..port_base[n + 1]`.
    port_base: Vec<u32>,
    ports: Vec<Port>,
    switches: Vec<Switch>,
    nics: Vec<Nic>,
    routes: Routes,
    flows: Vec<Flow>,
    /// Persistent connections by (source, destination, class).
    connections: HashMap<(usize, usize, usize), u32>,
    /// Flows known at build time, started in order by a chain of events; later ones come from apps.
    static_flows: usize,
    next_start: usize,
    apps: Vec<Box<dyn App>>,
    app_io: AppIo,
    requests: Vec<Request>,
    classes: Vec<ClassRuntime>,
    tcp: TcpConfig,
    rng_loss: Xoshiro256PlusPlus,
    rng_ecn: Xoshiro256PlusPlus,
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
    bucketing: crate::metrics::Bucketing,
    int: IntRuntime,
    telemetry: TelemetryLog,
    capture: Option<Box<Capture>>,
    /// HPCC per-hop record stacks of the packets (and receivers) that hold one.
    hops: HopSlab,
}

/// A seeded generator for one purpose, independent of the others.
fn stream(seed: u64, purpose: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed ^ purpose.wrapping_mul(0x9E37_79B9_7F4A_7C15))
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

impl World {
    /// Builds the world for a validated scenario: topology, routes, classes and every flow.
    pub fn build(loaded: &LoadedScenario) -> Result<World, String> {
        let sc = &loaded.scenario;
        let graph = sc.topology.build(&loaded.base_dir)?;
        let prepared = crate::scenario::prepare(loaded, &graph)?;
        Ok(World::from_parts(&graph, prepared))
    }

    fn from_parts(graph: &Graph, p: crate::scenario::Prepared) -> World {
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
        let bands = p.switch.priorities.max(1) as usize;
        let mut ports = Vec::new();
        let mut port_base = Vec::with_capacity(graph.nodes.len() + 1);
        for (n, plist) in node_ports.iter().enumerate() {
            port_base.push(ports.len() as u32);
            for (local, &(li, peer)) in plist.iter().enumerate() {
                let l = &graph.links[li];
                let link = Link { delay: l.delay, loss: l.loss, in_flight: Default::default() };
                let b = if matches!(roles[n], Role::Switch(_)) { bands } else { 1 };
                ports.push(Port::new(n as u32, local as u16, peer as u32, l.rate, link, b));
            }
        }
        port_base.push(ports.len() as u32);
        let mut switches = Vec::new();
        let mut nics = Vec::new();
        for (n, role) in roles.iter().enumerate() {
            match role {
                Role::Switch(s) => switches.push(Switch {
                    node: n as u32,
                    buffer: SharedBuffer { size: p.switch.buffer.0, used: 0, alpha: p.switch.alpha },
                    ecn: p.ecn,
                    drop_non_ect: p.drop_non_ect,
                    salt: flow_hash(*s, n as u32, 0x5eed, false),
                    int: p.int.switches[*s as usize],
                }),
                Role::Host(_) => nics.push(Nic { node: n as u32, port: port_base[n], ..Nic::default() }),
            }
        }

        for sw in switches.iter().filter(|s| s.int.is_some()) {
            let n = sw.node as usize;
            for port in &mut ports[port_base[n] as usize..port_base[n + 1] as usize] {
                port.meter = Some(TxMeter::new(p.int.util_window));
            }
        }
        let mut world = World {
            q: EventQueue::new(),
            clock: Time::ZERO,
            roles,
            node_names,
            port_base,
            ports,
            switches,
            nics,
            routes,
            flows: Vec::with_capacity(p.flows.len()),
            connections: HashMap::new(),
            static_flows: p.flows.len(),
            next_start: 0,
            apps: p.apps,
            app_io: AppIo::default(),
            requests: Vec::new(),
            classes: p.classes,
            tcp: p.tcp,
            rng_loss: stream(p.seed, 1),
            rng_ecn: stream(p.seed, 2),
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
            capture: p.capture.map(|c| {
                let mut flows = Vec::new();
                for &f in &c.flows {
                    if flows.len() <= f as usize {
                        flows.resize(f as usize + 1, false);
                    }
                    flows[f as usize] = true;
                }
                Box::new(Capture { ports: c.ports, flows, max_packets: c.max_packets, full_frames: c.full_frames, ..Capture::default() })
            }),
            int: p.int,
            telemetry: match p.telemetry {
                Some((interval, flows)) => TelemetryLog::new(interval, flows),
                None => TelemetryLog::new(Time::ZERO, Some(Vec::new())),
            },
            hops: HopSlab::default(),
        };
        for spec in &p.flows {
            world.add_flow(spec);
        }
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
            world.q.push(Time::ZERO, Event::SampleQueues);
        }
        if !world.cwnd_flows.is_empty() {
            world.q.push(Time::ZERO, Event::SampleCwnd);
        }
        if let Some(end) = world.end {
            world.q.push(end, Event::End);
        }
        world
    }

    /// Adds a flow; flows known at build time must be added in start-time order.
    fn add_flow(&mut self, spec: &FlowSpec) -> u32 {
        let id = self.flows.len() as u32;
        let (src, dst) = (spec.src as u32, spec.dst as u32);
        let hash_fwd = flow_hash(src, dst, id, false);
        let hash_rev = flow_hash(dst, src, id, true);
        let class = &self.classes[spec.class];
        let host_port = &self.ports[self.nics[spec.src].port as usize];
        let link_rate = host_port.rate;
        let mss = self.tcp.mss();
        let first_frame = TcpConfig::wire_bytes(spec.size.unwrap_or(mss).min(mss)) as u64;
        let base_rtt = self.path_rtt(src, dst, hash_fwd, hash_rev, first_frame);
        let ctx = FlowContext { mss, init_cwnd: self.tcp.init_cwnd as u64 * mss, link_rate, base_rtt };
        let mut algo = (class.factory)(&ctx);
        let offer = Offer {
            needs_int: algo.needs_int(),
            needs_ecn: self.tcp.ecn && algo.ecn_mode() == EcnMode::PerPacket,
            needs_hop_records: algo.needs_hop_records(),
        };
        let (mut path_int, mut path_all_int, mut path_ecn) = (false, true, true);
        self.walk(src, dst, hash_fwd, |i, port| {
            if i > 0 {
                if let Role::Switch(s) = self.roles[port.node as usize] {
                    path_int |= self.switches[s as usize].int.is_some();
                    path_all_int &= self.switches[s as usize].int.is_some();
                    path_ecn &= self.switches[s as usize].ecn != EcnMarking::Off;
                }
            }
            Time::ZERO
        });
        let support = Support {
            local_int: self.int.host_supports[spec.src],
            peer_int: self.int.host_supports[spec.dst],
            path_int,
            path_all_int,
            path_ecn,
        };
        let negotiation = negotiate(offer, support);
        if negotiation != Negotiation::Accepted {
            algo = (class.fallback.1)(&ctx);
        }
        let mut sender = Sender::new(&self.tcp, spec.size, algo);
        let mut receiver = Receiver::new(&self.tcp, sender.ecn_mode());
        let both_support = self.int.host_supports[spec.src] && self.int.host_supports[spec.dst];
        if both_support && (self.int.all_flows || sender.cc_needs_int()) {
            sender.enable_int(self.int.encoding, self.int.latency_unit);
            receiver.int_echo = Some(None);
        }
        if both_support && sender.cc_needs_hop_records() {
            sender.enable_hop_records();
            receiver.hop_records = true;
        }
        let ideal_fct = match spec.size {
            Some(s) => base_rtt + link_rate.tx_time(self.tcp.wire_bytes_for(s)),
            None => Time::ZERO,
        };
        match spec.size {
            Some(_) => self.unfinished += 1,
            None => self.endless += 1,
        }
        self.flows.push(Flow {
            id,
            src,
            dst,
            class: spec.class as u16,
            size: spec.size,
            start: spec.start,
            finish: None,
            base_rtt,
            ideal_fct,
            rx_done: None,
            app: None,
            messages: VecDeque::new(),
            negotiation,
            deadline: spec.qos.deadline,
            // A burst of two full frames lets the limiter keep a window-limited flow busy.
            limiter: spec.qos.target_rate.map(|r| TokenBucket::new(r, 2 * TcpConfig::wire_bytes(mss) as u64)),
            sender,
            receiver,
            hash_fwd,
            hash_rev,
            prio: class.priority,
            in_active: false,
        });
        id
    }

    /// Round trip with empty queues along the flow's ECMP path: propagation both ways, the first
    /// frame's serialization at each hop after the first (store and forward), and the ACK's
    /// serialization at every hop back. A one-packet flow takes exactly its ideal FCT.
    fn path_rtt(&self, src: u32, dst: u32, hash_fwd: u32, hash_rev: u32, frame: u64) -> Time {
        let ack_frame = (ETHERNET_OVERHEAD + IPV4_HEADER + TCP_HEADER) as u64;
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
            self.clock = now;
            self.events += 1;
            self.step(now, ev);
            if self.events & 0xffff == 0 {
                progress(now);
            }
        }
    }

    fn step(&mut self, now: Time, ev: Event) {
        match ev {
            Event::Arrive(p) => self.on_arrive(p, now),
            Event::TxDone(p) => self.on_tx_done(p, now),
            Event::FlowStart(f) => self.on_flow_start(f, now),
            Event::Rto(f, gen) => self.on_rto(f, gen, now),
            Event::DelayedAck(f, gen) => self.on_delayed_ack(f, gen, now),
            Event::CcTick(f) => self.on_cc_tick(f, now),
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
            Event::NicWake(h) => {
                self.nics[h as usize].wake_at = None;
                self.nic_send(h, now);
            }
            Event::SampleQueues => {
                for &p in &self.queue_ports {
                    let port = &self.ports[p as usize];
                    let bytes = match self.roles[port.node as usize] {
                        Role::Switch(_) => port.queue.bytes(),
                        Role::Host(h) => self.nics[h as usize].ctrl_bytes(),
                    };
                    self.queue_samples.push(QueueSample { t: now, port: p, bytes });
                }
                self.q.push(now + self.queue_interval, Event::SampleQueues);
            }
            Event::SampleCwnd => {
                if self.cwnd_interval == Time::ZERO {
                    return;
                }
                for &f in &self.cwnd_flows {
                    let flow = &self.flows[f as usize];
                    if flow.start <= now && flow.finish.is_none() {
                        self.cwnd_samples.push(CwndSample { t: now, flow: f, cwnd: flow.sender.win.cwnd });
                    }
                }
                self.q.push(now + self.cwnd_interval, Event::SampleCwnd);
            }
        }
    }

    fn on_arrive(&mut self, p: u32, now: Time) {
        let port = &mut self.ports[p as usize];
        let (_, pkt) = port.link.in_flight.pop_front().expect("an arrival event for the head packet");
        if let Some(&(next, _)) = port.link.in_flight.front() {
            self.q.push(next, Event::Arrive(p));
        }
        let node = port.peer_node;
        match self.roles[node as usize] {
            Role::Switch(s) => self.forward(s, pkt, now),
            Role::Host(h) => self.host_receive(h, pkt, now),
        }
    }

    /// Switch forwarding: TTL, ECMP lookup, shared-buffer admission, ECN marking, enqueue.
    fn forward(&mut self, s: u32, mut pkt: Packet, now: Time) {
        pkt.ttl = pkt.ttl.saturating_sub(1);
        if pkt.ttl == 0 {
            self.counters.drops_ttl += 1;
            self.release_hops(&pkt);
            return;
        }
        let sw = &mut self.switches[s as usize];
        let node = sw.node as usize;
        let hops = self.routes.next_hops(node, pkt.dst as usize);
        let local = hops[ecmp_pick(pkt.hash, sw.salt, hops.len())];
        let pid = self.port_base[node] + local as u32;
        let port = &mut self.ports[pid as usize];
        pkt.enq_at = now;
        if port.idle(now) && port.queue.is_empty() {
            self.switch_transmit(s, pid, pkt, now);
            return;
        }
        let len = pkt.wire_bytes as u64;
        let band_bytes = port.queue.band_bytes(pkt.prio);
        if !sw.buffer.admits(band_bytes, len) {
            self.counters.drops_buffer += 1;
            self.release_hops(&pkt);
            return;
        }
        let ecn_unable = pkt.ecn == Ecn::NotEct && sw.drop_non_ect;
        if (pkt.ecn == Ecn::Ect || ecn_unable) && sw.ecn != EcnMarking::Off {
            let rng = &mut self.rng_ecn;
            if sw.ecn.should_mark(band_bytes, || rng.gen::<f64>()) {
                if ecn_unable {
                    self.counters.drops_ecn_unable += 1;
                    self.release_hops(&pkt);
                    return;
                }
                pkt.ecn = Ecn::Ce;
                self.counters.ecn_marks += 1;
            }
        }
        sw.buffer.used += len;
        port.queue.push(pkt);
        if !port.tx_event_pending {
            port.tx_event_pending = true;
            self.q.push(port.busy_until, Event::TxDone(pid));
        }
    }

    /// Starts serializing `pkt` on port `pid` now; it arrives after serialization plus delay.
    fn transmit(&mut self, pid: u32, pkt: Packet, now: Time) {
        if let Some(cap) = self.capture.as_deref_mut() {
            let at_host = matches!(self.roles[self.ports[pid as usize].node as usize], Role::Host(_));
            let wanted = cap.ports[pid as usize] || (at_host && cap.flows.get(pkt.flow as usize).copied().unwrap_or(false));
            if wanted {
                if (cap.packets.len() as u64) < cap.max_packets {
                    cap.packets.push((now, pkt));
                } else {
                    cap.overflow += 1;
                }
            }
        }
        let port = &mut self.ports[pid as usize];
        let done = now + port.rate.tx_time(pkt.wire_bytes as u64);
        port.busy_until = done;
        port.tx_bytes += pkt.wire_bytes as u64;
        port.tx_packets += 1;
        if port.link.loss > 0.0 && self.rng_loss.gen::<f64>() < port.link.loss {
            self.counters.drops_link_loss += 1;
            self.release_hops(&pkt);
            return;
        }
        let arrival = done + port.link.delay;
        if port.link.in_flight.is_empty() {
            self.q.push(arrival, Event::Arrive(pid));
        }
        port.link.in_flight.push_back((arrival, pkt));
    }

    /// A switch's egress pipeline: TCP-INT stamping and HPCC hop records on capable switches,
    /// then the wire.
    fn switch_transmit(&mut self, s: u32, pid: u32, mut pkt: Packet, now: Time) {
        let port = &mut self.ports[pid as usize];
        // Only ports of INT-capable switches have a meter.
        if let Some(meter) = port.meter.as_mut() {
            meter.on_tx(now, pkt.wire_bytes as u64);
            if let (Some(st), Some(opt)) = (&self.switches[s as usize].int, pkt.int.as_mut()) {
                let util = meter.utilization(now, port.rate);
                st.stamp(opt, port.queue.bytes(), util, pkt.ttl, now - pkt.enq_at);
            }
            // Data collects records; an ACK's stack is the echo and passes untouched. As in HPCC's
            // switch, txBytes excludes this packet and qlen is what stays queued behind it.
            if let (Some(h), true) = (pkt.hops, pkt.payload > 0) {
                let rec = HopRecord { qlen: port.queue.bytes(), tx_bytes: port.tx_bytes, ts: now, rate: port.rate };
                self.hops.push(h, rec);
            }
        }
        self.transmit(pid, pkt, now);
    }

    /// Frees the hop records a packet holds, when it is dropped or consumed.
    #[inline]
    fn release_hops(&mut self, pkt: &Packet) {
        if let Some(h) = pkt.hops {
            self.hops.free(h);
        }
    }

    fn on_tx_done(&mut self, pid: u32, now: Time) {
        let port = &mut self.ports[pid as usize];
        port.tx_event_pending = false;
        match self.roles[port.node as usize] {
            Role::Host(h) => self.nic_send(h, now),
            Role::Switch(s) => {
                if let Some(pkt) = port.queue.pop() {
                    self.switches[s as usize].buffer.used -= pkt.wire_bytes as u64;
                    self.switch_transmit(s, pid, pkt, now);
                    let port = &mut self.ports[pid as usize];
                    if !port.queue.is_empty() {
                        port.tx_event_pending = true;
                        self.q.push(port.busy_until, Event::TxDone(pid));
                    }
                }
            }
        }
    }

    /// Puts the host's next packet on the wire if the NIC is free: control first, then data.
    fn nic_send(&mut self, h: u32, now: Time) {
        let pid = self.nics[h as usize].port;
        let port = &mut self.ports[pid as usize];
        if !port.idle(now) {
            if !port.tx_event_pending {
                port.tx_event_pending = true;
                self.q.push(port.busy_until, Event::TxDone(pid));
            }
            return;
        }
        if port.tx_event_pending {
            return;
        }
        let pkt = match self.nics[h as usize].ctrl.pop_front() {
            Some(p) => Some(p),
            None => self.next_data_packet(h, now),
        };
        if let Some(pkt) = pkt {
            self.counters.packets_sent += 1;
            self.transmit(pid, pkt, now);
            // Wake at the end of serialization only if there is more to send; otherwise the next
            // ACK or flow start calls `nic_send`, which schedules the wake if the port is still busy.
            if self.nic_has_backlog(h) {
                let port = &mut self.ports[pid as usize];
                port.tx_event_pending = true;
                self.q.push(port.busy_until, Event::TxDone(pid));
            }
        }
    }

    /// Whether the host has a control packet queued or an active flow the window lets send.
    fn nic_has_backlog(&self, h: u32) -> bool {
        let nic = &self.nics[h as usize];
        !nic.ctrl.is_empty() || nic.active.iter().any(|f| self.flows[f as usize].sender.has_sendable())
    }

    /// The CC engine's scheduler: the highest-priority band with a flow ready to send, round robin
    /// within it, skipping flows their pacer or rate limiter holds back.
    fn next_data_packet(&mut self, h: u32, now: Time) -> Option<Packet> {
        let mut earliest: Option<Time> = None;
        let bands = self.nics[h as usize].active.bands();
        for band in 0..bands {
            if let Some(pkt) = self.next_in_band(h, band, now, &mut earliest) {
                return Some(pkt);
            }
        }
        if let Some(t) = earliest {
            let nic = &mut self.nics[h as usize];
            if nic.wake_at.is_none_or(|w| w > t) {
                nic.wake_at = Some(t);
                self.q.push(t, Event::NicWake(h));
            }
        }
        None
    }

    /// One round-robin pass over a priority band; notes the earliest time a held flow may send.
    fn next_in_band(&mut self, h: u32, band: usize, now: Time, earliest: &mut Option<Time>) -> Option<Packet> {
        let prio = band as u8;
        for _ in 0..self.nics[h as usize].active.band_len(band) {
            let f = self.nics[h as usize].active.pop(band)?;
            let flow = &mut self.flows[f as usize];
            // The CC's pacer and the application's rate limiter both gate the flow.
            let mut ready = flow.sender.pace_next;
            if let Some(tb) = flow.limiter.as_mut() {
                ready = ready.max(tb.ready_at(now, TcpConfig::wire_bytes(flow.sender.win.mss) as u64));
            }
            if ready > now {
                if flow.sender.has_sendable() {
                    *earliest = Some(earliest.map_or(ready, |e| e.min(ready)));
                    self.nics[h as usize].active.push(prio, f);
                } else {
                    flow.in_active = false;
                }
                continue;
            }
            let Some(seg) = flow.sender.next_segment(now) else {
                flow.in_active = false;
                continue;
            };
            self.nics[h as usize].active.push(prio, f);
            return Some(self.emit_segment(f, seg, now));
        }
        None
    }

    /// Turns a sender's segment into a packet and does the per-transmission bookkeeping.
    fn emit_segment(&mut self, f: u32, seg: Segment, now: Time) -> Packet {
        let flow = &mut self.flows[f as usize];
        let int = flow.sender.int_enabled().then(TcpInt::default);
        let mut wire_bytes = TcpConfig::wire_bytes(seg.len) + if int.is_some() { crate::packet::tcp_int::LEN as u32 } else { 0 };
        let mut hops = None;
        if flow.sender.hop_records_enabled() {
            wire_bytes += crate::packet::hpcc_int::HEADER_BYTES;
            if seg.len > 0 {
                hops = Some(self.hops.alloc());
            }
        }
        let pkt = Packet {
            flow: f,
            src: flow.src,
            dst: flow.dst,
            hash: flow.hash_fwd,
            seq: seg.seq,
            ack: 0,
            payload: seg.len as u32,
            wire_bytes,
            flags: seg.flags,
            ecn: if flow.sender.ecn_mode() == EcnMode::Off { Ecn::NotEct } else { Ecn::Ect },
            ttl: 64,
            prio: flow.prio,
            ts: now,
            int,
            hops,
            ..Packet::default()
        };
        if seg.len > 0 {
            self.counters.data_packets += 1;
        }
        if let Some(rate) = flow.sender.win.pacing_rate {
            flow.sender.pace_next = now + rate.tx_time(wire_bytes as u64);
        }
        if let Some(tb) = flow.limiter.as_mut() {
            tb.consume(now, wire_bytes as u64);
        }
        if flow.sender.rto_timer.deadline().is_none() {
            let at = now + flow.sender.rtt.rto();
            if let Some((t, gen)) = flow.sender.rto_timer.arm(at) {
                self.q.push(t, Event::Rto(f, gen));
            }
        }
        pkt
    }

    /// Marks a flow as having something to send and wakes its NIC.
    fn activate(&mut self, f: u32, now: Time) {
        let flow = &mut self.flows[f as usize];
        let h = flow.src;
        if !flow.in_active {
            flow.in_active = true;
            self.nics[h as usize].active.push(flow.prio, f);
        }
        self.nic_send(h, now);
    }

    fn send_ctrl(&mut self, h: u32, pkt: Packet, now: Time) {
        self.nics[h as usize].ctrl.push_back(pkt);
        self.nic_send(h, now);
    }

    fn host_receive(&mut self, h: u32, pkt: Packet, now: Time) {
        self.counters.packets_delivered += 1;
        debug_assert_eq!(pkt.dst, h);
        let f = pkt.flow;
        if pkt.is_forward() {
            let flow = &mut self.flows[f as usize];
            if pkt.has(flags::SYN) {
                debug_assert!(pkt.hops.is_none(), "only data segments collect hop records");
                let mut syn_ack = flow.receiver.build_syn_ack(&pkt);
                syn_ack.hash = flow.hash_rev;
                self.send_ctrl(h, syn_ack, now);
                return;
            }
            let template = Packet { flow: f, src: flow.src, dst: flow.dst, prio: flow.prio, ..Packet::default() };
            let (early, plan) = flow.receiver.on_segment(&pkt, now);
            self.deliver_to_app(f, now);
            let flow = &mut self.flows[f as usize];
            if let Some(mut a) = early {
                // The early ACK covers the earlier segments: it echoes their records.
                a.hops = flow.receiver.hops_held.take();
                a.hash = flow.hash_rev;
                self.nics[h as usize].ctrl.push_back(a);
            }
            if let Some(stale) = pkt.hops.and_then(|new| flow.receiver.hops_held.replace(new)) {
                // Delayed ACK: only the latest segment's records are echoed.
                self.hops.free(stale);
            }
            match plan {
                AckPlan::Now => {
                    let mut a = flow.receiver.build_ack(&template);
                    a.hops = flow.receiver.hops_held.take();
                    a.hash = flow.hash_rev;
                    self.nics[h as usize].ctrl.push_back(a);
                }
                AckPlan::Delay(at) => {
                    if flow.receiver.delack_timer.deadline().is_none() {
                        if let Some((t, gen)) = flow.receiver.delack_timer.arm(at) {
                            self.q.push(t, Event::DelayedAck(f, gen));
                        }
                    }
                }
            }
            self.nic_send(h, now);
        } else {
            let flow = &mut self.flows[f as usize];
            let out = match pkt.hops {
                None => flow.sender.on_ack(&pkt, now),
                Some(hi) => {
                    let out = flow.sender.on_ack_with_hops(&pkt, Some(self.hops.get(hi)), now);
                    self.hops.free(hi);
                    out
                }
            };
            if let (true, Some(echo)) = (pkt.int.is_some(), flow.sender.last_echo) {
                let row = TelemetryRow { t: now, flow: f, srtt: flow.sender.rtt.srtt(), cwnd: flow.sender.win.cwnd, echo };
                self.telemetry.record(row);
            }
            if out.completed {
                flow.finish = Some(now);
                self.unfinished -= 1;
                self.stop_if_done();
                return;
            }
            if !flow.sender.needs_timer() {
                flow.sender.rto_timer.cancel();
            } else if out.una_advanced || flow.sender.rto_timer.deadline().is_none() {
                let at = now + flow.sender.rtt.rto();
                if let Some((t, gen)) = flow.sender.rto_timer.arm(at) {
                    self.q.push(t, Event::Rto(f, gen));
                }
            }
            if out.may_send {
                self.activate(f, now);
            }
        }
    }

    /// Tells the flow's application what the receiver now has in full: the whole flow, or on a
    /// persistent connection each message up to the bytes delivered in order.
    fn deliver_to_app(&mut self, f: u32, now: Time) {
        let flow = &mut self.flows[f as usize];
        let delivered = flow.receiver.delivered;
        let Some((a, flow_tag)) = flow.app else {
            if flow.rx_done.is_none() && flow.size == Some(delivered) {
                flow.rx_done = Some(now);
            }
            return;
        };
        let persistent = flow.sender.is_persistent();
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

    fn on_flow_start(&mut self, f: u32, now: Time) {
        if (f as usize) < self.static_flows {
            self.next_start = f as usize + 1;
            if self.next_start < self.static_flows {
                self.q.push(self.flows[self.next_start].start, Event::FlowStart(self.next_start as u32));
            }
        }
        self.activate(f, now);
        if let Some(iv) = self.flows[f as usize].sender.cc.tick_interval() {
            self.q.push(now + iv, Event::CcTick(f));
        }
    }

    /// Runs the algorithm's timer, re-arms it while the flow lasts, and lets the flow send if
    /// the tick opened the window.
    fn on_cc_tick(&mut self, f: u32, now: Time) {
        let sender = &mut self.flows[f as usize].sender;
        if sender.phase == Phase::Done {
            return;
        }
        sender.cc.on_tick(now, &mut sender.win);
        if let Some(iv) = sender.cc.tick_interval() {
            self.q.push(now + iv, Event::CcTick(f));
        }
        self.activate(f, now);
    }

    /// Carries out what an application asked for: new flows, timers, completed requests.
    fn apply_app_io(&mut self, a: u32, mut io: AppIo, now: Time) {
        for (spec, tag) in io.open.drain(..) {
            let f = self.add_flow(&spec);
            self.flows[f as usize].app = Some((a, tag));
            self.q.push(spec.start.max(now), Event::FlowStart(f));
        }
        for (spec, tag) in io.send.drain(..) {
            let size = spec.size.expect("messages have a size");
            let key = (spec.src, spec.dst, spec.class);
            if let Some(&f) = self.connections.get(&key) {
                let flow = &mut self.flows[f as usize];
                flow.sender.append(size);
                flow.size = flow.sender.size();
                flow.messages.push_back((flow.size.expect("a persistent connection has a size"), tag));
                if flow.sender.phase == Phase::Established {
                    self.activate(f, now);
                }
            } else {
                let f = self.add_flow(&spec);
                // A connection outlives its messages: the run ends without waiting for it.
                self.unfinished -= 1;
                let flow = &mut self.flows[f as usize];
                flow.sender.make_persistent();
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

    fn on_rto(&mut self, f: u32, gen: u32, now: Time) {
        let flow = &mut self.flows[f as usize];
        match flow.sender.rto_timer.fire(now, gen) {
            TimerFire::Stale => {}
            TimerFire::Reschedule(t, g) => self.q.push(t, Event::Rto(f, g)),
            TimerFire::Expired => {
                if !flow.sender.needs_timer() {
                    return;
                }
                flow.sender.on_timeout(now);
                self.activate(f, now);
            }
        }
    }

    fn on_delayed_ack(&mut self, f: u32, gen: u32, now: Time) {
        let flow = &mut self.flows[f as usize];
        if flow.receiver.delack_timer.fire(now, gen) != TimerFire::Expired || !flow.receiver.has_unacked() {
            return;
        }
        let template = Packet { flow: f, src: flow.src, dst: flow.dst, prio: flow.prio, ..Packet::default() };
        let mut a = flow.receiver.build_ack(&template);
        a.hops = flow.receiver.hops_held.take();
        a.hash = flow.hash_rev;
        let h = flow.dst;
        self.send_ctrl(h, a, now);
    }

    // ---- inspection -------------------------------------------------------------------------

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
    pub fn bucketing(&self) -> &crate::metrics::Bucketing {
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
    /// A node's display name ("h3", "sw0").
    pub fn node_name(&self, node: u32) -> &str {
        &self.node_names[node as usize]
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

    /// Global port ids named by a spec: "sw0->sw1", "sw0" (all its ports) or "h3" (its NIC).
    pub fn resolve_ports(names: &[String], graph: &Graph, spec: &str) -> Result<Vec<u32>, String> {
        let node_ports = graph.ports();
        let mut base = Vec::with_capacity(node_ports.len());
        let mut acc = 0u32;
        for p in &node_ports {
            base.push(acc);
            acc += p.len() as u32;
        }
        let find = |name: &str| {
            names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| format!("no node named \"{name}\"; nodes are h0..h{} and sw0..sw{}", graph.hosts().len() - 1, names.len() - graph.hosts().len() - 1))
        };
        match spec.split_once("->") {
            Some((a, b)) => {
                let (a, b) = (find(a.trim())?, find(b.trim())?);
                let local = node_ports[a]
                    .iter()
                    .position(|&(_, peer)| peer == b)
                    .ok_or_else(|| format!("{} has no link to {}", names[a], names[b]))?;
                Ok(vec![base[a] + local as u32])
            }
            None => {
                let a = find(spec.trim())?;
                Ok((0..node_ports[a].len() as u32).map(|l| base[a] + l).collect())
            }
        }
    }

    /// Checks conservation: every packet sent is delivered, dropped or still in the network, and
    /// every flow's receiver got each byte once and in order.
    pub fn check_conservation(&self) -> Result<(), String> {
        let c = &self.counters;
        let in_network: u64 = self.ports.iter().map(|p| (p.queue.len() + p.link.in_flight.len()) as u64).sum();
        let forwarded_sent = c.packets_sent;
        if forwarded_sent != c.packets_delivered + c.drops() + in_network {
            return Err(format!(
                "packet conservation broken: sent {} != delivered {} + dropped {} + in network {}",
                forwarded_sent,
                c.packets_delivered,
                c.drops(),
                in_network
            ));
        }
        // Every hop-record stack in use is held by a packet in the network or a NIC queue, or by
        // a receiver about to echo it; anything else leaked or was freed twice.
        let queued = self.ports.iter().flat_map(|p| p.queue.iter().chain(p.link.in_flight.iter().map(|(_, pkt)| pkt)));
        let held_by_packets =
            queued.chain(self.nics.iter().flat_map(|n| n.ctrl.iter())).filter(|p| p.hops.is_some()).count();
        let held_hops = held_by_packets + self.flows.iter().filter(|f| f.receiver.hops_held.is_some()).count();
        if held_hops != self.hops.in_use() {
            return Err(format!(
                "hop-record conservation broken: {} stacks in use != {} held by packets and receivers",
                self.hops.in_use(),
                held_hops
            ));
        }
        for f in &self.flows {
            let r = &f.receiver;
            if r.delivered != r.rcv_nxt {
                return Err(format!("flow {}: delivered {} != next expected {}", f.id, r.delivered, r.rcv_nxt));
            }
            if f.sender.una > r.rcv_nxt {
                return Err(format!("flow {}: sender saw {} acknowledged but receiver has {}", f.id, f.sender.una, r.rcv_nxt));
            }
            if let Some(size) = f.size {
                if r.delivered > size {
                    return Err(format!("flow {}: delivered {} of {} bytes", f.id, r.delivered, size));
                }
                if f.finish.is_some() && r.delivered != size {
                    return Err(format!("flow {}: finished with {} of {} bytes delivered", f.id, r.delivered, size));
                }
            }
        }
        Ok(())
    }
}

/// Names of the graph's nodes as the world gives them ("h0".., "sw0"..).
pub fn node_names(graph: &Graph) -> Vec<String> {
    let (mut nh, mut ns) = (0, 0);
    graph
        .nodes
        .iter()
        .map(|k| match k {
            NodeKind::Host => {
                nh += 1;
                format!("h{}", nh - 1)
            }
            NodeKind::Switch { .. } => {
                ns += 1;
                format!("sw{}", ns - 1)
            }
        })
        .collect()
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
        let mut world = World::build(&loaded).unwrap();
        let ticks = Arc::new(AtomicU64::new(0));
        world.flows[0].sender.cc = Box::new(Ticker(ticks.clone()));
        world.run(&mut |_| {});
        // Ticks at 100, 200, ..., 900 us; the one at 1 ms comes after the end.
        assert_eq!(ticks.load(Ordering::Relaxed), 9);
        let s = &world.flows[0].sender;
        let mss = world.tcp.mss();
        assert_eq!(s.win.cwnd, 19 * mss);
        // The round trip (1.2 ms) outlasts the run: only the ticks let more than the initial
        // window out.
        assert_eq!(s.in_flight(), 19 * mss, "each tick's segment went out");
    }
}
