//! What the outputs, the checks and the tests read of a world.

use crate::ids::{FlowId, HostId, PortId};
use super::{invariants, Bucketing, CwndSample, QueueSample, World};
use crate::context::{Counters, Event};
use crate::flow::Flow;
use crate::host::cpu::Cpu;
use crate::host::nic::Nic;
use crate::host::offload::Offload;
use crate::host::telemetry::TelemetryLog;
use crate::net::capture::Capture;
use crate::net::circuit::CircuitParts;
use crate::net::fabric::Fabric;
use crate::net::link::Flying;
use crate::net::partition::Partitions;
use crate::net::port::Port;
use crate::net::switch::Switch;
use crate::packet::hpcc_int::HopSlab;
use crate::packet::Packet;
use crate::time::{Rate, Time};
use crate::flow::build::ClassRuntime;
use crate::workload::app::Request;
use crate::workload::chakra::ChakraRun;
use crate::workload::collective::CollectiveRun;

impl World {
    /// Checks conservation: every packet sent is delivered, dropped or still in the network;
    /// every switch's buffer holds exactly what its queues hold; every application got each
    /// byte once and in order, as counted apart from the transport (`world/invariants.rs`).
    pub fn check_conservation(&self) -> Result<(), String> {
        invariants::check_conservation(self)
    }

    /// Hands `pkt` to host `h` now, as if it had just arrived from the network: a crafted
    /// segment (a forged ACK, a stray SYN) for tests and attack studies. It counts as sent.
    pub fn inject(&mut self, h: HostId, pkt: Packet) {
        if self.parts.count > 1 {
            self.act_as(self.host_part[h].index());
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

    /// The collectives the run's flows make, one per iteration, by flow id.
    pub fn collectives(&self) -> &[CollectiveRun] {
        &self.collectives
    }

    /// The Chakra traces the run's flows come from, by flow id.
    pub fn chakra_runs(&self) -> &[ChakraRun] {
        &self.chakra
    }

    /// Flows that still wait for others, each with the flows it waits for that have not arrived
    /// where its host would see them (empty where no flow waits).
    pub fn waiting_flows(&self) -> Vec<(FlowId, Vec<FlowId>)> {
        let Some(waits) = self.waits.as_deref() else { return Vec::new() };
        waits.stuck(|a| {
            let f = &self.flows[a];
            f.rx_done.is_some() || f.finish.is_some()
        })
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

    /// The scenario fails links (`[[failures]]`).
    pub fn has_failures(&self) -> bool {
        self.has_failures
    }

    /// Every flow, by id (a shard's own, as it met them).
    pub fn flows(&self) -> &[Flow] {
        self.flows.records()
    }

    /// One flow, mutably: a probe may wrap the flow's algorithm before the run to watch the
    /// signals it gets.
    pub fn flow_mut(&mut self, id: FlowId) -> &mut Flow {
        &mut self.flows[id]
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
    pub fn on_cut_links(&self) -> impl Iterator<Item = (PortId, u32)> + '_ {
        let parked = self.windows.as_deref().into_iter().flat_map(|w| w.lists.iter().enumerate().filter(move |&(i, _)| i != w.acting));
        let lists = parked.map(|(_, q)| q).chain(std::iter::once(&self.q));
        lists.flat_map(|q| q.iter()).filter_map(|ev| match *ev {
            Event::Arrive(p, place) if self.net.ports[p].link.cut => Some((p, place)),
            _ => None,
        })
    }

    /// How the packet checks went in each thread's shard, for a world gathered from threads.
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

    /// The host link rate of host `h`, as built.
    pub fn host_rate(&self, h: u32) -> Rate {
        self.net.ports[self.net.host_ports[h as usize]].built_rate
    }
}
