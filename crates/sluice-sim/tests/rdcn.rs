//! Reconfigurable datacenter networks on `scenarios/rdcn_etalon.toml` (Mukerjee et al., NSDI 2020;
//! Etalon): the circuit carries packets only in its days and only from the joined VOQ, VOQs hold
//! what they are sized for and grow `tau` before a day, reTCP doubles and halves its window on the
//! ToR's signal, and the paper's utilization and latency results in direction and magnitude.
//!
//! The schedule is checked against its own arithmetic here, not the simulator's: the strobe of an
//! 8-rack network gives the test pair (rack 0 -> rack 1) the first 180 us of every 1,400 us week.

mod common;
use common::{run_file, run_text};
use sluice_sim::world::World;

const SCENARIO: &str = "scenarios/rdcn_etalon.toml";
const WEEK_NS: f64 = 1_400_000.0;
const DAY_NS: f64 = 180_000.0;
/// Wire bytes of a full frame at MTU 9000.
const FRAME: u64 = 9038;
const CIRCUIT_GBPS: f64 = 80.0;

/// Where `t` (ns) falls in the test pair's week.
fn in_week(t: f64) -> f64 {
    t % WEEK_NS
}

/// Queue samples of ToR 0's uplinks (its VOQs) as (t ns, bytes).
fn voq_samples(world: &World) -> Vec<(f64, u64)> {
    world.queue_samples().iter().map(|s| (s.t.0 as f64 / 1e3, s.bytes)).collect()
}

fn run(overrides: &[&str]) -> World {
    run_file(SCENARIO, overrides)
}

#[test]
fn packets_cross_the_circuit_only_in_a_day_and_only_from_the_joined_voq() {
    let world = run(&["sim.duration=20ms", r#"output.pcap.ports=["sw0->sw4", "sw1->sw4"]"#]);
    let cap = world.capture().expect("the capture");
    let (mut data, mut acks) = (0, 0);
    for (t, pkt) in &cap.packets {
        let t = t.0 as f64 / 1e3;
        let (src_rack, dst_rack) = (pkt.src / 16, pkt.dst / 16);
        let end = t + pkt.wire_bytes as f64 * 8.0 / CIRCUIT_GBPS;
        if src_rack == 0 {
            // Rack 0 has a circuit to rack 1 in the first day of the week only (to rack 2 in the
            // second, where it has nothing to send).
            assert_eq!(dst_rack, 1, "rack 0 sends only to rack 1");
            assert!(in_week(t) < DAY_NS && in_week(end) <= DAY_NS + 1e-6, "sent at {t} ns, outside (0 -> 1)'s day");
            data += 1;
        } else {
            // ACKs cross 1 -> 0 in the seventh day (1 + 6 + 1 = 0 mod 8): 1,200..1,380 us.
            assert_eq!((src_rack, dst_rack), (1, 0));
            let w = in_week(t);
            assert!((1_200_000.0..1_380_000.0).contains(&w) && in_week(end) <= 1_380_000.0 + 1e-6, "ACK at {t} ns");
            acks += 1;
        }
    }
    // 14 days of up to 180 us at 80 Gb/s hold up to 2,800 frames.
    assert!(data > 1000, "{data} data packets crossed the circuit");
    assert!(acks > 10, "{acks} ACKs crossed the reverse circuit");
    // Nothing else left ToR 0 over the circuit: its bytes match the captured packets'.
    let circuit = world.ports().iter().find(|p| world.node_name(p.node) == "sw0" && world.node_name(p.peer_node) == "sw4").unwrap();
    let captured: u64 = cap.packets.iter().filter(|(_, p)| p.src / 16 == 0).map(|(_, p)| p.wire_bytes as u64).sum();
    assert_eq!(circuit.tx_bytes, captured);
}

#[test]
fn a_static_voq_holds_at_most_its_capacity_and_fills_to_it() {
    let world = run(&["sim.duration=10ms", r#"output.queues.ports=["sw0->sw3"]"#, "output.queues.interval=1us"]);
    let samples = voq_samples(&world);
    let max = samples.iter().map(|s| s.1).max().unwrap();
    assert_eq!(max, 16 * FRAME, "16 frames at most, and the VOQ reaches them");
    let summary = sluice_sim::metrics::summarize(&world, 1.0);
    assert!(summary.circuit.expect("circuit figures").voq_drops > 0, "a full VOQ refuses packets");
}

#[test]
fn a_voq_grows_tau_before_its_day_and_stops_growing_after_it() {
    const TAU_NS: f64 = 600_000.0;
    let world = run(&[
        "sim.duration=10ms",
        "circuit.voq_large_packets=50",
        "circuit.tau=600us",
        r#"output.queues.ports=["sw0->sw3"]"#,
        "output.queues.interval=1us",
    ]);
    let samples = voq_samples(&world);
    let small = 16 * FRAME;
    // Above the small capacity the VOQ may only grow from tau before a day to the day's end;
    // elsewhere it drains what it took in.
    let window = |t: f64| in_week(t) >= WEEK_NS - TAU_NS || in_week(t) < DAY_NS;
    for w in samples.windows(2) {
        let ((_, before), (t, now)) = (w[0], w[1]);
        if now > small && now > before {
            assert!(window(t), "the VOQ grew to {now} bytes at {t} ns, outside its window");
        }
    }
    assert_eq!(samples.iter().map(|s| s.1).max(), Some(50 * FRAME), "it reaches the large capacity");
    // In every week after the first: at most the small capacity just before the window opens,
    // more within 50 us after.
    for week in 1..7 {
        let open = week as f64 * WEEK_NS - TAU_NS;
        let max_in = |a: f64, b: f64| samples.iter().filter(|s| s.0 >= a && s.0 < b).map(|s| s.1).max().unwrap();
        assert!(max_in(open - 50_000.0, open) <= small, "week {week}: above 16 frames before tau");
        assert!(max_in(open, open + 50_000.0) > small, "week {week}: not grown within 50 us of tau");
    }
}

#[test]
fn retcp_doubles_its_window_on_the_signal_and_halves_it_when_the_signal_ends() {
    // One flow (the first workload only), a VOQ it does not overflow in 6 ms, the signal 150 us
    // ahead of each day.
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(SCENARIO)).unwrap();
    let second = text.match_indices("[[workloads]]").nth(1).expect("16 workloads").0;
    let world = run_text(&text[..second], &[
        "sim.duration=6ms",
        "classes.default.cc=retcp",
        "circuit.voq_packets=128",
        "circuit.tau=150us",
        "output.cwnd.interval=1us",
        "output.cwnd.flows=[0]",
    ]);
    let flow = &world.flows()[0];
    assert_eq!(flow.timeouts().len(), 0);
    assert_eq!(flow.retransmits(), 0, "no loss to blur the signal's effect");
    let rtt = flow.base_rtt.0 as f64 / 1e3;
    let cwnd: Vec<(f64, f64)> = world.cwnd_samples().iter().filter(|s| s.flow == 0).map(|s| (s.t.0 as f64 / 1e3, s.cwnd as f64)).collect();
    let at = |t: f64| cwnd.iter().take_while(|s| s.0 <= t).last().expect("a sample").1;
    for week in 1..4 {
        let on = week as f64 * WEEK_NS - 150_000.0;
        let (before, after) = (at(on), at(on + rtt));
        let up = after / before;
        println!("week {week}: up x{up:.3}");
        assert!((1.95..2.2).contains(&up), "week {week}: x{up:.3} within one RTT ({rtt} ns) of the signal");
        let off = week as f64 * WEEK_NS + DAY_NS;
        let (before, after) = (at(off), at(off + rtt));
        let down = after / before;
        println!("week {week}: down x{down:.3}");
        assert!((0.45..0.55).contains(&down), "week {week}: x{down:.3} within one RTT of the signal's end");
    }
}

/// Circuit utilization (percent) and p99 latency through the ToR (us) of one variant.
fn figures(overrides: &[&str]) -> (f64, f64) {
    let world = run(overrides);
    let c = sluice_sim::metrics::summarize(&world, 1.0).circuit.expect("circuit figures");
    (c.utilization.expect("days with data") * 100.0, c.latency_ns.p99 / 1e3)
}

/// The paper's Figures 8-9 (Etalon's calcs.txt): static 16 packets 48.7% / 123 us p99; resizing
/// 1,800 us ahead 91.1% / 286 us; resizing 150 us ahead with reTCP 92.7% / 147 us (1.20x the
/// static p99). Tolerance: 10 percentage points of utilization and p99 within 1.3x of static's.
#[test]
fn the_papers_utilization_and_latency_results_hold() {
    let (static16, static16_p99) = figures(&[]);
    let (resize, _) = figures(&["circuit.voq_large_packets=50", "circuit.tau=1800us"]);
    let (retcp, retcp_p99) = figures(&["circuit.voq_large_packets=50", "circuit.tau=150us", "classes.default.cc=retcp"]);
    println!("static 16: {static16:.1}% p99 {static16_p99:.1} us; resize 1800 us: {resize:.1}%; reTCP + 150 us: {retcp:.1}% p99 {retcp_p99:.1} us");
    assert!((static16 - 48.7).abs() <= 10.0, "static 16: {static16:.1}% (paper 48.7%)");
    assert!((resize - 91.1).abs() <= 10.0, "resize 1,800 us: {resize:.1}% (paper 91.1%)");
    assert!((retcp - 92.7).abs() <= 10.0, "reTCP + 150 us: {retcp:.1}% (paper 92.7%)");
    assert!(resize > static16 + 25.0 && retcp > static16 + 25.0, "both mechanisms use the circuit far better");
    assert!(retcp_p99 <= 1.3 * static16_p99, "reTCP's p99 {retcp_p99:.1} us against static's {static16_p99:.1} us");
    assert!((static16_p99 - 123.0).abs() < 123.0 * 0.1, "static 16's p99 is 16 frames draining at 10 Gb/s (paper 123 us)");
}
