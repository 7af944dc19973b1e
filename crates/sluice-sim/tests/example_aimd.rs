//! The worked example of docs/writing-a-cc.md, run through the simulator: one `example_aimd`
//! flow on a 100 us path whose bottleneck marks ECN (classic, step at 65 packets). With no slow
//! start the window climbs `increase` segments per round trip until the queue marks, then is
//! multiplied by `decrease`. Tolerances: growth within 10% of `increase` segments per base RTT
//! (the growth queues a little at the bottleneck, so real round trips are slightly longer), the
//! growth law per acked byte within 2%, and each cut within 2% of `decrease` (the window may grow
//! by a fraction of a segment between the last sample and the cut).

mod common;
use common::run_text;
use sluice_sim::time::Time;
use sluice_sim::world::World;

const SCENARIO: &str = r#"
[sim]
duration = "40ms"
[topology]
kind = "dumbbell"
left = 1
right = 1
host_rate = "40Gbps"
host_delay = "1us"
core_rate = "10Gbps"
core_delay = "48us"
[switch.ecn]
mode = "step"
k = "99970B"
[transport]
rto_min = "5ms"
[classes.bulk]
cc = "example_aimd"
[classes.bulk.params]
ecn = true
[[workloads]]
kind = "bulk"
class = "bulk"
senders = [0]
receiver = 1
[output.cwnd]
interval = "1us"
flows = [0]
"#;

const MSS: f64 = 1448.0;

/// Segments per base RTT the window grew over the first `span` of the run.
fn growth_per_rtt(world: &World, span: Time) -> f64 {
    let s = world.cwnd_samples();
    let end = s.iter().find(|c| c.t >= span).unwrap();
    let rtts = span.secs_f64() / world.flows()[0].base_rtt.secs_f64();
    (end.cwnd as f64 - s[0].cwnd as f64) / MSS / rtts
}

#[test]
fn example_aimd_grows_linearly_and_cuts_by_its_decrease_factor() {
    let world = run_text(SCENARIO, &[]);
    let growth = growth_per_rtt(&world, Time::from_ms(5));
    let cuts: Vec<f64> = world
        .cwnd_samples()
        .windows(2)
        .filter(|w| w[1].cwnd < w[0].cwnd)
        .map(|w| w[1].cwnd as f64 / w[0].cwnd as f64)
        .collect();
    println!("growth {growth:.3} segments per RTT; cuts {cuts:.3?}");
    assert!((growth - 1.0).abs() <= 0.10, "growth {growth:.3} segments per RTT, expected 1");
    assert!(cuts.len() >= 3, "{} cuts in 40 ms", cuts.len());
    for r in &cuts {
        assert!((r - 0.5).abs() <= 0.02 * 0.5, "cut ratio {r:.4}, expected 0.5");
    }
    assert_eq!(world.counters().drops(), 0, "ECN keeps the queue below the buffer");
    let flow = &world.flows()[0];
    assert_eq!(world.classes()[flow.class as usize].cc, "example_aimd");

    // Parameters reach the algorithm through the class table, as `--set` writes them. Checked
    // against the growth law itself, which holds whatever the RTT: each acked byte adds
    // increase * MSS / cwnd, so cwnd^2 grows by 2 * increase * MSS per byte acked.
    let world = run_text(SCENARIO, &["sim.duration=\"2ms\"", "classes.bulk.params.increase=4.0"]);
    let sender = world.flows()[0].sender().expect("the endless flow is still open");
    let (w0, w1) = (10.0 * MSS, sender.win.cwnd as f64);
    let increase = (w1 * w1 - w0 * w0) / (2.0 * MSS * sender.una as f64);
    println!(
        "with increase = 4: window {:.1} segments after {} bytes acked: increase {increase:.3}",
        w1 / MSS,
        sender.una
    );
    assert!((increase - 4.0).abs() <= 0.02 * 4.0, "measured increase {increase:.3}, expected 4 (2%)");
    assert!(world.cwnd_samples().windows(2).all(|w| w[1].cwnd >= w[0].cwnd), "no cut in 2 ms");
}

#[test]
fn the_guide_shows_the_example_exactly_as_it_is() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../../docs/writing-a-cc.md")).unwrap();
    let src = std::fs::read_to_string(root.join("src/cc/example_aimd.rs")).unwrap();
    assert!(
        doc.contains(&format!("```rust\n{src}```")),
        "docs/writing-a-cc.md is out of date with src/cc/example_aimd.rs"
    );
    let registry = std::fs::read_to_string(root.join("src/cc/mod.rs")).unwrap();
    let entry = doc
        .split("    AlgorithmInfo {\n        name: \"example_aimd\"")
        .nth(1)
        .and_then(|s| s.split("    },").next())
        .unwrap();
    assert!(registry.contains(entry), "the guide's registry entry differs from cc/mod.rs");
}
