//! The world: every element in arenas indexed by small integers, the clock, and the one `match`
//! that dispatches events to the element they concern. Elements own their behaviour: switches
//! and ports in `net/` (the [`Fabric`]), hosts' stacks in `host/stack.rs`, connections in
//! `transport/` (built by `transport/build.rs`), applications and the proxy in `workload/`. The
//! world routes events to them and hands what one reports to the next: a transport's report to
//! its host, then to the applications, then back to the host ([`World::carry_out`]'s order).
//!
//! This file holds the world's fields, the loop and the dispatch. Beside it: the build and a
//! flow's connection (`build.rs`), what a report leads to (`apps.rs`), samples (`sampling.rs`),
//! circuit days (`circuit.rs`), partitions taking turns (`windows.rs`), threads and their shards
//! (`threads.rs`), the conservation checks (`invariants.rs`) and what the outputs read
//! (`view.rs`).

use crate::context::{Counters, Cx, Event, SampleKind, Streams};
use crate::event::EventQueue;
use crate::flow::FlowTable;
use crate::host::stack::{Arrival, Hosts, HostCx};
use crate::ids::{FlowId, HostId, PartId, PortId};
use crate::net::capture::Capture;
use crate::net::circuit::CircuitParts;
use crate::net::fabric::{Fabric, Role};
use crate::net::failure::LinkChange;
use crate::net::link::Flying;
use crate::net::partition::Partitions;
use crate::net::port::Port;
use crate::packet::hpcc_int::HopSlab;
use crate::packet::Packet;
use crate::prefetch::{prefetch, prefetch_bytes};
use crate::time::Time;
use crate::flow::build::TransportBuilder;
use crate::flow::waits::Waiting;
use crate::workload::chakra::ChakraRun;
use crate::workload::collective::CollectiveRun;
use crate::workload::runtime::Runtime;
use crate::workload::FlowSpec;
use std::sync::Arc;

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
    /// Every flow's record (a shard's: those of the flows with an end at its hosts).
    flows: FlowTable,
    /// Builds each flow's transport; shards share it.
    build: Arc<TransportBuilder>,
    /// Flows known at build time, started in order by a chain of events; later ones come from apps.
    static_flows: usize,
    /// The static flows' specs, from which each one's connection is built when it starts;
    /// shards share them.
    specs: Arc<Vec<FlowSpec>>,
    /// Each partition's chain of static flow starts.
    starts: Arc<build::StartChains>,
    /// Static flows started so far.
    started: usize,
    /// The partitions the fabric splits into, and each host's.
    parts: Partitions,
    host_part: Vec<PartId>,
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
    /// Flows that wait for flows: this shard's progress through the graph, if any flow waits.
    waits: Option<Box<Waiting>>,
    /// The flows a wait released, reused.
    released: Vec<(Time, FlowId)>,
    /// The collectives the flows make, one per iteration; shards share them.
    collectives: Arc<[CollectiveRun]>,
    /// The Chakra traces the flows come from; shards share them.
    chakra: Arc<[ChakraRun]>,
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
    /// Links failing and coming back during the run, in the scenario's order; shards share them.
    link_changes: Arc<[LinkChange]>,
    /// The scenario has failures (some may have been in effect from the start).
    has_failures: bool,
    /// Partitions taking turns window by window, each on a list of its own, when a test asks.
    windows: Option<Box<WindowedRun>>,
    /// Which partitions this world runs: all, or (a shard on a thread) its share.
    own: Vec<bool>,
    /// Which shard this world is when threads run the partitions (`threads.rs`).
    shard: Option<usize>,
    /// The other threads' shards, when this world runs on several.
    spread: Option<Box<threads::Spread>>,
    /// How many shards of this world the memory holds, where known (`scenario::build`).
    pub(crate) room_for: Option<usize>,
    /// A world gathered from threads: how the packet checks went in each shard.
    checked_apart: Option<Result<(), String>>,
}

/// Borrows the context elements act through out of the world's own fields.
macro_rules! cx {
    ($w:ident, $now:expr) => {
        Cx {
            now: $now,
            part: crate::ids::PartId($w.part as u16),
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
macro_rules! host_cx {
    ($w:ident, $now:expr) => {
        HostCx { flows: &mut $w.flows, ports: &mut $w.net.ports, cx: cx!($w, $now), host_part: &$w.host_part }
    };
}

mod apps;
mod build;
mod circuit;
mod invariants;
mod sampling;
mod threads;
mod view;
mod windows;
pub use build::{PfcSettings, WorldSpec};
pub use sampling::{Bucketing, CwndSample, QueueSample};
pub use threads::MAX_THREADS;
use windows::WindowedRun;

impl World {
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

    /// The partition whose element `ev` concerns, or the run's own source: what the event list
    /// says, checked in debug builds.
    #[cfg(debug_assertions)]
    fn source_of(&self, ev: Event) -> usize {
        let of_host = |h: HostId| self.host_part[h].index();
        let of_port = |p: PortId, far: bool| {
            let port = &self.net.ports[p];
            self.parts.of_node[if far { port.peer_node } else { port.node } as usize].index()
        };
        match ev {
            Event::Arrive(p, _) => of_port(p, true),
            Event::TxDone(p) | Event::PauseEnd(p) => of_port(p, false),
            Event::FlowStart(f) => of_host(self.src_of(f)),
            Event::Timer(f, kind, _) => {
                let flow = &self.flows[f];
                of_host(if kind.at_server() { flow.dst } else { flow.src })
            }
            Event::NicWake(h) | Event::CpuDone(h, _) | Event::NicTick(h) | Event::PullPace(h) | Event::PullRate(h) => of_host(h),
            Event::PullRequest(f) => of_host(self.flows[f].dst),
            // Applications keep the fabric one partition.
            Event::AppStart(_) | Event::AppTimer(..) => 0,
            Event::LinkChange(p, _) => of_port(p, false),
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
                let port = &self.net.ports[p];
                prefetch_bytes(port as *const Port as *const u8, 64);
                prefetch_bytes(&port.link.in_flight as *const _ as *const u8, 32);
                if let Some(pkt) = self.flying.address(place) {
                    prefetch_bytes(pkt as *const u8, std::mem::size_of::<Packet>());
                }
            }
            Some(Event::TxDone(p)) => prefetch(&self.net.ports[p]),
            _ => {}
        }
        // Next: the wire's handle of the packet behind the arriving one, whose arrival it
        // schedules, and the port a switch will send the packet out of (the arrival's port and
        // packet are in cache by now). In a large fabric that port is a memory miss otherwise.
        if let Some(Event::Arrive(p, place)) = next {
            let port = &self.net.ports[p];
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
                let port = &mut self.net.ports[p];
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
                    self.on_pfc_frame(PortId(ingress), &pkt, now);
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
                let node = self.net.ports[p].node;
                match self.net.roles[node as usize] {
                    Role::Switch(s) => {
                        let sw = &mut self.net.switches[s as usize];
                        let first = sw.first_port as usize;
                        let ports = &mut self.net.ports[first..self.net.port_base[node as usize + 1] as usize];
                        let mut cx = cx!(self, now);
                        sw.dequeue(p.index() - first, ports, &mut cx);
                    }
                    Role::Host(h) => {
                        self.net.ports[p].tx_event_pending = false;
                        self.hosts.nic_send(h, &mut host_cx!(self, now));
                    }
                }
            }
            Event::PauseEnd(p) => self.pause_ended(p, now),
            Event::NicWake(h) => {
                self.hosts.nics[h].wake_at = None;
                self.hosts.nic_send(h, &mut host_cx!(self, now));
            }
            Event::PullRequest(f) => {
                let h = self.flows[f].dst;
                self.hosts.request_pull(h, f, &mut host_cx!(self, now));
            }
            Event::PullPace(h) => self.hosts.pull_pace(h, &mut host_cx!(self, now)),
            Event::PullRate(h) => self.hosts.pull_rate(h, &mut host_cx!(self, now)),
            Event::FlowStart(f) => {
                if f.index() < self.static_flows {
                    self.started += 1;
                    let next = self.starts.next[f.index()];
                    if next != u32::MAX {
                        self.q.push(self.specs[next as usize].start, Event::FlowStart(FlowId(next)));
                    }
                    self.connect_now(f);
                }
                let src = self.flows[f].src;
                let c = self.hosts.with_client(f, src, &mut host_cx!(self, now), |c, io, cx| c.open(io, cx));
                self.carry_out(c, now);
            }
            Event::Timer(f, kind, gen) => {
                let c = self.hosts.timer(f, kind, gen, &mut host_cx!(self, now));
                self.carry_out(c, now);
            }
            Event::CpuDone(h, core) => {
                let c = self.hosts.cpu_done(h, core as usize, &mut host_cx!(self, now));
                self.carry_out(c, now);
            }
            Event::NicTick(h) => {
                for f in self.hosts.nic_tick(h, &mut host_cx!(self, now)) {
                    let c = self.hosts.nic_closed(h, f, &mut host_cx!(self, now));
                    self.carry_out(Some(c), now);
                }
                self.hosts.nic_send(h, &mut host_cx!(self, now));
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
            Event::Circuit => self.circuit_day(now),
            Event::LinkChange(p, i) => self.link_changes[i as usize].apply(&mut self.net.ports[p]),
            Event::Sample(SampleKind::Queues) => self.sample_queues(now),
            Event::Sample(SampleKind::Cwnd) => self.sample_cwnd(now),
        }
    }

    /// A PFC frame arrived on global port `at`: that port (facing back to the sender) pauses or
    /// resumes the priority, and sends what waited when it resumes.
    fn on_pfc_frame(&mut self, at: PortId, frame: &Packet, now: Time) {
        match self.net.ports[at].take_pfc_frame(frame, now) {
            Some(look_again) => self.q.push(look_again, Event::PauseEnd(at)),
            None => self.pause_ended(at, now),
        }
    }

    /// Port `p` may have been released by a resume or by its pause running out.
    fn pause_ended(&mut self, p: PortId, now: Time) {
        let node = self.net.ports[p].node;
        match self.net.roles[node as usize] {
            Role::Switch(s) => {
                let sw = &mut self.net.switches[s as usize];
                let first = sw.first_port as usize;
                let ports = &mut self.net.ports[first..self.net.port_base[node as usize + 1] as usize];
                let mut cx = cx!(self, now);
                sw.unpaused(p.index() - first, ports, &mut cx);
            }
            Role::Host(h) => self.hosts.nic_send(h, &mut host_cx!(self, now)),
        }
    }

    /// A packet reaches host `h` (a packet ahead of its flow's start finds the server listening).
    fn host_arrival(&mut self, h: HostId, pkt: Packet, now: Time) {
        self.connect_now(FlowId(pkt.flow));
        match self.hosts.receive(h, pkt, &mut host_cx!(self, now)) {
            Arrival::Stack(c) => self.carry_out(c, now),
            Arrival::Spliced(r) => self.spliced(h, r, now),
        }
    }

    /// Stops the run when asked to finish with the traffic and nothing more can start.
    fn stop_if_done(&mut self) {
        // A shard knows only its own flows: the threads decide together (`threads.rs`).
        // Flows that still wait for flows never delivered cannot start: once every other flow is
        // done, nothing will release them, and the run ends instead of waiting forever.
        let idle = self.waits.as_deref().map_or(0, Waiting::still_waiting);
        if self.stop_when_done
            && self.shard.is_none()
            && self.unfinished == idle
            && self.endless == 0
            && self.started + idle >= self.static_flows
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

    // ---- inspection -------------------------------------------------------------------------

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
        world.connect_now(FlowId(0));
        world.flows[FlowId(0)].tcp_client_mut().unwrap().sender.cc = Box::new(Ticker(ticks.clone()));
        world.run(&mut |_| {});
        // Ticks at 100, 200, ..., 900 us; the one at 1 ms comes after the end.
        assert_eq!(ticks.load(Ordering::Relaxed), 9);
        let s = world.flows[FlowId(0)].sender().unwrap();
        let mss = world.build.tcp.mss();
        assert_eq!(s.win.cwnd, 19 * mss);
        // The round trip (1.2 ms) outlasts the run: only the ticks let more than the initial
        // window out.
        assert_eq!(s.in_flight(), 19 * mss, "each tick's segment went out");
    }
}
