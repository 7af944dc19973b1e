//! What collectives report: `collectives.csv`, a row per collective and iteration (start, end,
//! time, algorithm and bus bandwidth), the summary's `collectives` section with the hottest
//! links, and the headline's line. Bandwidths follow NCCL's tests (`nccl-tests/doc/PERFORMANCE.md`):
//! algorithm bandwidth is the op's size over its time, bus bandwidth that times the op's factor
//! (2(n-1)/n for all-reduce, (n-1)/n for reduce-scatter, all-gather and all-to-all, 1 for
//! broadcast), both in GB/s (10^9 bytes a second).

use super::series::port_name;
use super::{csv_writer, ns};
use crate::time::Time;
use crate::workload::collective::CollectiveRun;
use crate::world::World;
use serde::Serialize;
use std::io::{self, Write};

/// The header of `collectives.csv`.
pub const COLLECTIVES_CSV_HEADER: &str =
    "workload,op,algorithm,ranks,size_bytes,chunks,iteration,start_ns,end_ns,time_ns,algbw_GBps,busbw_GBps";

/// Links the summary and the headline name as the hottest.
const HOTTEST: usize = 4;

/// When one iteration started (its first message) and ended (its last message's arrival), if it did.
pub fn span(world: &World, run: &CollectiveRun) -> (Option<Time>, Option<Time>) {
    let flows = world.flows();
    let started = run.flows.iter().map(|&f| &flows[f]).filter(|f| !f.waits_to_connect());
    let start = started.map(|f| f.start).min();
    let end = run.flows.iter().map(|&f| flows[f].rx_done).collect::<Option<Vec<Time>>>().and_then(|e| e.into_iter().max());
    (start, end)
}

/// Algorithm and bus bandwidth in GB/s of `run` taking `time`.
pub fn bandwidths(run: &CollectiveRun, time: Time) -> (f64, f64) {
    let algbw = run.size as f64 / time.secs_f64().max(f64::MIN_POSITIVE) / 1e9;
    (algbw, algbw * run.op.bus_factor(run.ranks))
}

/// Writes `collectives.csv`: one row per collective and iteration, in the scenario's order; an
/// iteration that did not finish has no end, time or bandwidths.
pub fn write_collectives_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(COLLECTIVES_CSV_HEADER.split(','))?;
    for run in world.collectives() {
        let (start, end) = span(world, run);
        let (mut time, mut algbw, mut busbw) = (String::new(), String::new(), String::new());
        if let (Some(s), Some(e)) = (start, end) {
            let (a, b) = bandwidths(run, e - s);
            (time, algbw, busbw) = (ns(e - s), format!("{a:.4}"), format!("{b:.4}"));
        }
        w.write_record([
            run.workload.clone(),
            run.op.name().to_string(),
            run.algorithm.name().to_string(),
            run.ranks.to_string(),
            run.size.to_string(),
            run.chunks.to_string(),
            run.iteration.to_string(),
            start.map(ns).unwrap_or_default(),
            end.map(ns).unwrap_or_default(),
            time,
            algbw,
            busbw,
        ])?;
    }
    w.flush()
}

/// One collective workload's iterations, summed up.
#[derive(Clone, Debug, Serialize)]
pub struct CollectiveFigures {
    /// The workload's key.
    pub workload: String,
    /// The op.
    pub op: &'static str,
    /// The algorithm.
    pub algorithm: &'static str,
    /// Ranks.
    pub ranks: usize,
    /// Bytes, as NCCL's tests count them.
    pub size_bytes: u64,
    /// Iterations asked for.
    pub iterations: u64,
    /// Iterations that finished.
    pub completed: u64,
    /// Mean time of the finished iterations, ns (`null` when none finished).
    pub mean_time_ns: Option<f64>,
    /// Algorithm bandwidth at the mean time, GB/s (named as `collectives.csv` names it).
    #[serde(rename = "algbw_GBps")]
    pub algbw: Option<f64>,
    /// Bus bandwidth at the mean time, GB/s.
    #[serde(rename = "busbw_GBps")]
    pub busbw: Option<f64>,
}

/// A link's load over the run.
#[derive(Clone, Debug, Serialize)]
pub struct LinkLoad {
    /// The port sending on it, as scenarios name it (`sw0->h3`).
    pub link: String,
    /// Bytes it sent.
    pub tx_bytes: u64,
    /// Its utilization over the run.
    pub utilization: f64,
}

/// The summary's `collectives` section.
#[derive(Clone, Debug, Serialize)]
pub struct CollectivesSummary {
    /// Each collective workload.
    pub collectives: Vec<CollectiveFigures>,
    /// The busiest links over the run, busiest first (every link's in `utilization.csv`).
    pub hottest_links: Vec<LinkLoad>,
}

/// The collectives' figures, when the run has collectives.
pub fn summarize(world: &World) -> Option<CollectivesSummary> {
    let runs = world.collectives();
    if runs.is_empty() {
        return None;
    }
    let mut collectives: Vec<CollectiveFigures> = Vec::new();
    let mut times: Vec<(&CollectiveRun, Vec<Time>)> = Vec::new();
    for run in runs {
        // A workload's collectives of one shape are summed up together: a collective workload
        // has one shape, a Chakra trace one per op, algorithm, group size and size it uses.
        let same = |c: &CollectiveFigures| {
            (c.workload.as_str(), c.op, c.algorithm, c.ranks, c.size_bytes)
                == (run.workload.as_str(), run.op.name(), run.algorithm.name(), run.ranks, run.size)
        };
        let at = match collectives.iter().position(same) {
            Some(i) => i,
            None => {
                collectives.push(CollectiveFigures {
                    workload: run.workload.clone(),
                    op: run.op.name(),
                    algorithm: run.algorithm.name(),
                    ranks: run.ranks,
                    size_bytes: run.size,
                    iterations: 0,
                    completed: 0,
                    mean_time_ns: None,
                    algbw: None,
                    busbw: None,
                });
                times.push((run, Vec::new()));
                collectives.len() - 1
            }
        };
        let c = &mut collectives[at];
        c.iterations += 1;
        if let (Some(s), Some(e)) = span(world, run) {
            c.completed += 1;
            times[at].1.push(e - s);
        }
    }
    for (c, (run, times)) in collectives.iter_mut().zip(&times) {
        if !times.is_empty() {
            let mean = Time(times.iter().map(|t| t.0).sum::<u64>() / times.len() as u64);
            let (a, b) = bandwidths(run, mean);
            (c.mean_time_ns, c.algbw, c.busbw) = (Some(mean.0 as f64 / 1e3), Some(a), Some(b));
        }
    }
    let now = world.now();
    let mut links: Vec<(usize, f64)> =
        world.ports().iter().enumerate().filter(|(_, p)| p.tx_bytes > 0).map(|(i, p)| (i, p.utilization(now))).collect();
    // Busiest first; among equals the lower port id, so the list is the same every run.
    links.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let hottest_links = links
        .iter()
        .take(HOTTEST)
        .map(|&(i, u)| LinkLoad { link: port_name(world, i as u32), tx_bytes: world.ports()[i].tx_bytes, utilization: u })
        .collect();
    Some(CollectivesSummary { collectives, hottest_links })
}
