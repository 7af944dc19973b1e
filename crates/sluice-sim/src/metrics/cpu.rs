//! Host CPU and NIC offload figures: `cpu.csv` (each modelled core's cycles by operation) and the
//! `cpu` and `offload` sections of summary.json.

use super::csv_writer;
use crate::host::cpu::{Cycles, Op};
use crate::host::offload::OffloadCounts;
use crate::world::World;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{self, Write};

/// The `cpu` section of summary.json, over every modelled core.
#[derive(Clone, Debug, Serialize)]
pub struct CpuSummary {
    /// Cores modelled, over all modelled hosts.
    pub cores: u64,
    /// Busy cycles over the cycles the cores had in the run, averaged over the cores.
    pub utilization: f64,
    /// The busiest core's.
    pub max_utilization: f64,
    /// Of all busy cycles, the fraction each operation took.
    pub breakdown: BTreeMap<&'static str, f64>,
    /// Busy cycles per completed request, when the run had closed-loop requests.
    pub cycles_per_request: Option<f64>,
}

/// Each modelled core: (host, core, its cycles).
fn cores(world: &World) -> Vec<(usize, usize, Cycles, f64)> {
    let mut out = Vec::new();
    for (h, cpu) in world.cpus().iter().enumerate() {
        if let Some(cpu) = cpu {
            for (i, c) in cpu.breakdown().enumerate() {
                out.push((h, i, *c, cpu.ghz()));
            }
        }
    }
    out
}

/// The CPU figures, when some host's CPU is modelled.
pub fn summarize(world: &World) -> Option<CpuSummary> {
    let cores = cores(world);
    if cores.is_empty() {
        return None;
    }
    let sim_ns = world.now().0 as f64 / 1e3;
    let util = |c: &Cycles, ghz: f64| if sim_ns > 0.0 { (c.total() as f64 / (ghz * sim_ns)).min(1.0) } else { 0.0 };
    let utils: Vec<f64> = cores.iter().map(|(_, _, c, g)| util(c, *g)).collect();
    let mut sum = Cycles::default();
    for (_, _, c, _) in &cores {
        for (i, n) in c.0.iter().enumerate() {
            sum.0[i] += n;
        }
    }
    let total = sum.total() as f64;
    let breakdown = Op::ALL
        .iter()
        .map(|&op| (op.name(), if total > 0.0 { sum.0[op as usize] as f64 / total } else { 0.0 }))
        .collect();
    let requests = world.requests().len();
    Some(CpuSummary {
        cores: cores.len() as u64,
        utilization: utils.iter().sum::<f64>() / utils.len() as f64,
        max_utilization: utils.iter().copied().fold(0.0, f64::max),
        breakdown,
        cycles_per_request: (requests > 0).then(|| total / requests as f64),
    })
}

/// The NIC offload counts summed over hosts, when some NIC offloads.
pub fn offload_counts(world: &World) -> Option<OffloadCounts> {
    let mut any = false;
    let mut sum = OffloadCounts::default();
    for o in world.offloads().iter().flatten() {
        any = true;
        let c = o.counts;
        sum.syn_cookies += c.syn_cookies;
        sum.verified += c.verified;
        sum.bad_cookies += c.bad_cookies;
        sum.teardowns += c.teardowns;
        sum.fin_retransmits += c.fin_retransmits;
        sum.fallbacks += c.fallbacks;
        sum.table_peak = sum.table_peak.max(c.table_peak);
        sum.spliced += c.spliced;
        sum.relayed += c.relayed;
        sum.splice_refused += c.splice_refused;
    }
    any.then_some(sum)
}

/// Writes `cpu.csv` (`host,core,op,cycles`): each modelled core's cycles by operation.
pub fn write_cpu_csv(world: &World, out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(["host", "core", "op", "cycles"])?;
    for (h, i, c, _) in cores(world) {
        for op in Op::ALL {
            w.write_record([h.to_string(), i.to_string(), op.name().to_string(), c.0[op as usize].to_string()])?;
        }
    }
    w.flush()
}
