//! How a fabric splits into partitions, the units that would run side by side: each host stays
//! with its ToR, and the switches below the top tier with the hosts they reach without crossing
//! it (a fat tree's pods, a leaf-spine's racks); the top tier's switches are dealt out to them in
//! turn. A link between partitions (a cut link) must have a delay: nothing crosses it sooner, so
//! a partition may run that far ahead of the others (the lookahead). Partitions that a zero-delay
//! link joins are one, and so is the whole fabric where closed-loop applications couple hosts at
//! zero delay. The split depends on the scenario alone, never on the threads that run it.

use crate::ids::PartId;
use super::topology::{Graph, NodeKind};
use crate::event::MAX_SOURCES;
use crate::time::Time;
use petgraph::unionfind::UnionFind;

/// The partitions of a fabric.
#[derive(Clone, Debug, PartialEq)]
pub struct Partitions {
    /// Each node's partition.
    pub of_node: Vec<PartId>,
    /// How many there are.
    pub count: usize,
    /// The smallest delay of a cut link (`None` with one partition).
    pub lookahead: Option<Time>,
    /// Why the fabric is one partition, where it is and could have been more.
    pub note: Option<&'static str>,
}

/// Partitions (less one, for the run's own events) an event list tells apart.
pub const MAX_PARTITIONS: usize = MAX_SOURCES - 1;

impl Partitions {
    /// The whole fabric as one partition.
    pub fn one(graph: &Graph, note: Option<&'static str>) -> Partitions {
        Partitions { of_node: vec![PartId(0); graph.nodes.len()], count: 1, lookahead: None, note }
    }

    /// Splits `graph`; `coupled` says why, when something ties hosts together at zero delay
    /// (closed-loop applications, flows that wait for flows of other hosts).
    pub fn of(graph: &Graph, coupled: Option<&'static str>) -> Partitions {
        let tier = |n: usize| match graph.nodes[n] {
            NodeKind::Host => None,
            NodeKind::Switch { tier } => Some(tier),
        };
        let Some(top) = (0..graph.nodes.len()).filter_map(tier).max() else { return Partitions::one(graph, None) };
        if top == 0 {
            return Partitions::one(graph, Some("one switch tier: no link to cut"));
        }
        if let Some(why) = coupled {
            return Partitions::one(graph, Some(why));
        }
        let is_top = |n: usize| tier(n) == Some(top);
        let mut sets = UnionFind::<usize>::new(graph.nodes.len());
        for l in &graph.links {
            if (!is_top(l.a) && !is_top(l.b)) || l.delay == Time::ZERO {
                sets.union(l.a, l.b);
            }
        }
        // Units in order of their first node; a top switch not joined to one by a zero-delay
        // link goes to the units in turn.
        let mut unit_of_root = vec![usize::MAX; graph.nodes.len()];
        let mut units = 0;
        for n in (0..graph.nodes.len()).filter(|&n| !is_top(n)) {
            let r = sets.find_mut(n);
            if unit_of_root[r] == usize::MAX {
                unit_of_root[r] = units;
                units += 1;
            }
        }
        let mut dealt = 0;
        for n in (0..graph.nodes.len()).filter(|&n| is_top(n)) {
            let r = sets.find_mut(n);
            if unit_of_root[r] == usize::MAX {
                unit_of_root[r] = dealt % units.max(1);
                dealt += 1;
            }
        }
        if units <= 1 {
            return Partitions::one(graph, Some("zero-delay links join every part of the fabric"));
        }
        // More units than an event list tells apart: neighbouring units share a partition.
        let count = units.min(MAX_PARTITIONS);
        let of_node: Vec<PartId> = (0..graph.nodes.len()).map(|n| PartId((unit_of_root[sets.find_mut(n)] * count / units) as u16)).collect();
        let lookahead = graph.links.iter().filter(|l| of_node[l.a] != of_node[l.b]).map(|l| l.delay).min();
        Partitions { of_node, count, lookahead, note: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::topology::TopologyConfig;

    const LINKS: &str = "host_rate = \"25Gbps\"\nhost_delay = \"1us\"\nfabric_rate = \"100Gbps\"\nfabric_delay = \"1us\"\n";

    fn graph(toml: &str) -> Graph {
        let cfg: TopologyConfig = toml::from_str(toml).unwrap();
        cfg.build(std::path::Path::new(".")).unwrap()
    }

    #[test]
    fn a_fat_tree_splits_into_its_pods_with_the_cores_dealt_out() {
        let g = graph("kind = \"fat_tree\"\nk = 4\nhost_rate = \"100Gbps\"\nhost_delay = \"1us\"\nagg_rate = \"100Gbps\"\nagg_delay = \"1us\"\ncore_rate = \"100Gbps\"\ncore_delay = \"1us\"\n");
        let p = Partitions::of(&g, None);
        assert_eq!(p.count, 4, "k = 4: four pods");
        for l in &g.links {
            let (ta, tb) = (g.nodes[l.a], g.nodes[l.b]);
            let crosses = p.of_node[l.a] != p.of_node[l.b];
            let core_link = matches!(ta, NodeKind::Switch { tier: 2 }) || matches!(tb, NodeKind::Switch { tier: 2 });
            assert!(!crosses || core_link, "only aggregation-core links are cut");
        }
        let cores: Vec<u16> = (0..g.nodes.len()).filter(|&n| g.nodes[n] == NodeKind::Switch { tier: 2 }).map(|n| p.of_node[n].0).collect();
        assert_eq!(cores, [0, 1, 2, 3], "the four cores, one per pod");
        assert_eq!(p.lookahead, Some(Time::from_us(1)));
    }

    #[test]
    fn a_leaf_spine_splits_into_racks_and_a_star_stays_whole() {
        let g = graph(&("kind = \"leaf_spine\"\nleaves = 3\nspines = 2\nhosts_per_leaf = 4\n".to_owned() + LINKS));
        let p = Partitions::of(&g, None);
        assert_eq!(p.count, 3);
        for h in g.hosts() {
            let leaf = g.links.iter().find(|l| l.a == h || l.b == h).map(|l| if l.a == h { l.b } else { l.a }).unwrap();
            assert_eq!(p.of_node[h], p.of_node[leaf], "a host stays with its ToR");
        }
        let star = graph("kind = \"star\"\nhosts = 8\nhost_rate = \"10Gbps\"\nhost_delay = \"1us\"\n");
        let p = Partitions::of(&star, None);
        assert_eq!((p.count, p.lookahead), (1, None));
        assert!(p.note.is_some());
        assert_eq!(Partitions::of(&g, Some("coupled")).count, 1, "coupled applications keep one partition");
    }

    #[test]
    fn a_zero_delay_link_is_never_cut() {
        let mut g = graph(&("kind = \"leaf_spine\"\nleaves = 3\nspines = 1\nhosts_per_leaf = 2\n".to_owned() + LINKS));
        let spine = (0..g.nodes.len()).find(|&n| g.nodes[n] == NodeKind::Switch { tier: 1 }).unwrap();
        // The spine's link to the last leaf has no delay: that leaf joins the spine's partition.
        let last = g.links.iter_mut().filter(|l| l.a == spine || l.b == spine).last().unwrap();
        last.delay = Time::ZERO;
        let leaf = if last.a == spine { last.b } else { last.a };
        let p = Partitions::of(&g, None);
        assert_eq!(p.of_node[leaf], p.of_node[spine]);
        assert!(p.lookahead.is_some_and(|t| t > Time::ZERO), "{p:?}");
        for l in g.links.iter().filter(|l| p.of_node[l.a] != p.of_node[l.b]) {
            assert!(l.delay > Time::ZERO);
        }
        // Every link without delay: one partition.
        g.links.iter_mut().for_each(|l| l.delay = Time::ZERO);
        assert_eq!(Partitions::of(&g, None).count, 1);
    }
}
