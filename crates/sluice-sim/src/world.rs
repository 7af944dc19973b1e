//! The world: every element in arenas indexed by small integers, the clock, and the one `match`
//! that dispatches events to the element they concern. Elements own their behaviour: switches
//! and ports in `net/` (the [`Fabric`]), hosts' stacks in `host/stack.rs`, connections in
//! `transport/` (built by `transport/build.rs`), applications and the proxy in `workload/`. The
//! world routes events to them and hands what one reports to the next: a transport's report to
//! its host, then to the applications, then back to the host ([`World::carry_out`]'s order).

use crate::context::{Across, Counters, Cx, Event, SampleKind, Streams};
use crate::event::EventQueue;
use crate::flow::Flow;
use crate::host::cpu::{Cpu, CpuConfig};
use crate::host::nic::Nic;
use crate::host::offload::{Offload, OffloadConfig};
use crate::host::splice::Relayed;
use crate::host::stack::{Arrival, Carry, Hosts, Stack};
use crate::host::telemetry::TelemetryLog;
use crate::net::capture::{Capture, CaptureSpec};
use crate::net::circuit::CircuitParts;
use crate::net::fabric::{Fabric, FabricSpec, PfcFromPorts, Role};
use crate::net::link::Flying;
use crate::net::partition::Partitions;
use crate::net::port::Port;
use crate::net::qdisc::Discipline;
use crate::net::switch::Switch;
use crate::net::topology::Graph;
use crate::packet::hpcc_int::HopSlab;
use crate::packet::Packet;
use crate::prefetch::{prefetch, prefetch_bytes};
use crate::time::{Rate, Time};
use crate::transport::build::{flow_hash, ClassRuntime, IntRuntime, TransportBuilder};
use crate::transport::rdma::{RdmaConfig, RdmaTlt};
use crate::transport::tcp::TcpConfig;
use crate::transport::{ClientEnd, Side};
use crate::workload::app::{App, AppIo, Request};
use crate::workload::proxy::{self, RelayEnd, Splicing};
use crate::workload::runtime::Runtime;
use crate::workload::FlowSpec;

mod invariants;
mod threads;
pub use threads::MAX_THREADS;

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
    /// RDMA queue-pair settings, and TLT's marking when TLT is on.
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

/// Builds a switch's PFC settings from its ports (their rates and delays size the headroom).
pub type PfcSettings = Box<PfcFromPorts>;

/// Bytes of ports beyond which they no longer stay in a core's cache (the 1-2 MB of a server
/// core's L2): a 10,240-host fat tree has 12 MB, ws320 0.4 MB.
const PORTS_CACHED: usize = 2 << 20;

/// The simulated datacenter.
pub struct World {
    q: EventQueue<Event>,
    /// Simulated time: the last event's, or the end time once the run reached it.
    clock: Time,
    /// Ports, switches, routes.
    net: Fabric,
    /// The event loop routes the next packet a switch receives ahead, to prefetch its egress
    /// port: only where the ports outgrow the cache, as elsewhere routing twice costs more.
    route_ahead: bool,
    /// Every host's stack.
    hosts: Hosts,
    flows: Vec<Flow>,
    /// Builds each flow's transport.
    build: TransportBuilder,
    /// Flows known at build time, started in order by a chain of events; later ones come from apps.
    static_flows: usize,
    /// The static flows' specs, from which each one's connection is built when it starts.
    specs: Vec<FlowSpec>,
    /// Each static flow's successor in its partition's chain of starts (`u32::MAX`: the last).
    next_start: Vec<u32>,
    /// Static flows started so far.
    started: usize,
    /// The partitions the fabric splits into, and each host's.
    parts: Partitions,
    host_part: Vec<u16>,
    /// The source of what is scheduled now: the acting element's partition, or [`Self::global`].
    part: usize,
    /// The source of the run's own events (samples, the end, circuit days): partition 0's
    /// sequence with one partition, its own after the others' with more.
    global: usize,
    /// Where a run of several partitions stops once its traffic is done: the end of the
    /// lookahead window in which the last flow finished, a point every partition can reach alone.
    stop_at: Option<Time>,
    /// The closed-loop applications.
    runtime: Runtime,
    /// Each partition's random streams.
    rngs: Vec<Streams>,
    /// Each partition's packet counters (and the run's own source's, which counts nothing).
    counters: Vec<Counters>,
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
    capture: Option<Box<Capture>>,
    /// HPCC per-hop record stacks of the packets (and receivers) that hold one.
    hops: HopSlab,
    /// The packets on the wires.
    flying: Flying,
    /// The circuit schedule of a reconfigurable network.
    circuit: Option<CircuitParts>,
    /// Partitions taking turns window by window, each on a list of its own, when a test asks.
    windows: Option<Box<Windows>>,
    /// Which partitions this world runs: all, or (a replica on a thread) its share.
    own: Vec<bool>,
    /// Which replica this world is when threads run the partitions (`threads.rs`).
    replica: Option<usize>,
    /// The other threads' replicas, when this world runs on several.
    spread: Option<Box<threads::Spread>>,
    /// How many replicas of this world the memory holds, where known (`scenario::build`).
    pub(crate) room_for: Option<usize>,
    /// A world gathered from threads: how the packet checks went in each replica.
    checked_apart: Option<Result<(), String>>,
}

/// A run by lookahead windows: partitions that take turns, each on its own event list (the check
/// that a run's order does not depend on how its partitions are scheduled), or a replica on a
/// thread, whose partitions share one list and meet the other replicas at each window's end.
struct Windows {
    /// Each partition's list, the run's own last; the acting one's is in `World::q`. None in a
    /// replica on a thread, whose partitions share `World::q`, the order the same.
    lists: Vec<EventQueue<Event>>,
    /// Whose list is in `World::q`.
    acting: usize,
    /// What an acting partition scheduled for another, handed over when its turn ends.
    across: Vec<Across>,
    /// What was scheduled for partitions another replica runs, shipped at the window's end.
    outbox: Vec<Across>,
    /// Partitions take their turns last to first.
    reversed: bool,
}

/// Borrows the context elements act through out of the world's own fields.
macro_rules! cx {
    ($w:ident, $now:expr) => {
        Cx {
            now: $now,
            part: $w.part as u16,
            events: &mut $w.q,
            across: $w.windows.as_deref_mut().map(|w| &mut w.across),
            // SAFETY: `part` is a partition or the run's own source, at most `global`, and there
            // are `global + 1` of each (`World::new`); the bounds checks cost about 1% of a run.
            counters: {
                debug_assert!($w.part < $w.counters.len() && $w.part < $w.rngs.len());
                unsafe { $w.counters.get_unchecked_mut($w.part) }
            },
            hops: &mut $w.hops,
            flying: &mut $w.flying,
            // SAFETY: as for `counters`.
            rng: unsafe { $w.rngs.get_unchecked_mut($w.part) },
            capture: $w.capture.as_deref_mut(),
        }
    };
}

/// Borrows what a host's stack acts on out of the world's own fields.
macro_rules! stack {
    ($w:ident, $now:expr) => {
        Stack { flows: &mut $w.flows, ports: &mut $w.net.ports, cx: cx!($w, $now), host_part: &$w.host_part }
    };
}

impl World {
    /// Builds the world from validated parts over `graph`: ports, switches, NICs, every flow.
    pub fn new(graph: &Graph, p: Parts) -> World {
        let parts = Partitions::of(graph, !p.apps.is_empty());
        let (global, parts_count) = (if parts.count == 1 { 0 } else { parts.count }, parts.count);
        let mut net = Fabric::build(
            graph,
            &FabricSpec {
                buffer: p.buffer,
                priorities: p.priorities,
                disciplines: &p.disciplines,
                int: (&p.int.switches, p.int.util_window),
                pfc: p.pfc.as_deref(),
                circuit: p.circuit.as_ref(),
                salt: |s, n| flow_hash(s, n, 0x5eed, false),
            },
        );
        for port in &mut net.ports {
            port.link.far_part = parts.of_node[port.peer_node as usize];
            port.link.cut = parts.of_node[port.node as usize] != port.link.far_part;
        }
        let host_part: Vec<u16> = net.host_ports.iter().map(|&port| parts.of_node[net.ports[port as usize].node as usize]).collect();
        let nics: Vec<Nic> = net.host_ports.iter().enumerate().map(|(h, &port)| Nic { host: h as u32, port, ..Nic::default() }).collect();
        let host_count = nics.len() as u32;
        let telemetry = match p.telemetry {
            Some((interval, flows)) => TelemetryLog::new(interval, flows),
            None => TelemetryLog::new(Time::ZERO, Some(Vec::new())),
        };
        let mut hosts = Hosts::new(nics, telemetry, p.tcp.mss());
        if let Some(c) = p.cpu.as_ref().filter(|c| !c.hosts.is_empty()) {
            hosts.cpus = (0..host_count).map(|h| c.hosts.contains(&(h as usize)).then(|| Box::new(Cpu::new(h, c)))).collect();
        }
        if let Some(o) = p.offload.as_ref().filter(|o| !o.hosts.is_empty()) {
            hosts.offloads = (0..host_count).map(|h| o.hosts.contains(&(h as usize)).then(|| Box::new(Offload::new(h, o, p.seed)))).collect();
        }
        let capture = p.capture.map(|c| {
            let host_ports = net.ports.iter().map(|port| !net.is_switch(port.node)).collect();
            Box::new(Capture::new(c, host_ports))
        });
        let mut world = World {
            q: EventQueue::new(),
            clock: Time::ZERO,
            route_ahead: net.ports.len() * std::mem::size_of::<Port>() > PORTS_CACHED,
            net,
            flows: Vec::with_capacity(p.flows.len()),
            static_flows: p.flows.len(),
            specs: Vec::new(),
            next_start: Vec::new(),
            started: 0,
            rngs: (0..=global).map(|part| Streams::new(p.seed, part)).collect(),
            parts,
            host_part,
            part: 0,
            global,
            stop_at: None,
            runtime: Runtime::new(p.apps),
            build: TransportBuilder {
                classes: p.classes,
                tcp: p.tcp,
                rdma: p.rdma,
                lazy_tcb: hosts.offloads.iter().map(|o| o.as_deref().is_some_and(|o| o.lazy_tcb)).collect(),
                int: p.int,
            },
            hosts,
            counters: vec![Counters::default(); global + 1],
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
            hops: HopSlab::default(),
            flying: Flying::default(),
            circuit: p.circuit,
            windows: None,
            own: vec![true; parts_count],
            replica: None,
            spread: None,
            room_for: None,
            checked_apart: None,
        };
        for spec in &p.flows {
            let f = world.add_flow(spec);
            // Built to fill in the record (the flow's real MSS, base RTT and ideal FCT); the
            // connection itself waits for the flow's start, so memory grows with the flows
            // that have started, not with the whole workload.
            world.flows[f as usize].wait_to_connect();
        }
        world.specs = p.flows;
        for (a, app) in world.runtime.apps.iter().enumerate() {
            world.q.push(app.start_time(), Event::AppStart(a as u32));
        }
        world.cwnd_flows = match p.cwnd_flows {
            Some(v) if !v.is_empty() => v,
            Some(_) => (0..world.flows.len() as u32).collect(),
            None => Vec::new(),
        };
        world.schedule_starts();
        world
    }

    /// Schedules what starts the run: each partition's chain of flow starts, the samples, the
    /// end, the circuit's first day.
    fn schedule_starts(&mut self) {
        // Each partition starts its own flows, in start order, by a chain of events of its own.
        let mut heads = vec![u32::MAX; self.parts.count];
        let mut last = vec![u32::MAX; self.parts.count];
        self.next_start = vec![u32::MAX; self.flows.len()];
        for f in &self.flows {
            let part = self.host_part[f.src as usize] as usize;
            match last[part] {
                u32::MAX => heads[part] = f.id,
                prev => self.next_start[prev as usize] = f.id,
            }
            last[part] = f.id;
        }
        let own = self.own.clone();
        for (part, &f) in heads.iter().enumerate().filter(|&(part, &f)| f != u32::MAX && own[part]) {
            self.act_as(part);
            self.q.push(self.flows[f as usize].start, Event::FlowStart(f));
        }
        self.act_as(self.global);
        if !self.queue_ports.is_empty() {
            self.q.push(Time::ZERO, Event::Sample(SampleKind::Queues));
        }
        if !self.cwnd_flows.is_empty() {
            self.q.push(Time::ZERO, Event::Sample(SampleKind::Cwnd));
        }
        if let Some(end) = self.end {
            self.q.push(end, Event::End);
        }
        if self.circuit.is_some() {
            self.q.push(Time::ZERO, Event::Circuit);
        }
    }

    /// Makes partition `part` (or the run's own source) the one acting: what is scheduled next is
    /// its.
    #[inline]
    fn act_as(&mut self, part: usize) {
        self.part = part;
        match self.windows.as_deref_mut() {
            None => self.q.set_source(part),
            // A replica on a thread: its partitions share one list.
            Some(w) if w.lists.is_empty() => self.q.set_source(part),
            Some(w) if w.acting != part => {
                std::mem::swap(&mut self.q, &mut w.lists[w.acting]);
                std::mem::swap(&mut self.q, &mut w.lists[part]);
                w.acting = part;
            }
            Some(_) => {}
        }
    }

    /// Lets the partitions take turns window by window, each on its own event list, first to
    /// last or (`reversed`) last to first, as threads will run them. The run is the same as on
    /// the one list (a test checks); with one partition nothing changes. Call before [`Self::run`].
    pub fn take_turns(&mut self, reversed: bool) {
        if self.parts.count == 1 || self.events > 0 {
            return;
        }
        let lists = (0..=self.global)
            .map(|part| {
                let mut q = EventQueue::new();
                q.set_source(part);
                q
            })
            .collect();
        self.q = EventQueue::new();
        self.windows = Some(Box::new(Windows { lists, acting: self.global, across: Vec::new(), outbox: Vec::new(), reversed }));
        std::mem::swap(&mut self.q, &mut self.windows.as_deref_mut().expect("just set").lists[self.global]);
        if let Some(c) = self.capture.as_deref_mut() {
            c.by_windows();
        }
        self.schedule_starts();
    }

    /// Adds a flow; flows known at build time must be added in start-time order.
    fn add_flow(&mut self, spec: &FlowSpec) -> u32 {
        let flow = self.build.flow(spec, self.flows.len() as u32, &self.net);
        self.push_flow(flow, spec)
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
        let mut fresh = self.build.flow(&self.specs[f as usize], f, &self.net);
        // A replica keeps only the ends at hosts of its own partitions.
        let own = |h: u32| self.own[self.host_part[h as usize] as usize];
        if !own(fresh.src) {
            fresh.client = None;
        }
        if !own(fresh.dst) {
            fresh.server = None;
        }
        self.flows[f as usize].connect(fresh);
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

    /// Runs until the end time, the last flow finishing (when asked), or no events remain.
    /// `progress` is called now and then with the current simulated time.
    pub fn run(&mut self, progress: &mut dyn FnMut(Time)) {
        if self.spread.is_some() {
            return self.run_spread(progress);
        }
        if let (Some(window), true) = (self.parts.lookahead, self.windows.is_some()) {
            return self.run_windows(window, progress);
        }
        while !self.stopped {
            let Some((now, ev, part)) = self.q.pop_for() else { break };
            if self.parts.count > 1 {
                if self.stop_at.is_some_and(|t| now >= t) {
                    // Left where it was: an arrival over a cut link carries its packet.
                    let tie = self.q.popped_tie();
                    self.q.push_keyed(now, tie, ev, part);
                    self.stopped = true;
                    break;
                }
                #[cfg(debug_assertions)]
                assert_eq!(part, self.source_of(ev), "{ev:?} reached across partitions at once");
                // `act_as` without its look for turns: on this path there is one list.
                self.part = part;
                self.q.set_source(part);
            }
            self.prefetch_ahead();
            self.clock = now;
            self.events += 1;
            self.step(now, ev);
            if self.events & 0xffff == 0 {
                progress(now);
            }
        }
    }

    /// Partitions take turns window by window, each window as long as the lookahead (aligned to
    /// its multiples): within one, each partition runs its own list alone, since nothing another
    /// does reaches it before the window ends; then what crossed goes to its lists.
    #[inline(never)]
    fn run_windows(&mut self, window: Time, progress: &mut dyn FnMut(Time)) {
        let order = self.turn_order();
        let mut reported = self.events;
        while !self.stopped {
            let Some(start) = self.next_time_of_all() else { break };
            if self.stop_at.is_some_and(|t| start >= t) {
                self.stopped = true;
                break;
            }
            self.run_window(start, window, &order);
            if self.events - reported > 0xffff {
                reported = self.events;
                progress(self.clock);
            }
        }
        // Rows came in turn order within each window.
        self.hosts.telemetry.merge([]);
    }

    /// The partitions, in the order they take their turns.
    fn turn_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.parts.count).collect();
        if self.windows.as_deref().is_some_and(|w| w.reversed) {
            order.reverse();
        }
        order
    }

    /// Runs the lookahead window that `start` falls in: each partition in `order` takes its turn.
    /// The run's own events cut a window: the partitions run up to and including their time,
    /// then the event.
    fn run_window(&mut self, start: Time, window: Time, order: &[usize]) {
        let own = self.global;
        let end = Time((start.0 / window.0 + 1) * window.0);
        loop {
            self.act_as(own);
            let cut = self.q.next_time().filter(|&t| t < end);
            let limit = cut.unwrap_or(Time(end.0 - 1));
            for &part in order {
                self.act_as(part);
                while let Some((now, ev, _)) = self.q.pop_until(limit) {
                    self.prefetch_ahead();
                    self.clock = self.clock.max(now);
                    self.events += 1;
                    self.step(now, ev);
                }
                self.hand_over(limit);
            }
            if cut.is_none() {
                break;
            }
            self.act_as(own);
            let (now, ev, _) = self.q.pop_for().expect("the run's own event just seen");
            self.clock = self.clock.max(now);
            self.events += 1;
            self.step(now, ev);
            self.hand_over(limit);
            if self.stopped {
                break;
            }
        }
        if let Some(c) = self.capture.as_deref_mut() {
            c.settle();
        }
    }

    /// When the earliest event of any partition's list is due.
    fn next_time_of_all(&self) -> Option<Time> {
        let w = self.windows.as_deref().expect("partitions take turns");
        let parked = w.lists.iter().enumerate().filter(|&(i, _)| i != w.acting).filter_map(|(_, q)| q.next_time());
        parked.chain(self.q.next_time()).min()
    }

    /// Hands what the acting partition scheduled for others to their lists: nothing may be due
    /// within the turn that just ran to `limit`, or the lookahead was wrong.
    fn hand_over(&mut self, limit: Time) {
        let w = self.windows.as_deref_mut().expect("partitions take turns");
        for a in w.across.drain(..) {
            assert!(a.at > limit, "{:?} for partition {} at {} reaches back into a turn that ran to {limit}", a.ev, a.part, a.at);
            let list = if w.lists.is_empty() { &mut self.q } else { &mut w.lists[a.part as usize] };
            match self.own[a.part as usize] {
                true => list.push_keyed(a.at, a.tie, a.ev, a.part as usize),
                false => w.outbox.push(a),
            }
        }
    }

    /// The partition whose element `ev` concerns, or the run's own source: what the event list
    /// says, checked in debug builds.
    #[cfg(debug_assertions)]
    fn source_of(&self, ev: Event) -> usize {
        let of_host = |h: u32| self.host_part[h as usize] as usize;
        let of_port = |p: u32, far: bool| {
            let port = &self.net.ports[p as usize];
            self.parts.of_node[if far { port.peer_node } else { port.node } as usize] as usize
        };
        match ev {
            Event::Arrive(p, _) => of_port(p, true),
            Event::TxDone(p) | Event::PauseEnd(p) => of_port(p, false),
            Event::FlowStart(f) => of_host(self.flows[f as usize].src),
            Event::Timer(f, kind, _) => {
                let flow = &self.flows[f as usize];
                of_host(if kind.at_server() { flow.dst } else { flow.src })
            }
            Event::NicWake(h) | Event::CpuDone(h, _) | Event::NicTick(h) => of_host(h),
            // Applications keep the fabric one partition.
            Event::AppStart(_) | Event::AppTimer(..) => 0,
            Event::Sample(_) | Event::End | Event::Circuit => self.global,
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
                let port = &self.net.ports[p as usize];
                prefetch_bytes(port as *const Port as *const u8, 64);
                prefetch_bytes(&port.link.in_flight as *const _ as *const u8, 32);
                if let Some(pkt) = self.flying.address(place) {
                    prefetch_bytes(pkt as *const u8, std::mem::size_of::<Packet>());
                }
            }
            Some(Event::TxDone(p)) => prefetch(&self.net.ports[p as usize]),
            _ => {}
        }
        // Next: the wire's handle of the packet behind the arriving one, whose arrival it
        // schedules, and the port a switch will send the packet out of (the arrival's port and
        // packet are in cache by now). In a large fabric that port is a memory miss otherwise.
        if let Some(Event::Arrive(p, place)) = next {
            let port = &self.net.ports[p as usize];
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
        if let Role::Switch(s) = self.net.roles[node as usize] {
            let sw = &self.net.switches[s as usize];
            if let Some(egress) = sw.route(self.flying.get(place), &self.net.routes) {
                if let Some(out) = self.net.ports.get(sw.first_port as usize + egress) {
                    prefetch_bytes(out as *const Port as *const u8, 4 * 64);
                }
            }
        }
    }

    /// The one dispatch: each event goes to the element it concerns. Inlined into both loops, as
    /// a call per event costs more than the copy.
    #[inline(always)]
    fn step(&mut self, now: Time, ev: Event) {
        match ev {
            Event::Arrive(p, place) => {
                let port = &mut self.net.ports[p as usize];
                let (node, ingress) = (port.peer_node, port.peer_port);
                // A cut link's sender scheduled every arrival itself; elsewhere each arrival
                // schedules the next.
                if !port.link.cut {
                    let (_, head) = port.link.in_flight.pop_front().expect("an arrival event for the head packet");
                    debug_assert_eq!(head, place);
                    if let Some(&(next, behind)) = port.link.in_flight.front() {
                        self.q.push(next, Event::Arrive(p, behind));
                    }
                }
                let mut pkt = self.flying.take(place);
                if port.link.cut && !pkt.is_pfc() {
                    self.counters[self.part].arrived_across += 1;
                }
                if pkt.is_pfc() {
                    self.on_pfc_frame(ingress, &pkt, now);
                    return;
                }
                match self.net.roles[node as usize] {
                    Role::Switch(s) => {
                        let sw = &mut self.net.switches[s as usize];
                        let ports = &mut self.net.ports[sw.first_port as usize..self.net.port_base[node as usize + 1] as usize];
                        let mut cx = cx!(self, now);
                        sw.receive((ingress - sw.first_port) as u16, &mut pkt, ports, &self.net.routes, &mut cx);
                    }
                    Role::Host(h) => self.host_arrival(h, pkt, now),
                }
            }
            Event::TxDone(p) => {
                let node = self.net.ports[p as usize].node;
                match self.net.roles[node as usize] {
                    Role::Switch(s) => {
                        let sw = &mut self.net.switches[s as usize];
                        let first = sw.first_port as usize;
                        let ports = &mut self.net.ports[first..self.net.port_base[node as usize + 1] as usize];
                        let mut cx = cx!(self, now);
                        sw.dequeue(p as usize - first, ports, &mut cx);
                    }
                    Role::Host(h) => {
                        self.net.ports[p as usize].tx_event_pending = false;
                        self.hosts.nic_send(h, &mut stack!(self, now));
                    }
                }
            }
            Event::PauseEnd(p) => self.pause_ended(p, now),
            Event::NicWake(h) => {
                self.hosts.nics[h as usize].wake_at = None;
                self.hosts.nic_send(h, &mut stack!(self, now));
            }
            Event::FlowStart(f) => {
                if (f as usize) < self.static_flows {
                    self.started += 1;
                    let next = self.next_start[f as usize];
                    if next != u32::MAX {
                        self.q.push(self.flows[next as usize].start, Event::FlowStart(next));
                    }
                    self.connect_now(f);
                }
                let src = self.flows[f as usize].src;
                let c = self.hosts.with_client(f, src, &mut stack!(self, now), |c, io, cx| c.open(io, cx));
                self.carry_out(c, now);
            }
            Event::Timer(f, kind, gen) => {
                let c = self.hosts.timer(f, kind, gen, &mut stack!(self, now));
                self.carry_out(c, now);
            }
            Event::CpuDone(h, core) => {
                let c = self.hosts.cpu_done(h, core as usize, &mut stack!(self, now));
                self.carry_out(c, now);
            }
            Event::NicTick(h) => {
                for f in self.hosts.nic_tick(h, &mut stack!(self, now)) {
                    let c = self.hosts.nic_closed(h, f, &mut stack!(self, now));
                    self.carry_out(Some(c), now);
                }
                self.hosts.nic_send(h, &mut stack!(self, now));
            }
            Event::End => {
                self.stopped = true;
                // Not an event of the network: keep the count to the simulation's own work.
                self.events -= 1;
            }
            Event::AppStart(a) => {
                let io = self.runtime.start(a, now);
                self.apply_app_io(a, io, now);
            }
            Event::AppTimer(a, tag) => {
                let io = self.runtime.timer(a, tag, now);
                self.apply_app_io(a, io, now);
            }
            Event::Circuit => {
                for s in 0..self.net.switches.len() {
                    let node = self.net.switches[s].node as usize;
                    if self.net.switches[s].tor.is_none() || !self.own[self.parts.of_node[node] as usize] {
                        continue;
                    }
                    // Each ToR acts for its own partition.
                    if self.parts.count > 1 {
                        self.act_as(self.parts.of_node[node] as usize);
                    }
                    let sw = &mut self.net.switches[s];
                    let ports = &mut self.net.ports[sw.first_port as usize..self.net.port_base[node + 1] as usize];
                    let mut cx = cx!(self, now);
                    sw.serve_uplinks(ports, &mut cx);
                }
                self.act_as(self.global);
                if let Some(next) = self.circuit.as_ref().and_then(|c| c.schedule.next_change(now)) {
                    self.q.push(next, Event::Circuit);
                }
            }
            Event::Sample(SampleKind::Queues) => {
                for &p in &self.queue_ports {
                    let port = &self.net.ports[p as usize];
                    if !self.own[self.parts.of_node[port.node as usize] as usize] {
                        continue;
                    }
                    let bytes = match self.net.roles[port.node as usize] {
                        Role::Switch(s) => self.net.switches[s as usize].queued_bytes(port),
                        Role::Host(h) => self.hosts.nics[h as usize].backlog_bytes(&self.flows),
                    };
                    self.queue_samples.push(QueueSample { t: now, port: p, bytes });
                }
                self.q.push(now + self.queue_interval, Event::Sample(SampleKind::Queues));
            }
            Event::Sample(SampleKind::Cwnd) => {
                for i in 0..self.cwnd_flows.len() {
                    let f = self.cwnd_flows[i];
                    if !self.own[self.host_part[self.flows[f as usize].src as usize] as usize] {
                        continue;
                    }
                    if self.flows[f as usize].start <= now {
                        // Its start may come later in this instant: its window is the initial one.
                        self.connect_now(f);
                    }
                    let flow = &self.flows[f as usize];
                    if let (true, None, Some(t)) = (flow.start <= now, flow.finish, flow.client.as_ref()) {
                        let (win, cc) = t.congestion();
                        self.cwnd_samples.push(CwndSample { t: now, flow: f, cwnd: win.cwnd, state: cc.state() });
                    }
                }
                self.q.push(now + self.cwnd_interval, Event::Sample(SampleKind::Cwnd));
            }
        }
    }

    /// A PFC frame arrived on global port `at`: that port (facing back to the sender) pauses or
    /// resumes the priority, and sends what waited when it resumes.
    fn on_pfc_frame(&mut self, at: u32, frame: &Packet, now: Time) {
        match self.net.ports[at as usize].take_pfc_frame(frame, now) {
            Some(look_again) => self.q.push(look_again, Event::PauseEnd(at)),
            None => self.pause_ended(at, now),
        }
    }

    /// Port `p` may have been released by a resume or by its pause running out.
    fn pause_ended(&mut self, p: u32, now: Time) {
        let node = self.net.ports[p as usize].node;
        match self.net.roles[node as usize] {
            Role::Switch(s) => {
                let sw = &mut self.net.switches[s as usize];
                let first = sw.first_port as usize;
                let ports = &mut self.net.ports[first..self.net.port_base[node as usize + 1] as usize];
                let mut cx = cx!(self, now);
                sw.unpaused(p as usize - first, ports, &mut cx);
            }
            Role::Host(h) => self.hosts.nic_send(h, &mut stack!(self, now)),
        }
    }

    /// Carries out what a transport reported: the host's share first (replies, telemetry, the
    /// bytes for the record), then the applications' and the flow table's (delivery, the proxy,
    /// a transaction's answer, completion), then the host's last share (release, waking NICs).
    fn carry_out(&mut self, c: Option<Carry>, now: Time) {
        let Some(c) = c else { return };
        let (f, h) = (c.flow, c.host);
        self.hosts.take_report(c, &mut stack!(self, now));
        let report = self.hosts.report();
        let (delivered, response, completed) = (report.delivered.is_some(), report.response, report.completed);
        if delivered {
            if let Some((a, io)) = self.runtime.delivered(&mut self.flows[f as usize], now) {
                self.apply_app_io(a, io, now);
            }
        }
        if self.flows[f as usize].relay.is_some() {
            // The proxy may open the backend connection, whose report comes in between.
            let outer = self.hosts.set_aside();
            self.relay_step(f, h, now);
            self.hosts.restore(outer);
        }
        // Only a flow that expects a response (a transaction) takes the server's FIN as one: the
        // backend's FIN on a proxy's relayed connection is not a second completion.
        if response && self.flows[f as usize].response.is_some() {
            if let Some((a, io)) = self.runtime.answered(&mut self.flows[f as usize], now) {
                self.apply_app_io(a, io, now);
            }
        }
        let flow = &mut self.flows[f as usize];
        if completed && flow.finish.is_none() {
            flow.finish = Some(now);
            if flow.size.is_some() && !flow.client.as_ref().is_some_and(ClientEnd::is_persistent) {
                self.unfinished -= 1;
            }
            self.stop_if_done();
        }
        self.hosts.settle(c, &mut stack!(self, now));
    }

    /// A packet reaches host `h` (a packet ahead of its flow's start finds the server listening).
    fn host_arrival(&mut self, h: u32, pkt: Packet, now: Time) {
        self.connect_now(pkt.flow);
        match self.hosts.receive(h, pkt, &mut stack!(self, now)) {
            Arrival::Stack(c) => self.carry_out(c, now),
            Arrival::Spliced(r) => self.spliced(h, r, now),
        }
    }

    /// Host `h`'s NIC relayed a segment of a spliced connection: the rewritten segment goes on,
    /// a close seen end to end closes the proxy's ends of both connections, and the host takes
    /// the share that is its own.
    #[cold]
    fn spliced(&mut self, h: u32, r: Box<Relayed>, now: Time) {
        if let Some(out) = r.out {
            self.hosts.nics[h as usize].ctrl.push_back(out);
        }
        if let Some((front, back)) = r.closed {
            for (f, side) in [(front, Side::Server), (back, Side::Client)] {
                let c = self.hosts.spliced_closed(h, f, side, &mut stack!(self, now));
                self.carry_out(c, now);
            }
            self.hosts.handover(h, front, &mut stack!(self, now));
        }
        match r.to_host {
            Some(own) => {
                let c = self.hosts.stack_rx(h, own, &mut stack!(self, now));
                self.carry_out(c, now);
            }
            None => self.hosts.nic_send(h, &mut stack!(self, now)),
        }
    }

    /// The proxy on host `h` acts on a change to flow `f`, one of a request's connections: writes
    /// on, connects to the backend, asks its NIC to splice.
    fn relay_step(&mut self, f: u32, h: u32, now: Time) {
        let Some(step) = proxy::relay_step(&mut self.flows, f, h, now) else { return };
        if let Some(b) = step.write {
            self.hosts.activate(b, &mut stack!(self, now));
        }
        if let Some(spec) = step.connect {
            let b = self.add_flow(&spec);
            proxy::attach_backend(&mut self.flows, step.front, b);
            let c = self.hosts.with_client(b, h, &mut stack!(self, now), |c, io, cx| c.open(io, cx));
            self.carry_out(c, now);
        }
        if step.waiting {
            self.hosts.relay_ready(h, step.front, &mut stack!(self, now));
        }
    }

    /// Carries out what an application asked for: new flows, messages, timers, completed requests.
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
                        if let Some(c) = flow.tcp_client_mut() {
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
            let live = self.runtime.connections.get(&key).copied().filter(|&f| self.flows[f as usize].client.is_some());
            if let Some(f) = live {
                let flow = &mut self.flows[f as usize];
                let t = flow.client.as_mut().expect("a live connection has a client");
                let (new_size, established) = t.append(size);
                flow.size = new_size;
                flow.messages.push_back((flow.size.expect("a persistent connection has a size"), tag));
                if established {
                    let src = flow.src;
                    let s = &mut stack!(self, now);
                    self.hosts.activate(f, s);
                    self.hosts.nic_send(src, s);
                }
            } else {
                let f = self.add_flow(&spec);
                // A connection outlives its messages: the run ends without waiting for it.
                self.unfinished -= 1;
                let flow = &mut self.flows[f as usize];
                flow.client.as_mut().expect("a new connection has a client").make_persistent();
                flow.app = Some((a, 0));
                flow.messages.push_back((size, tag));
                self.runtime.connections.insert(key, f);
                self.q.push(spec.start.max(now), Event::FlowStart(f));
            }
        }
        for (at, tag) in io.timers.drain(..) {
            self.q.push(at, Event::AppTimer(a, tag));
        }
        self.runtime.give_back(io);
        self.stop_if_done();
    }

    /// Stops the run when asked to finish with the traffic and nothing more can start.
    fn stop_if_done(&mut self) {
        // A replica knows only its own flows: the threads decide together (`threads.rs`).
        if self.stop_when_done
            && self.replica.is_none()
            && self.unfinished == 0
            && self.endless == 0
            && self.started >= self.static_flows
            && self.runtime.done()
        {
            match self.parts.lookahead {
                None => self.stopped = true,
                Some(window) => {
                    let now = self.q.now().0;
                    self.stop_at.get_or_insert(Time((now / window.0 + 1) * window.0));
                }
            }
        }
    }

    /// Checks conservation: every packet sent is delivered, dropped or still in the network;
    /// every switch's buffer holds exactly what its queues hold; every application got each
    /// byte once and in order, as counted apart from the transport (`world/invariants.rs`).
    pub fn check_conservation(&self) -> Result<(), String> {
        invariants::check_conservation(self)
    }

    // ---- inspection -------------------------------------------------------------------------

    /// Hands `pkt` to host `h` now, as if it had just arrived from the network: a crafted
    /// segment (a forged ACK, a stray SYN) for tests and attack studies. It counts as sent.
    pub fn inject(&mut self, h: u32, pkt: Packet) {
        if self.parts.count > 1 {
            self.act_as(self.host_part[h as usize] as usize);
        }
        self.counters[self.part].packets_sent += 1;
        self.host_arrival(h, pkt, self.clock);
    }
    /// Each host's CPU, where it is modelled.
    pub fn cpus(&self) -> &[Option<Box<Cpu>>] {
        &self.hosts.cpus
    }
    /// Each host's NIC offload, where it has one.
    pub fn offloads(&self) -> &[Option<Box<Offload>>] {
        &self.hosts.offloads
    }
    /// The partitions the fabric splits into.
    pub fn partitions(&self) -> &Partitions {
        &self.parts
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
        &self.runtime.requests
    }
    /// Whether closed-loop applications open flows as the run goes.
    pub fn has_applications(&self) -> bool {
        !self.runtime.apps.is_empty()
    }
    /// Traffic classes, by index.
    pub fn classes(&self) -> &[ClassRuntime] {
        &self.build.classes
    }
    /// The run's packet counters: every partition's, summed.
    pub fn counters(&self) -> Counters {
        let mut all = Counters::default();
        for c in &self.counters {
            all.add(c);
        }
        all
    }
    /// Each partition's packet counters, by partition.
    pub fn partition_counters(&self) -> &[Counters] {
        &self.counters[..self.parts.count]
    }
    /// Partition `part`'s packet counters, mutably: a test may corrupt them to check the
    /// conservation check.
    pub fn partition_counters_mut(&mut self, part: usize) -> &mut Counters {
        &mut self.counters[part]
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
        &self.hosts.telemetry
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
        &self.net.ports
    }
    /// Every switch, by ordinal.
    pub fn switches(&self) -> &[Switch] {
        &self.net.switches
    }
    /// One switch, mutably: a test may corrupt its accounting to check the conservation check.
    pub fn switch_mut(&mut self, s: usize) -> &mut Switch {
        &mut self.net.switches[s]
    }
    /// The fabric: ports, switches, routes.
    pub fn fabric(&self) -> &Fabric {
        &self.net
    }
    /// Each host's NIC.
    pub fn nics(&self) -> &[Nic] {
        &self.hosts.nics
    }
    /// The packets on the wires.
    pub fn flying(&self) -> &Flying {
        &self.flying
    }
    /// The packets on cut links, which their arrival events alone carry: (the sending port's
    /// global id, the packet's place in the `Flying` store).
    pub fn on_cut_links(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let parked = self.windows.as_deref().into_iter().flat_map(|w| w.lists.iter().enumerate().filter(move |&(i, _)| i != w.acting));
        let lists = parked.map(|(_, q)| q).chain(std::iter::once(&self.q));
        lists.flat_map(|q| q.iter()).filter_map(|ev| match *ev {
            Event::Arrive(p, place) if self.net.ports[p as usize].link.cut => Some((p, place)),
            _ => None,
        })
    }
    /// How the packet checks went in each thread's replica, for a world gathered from threads.
    pub(crate) fn checked_apart(&self) -> Option<&Result<(), String>> {
        self.checked_apart.as_ref()
    }
    /// The packets on the wires, mutably: a test may leak one to check the conservation check.
    pub fn flying_mut(&mut self) -> &mut Flying {
        &mut self.flying
    }
    /// A node's display name ("h3", "sw0").
    pub fn node_name(&self, node: u32) -> &str {
        &self.net.node_names[node as usize]
    }

    /// The circuit schedule, in a reconfigurable network.
    pub fn circuit(&self) -> Option<&CircuitParts> {
        self.circuit.as_ref()
    }

    /// True when switches run PFC.
    pub fn pfc_enabled(&self) -> bool {
        self.net.switches.iter().any(|s| s.pfc.is_some())
    }

    /// True if node `n` is a switch.
    pub fn is_switch(&self, n: u32) -> bool {
        self.net.is_switch(n)
    }
    /// Number of hosts.
    pub fn host_count(&self) -> usize {
        self.hosts.nics.len()
    }
    /// The host link rate of host `h`.
    pub fn host_rate(&self, h: u32) -> Rate {
        self.net.ports[self.net.host_ports[h as usize] as usize].rate
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
        world.flows[0].tcp_client_mut().unwrap().sender.cc = Box::new(Ticker(ticks.clone()));
        world.run(&mut |_| {});
        // Ticks at 100, 200, ..., 900 us; the one at 1 ms comes after the end.
        assert_eq!(ticks.load(Ordering::Relaxed), 9);
        let s = world.flows[0].sender().unwrap();
        let mss = world.build.tcp.mss();
        assert_eq!(s.win.cwnd, 19 * mss);
        // The round trip (1.2 ms) outlasts the run: only the ticks let more than the initial
        // window out.
        assert_eq!(s.in_flight(), 19 * mss, "each tick's segment went out");
    }
}
