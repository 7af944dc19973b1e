//! `summary.json`: run-wide and per-class figures.

use super::percentiles::Stats;
use crate::world::World;
use serde::Serialize;
use std::collections::BTreeMap;

/// Flow counts.
#[derive(Clone, Debug, Serialize)]
pub struct FlowCounts {
    /// Flows in the scenario.
    pub total: u64,
    /// Flows whose every byte was acknowledged.
    pub completed: u64,
}

/// Figures for one traffic class.
#[derive(Clone, Debug, Serialize)]
pub struct ClassSummary {
    /// The class's algorithm.
    pub cc: String,
    /// Flow counts.
    pub flows: FlowCounts,
    /// Flow completion time of completed flows, ns.
    pub fct_ns: Stats,
    /// FCT over ideal FCT of completed flows.
    pub slowdown: Stats,
    /// Bytes delivered to the class's receivers x 8 / simulated time.
    pub goodput_bps: f64,
}

/// Drops by reason.
#[derive(Clone, Debug, Serialize)]
pub struct DropCounts {
    /// Full buffer.
    pub buffer: u64,
    /// Random link loss.
    pub link_loss: u64,
    /// TTL expiry.
    pub ttl: u64,
}

/// Everything `summary.json` holds, in its order.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// Seed of the run.
    pub seed: u64,
    /// Simulated time at the end of the run, ns.
    pub sim_time_ns: f64,
    /// Wall-clock seconds the run took.
    pub wall_s: f64,
    /// Events processed.
    pub events: u64,
    /// Events per wall-clock second.
    pub events_per_s: f64,
    /// Flow counts.
    pub flows: FlowCounts,
    /// FCT of completed flows, ns.
    pub fct_ns: Stats,
    /// Slowdown of completed flows.
    pub slowdown: Stats,
    /// Per-class figures by class name.
    pub classes: BTreeMap<String, ClassSummary>,
    /// Packets dropped.
    pub drops: u64,
    /// Drops by reason.
    pub drops_by_reason: DropCounts,
    /// CE marks set by switches.
    pub ecn_marks: u64,
    /// RTO expiries.
    pub timeouts: u64,
    /// Segments retransmitted.
    pub retransmits: u64,
    /// PFC pause frames (sluice models lossy Ethernet: always 0).
    pub pfc_pauses: u64,
    /// Packets hosts put on the wire.
    pub packets_sent: u64,
    /// Data segments sent.
    pub data_packets: u64,
}

/// Computes the summary of a finished run.
pub fn summarize(world: &World, wall_s: f64) -> Summary {
    let sim_s = world.now().secs_f64();
    let stats_of = |pred: &dyn Fn(u16) -> bool| {
        let mut fct = Vec::new();
        let mut sd = Vec::new();
        let (mut total, mut delivered) = (0u64, 0u64);
        for f in world.flows().iter().filter(|f| pred(f.class)) {
            total += 1;
            delivered += f.receiver.delivered;
            if let Some(end) = f.finish {
                let t = (end - f.start).0 as f64;
                fct.push(t / 1e3);
                sd.push((t / f.ideal_fct.0.max(1) as f64).max(1.0));
            }
        }
        let completed = fct.len() as u64;
        (FlowCounts { total, completed }, Stats::of(&mut fct), Stats::of(&mut sd), delivered)
    };
    let (flows, fct_ns, slowdown, _) = stats_of(&|_| true);
    let mut classes = BTreeMap::new();
    for (i, c) in world.classes().iter().enumerate() {
        let (flows, fct_ns, slowdown, delivered) = stats_of(&|k| k as usize == i);
        let goodput_bps = if sim_s > 0.0 { delivered as f64 * 8.0 / sim_s } else { 0.0 };
        classes.insert(c.name.clone(), ClassSummary { cc: c.cc.clone(), flows, fct_ns, slowdown, goodput_bps });
    }
    let c = world.counters();
    let retransmits = world.flows().iter().map(|f| f.sender.retransmits).sum();
    let timeouts = world.flows().iter().map(|f| f.sender.timeouts.len() as u64).sum();
    Summary {
        seed: world.seed(),
        sim_time_ns: world.now().0 as f64 / 1e3,
        wall_s,
        events: world.events(),
        events_per_s: if wall_s > 0.0 { world.events() as f64 / wall_s } else { 0.0 },
        flows,
        fct_ns,
        slowdown,
        classes,
        drops: c.drops(),
        drops_by_reason: DropCounts { buffer: c.drops_buffer, link_loss: c.drops_link_loss, ttl: c.drops_ttl },
        ecn_marks: c.ecn_marks,
        timeouts,
        retransmits,
        pfc_pauses: 0,
        packets_sent: c.packets_sent,
        data_packets: c.data_packets,
    }
}
