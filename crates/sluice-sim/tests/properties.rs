//! The engine's invariants on random small scenarios: a random topology of every supported kind,
//! a random workload, algorithm and loss rate. Each scenario is checked and run; then packet and
//! byte conservation (exactly-once, in-order delivery) hold, every figure in every output file is
//! a finite non-negative number, utilization lies in [0, 1], and a second run with the same seed
//! writes byte-identical files, also when its partitions take turns window by window, last to
//! first, each on its own event list (as threads will run them).

use proptest::prelude::*;
use sluice_sim::{metrics, scenario};
use std::collections::BTreeMap;
use std::path::Path;

/// Algorithms drawn for the default class: every registered one that needs no parameters and
/// runs on TCP and RDMA, the transports drawn here (UET's have `tests/uet.rs`).
fn algorithms() -> Vec<String> {
    use sluice_sim::cc::{Transports, REGISTRY};
    REGISTRY.iter().filter(|a| a.transports.has(Transports::TCP_RDMA)).map(|a| a.name.to_string()).collect()
}

/// A topology table and its host count.
fn topology() -> impl Strategy<Value = (String, usize)> {
    let rate = prop::sample::select(vec!["1Gbps", "10Gbps", "25Gbps"]);
    let delay = prop::sample::select(vec!["1us", "2us", "5us"]);
    let loss = prop::sample::select(vec![0.0, 0.0, 0.001, 0.01]);
    let kind = prop_oneof![
        (2u32..6).prop_map(|h| (format!("kind = \"star\"\nhosts = {h}"), h as usize)),
        (1u32..3, 1u32..3).prop_map(|(l, r)| (
            format!("kind = \"dumbbell\"\nleft = {l}\nright = {r}\ncore_rate = \"10Gbps\"\ncore_delay = \"2us\""),
            (l + r) as usize
        )),
        (1u32..3, 1u32..3).prop_map(|(h, s)| (
            format!("kind = \"leaf_spine\"\nhosts_per_leaf = {h}\nleaves = 2\nspines = {s}\nfabric_rate = \"40Gbps\"\nfabric_delay = \"1us\""),
            (2 * h) as usize
        )),
        Just(("kind = \"fat_tree\"\nk = 2\nagg_rate = \"10Gbps\"\nagg_delay = \"1us\"\ncore_rate = \"10Gbps\"\ncore_delay = \"1us\"".to_string(), 2)),
        (2u32..4, 1u32..3).prop_map(|(racks, per)| (
            format!(
                "kind = \"rdcn\"\nracks = {racks}\nhosts_per_rack = {per}\npacket_rate = \"10Gbps\"\npacket_delay = \"2us\"\n\
                 circuit_rate = \"40Gbps\"\ncircuit_delay = \"4us\""
            ),
            (racks * per) as usize
        )),
    ];
    (kind, rate, delay, loss).prop_map(|((table, hosts), rate, delay, loss)| {
        (format!("{table}\nhost_rate = \"{rate}\"\nhost_delay = \"{delay}\"\nhost_loss = {loss}"), hosts)
    })
}

/// The `[circuit]` table of an `rdcn` topology: a strobe of random days and nights, small VOQs,
/// resizing and the ECE signal on or off.
fn circuit() -> impl Strategy<Value = String> {
    (10u64..100, 1u64..10, 0u32..3, 2u32..20, 0u64..200, any::<bool>()).prop_map(|(day, night, extra, voq, tau, ece)| {
        format!(
            "[circuit]\nday = \"{day}us\"\nnight = \"{night}us\"\nstrobe_racks = {}\nvoq_packets = {voq}\n\
             voq_large_packets = {}\ntau = \"{tau}us\"\nece_signal = {ece}\n",
            4 + extra,
            2 * voq
        )
    })
}

/// A workload over `hosts` hosts: explicit flows, a permutation or Poisson arrivals.
fn workload(hosts: usize) -> impl Strategy<Value = String> {
    let flow = (0..hosts, 1..hosts, 1u64..150, 0u64..50)
        .prop_map(move |(s, off, kb, us)| format!("{{ src = {s}, dst = {}, size = \"{kb}KB\", start = \"{us}us\" }}", (s + off) % hosts));
    prop_oneof![
        prop::collection::vec(flow, 1..5).prop_map(|f| format!("kind = \"flows\"\nflows = [{}]", f.join(", "))),
        (1u64..100).prop_map(|kb| format!("kind = \"permutation\"\nsize = \"{kb}KB\"")),
        (2u32..6).prop_map(|l| format!("kind = \"poisson\"\nsize = \"2KB\"\nload = 0.{l}\nduration = \"300us\"")),
    ]
}

fn scenario_text() -> impl Strategy<Value = String> {
    // A third of the scenarios run on RDMA queue pairs, with either loss recovery.
    let transport = prop::sample::select(vec![
        "",
        "",
        "transport = \"rdma\"\n[rdma]\nrecovery = \"gbn\"\n",
        "transport = \"rdma\"\n[rdma]\nrecovery = \"irn\"\n",
    ]);
    // A quarter of them trim at every switch port, and half spray each packet.
    let trim = prop::sample::select(vec!["", "", "", "[switch.trim]\nthreshold = \"12KB\"\n", "[switch.trim]\nthreshold = \"20KB\"\nvictim = \"arrival\"\n"]);
    let fabric = (trim, any::<bool>());
    (topology(), prop::sample::select(algorithms()), any::<u64>(), transport, circuit(), fabric).prop_flat_map(|((topo, hosts), cc, seed, transport, circuit, (trim, spray))| {
        // A circuit network carries TCP only.
        let (transport, circuit) = if topo.contains("rdcn") { ("", circuit) } else { (transport, String::new()) };
        workload(hosts).prop_map(move |w| {
            format!(
                "[sim]\nduration = \"1ms\"\nseed = {}\n\n[topology]\n{topo}\n\n[switch]\nbuffer = \"1MB\"\n\n\
                 [switch.ecn]\nmode = \"step\"\nk = \"30KB\"\n{trim}\n[classes.default]\ncc = \"{cc}\"\nspray = {spray}\n{transport}\n\
                 [[workloads]]\n{w}\n\n[output.queues]\ninterval = \"20us\"\nports = [\"sw0\"]\n\n\
                 [output.cwnd]\ninterval = \"20us\"\n{circuit}",
                seed >> 1
            )
        })
    })
}

/// How a run's partitions are scheduled.
#[derive(Clone, Copy, Debug)]
enum Schedule {
    /// One event list.
    OneList,
    /// Turns window by window, last partition first.
    TurnsReversed,
    /// This many threads.
    Threads(usize),
}

/// Builds, runs and writes the outputs of `text` under `schedule`; returns each output file's
/// bytes by name.
fn run(text: &str, dir: &Path, schedule: Schedule) -> Result<BTreeMap<String, Vec<u8>>, TestCaseError> {
    let loaded = scenario::parse(text, "prop.toml", Path::new("."), &[]).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut world = sluice_sim::scenario::build(&loaded).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    match schedule {
        Schedule::OneList => world.run(&mut |_| {}),
        Schedule::TurnsReversed => {
            world.take_turns(true);
            world.run(&mut |_| {});
        }
        Schedule::Threads(n) => {
            world.spread(n);
            world.run(&mut |_| {});
        }
    }
    world.check_conservation().map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    metrics::write_outputs(&world, dir, 0.0).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        files.insert(path.file_name().unwrap().to_string_lossy().to_string(), std::fs::read(&path).unwrap());
    }
    Ok(files)
}

/// Every numeric cell of a CSV file is finite and not negative; utilization is at most 1.
fn figures_are_proper(name: &str, text: &str) -> Result<(), String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    for (n, line) in lines.enumerate() {
        for (col, cell) in header.iter().zip(line.split(',')) {
            let lower = cell.to_ascii_lowercase();
            if lower.contains("nan") || lower.contains("inf") {
                return Err(format!("{name} line {}: {col} = {cell}", n + 2));
            }
            let Ok(v) = cell.parse::<f64>() else { continue };
            if v < 0.0 {
                return Err(format!("{name} line {}: {col} = {cell} is negative", n + 2));
            }
            if (*col == "utilization" || *col == "util") && v > 1.0 {
                return Err(format!("{name} line {}: {col} = {cell} is above line rate", n + 2));
            }
        }
    }
    Ok(())
}

/// Walks summary.json: no number in it is negative, and none is NaN or infinite (JSON has neither,
/// so they would appear as null where a figure belongs).
fn summary_is_proper(v: &serde_json::Value, at: &str) -> Result<(), String> {
    match v {
        serde_json::Value::Number(n) if n.as_f64().is_some_and(|f| f < 0.0) => Err(format!("summary.json {at} = {n}")),
        serde_json::Value::Object(m) => m.iter().try_for_each(|(k, v)| summary_is_proper(v, &format!("{at}.{k}"))),
        serde_json::Value::Array(a) => a.iter().enumerate().try_for_each(|(i, v)| summary_is_proper(v, &format!("{at}[{i}]"))),
        _ => Ok(()),
    }
}

proptest! {
    // A fixed seed: the suite checks the same 200 scenarios on every run.
    #![proptest_config(ProptestConfig {
        cases: 200,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(14),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_small_scenarios_keep_the_engine_invariants(text in scenario_text(), threads in 2usize..=4) {
        let dir = tempfile::tempdir().unwrap();
        let first = run(&text, dir.path(), Schedule::OneList)?;
        prop_assert!(first.contains_key("flows.csv") && first.contains_key("summary.json"), "{:?}", first.keys());
        for (name, bytes) in &first {
            let text_of = String::from_utf8_lossy(bytes);
            if name.ends_with(".csv") {
                figures_are_proper(name, &text_of).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            } else if name == "summary.json" {
                let v: serde_json::Value = serde_json::from_str(&text_of).unwrap();
                summary_is_proper(&v, "").map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            }
        }
        // Same scenario, same seed: identical outputs (summary.json holds the wall time, given as
        // 0), however the partitions are scheduled: taking turns, or on threads.
        for schedule in [Schedule::TurnsReversed, Schedule::Threads(threads)] {
            let dir = tempfile::tempdir().unwrap();
            let second = run(&text, dir.path(), schedule)?;
            prop_assert_eq!(first.keys().collect::<Vec<_>>(), second.keys().collect::<Vec<_>>());
            for (name, bytes) in &first {
                prop_assert!(bytes == &second[name], "{} differs under {:?} from one list in\n{}", name, schedule, text);
            }
        }
    }
}
