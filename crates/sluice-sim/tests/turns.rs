//! A run's order does not depend on how its partitions are scheduled: partitions that take turns
//! window by window, each on its own event list, first to last or last to first (as threads will
//! run them), write every output byte for byte as the one interleaved list does.

use sluice_sim::{metrics, scenario};
use std::collections::BTreeMap;
use std::path::Path;

/// How the partitions of a run are scheduled.
#[derive(Clone, Copy, Debug)]
enum Schedule {
    /// One list for all, events interleaved in the canonical order.
    Interleaved,
    /// A list per partition, turns window by window: first to last, or (`true`) last to first.
    Turns(bool),
}

/// Runs scenario file `rel` with `overrides` under `schedule`; every output file's bytes by name,
/// and the partition count.
fn outputs(rel: &str, overrides: &[&str], schedule: Schedule) -> (BTreeMap<String, Vec<u8>>, usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel);
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let loaded = scenario::load(&path, &overrides).unwrap_or_else(|e| panic!("{e}"));
    let mut world = scenario::build(&loaded).unwrap_or_else(|e| panic!("{e}"));
    if let Schedule::Turns(reversed) = schedule {
        world.take_turns(reversed);
    }
    world.run(&mut |_| {});
    world.check_conservation().unwrap_or_else(|e| panic!("{rel} {schedule:?}: {e}"));
    let dir = tempfile::tempdir().unwrap();
    metrics::write_outputs(&world, dir.path(), 0.0).unwrap();
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        files.insert(path.file_name().unwrap().to_string_lossy().to_string(), std::fs::read(&path).unwrap());
    }
    (files, world.partitions().count)
}

/// Asserts that `rel`'s outputs are the same under every schedule, and that it has at least
/// `parts` partitions (else the check would compare a run with itself).
fn same_under_every_schedule(rel: &str, overrides: &[&str], parts: usize) {
    let (one, count) = outputs(rel, overrides, Schedule::Interleaved);
    assert!(count >= parts, "{rel}: {count} partitions, expected at least {parts}");
    for reversed in [false, true] {
        let (turns, _) = outputs(rel, overrides, Schedule::Turns(reversed));
        assert_eq!(one.keys().collect::<Vec<_>>(), turns.keys().collect::<Vec<_>>(), "{rel}");
        for (name, bytes) in &one {
            assert!(bytes == &turns[name], "{rel}: {name} differs when partitions take turns (reversed: {reversed})");
        }
    }
}

#[test]
fn websearch_on_a_leaf_spine_is_the_same_under_every_schedule() {
    same_under_every_schedule("scenarios/websearch_leafspine.toml", &["sim.duration=\"2ms\""], 4);
}

#[test]
fn hpcc_on_a_fat_tree_is_the_same_under_every_schedule() {
    same_under_every_schedule("scenarios/hpcc_ws320.toml", &["sim.duration=\"300us\""], 4);
}

#[test]
fn tlt_on_tcp_is_the_same_under_every_schedule() {
    // Duplicates reach a flow's ends after one of them closed: each end closes by itself.
    same_under_every_schedule("scenarios/tlt_leafspine.toml", &["sim.duration=\"4ms\""], 2);
}

#[test]
fn tlt_on_rdma_is_the_same_under_every_schedule() {
    same_under_every_schedule("scenarios/tlt_rdma.toml", &["sim.duration=\"4ms\""], 2);
}

#[test]
fn circuits_are_the_same_under_every_schedule() {
    // Circuit days are the run's own events, cutting windows; each ToR acts for its partition.
    same_under_every_schedule("scenarios/rdcn_etalon.toml", &["sim.duration=\"3ms\""], 2);
}

#[test]
fn connections_that_open_and_close_are_the_same_under_every_schedule() {
    // A handshake, and a close in both directions with TIME_WAIT, across racks.
    same_under_every_schedule("scenarios/quickstart.toml", &[], 4);
}

#[test]
fn bulk_on_a_fat_tree_is_the_same_under_every_schedule() {
    same_under_every_schedule("scenarios/fat_tree_bulk.toml", &["sim.duration=\"1ms\""], 4);
}
