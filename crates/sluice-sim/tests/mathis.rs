//! NewReno under random loss against the Mathis et al. model (CCR 1997):
//! throughput = (MSS / RTT) * sqrt(3/2) / sqrt(p). Tolerance 25%, as the issue sets.

mod common;
use common::run_text;

fn scenario(p: f64) -> String {
    format!(
        r#"
[sim]
duration = "20s"
[topology]
kind = "dumbbell"
left = 1
right = 1
host_rate = "10Gbps"
host_delay = "1us"
core_rate = "10Gbps"
core_delay = "496us"
core_loss = {p}
[transport]
rto_min = "5ms"
[classes.default]
cc = "newreno"
[[workloads]]
kind = "bulk"
senders = [0]
receiver = 1
"#
    )
}

fn check(p: f64) {
    let world = run_text(&scenario(p), &[]);
    let flow = &world.flows()[0];
    let rtt = flow.base_rtt.secs_f64();
    let mss = 1448.0;
    let model = mss * 8.0 / rtt * (1.5f64).sqrt() / p.sqrt();
    let measured = flow.bytes_delivered() as f64 * 8.0 / world.now().secs_f64();
    println!("p = {p}: RTT {:.1} us, measured {:.1} Mb/s, Mathis {:.1} Mb/s", rtt * 1e6, measured / 1e6, model / 1e6);
    assert!((measured - model).abs() <= 0.25 * model, "p = {p}: {measured:.0} b/s vs model {model:.0} b/s");
}

#[test]
fn newreno_matches_mathis_at_loss_0_001() {
    check(0.001);
}

#[test]
fn newreno_matches_mathis_at_loss_0_01() {
    check(0.01);
}
