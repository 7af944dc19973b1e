//! The rebuilt engine's promises: the conservation check catches what it claims to, ports mark
//! at their own thresholds, RED follows ns-3, connections open and close on the wire as RFC 9293
//! says and negotiate from what the SYN and SYN-ACK carried, and algorithms' state is sampled.

mod common;

use common::run_text;
use sluice_sim::cc::negotiation::Negotiation;
use sluice_sim::ids::FlowId;
use sluice_sim::metrics::pcap::{PcapSink, CAPS_OPTION_KIND};
use sluice_sim::net::qdisc::{Red, RedDecision, RedParams, Spacing};
use sluice_sim::packet::{flags, Caps, Packet};
use sluice_sim::scenario;
use sluice_sim::time::{Rate, Time};
use std::path::Path;

const INCAST: &str = r#"
[sim]
duration = "3ms"
[topology]
kind = "star"
hosts = 4
host_rate = "10Gbps"
host_delay = "2us"
[switch.ecn]
mode = "step"
k = "30KB"
[classes.default]
cc = "dctcp"
[[workloads]]
kind = "bulk"
senders = [0, 1, 2]
receiver = 3
"#;

#[test]
fn conservation_catches_a_duplicated_or_skipped_byte() {
    let mut world = run_text(INCAST, &[]);
    assert!(world.check_conservation().is_ok());
    // Hand flow 0's application a byte range it already has: a duplicate.
    let got = world.flows()[0].bytes_delivered();
    world.flow_mut(FlowId(0)).app_receive(got - 10, 10);
    let err = world.check_conservation().unwrap_err();
    assert!(err.contains("flow 0") && err.contains("duplicate"), "{err}");

    let mut world = run_text(INCAST, &[]);
    let got = world.flows()[1].bytes_delivered();
    world.flow_mut(FlowId(1)).app_receive(got + 1, 10);
    assert!(world.check_conservation().unwrap_err().contains("flow 1"), "a skipped byte is caught");
}

#[test]
fn conservation_catches_corrupted_buffer_accounting() {
    let mut world = run_text(INCAST, &[]);
    assert!(world.switches()[0].buffer.used > 0, "the run ends with a standing queue");
    world.switch_mut(0).buffer.used += 1;
    let err = world.check_conservation().unwrap_err();
    assert!(err.contains("buffer accounting broken at sw0"), "{err}");
}

#[test]
fn conservation_catches_a_packet_leaked_from_the_wires() {
    let mut world = run_text(INCAST, &[]);
    assert!(world.check_conservation().is_ok());
    // A packet stored for a wire that no wire holds: its place would never be freed.
    world.flying_mut().put(&Packet::default());
    let err = world.check_conservation().unwrap_err();
    assert!(err.contains("wire store broken"), "{err}");
}

/// Three racks of four hosts under two spines: a partition per rack, cut at the spines' 1.5 us
/// links; DCTCP.
const THREE_RACKS: &str = r#"
[topology]
kind = "leaf_spine"
hosts_per_leaf = 4
leaves = 3
spines = 2
host_rate = "25Gbps"
host_delay = "1us"
fabric_rate = "100Gbps"
fabric_delay = "1500ns"
[classes.default]
cc = "dctcp"
"#;

#[test]
fn each_partition_accounts_for_its_own_packets() {
    // Three racks, each a partition, each sending to the next; a run cut short leaves packets on
    // the cut links.
    let workload = r#"
[[workloads]]
kind = "flows"
flows = [
  { src = 0, dst = 4, size = "1MB" },
  { src = 4, dst = 8, size = "1MB" },
  { src = 8, dst = 0, size = "1MB" },
]
"#;
    let text = ["[sim]\nduration = \"150us\"", THREE_RACKS, workload].concat();
    let mut world = run_text(&text, &[]);
    let counters = world.partition_counters().to_vec();
    assert_eq!(counters.len(), 3);
    for (part, c) in counters.iter().enumerate() {
        assert!(c.sent_across > 0 && c.arrived_across > 0, "partition {part} exchanged no packets: {c:?}");
    }
    let (sent, arrived): (u64, u64) = counters.iter().fold((0, 0), |(s, a), c| (s + c.sent_across, a + c.arrived_across));
    assert!(sent > arrived, "the run stopped with packets on the cut links");
    // One delivery counted in the wrong partition: the run's sums still hold; each partition's
    // own account does not.
    world.partition_counters_mut(0).packets_delivered -= 1;
    world.partition_counters_mut(1).packets_delivered += 1;
    let err = world.check_conservation().unwrap_err();
    assert!(err.contains("packet conservation broken in partition 0"), "{err}");
}

/// Two receivers behind one switch, one on a 10 Gb/s port and one on a 25 Gb/s port, each the
/// target of two DCTCP senders on 25 Gb/s links.
const TWO_RATES: &str =
    "7 1 6\n6\n0 6 25Gbps 2us 0\n1 6 25Gbps 2us 0\n2 6 10Gbps 2us 0\n3 6 25Gbps 2us 0\n4 6 25Gbps 2us 0\n5 6 25Gbps 2us 0\n";

#[test]
fn ports_of_different_rates_mark_at_their_own_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("two_rates.txt"), TWO_RATES).unwrap();
    let text = r#"
[sim]
duration = "6ms"
[topology]
kind = "hpcc_file"
file = "two_rates.txt"
[switch.ecn]
mode = "step"
k = "200KB"
[switch.rates."10Gbps".ecn]
mode = "step"
k = "30KB"
[switch.rates."25Gbps".ecn]
mode = "step"
k = "90KB"
[classes.default]
cc = "dctcp"
[[workloads]]
kind = "bulk"
senders = [0, 1]
receiver = 2
[[workloads]]
kind = "bulk"
senders = [3, 4]
receiver = 5
[output.queues]
interval = "1us"
ports = ["sw0->h2", "sw0->h5"]
"#;
    let loaded = sluice_sim::scenario::parse(text, "two_rates.toml", dir.path(), &[]).unwrap();
    let mut world = sluice_sim::scenario::build(&loaded).unwrap();
    world.run(&mut |_| {});
    world.check_conservation().unwrap();
    let port_of = |h: u32| world.ports().iter().position(|p| p.node == 6 && p.peer_node == h).unwrap() as u32;
    let (q10, q25) = (peak_after_2ms(&world, Some(port_of(2))), peak_after_2ms(&world, Some(port_of(5))));
    eprintln!("queue maxima after 2 ms: 10 Gb/s port {q10} B (K 30 KB), 25 Gb/s port {q25} B (K 90 KB)");
    // DCTCP holds each queue's peaks just above its K (measured: 33.8 KB and 95.4 KB): the
    // marks that start at K slow the two senders within a round trip, so a peak overshoots K by
    // a few frames, far less than the gap between the two thresholds.
    assert!((30_000..30_000 + 12_000).contains(&q10), "10 Gb/s port peaks at {q10} B");
    assert!((90_000..90_000 + 12_000).contains(&q25), "25 Gb/s port peaks at {q25} B");
}

/// The largest queue sampled after the first 2 ms (DCTCP's start-up), at `port` or at any
/// sampled port.
fn peak_after_2ms(world: &sluice_sim::world::World, port: Option<u32>) -> u64 {
    let samples = world.queue_samples().iter().filter(|s| s.t > Time::from_ms(2) && port.is_none_or(|p| s.port == p));
    samples.map(|s| s.bytes).max().unwrap()
}

/// A transmit ring beneath a port's marking (`ring`, per rate) holds its bytes unjudged: DCTCP
/// then keeps the queue at the ring plus K, also where a named port's own ECN table replaces
/// the rate's marking (the ring stays).
#[test]
fn a_ring_beneath_the_marking_adds_its_bytes_to_the_queue_dctcp_keeps() {
    let text = |ring: &str| {
        format!(
            r#"
[sim]
duration = "6ms"
[topology]
kind = "star"
hosts = 3
host_rate = "10Gbps"
host_delay = "2us"
[switch.rates."10Gbps"]
{ring}
[switch.rates."10Gbps".ecn]
mode = "step"
k = "200KB"
[switch.ports."sw0->h2".ecn]
mode = "step"
k = "30KB"
[classes.default]
cc = "dctcp"
[[workloads]]
kind = "bulk"
senders = [0, 1]
receiver = 2
[output.queues]
interval = "1us"
ports = ["sw0->h2"]
"#
        )
    };
    let peak = |ring: &str| peak_after_2ms(&run_text(&text(ring), &[]), None);
    let (bare, ringed) = (peak(""), peak("ring = \"60KB\""));
    eprintln!("queue maxima after 2 ms: {bare} B without a ring, {ringed} B above a 60 KB ring (K 30 KB)");
    assert!((30_000..42_000).contains(&bare), "without a ring the queue peaks just above K: {bare} B");
    assert!((90_000..102_000).contains(&ringed), "with it, just above the ring plus K: {ringed} B");
}

/// The long-run fraction of packets RED marks at a fixed average queue, from ns-3's formulas:
/// the base probability `pb`, turned per packet count `c` since the last mark into `pa(c)` by
/// the spacing rule; the mean gap between marks is the sum over c of P(no mark before c).
fn ns3_mark_rate(pb: f64, spacing: Spacing) -> f64 {
    let pa = |c: f64| -> f64 {
        match spacing {
            Spacing::None => pb,
            Spacing::Uniform => {
                if c * pb < 1.0 {
                    pb / (1.0 - c * pb)
                } else {
                    1.0
                }
            }
            Spacing::Wait => {
                if c * pb < 1.0 {
                    0.0
                } else if c * pb < 2.0 {
                    pb / (2.0 - c * pb)
                } else {
                    1.0
                }
            }
        }
    };
    // The count after a mark restarts at 0 and the next arrival counts as 1.
    let (mut survive, mut mean_gap) = (1.0, 0.0);
    for c in 1..1_000_000 {
        mean_gap += survive;
        survive *= 1.0 - pa(c as f64).min(1.0);
        if survive < 1e-15 {
            break;
        }
    }
    1.0 / mean_gap
}

#[test]
fn red_marks_as_ns3_red_with_gentle_mode_within_sampling_error() {
    use rand::{Rng, SeedableRng};
    let (kmin, kmax, pmax) = (100_000u64, 300_000u64, 0.1);
    let rate = Rate::gbps(100);
    for spacing in [Spacing::None, Spacing::Uniform, Spacing::Wait] {
        // Queue lengths in the linear region and in the gentle region above kmax.
        for q in [150_000u64, 250_000, 350_000, 500_000] {
            let params = RedParams { kmin, kmax, pmax, weight: 1.0, gentle: true, spacing, mean_packet: 1000 };
            let mut red = Red::new(params);
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(q ^ spacing as u64);
            let n = 100_000;
            let mut marks = 0u64;
            for i in 0..n {
                let mark = match red.on_arrival(q, 1000, Time(i), rate) {
                    RedDecision::Pass => false,
                    RedDecision::Forced => true,
                    RedDecision::Early(p) => rng.gen::<f64>() < p,
                };
                if mark {
                    red.on_mark();
                    marks += 1;
                }
            }
            let pb = if q < kmax {
                pmax * (q - kmin) as f64 / (kmax - kmin) as f64
            } else {
                pmax + (1.0 - pmax) * (q - kmax) as f64 / kmax as f64
            };
            let expected = ns3_mark_rate(pb, spacing);
            let measured = marks as f64 / n as f64;
            // Four standard errors of a binomial proportion over 100k packets (spacing only
            // makes the count less variable), and the first packet above kmin, which only arms
            // the count (ns-3's m_old).
            let tolerance = 4.0 * (expected * (1.0 - expected) / n as f64).sqrt() + 1.0 / n as f64;
            eprintln!("{spacing:?} q={q}: pb {pb:.4}, ns-3 rate {expected:.5}, measured {measured:.5}");
            assert!((measured - expected).abs() <= tolerance, "{spacing:?} at {q} B: {measured} vs {expected} ± {tolerance}");
        }
    }
}

#[test]
fn a_connection_is_built_when_its_flow_starts_and_released_when_done() {
    // Three flows; the last starts after the run ends.
    let text = r#"
[sim]
duration = "1ms"
[topology]
kind = "star"
hosts = 3
host_rate = "10Gbps"
host_delay = "5us"
[classes.default]
cc = "dctcp"
[[workloads]]
kind = "flows"
flows = [
  { src = 0, dst = 2, size = "20KB", start = "0us" },
  { src = 1, dst = 2, size = "20KB", start = "100us" },
  { src = 0, dst = 1, size = "20KB", start = "2ms" },
]
"#;
    let loaded = scenario::parse(text, "test.toml", Path::new("."), &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut world = scenario::build(&loaded).unwrap_or_else(|e| panic!("{e}"));
    for f in world.flows() {
        assert!(f.client.is_none() && f.server.is_none() && f.waits_to_connect(), "flow {} has a connection before it starts", f.id);
        assert!(f.ideal_fct > f.base_rtt && f.base_rtt > Time::ZERO, "flow {}'s record is filled in", f.id);
    }
    world.run(&mut |_| {});
    world.check_conservation().unwrap_or_else(|e| panic!("{e}"));
    let flows = world.flows();
    for f in &flows[..2] {
        assert!(f.finish.is_some() && !f.waits_to_connect(), "flow {} ran", f.id);
        assert!(f.client.is_none() && f.server.is_none(), "flow {}'s ends closed and were released", f.id);
        assert_eq!(f.bytes_delivered(), 20_000);
    }
    let never = &flows[2];
    assert!(never.finish.is_none() && never.waits_to_connect() && never.client.is_none() && never.server.is_none());
    // What the outputs say of a flow that never started is what its unopened connection says.
    assert_eq!((never.cc_name(), never.retransmits(), never.bytes_delivered()), ("dctcp", 0, 0));
}

const ONE_FLOW: &str = r#"
[sim]
# Run on past the last byte's acknowledgement, through the close.
stop_when_done = false
[topology]
kind = "star"
hosts = 2
host_rate = "10Gbps"
host_delay = "5us"
[transport]
handshake = true
time_wait = "40us"
[classes.default]
cc = "dctcp"
[switch.ecn]
mode = "step"
k = "30KB"
[[workloads]]
kind = "flows"
flows = [{ src = 0, dst = 1, size = "20KB" }]
[output.pcap]
flows = [0]
"#;

#[test]
fn a_connection_opens_and_closes_on_the_wire_and_waits_out_time_wait() {
    let world = run_text(ONE_FLOW, &[]);
    let f = &world.flows()[0];
    assert!(f.client.is_none() && f.server.is_none(), "a closed connection's state is released at both ends");
    let pkts = &world.capture().unwrap().packets;
    let fwd = |p: &Packet| p.is_forward();
    // SYN, SYN-ACK first.
    assert!(pkts[0].1.is_syn() && fwd(&pkts[0].1));
    assert!(pkts[1].1.has(flags::SYN) && pkts[1].1.has(flags::ACK) && !fwd(&pkts[1].1));
    // The last data segment carries the client's FIN; the server answers with one FIN|ACK that
    // acknowledges it (the FIN takes a sequence number), and the client acknowledges that.
    let size = 20_000u64;
    let fin = pkts.iter().position(|(_, p)| fwd(p) && p.has(flags::FIN)).expect("the client's FIN");
    assert_eq!(pkts[fin].1.seq + pkts[fin].1.payload as u64, size);
    let (t_fin_ack, fin_ack) = pkts.iter().find(|(_, p)| !fwd(p) && p.has(flags::FIN)).expect("the server's FIN");
    assert_eq!(fin_ack.ack, size + 1);
    let (t_last, last) = pkts.last().unwrap();
    assert!(fwd(last) && last.has(flags::ACK) && !last.has(flags::FIN) && last.ack == 1, "{last:?}");
    // The server's FIN|ACK left as soon as the FIN arrived: its two serializations and 10 us of
    // links after the FIN started, plus at most the rest of the full frame ahead of it at the
    // switch; the client's ACK exactly one ACK frame's two serializations and 10 us after that.
    let frame = |b: u64| Rate::gbps(10).tx_time(b);
    let one_way = |b: u64| frame(b) + frame(b) + Time::from_us(10);
    let earliest = pkts[fin].0 + one_way(pkts[fin].1.wire_bytes as u64);
    assert!(*t_fin_ack >= earliest && *t_fin_ack <= earliest + frame(1538), "{t_fin_ack} vs {earliest}");
    assert_eq!(*t_last, *t_fin_ack + one_way(fin_ack.wire_bytes as u64));
    // TIME_WAIT: the client closes 40 us after it acknowledged the server's FIN.
    assert_eq!(f.closed_at, Some(*t_last + Time::from_us(40)));
    assert_eq!(f.bytes_delivered(), size);
}

/// The negotiation bits of a SYN or SYN-ACK as a pcap reader sees them: the TCP option of kind
/// 253 with sluice's experiment id, parsed from the frame bytes written to `trace.pcap`.
fn caps_on_the_wire(pkts: &[(Time, Packet)], synack: bool) -> Vec<u8> {
    let mut buf = Vec::new();
    {
        let mut sink = PcapSink::new(&mut buf, sluice_sim::metrics::pcap::Snap::Headers).unwrap();
        for (t, p) in pkts {
            sink.record(*t, p).unwrap();
        }
        sink.finish().unwrap();
    }
    let mut reader = pcap_file::pcap::PcapReader::new(&buf[..]).unwrap();
    let mut out = Vec::new();
    while let Some(pkt) = reader.next_packet() {
        let frame = pkt.unwrap().data.into_owned();
        let tcp = &frame[14 + 20..];
        let flags = tcp[13];
        if flags & 0x02 == 0 || (flags & 0x10 != 0) != synack {
            continue;
        }
        let (mut i, end) = (20, ((tcp[12] >> 4) as usize) * 4);
        while i < end {
            match tcp[i] {
                0 => break,
                1 => i += 1,
                kind => {
                    let len = tcp[i + 1] as usize;
                    if kind == CAPS_OPTION_KIND && tcp[i + 2..i + 4] == [0x53, 0x4c] {
                        out.push(tcp[i + 4]);
                    }
                    i += len;
                }
            }
        }
    }
    out
}

const NEGOTIATE: &str = r#"
[topology]
kind = "leaf_spine"
hosts_per_leaf = 2
leaves = 2
spines = 1
host_rate = "10Gbps"
host_delay = "1us"
fabric_rate = "10Gbps"
fabric_delay = "1us"
[transport]
handshake = true
[switch.ecn]
mode = "step"
k = "30KB"
[classes.default]
cc = "ecn_int"
fallback = "cubic"
[[workloads]]
kind = "flows"
flows = [{ src = 0, dst = 2, size = "50KB" }]
[output.pcap]
flows = [0]
"#;

#[test]
fn negotiation_decides_from_what_the_syn_and_syn_ack_carried() {
    let all = Caps::ANSWERED | Caps::PATH_ALL_INT | Caps::PATH_ANY_INT | Caps::PATH_ECN;
    let cases: [(&[&str], Negotiation, &[u8]); 5] = [
        (&[], Negotiation::Accepted, &[all | Caps::PEER_INT]),
        // The spine (sw2) is legacy: it clears "every hop stamps INT"; the leaves still stamp.
        (&["int.legacy_switches=[\"sw2\"]"], Negotiation::Accepted, &[Caps::ANSWERED | Caps::PATH_ANY_INT | Caps::PATH_ECN | Caps::PEER_INT]),
        // A legacy receiver stack: the SYN-ACK says nothing of INT.
        (&["int.legacy_hosts=[2]"], Negotiation::PeerLacksInt, &[all]),
        // No ECN on the path: every switch clears the bit.
        (&["switch.ecn.mode=\"off\""], Negotiation::PathLacksEcn, &[Caps::ANSWERED | Caps::PATH_ALL_INT | Caps::PATH_ANY_INT | Caps::PEER_INT]),
        // A receiver without the agent: its SYN-ACK carries no option at all.
        (&["transport.agentless_hosts=[2]"], Negotiation::PeerSilent, &[]),
    ];
    for (overrides, outcome, synack_bits) in cases {
        let world = run_text(NEGOTIATE, overrides);
        let f = &world.flows()[0];
        assert_eq!(f.negotiation(), outcome, "{overrides:?}");
        let expected_cc = if outcome == Negotiation::Accepted { "ecn_int" } else { "cubic" };
        assert_eq!(f.cc_name(), expected_cc, "{overrides:?}");
        let pkts = &world.capture().unwrap().packets;
        let syn = caps_on_the_wire(pkts, false);
        assert_eq!(syn, [Caps::PROPOSED | Caps::WANTS_INT | Caps::WANTS_ECN | Caps::PATH_ALL_INT | Caps::PATH_ECN], "the SYN as sent");
        assert_eq!(caps_on_the_wire(pkts, true), synack_bits, "the SYN-ACK, {overrides:?}");
    }
    // The same path without a handshake negotiates nothing and says so.
    let world = run_text(NEGOTIATE, &["transport.handshake=false", "int.legacy_hosts=[2]"]);
    assert_eq!(world.flows()[0].negotiation(), Negotiation::NotNegotiated);
    assert_eq!(world.flows()[0].cc_name(), "ecn_int");
}

#[test]
fn dctcp_alpha_settles_at_the_marked_fraction() {
    let world = run_text(
        INCAST,
        &["sim.duration=\"20ms\"", "workloads.0.senders=[0, 1]", "output.cwnd.interval=\"10us\"", "output.cwnd.flows=[]"],
    );
    // RFC 8257: alpha is a moving average of the fraction of bytes marked per window. In steady
    // state it settles at the marked fraction of the flow's packets.
    let marked = world.counters().ecn_marks as f64 / world.counters().data_packets as f64;
    let alphas: Vec<f64> = world
        .cwnd_samples()
        .iter()
        .filter(|s| s.t > Time::from_ms(10))
        .map(|s| s.state.iter().find(|(n, _)| *n == "alpha").expect("DCTCP names alpha").1)
        .collect();
    let mean = alphas.iter().sum::<f64>() / alphas.len() as f64;
    eprintln!("marked fraction {marked:.4}, mean alpha over the last 10 ms {mean:.4} ({} samples)", alphas.len());
    assert!(alphas.len() > 1000);
    assert!((mean / marked - 1.0).abs() < 0.2, "alpha {mean} vs marked fraction {marked}");
}

/// The non-test part of a source file under `src/`.
fn source(rel: &str) -> String {
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(rel)).unwrap();
    text.split("#[cfg(test)]").next().unwrap().to_string()
}

#[test]
fn configuration_builds_the_world_and_metrics_read_it_without_a_cycle() {
    // scenario -> world -> (elements); metrics -> world; the elements (hosts, the network,
    // transports, workloads) reach the world only through the context it hands them.
    let world = source("world.rs");
    assert!(!world.contains("crate::scenario") && !world.contains("crate::metrics"));
    for file in std::fs::read_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scenario")).unwrap() {
        let name = format!("scenario/{}", file.unwrap().file_name().to_str().unwrap());
        assert!(!source(&name).contains("crate::metrics"), "{name} uses crate::metrics");
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut checked = 0;
    for folder in ["host", "net", "transport", "workload"] {
        let mut files = vec![src.join(folder)];
        while let Some(path) = files.pop() {
            if path.is_dir() {
                files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            let name = path.strip_prefix(&src).unwrap().to_str().unwrap().to_string();
            let text = source(&name);
            for other in ["crate::scenario", "crate::world", "crate::metrics"] {
                assert!(!text.contains(other), "{name} uses {other}");
            }
            checked += 1;
        }
    }
    assert!(checked > 40, "{checked} element files");
}

#[test]
fn the_framing_per_frame_is_a_parameter() {
    let ethernet = run_text(ONE_FLOW, &[]);
    let bare = run_text(ONE_FLOW, &["transport.framing=0"]);
    for (world, framing) in [(&ethernet, 38), (&bare, 0)] {
        // No options on a DCTCP flow without INT, and no SACK blocks on a lossless path.
        let pkts = &world.capture().unwrap().packets;
        assert!(pkts.iter().all(|(_, p)| p.wire_bytes == p.payload + 32 + 20 + framing), "framing {framing}");
    }
    // 14 full frames and the SYN's and ACKs' framing fewer on the wire: a shorter ideal FCT.
    let (a, b) = (ethernet.flows()[0].ideal_fct, bare.flows()[0].ideal_fct);
    let per_frame = Rate::gbps(10).tx_time(38);
    assert!(a > b && a - b >= Time(per_frame.0 * 14), "{a} vs {b}");
}

#[test]
fn a_tcp_connection_s_ends_share_nothing_but_packets() {
    // The client's and the server's state are apart: neither file names the other end's type
    // or its half of the data path.
    let client = source("transport/tcp/client.rs");
    let server = source("transport/tcp/server.rs");
    for other in ["TcpServer", "Receiver", "receiver"] {
        assert!(!client.contains(other), "the client reaches {other}");
    }
    for other in ["TcpClient", "Sender", "sender"] {
        assert!(!server.contains(other), "the server reaches {other}");
    }
}

#[test]
fn a_fabric_splits_into_racks_and_a_run_of_several_stops_at_a_window_end() {
    let text = format!(
        r#"
[sim]
seed = 3
{THREE_RACKS}[switch.ecn]
mode = "step"
k = "60KB"
[[workloads]]
kind = "poisson"
cdf = "websearch"
load = 0.4
duration = "300us"
"#
    );
    let world = run_text(&text, &[]);
    let parts = world.partitions();
    assert_eq!((parts.count, parts.lookahead), (3, Some(Time::from_ns(1500))), "a partition per leaf, cut at the spines");
    let last = world.flows().iter().filter_map(|f| f.finish).max().expect("flows finished");
    assert!(world.flows().iter().all(|f| f.finish.is_some()));
    // Every partition can tell the end of the window its traffic finished in, never the
    // instant the last flow did.
    let window = Time::from_ns(1500);
    let end = Time((last.0 / window.0 + 1) * window.0);
    assert!(world.now() >= last && world.now() < end, "stopped at {}, last flow done at {last}, window end {end}", world.now());
}
