//! `summary.json`: run-wide and per-class figures.

use super::percentiles::Stats;
use crate::cc::negotiation::Negotiation;
use crate::flow::Flow;
use crate::transport::ClientEnd;
use crate::world::World;
use serde::Serialize;
use std::collections::BTreeMap;

/// Flow counts: `total` = `completed` + `unfinished` + `not_started` + `endless` + `persistent`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FlowCounts {
    /// Flows in the scenario.
    pub total: u64,
    /// Flows whose every byte was acknowledged.
    pub completed: u64,
    /// Sized flows that started but had not finished when the run ended.
    pub unfinished: u64,
    /// Sized flows whose start the run did not reach.
    pub not_started: u64,
    /// Flows without a size, which run until the run ends.
    pub endless: u64,
    /// Persistent connections carrying an application's messages: they stay open, so have no FCT.
    pub persistent: u64,
}

/// Where a flow stands at the end of a run; each flow is exactly one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowState {
    /// Every byte acknowledged.
    Completed,
    /// Sized, started, not finished.
    Unfinished,
    /// Sized, and the run ended before its start.
    NotStarted,
    /// No size: it runs as long as the run.
    Endless,
    /// A persistent connection: messages come and go, the connection stays.
    Persistent,
}

impl FlowState {
    /// The state of flow `f` when the world's clock reads `now`.
    pub fn of(f: &Flow, now: crate::time::Time) -> FlowState {
        if f.finish.is_some() {
            FlowState::Completed
        } else if f.client.as_ref().is_some_and(ClientEnd::is_persistent) {
            FlowState::Persistent
        } else if f.size.is_none() {
            FlowState::Endless
        } else if f.waits_to_connect() || f.start > now {
            // A flow known before the run waits for its start event to be connected; one an
            // application opened may be set to start later than the run lasted.
            FlowState::NotStarted
        } else {
            FlowState::Unfinished
        }
    }
}

impl FlowCounts {
    /// Counts one flow in `state`.
    fn add(&mut self, state: FlowState) {
        self.total += 1;
        match state {
            FlowState::Completed => self.completed += 1,
            FlowState::Unfinished => self.unfinished += 1,
            FlowState::NotStarted => self.not_started += 1,
            FlowState::Endless => self.endless += 1,
            FlowState::Persistent => self.persistent += 1,
        }
    }
}

/// Whether a negotiation outcome put the flow on the class's fallback algorithm.
pub fn is_fallback(n: Negotiation) -> bool {
    !matches!(n, Negotiation::Accepted | Negotiation::NotNegotiated)
}

/// Flows of a class that negotiation moved off the class's algorithm.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Fallbacks {
    /// Flows that ran the class's fallback instead of its algorithm.
    pub flows: u64,
    /// Those flows per negotiation outcome (`fallback_path_no_ecn`, ...), every outcome listed.
    pub reasons: BTreeMap<&'static str, u64>,
    /// Those flows per algorithm they actually ran.
    pub cc: BTreeMap<&'static str, u64>,
}

impl Fallbacks {
    /// The fallbacks among `flows`.
    pub(crate) fn of<'a>(flows: impl Iterator<Item = &'a Flow>) -> Fallbacks {
        let mut fb = Fallbacks {
            reasons: Negotiation::ALL.iter().filter(|n| is_fallback(**n)).map(|n| (n.label(), 0)).collect(),
            ..Fallbacks::default()
        };
        for f in flows {
            let n = f.negotiation();
            if is_fallback(n) {
                fb.flows += 1;
                *fb.reasons.entry(n.label()).or_default() += 1;
                *fb.cc.entry(f.cc_name()).or_default() += 1;
            }
        }
        fb
    }
}

/// Figures for one traffic class.
#[derive(Clone, Debug, Serialize)]
pub struct ClassSummary {
    /// The class's algorithm.
    pub cc: String,
    /// Flows that ran another algorithm because negotiation failed: why, and what they ran.
    pub fallbacks: Fallbacks,
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
    /// Packets sent on a link that was down (in runs with `[[failures]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_down: Option<u64>,
    /// Trimmed headers dropped at a full header band (in runs where a port trims).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trim_header: Option<u64>,
}

/// Trimming over the run, where a switch port trims.
#[derive(Clone, Debug, Serialize)]
pub struct TrimSummary {
    /// Data packets a full queue cut to their headers as they arrived.
    pub trimmed: u64,
    /// Queued data packets cut to their headers to make room for an arrival (the coin).
    pub evicted: u64,
    /// Headers dropped at a full header band.
    pub header_drops: u64,
    /// Headers that reached a transport that takes none (TCP, RDMA), which discarded them.
    pub headers_discarded: u64,
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
    /// Where PFC paused and for how long, with `[pfc]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pfc: Option<PfcSummary>,
    /// Tail loss probes sent, when `transport.tlp` is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_probes: Option<u64>,
    /// TLT's counts, when the run used TLT.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tlt: Option<TltSummary>,
    /// Trimming's counts, when a switch port trims.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trimming: Option<TrimSummary>,
    /// What the Ultra Ethernet transport's ends counted, when a class runs on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uet: Option<crate::context::UetCounters>,
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
    /// Collectives' times and bandwidths, and the hottest links, when the run has collectives.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collectives: Option<super::collectives::CollectivesSummary>,
    /// Chakra traces: their ranks, nodes, messages and time, when the run has some.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chakra: Option<Vec<super::chakra::ChakraFigures>>,
    /// Flows that never started because what they wait for never arrived, each with what it
    /// still waits for (absent when none is left waiting).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Vec<WaitingFlow>>,
}

/// A flow left waiting at the end of the run, and the flows it still waits for.
#[derive(Clone, Debug, Serialize)]
pub struct WaitingFlow {
    /// The waiting flow's id.
    pub flow: u32,
    /// The flows it waits for that were not done.
    pub waits_for: Vec<u32>,
}

/// PFC over the run: who paused whom, and the longest pause.
#[derive(Clone, Debug, Serialize)]
pub struct PfcSummary {
    /// PAUSE frames sent (switches send them: the same count as `pfc_pauses`).
    pub pauses: u64,
    /// Ports that sent a PAUSE.
    pub ports_pausing: u64,
    /// Ports that were paused at least once.
    pub ports_paused: u64,
    /// Of those, host NIC ports: how far upstream the pauses spread.
    pub host_ports_paused: u64,
    /// The longest time one port's priority spent paused over the run, ns.
    pub paused_ns_max: f64,
}

/// The PFC figures, when the scenario turns PFC on.
fn pfc_summary(world: &World) -> Option<PfcSummary> {
    if !world.pfc_enabled() {
        return None;
    }
    let now = world.now();
    let mut s = PfcSummary { pauses: 0, ports_pausing: 0, ports_paused: 0, host_ports_paused: 0, paused_ns_max: 0.0 };
    for p in world.ports() {
        let prios = 0..crate::net::pfc::PRIORITIES as u8;
        let sent: u64 = prios.clone().map(|q| p.pause.sent(q)).sum();
        let received: u64 = prios.clone().map(|q| p.pause.received(q)).sum();
        s.pauses += sent;
        s.ports_pausing += u64::from(sent > 0);
        if received > 0 {
            s.ports_paused += 1;
            s.host_ports_paused += u64::from(!world.is_switch(p.node));
        }
        for q in prios {
            s.paused_ns_max = s.paused_ns_max.max(p.pause.paused_time(q, now).0 as f64 / 1e3);
        }
    }
    Some(s)
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
        let (mut counts, mut delivered) = (FlowCounts::default(), 0u64);
        for f in world.flows().iter().filter(|f| pred(f.class)) {
            counts.add(FlowState::of(f, world.now()));
            delivered += f.bytes_delivered();
            if let Some(end) = f.finish {
                let t = (end - f.start).0 as f64;
                fct.push(t / 1e3);
                sd.push((t / f.ideal_fct.0.max(1) as f64).max(1.0));
            }
        }
        (counts, Stats::of(&mut fct), Stats::of(&mut sd), delivered)
    };
    let (flows, fct_ns, slowdown, _) = stats_of(&|_| true);
    let mut classes = BTreeMap::new();
    for (i, c) in world.classes().iter().enumerate() {
        let (flows, fct_ns, slowdown, delivered) = stats_of(&|k| k as usize == i);
        let goodput_bps = if sim_s > 0.0 { delivered as f64 * 8.0 / sim_s } else { 0.0 };
        let (requests, request_latency_ns) = requests_of(world, &|k| k == i);
        let fallbacks = Fallbacks::of(world.flows().iter().filter(|f| f.class as usize == i));
        classes.insert(
            c.name.clone(),
            ClassSummary { cc: c.cc.clone(), fallbacks, flows, fct_ns, slowdown, goodput_bps, requests, request_latency_ns },
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
    let trims = world.ports().iter().any(|p| p.discipline.trim.is_some());
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
        drops_by_reason: DropCounts { buffer: c.drops_buffer, link_loss: c.drops_link_loss, ttl: c.drops_ttl, ecn_unable: c.drops_ecn_unable, colour: c.drops_colour, link_down: world.has_failures().then_some(c.drops_link_down), trim_header: trims.then_some(c.drops_trim_header) },
        ecn_marks: c.ecn_marks,
        timeouts,
        retransmits,
        pfc_pauses: c.pfc_pauses,
        pfc: pfc_summary(world),
        loss_probes: world.flows().iter().filter_map(|f| f.loss_probes()).reduce(|a, b| a + b),
        tlt: {
            let mut flows = world.flows().iter().filter_map(|f| f.tlt()).peekable();
            flows.peek().is_some().then(|| {
                let mut counts = crate::transport::tcp::TltCounts::default();
                flows.for_each(|t| counts += t);
                TltSummary { counts, colour_drops: c.drops_colour }
            })
        },
        trimming: trims.then_some(TrimSummary {
            trimmed: c.trims,
            evicted: c.trim_evictions,
            header_drops: c.drops_trim_header,
            headers_discarded: c.trim_headers_discarded,
        }),
        uet: world.classes().iter().any(|k| k.transport == crate::transport::ClassTransport::Uet).then_some(c.uet),
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
        collectives: super::collectives::summarize(world),
        chakra: super::chakra::summarize(world),
        waiting: {
            let stuck = world.waiting_flows();
            (!stuck.is_empty()).then(|| {
                stuck.into_iter().map(|(f, on)| WaitingFlow { flow: f.0, waits_for: on.iter().map(|a| a.0).collect() }).collect()
            })
        },
    }
}
