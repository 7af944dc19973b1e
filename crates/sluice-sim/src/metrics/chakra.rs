//! What a Chakra trace reports: the summary's `chakra` section (per workload: its ranks, its
//! nodes by kind, its messages, and when its ranks were done) and the headline's line. A rank is
//! done once its last nodes are, as ASTRA-sim's `Workload::report` prints each `sys[i] finished`:
//! the latest of each message it waited on (the ones it sent acknowledged, the ones it received
//! arrived) plus the compute after it.

use crate::time::Time;
use crate::workload::chakra::{ChakraRun, NodeCounts};
use crate::world::World;
use serde::Serialize;

/// One Chakra workload's figures.
#[derive(Clone, Debug, Serialize)]
pub struct ChakraFigures {
    /// The workload's key.
    pub workload: String,
    /// The trace, as `<file>.<rank>.et` names its files.
    pub file: String,
    /// Ranks.
    pub ranks: usize,
    /// Nodes by kind, over every rank.
    pub nodes: NodeCounts,
    /// Collectives, each over its group's ranks (rows of `collectives.csv`).
    pub collectives: u64,
    /// Messages (flows), the collectives' included.
    pub messages: u64,
    /// Ranks that were done.
    pub ranks_done: u64,
    /// From the trace's start to the first rank done, ns (`null` when none was).
    pub first_rank_ns: Option<f64>,
    /// From the trace's start to the last rank done, ns: the trace's time (`null` unless every
    /// rank was done).
    pub time_ns: Option<f64>,
}

/// Each rank's end of `run`, `None` for a rank not done.
pub fn rank_ends(world: &World, run: &ChakraRun) -> Vec<Option<Time>> {
    let flows = world.flows();
    let done = |f: usize, host: usize| {
        let flow = &flows[f];
        if flow.src.index() == host {
            flow.finish
        } else {
            flow.rx_done
        }
    };
    (0..run.hosts.len()).map(|r| run.rank_end(r, &done)).collect()
}

/// The figures of `run`.
fn figures(world: &World, run: &ChakraRun) -> ChakraFigures {
    let ends = rank_ends(world, run);
    let done: Vec<Time> = ends.iter().flatten().copied().collect();
    let ns = |t: Time| (t - run.start).0 as f64 / 1e3;
    let collectives = world.collectives().iter().filter(|c| c.workload == run.workload);
    // Each send is one message; the collectives' messages are theirs.
    let messages = run.nodes.send + collectives.clone().map(|c| c.flows.len() as u64).sum::<u64>();
    ChakraFigures {
        workload: run.workload.clone(),
        file: run.file.clone(),
        ranks: run.hosts.len(),
        nodes: run.nodes.clone(),
        collectives: collectives.count() as u64,
        messages,
        ranks_done: done.len() as u64,
        first_rank_ns: done.iter().min().map(|&t| ns(t)),
        time_ns: (done.len() == ends.len()).then(|| done.iter().max().map(|&t| ns(t))).flatten(),
    }
}

/// The summary's `chakra` section, when the run has Chakra traces.
pub fn summarize(world: &World) -> Option<Vec<ChakraFigures>> {
    let runs = world.chakra_runs();
    (!runs.is_empty()).then(|| runs.iter().map(|r| figures(world, r)).collect())
}
