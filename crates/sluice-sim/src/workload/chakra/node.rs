//! A rank's nodes as sluice runs them, following ASTRA-sim's workload layer
//! (`astra-sim/workload/Workload.cc`, `Workload::issue` and the `issue_*` it calls):
//! - `COMP_NODE` replays its `duration_micros` (the feeder's `runtime()`), as ASTRA-sim does
//!   without its roofline model; a zero runtime takes 1 ns there, and here.
//! - `MEM_LOAD_NODE` / `MEM_STORE_NODE` replay their `duration_micros` too: ASTRA-sim hands them
//!   to a remote-memory model sluice does not have, and replays them in `replay_only` mode.
//! - `METADATA_NODE` and `INVALID_NODE` are done at once (`skip_invalid`).
//! - `COMM_SEND_NODE`: `comm_dst`, `comm_size`, `comm_tag` (default 0); `comm_src`, if given,
//!   must be the rank itself. `COMM_RECV_NODE`: `comm_src`, `comm_tag`; `comm_dst`, if given,
//!   must be the rank.
//! - `COMM_COLL_NODE`: `comm_type`, `comm_size` and `pg_name` (empty or "0": every rank).
//!
//! A node waits for every node of its `data_deps` and `ctrl_deps` (ASTRA-sim's feeder uses both).

use super::schema::{node_type, Node, COMM_TYPES};
use crate::time::Time;
use crate::workload::collective::Op;
use std::collections::HashMap;

/// What a node does.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// Time on the rank (compute, memory).
    Delay(Time),
    /// Done as soon as what it waits for is.
    Pass,
    /// A message to rank `dst`.
    Send { dst: usize, bytes: u64, tag: i128 },
    /// A message from rank `src`.
    Recv { src: usize, tag: i128 },
    /// A collective over the ranks of communicator group `group` ("" for every rank).
    Coll { op: Op, bytes: u64, group: String },
}

/// A node as run: its id, what it does and the nodes (by index in the rank's list) it waits for.
#[derive(Clone, Debug, PartialEq)]
pub struct RankNode {
    /// The node's id in its file.
    pub id: u64,
    /// What it does.
    pub kind: Kind,
    /// The nodes it waits for, by index.
    pub deps: Vec<usize>,
}

/// An integer attribute of `n`, if it has it, or why it is not an integer.
fn int(n: &Node, name: &str) -> Result<Option<i128>, String> {
    match n.attr(name) {
        None => Ok(None),
        Some(a) => a.integer().map(Some).ok_or_else(|| format!("{name}: expected an integer attribute")),
    }
}

/// A required attribute that is a rank of the `ranks` there are.
fn rank_attr(n: &Node, name: &str, ranks: usize) -> Result<Option<usize>, String> {
    match int(n, name)? {
        None => Ok(None),
        Some(r) if r >= 0 && (r as u128) < ranks as u128 => Ok(Some(r as usize)),
        Some(r) => Err(format!("{name} is rank {r}, but the trace has ranks 0 to {}", ranks - 1)),
    }
}

/// A positive `comm_size`.
fn size_attr(n: &Node) -> Result<u64, String> {
    match int(n, "comm_size")? {
        Some(s) if s > 0 && s <= u64::MAX as i128 => Ok(s as u64),
        Some(s) => Err(format!("comm_size is {s}; expected a positive number of bytes")),
        None => Err("comm_size: required for a communication node".into()),
    }
}

/// The op of a `comm_type`, or why sluice does not run it.
fn op_of(t: i128) -> Result<Op, String> {
    let name = usize::try_from(t).ok().and_then(|t| COMM_TYPES.get(t)).copied();
    match name {
        Some("ALL_REDUCE") => Ok(Op::AllReduce),
        Some("ALL_GATHER") => Ok(Op::AllGather),
        Some("REDUCE_SCATTER") => Ok(Op::ReduceScatter),
        Some("ALL_TO_ALL") => Ok(Op::AllToAll),
        Some("BROADCAST") => Ok(Op::Broadcast),
        Some(n) => Err(format!("comm_type {t} ({n}) is not run (as in ASTRA-sim); supported: ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, BROADCAST")),
        None => Err(format!("comm_type {t} is not a CollectiveCommType of the schema")),
    }
}

/// What node `n` of rank `rank` (of `ranks`) does, or why it cannot run.
fn kind_of(n: &Node, rank: usize, ranks: usize) -> Result<Kind, String> {
    let replay = || Time::from_ns(n.duration_micros.saturating_mul(1000).max(1));
    Ok(match n.r#type {
        node_type::COMP | node_type::MEM_LOAD | node_type::MEM_STORE => Kind::Delay(replay()),
        node_type::METADATA | node_type::INVALID => Kind::Pass,
        node_type::COMM_SEND => {
            if let Some(src) = rank_attr(n, "comm_src", ranks)?.filter(|&s| s != rank) {
                return Err(format!("comm_src is rank {src}, but a send is issued by its sender, rank {rank}"));
            }
            let dst = rank_attr(n, "comm_dst", ranks)?.ok_or("comm_dst: required for a COMM_SEND_NODE")?;
            if dst == rank {
                return Err(format!("comm_dst is rank {rank} itself; a message needs two ranks"));
            }
            Kind::Send { dst, bytes: size_attr(n)?, tag: int(n, "comm_tag")?.unwrap_or(0) }
        }
        node_type::COMM_RECV => {
            if let Some(dst) = rank_attr(n, "comm_dst", ranks)?.filter(|&d| d != rank) {
                return Err(format!("comm_dst is rank {dst}, but a receive is issued by its receiver, rank {rank}"));
            }
            let src = rank_attr(n, "comm_src", ranks)?.ok_or("comm_src: required for a COMM_RECV_NODE")?;
            Kind::Recv { src, tag: int(n, "comm_tag")?.unwrap_or(0) }
        }
        node_type::COMM_COLL => {
            let op = op_of(int(n, "comm_type")?.ok_or("comm_type: required for a COMM_COLL_NODE")?)?;
            let group = match n.attr("pg_name") {
                None => String::new(),
                Some(a) => a.text().ok_or("pg_name: expected a string attribute")?.to_string(),
            };
            let group = if group == "0" { String::new() } else { group };
            Kind::Coll { op, bytes: size_attr(n)?, group }
        }
        t => return Err(format!("node type {t} is not a NodeType of the schema")),
    })
}

/// Rank `rank`'s nodes as run, or the id of the node that cannot run and why.
pub fn rank_nodes(nodes: &[Node], rank: usize, ranks: usize) -> Result<Vec<RankNode>, (u64, String)> {
    let mut index: HashMap<u64, usize> = HashMap::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        if index.insert(n.id, i).is_some() {
            return Err((n.id, "the id is used by another node of the file too".into()));
        }
    }
    let mut out = Vec::with_capacity(nodes.len());
    for n in nodes {
        let known = (node_type::INVALID..=node_type::COMM_COLL).contains(&n.r#type);
        let kind =
            kind_of(n, rank, ranks).map_err(|e| (n.id, if known { format!("{}: {e}", n.type_name()) } else { e }))?;
        let mut deps = Vec::with_capacity(n.data_deps.len() + n.ctrl_deps.len());
        for (list, ids) in [("data_deps", &n.data_deps), ("ctrl_deps", &n.ctrl_deps)] {
            for id in ids {
                let d = *index
                    .get(id)
                    .ok_or_else(|| (n.id, format!("{list} names node {id}, which the file does not have")))?;
                deps.push(d);
            }
        }
        deps.sort_unstable();
        deps.dedup();
        out.push(RankNode { id: n.id, kind, deps });
    }
    let after: Vec<Vec<usize>> = out.iter().map(|n| n.deps.clone()).collect();
    if let Some(circle) = crate::flow::waits::find_circle(&after) {
        let chain: Vec<String> = circle.iter().chain(circle.first()).map(|&i| format!("node {}", out[i].id)).collect();
        return Err((
            out[circle[0]].id,
            format!("nodes wait for one another in a circle: {}", chain.join(" waits for ")),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::schema::{AttributeProto, Value};
    use super::*;

    fn attr(name: &str, v: Value) -> AttributeProto {
        AttributeProto { name: name.into(), doc_string: String::new(), value: Some(v) }
    }

    #[test]
    fn nodes_map_as_astra_sim_runs_them_and_bad_ones_name_themselves() {
        let comp = Node { id: 7, r#type: node_type::COMP, duration_micros: 0, ..Node::default() };
        let send = Node {
            id: 8,
            r#type: node_type::COMM_SEND,
            data_deps: vec![7],
            attr: vec![
                attr("comm_dst", Value::Int32Val(2)),
                attr("comm_size", Value::Uint64Val(64)),
                attr("comm_tag", Value::Int32Val(5)),
            ],
            ..Node::default()
        };
        let nodes = rank_nodes(&[comp.clone(), send.clone()], 0, 4).unwrap();
        assert_eq!(nodes[0].kind, Kind::Delay(Time::from_ns(1)), "a zero runtime takes 1 ns, as in ASTRA-sim");
        assert_eq!(nodes[1], RankNode { id: 8, kind: Kind::Send { dst: 2, bytes: 64, tag: 5 }, deps: vec![0] });
        let mut far = send.clone();
        far.attr[0] = attr("comm_dst", Value::Int64Val(4));
        assert_eq!(
            rank_nodes(&[far], 0, 4).unwrap_err(),
            (8, "COMM_SEND_NODE: comm_dst is rank 4, but the trace has ranks 0 to 3".into())
        );
        let mut lost = send.clone();
        lost.ctrl_deps = vec![99];
        assert_eq!(
            rank_nodes(&[comp.clone(), lost], 0, 4).unwrap_err(),
            (8, "ctrl_deps names node 99, which the file does not have".into())
        );
        let coll = Node {
            id: 3,
            r#type: node_type::COMM_COLL,
            attr: vec![attr("comm_type", Value::Int64Val(9)), attr("comm_size", Value::Int64Val(8))],
            ..Node::default()
        };
        let err = rank_nodes(&[coll], 0, 4).unwrap_err();
        assert_eq!(err.0, 3);
        assert!(err.1.starts_with("COMM_COLL_NODE: comm_type 9 (BARRIER) is not run"), "{}", err.1);
        let odd = Node { id: 1, r#type: 12, ..Node::default() };
        assert_eq!(rank_nodes(&[odd], 0, 4).unwrap_err(), (1, "node type 12 is not a NodeType of the schema".into()));
        let (mut a, mut b) = (comp.clone(), comp);
        b.id = 9;
        a.ctrl_deps = vec![9];
        b.data_deps = vec![7];
        assert_eq!(
            rank_nodes(&[a, b], 0, 4).unwrap_err(),
            (7, "nodes wait for one another in a circle: node 7 waits for node 9 waits for node 7".into())
        );
    }
}
