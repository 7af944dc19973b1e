//! A run's outputs do not depend on how its partitions are scheduled: partitions that take turns
//! window by window, each on its own event list, first to last or last to first, and partitions
//! run by 2, 3, 4 or 7 threads write every output byte for byte as the one interleaved list does.

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
    /// This many threads, each running a replica of the world for its share of the partitions.
    Threads(usize),
}

/// Every schedule compared against the one list.
const SCHEDULES: [Schedule; 6] =
    [Schedule::Turns(false), Schedule::Turns(true), Schedule::Threads(2), Schedule::Threads(3), Schedule::Threads(4), Schedule::Threads(7)];

/// Runs scenario file `rel` with `overrides` under `schedule`; every output file's bytes by name,
/// the partition count, and the threads the run used.
fn outputs(rel: &str, overrides: &[&str], schedule: Schedule) -> (BTreeMap<String, Vec<u8>>, usize, usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel);
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let loaded = scenario::load(&path, &overrides).unwrap_or_else(|e| panic!("{e}"));
    let mut world = scenario::build(&loaded).unwrap_or_else(|e| panic!("{e}"));
    let threads = match schedule {
        Schedule::Interleaved => {
            world.run(&mut |_| {});
            1
        }
        Schedule::Turns(reversed) => {
            world.take_turns(reversed);
            world.run(&mut |_| {});
            1
        }
        Schedule::Threads(n) => {
            let threads = world.spread(n);
            world.run(&mut |_| {});
            threads
        }
    };
    world.check_conservation().unwrap_or_else(|e| panic!("{rel} {schedule:?}: {e}"));
    let dir = tempfile::tempdir().unwrap();
    metrics::write_outputs(&world, dir.path(), 0.0).unwrap();
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        files.insert(path.file_name().unwrap().to_string_lossy().to_string(), std::fs::read(&path).unwrap());
    }
    (files, world.partitions().count, threads)
}

/// Asserts that `rel`'s outputs are the same under every schedule, and that it has `parts`
/// partitions or more (with one, every schedule is the one list, and threads go unused).
fn same_under_every_schedule(rel: &str, overrides: &[&str], parts: usize) {
    let (one, count, _) = outputs(rel, overrides, Schedule::Interleaved);
    assert!(count >= parts, "{rel}: {count} partitions, expected at least {parts}");
    for schedule in SCHEDULES {
        let (other, _, threads) = outputs(rel, overrides, schedule);
        if let Schedule::Threads(n) = schedule {
            assert_eq!(threads, n.min(count), "{rel}: threads used when {n} were asked");
        }
        assert_eq!(one.keys().collect::<Vec<_>>(), other.keys().collect::<Vec<_>>(), "{rel}");
        for (name, bytes) in &one {
            assert!(bytes == &other[name], "{rel}: {name} differs under {schedule:?}");
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
fn collectives_are_the_same_under_every_schedule() {
    // Messages that wait for messages: each starts at its own host when what it waits for
    // arrives there or is acknowledged there, across racks, over three iterations.
    same_under_every_schedule("scenarios/collective_allreduce.toml", &[], 4);
}

#[test]
fn bulk_on_a_fat_tree_is_the_same_under_every_schedule() {
    same_under_every_schedule("scenarios/fat_tree_bulk.toml", &["sim.duration=\"1ms\""], 4);
}

#[test]
fn link_failures_are_the_same_under_every_schedule() {
    // A link down for a while, one slow from the start and one slowed one way mid-run: each
    // change is an event of the partition sending on the link.
    let failures = concat!(
        "failures=[",
        "{link=\"sw0->sw8\", at=\"500us\", until=\"1200us\", down=true},",
        "{link=\"sw3->sw10\", rate=0.25},",
        "{link=\"sw9->sw5\", one_way=true, at=\"300us\", rate=0.5}]"
    );
    same_under_every_schedule("scenarios/websearch_leafspine.toml", &["sim.duration=\"2ms\"", failures], 4);
}

#[test]
fn trimming_and_spraying_are_the_same_under_every_schedule() {
    // Every switch port trims at 20 KB, its coin drawn from each partition's own stream, and
    // every flow sprays its packets over the spines, with a spine link down for a while.
    let trim = ["sim.duration=\"2ms\"", "switch.trim.threshold=\"20KB\"", "classes.default.spray=true", "classes.default.cc=\"cubic\"", "transport.ecn=false"];
    let failure = "failures=[{link=\"sw0->sw8\", at=\"500us\", until=\"1200us\", down=true}]";
    let overrides = [&trim[..], &[failure]].concat();
    let (one, _, _) = outputs("scenarios/websearch_leafspine.toml", &overrides, Schedule::Interleaved);
    let summary: serde_json::Value = serde_json::from_slice(&one["summary.json"]).unwrap();
    let (trimmed, evicted) = (&summary["trimming"]["trimmed"], &summary["trimming"]["evicted"]);
    assert!(trimmed.as_u64() > Some(100) && evicted.as_u64() > Some(100), "{trimmed} trimmed, {evicted} evicted");
    same_under_every_schedule("scenarios/websearch_leafspine.toml", &overrides, 4);
}

#[test]
fn the_ultra_ethernet_transport_is_the_same_under_every_schedule() {
    // NSCC flows, each packet on an entropy its flow's mixed policy draws, through switches
    // that trim at 20 KB, their receivers NACKing the headers.
    let uet = ["sim.duration=\"2ms\"", "switch.trim.threshold=\"20KB\"", "classes.default.cc=\"nscc\"", "classes.default.transport=\"uet\""];
    let (one, _, _) = outputs("scenarios/websearch_leafspine.toml", &uet, Schedule::Interleaved);
    let summary: serde_json::Value = serde_json::from_slice(&one["summary.json"]).unwrap();
    let nacks = &summary["uet"]["nacks"];
    assert!(nacks.as_u64() > Some(100), "{nacks} NACKs");
    same_under_every_schedule("scenarios/websearch_leafspine.toml", &uet, 4);
}

#[test]
fn receiver_credit_is_the_same_under_every_schedule() {
    // RCCC beside NSCC: each receiving host's pull pacer grants its flows credit in turn, its
    // events and PULLs those of the host's partition.
    let credit = [
        "sim.duration=\"2ms\"",
        "switch.trim.threshold=\"20KB\"",
        "classes.default.cc=\"nscc\"",
        "classes.default.params={ receiver_cc = true }",
        "classes.default.transport=\"uet\"",
    ];
    let (one, _, _) = outputs("scenarios/websearch_leafspine.toml", &credit, Schedule::Interleaved);
    let summary: serde_json::Value = serde_json::from_slice(&one["summary.json"]).unwrap();
    let pulls = &summary["uet"]["pulls"];
    assert!(pulls.as_u64() > Some(1000), "{pulls} PULLs");
    same_under_every_schedule("scenarios/websearch_leafspine.toml", &credit, 4);
}

#[test]
fn the_receivers_oversubscription_control_is_the_same_under_every_schedule() {
    // RCCC alone with the spines slowed to 25 Gb/s, 4:1: each receiving host's control counts
    // what its flows take and sets its pacer's rate, its timer an event of the host's partition.
    let over = |on: &str| {
        vec![
            "sim.duration=\"2ms\"".to_string(),
            "topology.fabric_rate=\"25Gbps\"".into(),
            "switch.trim.threshold=\"20KB\"".into(),
            "classes.default.cc=\"rccc\"".into(),
            format!("classes.default.params={{ oversubscribed_cc = {on} }}"),
            "classes.default.transport=\"uet\"".into(),
        ]
    };
    let nacks = |on: &str| {
        let args = over(on);
        let (one, _, _) = outputs("scenarios/websearch_leafspine.toml", &args.iter().map(String::as_str).collect::<Vec<_>>(), Schedule::Interleaved);
        let summary: serde_json::Value = serde_json::from_slice(&one["summary.json"]).unwrap();
        summary["uet"]["nacks"].as_u64().unwrap()
    };
    let (with, without) = (nacks("\"auto\""), nacks("false"));
    assert!(without > 1000 && with * 2 < without, "{with} NACKs with the control, {without} without");
    let args = over("\"auto\"");
    same_under_every_schedule("scenarios/websearch_leafspine.toml", &args.iter().map(String::as_str).collect::<Vec<_>>(), 4);
}

#[test]
fn every_log_is_the_same_under_every_schedule() {
    // Capture (cut short, so which packets are kept matters), TCP-INT telemetry rows, window
    // and queue samples, each written by several partitions at the same instants.
    let logs = [
        "sim.duration=\"1ms\"",
        "int.all_flows=true",
        "classes.default.cc=\"ecn_int\"",
        "output.telemetry.interval=\"0us\"",
        "output.pcap.ports=[\"sw0\", \"sw9\"]",
        "output.pcap.max_packets=20000",
        "output.cwnd.interval=\"5us\"",
        "output.queues.interval=\"5us\"",
        "output.queues.ports=[\"sw1\", \"sw10\", \"h3\"]",
    ];
    same_under_every_schedule("scenarios/websearch_leafspine.toml", &logs, 4);
}

#[test]
fn one_partition_runs_on_one_thread_however_many_are_asked() {
    // Storage behind one switch tier, queue pairs under PFC, a key-value store on offloading
    // NICs: one partition each, so one thread, and the same outputs.
    for rel in ["scenarios/pfc_incast.toml", "scenarios/rdma_incast.toml", "scenarios/acceltcp_kv.toml"] {
        same_under_every_schedule(rel, &["sim.duration=\"2ms\""], 1);
    }
}
