//! The fabric as a run holds it: every port of every node in one arena, the switches, the routes
//! and which node is which. Hosts' NICs, flows and applications live elsewhere; what they need of
//! the network (a host's link, a path's round trip) they ask of the fabric.

use crate::ids::{HostId, PortId};
use super::circuit::{tor_of, CircuitParts};
use super::link::Link;
use super::pfc::{Pfc, PfcConfig};
use super::port::{Port, TxMeter};
use super::qdisc::{Discipline, SharedBuffer};
use super::queue::PortQueue;
use super::routing::{ecmp_pick, Routes};
use super::switch::{IntStamping, Switch};
use super::topology::{Graph, NodeKind};
use crate::time::Time;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

/// What a node is, with its index in the matching arena.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    /// Host ordinal.
    Host(HostId),
    /// Switch ordinal.
    Switch(u32),
}

/// Builds a switch's PFC settings from its ports (their rates and delays size the headroom).
pub type PfcFromPorts = dyn Fn(&[Port]) -> PfcConfig;

/// What the fabric is built from, validated by the scenario.
pub struct FabricSpec<'a> {
    /// Shared buffer per switch, and its dynamic-threshold factor.
    pub buffer: (u64, f64),
    /// Strict-priority queues per switch port.
    pub priorities: u8,
    /// The queue discipline of each switch port, by global port id (host ports: unused).
    pub disciplines: &'a [Discipline],
    /// TCP-INT stamping per switch ordinal (`None`: a legacy switch), and its ports' rate window.
    pub int: (&'a [Option<IntStamping>], Time),
    /// Builds a switch's PFC settings from its ports, when switches run PFC.
    pub pfc: Option<&'a PfcFromPorts>,
    /// The circuit side of a reconfigurable network's ToRs.
    pub circuit: Option<&'a CircuitParts>,
    /// Seeds each switch's ECMP salt.
    pub salt: fn(u32, u32) -> u32,
}

/// Ports, switches and routes of one topology.
#[derive(Clone)]
pub struct Fabric {
    /// What each node is.
    pub roles: Vec<Role>,
    /// Display names of the nodes ("h3", "sw0").
    pub node_names: Vec<String>,
    /// Ports of node n are `port_base[n]..port_base[n + 1]`.
    pub port_base: Vec<u32>,
    /// Every port, by global id.
    pub ports: Vec<Port>,
    /// Every switch, by ordinal.
    pub switches: Vec<Switch>,
    /// Shortest-path next hops.
    pub routes: Routes,
    /// Each host's one port (its NIC's link), by host ordinal.
    pub host_ports: Vec<PortId>,
}

impl Fabric {
    /// Builds every port and switch of `graph`.
    pub fn build(graph: &Graph, spec: &FabricSpec) -> Fabric {
        let routes = Routes::compute(graph);
        let node_ports = graph.ports();
        let (mut nh, mut ns) = (0u32, 0u32);
        let roles: Vec<Role> = graph
            .nodes
            .iter()
            .map(|kind| match kind {
                NodeKind::Host => {
                    nh += 1;
                    Role::Host(HostId(nh - 1))
                }
                NodeKind::Switch { .. } => {
                    ns += 1;
                    Role::Switch(ns - 1)
                }
            })
            .collect();
        let bands = spec.priorities.max(1) as usize;
        let mut ports = Vec::new();
        let mut port_base = Vec::with_capacity(graph.nodes.len() + 1);
        for (n, plist) in node_ports.iter().enumerate() {
            port_base.push(ports.len() as u32);
            for (local, &(li, peer)) in plist.iter().enumerate() {
                let l = &graph.links[li];
                let link = Link::new(l.delay, l.loss);
                let b = if matches!(roles[n], Role::Switch(_)) { bands } else { 1 };
                let mut port = Port::new(n as u32, local as u16, peer as u32, l.rate, link, b);
                if let Some(d) = spec.disciplines.get(ports.len()) {
                    port.discipline = *d;
                    if d.trim.is_some() {
                        port.queue = PortQueue::with_header_band(b);
                    }
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
        let mut host_ports = Vec::new();
        for (n, role) in roles.iter().enumerate() {
            let own = port_base[n] as usize..port_base[n + 1] as usize;
            match *role {
                Role::Switch(s) => switches.push(Switch {
                    node: n as u32,
                    first_port: port_base[n],
                    buffer: SharedBuffer { size: spec.buffer.0, used: 0, alpha: spec.buffer.1 },
                    salt: (spec.salt)(s, n as u32),
                    int: spec.int.0[s as usize],
                    pfc: spec.pfc.map(|cfg| Pfc::new(cfg(&ports[own.clone()]))),
                    tor: spec.circuit.and_then(|c| tor_of(c, graph, n, &node_ports[n])),
                }),
                Role::Host(_) => host_ports.push(PortId(port_base[n])),
            }
            if matches!(role, Role::Switch(s) if spec.int.0[*s as usize].is_some()) {
                for port in &mut ports[own] {
                    port.meter = Some(TxMeter::new(spec.int.1));
                }
            }
        }
        Fabric { roles, node_names: super::naming::node_names(graph), port_base, ports, switches, routes, host_ports }
    }

    /// Global ids of node `n`'s ports.
    #[inline]
    pub fn ports_of(&self, n: u32) -> Range<usize> {
        self.port_base[n as usize] as usize..self.port_base[n as usize + 1] as usize
    }

    /// True if node `n` is a switch.
    pub fn is_switch(&self, n: u32) -> bool {
        matches!(self.roles[n as usize], Role::Switch(_))
    }
}

/// Sums `cost(hop index, egress port)` along the path a packet with `hash` takes from host
/// `from` to host `to`.
pub fn walk(fabric: &Fabric, from: u32, to: u32, hash: u32, mut cost: impl FnMut(usize, &Port) -> Time) -> Time {
    let mut total = Time::ZERO;
    let mut port = fabric.host_ports[from as usize].index();
    for i in 0..256 {
        total += cost(i, &fabric.ports[port]);
        let node = fabric.ports[port].peer_node as usize;
        let sw = match fabric.roles[node] {
            Role::Host(_) => break,
            Role::Switch(s) => s as usize,
        };
        let hops = fabric.routes.next_hops(node, to as usize);
        if hops.is_empty() {
            break;
        }
        let local = hops[ecmp_pick(hash, fabric.switches[sw].salt, hops.len())];
        port = fabric.port_base[node] as usize + local as usize;
    }
    total
}

/// The largest sum of `cost(egress port)` over the equal-cost paths from host `from` to host
/// `to`, leaving by `first` (its host port): where a flow's packets are sprayed, the path its
/// slowest packet takes with empty queues.
pub fn longest_walk(fabric: &Fabric, from: u32, to: u32, first: impl Fn(&Port) -> Time, cost: impl Fn(&Port) -> Time) -> Time {
    // Longest from each port on, memoized: the paths of a fat tree share most of their ports.
    fn from_port(fabric: &Fabric, port: usize, to: u32, cost: &dyn Fn(&Port) -> Time, memo: &mut HashMap<usize, Time>, depth: u32) -> Time {
        if let Some(&t) = memo.get(&port) {
            return t;
        }
        let node = fabric.ports[port].peer_node as usize;
        let rest = match fabric.roles[node] {
            Role::Switch(_) if depth < 256 => fabric.routes.next_hops(node, to as usize).iter().fold(Time::ZERO, |most, &local| {
                let next = fabric.port_base[node] as usize + local as usize;
                most.max(cost(&fabric.ports[next]) + from_port(fabric, next, to, cost, memo, depth + 1))
            }),
            _ => Time::ZERO,
        };
        memo.insert(port, rest);
        rest
    }
    let port = fabric.host_ports[from as usize].index();
    first(&fabric.ports[port]) + from_port(fabric, port, to, &cost, &mut HashMap::new(), 0)
}

/// The longest trip with empty queues from any host to any other, each egress port on the way
/// (the source's own included) costing its delay and `frame`'s serialization at its built rate.
/// Destinations that route alike (under one switch's table) are walked once, so this is
/// O(tables x ports), not O(hosts x ports).
pub fn longest_one_way(fabric: &Fabric, frame: u64) -> Time {
    let cost = |p: &Port| p.link.delay + p.built_rate.tx_time(frame);
    // Per group: a destination standing for it, and the costliest last hop into any member.
    let mut groups: BTreeMap<(u32, Option<u32>), (usize, Time)> = BTreeMap::new();
    for dst in 0..fabric.host_ports.len() {
        let (table, via) = fabric.routes.destination_group(dst);
        let last = via.map_or(Time::ZERO, |(sw, port)| cost(&fabric.ports[fabric.port_base[sw as usize] as usize + port as usize]));
        let e = groups.entry((table, via.map(|v| v.0))).or_insert((dst, Time::ZERO));
        e.1 = e.1.max(last);
    }
    let mut memo: Vec<Option<Time>> = vec![None; fabric.ports.len()];
    let mut longest = Time::ZERO;
    for (&(_, via), &(dst, last)) in &groups {
        memo.fill(None);
        for src in 0..fabric.host_ports.len() {
            let port = fabric.host_ports[src].index();
            let trip = cost(&fabric.ports[port]) + beyond(fabric, port, dst, via, last, &cost, &mut memo, 0);
            longest = longest.max(trip);
        }
    }
    longest
}

/// The longest rest of a trip to `dst` after crossing `port`; reaching `via` ends it with `last`.
#[allow(clippy::too_many_arguments)]
fn beyond(fabric: &Fabric, port: usize, dst: usize, via: Option<u32>, last: Time, cost: &dyn Fn(&Port) -> Time, memo: &mut [Option<Time>], depth: u32) -> Time {
    if let Some(t) = memo[port] {
        return t;
    }
    let node = fabric.ports[port].peer_node;
    let rest = match fabric.roles[node as usize] {
        _ if Some(node) == via => last,
        Role::Switch(_) if depth < 256 => fabric.routes.next_hops(node as usize, dst).iter().fold(Time::ZERO, |most, &local| {
            let next = fabric.port_base[node as usize] as usize + local as usize;
            most.max(cost(&fabric.ports[next]) + beyond(fabric, next, dst, via, last, cost, memo, depth + 1))
        }),
        _ => Time::ZERO,
    };
    memo[port] = Some(rest);
    rest
}

/// Round trip with empty queues along a flow's ECMP paths (`hash_fwd` out, or with `spray` the
/// longest of the equal-cost paths; `hash_rev` back): propagation both ways, the `frame`'s
/// serialization at each hop after the first (store and forward), and the `ack_frame`'s at
/// every hop back. A one-packet flow takes exactly this plus its first serialization. Rates are
/// as built: a failed link's slowdown is not the flow's ideal.
#[allow(clippy::too_many_arguments)]
pub fn path_rtt(fabric: &Fabric, src: u32, dst: u32, hash_fwd: u32, hash_rev: u32, spray: bool, frame: u64, ack_frame: u64) -> Time {
    let forward = if spray {
        longest_walk(fabric, src, dst, |port| port.link.delay, |port| port.link.delay + port.built_rate.tx_time(frame))
    } else {
        walk(fabric, src, dst, hash_fwd, |i, port| port.link.delay + if i == 0 { Time::ZERO } else { port.built_rate.tx_time(frame) })
    };
    let back = walk(fabric, dst, src, hash_rev, |_, port| port.link.delay + port.built_rate.tx_time(ack_frame));
    forward + back
}
