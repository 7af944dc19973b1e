//! HPCC with per-hop INT records end to end: what the records say along a path, the published
//! algorithm's figures at a 100 Gb/s bottleneck, negotiation over legacy switches, and the record
//! slab's accounting.
//!
//! The bottleneck figures come from one helper taking the algorithm's name, so the same scenario
//! measures `hptcp` (whose own assertions live in `tcp_int.rs`) for comparison.

mod common;

use common::run_text;
use sluice_sim::cc::negotiation::Negotiation;
use sluice_sim::ids::FlowId;
use sluice_sim::cc::{AckSignals, CongestionControl, CongestionEvent, EcnMode, HopStack, Window};
use sluice_sim::scenario;
use sluice_sim::time::{Rate, Time};
use sluice_sim::world::World;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Wire bytes of a full HPCC data frame: the 42-byte INT header comes out of the MSS, so the
/// frame stays at the MTU's 1538 bytes.
const FRAME: u64 = 1538;
/// Its payload: MSS 1448 less the INT header.
const MSS: u64 = 1448 - 42;

/// Long flows from `senders` hosts into the last of `hosts` behind one star switch at 100 Gb/s;
/// 4 x 2 us of propagation per RTT. The queue towards the receiver is sampled every 1 us.
fn star(cc: &str, hosts: usize, senders: &[usize], extra: &str) -> String {
    let rx = hosts - 1;
    let port = format!("sw0->h{rx}");
    format!(
        r#"
[sim]
duration = "5ms"
[topology]
kind = "star"
hosts = {hosts}
host_rate = "100Gbps"
host_delay = "2us"
[switch]
buffer = "8MB"
[switch.ecn]
mode = "step"
k = "100KB"
[classes.default]
cc = "{cc}"
[[workloads]]
kind = "bulk"
senders = {senders:?}
receiver = {rx}
[output.queues]
interval = "1us"
ports = ["{port}"]
{extra}
"#
    )
}

/// Utilization of the bottleneck over the run, its mean queue after `after`, and the BDP.
fn bottleneck(world: &World, rx: &str, after: Time) -> (f64, f64, f64) {
    let rtt = world.flows()[0].base_rtt;
    let bdp = 100e9 / 8.0 * rtt.secs_f64();
    let samples: Vec<f64> = world.queue_samples().iter().filter(|s| s.t >= after).map(|s| s.bytes as f64).collect();
    let mean_q = samples.iter().sum::<f64>() / samples.len() as f64;
    let port =
        world.ports().iter().find(|p| world.node_name(p.node) == "sw0" && world.node_name(p.peer_node) == rx).unwrap();
    (port.utilization(world.now()), mean_q, bdp)
}

/// Two long flows into one 100 Gb/s port for 5 ms: (utilization, mean queue after 1 ms, BDP).
fn two_long_flows(cc: &str) -> (f64, f64, f64) {
    let world = run_text(&star(cc, 3, &[0, 1], ""), &[]);
    let figures = bottleneck(&world, "h2", Time::from_ms(1));
    eprintln!(
        "{cc}: utilization {:.3}, mean queue {:.0} B, BDP {:.0} B, base RTT {}",
        figures.0,
        figures.1,
        figures.2,
        world.flows()[0].base_rtt
    );
    figures
}

#[test]
fn hpcc_fills_a_100g_bottleneck_with_a_small_standing_queue() {
    // HPCC's design point: utilization near the target eta = 95% with a near-empty queue. Here:
    // >= 90% of line rate over the whole run, start-up included, and a mean queue below 10% of the
    // BDP once the first millisecond (about 120 base RTTs of 8.1 us) has passed.
    let (util, mean_q, bdp) = two_long_flows("hpcc");
    assert!(util >= 0.90, "utilization {util}");
    assert!(mean_q < 0.1 * bdp, "standing queue {mean_q} B vs BDP {bdp} B");
}

/// How many base RTTs after `join` the windows of `flows` first come within `tol` of their mean
/// (the fair share) and stay there for the rest of the samples; `None` if they never do.
fn convergence_rtts(world: &World, flows: &[u32], join: Time, tol: f64) -> Option<f64> {
    let rtt = world.flows()[0].base_rtt;
    let mut by_time: std::collections::BTreeMap<Time, Vec<f64>> = Default::default();
    for s in world.cwnd_samples().iter().filter(|s| s.t >= join && flows.contains(&s.flow)) {
        by_time.entry(s.t).or_default().push(s.cwnd as f64);
    }
    let fair = |w: &Vec<f64>| {
        let mean = w.iter().sum::<f64>() / w.len() as f64;
        w.len() == flows.len() && w.iter().all(|x| (x / mean - 1.0).abs() <= tol)
    };
    // The last time the windows were apart; they converged at the sample after it.
    let mut since = None;
    for (&t, w) in &by_time {
        if !fair(w) {
            since = None;
        } else if since.is_none() {
            since = Some(t);
        }
    }
    since.map(|t| (t - join).secs_f64() / rtt.secs_f64())
}

/// One long flow from h0 (or two, from h0 and h1), and a newcomer that starts at 1 ms from the
/// next host into the same port; windows sampled every 1 us.
fn newcomer(cc: &str, long_flows: usize, overrides: &[&str]) -> World {
    let senders: Vec<usize> = (0..long_flows).collect();
    let extra = format!(
        r#"
[[workloads]]
kind = "flows"
flows = [{{ src = {long_flows}, dst = {rx}, size = "40MB", start = "1ms" }}]
[output.cwnd]
interval = "1us"
flows = {flows:?}
"#,
        rx = long_flows + 1,
        flows = (0..=long_flows).collect::<Vec<_>>(),
    );
    let world = run_text(&star(cc, long_flows + 2, &senders, &extra), overrides);
    assert!(world.flows()[long_flows].finish.is_none(), "the newcomer lasts to the end");
    world
}

#[test]
fn hpcc_gives_a_new_flow_its_fair_share_within_a_few_rtts() {
    // The newcomer starts at line rate (W_init) beside a flow holding eta of the link: the
    // multiplicative step brings both to about half within a few RTTs, since they start from
    // nearly equal windows. The setting of tcp_int.rs's HPTCP test, which allows 10 RTTs.
    let world = newcomer("hpcc", 1, &[]);
    let join = Time::from_ms(1);
    let (w20, w10) = (convergence_rtts(&world, &[0, 1], join, 0.2), convergence_rtts(&world, &[0, 1], join, 0.1));
    let (util, mean_q, bdp) = bottleneck(&world, "h2", join + Time::from_us(500));
    eprintln!("hpcc, new flow beside one: within 20% of fair share after {w20:?} base RTTs, 10% after {w10:?}; utilization {util:.3}, mean queue {mean_q:.0} B of BDP {bdp:.0} B");
    // Within 20% of each other after at most 5 base RTTs, within 10% after at most 8, and so for
    // the remaining 4 ms.
    assert!(w20.is_some_and(|r| r <= 5.0), "{w20:?}");
    assert!(w10.is_some_and(|r| r <= 8.0), "{w10:?}");
    assert!(util >= 0.90 && mean_q < 0.1 * bdp);
}

/// The mean over samples within half a base RTT of `t` of the largest relative distance of a
/// window from the flows' mean window.
fn unfairness_at(world: &World, flows: &[u32], t: Time) -> f64 {
    let half = Time(world.flows()[0].base_rtt.0 / 2);
    let mut by_time: std::collections::BTreeMap<Time, Vec<f64>> = Default::default();
    for s in world.cwnd_samples().iter().filter(|s| s.t + half >= t && s.t <= t + half && flows.contains(&s.flow)) {
        by_time.entry(s.t).or_default().push(s.cwnd as f64);
    }
    let d: Vec<f64> = by_time
        .values()
        .filter(|w| w.len() == flows.len())
        .map(|w| {
            let mean = w.iter().sum::<f64>() / w.len() as f64;
            w.iter().map(|x| (x / mean - 1.0).abs()).fold(0.0, f64::max)
        })
        .collect();
    d.iter().sum::<f64>() / d.len() as f64
}

/// The mean sum of the flows' windows over [from, to].
fn window_sum(world: &World, flows: &[u32], from: Time, to: Time) -> f64 {
    let picked: Vec<f64> = world
        .cwnd_samples()
        .iter()
        .filter(|s| s.t >= from && s.t <= to && flows.contains(&s.flow))
        .map(|s| s.cwnd as f64)
        .collect();
    let samples = picked.len() as f64 / flows.len() as f64;
    picked.iter().sum::<f64>() / samples
}

#[test]
fn a_third_flow_converges_at_the_pace_additive_increase_sets() {
    // Beside two flows sharing the link, the newcomer's line-rate start leaves it well above its
    // share once the multiplicative step has cut all three alike (it preserves ratios). From
    // there on HPCC is AIMD around U = eta: per RTT every window becomes W x k + W_AI with the sum
    // S held, so k = 1 - N W_AI / S and the windows' distance from the mean shrinks by k per RTT.
    // Model check: from 10 RTTs after the join, over `span` RTTs (while the unfairness stays well
    // above the windows' own jitter of about 2%), it falls by k^span, within 25%.
    let flows = [0, 1, 2];
    let join = Time::from_ms(1);
    let at = |rtts: f64, rtt: Time| join + Time::from_secs_f64(rtts * rtt.secs_f64());
    for (w_ai_factor, span, overrides) in [(1.0, 50, &[][..]), (4.0, 15, &["classes.default.params.w_ai=2034.4"][..])] {
        let world = newcomer("hpcc", 2, overrides);
        let rtt = world.flows()[0].base_rtt;
        let w_init = 100e9 / 8.0 * rtt.secs_f64();
        let w_ai = w_init * (1.0 - 0.95) / 10.0 * w_ai_factor;
        let end = 10.0 + span as f64;
        let (d10, d_end) = (unfairness_at(&world, &flows, at(10.0, rtt)), unfairness_at(&world, &flows, at(end, rtt)));
        let s = window_sum(&world, &flows, at(10.0, rtt), at(end, rtt));
        let model = (1.0 - 3.0 * w_ai / s).powi(span);
        let w20 = convergence_rtts(&world, &flows, join, 0.2);
        let w10 = convergence_rtts(&world, &flows, join, 0.1);
        let (util, mean_q, bdp) = bottleneck(&world, "h3", join + Time::from_us(500));
        eprintln!(
            "hpcc, third flow, W_AI {w_ai:.0} B: unfairness {d10:.3} at 10 RTTs, {d_end:.3} at {end} (ratio {:.3}, model k^{span} = {model:.3} with S = {s:.0} B); within 20% after {w20:?} base RTTs, 10% after {w10:?}; utilization {util:.3}, mean queue {mean_q:.0} B",
            d_end / d10,
        );
        assert!(((d_end / d10) / model - 1.0).abs() < 0.25, "ratio {} vs model {model}", d_end / d10);
        assert!(util >= 0.90 && mean_q < 0.1 * bdp, "{util} {mean_q}");
        if w_ai_factor == 1.0 {
            // The paper's W_AI for 10 flows: within 20% after 40 to 70 base RTTs.
            assert!(w20.is_some_and(|r| (40.0..=70.0).contains(&r)), "{w20:?}");
        } else {
            // Four times the step: four times the pace, within 20% in under 20 base RTTs.
            assert!(w20.is_some_and(|r| r < 20.0), "{w20:?}");
        }
    }
}

/// What a probe saw of one ACK: its arrival, the cumulative ACK and the echoed records.
type Seen = (Time, u64, Option<HopStack>);

/// A congestion controller that records every ACK's signals and hands them to the algorithm it
/// wraps.
struct Probe {
    inner: Box<dyn CongestionControl>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl CongestionControl for Probe {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn ecn_mode(&self) -> EcnMode {
        self.inner.ecn_mode()
    }
    fn needs_hop_records(&self) -> bool {
        self.inner.needs_hop_records()
    }
    fn on_ack(&mut self, ack: &AckSignals, win: &mut Window) {
        self.seen.lock().unwrap().push((ack.now, ack.snd_una, ack.hops));
        self.inner.on_ack(ack, win);
    }
    fn on_congestion(&mut self, ev: CongestionEvent, now: Time, win: &mut Window) {
        self.inner.on_congestion(ev, now, win);
    }
}

/// Builds a scenario, wraps flow 0's algorithm in a probe, runs it and checks conservation.
/// Wraps flow 0's algorithm in a [`Probe`] and returns where it records what each ACK carried.
fn probe_flow_0(world: &mut World) -> Arc<Mutex<Vec<Seen>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    world.connect_now(FlowId(0));
    let sender = &mut world.flow_mut(FlowId(0)).tcp_client_mut().expect("flow 0 is connected before the run").sender;
    let placeholder = sluice_sim::cc::factory("newreno", &toml::Table::new()).unwrap();
    let ctx =
        sluice_sim::cc::FlowContext { mss: 1, init_cwnd: 1, link_rate: Rate::gbps(1), base_rtt: Time::from_us(1), size: None, deadline: None, uet: None, stack: sluice_sim::transport::tcp::Stack::Rfc };
    let inner = std::mem::replace(&mut sender.cc, placeholder(&ctx));
    sender.cc = Box::new(Probe { inner, seen: seen.clone() });
    seen
}

fn run_probed(text: &str, overrides: &[&str]) -> (World, Vec<Seen>) {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let loaded = scenario::parse(text, "test.toml", Path::new("."), &overrides).unwrap_or_else(|e| panic!("{e}"));
    let mut world = sluice_sim::scenario::build(&loaded).unwrap_or_else(|e| panic!("{e}"));
    let seen = probe_flow_0(&mut world);
    world.run(&mut |_| {});
    world.check_conservation().unwrap_or_else(|e| panic!("{e}"));
    let seen = seen.lock().unwrap().clone();
    (world, seen)
}

/// Two hosts per leaf, two leaves, one spine: h0 -> h2 crosses leaf sw0, spine sw2 and leaf sw1.
/// Fabric links run at 10 Gb/s, so the first hop (sw0 -> sw2), shared with h1 -> h3, is the
/// bottleneck; sw2 -> sw1 is fed by it at its own rate and sw1 -> h2 drains at 100 Gb/s, so
/// neither of those ever queues a data packet.
/// Wire bytes of a SYN: headers with timestamps, IP and Ethernet framing, no payload or records.
const SYN_FRAME: u64 = 32 + 20 + 38;

const THREE_HOPS: &str = r#"
[sim]
duration = "2ms"
[topology]
kind = "leaf_spine"
hosts_per_leaf = 2
leaves = 2
spines = 1
host_rate = "100Gbps"
host_delay = "1us"
fabric_rate = "10Gbps"
fabric_delay = "1us"
[switch]
buffer = "8MB"
[transport]
handshake = true
[classes.default]
cc = "hpcc"
[[workloads]]
kind = "bulk"
senders = [0]
receiver = 2
[[workloads]]
kind = "bulk"
senders = [1]
receiver = 3
[output.queues]
interval = "100ns"
ports = ["sw0->sw2"]
"#;

#[test]
fn a_three_hop_ack_echoes_each_switchs_queue_bytes_time_and_rate() {
    let (world, seen) = run_probed(THREE_HOPS, &[]);
    assert!(world.flows().iter().all(|f| f.negotiation() == Negotiation::Accepted && f.cc_name() == "hpcc"));
    let stacks: Vec<(Time, u64, HopStack)> = seen.iter().filter_map(|&(t, una, h)| h.map(|h| (t, una, h))).collect();
    assert_eq!(stacks.len(), seen.len(), "every ACK echoes a stack");
    // 10 Gb/s shared by two flows for 2 ms: about 810 full frames each.
    assert!(stacks.len() > 700, "{}", stacks.len());
    let (g10, g100) = (Rate::gbps(10), Rate::gbps(100));
    let hop_time = g10.tx_time(FRAME) + Time::from_us(1);
    let samples = world.queue_samples();
    let mut max_q = 0;
    for (at, una, s) in &stacks {
        let h = s.hops();
        assert_eq!((h.len(), s.unrecorded()), (3, 0));
        assert_eq!([h[0].rate, h[1].rate, h[2].rate], [g10, g10, g100]);
        // Timestamps in path order, a full 10 Gb/s frame time plus the 1 us link apart where
        // the next hop does not queue.
        assert_eq!((h[1].ts - h[0].ts, h[2].ts - h[1].ts), (hop_time, hop_time));
        assert!(*at > h[2].ts);
        assert_eq!((h[1].qlen, h[2].qlen), (0, 0));
        // The last hop carries only this flow's SYN and frames, in order and without loss: the
        // segment ending at `una` found the SYN and (una / MSS - 1) frames sent before it.
        assert_eq!(una % MSS, 0);
        assert_eq!(h[2].tx_bytes, SYN_FRAME + (una / MSS - 1) * FRAME, "ACK of {una} at {at}");
        // The bottleneck's queue: what the 100 ns sampler saw just before the packet left, less
        // the packet itself, plus at most two frames arriving meanwhile from the 100 Gb/s hosts.
        let before = samples.iter().rev().find(|q| q.t <= h[0].ts).unwrap().bytes as i64;
        let diff = h[0].qlen as i64 - before;
        assert!(
            (-(FRAME as i64)..=2 * FRAME as i64).contains(&diff),
            "record {} vs sample {before} at {}",
            h[0].qlen,
            h[0].ts
        );
        max_q = max_q.max(h[0].qlen);
    }
    // Both flows start at line rate into 10 Gb/s: the bottleneck hop shows the queue that builds.
    eprintln!("3 hops: {} stacks, largest queue at the first hop {max_q} B", stacks.len());
    assert!(max_q > 50_000, "{max_q}");
    // Between ACKs, the bottleneck's bytes over time is its line rate whenever it stayed busy.
    let rate = |a: &HopStack, b: &HopStack| {
        let (x, y) = (a.hops()[0], b.hops()[0]);
        (y.tx_bytes - x.tx_bytes) as f64 * 8.0 / (y.ts - x.ts).secs_f64()
    };
    let busy: Vec<f64> = stacks
        .windows(2)
        .filter(|w| w[0].2.hops()[0].qlen > 0 && w[1].2.hops()[0].qlen > 0)
        .map(|w| rate(&w[0].2, &w[1].2))
        .collect();
    assert!(busy.len() > 100);
    assert!(busy.iter().all(|r| (r / 10e9 - 1.0).abs() < 0.05), "{:?}", busy.iter().take(5).collect::<Vec<_>>());
}

/// A chain of seven switches between two hosts (nodes 0 and 8), all links 100 Gb/s and 1 us.
const CHAIN: &str =
    "9 7 8\n1 2 3 4 5 6 7\n0 1 100Gbps 1us 0\n1 2 100Gbps 1us 0\n2 3 100Gbps 1us 0\n3 4 100Gbps 1us 0\n\
                     4 5 100Gbps 1us 0\n5 6 100Gbps 1us 0\n6 7 100Gbps 1us 0\n7 8 100Gbps 1us 0\n";

#[test]
fn past_five_hops_records_stop_and_the_rest_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("chain.txt"), CHAIN).unwrap();
    let text = r#"
[topology]
kind = "hpcc_file"
file = "chain.txt"
[transport]
handshake = true
[classes.default]
cc = "hpcc"
[[workloads]]
kind = "flows"
flows = [{ src = 0, dst = 1, size = "2MB" }]
"#;
    let loaded = scenario::parse(text, "chain.toml", dir.path(), &[]).unwrap();
    let mut world = sluice_sim::scenario::build(&loaded).unwrap();
    let seen = probe_flow_0(&mut world);
    world.run(&mut |_| {});
    world.check_conservation().unwrap();
    let f = &world.flows()[0];
    assert_eq!((f.negotiation(), f.cc_name()), (Negotiation::Accepted, "hpcc"));
    assert!(f.finish.is_some());
    let seen = seen.lock().unwrap();
    assert!(seen.len() > 1000);
    for (_, _, s) in seen.iter() {
        let s = s.expect("every ACK echoes a stack");
        assert_eq!((s.hops().len(), s.unrecorded()), (5, 2));
        assert!(s.hops().windows(2).all(|w| w[1].ts > w[0].ts), "the first five switches, in path order");
    }
}

#[test]
fn a_legacy_switch_on_the_path_makes_hpcc_fall_back_and_writes_no_record() {
    // The spine is legacy: HPCC would be blind at that hop, so negotiation falls back (to the
    // class's default fallback, cubic).
    let world = run_text(THREE_HOPS, &["int.legacy_switches=[\"sw2\"]"]);
    assert!(world
        .flows()
        .iter()
        .all(|f| f.negotiation() == Negotiation::PathHasLegacyInt && f.cc_name() == "cubic"));
    assert_eq!(world.hop_slab().capacity(), 0, "fallback flows carry no records");
    // A class that falls back to hpcc anyway runs it over the partial path: the legacy spine adds
    // no record, the two INT leaves do.
    let (world, seen) = run_probed(THREE_HOPS, &["int.legacy_switches=[\"sw2\"]", "classes.default.fallback=\"hpcc\""]);
    assert!(world
        .flows()
        .iter()
        .all(|f| f.negotiation() == Negotiation::PathHasLegacyInt && f.cc_name() == "hpcc"));
    assert!(seen.len() > 700);
    for (_, _, s) in &seen {
        let h = s.unwrap();
        assert_eq!(h.hops().len(), 2);
        assert_eq!([h.hops()[0].rate, h.hops()[1].rate], [Rate::gbps(10), Rate::gbps(100)], "sw0, then sw1");
    }
    // And a legacy host stack cannot answer the records.
    let world = run_text(THREE_HOPS, &["int.legacy_hosts=[2]"]);
    assert_eq!(
        (world.flows()[0].negotiation(), world.flows()[1].negotiation()),
        (Negotiation::PeerLacksInt, Negotiation::Accepted)
    );
}

/// Eight 1 MB flows into one port through a 300 KB buffer with 0.05% random loss on host links:
/// buffer drops and link drops both hit packets that hold record stacks.
const LOSSY_INCAST: &str = r#"
[sim]
duration = "20ms"
stop_when_done = false
[topology]
kind = "star"
hosts = 9
host_rate = "100Gbps"
host_delay = "2us"
host_loss = 0.0005
[switch]
buffer = "300KB"
[classes.default]
cc = "hpcc"
[[workloads]]
kind = "flows"
flows = [
  { src = 0, dst = 8, size = "1MB" }, { src = 1, dst = 8, size = "1MB" },
  { src = 2, dst = 8, size = "1MB" }, { src = 3, dst = 8, size = "1MB" },
  { src = 4, dst = 8, size = "1MB" }, { src = 5, dst = 8, size = "1MB" },
  { src = 6, dst = 8, size = "1MB" }, { src = 7, dst = 8, size = "1MB" },
]
"#;

#[test]
fn the_record_slab_drains_to_empty_through_drops_and_reuses_its_slots() {
    // Conservation (checked by run_text) includes the slab: stacks in use = those held by packets
    // in queues, on links, in NIC queues and by receivers awaiting an ACK.
    let world = run_text(LOSSY_INCAST, &[]);
    let c = world.counters();
    eprintln!(
        "incast: drops buffer {} link {}, slab high-water {} stacks for {} data packets",
        c.drops_buffer,
        c.drops_link_loss,
        world.hop_slab().capacity(),
        c.data_packets
    );
    assert!(c.drops_buffer > 0 && c.drops_link_loss > 0, "both kinds of drop happen");
    assert!(world.flows().iter().all(|f| f.finish.is_some()));
    // The run went on well past the last flow, so nothing is left anywhere.
    assert_eq!(world.hop_slab().in_use(), 0);
    // Slots are recycled: the slab grew to what was in flight at once, not to what was sent.
    assert!(world.hop_slab().capacity() > 0 && world.hop_slab().capacity() < 2_000, "{}", world.hop_slab().capacity());
    assert!(c.data_packets > 5_000);
}

#[test]
fn same_seed_same_run_and_other_algorithms_never_touch_the_slab() {
    let a = run_text(LOSSY_INCAST, &[]);
    let b = run_text(LOSSY_INCAST, &[]);
    let key = |w: &World| {
        let c = w.counters();
        let flows: Vec<_> =
            w.flows().iter().map(|f| (f.finish, f.retransmits(), f.timeouts().len())).collect();
        (c.packets_sent, c.drops_buffer, c.drops_link_loss, w.events(), flows)
    };
    assert_eq!(key(&a), key(&b));
    let dctcp = run_text(LOSSY_INCAST, &["classes.default.cc=\"dctcp\"", "sim.duration=\"2ms\""]);
    assert_eq!(dctcp.hop_slab().capacity(), 0);
}

#[test]
fn bad_parameters_name_the_key() {
    let err = |params: &str| {
        let text = star("hpcc", 3, &[0, 1], &format!("[classes.default.params]\n{params}\n"));
        let loaded = scenario::parse(&text, "t.toml", Path::new("."), &[]).unwrap();
        sluice_sim::scenario::build(&loaded).err().expect("an error")
    };
    let e = err("eta = 1.5");
    assert!(e.contains("classes.default.params.eta: expected a number in (0, 1], got 1.5"), "{e}");
    assert!(err("eta = 0").contains("classes.default.params.eta"));
    let e = err("w_ai = 100\nrate_ai = \"40Mbps\"");
    assert!(e.contains("classes.default.params.rate_ai: expected either w_ai (bytes per RTT) or rate_ai (a rate), not both"), "{e}");
    let e = err("w_ai = -100");
    assert!(e.contains("classes.default.params.w_ai: expected a positive number of bytes, got -100"), "{e}");
}
