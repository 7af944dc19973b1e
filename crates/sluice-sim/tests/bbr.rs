//! One BBR flow through a 10 Gb/s bottleneck fed by a 40 Gb/s host link. BBR's design goal
//! (Cardwell et al., "BBR: Congestion-Based Congestion Control", ACM Queue 2016) is to run at
//! the bottleneck rate with about one BDP in flight, so the bottleneck queue stays far below a
//! BDP once Startup's queue is drained: the test asks for >= 90% utilization and a mean queue
//! under a quarter of a BDP, with the peak after start-up under one BDP.

mod common;
use common::{run_text, FRAME};
use sluice_sim::time::Time;

const SCENARIO: &str = r#"
[sim]
duration = "20ms"
[topology]
kind = "dumbbell"
left = 1
right = 1
host_rate = "40Gbps"
host_delay = "1us"
core_rate = "10Gbps"
core_delay = "23us"        # base RTT 2 * (1 + 23 + 1) us = 50 us plus serialization
[transport]
rto_min = "5ms"
[classes.default]
cc = "bbr"
[[workloads]]
kind = "bulk"
senders = [0]
receiver = 1
[output.queues]
interval = "1us"
ports = ["sw0->sw1"]
"#;

#[test]
fn one_bbr_flow_fills_a_10g_bottleneck_with_a_small_queue() {
    let world = run_text(SCENARIO, &[]);
    let flow = &world.flows()[0];
    let rtt = flow.base_rtt.secs_f64();
    let bdp_pkts = 10e9 * rtt / (FRAME * 8.0);

    let delivered = flow.bytes_delivered() as f64;
    let util = delivered / 1448.0 * FRAME * 8.0 / world.now().secs_f64() / 10e9;

    // After Startup and Drain (a few round trips of 50 us), the queue is BBR's steady state.
    let warm = Time::from_ms(2);
    let q: Vec<f64> = world.queue_samples().iter().filter(|s| s.t >= warm).map(|s| s.bytes as f64 / FRAME).collect();
    let mean = q.iter().sum::<f64>() / q.len() as f64;
    let peak = q.iter().cloned().fold(0.0, f64::max);
    let startup_peak = world.queue_samples().iter().map(|s| s.bytes as f64 / FRAME).fold(0.0, f64::max);
    println!(
        "base RTT {:.1} us, BDP {bdp_pkts:.1} pkts: utilization {util:.3}, queue mean {mean:.2} pkts, peak {peak:.1} (start-up {startup_peak:.1}), retransmits {}",
        rtt * 1e6,
        flow.retransmits()
    );
    assert!(util >= 0.90, "utilization {util:.3} < 0.90");
    assert!(mean < 0.25 * bdp_pkts, "mean queue {mean:.2} packets >= BDP/4 = {:.1}", bdp_pkts / 4.0);
    assert!(peak < bdp_pkts, "queue peak {peak:.1} packets after start-up >= one BDP ({bdp_pkts:.1})");
    assert_eq!(world.counters().drops(), 0);
}
