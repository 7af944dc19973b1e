//! Every rank's nodes turned into flows that wait for flows. A node's finish is "the latest of
//! these flows' done times, each plus the compute after it" (a [`Reach`]), so compute between
//! two messages becomes a delay on the wait of the second ([`Wait::delays`]), and a node that
//! waits only for compute from the trace's start becomes a start time.
//!
//! Matching across ranks, as ASTRA-sim's system layer matches them by issue order:
//! - the k-th `COMM_COLL_NODE` of a communicator group on each of its ranks (by node id) is one
//!   collective; they must agree on op and size. It runs as `collective/` expands it, and each
//!   rank's messages also wait for that rank's own node to be reached: a rank cannot forward
//!   what it has not started.
//! - the k-th send from rank a to rank b with a tag (by node id) is the message the k-th receive
//!   at b from a with that tag receives. A receive is done once its message has arrived and its
//!   own dependencies are; a send with no receive still runs (ASTRA-sim does not hold it).
//!
//! Every wait is on a flow its waiting rank sends or receives, so a trace runs on any number of
//! threads with the same bytes.

use super::node::{Kind, RankNode};
use crate::flow::waits::{find_circle, Wait};
use crate::time::Time;
use crate::workload::collective::{Algorithm, Collective, CollectiveRun, Message, Op};
use crate::workload::FlowSpec;
use std::collections::{BTreeMap, HashMap};

/// A node that cannot run: its rank, its id and why.
pub type NodeError = (usize, u64, String);

/// When a node is done: the latest of `base` (from the trace's start) and each flow's done
/// time plus its delay.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reach {
    /// Time from the trace's start, if some path from its start reaches the node by compute only.
    pub base: Option<Time>,
    /// Flows (by index) and the delay after each.
    pub after: Vec<(usize, Time)>,
}

impl Reach {
    /// The trace's start.
    fn start() -> Reach {
        Reach { base: Some(Time::ZERO), after: Vec::new() }
    }

    /// The latest of both.
    fn merge(&mut self, other: &Reach) {
        self.base = self.base.max(other.base);
        self.after.extend_from_slice(&other.after);
    }

    /// Each flow once, with its longest delay, in flow order.
    fn tidy(&mut self) {
        self.after.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        self.after.dedup_by_key(|a| a.0);
    }

    /// `d` later.
    fn later(&self, d: Time) -> Reach {
        Reach { base: self.base.map(|b| b + d), after: self.after.iter().map(|&(f, t)| (f, t + d)).collect() }
    }
}

/// What the trace asks of the network and the run.
pub struct Plan<'a> {
    /// Each rank's nodes.
    pub ranks: &'a [Vec<RankNode>],
    /// Each rank's host.
    pub hosts: &'a [usize],
    /// Communicator groups by name: their ranks.
    pub groups: &'a BTreeMap<String, Vec<usize>>,
    /// The algorithm asked for, where an op runs as it.
    pub algorithm: Option<Algorithm>,
    /// When the trace starts.
    pub start: Time,
    /// The workload's key, for the collectives' records.
    pub key: &'a str,
}

/// One collective: its ranks' nodes, its schedule and its first flow.
struct Instance {
    op: Op,
    algorithm: Algorithm,
    bytes: u64,
    /// Ranks of the group, in group order.
    members: Vec<usize>,
    /// Each member's node (index in its rank's list).
    nodes: Vec<usize>,
    schedule: Vec<Message>,
    /// Its k among its group's collectives.
    seq: u32,
    /// Its first flow.
    base: usize,
}

/// The trace as flows.
#[derive(Debug, Default)]
pub struct Expanded {
    /// The messages.
    pub flows: Vec<FlowSpec>,
    /// What each waits for.
    pub waits: Vec<Option<Wait>>,
    /// Each collective, as `collectives.csv` reports it.
    pub runs: Vec<CollectiveRun>,
    /// When each rank is done: the reach of its last nodes.
    pub ends: Vec<Reach>,
    /// The rank and node id each flow comes from.
    pub owners: Vec<(usize, u64)>,
}

/// The ranks of group `g`, or why there are none.
fn members(p: &Plan, g: &str) -> Option<Vec<usize>> {
    if g.is_empty() {
        return Some((0..p.ranks.len()).collect());
    }
    p.groups.get(g).cloned()
}

/// A rank's node indices in id order: the order ASTRA-sim issues ready nodes in.
fn by_id(nodes: &[RankNode]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by_key(|&i| nodes[i].id);
    order
}

/// The collectives, matched across ranks, with their schedules.
fn instances(p: &Plan) -> Result<Vec<Instance>, NodeError> {
    // Each group's collective nodes, per rank, in id order.
    let mut seqs: BTreeMap<String, BTreeMap<usize, Vec<usize>>> = BTreeMap::new();
    for (r, nodes) in p.ranks.iter().enumerate() {
        for i in by_id(nodes) {
            let Kind::Coll { group, .. } = &nodes[i].kind else { continue };
            let m = members(p, group).ok_or_else(|| {
                (r, nodes[i].id, format!("pg_name \"{group}\" names no communicator group; define it in comm_groups (ASTRA-sim's comm group file)"))
            })?;
            if !m.contains(&r) {
                return Err((r, nodes[i].id, format!("communicator group \"{group}\" has ranks {m:?}, not rank {r}")));
            }
            seqs.entry(group.clone()).or_default().entry(r).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    for (g, per_rank) in &seqs {
        let m = members(p, g).expect("checked above");
        let count = |r: usize| per_rank.get(&r).map_or(0, Vec::len);
        let most = m.iter().copied().max_by_key(|&r| (count(r), std::cmp::Reverse(r))).expect("a group has ranks");
        if let Some(&short) = m.iter().find(|&&r| count(r) < count(most)) {
            let k = count(short);
            let id = p.ranks[most][per_rank[&most][k]].id;
            let name = if g.is_empty() { "every rank".to_string() } else { format!("group \"{g}\"") };
            return Err((
                most,
                id,
                format!("collective {k} of {name} has no partner on rank {short}, which has {k} collectives there"),
            ));
        }
        for k in 0..count(most) {
            out.push(instance(p, &m, per_rank, k)?);
        }
    }
    Ok(out)
}

/// Collective `k` of a group with ranks `m`, each rank's collective nodes `per_rank`.
fn instance(p: &Plan, m: &[usize], per_rank: &BTreeMap<usize, Vec<usize>>, k: usize) -> Result<Instance, NodeError> {
    let nodes: Vec<usize> = m.iter().map(|r| per_rank[r][k]).collect();
    let node = |j: usize| &p.ranks[m[j]][nodes[j]];
    let (op, bytes) = match &node(0).kind {
        Kind::Coll { op, bytes, .. } => (*op, *bytes),
        _ => unreachable!("only collective nodes are listed"),
    };
    for j in 1..m.len() {
        if let Kind::Coll { op: o, bytes: b, .. } = &node(j).kind {
            if (*o, *b) != (op, bytes) {
                let first = format!("rank {}'s node {} is {} of {bytes} bytes", m[0], node(0).id, op.name());
                return Err((m[j], node(j).id, format!("{} of {b} bytes, but it is matched with {first}", o.name())));
            }
        }
    }
    let algorithm = match p.algorithm {
        Some(a) if op.algorithms().contains(&a) => a,
        _ => op.algorithms()[0],
    };
    let at = (m[0], node(0).id);
    let mut schedule = Vec::new();
    if m.len() > 1 {
        if algorithm == Algorithm::HalvingDoubling && !m.len().is_power_of_two() {
            return Err((
                at.0,
                at.1,
                format!("halving_doubling needs a power-of-two number of ranks; this collective has {}", m.len()),
            ));
        }
        let c = Collective {
            op,
            algorithm,
            ranks: m.to_vec(),
            size: bytes,
            chunks: 1,
            iterations: 1,
            compute: Time::ZERO,
            root: 0,
            start: p.start,
        };
        schedule = c.schedule(bytes);
        if schedule.iter().any(|x| x.bytes == 0) {
            let why = format!(
                "comm_size {bytes} leaves some of the {} messages of {} over {} ranks empty",
                schedule.len(),
                c.describe(),
                m.len()
            );
            return Err((at.0, at.1, why));
        }
    }
    Ok(Instance { op, algorithm, bytes, members: m.to_vec(), nodes, schedule, seq: k as u32, base: 0 })
}

/// The flow of each send and receive node, by (rank, node index).
struct Messages {
    of_node: HashMap<(usize, usize), usize>,
}

/// Makes a flow for each send, after the collectives' flows, and matches each receive to one.
fn messages(p: &Plan, out: &mut Expanded) -> Result<Messages, NodeError> {
    let mut of_node = HashMap::new();
    // Each (src, dst, tag)'s sends in id order, then their receives take them in id order.
    let mut sends: HashMap<(usize, usize, i128), std::collections::VecDeque<usize>> = HashMap::new();
    for (r, nodes) in p.ranks.iter().enumerate() {
        for i in by_id(nodes) {
            if let Kind::Send { dst, bytes, tag } = nodes[i].kind {
                let f = out.flows.len();
                out.flows.push(FlowSpec {
                    src: p.hosts[r],
                    dst: p.hosts[dst],
                    size: Some(bytes),
                    start: p.start,
                    ..FlowSpec::default()
                });
                out.owners.push((r, nodes[i].id));
                of_node.insert((r, i), f);
                sends.entry((r, dst, tag)).or_default().push_back(f);
            }
        }
    }
    for (r, nodes) in p.ranks.iter().enumerate() {
        for i in by_id(nodes) {
            if let Kind::Recv { src, tag } = nodes[i].kind {
                let f = sends.get_mut(&(src, r, tag)).and_then(|q| q.pop_front()).ok_or_else(|| {
                    let why = format!(
                        "COMM_RECV_NODE: a receive from rank {src} with comm_tag {tag} that no send of rank {src} matches (each send to rank {r} with that tag is matched to an earlier receive, or there is none); it would wait forever"
                    );
                    (r, nodes[i].id, why)
                })?;
                of_node.insert((r, i), f);
            }
        }
    }
    Ok(Messages { of_node })
}

/// A rank's nodes in an order where each comes after what it waits for (the lowest index first
/// among those ready).
fn topological(nodes: &[RankNode]) -> Vec<usize> {
    let mut left: Vec<usize> = nodes.iter().map(|n| n.deps.len()).collect();
    let mut heard: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &d in &n.deps {
            heard[d].push(i);
        }
    }
    let mut ready: std::collections::BTreeSet<usize> = (0..nodes.len()).filter(|&i| left[i] == 0).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &w in &heard[i] {
            left[w] -= 1;
            if left[w] == 0 {
                ready.insert(w);
            }
        }
    }
    order
}

/// The flows of `inst` that member `j` is done with last: those it sends (acknowledged) and
/// those it receives that none of its own sends wait for (arrived).
fn done_of(inst: &Instance, j: usize) -> Vec<(usize, Time)> {
    let mut waited = vec![false; inst.schedule.len()];
    for m in &inst.schedule {
        for &a in &m.after {
            waited[a] = true;
        }
    }
    let mut out = Vec::new();
    for (k, m) in inst.schedule.iter().enumerate() {
        if m.from == j || (m.to == j && !waited[k]) {
            out.push((inst.base + k, Time::ZERO));
        }
    }
    out
}

/// Sets flow `f`'s wait to `reach` plus `extra` flows.
fn set_wait(out: &mut Expanded, f: usize, reach: &Reach, extra: &[usize], start: Time) {
    let mut r = reach.clone();
    r.after.extend(extra.iter().map(|&a| (a, Time::ZERO)));
    r.tidy();
    out.flows[f].start = start + r.base.unwrap_or(Time::ZERO);
    if !r.after.is_empty() {
        let (after, delays): (Vec<usize>, Vec<Time>) = r.after.into_iter().unzip();
        let delays = if delays.iter().all(|&d| d == Time::ZERO) { Vec::new() } else { delays };
        out.waits[f] = Some(Wait { after, compute: Time::ZERO, delays });
    }
}

/// Walks rank `r`'s nodes in order, setting the waits of the flows it sends; returns its end.
fn walk(
    p: &Plan,
    r: usize,
    insts: &[Instance],
    coll_of: &HashMap<(usize, usize), (usize, usize)>,
    msgs: &Messages,
    out: &mut Expanded,
) -> Reach {
    let nodes = &p.ranks[r];
    let mut reach: Vec<Reach> = vec![Reach::default(); nodes.len()];
    let mut waited = vec![false; nodes.len()];
    for i in topological(nodes) {
        let mut s = if nodes[i].deps.is_empty() { Reach::start() } else { Reach::default() };
        for &d in &nodes[i].deps {
            s.merge(&reach[d]);
            waited[d] = true;
        }
        s.tidy();
        reach[i] = match &nodes[i].kind {
            Kind::Delay(d) => s.later(*d),
            Kind::Pass => s,
            Kind::Send { .. } => {
                let f = msgs.of_node[&(r, i)];
                set_wait(out, f, &s, &[], p.start);
                Reach { base: None, after: vec![(f, Time::ZERO)] }
            }
            Kind::Recv { .. } => {
                let mut done = s;
                done.after.push((msgs.of_node[&(r, i)], Time::ZERO));
                done
            }
            Kind::Coll { .. } => {
                let (k, j) = coll_of[&(r, i)];
                let inst = &insts[k];
                for (m, msg) in inst.schedule.iter().enumerate().filter(|(_, m)| m.from == j) {
                    let extra: Vec<usize> = msg.after.iter().map(|&a| inst.base + a).collect();
                    set_wait(out, inst.base + m, &s, &extra, p.start);
                }
                let mut done = s;
                done.after.extend(done_of(inst, j));
                done
            }
        };
        reach[i].tidy();
    }
    // The rank is done once the nodes nothing waits for are.
    let mut end = Reach::default();
    for (r, _) in reach.iter().zip(&waited).filter(|(_, w)| !**w) {
        end.merge(r);
    }
    end.tidy();
    end
}

/// The trace's flows, waits and records, or the node that cannot run.
pub fn expand(p: &Plan) -> Result<Expanded, NodeError> {
    let mut out = Expanded::default();
    let mut insts = instances(p)?;
    let mut coll_of = HashMap::new();
    for (k, inst) in insts.iter_mut().enumerate() {
        inst.base = out.flows.len();
        for (j, &r) in inst.members.iter().enumerate() {
            coll_of.insert((r, inst.nodes[j]), (k, j));
        }
        for msg in &inst.schedule {
            let (from, to) = (inst.members[msg.from], inst.members[msg.to]);
            out.flows.push(FlowSpec {
                src: p.hosts[from],
                dst: p.hosts[to],
                size: Some(msg.bytes),
                start: p.start,
                ..FlowSpec::default()
            });
            out.owners.push((from, p.ranks[from][inst.nodes[msg.from]].id));
        }
        if !inst.schedule.is_empty() {
            out.runs.push(CollectiveRun {
                workload: p.key.to_string(),
                op: inst.op,
                algorithm: inst.algorithm,
                ranks: inst.members.len(),
                size: inst.bytes,
                chunks: 1,
                iteration: inst.seq,
                flows: (inst.base..inst.base + inst.schedule.len()).collect(),
            });
        }
    }
    let msgs = messages(p, &mut out)?;
    out.waits = vec![None; out.flows.len()];
    for r in 0..p.ranks.len() {
        let end = walk(p, r, &insts, &coll_of, &msgs, &mut out);
        out.ends.push(end);
    }
    let after: Vec<Vec<usize>> = out.waits.iter().map(|w| w.as_ref().map_or(Vec::new(), |w| w.after.clone())).collect();
    if let Some(circle) = find_circle(&after) {
        let name = |f: usize| format!("rank {} node {}", out.owners[f].0, out.owners[f].1);
        let chain: Vec<String> = circle.iter().chain(circle.first()).map(|&f| name(f)).collect();
        let (r, id) = out.owners[circle[0]];
        return Err((
            r,
            id,
            format!(
                "its messages wait for one another across ranks in a circle, so none can start: {}",
                chain.join(" waits for ")
            ),
        ));
    }
    if out.waits.iter().all(Option::is_none) {
        out.waits.clear();
    }
    Ok(out)
}
