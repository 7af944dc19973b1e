//! TCP-INT end to end in the simulator: stamping along a path, the echo, and the algorithms that
//! consume it (ECN+INT, HPTCP).

mod common;

use common::run_text;
use sluice_sim::time::Time;

/// Two long flows into one 100 Gb/s port behind a star switch; 4 x 2 us of propagation per RTT.
fn two_flows(cc: &str, extra: &str) -> String {
    format!(
        r#"
[sim]
duration = "{dur}"
[topology]
kind = "star"
hosts = 3
host_rate = "100Gbps"
host_delay = "2us"
[switch]
buffer = "8MB"
[switch.ecn]
mode = "step"
k = "100KB"
[transport]
rto_min = "1ms"
[classes.default]
cc = "{cc}"
[[workloads]]
kind = "bulk"
senders = [0, 1]
receiver = 2
[output.queues]
interval = "1us"
ports = ["sw0->h2"]
{extra}
"#,
        dur = "5ms"
    )
}

#[test]
fn hptcp_fills_a_100g_bottleneck_with_a_small_standing_queue() {
    let world = run_text(&two_flows("hptcp", ""), &[]);
    let flows = world.flows();
    let rtt = flows[0].base_rtt;
    let bdp = 100e9 / 8.0 * rtt.secs_f64();
    let after = Time::from_secs_f64(1e-3);
    let samples: Vec<f64> = world.queue_samples().iter().filter(|s| s.t >= after).map(|s| s.bytes as f64).collect();
    let mean_q = samples.iter().sum::<f64>() / samples.len() as f64;
    let port = world.ports().iter().find(|p| world.node_name(p.node) == "sw0" && world.node_name(p.peer_node) == "h2").unwrap();
    let util = port.utilization(world.now());
    eprintln!("hptcp: util {util:.3} mean queue {mean_q:.0} B, BDP {bdp:.0} B, rtt {rtt}");
    assert!(util >= 0.90, "utilization {util}");
    assert!(mean_q < 0.1 * bdp, "standing queue {mean_q} B vs BDP {bdp} B");
}
