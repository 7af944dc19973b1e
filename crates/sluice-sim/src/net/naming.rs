//! Nodes and ports by the names scenarios use: hosts "h0".., switches "sw0".., a port as
//! "sw0->h3" (the egress of sw0 towards h3).

use super::topology::{Graph, NodeKind};

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

