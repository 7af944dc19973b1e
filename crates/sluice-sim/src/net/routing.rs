//! ECMP routing: for every node and destination host, the set of egress ports on a shortest
//! (fewest-hop) path, computed once per topology and looked up in O(1) while forwarding.
//!
//! Hosts hanging off one switch by a single link share that switch's table, as a rack shares a
//! prefix in a real fabric: every shortest path to such a host is a shortest path to its switch
//! plus the last link. A fat tree of 10,240 hosts then needs 640 tables, not 10,240.

use super::topology::{table_target, Graph, NodeKind};
use std::collections::{HashMap, VecDeque};

/// Distance of a node that cannot reach the destination.
const UNREACHABLE: u32 = u32::MAX;
/// No shared switch: the host has a table of its own.
const OWN: u32 = u32::MAX;

/// Shortest-path next hops from every node to every host.
#[derive(Clone, Debug)]
pub struct Routes {
    /// Tables: one column per table target, `rows[row * tables + table]` naming the set of ports,
    /// `sets[..]`, a range of `ports`.
    tables: usize,
    /// Each node's row. Nodes of one role in a regular fabric have identical rows (every ToR
    /// sends all but its own hosts up the same uplinks, every aggregation switch of a pod sends
    /// the same ways), so a row is stored once however many nodes share it: a 10,240-host fat
    /// tree keeps 163 rows (417 KB, cached) instead of 11,536 (30 MB, a memory miss on every
    /// hop's lookup).
    row_of: Vec<u32>,
    rows: Vec<u32>,
    /// A set is stored once however many rows use it (one port down, a switch's uplinks).
    sets: Vec<PortSet>,
    ports: Vec<u16>,
    /// Per host ordinal: where its routes come from.
    hosts: Vec<HostRoute>,
}

/// A set of equal-cost ports: `ports[start..start + len]`.
#[derive(Clone, Copy, Debug)]
struct PortSet {
    start: u32,
    len: u32,
}

/// Stores each distinct set of ports once; the empty set is set 0.
#[derive(Default)]
struct SetPool {
    sets: Vec<PortSet>,
    ports: Vec<u16>,
    /// The set holding only port p, by p (most route entries: every way down is one port).
    single: Vec<u32>,
    /// Sets of two or more ports.
    multi: HashMap<Vec<u16>, u32>,
}

impl SetPool {
    fn new() -> SetPool {
        SetPool { sets: vec![PortSet { start: 0, len: 0 }], ..SetPool::default() }
    }

    /// The index of the set holding `ports`, added if new.
    fn intern(&mut self, ports: &[u16]) -> u32 {
        match ports {
            [] => 0,
            &[p] => {
                let p = p as usize;
                if self.single.len() <= p {
                    self.single.resize(p + 1, u32::MAX);
                }
                if self.single[p] == u32::MAX {
                    self.single[p] = self.add(ports);
                }
                self.single[p]
            }
            _ => match self.multi.get(ports) {
                Some(&i) => i,
                None => {
                    let i = self.add(ports);
                    self.multi.insert(ports.to_vec(), i);
                    i
                }
            },
        }
    }

    fn add(&mut self, ports: &[u16]) -> u32 {
        let start = u32::try_from(self.ports.len()).expect("route port sets exceed u32 offsets");
        self.ports.extend_from_slice(ports);
        self.sets.push(PortSet { start, len: ports.len() as u32 });
        u32::try_from(self.sets.len() - 1).expect("more than 2^32 route port sets")
    }
}

/// How routes to one host are found.
#[derive(Clone, Copy, Debug)]
struct HostRoute {
    /// The host's node id.
    node: u32,
    /// Its table: that of the switch it hangs off, or its own.
    table: u32,
    /// The switch it hangs off by its only link, or `OWN`.
    via: u32,
    /// That switch's port to the host.
    via_port: u16,
}

impl Routes {
    /// Computes, for each node and each destination host ordinal, the local port numbers (indices into `Graph::ports()[node]`) that lie on a shortest path.
    ///
    /// Hosts never forward, so no path transits a host. Nodes that cannot reach a destination get
    /// no ports and distance `u32::MAX`. The graph must have at most 65,535 ports per node;
    /// graphs from `TopologyConfig::build` are checked for it.
    pub fn compute(graph: &Graph) -> Routes {
        let adj = graph.ports();
        let n = graph.nodes.len();
        let is_host: Vec<bool> = graph.nodes.iter().map(|k| *k == NodeKind::Host).collect();
        let port_no = |p: usize| u16::try_from(p).expect("node has more than 65535 ports");

        // Each table's target: a switch shared by single-homed hosts, or a host of its own.
        let mut targets = Vec::new();
        let mut table_of = vec![OWN; n];
        let mut hosts = Vec::new();
        for h in graph.hosts() {
            let table_node = table_target(&adj, &graph.nodes, h);
            let (via, via_port) = if table_node == h {
                (OWN, 0)
            } else {
                let back = adj[table_node].iter().position(|&(_, w)| w == h).expect("links are symmetric");
                (table_node as u32, port_no(back))
            };
            if table_of[table_node] == OWN {
                table_of[table_node] = targets.len() as u32;
                targets.push(table_node);
            }
            hosts.push(HostRoute { node: h as u32, table: table_of[table_node], via, via_port });
        }

        // Node-major: `full[v * tables + t]` is node v's set towards table t.
        let tables = targets.len();
        let mut full = vec![0u32; n * tables];
        let mut pool = SetPool::new();
        let mut set = Vec::new();
        let mut local = vec![UNREACHABLE; n];
        let mut queue = VecDeque::with_capacity(n);
        for (t, &target) in targets.iter().enumerate() {
            // Links are symmetric, so a BFS from the target gives every node's distance to it.
            local.fill(UNREACHABLE);
            local[target] = 0;
            queue.push_back(target);
            while let Some(u) = queue.pop_front() {
                // A host other than the target is a path's start, never a waypoint.
                if u != target && is_host[u] {
                    continue;
                }
                for &(_, w) in &adj[u] {
                    if local[w] == UNREACHABLE {
                        local[w] = local[u] + 1;
                        queue.push_back(w);
                    }
                }
            }
            // A port is on a shortest path if its peer is one hop closer and may forward (or is
            // the target). A host that was reached but not expanded can still sit one hop closer
            // by coincidence, hence the explicit host check.
            for (v, &dv) in local.iter().enumerate() {
                set.clear();
                if dv != UNREACHABLE && dv > 0 {
                    for (p, &(_, w)) in adj[v].iter().enumerate() {
                        if local[w] == dv - 1 && (!is_host[w] || w == target) {
                            set.push(port_no(p));
                        }
                    }
                }
                full[v * tables + t] = pool.intern(&set);
            }
        }
        // A target's own entry is never read (its hosts are reached by `via`, or it is the host
        // itself), so it takes its neighbour's value: a ToR's row then equals every other ToR's.
        if tables > 1 {
            for (t, &target) in targets.iter().enumerate() {
                let row = &mut full[target * tables..(target + 1) * tables];
                row[t] = row[if t == 0 { 1 } else { t - 1 }];
            }
        }
        let mut row_ids: HashMap<&[u32], u32> = HashMap::new();
        let mut rows = Vec::new();
        let row_of = full
            .chunks(tables.max(1))
            .take(n)
            .map(|row| {
                *row_ids.entry(row).or_insert_with(|| {
                    rows.extend_from_slice(row);
                    u32::try_from(rows.len() / tables.max(1) - 1).expect("more than 2^32 distinct route rows")
                })
            })
            .collect();
        Routes { tables, row_of, rows, sets: pool.sets, ports: pool.ports, hosts }
    }

    /// Which destination hosts route alike: hosts with the same `(table, switch)` take the
    /// same next hops at every node but that switch, the one they hang off, where `port` is
    /// each one's own. A host with a table of its own shares it with none.
    pub fn destination_group(&self, dst: usize) -> (u32, Option<(u32, u16)>) {
        let h = &self.hosts[dst];
        (h.table, (h.via != OWN).then_some((h.via, h.via_port)))
    }

    /// The equal-cost egress ports at `node` towards host ordinal `dst` (empty at the destination itself).
    #[inline(always)]
    pub fn next_hops(&self, node: usize, dst: usize) -> &[u16] {
        let h = &self.hosts[dst];
        if node == h.via as usize {
            return std::slice::from_ref(&h.via_port);
        }
        if node == h.node as usize {
            return &[];
        }
        let set = self.sets[self.rows[self.row_of[node] as usize * self.tables + h.table as usize] as usize];
        &self.ports[set.start as usize..(set.start + set.len) as usize]
    }

    /// Hop count (links) from `node` to host ordinal `dst` in the graph whose `ports()` are
    /// `adj`, walking the first next hop of each node on the way (`u32::MAX` if the walk does not
    /// reach it). For checks and diagnostics: forwarding never needs it.
    pub fn distance(&self, adj: &[Vec<(usize, usize)>], node: usize, dst: usize) -> u32 {
        let (mut at, mut hops) = (node, 0);
        while at != self.hosts[dst].node as usize {
            match self.next_hops(at, dst).first() {
                Some(&p) if (hops as usize) < adj.len() => at = adj[at][p as usize].1,
                _ => return UNREACHABLE,
            }
            hops += 1;
        }
        hops
    }
}

/// Picks one of `n` equal-cost next hops for a flow hash at a switch with `salt`.
#[inline]
pub fn ecmp_pick(hash: u32, salt: u32, n: usize) -> usize {
    if n <= 1 {
        return 0;
    }
    // A 32-bit finalizer (murmur3 fmix) spreads the combined bits before the modulo.
    let mut h = hash ^ salt.rotate_left(16) ^ salt;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    ((h as u64 * n as u64) >> 32) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::topology::{LinkSpec, TopologyConfig};
    use crate::time::{Rate, Time};

    const HOST: &str = "host_rate = \"100Gbps\"\nhost_delay = \"1us\"\n";
    const FABRIC: &str = "agg_rate = \"100Gbps\"\nagg_delay = \"1us\"\ncore_rate = \"100Gbps\"\ncore_delay = \"1us\"\n";

    fn build(toml_text: &str) -> Graph {
        let cfg: TopologyConfig = toml::from_str(toml_text).unwrap();
        cfg.build(std::path::Path::new(".")).unwrap()
    }

    /// Checks every next hop of every node: each leads one hop closer and never into a host other
    /// than the destination, so every path the tables can form is shortest and host-free.
    fn check_all_paths(g: &Graph, r: &Routes) {
        let (hosts, adj) = (g.hosts(), g.ports());
        for (d, &dst) in hosts.iter().enumerate() {
            assert_eq!(r.distance(&adj, dst, d), 0);
            assert!(r.next_hops(dst, d).is_empty());
            for (v, ports) in adj.iter().enumerate() {
                assert_ne!(r.distance(&adj, v, d), UNREACHABLE);
                let hops = r.next_hops(v, d);
                assert_eq!(hops.is_empty(), v == dst, "only the destination has nowhere to go");
                if g.nodes[v] == NodeKind::Host {
                    assert!(hops.len() <= 1, "a host has one way out");
                }
                for &p in hops {
                    let w = ports[p as usize].1;
                    assert_eq!(r.distance(&adj, w, d) + 1, r.distance(&adj, v, d));
                    assert!(w == dst || g.nodes[w] != NodeKind::Host, "path from {v} to {dst} enters host {w}");
                }
            }
        }
    }

    /// The tables against a BFS from each destination host itself: shared tables must give every
    /// node the same ports, in the same order (ECMP picks by index), and the same distance.
    fn check_against_per_host_bfs(g: &Graph, r: &Routes) {
        let adj = g.ports();
        let is_host = |v: usize| g.nodes[v] == NodeKind::Host;
        for (d, &dst) in g.hosts().iter().enumerate() {
            let mut dist = vec![UNREACHABLE; g.nodes.len()];
            dist[dst] = 0;
            let mut queue = VecDeque::from([dst]);
            while let Some(u) = queue.pop_front() {
                if u == dst || !is_host(u) {
                    for &(_, w) in &adj[u] {
                        if dist[w] == UNREACHABLE {
                            dist[w] = dist[u] + 1;
                            queue.push_back(w);
                        }
                    }
                }
            }
            for v in 0..g.nodes.len() {
                let want: Vec<u16> = (0..adj[v].len())
                    .filter(|&p| {
                        let w = adj[v][p].1;
                        dist[v] != UNREACHABLE && dist[v] > 0 && dist[w] == dist[v] - 1 && (!is_host(w) || w == dst)
                    })
                    .map(|p| p as u16)
                    .collect();
                assert_eq!(r.next_hops(v, d), &want[..], "node {v} to host {dst}");
                assert_eq!(r.distance(&adj, v, d), dist[v], "node {v} to host {dst}");
            }
        }
    }

    #[test]
    fn k8_fat_tree_ecmp() {
        let g = build(&format!("kind = \"fat_tree\"\nk = 8\n{HOST}{FABRIC}"));
        let r = Routes::compute(&g);
        let adj = g.ports();
        // Host 0 is in pod 0 under ToR 128; host 127 is in pod 7.
        assert_eq!(r.distance(&adj, 0, 127), 6);
        assert_eq!(r.distance(&adj, 0, 1), 2, "same ToR");
        assert_eq!(r.distance(&adj, 0, 4), 4, "same pod, other ToR");
        assert_eq!(r.next_hops(0, 127), &[0]);
        let tor = adj[0][0].1;
        assert_eq!(tor, 128);
        assert_eq!(r.next_hops(tor, 127).len(), 4, "ToR spreads over its 4 aggs");
        let agg = adj[tor][r.next_hops(tor, 127)[0] as usize].1;
        assert_eq!(g.nodes[agg], NodeKind::Switch { tier: 1 });
        assert_eq!(r.next_hops(agg, 127).len(), 4, "agg spreads over its 4 cores");
        let core = adj[agg][r.next_hops(agg, 127)[0] as usize].1;
        assert_eq!(r.next_hops(core, 127).len(), 1, "downward paths are unique");
        assert_eq!(r.next_hops(tor, 1).len(), 1);
        check_all_paths(&g, &r);
        check_against_per_host_bfs(&g, &r);
    }

    #[test]
    fn each_distinct_set_of_ports_is_stored_once() {
        let g = build(&format!("kind = \"fat_tree\"\nk = 8\n{HOST}{FABRIC}"));
        let r = Routes::compute(&g);
        let distinct: std::collections::BTreeSet<Vec<u16>> = (0..g.nodes.len())
            .flat_map(|v| (0..g.hosts().len()).map(move |d| (v, d)))
            .map(|(v, d)| r.next_hops(v, d).to_vec())
            .filter(|set| !set.is_empty())
            .collect();
        // The empty set, then each non-empty one once: every way down is one of the 8 ports, and
        // every way up, at a ToR or an aggregation switch, is the same 4 uplinks.
        assert_eq!(r.sets.len(), distinct.len() + 1);
        assert_eq!(r.ports.len(), distinct.iter().map(Vec::len).sum::<usize>());
        assert_eq!(distinct.len(), 8 + 1, "{distinct:?}");
        assert!(distinct.contains(&vec![4, 5, 6, 7]));
    }

    #[test]
    fn nodes_of_one_role_share_one_row() {
        let g = build(&format!("kind = \"fat_tree\"\nk = 8\n{HOST}{FABRIC}"));
        let r = Routes::compute(&g);
        // The 128 hosts share one row (everything leaves by port 0), the 32 ToRs one (all up the
        // same 4 uplinks but their own hosts, reached by `via`), the 4 aggregation switches of a
        // pod one per pod (the pod's ToRs down, the rest up), the 16 cores one (pod p down port p).
        assert_eq!(r.rows.len() / r.tables, 1 + 1 + 8 + 1);
        check_against_per_host_bfs(&g, &r);
    }

    #[test]
    fn a_10240_host_fat_tree_keeps_163_rows() {
        // benches/fat_tree_10k.toml's wiring: the hosts, the ToRs and the cores one row each, the
        // aggregation switches one per pod (160), where one row per node would be 11,536.
        let g = build(&format!(
            "kind = \"fat_tree\"\nhosts_per_tor = 16\ntors = 640\naggs = 640\ncores = 16\npods = 160\n{HOST}{FABRIC}"
        ));
        let r = Routes::compute(&g);
        assert_eq!((g.nodes.len(), r.tables), (11_536, 640));
        assert_eq!(r.rows.len() / r.tables, 1 + 1 + 160 + 1);
        // Spot checks: across pods, host to host is six hops; the rows agree with the hop counts.
        let adj = g.ports();
        assert_eq!(r.distance(&adj, 0, 10_239), 6);
        assert_eq!(r.distance(&adj, 10_239, 16), 6);
        assert_eq!(r.distance(&adj, 17, 31), 2, "same ToR");
    }

    #[test]
    fn leaf_spine_uses_both_spines() {
        let g = build(&format!(
            "kind = \"leaf_spine\"\nhosts_per_leaf = 8\nleaves = 4\nspines = 2\n{HOST}fabric_rate = \"400Gbps\"\nfabric_delay = \"1us\""
        ));
        let r = Routes::compute(&g);
        let adj = g.ports();
        let leaf0 = 32;
        assert_eq!(r.next_hops(leaf0, 31).len(), 2);
        assert_eq!(r.distance(&adj, leaf0, 31), 3);
        assert_eq!(r.next_hops(leaf0, 3).len(), 1);
        check_all_paths(&g, &r);
        check_against_per_host_bfs(&g, &r);
    }

    #[test]
    fn star_routes_never_transit_hosts() {
        let g = build(&format!("kind = \"star\"\nhosts = 6\n{HOST}"));
        let r = Routes::compute(&g);
        let adj = g.ports();
        for d in 0..6 {
            for s in (0..6).filter(|&s| s != d) {
                assert_eq!(r.distance(&adj, s, d), 2);
                assert_eq!(r.next_hops(s, d), &[0]);
            }
            // The switch's port d leads straight to host d.
            assert_eq!(r.next_hops(6, d), &[d as u16]);
        }
        check_all_paths(&g, &r);
        check_against_per_host_bfs(&g, &r);
    }

    #[test]
    fn a_dual_homed_host_is_not_a_shortcut() {
        // Host 2 bridges switches 3 and 4, which are otherwise three hops apart via 5 and 6.
        // Hosts 0 and 1 hang off switches 3 and 4; their route must take the long way.
        let link = |a, b| LinkSpec { a, b, rate: Rate::gbps(1), delay: Time::from_us(1), loss: 0.0 };
        let mut nodes = vec![NodeKind::Host; 3];
        nodes.extend([NodeKind::Switch { tier: 0 }; 4]);
        let links = vec![link(0, 3), link(1, 4), link(2, 3), link(2, 4), link(3, 5), link(5, 6), link(6, 4)];
        let g = Graph { nodes, links };
        let r = Routes::compute(&g);
        let adj = g.ports();
        assert_eq!(r.distance(&adj, 0, 1), 5);
        assert_eq!(r.next_hops(3, 1).len(), 1);
        assert_eq!(g.ports()[3][r.next_hops(3, 1)[0] as usize].1, 5);
        // Host 2 may still originate traffic on either link; only the one towards 4 is shortest.
        assert_eq!(r.distance(&adj, 2, 1), 2);
        assert_eq!(r.next_hops(2, 1), &[1]);
        // Host 2 has a table of its own; hosts 0 and 1 share their switches'.
        check_against_per_host_bfs(&g, &r);
    }

    #[test]
    fn explicit_fat_tree_like_hpcc() {
        // 10 pods of 2 ToRs and 2 aggs; each agg reaches one group of 8 of the 16 cores.
        let g = build(&format!(
            "kind = \"fat_tree\"\nhosts_per_tor = 16\ntors = 20\naggs = 20\ncores = 16\npods = 10\n{HOST}{FABRIC}"
        ));
        let r = Routes::compute(&g);
        let adj = g.ports();
        let (tor0, agg0) = (320, 340);
        assert_eq!(r.distance(&adj, 0, 15), 2);
        assert_eq!(r.distance(&adj, 0, 16), 4, "other ToR, same pod");
        assert_eq!(r.distance(&adj, 0, 319), 6);
        assert_eq!(r.next_hops(tor0, 319).len(), 2);
        assert_eq!(r.next_hops(agg0, 319).len(), 8);
        assert_eq!(r.next_hops(agg0, 16).len(), 1);
        check_all_paths(&g, &r);
        check_against_per_host_bfs(&g, &r);
    }

    #[test]
    fn large_fat_tree_is_complete() {
        // k = 16: 1,024 hosts and 320 switches.
        let g = build(&format!("kind = \"fat_tree\"\nk = 16\n{HOST}{FABRIC}"));
        let r = Routes::compute(&g);
        let adj = g.ports();
        assert_eq!(g.hosts().len(), 1024);
        assert_eq!(r.distance(&adj, 0, 1023), 6);
        assert_eq!(r.next_hops(1024, 1023).len(), 8);
        let unreachable = (0..g.nodes.len()).any(|v| (0..1024).any(|d| r.distance(&adj, v, d) == UNREACHABLE));
        assert!(!unreachable);
    }
}
