//! `kind = "chakra"`: a training job from Chakra execution traces (mlcommons/chakra), one `.et`
//! file per rank named `<file>.<rank>.et` as ASTRA-sim names them (`Workload::Workload`). Each
//! rank runs on a host (`hosts`, in rank order; default hosts 0, 1, ...). The files are read
//! (`reader.rs`, the messages in `schema.rs`), each node is mapped as ASTRA-sim's workload layer
//! runs it (`node.rs`), and the ranks' nodes become flows that wait for flows (`expand.rs`): a
//! collective runs as `kind = "collective"` runs it (`algorithm`, default ring), a send and its
//! receive are one flow, and compute is a delay on the waits after it. Everything that would
//! stop the run is refused here, at check time, naming the file, the rank and the node.

pub mod expand;
pub mod node;
pub mod reader;
pub mod schema;

use super::collective::{Algorithm, CollectiveRun};
use super::{FlowSpec, WorkloadConfig};
use crate::flow::waits::Wait;
use crate::time::Time;
use expand::{Plan, Reach};
use std::collections::BTreeMap;
use std::path::Path;

/// How many nodes of each kind a trace has.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct NodeCounts {
    /// `COMP_NODE`s.
    pub compute: u64,
    /// `MEM_LOAD_NODE`s and `MEM_STORE_NODE`s.
    pub memory: u64,
    /// `COMM_COLL_NODE`s (one per rank taking part).
    pub collective: u64,
    /// `COMM_SEND_NODE`s.
    pub send: u64,
    /// `COMM_RECV_NODE`s.
    pub recv: u64,
    /// `METADATA_NODE`s and `INVALID_NODE`s.
    pub other: u64,
}

/// A Chakra workload as run: what the outputs report of it.
#[derive(Clone, Debug)]
pub struct ChakraRun {
    /// The workload's key ("workloads[0]").
    pub workload: String,
    /// The trace's files, as `<file>.<rank>.et` names them.
    pub file: String,
    /// Each rank's host.
    pub hosts: Vec<usize>,
    /// Its nodes by kind, over every rank.
    pub nodes: NodeCounts,
    /// When the trace starts.
    pub start: Time,
    /// When each rank is done: its last nodes' reach, by flow id once the scenario has them.
    pub ends: Vec<Reach>,
}

/// A Chakra workload, read, checked and expanded.
#[derive(Debug)]
pub struct Chakra {
    /// The messages.
    pub flows: Vec<FlowSpec>,
    /// What each waits for.
    pub waits: Vec<Option<Wait>>,
    /// The collectives.
    pub collectives: Vec<CollectiveRun>,
    /// What the outputs report.
    pub run: ChakraRun,
}

/// Rank `rank`'s file of the trace `prefix`.
fn rank_file(prefix: &Path, rank: usize) -> std::path::PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    name.push(format!(".{rank}.et"));
    name.into()
}

/// The ranks' files: `hosts` of them if given, else every one from rank 0 on, at most `hosts`
/// of the topology.
fn rank_files(
    prefix: &Path,
    listed: Option<usize>,
    topology: usize,
    key: &str,
) -> Result<Vec<std::path::PathBuf>, String> {
    let n = match listed {
        Some(n) => n,
        None => (0..).take_while(|&r| rank_file(prefix, r).is_file()).count(),
    };
    if n == 0 {
        return Err(format!("{key}.file: no trace at \"{}\" (rank 0's file)", rank_file(prefix, 0).display()));
    }
    if listed.is_none() && n > topology {
        return Err(format!(
            "{key}.file: the trace has {n} ranks ({} to .{}.et), more than the topology's {topology} hosts",
            rank_file(prefix, 0).display(),
            n - 1
        ));
    }
    if listed.is_some() && rank_file(prefix, n).is_file() {
        return Err(format!(
            "{key}.hosts: lists {n} hosts, but the trace has a file for rank {n} too (\"{}\"); give a host to every rank",
            rank_file(prefix, n).display()
        ));
    }
    let files: Vec<_> = (0..n).map(|r| rank_file(prefix, r)).collect();
    if let Some((r, f)) = files.iter().enumerate().find(|(_, f)| !f.is_file()) {
        return Err(format!(
            "{key}.file: rank {r}'s file \"{}\" does not exist; the trace needs one per rank (hosts lists {n})",
            f.display()
        ));
    }
    Ok(files)
}

/// ASTRA-sim's communicator group file (`--comm-group-configuration`): `{"1": [0, 1], ...}`.
fn read_groups(path: &Path, ranks: usize, key: &str) -> Result<BTreeMap<String, Vec<usize>>, String> {
    let at = format!("{key}.comm_groups: \"{}\"", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| format!("{at}: {e}"))?;
    let groups: BTreeMap<String, Vec<usize>> =
        serde_json::from_str(&text).map_err(|e| format!("{at}: expected {{\"<group>\": [<rank>, ..], ..}}: {e}"))?;
    for (g, members) in &groups {
        if let Some(r) = members.iter().find(|&&r| r >= ranks) {
            return Err(format!("{at}: group \"{g}\" has rank {r}, but the trace has ranks 0 to {}", ranks - 1));
        }
        let mut sorted = members.clone();
        sorted.sort_unstable();
        if members.is_empty() || sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(format!("{at}: group \"{g}\" must list its ranks, each once"));
        }
    }
    Ok(groups)
}

/// Counts `nodes` by kind.
fn count(counts: &mut NodeCounts, nodes: &[schema::Node]) {
    use schema::node_type as t;
    for n in nodes {
        match n.r#type {
            t::COMP => counts.compute += 1,
            t::MEM_LOAD | t::MEM_STORE => counts.memory += 1,
            t::COMM_COLL => counts.collective += 1,
            t::COMM_SEND => counts.send += 1,
            t::COMM_RECV => counts.recv += 1,
            _ => counts.other += 1,
        }
    }
}

impl Chakra {
    /// Reads the trace of `w` at `key` (files relative to `base`), for ranks on `hosts` (all
    /// the topology's if `None`) of a topology of `topology` hosts, starting at `start`.
    pub fn parse(
        w: &WorkloadConfig,
        key: &str,
        base: &Path,
        hosts: Option<Vec<usize>>,
        topology: usize,
        start: Time,
    ) -> Result<Chakra, String> {
        let file = w
            .file
            .as_deref()
            .ok_or_else(|| format!("{key}.file: required for kind = \"chakra\" (the path before .<rank>.et)"))?;
        let algorithm = match w.algorithm.as_deref() {
            None => None,
            Some(a) => Some(
                [Algorithm::Ring, Algorithm::HalvingDoubling, Algorithm::DoubleBinaryTree, Algorithm::Direct]
                    .into_iter()
                    .find(|x| x.name() == a)
                    .ok_or_else(|| format!("{key}.algorithm: expected \"ring\", \"halving_doubling\", \"double_binary_tree\" or \"direct\", got \"{a}\""))?,
            ),
        };
        let prefix = base.join(file);
        let files = rank_files(&prefix, hosts.as_ref().map(Vec::len), topology, key)?;
        let hosts = hosts.unwrap_or_else(|| (0..files.len()).collect());
        let n = files.len();
        let groups = match &w.comm_groups {
            Some(g) => read_groups(&base.join(g), n, key)?,
            None => BTreeMap::new(),
        };
        let mut ranks = Vec::with_capacity(n);
        let mut counts = NodeCounts::default();
        for (r, f) in files.iter().enumerate() {
            let at = format!("{key}.file: \"{}\" (rank {r})", f.display());
            let bytes = std::fs::read(f).map_err(|e| format!("{at}: {e}"))?;
            let trace = reader::read(&bytes).map_err(|e| format!("{at}: {e}"))?;
            count(&mut counts, &trace.nodes);
            ranks.push(node::rank_nodes(&trace.nodes, r, n).map_err(|(id, e)| format!("{at}, node {id}: {e}"))?);
        }
        let plan = Plan { ranks: &ranks, hosts: &hosts, groups: &groups, algorithm, start, key };
        let out = expand::expand(&plan)
            .map_err(|(r, id, e)| format!("{key}.file: \"{}\" (rank {r}), node {id}: {e}", files[r].display()))?;
        if out.flows.is_empty() {
            return Err(format!(
                "{key}.file: the trace makes no message (no send, and no collective over two or more ranks); there is nothing for the network to carry"
            ));
        }
        let run = ChakraRun {
            workload: key.to_string(),
            file: file.to_string(),
            hosts,
            nodes: counts,
            start,
            ends: out.ends,
        };
        Ok(Chakra { flows: out.flows, waits: out.waits, collectives: out.runs, run })
    }
}

impl ChakraRun {
    /// When rank `r` was done, if it was: the latest of its reach's start time and each flow's
    /// done time (`done(flow, rank's host)`) plus its delay.
    pub fn rank_end(&self, r: usize, done: &dyn Fn(usize, usize) -> Option<Time>) -> Option<Time> {
        let e = &self.ends[r];
        let mut at = e.base.map(|b| self.start + b).unwrap_or(self.start);
        for &(f, d) in &e.after {
            at = at.max(done(f, self.hosts[r])? + d);
        }
        Some(at)
    }
}
