//! One run on several threads. The world is built once; each thread runs a shard of it that acts
//! only for its share of the partitions: the built world itself for the first, and for each other
//! one carved from it, holding the fabric's shape, its own hosts' NICs, CPUs and offloads, the flow
//! specs and transport builder it shares, and the records of the flows it meets (`FlowTable`).
//! Shards run window by window (each as long as the lookahead), their partitions' events on one
//! list in the canonical order. At each window's end they meet: each takes what the others
//! scheduled for its partitions (an arrival over a cut link brings its packet and hop records by
//! value, as a message between machines would), and all agree on the next window and on whether
//! the run is done. Nothing a shard does within a window depends on another's progress, so the
//! run is the one a single thread makes; afterwards each element's state, and each flow's record
//! (its client's, with its server's share), is taken from the shard that ran it into the built
//! world for the outputs (`tests/schedules.rs` checks every output byte for byte).

use crate::ids::HostId;
use super::{invariants, WindowedRun, World};
use crate::context::{CrossEvent, Event};
use crate::event::EventQueue;
use crate::flow::FlowTable;
use crate::host::nic::Nic;
use crate::host::stack::Hosts;
use crate::net::link::Flying;
use crate::net::port::Port;
use crate::net::switch::Switch;
use crate::packet::hpcc_int::{HopSlab, HopStack};
use crate::packet::Packet;
use crate::time::Time;
use crate::flow::waits::Waiting;
use crate::workload::runtime::Runtime;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// The most threads a run may be given.
pub const MAX_THREADS: usize = 1024;

/// What crosses from one shard to another at a window's end: an event for a partition the
/// receiver runs and, for an arrival over a cut link, the packet with its hop records.
struct Parcel {
    across: CrossEvent,
    pkt: Option<(Packet, Option<HopStack>)>,
}

/// What a shard tells the others at a window's end.
#[derive(Default)]
struct WindowReport {
    /// Parcels, by the shard that takes them.
    parcels: Vec<Vec<Parcel>>,
    /// When its earliest event (or parcel) is due.
    next: Option<Time>,
    /// Finite flows it has not seen finish.
    unfinished: usize,
    /// Static flows it started.
    started: usize,
    /// Flows it saw stop waiting for others.
    released: usize,
    /// It reached the end time.
    stopped: bool,
}

/// Where the shards meet at each window's end.
struct Exchange {
    barrier: WindowBarrier,
    /// Reports by shard, in two sets used in turn: a shard writes one while the others may
    /// still read the other, never the one they read (a barrier lies between).
    reports: [Vec<Mutex<WindowReport>>; 2],
    /// Each partition's shard.
    owner: Vec<usize>,
    /// Finite flows each shard counted unfinished before the run.
    unfinished: usize,
}

/// A barrier that a thread leaving by a panic breaks, so that the others return rather than
/// wait for it forever. A window's work is often a fraction of a millisecond, so a party waits
/// spinning for a while before it sleeps: waking a sleeping thread costs tens of microseconds.
struct WindowBarrier {
    parties: usize,
    arrived: AtomicUsize,
    generation: AtomicU64,
    broken: AtomicBool,
    sleepers: Mutex<()>,
    all_here: Condvar,
}

/// Spins before a party waiting at a barrier sleeps: some tens of microseconds.
const SPINS: u32 = 1 << 14;

impl WindowBarrier {
    fn new(parties: usize) -> WindowBarrier {
        WindowBarrier {
            parties,
            arrived: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            broken: AtomicBool::new(false),
            sleepers: Mutex::new(()),
            all_here: Condvar::new(),
        }
    }

    /// Waits for every party; false if one broke the barrier.
    fn wait(&self) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.parties {
            // The last to arrive resets the count before it lets the others go on, so that none
            // arrives at the next barrier to find this one's count.
            self.arrived.store(0, Ordering::Relaxed);
            let _sleepers = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
            self.generation.store(generation + 1, Ordering::Release);
            self.all_here.notify_all();
            return !self.broken.load(Ordering::Acquire);
        }
        let over = || self.generation.load(Ordering::Acquire) != generation || self.broken.load(Ordering::Acquire);
        for _ in 0..SPINS {
            if over() {
                return !self.broken.load(Ordering::Acquire);
            }
            std::hint::spin_loop();
        }
        let mut sleepers = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
        while !over() {
            sleepers = self.all_here.wait(sleepers).unwrap_or_else(|e| e.into_inner());
        }
        !self.broken.load(Ordering::Acquire)
    }

    /// Breaks the barrier: every wait, now and later, returns false.
    fn break_up(&self) {
        let _sleepers = self.sleepers.lock().unwrap_or_else(|e| e.into_inner());
        self.broken.store(true, Ordering::Release);
        self.all_here.notify_all();
    }
}

/// Breaks the barrier if its thread unwinds.
struct LeaveOnPanic<'a>(&'a WindowBarrier);

impl Drop for LeaveOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.break_up();
        }
    }
}

/// The shards a world spreads its run over.
pub(super) struct Spread {
    /// Shards 1 and up (this world is shard 0).
    others: Vec<World>,
    /// Each partition's shard.
    owner: Vec<usize>,
}

impl World {
    /// Readies this world to run on up to `threads` threads, at most one per partition and as
    /// many as the memory holds shards of it (where [`crate::scenario::build`] knew). Each other
    /// thread runs a shard carved from this world: the fabric's shape, its own hosts' NICs, CPUs
    /// and offloads moved over, the flow specs and transport builder shared, and a record for
    /// each flow it meets. After the run this world holds it as one thread leaves it. Returns
    /// the threads the run will use: 1 where the fabric is one partition.
    pub fn spread(&mut self, threads: usize) -> usize {
        let n = threads.min(self.parts.count).min(self.room_for.unwrap_or(usize::MAX).max(1));
        if n <= 1 || self.parts.lookahead.is_none() || self.events > 0 || self.windows.is_some() || !self.runtime.apps.is_empty() {
            return 1;
        }
        let owner = self.deal(n);
        let mut others: Vec<World> = (1..n).map(|r| self.carve_shard(&owner, r)).collect();
        self.trade_hosts(&mut others, &owner);
        for (r, w) in std::iter::once(&mut *self).chain(others.iter_mut()).enumerate() {
            w.own = owner.iter().map(|&o| o == r).collect();
            w.shard = Some(r);
            w.windows = Some(Box::new(WindowedRun { lists: Vec::new(), acting: 0, across: Vec::new(), outbox: Vec::new(), reversed: false }));
            w.q = EventQueue::new();
            w.schedule_starts();
        }
        self.spread = Some(Box::new(Spread { others, owner }));
        n
    }

    /// Shard `r`: what every partition reads, shared or copied in its built state (the fabric's
    /// ports and switches, whose static fields a flow's path and record are worked out from;
    /// only the shard's own change), hosts with no NIC state yet ([`Self::trade_hosts`] moves
    /// its own over), and a flow table with no record yet.
    fn carve_shard(&self, owner: &[usize], r: usize) -> World {
        let hosts = self.hosts.nics.len();
        let mut shard_hosts = Hosts::new((0..hosts).map(|_| Nic::default()).collect(), self.hosts.telemetry.empty_like(), self.build.tcp.mss(), self.seed);
        shard_hosts.cpus = (0..self.hosts.cpus.len()).map(|_| None).collect();
        shard_hosts.offloads = (0..self.hosts.offloads.len()).map(|_| None).collect();
        World {
            q: EventQueue::new(),
            clock: self.clock,
            net: self.net.clone(),
            route_ahead: self.route_ahead,
            hosts: shard_hosts,
            flows: FlowTable::sparse(self.flows.len()),
            build: Arc::clone(&self.build),
            static_flows: self.static_flows,
            specs: Arc::clone(&self.specs),
            starts: Arc::clone(&self.starts),
            started: 0,
            parts: self.parts.clone(),
            host_part: self.host_part.clone(),
            part: 0,
            global: self.global,
            stop_at: None,
            runtime: Runtime::new(Vec::new()),
            waits: self.waits.clone(),
            released: Vec::new(),
            collectives: Arc::clone(&self.collectives),
            chakra: Arc::clone(&self.chakra),
            rngs: self.rngs.clone(),
            counters: self.counters.clone(),
            unfinished: self.unfinished,
            endless: self.endless,
            end: self.end,
            stop_when_done: self.stop_when_done,
            stopped: false,
            events: 0,
            seed: self.seed,
            queue_ports: self.queue_ports.clone(),
            queue_interval: self.queue_interval,
            queue_samples: Vec::new(),
            cwnd_flows: self.cwnd_flows.clone(),
            cwnd_interval: self.cwnd_interval,
            cwnd_samples: Vec::new(),
            bucketing: self.bucketing.clone(),
            capture: self.capture.clone(),
            hops: HopSlab::default(),
            flying: Flying::default(),
            circuit: self.circuit.clone(),
            link_changes: Arc::clone(&self.link_changes),
            has_failures: self.has_failures,
            windows: None,
            own: owner.iter().map(|&o| o == r).collect(),
            shard: Some(r),
            spread: None,
            room_for: None,
            checked_apart: None,
        }
    }

    /// Bytes of the network's elements as built: ports, switches, NICs and node names.
    pub(crate) fn element_bytes(&self) -> u64 {
        let net = &self.net;
        let names: usize = net.node_names.iter().map(|n| size_of::<String>() + n.len()).sum();
        (net.ports.len() * size_of::<Port>() + net.switches.len() * size_of::<Switch>() + self.hosts.nics.len() * size_of::<Nic>() + names) as u64
    }

    /// Bytes of a shard's flow index: a place for every flow id.
    pub(crate) fn flow_index_bytes(&self) -> u64 {
        (self.flows.len() * size_of::<u32>()) as u64
    }

    /// Swaps each host's NIC, CPU and offload between this world (shard 0) and the shard that
    /// runs it: before the run it moves them to their shards, after it brings them back.
    fn trade_hosts(&mut self, others: &mut [World], owner: &[usize]) {
        for h in 0..self.hosts.nics.len() {
            if let r @ 1.. = owner[self.host_part[h].index()] {
                let (mine, theirs) = (&mut self.hosts, &mut others[r - 1].hosts);
                std::mem::swap(&mut mine.nics[h], &mut theirs.nics[h]);
                if !mine.cpus.is_empty() {
                    std::mem::swap(&mut mine.cpus[h], &mut theirs.cpus[h]);
                }
                if !mine.offloads.is_empty() {
                    std::mem::swap(&mut mine.offloads[h], &mut theirs.offloads[h]);
                }
            }
        }
    }

    /// Runs the shards, this world's on this thread, and gathers the run into this world.
    pub(super) fn run_spread(&mut self, progress: &mut dyn FnMut(Time)) {
        let Spread { mut others, owner } = *self.spread.take().expect("a spread world");
        let n = others.len() + 1;
        let reports = || (0..n).map(|_| Mutex::new(WindowReport::default())).collect();
        let ex = Exchange { barrier: WindowBarrier::new(n), reports: [reports(), reports()], owner, unfinished: self.unfinished };
        std::thread::scope(|s| {
            for (r, w) in others.iter_mut().enumerate() {
                let ex = &ex;
                std::thread::Builder::new()
                    .name(format!("sluice-{}", r + 1))
                    .spawn_scoped(s, move || w.run_shard(r + 1, ex, &mut |_| {}))
                    .expect("a thread starts");
            }
            self.run_shard(0, &ex, progress);
        });
        let mut checked = Ok(());
        let mut across = [0; 3];
        for w in std::iter::once(&*self).chain(&others) {
            checked = checked.and_then(|()| invariants::check_shard(w));
            across.iter_mut().zip(invariants::across(w)).for_each(|(a, b)| *a += b);
        }
        self.checked_apart = Some(checked.and_then(|()| invariants::across_conserves(across)));
        self.gather(others, &ex.owner);
    }

    /// Deals the partitions out to `n` shards, each to the one with the fewest nodes so far,
    /// largest first: each partition's shard.
    fn deal(&self, n: usize) -> Vec<usize> {
        let mut nodes = vec![0usize; self.parts.count];
        for &p in &self.parts.of_node {
            nodes[p.index()] += 1;
        }
        let mut by_size: Vec<usize> = (0..self.parts.count).collect();
        by_size.sort_by_key(|&p| std::cmp::Reverse(nodes[p]));
        let (mut owner, mut load) = (vec![0; self.parts.count], vec![0usize; n]);
        for p in by_size {
            let r = (0..n).min_by_key(|&r| load[r]).expect("at least one shard");
            (owner[p], load[r]) = (r, load[r] + nodes[p]);
        }
        owner
    }

    /// Runs shard `r` window by window, meeting the others at each window's end. Within a
    /// window its partitions' events pop from its one list in the canonical order, as on one
    /// thread; what they schedule for another partition waits for the window's end.
    fn run_shard(&mut self, r: usize, ex: &Exchange, progress: &mut dyn FnMut(Time)) {
        let _leave = LeaveOnPanic(&ex.barrier);
        let window = self.parts.lookahead.expect("threads run a fabric of several partitions");
        let (mut set, mut last_end, mut reported) = (0, None, self.events);
        loop {
            let parcels = self.ship(ex);
            let next = parcels.iter().flatten().map(|p| p.across.at).chain(self.q.next_time()).min();
            let released = self.waits.as_deref().map_or(0, Waiting::released);
            let report = WindowReport { parcels, next, unfinished: self.unfinished, started: self.started, released, stopped: self.stopped };
            *ex.reports[set][r].lock().unwrap_or_else(|e| e.into_inner()) = report;
            if !ex.barrier.wait() {
                return;
            }
            let (mut next, mut finished, mut started, mut released, mut stopped) = (None::<Time>, 0, 0, 0, false);
            for from in &ex.reports[set] {
                let mut report = from.lock().unwrap_or_else(|e| e.into_inner());
                self.land(report.parcels.get_mut(r).map(std::mem::take).unwrap_or_default());
                next = next.into_iter().chain(report.next).min();
                finished += ex.unfinished - report.unfinished;
                started += report.started;
                released += report.released;
                stopped |= report.stopped;
            }
            set ^= 1;
            if stopped {
                return;
            }
            // The stop `stop_if_done` makes on one thread, from the counts of all.
            let idle = self.waits.as_deref().map_or(0, |w| w.graph().waiting() - released);
            if self.stop_when_done && finished + idle == ex.unfinished && self.endless == 0 && started + idle >= self.static_flows {
                if let Some(end) = last_end {
                    self.stop_at.get_or_insert(end);
                }
            }
            let Some(start) = next else { return };
            if self.stop_at.is_some_and(|t| start >= t) {
                self.stopped = true;
                return;
            }
            let end = Time((start.0 / window.0 + 1) * window.0);
            let limit = Time(end.0 - 1);
            while let Some((now, ev, part)) = self.q.pop_until(limit) {
                self.part = part;
                self.q.set_source(part);
                self.prefetch_ahead();
                self.clock = now;
                let counted = self.events;
                self.events += 1;
                self.step(now, ev);
                if r > 0 && part == self.global {
                    // Every shard runs the run's own events; the first counts them.
                    self.events = counted;
                }
                if self.stopped {
                    break;
                }
            }
            self.hand_over(limit);
            last_end = Some(end);
            if self.events - reported > 0xffff {
                reported = self.events;
                progress(self.clock);
            }
        }
    }

    /// Takes what this shard's partitions scheduled for other shards' out of its lists and
    /// stores: parcels by the shard that takes them.
    fn ship(&mut self, ex: &Exchange) -> Vec<Vec<Parcel>> {
        let mut parcels: Vec<Vec<Parcel>> = (0..ex.reports[0].len()).map(|_| Vec::new()).collect();
        let w = self.windows.as_deref_mut().expect("a shard runs by windows");
        for across in w.outbox.drain(..) {
            let pkt = match across.ev {
                Event::Arrive(_, place) => {
                    let mut pkt = self.flying.take(place);
                    let hops = pkt.hops.take().map(|i| {
                        let stack = *self.hops.get(i);
                        self.hops.free(i);
                        stack
                    });
                    Some((pkt, hops))
                }
                _ => None,
            };
            parcels[ex.owner[across.part.index()]].push(Parcel { across, pkt });
        }
        parcels
    }

    /// Puts what other shards shipped on its partitions' lists, an arrival's packet (and its
    /// hop records) into this shard's stores.
    fn land(&mut self, parcels: Vec<Parcel>) {
        for Parcel { across: a, pkt } in parcels {
            let ev = match (a.ev, pkt) {
                (Event::Arrive(port, _), Some((mut pkt, hops))) => {
                    pkt.hops = hops.map(|stack| self.hops.put(stack));
                    Event::Arrive(port, self.flying.put(&pkt))
                }
                (ev, _) => ev,
            };
            self.q.push_keyed(a.at, a.tie, ev, a.part.index());
        }
    }

    /// Takes each element's state from the shard that ran it (shard 0 is this world), and
    /// merges the logs in the order one thread writes them.
    fn gather(&mut self, mut others: Vec<World>, owner: &[usize]) {
        let of_node = |w: &World, n: u32| owner[w.parts.of_node[n as usize].index()];
        for i in 0..self.net.ports.len() {
            if let r @ 1.. = of_node(self, self.net.ports[i].node) {
                std::mem::swap(&mut self.net.ports[i], &mut others[r - 1].net.ports[i]);
            }
        }
        for i in 0..self.net.switches.len() {
            if let r @ 1.. = of_node(self, self.net.switches[i].node) {
                std::mem::swap(&mut self.net.switches[i], &mut others[r - 1].net.switches[i]);
            }
        }
        self.trade_hosts(&mut others, owner);
        // A flow's record is its client's shard's, with the server's share from the server's.
        let shard_of = |w: &World, h: HostId| owner[w.host_part[h].index()];
        let mut server_sides = Vec::new();
        for (r, w) in others.iter_mut().enumerate().map(|(i, w)| (i + 1, w)) {
            for mut record in w.flows.take_records() {
                let (rs, rd) = (shard_of(self, record.src), shard_of(self, record.dst));
                if rs != r {
                    server_sides.push(record);
                    continue;
                }
                let f = record.id;
                std::mem::swap(&mut self.flows[f], &mut record);
                if rd == 0 {
                    // This world ran the server.
                    self.flows[f].take_server_side(&mut record);
                }
            }
        }
        for mut record in server_sides {
            self.flows[record.id].take_server_side(&mut record);
        }
        // A waiting flow's progress is its sender's shard's.
        let senders: Vec<usize> = match self.waits {
            Some(_) => (0..self.static_flows).map(|f| shard_of(self, self.flows[crate::ids::FlowId(f as u32)].src)).collect(),
            None => Vec::new(),
        };
        if let Some(waits) = self.waits.as_deref_mut() {
            for (f, &r) in senders.iter().enumerate().filter(|&(_, &r)| r > 0) {
                waits.take_flow(others[r - 1].waits.as_deref().expect("shards share the graph"), crate::ids::FlowId(f as u32));
            }
        }
        for (p, &r) in owner.iter().enumerate().filter(|&(_, &r)| r > 0) {
            self.counters[p] = others[r - 1].counters[p].clone();
        }
        let queue_place: HashMap<u32, usize> = self.queue_ports.iter().enumerate().rev().map(|(i, &p)| (p, i)).collect();
        let cwnd_place: HashMap<u32, usize> = self.cwnd_flows.iter().enumerate().rev().map(|(i, &f)| (f, i)).collect();
        let telemetry = others.iter_mut().map(|w| std::mem::replace(&mut w.hosts.telemetry, crate::host::telemetry::TelemetryLog::new(Time::ZERO, None)));
        self.hosts.telemetry.merge(telemetry.collect::<Vec<_>>());
        if let Some(capture) = self.capture.as_deref_mut() {
            capture.merge(others.iter_mut().filter_map(|w| w.capture.take()).map(|c| *c));
        }
        for w in others {
            self.events += w.events;
            self.clock = self.clock.max(w.clock);
            self.queue_samples.extend(w.queue_samples);
            self.cwnd_samples.extend(w.cwnd_samples);
        }
        self.queue_samples.sort_by_key(|s| (s.t, queue_place[&s.port]));
        self.cwnd_samples.sort_by_key(|s| (s.t, cwnd_place[&s.flow]));
        self.own = vec![true; self.parts.count];
        self.shard = None;
        self.windows = None;
    }
}

/// A world moves to the thread that runs it.
const _: fn() = || {
    fn send<T: Send>() {}
    send::<World>();
};


#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario;
    use std::path::Path;

    #[test]
    fn shards_share_what_every_partition_reads_and_hold_only_their_own_hosts_and_flows() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/websearch_leafspine.toml");
        let loaded = scenario::load(&file, &["sim.duration=\"1ms\"".to_string()]).unwrap();
        let mut world = scenario::build(&loaded).unwrap();
        let (flows, hosts) = (world.flows.len(), world.hosts.nics.len());
        assert_eq!(world.spread(3), 3);
        let Spread { others, owner } = world.spread.as_deref().unwrap();
        let shard_of = |h: usize| owner[world.host_part[h].index()];
        assert!((1..3).all(|r| (0..hosts).any(|h| shard_of(h) == r)), "each shard runs some hosts");
        for (i, shard) in others.iter().enumerate() {
            let r = i + 1;
            assert!(Arc::ptr_eq(&shard.specs, &world.specs) && Arc::ptr_eq(&shard.build, &world.build), "shard {r} copied the specs");
            assert!(shard.flows.records().is_empty() && shard.flows.len() == flows, "shard {r} holds records before the run");
            for h in 0..hosts {
                // A NIC knows its host: it is where it was moved to, a placeholder elsewhere.
                let moved = shard_of(h) == r;
                assert_eq!(shard.hosts.nics[h].host.index() == h, moved || h == 0, "host {h} in shard {r}");
                if moved && h != 0 {
                    assert_eq!(world.hosts.nics[h].host, HostId(0), "host {h}'s NIC stayed in the built world");
                }
            }
        }
        world.run(&mut |_| {});
        world.check_conservation().unwrap();
        assert!(world.flows.is_whole() && world.flows.len() == flows);
        assert!(world.hosts.nics.iter().enumerate().all(|(h, nic)| nic.host.index() == h), "every NIC came back");
        let started = world.flows().iter().filter(|f| !f.waits_to_connect()).count();
        assert!(started > 0 && started < flows, "{started} of {flows} flows started in the first millisecond");
    }
}
