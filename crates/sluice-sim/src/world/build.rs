//! Building a world from its validated spec: the fabric, hosts and every flow's record, the
//! chains that start each partition's flows, and a flow's connection built when it starts.

use crate::ids::{FlowId, HostId, PartId};
use super::{Bucketing, World};
use crate::context::{Counters, Event, SampleKind, Streams};
use crate::event::EventQueue;
use crate::flow::{Flow, FlowTable};
use crate::host::cpu::{Cpu, CpuConfig};
use crate::host::nic::Nic;
use crate::host::offload::{Offload, OffloadConfig};
use crate::host::stack::Hosts;
use crate::host::telemetry::TelemetryLog;
use crate::net::capture::{Capture, CaptureSpec};
use crate::net::circuit::CircuitParts;
use crate::net::fabric::{Fabric, FabricSpec, PfcFromPorts};
use crate::net::failure::LinkChange;
use crate::net::link::Flying;
use crate::net::partition::Partitions;
use crate::net::port::Port;
use crate::net::qdisc::Discipline;
use crate::net::topology::Graph;
use crate::packet::hpcc_int::HopSlab;
use crate::time::Time;
use crate::flow::build::{flow_hash, ClassRuntime, IntRuntime, TransportBuilder};
use crate::transport::rdma::{RdmaConfig, RdmaTlt};
use crate::transport::uet::{UetConfig, UetNetwork};
use crate::transport::tcp::TcpConfig;
use crate::flow::waits::{WaitGraph, Waiting};
use crate::workload::app::App;
use crate::workload::chakra::ChakraRun;
use crate::workload::collective::CollectiveRun;
use crate::workload::runtime::Runtime;
use crate::workload::FlowSpec;
use std::sync::Arc;

/// Everything a world is built from, validated by the scenario.
pub struct WorldSpec {
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
    /// The Ultra Ethernet transport's settings, when a class runs on it.
    pub uet: Option<UetConfig>,
    /// Classes by index; `default` is always present.
    pub classes: Vec<ClassRuntime>,
    /// Every flow, sorted by start time.
    pub flows: Vec<FlowSpec>,
    /// Closed-loop applications that open flows during the run.
    pub apps: Vec<Box<dyn App>>,
    /// What flows wait for, when some do.
    pub waits: Option<WaitGraph>,
    /// The collectives the flows make, one per iteration, by flow id.
    pub collectives: Vec<CollectiveRun>,
    /// The Chakra traces the flows come from, by flow id.
    pub chakra: Vec<ChakraRun>,
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
    /// Links failing and coming back, both directions of each (`net/failure.rs`).
    pub failures: Vec<LinkChange>,
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

/// The static flows each partition starts, as a chain in start order: the world and its shards
/// share it.
#[derive(Default)]
pub(super) struct StartChains {
    /// Each partition's first flow (`u32::MAX`: it starts none).
    pub first: Vec<u32>,
    /// Each flow's successor in its partition's chain (`u32::MAX`: the last).
    pub next: Vec<u32>,
}

impl StartChains {
    /// The chains of `specs`, in start order, by the partition of each flow's sender; a flow that
    /// waits for others is started by them instead.
    fn of(specs: &[FlowSpec], host_part: &[PartId], parts: usize, waits: Option<&WaitGraph>) -> StartChains {
        let mut chains = StartChains { first: vec![u32::MAX; parts], next: vec![u32::MAX; specs.len()] };
        let mut last = vec![u32::MAX; parts];
        for (f, spec) in specs.iter().enumerate() {
            if waits.is_some_and(|w| w.waits(FlowId(f as u32))) {
                continue;
            }
            let part = host_part[spec.src].index();
            match last[part] {
                u32::MAX => chains.first[part] = f as u32,
                before => chains.next[before as usize] = f as u32,
            }
            last[part] = f as u32;
        }
        chains
    }
}

impl World {
    /// Builds the world from validated parts over `graph`: ports, switches, NICs, every flow.
    pub fn new(graph: &Graph, p: WorldSpec) -> World {
        let coupled = match (&p.apps, &p.waits) {
            (apps, _) if !apps.is_empty() => Some("closed-loop applications couple their hosts at zero delay"),
            (_, Some(w)) if w.coupled() => Some("a flow waits for a flow with no end at its host, which couples the hosts at zero delay"),
            _ => None,
        };
        let parts = Partitions::of(graph, coupled);
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
        let host_part: Vec<PartId> = net.host_ports.iter().map(|&port| parts.of_node[net.ports[port].node as usize]).collect();
        let nics: Vec<Nic> = net.host_ports.iter().enumerate().map(|(h, &port)| Nic { host: HostId(h as u32), port, ..Nic::default() }).collect();
        let host_count = nics.len() as u32;
        let telemetry = match p.telemetry {
            Some((interval, flows)) => TelemetryLog::new(interval, flows),
            None => TelemetryLog::new(Time::ZERO, Some(Vec::new())),
        };
        let mut hosts = Hosts::new(nics, telemetry, p.tcp.mss(), p.seed);
        if let Some(c) = p.cpu.as_ref().filter(|c| !c.hosts.is_empty()) {
            hosts.cpus = (0..host_count).map(|h| c.hosts.contains(&(h as usize)).then(|| Box::new(Cpu::new(HostId(h), c)))).collect();
        }
        if let Some(o) = p.offload.as_ref().filter(|o| !o.hosts.is_empty()) {
            hosts.offloads = (0..host_count).map(|h| o.hosts.contains(&(h as usize)).then(|| Box::new(Offload::new(h, o, p.seed)))).collect();
        }
        // A link failed from the start is failed as built; later changes are events.
        for change in p.failures.iter().filter(|c| c.at == Time::ZERO) {
            change.apply(&mut net.ports[change.port]);
        }
        let capture = p.capture.map(|c| {
            let host_ports = net.ports.iter().map(|port| !net.is_switch(port.node)).collect();
            Box::new(Capture::new(c, host_ports))
        });
        let uet = p.uet.map(|cfg| {
            let measured = UetNetwork::measure(graph, &net, &cfg);
            (cfg, measured)
        });
        let mut world = World {
            q: EventQueue::new(),
            clock: Time::ZERO,
            route_ahead: net.ports.len() * std::mem::size_of::<Port>() > PORTS_CACHED,
            net,
            flows: FlowTable::with_capacity(p.flows.len()),
            static_flows: p.flows.len(),
            specs: Arc::default(),
            starts: Arc::default(),
            started: 0,
            rngs: (0..=global).map(|part| Streams::new(p.seed, part)).collect(),
            parts,
            host_part,
            part: 0,
            global,
            stop_at: None,
            runtime: Runtime::new(p.apps),
            waits: p.waits.as_ref().filter(|w| w.waiting() > 0).map(|w| Box::new(Waiting::new(Arc::new(w.clone())))),
            released: Vec::new(),
            collectives: p.collectives.into(),
            chakra: p.chakra.into(),
            build: Arc::new(TransportBuilder {
                classes: p.classes,
                tcp: p.tcp,
                rdma: p.rdma,
                lazy_tcb: hosts.offloads.iter().map(|o| o.as_deref().is_some_and(|o| o.lazy_tcb)).collect(),
                int: p.int,
                uet,
                seed: p.seed,
            }),
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
            has_failures: !p.failures.is_empty(),
            link_changes: p.failures.iter().filter(|c| c.at > Time::ZERO).copied().collect(),
            windows: None,
            own: vec![true; parts_count],
            shard: None,
            spread: None,
            room_for: None,
            checked_apart: None,
        };
        for (f, spec) in p.flows.iter().enumerate() {
            // Built to fill in the record (the flow's real MSS, base RTT and ideal FCT); the
            // connection itself waits for the flow's start, so memory grows with the flows
            // that have started, not with the whole workload.
            let mut record = world.record(spec, FlowId(f as u32));
            record.wait_to_connect();
            world.push_flow(record, spec);
        }
        world.starts = Arc::new(StartChains::of(&p.flows, &world.host_part, world.parts.count, p.waits.as_ref()));
        world.specs = Arc::new(p.flows);
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
    pub(super) fn schedule_starts(&mut self) {
        // Each partition starts its own flows, in start order, by a chain of events of its own
        // (`starts`): its first flow's start begins it.
        for part in 0..self.parts.count {
            let f = self.starts.first[part];
            if f == u32::MAX || !self.own[part] {
                continue;
            }
            self.act_as(part);
            self.q.push(self.specs[f as usize].start, Event::FlowStart(FlowId(f)));
        }
        // Each link change is its sending port's partition's to make.
        for (i, change) in Arc::clone(&self.link_changes).iter().enumerate() {
            let part = self.parts.of_node[self.net.ports[change.port].node as usize].index();
            if self.own[part] {
                self.act_as(part);
                self.q.push(change.at, Event::LinkChange(change.port, i as u32));
            }
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

    /// Adds a flow; flows known at build time must be added in start-time order.
    pub(super) fn add_flow(&mut self, spec: &FlowSpec) -> FlowId {
        let flow = self.record(spec, FlowId(self.flows.len() as u32));
        self.push_flow(flow, spec)
    }

    /// Flow `id`'s record with its connection built.
    pub(super) fn record(&self, spec: &FlowSpec, id: FlowId) -> Flow {
        let mut flow = self.build.flow(spec, id, &self.net);
        flow.deadline = spec.qos.deadline;
        flow.response = spec.response;
        flow
    }

    /// Builds flow `f`'s connection now, if it still waits for its start: a probe can then wrap
    /// its algorithm before the run, and a packet ahead of the start finds the server listening.
    #[inline]
    pub fn connect_now(&mut self, f: FlowId) {
        if self.flows.get(f).is_none_or(Flow::waits_to_connect) {
            self.connect_waiting(f);
        }
    }

    /// Builds a waiting flow's connection; out of line, as the stack checks on every packet.
    #[cold]
    #[inline(never)]
    pub(super) fn connect_waiting(&mut self, f: FlowId) {
        let spec = &self.specs[f.index()];
        // A flow that waited starts when what it waited for let it.
        let waited = self.waits.as_deref().and_then(|w| w.start_of(f));
        let mut fresh = match waited {
            Some(start) => self.record(&FlowSpec { start, ..spec.clone() }, f),
            None => self.record(spec, f),
        };
        // A shard keeps only the ends at hosts of its own partitions.
        let own = |h: HostId| self.own[self.host_part[h].index()];
        if !own(fresh.src) {
            fresh.client = None;
        }
        if !own(fresh.dst) {
            fresh.server = None;
        }
        match self.flows.get_mut(f) {
            Some(record) => {
                if waited.is_some() {
                    record.start = fresh.start;
                }
                record.connect(fresh)
            }
            // A shard meets the flow first: the fresh record is the one it would have waited in.
            None => self.flows.push(fresh),
        }
    }

    /// Records a new flow's QoS and counts it among the finite or endless flows.
    pub(super) fn push_flow(&mut self, flow: Flow, spec: &FlowSpec) -> FlowId {
        match spec.size {
            Some(_) => self.unfinished += 1,
            None => self.endless += 1,
        }
        let id = flow.id;
        self.flows.push(flow);
        id
    }

    /// The sending host of flow `f`, whether or not this world holds its record.
    pub(super) fn src_of(&self, f: FlowId) -> HostId {
        match self.specs.get(f.index()) {
            Some(spec) => HostId(spec.src as u32),
            None => self.flows[f].src,
        }
    }
}
