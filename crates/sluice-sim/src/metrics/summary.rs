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
    /// Request/response (or incast round) counts, when the class has closed-loop traffic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestCounts>,
    /// Request latency, ns: issue to the last response byte at the client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_latency_ns: Option<Stats>,
}

/// Completed requests and their rate.
#[derive(Clone, Debug, Serialize)]
pub struct RequestCounts {
    /// Requests whose response fully arrived.
    pub completed: u64,
    /// Completed requests per second of simulated time from the first request issued to the last
    /// completed.
    pub per_s: f64,
}

/// Link utilization over the run across switch ports that carried traffic.
#[derive(Clone, Debug, Serialize)]
pub struct Utilization {
    /// Mean over those ports.
    pub mean: f64,
    /// The busiest port's.
    pub max: f64,
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
    /// Non-ECT packets dropped at the ECN marking threshold.
    pub ecn_unable: u64,
    /// Unimportant packets dropped at TLT's colour threshold.
    pub colour: u64,
}

/// TLT over the run: what senders marked and what switches dropped for colour.
#[derive(Clone, Debug, Serialize)]
pub struct TltSummary {
    /// Counts summed over flows.
    #[serde(flatten)]
    pub counts: crate::transport::tcp::TltCounts,
    /// Unimportant packets dropped at a colour threshold.
    pub colour_drops: u64,
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
    /// Request/response counts, when the run has closed-loop traffic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestCounts>,
    /// Request latency, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_latency_ns: Option<Stats>,
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
    /// PFC PAUSE frames switches sent (0 without `[pfc]`).
    pub pfc_pauses: u64,
    /// Tail loss probes sent, when `transport.tlp` is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_probes: Option<u64>,
    /// TLT's counts, when the run used TLT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tlt: Option<TltSummary>,
    /// Packets hosts put on the wire.
    pub packets_sent: u64,
    /// Data segments sent.
    pub data_packets: u64,
    /// Switch port utilization (per port in `utilization.csv`).
    pub utilization: Utilization,
    /// Histograms of the TCP-INT echoes senders received, when any flow used TCP-INT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<super::telemetry::TelemetrySummary>,
    /// Flows with an application deadline: finished within it, and not (late or unfinished).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadlines: Option<DeadlineCounts>,
    /// Flows per negotiation outcome ("accepted", "fallback_peer_no_int", ...).
    pub negotiation: BTreeMap<&'static str, u64>,
    /// Packets written to `trace.pcap`, and those past `max_packets` that were not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcap: Option<PcapCounts>,
    /// The circuit network's figures, in a reconfigurable network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub circuit: Option<super::circuit::CircuitSummary>,
    /// Modelled host CPUs: utilization and the cycles' breakdown by operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<super::cpu::CpuSummary>,
    /// NIC offload counts (AccelTCP), when some NIC offloads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<crate::host::offload::OffloadCounts>,
}

/// Deadline outcomes.
#[derive(Clone, Debug, Serialize)]
pub struct DeadlineCounts {
    /// Finished within the deadline.
    pub met: u64,
    /// Finished late or not at all.
    pub missed: u64,
}

/// What the packet capture kept.
#[derive(Clone, Debug, Serialize)]
pub struct PcapCounts {
    /// Packets in `trace.pcap`.
    pub packets: u64,
    /// Packets that matched after `max_packets` was reached.
    pub not_kept: u64,
}

/// Request counts and latency of the requests `keep` selects by class index.
fn requests_of(world: &World, keep: &dyn Fn(usize) -> bool) -> (Option<RequestCounts>, Option<Stats>) {
    let reqs: Vec<_> = world.requests().iter().filter(|r| keep(r.class)).collect();
    if reqs.is_empty() {
        return (None, None);
    }
    let mut lat: Vec<f64> = reqs.iter().map(|r| (r.end - r.start).0 as f64 / 1e3).collect();
    let first = reqs.iter().map(|r| r.start).min().unwrap_or_default();
    let last = reqs.iter().map(|r| r.end).max().unwrap_or_default();
    let span = (last - first).secs_f64();
    let completed = reqs.len() as u64;
    let per_s = if span > 0.0 { completed as f64 / span } else { 0.0 };
    (Some(RequestCounts { completed, per_s }), Some(Stats::of(&mut lat)))
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
            delivered += f.bytes_delivered();
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
        let (requests, request_latency_ns) = requests_of(world, &|k| k == i);
        classes.insert(
            c.name.clone(),
            ClassSummary { cc: c.cc.clone(), flows, fct_ns, slowdown, goodput_bps, requests, request_latency_ns },
        );
    }
    let (requests, request_latency_ns) = requests_of(world, &|_| true);
    let switch_utils: Vec<f64> = world
        .ports()
        .iter()
        .filter(|p| p.tx_bytes > 0 && world.is_switch(p.node))
        .map(|p| p.utilization(world.now()))
        .collect();
    let utilization = Utilization {
        mean: if switch_utils.is_empty() { 0.0 } else { switch_utils.iter().sum::<f64>() / switch_utils.len() as f64 },
        max: switch_utils.iter().copied().fold(0.0, f64::max),
    };
    let c = world.counters();
    let retransmits = world.flows().iter().map(|f| f.retransmits()).sum();
    let timeouts = world.flows().iter().map(|f| f.timeouts().len() as u64).sum();
    Summary {
        seed: world.seed(),
        sim_time_ns: world.now().0 as f64 / 1e3,
        wall_s,
        events: world.events(),
        events_per_s: if wall_s > 0.0 { world.events() as f64 / wall_s } else { 0.0 },
        flows,
        fct_ns,
        slowdown,
        requests,
        request_latency_ns,
        classes,
        drops: c.drops(),
        drops_by_reason: DropCounts { buffer: c.drops_buffer, link_loss: c.drops_link_loss, ttl: c.drops_ttl, ecn_unable: c.drops_ecn_unable, colour: c.drops_colour },
        ecn_marks: c.ecn_marks,
        timeouts,
        retransmits,
        pfc_pauses: c.pfc_pauses,
        loss_probes: world.flows().iter().filter_map(|f| f.loss_probes()).reduce(|a, b| a + b),
        tlt: {
            let mut flows = world.flows().iter().filter_map(|f| f.tlt()).peekable();
            flows.peek().is_some().then(|| {
                let mut counts = crate::transport::tcp::TltCounts::default();
                flows.for_each(|t| counts += t);
                TltSummary { counts, colour_drops: c.drops_colour }
            })
        },
        packets_sent: c.packets_sent,
        data_packets: c.data_packets,
        utilization,
        telemetry: world.telemetry().summary(),
        deadlines: {
            let with: Vec<_> = world.flows().iter().filter_map(|f| f.deadline.map(|d| (f, d))).collect();
            let met = with.iter().filter(|(f, d)| f.finish.is_some_and(|end| end - f.start <= *d)).count() as u64;
            (!with.is_empty()).then_some(DeadlineCounts { met, missed: with.len() as u64 - met })
        },
        negotiation: crate::cc::negotiation::Negotiation::ALL
            .iter()
            .map(|n| (n.label(), world.flows().iter().filter(|f| f.negotiation() == *n).count() as u64))
            .collect(),
        pcap: world.capture().map(|c| PcapCounts { packets: c.packets.len() as u64, not_kept: c.overflow }),
        circuit: super::circuit::summarize(world),
        cpu: super::cpu::summarize(world),
        offload: super::cpu::offload_counts(world),
    }
}
