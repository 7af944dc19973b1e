//! Network topologies: the node/link graph, the `[topology]` scenario table that builds the
//! standard datacenter shapes, and a reader for the HPCC simulator's topology files.

use crate::time::{Rate, Time};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

/// The node whose route table serves host `h`: the switch it hangs off by its only link, or
/// the host itself (linked to another host, or to more than one node).
pub fn table_target(adj: &[Vec<(usize, usize)>], nodes: &[NodeKind], h: usize) -> usize {
    match adj[h][..] {
        [(_, sw)] if nodes[sw] != NodeKind::Host => sw,
        _ => h,
    }
}

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// An end host: sends and receives, never forwards.
    Host,
    /// A switch; tier 0 is the ToR/leaf/edge (or the only switch), 1 aggregation/spine, 2 core.
    Switch {
        /// Distance of the switch layer from the hosts.
        tier: u8,
    },
}

/// One bidirectional link between nodes a and b (full duplex, same rate/delay/loss both ways).
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    /// One endpoint (node id).
    pub a: usize,
    /// The other endpoint (node id).
    pub b: usize,
    /// Line rate in each direction.
    pub rate: Rate,
    /// One-way propagation delay.
    pub delay: Time,
    /// Probability that a packet is lost on the wire, in [0, 1).
    pub loss: f64,
}

/// A built topology: node list and link list.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    /// Node kinds, indexed by node id.
    pub nodes: Vec<NodeKind>,
    /// Links; a link's index is its id.
    pub links: Vec<LinkSpec>,
}

impl Graph {
    /// Node ids of hosts in id order (host ordinal i = `hosts()[i]`).
    pub fn hosts(&self) -> Vec<usize> {
        (0..self.nodes.len()).filter(|&n| self.nodes[n] == NodeKind::Host).collect()
    }

    /// For each node, its incident links as (link index, peer node) in link-list order; the position in this list is the node's local port number.
    pub fn ports(&self) -> Vec<Vec<(usize, usize)>> {
        let mut ports = vec![Vec::new(); self.nodes.len()];
        for (i, l) in self.links.iter().enumerate() {
            ports[l.a].push((i, l.b));
            ports[l.b].push((i, l.a));
        }
        ports
    }

    /// How much more the hosts can send into the core than it carries: at each tier of
    /// switches (counted in hops from the hosts), the most any switch has below it over what it
    /// has above it, multiplied over the tiers (a leaf of 32 hosts and 8 uplinks, all at one
    /// rate: 4). 1 where no switch has less above it than below.
    pub fn oversubscription(&self) -> f64 {
        let ports = self.ports();
        let mut level = vec![u32::MAX; self.nodes.len()];
        let mut frontier = self.hosts();
        frontier.iter().for_each(|&h| level[h] = 0);
        for depth in 1.. {
            if frontier.is_empty() {
                break;
            }
            let mut next = Vec::new();
            for n in frontier {
                for &(_, peer) in &ports[n] {
                    if level[peer] == u32::MAX {
                        level[peer] = depth;
                        next.push(peer);
                    }
                }
            }
            frontier = next;
        }
        let mut worst: BTreeMap<u32, f64> = BTreeMap::new();
        for (n, links) in ports.iter().enumerate().filter(|(n, _)| self.nodes[*n] != NodeKind::Host) {
            let (mut down, mut up) = (0u64, 0u64);
            for &(i, peer) in links {
                match level[peer].cmp(&level[n]) {
                    Ordering::Less => down += self.links[i].rate.bps(),
                    Ordering::Greater => up += self.links[i].rate.bps(),
                    Ordering::Equal => {}
                }
            }
            if up > 0 {
                let w = worst.entry(level[n]).or_insert(1.0);
                *w = w.max(down as f64 / up as f64);
            }
        }
        worst.values().product()
    }
}

// Bounds that keep a typo in a count from exhausting memory before anything is simulated.
const MAX_NODES: u64 = 1 << 20;
const MAX_LINKS: u64 = 1 << 22;
const MAX_ROUTE_ENTRIES: u64 = 1 << 28;

/// The `[topology]` table of a scenario.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyConfig {
    /// One of [`KINDS`].
    pub kind: String,
    /// star: number of hosts.
    pub hosts: Option<u32>,
    /// dumbbell: hosts on the left switch.
    pub left: Option<u32>,
    /// dumbbell: hosts on the right switch.
    pub right: Option<u32>,
    /// leaf_spine: hosts under each leaf.
    pub hosts_per_leaf: Option<u32>,
    /// leaf_spine: number of leaf switches.
    pub leaves: Option<u32>,
    /// leaf_spine: number of spine switches.
    pub spines: Option<u32>,
    /// fat_tree: the classic k-ary fat tree (even k >= 2).
    pub k: Option<u32>,
    /// fat_tree (explicit): hosts under each ToR.
    pub hosts_per_tor: Option<u32>,
    /// fat_tree (explicit): total ToR switches.
    pub tors: Option<u32>,
    /// fat_tree (explicit): total aggregation switches.
    pub aggs: Option<u32>,
    /// fat_tree (explicit): total core switches.
    pub cores: Option<u32>,
    /// fat_tree (explicit): pods the ToRs and aggs split into (default 1).
    pub pods: Option<u32>,
    /// Host-to-first-switch link rate.
    pub host_rate: Option<Rate>,
    /// Host-to-first-switch link delay.
    pub host_delay: Option<Time>,
    /// Host-to-first-switch link loss (default 0).
    pub host_loss: Option<f64>,
    /// leaf_spine: leaf-to-spine link rate.
    pub fabric_rate: Option<Rate>,
    /// leaf_spine: leaf-to-spine link delay.
    pub fabric_delay: Option<Time>,
    /// leaf_spine: leaf-to-spine link loss (default 0).
    pub fabric_loss: Option<f64>,
    /// fat_tree: ToR-to-agg link rate.
    pub agg_rate: Option<Rate>,
    /// fat_tree: ToR-to-agg link delay.
    pub agg_delay: Option<Time>,
    /// fat_tree: ToR-to-agg link loss (default 0).
    pub agg_loss: Option<f64>,
    /// dumbbell: bottleneck rate; fat_tree: agg-to-core link rate.
    pub core_rate: Option<Rate>,
    /// dumbbell: bottleneck delay; fat_tree: agg-to-core link delay.
    pub core_delay: Option<Time>,
    /// dumbbell: bottleneck loss; fat_tree: agg-to-core link loss (default 0).
    pub core_loss: Option<f64>,
    /// hpcc_file, htsim_file: path of an HPCC topology file or of the UEC reference simulator's
    /// `.topo`, relative to the scenario file.
    pub file: Option<String>,
    /// rdcn: number of racks (ToRs).
    pub racks: Option<u32>,
    /// rdcn: hosts in each rack.
    pub hosts_per_rack: Option<u32>,
    /// rdcn: each ToR's uplink rate to the packet switch.
    pub packet_rate: Option<Rate>,
    /// rdcn: one-way ToR-to-ToR latency through the packet switch (half on each link).
    pub packet_delay: Option<Time>,
    /// rdcn: each ToR's uplink rate to the circuit switch.
    pub circuit_rate: Option<Rate>,
    /// rdcn: one-way ToR-to-ToR latency through the circuit switch (half on each link).
    pub circuit_delay: Option<Time>,
}

/// Every `topology.kind`, in the order `sluice list` shows them.
pub const KINDS: &[&str] = &["star", "dumbbell", "leaf_spine", "fat_tree", "rdcn", "hpcc_file", "htsim_file"];

/// The keys each kind accepts besides `kind`, space-separated.
pub fn keys_of(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "star" => "hosts host_rate host_delay host_loss",
        "dumbbell" => "left right host_rate host_delay host_loss core_rate core_delay core_loss",
        "leaf_spine" => concat!(
            "hosts_per_leaf leaves spines host_rate host_delay host_loss ",
            "fabric_rate fabric_delay fabric_loss"
        ),
        "fat_tree" => concat!(
            "k hosts_per_tor tors aggs cores pods host_rate host_delay host_loss ",
            "agg_rate agg_delay agg_loss core_rate core_delay core_loss"
        ),
        "rdcn" => "racks hosts_per_rack host_rate host_delay host_loss packet_rate packet_delay circuit_rate circuit_delay",
        "hpcc_file" | "htsim_file" => "file",
        _ => return None,
    })
}

/// Rate, delay and loss shared by one layer of links.
#[derive(Clone, Copy)]
struct Wire {
    rate: Rate,
    delay: Time,
    loss: f64,
}

impl TopologyConfig {
    /// Builds the graph; `base_dir` resolves relative file paths. Errors name the key, e.g. "topology.spines: required for kind = \"leaf_spine\"".
    pub fn build(&self, base_dir: &Path) -> Result<Graph, String> {
        let kind = self.kind.as_str();
        let allowed =
            keys_of(kind).ok_or_else(|| {
                let kinds: Vec<String> = KINDS.iter().map(|k| format!("\"{k}\"")).collect();
                format!("topology.kind: unknown kind \"{kind}\"; expected one of {}{}", kinds.join(", "), crate::words::did_you_mean(kind, KINDS.iter().copied()))
            })?;
        if let Some(key) = self.set_keys().into_iter().find(|k| !allowed.split(' ').any(|a| a == *k)) {
            return Err(format!(
                "topology.{key}: not a key of kind = \"{kind}\" (its keys: {})",
                allowed.replace(' ', ", ")
            ));
        }
        let graph = match kind {
            "star" => {
                let hosts = self.count("hosts", self.hosts)?;
                clos(hosts, 1, 1, 0, 0, self.host_wire()?, None, None)?
            }
            "dumbbell" => self.dumbbell()?,
            "leaf_spine" => {
                let (hpl, leaves, spines) = (
                    self.count("hosts_per_leaf", self.hosts_per_leaf)?,
                    self.count("leaves", self.leaves)?,
                    self.count("spines", self.spines)?,
                );
                let fabric = self.wire("fabric", self.fabric_rate, self.fabric_delay, self.fabric_loss)?;
                clos(hpl, leaves, 1, spines, 0, self.host_wire()?, Some(fabric), None)?
            }
            "fat_tree" => self.fat_tree()?,
            "rdcn" => self.rdcn()?,
            _ => {
                let file = self.file.as_deref().ok_or_else(|| self.missing("file"))?;
                let path = base_dir.join(file);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("topology.file: cannot read \"{}\": {e}", path.display()))?;
                if kind == "htsim_file" {
                    parse_htsim_topology(&text, file)?
                } else {
                    return parse_hpcc_topology(&text, file);
                }
            }
        };
        validate(&graph, "topology")?;
        Ok(graph)
    }

    /// Names of the optional keys that are present.
    fn set_keys(&self) -> Vec<&'static str> {
        macro_rules! present {
            ($($f:ident)*) => { [$((self.$f.is_some(), stringify!($f))),*] };
        }
        let keys = present! {
            hosts left right hosts_per_leaf leaves spines k hosts_per_tor tors aggs cores pods
            host_rate host_delay host_loss fabric_rate fabric_delay fabric_loss agg_rate agg_delay agg_loss
            core_rate core_delay core_loss file racks hosts_per_rack packet_rate packet_delay circuit_rate circuit_delay
        };
        keys.into_iter().filter(|(set, _)| *set).map(|(_, name)| name).collect()
    }

    fn missing(&self, key: &str) -> String {
        format!("topology.{key}: required for kind = \"{}\"", self.kind)
    }

    /// A required count, which must be at least 1.
    fn count(&self, key: &str, v: Option<u32>) -> Result<u64, String> {
        match v {
            None => Err(self.missing(key)),
            Some(0) => Err(format!("topology.{key}: must be at least 1, got 0")),
            Some(v) => Ok(v as u64),
        }
    }

    fn wire(&self, layer: &str, rate: Option<Rate>, delay: Option<Time>, loss: Option<f64>) -> Result<Wire, String> {
        let rate = rate.ok_or_else(|| self.missing(&format!("{layer}_rate")))?;
        let delay = delay.ok_or_else(|| self.missing(&format!("{layer}_delay")))?;
        let loss = loss.unwrap_or(0.0);
        if !(0.0..1.0).contains(&loss) {
            return Err(format!("topology.{layer}_loss: must be in [0, 1), got {loss}"));
        }
        Ok(Wire { rate, delay, loss })
    }

    fn host_wire(&self) -> Result<Wire, String> {
        self.wire("host", self.host_rate, self.host_delay, self.host_loss)
    }

    fn core_wire(&self) -> Result<Wire, String> {
        self.wire("core", self.core_rate, self.core_delay, self.core_loss)
    }

    fn dumbbell(&self) -> Result<Graph, String> {
        let (left, right) = (self.count("left", self.left)?, self.count("right", self.right)?);
        let (host, core) = (self.host_wire()?, self.core_wire()?);
        check_size(left + right + 2, left + right + 1)?;
        let (left, hosts) = (left as usize, (left + right) as usize);
        let mut g = Graph::default();
        g.nodes.resize(hosts, NodeKind::Host);
        g.nodes.extend([NodeKind::Switch { tier: 0 }; 2]);
        for h in 0..hosts {
            connect(&mut g, h, if h < left { hosts } else { hosts + 1 }, host);
        }
        connect(&mut g, hosts, hosts + 1, core);
        Ok(g)
    }

    /// A reconfigurable network: racks of hosts under their ToRs (tier 0); every ToR has an
    /// uplink to one packet switch and one to one circuit switch (tier 1, in that order after
    /// the ToRs). Hosts come first, rack by rack.
    fn rdcn(&self) -> Result<Graph, String> {
        let (racks, per_rack) = (self.count("racks", self.racks)?, self.count("hosts_per_rack", self.hosts_per_rack)?);
        if racks < 2 {
            return Err(format!("topology.racks: expected at least 2 racks for circuits between them, got {racks}"));
        }
        let host = self.host_wire()?;
        let half = |rate: Option<Rate>, delay: Option<Time>, layer: &str| -> Result<Wire, String> {
            let w = self.wire(layer, rate, delay, Some(0.0))?;
            Ok(Wire { delay: Time(w.delay.0 / 2), ..w })
        };
        let packet = half(self.packet_rate, self.packet_delay, "packet")?;
        let circuit = half(self.circuit_rate, self.circuit_delay, "circuit")?;
        check_size(racks * per_rack + racks + 2, racks * per_rack + 2 * racks)?;
        let (racks, per_rack) = (racks as usize, per_rack as usize);
        let hosts = racks * per_rack;
        let mut g = Graph::default();
        g.nodes.resize(hosts, NodeKind::Host);
        g.nodes.extend(std::iter::repeat_n(NodeKind::Switch { tier: 0 }, racks));
        g.nodes.extend([NodeKind::Switch { tier: 1 }; 2]);
        let (eps, ocs) = (hosts + racks, hosts + racks + 1);
        for h in 0..hosts {
            connect(&mut g, h, hosts + h / per_rack, host);
        }
        for r in 0..racks {
            connect(&mut g, hosts + r, eps, packet);
            connect(&mut g, hosts + r, ocs, circuit);
        }
        Ok(g)
    }

    fn fat_tree(&self) -> Result<Graph, String> {
        let explicit = [
            ("hosts_per_tor", self.hosts_per_tor),
            ("tors", self.tors),
            ("aggs", self.aggs),
            ("cores", self.cores),
            ("pods", self.pods),
        ];
        let given = explicit.iter().find(|(_, v)| v.is_some()).map(|(key, _)| *key);
        let (hpt, tors, pods, aggs, cores) = match (self.k, given) {
            (Some(_), Some(key)) => {
                return Err(format!("topology.{key}: cannot be combined with k (give either k or explicit counts)"))
            }
            (Some(k), None) => {
                if k < 2 || k % 2 != 0 {
                    return Err(format!("topology.k: must be an even number >= 2, got {k}"));
                }
                let (k, half) = (k as u64, k as u64 / 2);
                (half, k * half, k, k * half, half * half)
            }
            (None, None) => {
                return Err(format!(
                    "{} (or give the explicit counts hosts_per_tor, tors, aggs, cores and optionally pods)",
                    self.missing("k")
                ))
            }
            (None, Some(_)) => {
                let hpt = self.count("hosts_per_tor", self.hosts_per_tor)?;
                let tors = self.count("tors", self.tors)?;
                let aggs = self.count("aggs", self.aggs)?;
                let cores = self.count("cores", self.cores)?;
                let pods = if self.pods.is_some() { self.count("pods", self.pods)? } else { 1 };
                if tors % pods != 0 {
                    return Err(format!("topology.tors: {tors} ToRs do not split evenly over {pods} pods"));
                }
                if aggs % pods != 0 {
                    return Err(format!("topology.aggs: {aggs} aggs do not split evenly over {pods} pods"));
                }
                let per_pod = aggs / pods;
                if cores % per_pod != 0 {
                    return Err(format!(
                        "topology.cores: {cores} cores do not split into {per_pod} equal groups (one per agg of a pod)"
                    ));
                }
                (hpt, tors, pods, aggs, cores)
            }
        };
        let agg = self.wire("agg", self.agg_rate, self.agg_delay, self.agg_loss)?;
        clos(hpt, tors, pods, aggs, cores, self.host_wire()?, Some(agg), Some(self.core_wire()?))
    }
}

/// Builds an up-to-three-tier Clos: `hpt` hosts per ToR; ToRs and aggs split evenly into `pods`,
/// each ToR linked to every agg of its pod; cores split into one group per agg position, and agg j
/// of every pod linked to every core of group j. Zero aggs or cores leaves that tier out. Callers
/// have checked divisibility.
#[allow(clippy::too_many_arguments)]
fn clos(
    hpt: u64,
    tors: u64,
    pods: u64,
    aggs: u64,
    cores: u64,
    host: Wire,
    agg: Option<Wire>,
    core: Option<Wire>,
) -> Result<Graph, String> {
    let (tors_pp, aggs_pp) = (tors / pods, aggs / pods);
    let group = if cores > 0 { cores / aggs_pp } else { 0 };
    let hosts = hpt.saturating_mul(tors);
    let nodes = hosts.saturating_add(tors).saturating_add(aggs).saturating_add(cores);
    let links = hosts.saturating_add(tors.saturating_mul(aggs_pp)).saturating_add(aggs.saturating_mul(group));
    check_size(nodes, links)?;
    let [hpt, hosts, tors, tors_pp, aggs, aggs_pp, cores, group] =
        [hpt, hosts, tors, tors_pp, aggs, aggs_pp, cores, group].map(|v| v as usize);

    let mut g = Graph::default();
    g.nodes.resize(hosts, NodeKind::Host);
    let (tor0, agg0, core0) = (hosts, hosts + tors, hosts + tors + aggs);
    g.nodes.resize(agg0, NodeKind::Switch { tier: 0 });
    g.nodes.resize(core0, NodeKind::Switch { tier: 1 });
    g.nodes.resize(core0 + cores, NodeKind::Switch { tier: 2 });
    for h in 0..hosts {
        connect(&mut g, h, tor0 + h / hpt, host);
    }
    if let Some(agg) = agg {
        for t in 0..tors {
            let pod = t / tors_pp;
            for j in 0..aggs_pp {
                connect(&mut g, tor0 + t, agg0 + pod * aggs_pp + j, agg);
            }
        }
    }
    if let (Some(core), true) = (core, cores > 0) {
        for a in 0..aggs {
            let j = a % aggs_pp;
            for c in 0..group {
                connect(&mut g, agg0 + a, core0 + j * group + c, core);
            }
        }
    }
    Ok(g)
}

fn connect(g: &mut Graph, a: usize, b: usize, w: Wire) {
    g.links.push(LinkSpec { a, b, rate: w.rate, delay: w.delay, loss: w.loss });
}

fn check_size(nodes: u64, links: u64) -> Result<(), String> {
    if nodes > MAX_NODES || links > MAX_LINKS {
        return Err(format!(
            "topology: {nodes} nodes and {links} links exceed the supported size ({MAX_NODES} nodes, {MAX_LINKS} links)"
        ));
    }
    Ok(())
}

/// One `Tier` section of a `.topo` file.
#[derive(Clone, Copy, Debug, Default)]
struct HtsimTier {
    speed_gbps: Option<u64>,
    radix_down: Option<u64>,
    radix_up: Option<u64>,
    latency_ns: Option<u64>,
}

/// Parses the UEC reference simulator's topology file (uet-htsim's `.topo`,
/// `FatTreeTopologyCfg::read_cfg`): `Nodes`, `Tiers` (2 or 3) and `Podsize`, then a `Tier <t>`
/// section a tier (0 the ToRs) with `Downlink_speed_Gbps`, `Radix_Down`, `Radix_Up` (below the
/// top) and `Downlink_Latency_ns`, the links below that tier. It builds the Clos the file
/// describes where each switch links once to each switch above it in its pod, as every file the
/// reference ships does; its queue keys are left out, as the reference overwrites them too.
pub fn parse_htsim_topology(text: &str, name: &str) -> Result<Graph, String> {
    let (mut nodes, mut tiers, mut podsize) = (None, None, None);
    let mut sections = [HtsimTier::default(); 3];
    let mut current: Option<usize> = None;
    for (line, l) in text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty() && !l.starts_with('#')) {
        let at = |msg: String| format!("{name} line {line}: {msg}");
        let words: Vec<&str> = l.split_whitespace().collect();
        let [key, value] = words[..] else { return Err(at(format!("expected `<key> <value>`, got \"{l}\""))) };
        let n: u64 = value.parse().map_err(|_| at(format!("{key}: expected a whole number, got \"{value}\"")))?;
        let tier = |field: &mut Option<u64>| -> Result<(), String> {
            match current {
                Some(_) => {
                    *field = Some(n);
                    Ok(())
                }
                None => Err(at(format!("{key} comes before any `Tier <t>` line"))),
            }
        };
        let t = current.unwrap_or(0);
        match key.to_ascii_lowercase().as_str() {
            "nodes" => nodes = Some(n),
            "tiers" if n == 2 || n == 3 => tiers = Some(n as usize),
            "tiers" => return Err(at(format!("Tiers: expected 2 or 3, got {n}"))),
            "podsize" => podsize = Some(n),
            "tier" if (n as usize) < tiers.unwrap_or(3) => current = Some(n as usize),
            "tier" => return Err(at(format!("Tier {n}: the file has {} tiers, numbered from 0", tiers.unwrap_or(3)))),
            "downlink_speed_gbps" => tier(&mut sections[t].speed_gbps)?,
            "radix_down" => tier(&mut sections[t].radix_down)?,
            "radix_up" => tier(&mut sections[t].radix_up)?,
            "downlink_latency_ns" => tier(&mut sections[t].latency_ns)?,
            "switch_latency_ns" if n != 0 => {
                return Err(at(format!("Switch_Latency_ns {n}: sluice's switches add no latency of their own; add it to Downlink_Latency_ns")))
            }
            "bundle" if n != 1 => return Err(at(format!("Bundle {n}: only single links between switches are supported"))),
            "switch_latency_ns" | "bundle" | "oversubscribed" | "queue_up" | "queue_down" => {}
            _ => return Err(at(format!("unknown key \"{key}\"; expected Nodes, Tiers, Podsize, Tier, Downlink_speed_Gbps, Radix_Down, Radix_Up, Downlink_Latency_ns, Switch_Latency_ns, Oversubscribed, Bundle, Queue_Up or Queue_Down"))),
        }
    }
    let missing = |what: &str| format!("{name}: no {what}");
    let nodes = nodes.ok_or_else(|| missing("`Nodes <n>` line"))?;
    let tiers = tiers.ok_or_else(|| missing("`Tiers <2 or 3>` line"))?;
    let field = |t: usize, v: Option<u64>, key: &str| v.filter(|&v| v > 0).ok_or_else(|| format!("{name}: Tier {t} needs a positive {key}"));
    let wire = |t: usize| -> Result<Wire, String> {
        let s = sections[t];
        Ok(Wire { rate: Rate::gbps(field(t, s.speed_gbps, "Downlink_speed_Gbps")?), delay: Time::from_ns(field(t, s.latency_ns, "Downlink_Latency_ns")?), loss: 0.0 })
    };
    let (down, up) = (|t: usize| field(t, sections[t].radix_down, "Radix_Down"), |t: usize| field(t, sections[t].radix_up, "Radix_Up"));
    let single = |what: String| format!("{name}: {what}; sluice builds Clos networks where each switch links once to each switch above it in its pod");
    let podsize = if tiers == 2 { nodes } else { podsize.ok_or_else(|| missing("`Podsize <hosts>` line"))? };
    let hpt = down(0)?;
    if nodes % podsize != 0 || podsize % hpt != 0 {
        return Err(format!("{name}: Nodes {nodes} do not split into pods of {podsize} hosts under ToRs of {hpt}"));
    }
    let (pods, tors_pp) = (nodes / podsize, podsize / hpt);
    let aggs_pp = up(0)?;
    if down(1)? != tors_pp {
        return Err(single(format!("Tier 1 has Radix_Down {} but its pod {tors_pp} ToRs with Radix_Up {aggs_pp}", down(1)?)));
    }
    let graph = if tiers == 2 {
        clos(hpt, tors_pp, 1, aggs_pp, 0, wire(0)?, Some(wire(1)?), None)?
    } else {
        let group = up(1)?;
        if down(2)? != pods {
            return Err(single(format!("Tier 2 has Radix_Down {} but there are {pods} pods", down(2)?)));
        }
        clos(hpt, tors_pp * pods, pods, aggs_pp * pods, aggs_pp * group, wire(0)?, Some(wire(1)?), Some(wire(2)?))?
    };
    Ok(graph)
}

/// Checks what the simulator relies on: single-homed hosts, one connected graph, per-node port
/// numbers that fit in u16 and route tables whose indices fit in u32. `who` prefixes errors.
fn validate(g: &Graph, who: &str) -> Result<(), String> {
    let hosts = g.hosts();
    if hosts.is_empty() {
        return Err(format!("{who}: the topology has no hosts"));
    }
    let n = g.nodes.len();
    for (i, l) in g.links.iter().enumerate() {
        if l.a >= n || l.b >= n || l.a == l.b {
            return Err(format!("{who}: link {i} ({} - {}) must join two distinct nodes below {n}", l.a, l.b));
        }
    }
    let ports = g.ports();
    if let Some(&h) = hosts.iter().find(|&&h| ports[h].len() != 1) {
        return Err(format!("{who}: host node {h} has {} links; hosts must have exactly one", ports[h].len()));
    }
    if let Some(v) = (0..n).find(|&v| ports[v].len() > u16::MAX as usize) {
        return Err(format!(
            "{who}: node {v} has {} links; at most {} per node are supported",
            ports[v].len(),
            u16::MAX
        ));
    }
    // Hosts are single-homed, so they cannot be transit nodes and plain reachability suffices.
    let mut seen = vec![false; n];
    let mut queue = VecDeque::from([hosts[0]]);
    seen[hosts[0]] = true;
    while let Some(u) = queue.pop_front() {
        for &(_, w) in &ports[u] {
            if !seen[w] {
                seen[w] = true;
                queue.push_back(w);
            }
        }
    }
    if let Some(&h) = hosts.iter().find(|&&h| !seen[h]) {
        return Err(format!("{who}: host node {} cannot reach host node {h}; the graph is not connected", hosts[0]));
    }
    if let Some(v) = (0..n).find(|&v| !seen[v]) {
        return Err(format!("{who}: switch node {v} is not connected to the hosts"));
    }
    // Routes hold one table per switch with hosts (a host hanging off another host has its own),
    // one entry per node in each and at most deg(node) ports per entry (each distinct set of ports
    // stored once, indexed by u32 offsets); refuse sizes that would not fit rather than fail
    // while building them.
    let tables =
        hosts.iter().map(|&h| table_target(&ports, &g.nodes, h)).collect::<std::collections::BTreeSet<_>>().len();
    let (t, n, l) = (tables as u64, n as u64, g.links.len() as u64);
    if t * n > MAX_ROUTE_ENTRIES || t * 2 * l > u32::MAX as u64 {
        return Err(format!(
            "{who}: {t} route tables (one per switch with hosts), {n} nodes and {l} links are too many for the route tables"
        ));
    }
    Ok(())
}

/// Parses the HPCC simulator's topology file format. `name` is the file name used in errors.
///
/// Line 1 is `<nodes> <switches> <links>`, line 2 lists the switch node ids (absent when there are
/// none), then one `<src> <dst> <rate> <delay> <error rate>` line per link, e.g.
/// `0 320 100Gbps 0.001ms 0`. Nodes not listed as switches are hosts; blank lines and lines
/// starting with '#' are ignored. Node ids are kept as in the file. Switches next to a host are
/// tier 0, the next layer tier 1, and so on.
pub fn parse_hpcc_topology(text: &str, name: &str) -> Result<Graph, String> {
    const HEADER: &str = "\"<nodes> <switches> <links>\"";
    const LINK: &str = "\"<src> <dst> <rate> <delay> <error rate>\"";
    let at = |line: usize, msg: String| format!("{name} line {line}: {msg}");
    let end = text.lines().count() + 1;
    let mut lines =
        text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));

    let (head_ln, head) = lines.next().unwrap_or((end, ""));
    let counts: Option<Vec<u64>> = head.split_whitespace().map(|t| t.parse().ok()).collect();
    let Some(&[nodes, switches, links]) = counts.as_deref() else {
        let got = if head.is_empty() { "end of file".to_string() } else { format!("\"{head}\"") };
        return Err(at(head_ln, format!("expected {HEADER}, got {got}")));
    };
    if nodes == 0 || switches > nodes || nodes > MAX_NODES || links > MAX_LINKS {
        return Err(at(
            head_ln,
            format!(
                "need 1 to {MAX_NODES} nodes, at most as many switches, and at most {MAX_LINKS} links; got \"{head}\""
            ),
        ));
    }
    let n = nodes as usize;
    let mut g = Graph { nodes: vec![NodeKind::Host; n], links: Vec::new() };

    if switches > 0 {
        let (ln, line) = lines.next().unwrap_or((end, ""));
        let ids: Vec<&str> = line.split_whitespace().collect();
        if ids.len() as u64 != switches {
            return Err(at(
                ln,
                format!("expected {switches} switch node ids (as declared on line {head_ln}), got {}", ids.len()),
            ));
        }
        for id in ids {
            let s = node_id(id, n).map_err(|e| at(ln, e))?;
            if g.nodes[s] != NodeKind::Host {
                return Err(at(ln, format!("switch {s} listed twice")));
            }
            g.nodes[s] = NodeKind::Switch { tier: 0 };
        }
    }

    // The line of each host's link, to point at both lines when a host gets a second one.
    let mut host_link = vec![None; n];
    for (ln, line) in lines {
        if g.links.len() as u64 == links {
            return Err(at(ln, format!("extra line after the {links} links declared on line {head_ln}: \"{line}\"")));
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let [src, dst, rate, delay, loss] = f[..] else {
            return Err(at(ln, format!("expected {LINK}, got \"{line}\"")));
        };
        let (a, b) = (node_id(src, n).map_err(|e| at(ln, e))?, node_id(dst, n).map_err(|e| at(ln, e))?);
        if a == b {
            return Err(at(ln, format!("link from node {a} to itself")));
        }
        let rate = Rate::parse(rate).map_err(|e| at(ln, format!("rate: {e}")))?;
        let delay = Time::parse(delay).map_err(|e| at(ln, format!("delay: {e}")))?;
        let loss = match loss.parse::<f64>() {
            Ok(p) if (0.0..1.0).contains(&p) => p,
            _ => return Err(at(ln, format!("error rate: expected a number in [0, 1), got \"{loss}\""))),
        };
        for v in [a, b] {
            if g.nodes[v] == NodeKind::Host {
                if let Some(first) = host_link[v] {
                    return Err(at(
                        ln,
                        format!("host node {v} already has a link (line {first}); hosts must have exactly one"),
                    ));
                }
                host_link[v] = Some(ln);
            }
        }
        g.links.push(LinkSpec { a, b, rate, delay, loss });
    }
    if (g.links.len() as u64) < links {
        return Err(at(head_ln, format!("declares {links} links, but only {} link lines follow", g.links.len())));
    }
    if let Some(h) = (0..n).find(|&v| g.nodes[v] == NodeKind::Host && host_link[v].is_none()) {
        return Err(at(
            head_ln,
            format!("host node {h} has no link; hosts (nodes not listed as switches) must have exactly one"),
        ));
    }
    validate(&g, name)?;
    assign_tiers(&mut g);
    Ok(g)
}

fn node_id(tok: &str, n: usize) -> Result<usize, String> {
    match tok.parse::<usize>() {
        Ok(v) if v < n => Ok(v),
        Ok(v) => Err(format!("node {v} out of range (the file declares {n} nodes, ids 0 to {})", n - 1)),
        Err(_) => Err(format!("expected a node id, got \"{tok}\"")),
    }
}

/// Sets each switch's tier to its switch-hop distance from the nearest host, minus one, capped at 255.
fn assign_tiers(g: &mut Graph) {
    let ports = g.ports();
    let mut dist: Vec<u32> = g.nodes.iter().map(|k| if *k == NodeKind::Host { 0 } else { u32::MAX }).collect();
    let mut queue: VecDeque<usize> = g.hosts().into();
    while let Some(u) = queue.pop_front() {
        for &(_, w) in &ports[u] {
            if dist[w] == u32::MAX {
                dist[w] = dist[u] + 1;
                g.nodes[w] = NodeKind::Switch { tier: (dist[w] - 1).min(255) as u8 };
                queue.push_back(w);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(toml_text: &str) -> Result<Graph, String> {
        let cfg: TopologyConfig = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        cfg.build(Path::new("."))
    }

    fn switches(g: &Graph, tier: u8) -> usize {
        g.nodes.iter().filter(|k| **k == NodeKind::Switch { tier }).count()
    }

    const HOST: &str = "host_rate = \"100Gbps\"\nhost_delay = \"1us\"\n";

    #[test]
    fn k8_fat_tree_counts() {
        let g = build(&format!(
            "kind = \"fat_tree\"\nk = 8\n{HOST}agg_rate = \"100Gbps\"\nagg_delay = \"1us\"\ncore_rate = \"400Gbps\"\ncore_delay = \"2us\""
        ))
        .unwrap();
        assert_eq!(g.hosts().len(), 128);
        assert_eq!((switches(&g, 0), switches(&g, 1), switches(&g, 2)), (32, 32, 16));
        assert_eq!(g.nodes.len(), 128 + 80);
        assert_eq!(g.links.len(), 384);
        assert_eq!(g.hosts(), (0..128).collect::<Vec<_>>());
        let ports = g.ports();
        // Every ToR: 4 hosts + 4 aggs; every agg: 4 ToRs + 4 cores; every core: one agg per pod.
        assert!((128..160).all(|t| ports[t].len() == 8));
        assert!((160..192).all(|a| ports[a].len() == 8));
        assert!((192..208).all(|c| ports[c].len() == 8));
        assert_eq!(g.links[383].rate, Rate::gbps(400));
        assert_eq!(g.links[0], LinkSpec { a: 0, b: 128, rate: Rate::gbps(100), delay: Time::from_us(1), loss: 0.0 });
    }

    #[test]
    fn explicit_fat_tree_like_hpcc() {
        let g = build(&format!(
            "kind = \"fat_tree\"\nhosts_per_tor = 16\ntors = 20\naggs = 20\ncores = 16\npods = 10\n{HOST}\
             agg_rate = \"400Gbps\"\nagg_delay = \"1us\"\ncore_rate = \"400Gbps\"\ncore_delay = \"1us\"\ncore_loss = 0.001"
        ))
        .unwrap();
        assert_eq!(g.hosts().len(), 320);
        assert_eq!((switches(&g, 0), switches(&g, 1), switches(&g, 2)), (20, 20, 16));
        // 320 host links, 20 ToRs x 2 aggs per pod, 20 aggs x 8 cores per group.
        assert_eq!(g.links.len(), 320 + 40 + 160);
        let ports = g.ports();
        assert!((340..356).all(|c| ports[c].len() == 10), "each core reaches one agg per pod");
        assert_eq!(g.links.last().unwrap().loss, 0.001);
    }

    #[test]
    fn star_dumbbell_leaf_spine_counts() {
        let g = build(&format!("kind = \"star\"\nhosts = 5\n{HOST}host_loss = 0.01")).unwrap();
        assert_eq!((g.hosts().len(), g.nodes.len(), g.links.len()), (5, 6, 5));
        assert_eq!(g.nodes[5], NodeKind::Switch { tier: 0 });
        assert!(g.links.iter().all(|l| l.b == 5 && l.loss == 0.01));

        let g = build(&format!(
            "kind = \"dumbbell\"\nleft = 3\nright = 2\n{HOST}core_rate = \"10Gbps\"\ncore_delay = \"10us\""
        ))
        .unwrap();
        assert_eq!((g.hosts().len(), switches(&g, 0), g.links.len()), (5, 2, 6));
        assert_eq!(g.ports()[5].len(), 4);
        assert_eq!(g.ports()[6].len(), 3);
        assert_eq!((g.links[5].a, g.links[5].b, g.links[5].rate), (5, 6, Rate::gbps(10)));

        let g = build(&format!(
            "kind = \"leaf_spine\"\nhosts_per_leaf = 8\nleaves = 4\nspines = 2\n{HOST}fabric_rate = \"400Gbps\"\nfabric_delay = \"1us\""
        ))
        .unwrap();
        assert_eq!((g.hosts().len(), switches(&g, 0), switches(&g, 1), g.links.len()), (32, 4, 2, 40));
    }

    #[test]
    fn config_errors_name_the_key() {
        let err = |t: &str| build(t).unwrap_err();
        assert_eq!(
            err(&format!("kind = \"leaf_spine\"\nhosts_per_leaf = 8\nleaves = 4\n{HOST}")),
            "topology.spines: required for kind = \"leaf_spine\""
        );
        assert!(
            err(&format!("kind = \"star\"\nhosts = 4\nspines = 2\n{HOST}")).starts_with("topology.spines: not a key")
        );
        assert!(err(&format!("kind = \"star\"\nhosts = 0\n{HOST}")).starts_with("topology.hosts: must be at least 1"));
        assert!(err("kind = \"star\"\nhosts = 4\nhost_rate = \"1Gbps\"").starts_with("topology.host_delay: required"));
        assert!(err(&format!("kind = \"star\"\nhosts = 4\n{HOST}host_loss = 1.0"))
            .starts_with("topology.host_loss: must be in [0, 1)"));
        assert!(err("kind = \"ring\"").starts_with("topology.kind: unknown kind \"ring\""));
        assert!(err("kind = \"star\"\nbogus = 1").contains("bogus"));
        let ft = "agg_rate = \"1Gbps\"\nagg_delay = \"1us\"\ncore_rate = \"1Gbps\"\ncore_delay = \"1us\"";
        assert!(err(&format!("kind = \"fat_tree\"\nk = 4\ntors = 8\n{HOST}{ft}"))
            .starts_with("topology.tors: cannot be combined with k"));
        assert!(
            err(&format!("kind = \"fat_tree\"\nk = 5\n{HOST}{ft}")).starts_with("topology.k: must be an even number")
        );
        assert!(err(&format!("kind = \"fat_tree\"\n{HOST}{ft}")).starts_with("topology.k: required"));
        let counts = "hosts_per_tor = 2\ntors = 4\naggs = 4\ncores = 6\n";
        assert!(err(&format!("kind = \"fat_tree\"\n{counts}pods = 3\n{HOST}{ft}"))
            .starts_with("topology.tors: 4 ToRs do not split"));
        assert!(err(&format!("kind = \"fat_tree\"\n{counts}{HOST}{ft}"))
            .starts_with("topology.cores: 6 cores do not split"));
        assert!(err(&format!("kind = \"fat_tree\"\nhosts_per_tor = 2\ntors = 4\n{HOST}{ft}"))
            .starts_with("topology.aggs: required"));
        assert!(err(&format!("kind = \"star\"\nhosts = 4000000\n{HOST}")).contains("exceed the supported size"));
        assert!(err("kind = \"hpcc_file\"").starts_with("topology.file: required"));
        assert!(err("kind = \"hpcc_file\"\nfile = \"/nonexistent/topo.txt\"").starts_with("topology.file: cannot read"));
    }

    #[test]
    fn config_round_trips_through_toml() {
        let cfg: TopologyConfig = toml::from_str(&format!("kind = \"star\"\nhosts = 3\n{HOST}")).unwrap();
        let back: TopologyConfig = toml::from_str(&toml::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(back.build(Path::new(".")).unwrap().links, cfg.build(Path::new(".")).unwrap().links);
    }

    const SMALL: &str = "# two hosts, two ToRs, one spine\n\
        5 3 4\n\
        2 3 4   \n\
        \n\
        0 2 100Gbps 0.001ms 0\n\
        1 3 100Gbps 1us 0.0001\n\
        2 4 400Gbps 0.001ms 0\n\
        3 4 400Gbps 0.001ms 0\n";

    /// The reference's `fat_tree_1024.topo` ("supposed to match the default auto-generated
    /// topology") and `leaf_spine_1024_oversub.topo`, as uet-htsim ships them.
    const FAT_TREE_1024: &str = "# Test 3-tier FatTree\nNodes 1024\nTiers 3\nPodsize 64\n\nTier 0\nOversubscribed 1\nDownlink_speed_Gbps 100\nRadix_Down 8\nRadix_Up 8\nDownlink_Latency_ns 1000\nSwitch_Latency_ns 0\n\nTier 1\nOversubscribed 1\nDownlink_speed_Gbps 100\nRadix_Down 8\nRadix_Up 8\nDownlink_Latency_ns 1000\nSwitch_Latency_ns 0\nBundle 1\n\nTier 2\nDownlink_speed_Gbps 100\nRadix_Down 16\nDownlink_Latency_ns 1000\nSwitch_Latency_ns 0\nBundle 1";
    const LEAF_SPINE_4_TO_1: &str = "Nodes 1024\nTiers 2\nPodsize 1024\nTier 0\nDownlink_speed_Gbps 400\nRadix_Down 32\nRadix_Up 8\nDownlink_Latency_ns 1000\nOversubscribed 4\nSwitch_Latency_ns 0\nTier 1\nDownlink_speed_Gbps 400\nRadix_Down 32\nDownlink_Latency_ns 1000\nSwitch_Latency_ns 0";

    #[test]
    fn the_reference_topology_files_build_the_clos_they_describe() {
        let fabric = "agg_rate = \"100Gbps\"\nagg_delay = \"1us\"\ncore_rate = \"100Gbps\"\ncore_delay = \"1us\"\n";
        let k16 = build(&format!("kind = \"fat_tree\"\nk = 16\n{HOST}{fabric}")).unwrap();
        let file = parse_htsim_topology(FAT_TREE_1024, "fat_tree_1024.topo").unwrap();
        assert_eq!(file.nodes, k16.nodes, "1024 hosts, 128 ToRs, 128 aggs, 64 cores");
        assert_eq!(file.links, k16.links, "the auto topology's k = 16 fat tree, link for link");
        let ls = parse_htsim_topology(LEAF_SPINE_4_TO_1, "ls.topo").unwrap();
        assert_eq!((file.oversubscription(), k16.oversubscription(), ls.oversubscription()), (1.0, 1.0, 4.0));
        let leaf_spine = |fabric_rate: &str| {
            build(&format!("kind = \"leaf_spine\"\nhosts_per_leaf = 8\nleaves = 4\nspines = 2\n{HOST}fabric_rate = \"{fabric_rate}\"\nfabric_delay = \"1us\""))
                .unwrap()
                .oversubscription()
        };
        assert_eq!((leaf_spine("400Gbps"), leaf_spine("100Gbps"), leaf_spine("800Gbps")), (1.0, 4.0, 1.0), "8 x 100 Gb/s down, 2 up");
        assert_eq!(ls.hosts().len(), 1024);
        assert_eq!((ls.nodes.len(), ls.links.len()), (1024 + 32 + 8, 1024 + 32 * 8), "32 leaves of 32 hosts, 8 spines: 4:1");
        assert!(ls.links.iter().all(|l| l.rate == Rate::gbps(400) && l.delay == Time::from_us(1)));
        let err = |from: &str, to: &str| parse_htsim_topology(&LEAF_SPINE_4_TO_1.replacen(from, to, 1), "ls.topo").unwrap_err();
        assert_eq!(err("Switch_Latency_ns 0", "Switch_Latency_ns 500"), "ls.topo line 10: Switch_Latency_ns 500: sluice's switches add no latency of their own; add it to Downlink_Latency_ns");
        assert!(err("Tier 1\nDownlink_speed_Gbps 400\nRadix_Down 32", "Tier 1\nDownlink_speed_Gbps 400\nRadix_Down 64").starts_with("ls.topo: Tier 1 has Radix_Down 64 but its pod 32 ToRs"));
        assert_eq!(err("Tiers 2", "Tiers 4"), "ls.topo line 2: Tiers: expected 2 or 3, got 4");
        assert_eq!(err("Radix_Up 8", "Radix_Up eight"), "ls.topo line 7: Radix_Up: expected a whole number, got \"eight\"");
        assert!(err("Downlink_Latency_ns 1000\nOversubscribed", "Downlink_Latency_ms 1000\nOversubscribed").starts_with("ls.topo line 8: unknown key \"Downlink_Latency_ms\""));
        assert_eq!(err("Nodes 1024\n", ""), "ls.topo: no `Nodes <n>` line");
    }

    #[test]
    fn parses_hpcc_file() {
        let g = parse_hpcc_topology(SMALL, "topo.txt").unwrap();
        assert_eq!(g.hosts(), vec![0, 1]);
        assert_eq!(g.nodes[2..], [0, 0, 1].map(|tier| NodeKind::Switch { tier }));
        assert_eq!(g.links.len(), 4);
        assert_eq!(g.links[0], LinkSpec { a: 0, b: 2, rate: Rate::gbps(100), delay: Time::from_us(1), loss: 0.0 });
        assert_eq!(g.links[1].loss, 0.0001);
    }

    #[test]
    fn hpcc_file_from_config_resolves_relative_path() {
        let dir = std::env::temp_dir().join(format!("sluice-topo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("small.txt"), SMALL).unwrap();
        let cfg: TopologyConfig = toml::from_str("kind = \"hpcc_file\"\nfile = \"small.txt\"").unwrap();
        let g = cfg.build(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(g.unwrap().links.len(), 4);
    }

    #[test]
    fn hpcc_errors_name_file_and_line() {
        let case = |text: &str, needle: &str| {
            let e = parse_hpcc_topology(text, "topo.txt").unwrap_err();
            assert!(e.contains(needle), "{e:?} should contain {needle:?}");
        };
        let links = "0 2 100Gbps 1us 0\n1 3 100Gbps 1us 0\n2 4 100Gbps 1us 0\n3 4 100Gbps 1us 0\n";
        case("", "topo.txt line 1: expected \"<nodes> <switches> <links>\", got end of file");
        case("5 three 4\n", "topo.txt line 1: expected \"<nodes> <switches> <links>\"");
        case("5 3 4 9\n", "topo.txt line 1: expected");
        case("5 6 4\n", "topo.txt line 1: need 1 to");
        case(&format!("5 3 4\n2 3\n{links}"), "topo.txt line 2: expected 3 switch node ids");
        case(&format!("5 3 4\n2 3 3\n{links}"), "topo.txt line 2: switch 3 listed twice");
        case(&format!("5 3 4\n2 3 9\n{links}"), "topo.txt line 2: node 9 out of range");
        case(
            "5 3 4\n2 3 4\n0 2 100Gbps 1us 0\n\n1 3 fast\n",
            "topo.txt line 5: expected \"<src> <dst> <rate> <delay> <error rate>\", got \"1 3 fast\"",
        );
        case("5 3 4\n2 3 4\n0 7 100Gbps 1us 0\n", "topo.txt line 3: node 7 out of range");
        case("5 3 4\n2 3 4\n0 2 100Gbps 1us 0\n4 4 100Gbps 1us 0\n", "topo.txt line 4: link from node 4 to itself");
        case("5 3 4\n2 3 4\n0 2 100Gbps 1us 0\n1 3 100GB 1us 0\n", "topo.txt line 4: rate:");
        case("5 3 4\n2 3 4\n0 2 100Gbps 1 0\n", "topo.txt line 3: delay:");
        case("5 3 4\n2 3 4\n0 2 100Gbps 1us 1.5\n", "topo.txt line 3: error rate:");
        case(
            "# c\n5 3 4\n2 3 4\n0 2 100Gbps 1us 0\n0 3 100Gbps 1us 0\n",
            "topo.txt line 5: host node 0 already has a link (line 4)",
        );
        case(
            "5 3 4\n2 3 4\n0 2 100Gbps 1us 0\n2 3 100Gbps 1us 0\n2 4 1Gbps 1us 0\n3 4 1Gbps 1us 0\n",
            "topo.txt line 1: host node 1 has no link",
        );
        case(&format!("5 3 4\n2 3 4\n{links}1 2 1Gbps 1us 0\n"), "topo.txt line 7: extra line");
        case("5 3 4\n2 3 4\n0 2 100Gbps 1us 0\n1 3 100Gbps 1us 0\n", "topo.txt line 1: declares 4 links, but only 2");
        // Two islands: {0, 2} and {1, 3, 4}.
        case(
            "5 3 4\n2 3 4\n0 2 1Gbps 1us 0\n1 3 1Gbps 1us 0\n3 4 1Gbps 1us 0\n4 3 1Gbps 1us 0\n",
            "topo.txt: host node 0 cannot reach host node 1",
        );
    }
}
