//! Helpers shared by the integration tests: build a world from scenario text, run it, and check
//! conservation on every run.
#![allow(dead_code)]

use sluice_sim::scenario;
use sluice_sim::world::World;
use std::path::Path;

/// Builds and runs a scenario given as TOML text; asserts conservation before returning.
pub fn run_text(text: &str, overrides: &[&str]) -> World {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let loaded = scenario::parse(text, "test.toml", Path::new("."), &overrides).unwrap_or_else(|e| panic!("{e}"));
    let mut world = sluice_sim::scenario::build(&loaded).unwrap_or_else(|e| panic!("{e}"));
    world.run(&mut |_| {});
    world.check_conservation().unwrap_or_else(|e| panic!("{e}"));
    world
}

/// Builds and runs a scenario file of the repository; asserts conservation.
pub fn run_file(rel: &str, overrides: &[&str]) -> World {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel);
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let loaded = scenario::load(&path, &overrides).unwrap_or_else(|e| panic!("{e}"));
    let mut world = sluice_sim::scenario::build(&loaded).unwrap_or_else(|e| panic!("{e}"));
    world.run(&mut |_| {});
    world.check_conservation().unwrap_or_else(|e| panic!("{e}"));
    world
}

/// The UEC reference simulator's fabric with no `-topo` (uet-htsim `main_uec.cpp:642-711`): a
/// three-tier k-ary fat tree of 100 Gb/s links of 1 µs, queues that trim past 178,450 bytes and
/// mark by RED at dequeue between 37,350 and 145,250 bytes, and no framing, as it counts none.
/// With `quiet_tor_downlinks`, ToR ports towards hosts mark no ECN, as the reference's do while
/// receiver credit runs (`main_uec.cpp:708`). It ends in the `[uet]` table, for more of its keys.
pub fn uet_reference_fabric(k: usize, quiet_tor_downlinks: bool) -> String {
    let mut text = UET_REFERENCE_FABRIC.replacen("k = K", &format!("k = {k}"), 1);
    if quiet_tor_downlinks {
        for h in 0..k * k * k / 4 {
            text += &format!("[switch.ports.\"sw{}->h{h}\".ecn]\nmode = \"off\"\n", h / (k / 2));
        }
    }
    text + "[uet]\nframing = 0\n"
}

const UET_REFERENCE_FABRIC: &str = r#"
[sim]
seed = 1
[topology]
kind = "fat_tree"
k = K
host_rate = "100Gbps"
host_delay = "1us"
agg_rate = "100Gbps"
agg_delay = "1us"
core_rate = "100Gbps"
core_delay = "1us"
[switch]
buffer = "64MB"
[switch.ecn]
mode = "red"
kmin = "37350B"
kmax = "145250B"
pmax = 1.0
mark_at = "dequeue"
[switch.trim]
threshold = "178450B"
header = "64B"
"#;

/// The UET transport's counts in a run's summary (`summary.json`'s `uet`).
pub fn uet_counts(world: &World) -> serde_json::Value {
    serde_json::to_value(sluice_sim::metrics::summarize(world, 0.0)).unwrap()["uet"].clone()
}

/// Every flow's finish time in µs, in flow order; each flow must have finished.
pub fn finish_us(world: &World) -> Vec<f64> {
    world.flows().iter().map(|f| f.finish.expect("every flow finishes").ps() as f64 / 1e6).collect()
}

/// Wire bytes of one full-size frame at MTU 1500 (payload, TCP+timestamps, IP, Ethernet framing).
pub const FRAME: f64 = 1538.0;

/// What a scenario given as TOML text (read as file `name`) is refused with: as it is read (a bad
/// key, with its line) or as it is built (a bad value). Panics if it is accepted.
pub fn refusal(text: &str, name: &str) -> String {
    let loaded = match scenario::parse(text, name, Path::new("."), &[]) {
        Ok(loaded) => loaded,
        Err(e) => return e.to_string(),
    };
    match scenario::build(&loaded) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}
