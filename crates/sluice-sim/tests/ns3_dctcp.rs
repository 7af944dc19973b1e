//! ns-3's `examples/tcp/dctcp-example.cc` (the DCTCP paper's Fig. 17 fabric, 40 DCTCP flows over two
//! bottlenecks) in `scenarios/ns3_dctcp_example.toml`, against ns-3-dev's own runs of it
//! (`ns3_dctcp_reference/`): each group's mean goodput over 4-5 s within 10 % of the example's
//! stated figures (S1 23, S2 471, S3 74 Mb/s) and of the mean of ns-3-dev's three runs.

mod common;
use common::run_file;
use std::collections::BTreeMap;

const SCENARIO: &str = "scenarios/ns3_dctcp_example.toml";

/// Bytes each flow had delivered when a run of the scenario ended at `end`.
fn delivered_by(end: &str) -> Vec<(String, u64)> {
    let world = run_file(SCENARIO, &[&format!("sim.duration=\"{end}\"")]);
    world.flows().iter().map(|f| (world.classes()[f.class as usize].name.clone(), f.bytes_delivered())).collect()
}

/// ns-3-dev's mean per-flow goodput of each group, over its runs.
fn ns3_means() -> BTreeMap<String, f64> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ns3_dctcp_reference/results.csv");
    let mut sums: BTreeMap<String, (f64, u32)> = BTreeMap::new();
    for row in csv::Reader::from_path(path).unwrap().records() {
        let row = row.unwrap();
        let e = sums.entry(row[1].to_string()).or_default();
        e.0 += row[3].parse::<f64>().unwrap();
        e.1 += 1;
    }
    assert_eq!(sums.values().map(|s| s.1).sum::<u32>(), 3 * 40, "three runs of 40 flows");
    sums.into_iter().map(|(g, (sum, n))| (g, sum / n as f64)).collect()
}

#[test]
fn each_group_moves_what_ns3_moves() {
    let (start, end) = (delivered_by("4s"), delivered_by("5s"));
    let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for ((class, a), (_, b)) in start.iter().zip(&end) {
        groups.entry(class.clone()).or_default().push((b - a) as f64 * 8.0 / 1e6);
    }
    let ns3 = ns3_means();
    let stated = [("s1", 23.0), ("s2", 471.0), ("s3", 74.0)];
    for (group, example) in stated {
        let flows = &groups[group];
        let mean = flows.iter().sum::<f64>() / flows.len() as f64;
        let jain = flows.iter().sum::<f64>().powi(2) / (flows.len() as f64 * flows.iter().map(|x| x * x).sum::<f64>());
        let dev = ns3[group];
        println!(
            "{group}: {mean:.1} Mb/s per flow (Jain {jain:.3}); the example states {example}, ns-3-dev's runs {dev:.1}"
        );
        assert!((mean / example - 1.0).abs() <= 0.10, "{group}: {mean:.1} Mb/s, the example's figure {example} (10 %)");
        assert!((mean / dev - 1.0).abs() <= 0.10, "{group}: {mean:.1} Mb/s, ns-3-dev's {dev:.1} (10 %)");
        // ns-3's S1 flows share less evenly (Jain 0.87-0.95): in two of its three runs one of
        // them moves under 0.2 Mb/s, its window under three segments and each round held by the
        // 200 ms delayed ACK (ns-3's DCTCP keeps no floor; sluice's keeps two segments).
        assert!(jain > 0.95, "{group}: the flows of one group share evenly: Jain {jain:.3}");
    }
    // The two bottlenecks are full: 10 Gb/s through T1, 1 Gb/s to R1, as goodput (1448 of 1502).
    let sum = |g: &str| groups[g].iter().sum::<f64>();
    let goodput = 1448.0 / 1502.0;
    assert!((sum("s1") + sum("s2")) / (10_000.0 * goodput) > 0.99, "T1->T2 carries {:.0} Mb/s", sum("s1") + sum("s2"));
    assert!((sum("s1") + sum("s3")) / (1_000.0 * goodput) > 0.99, "T2->R1 carries {:.0} Mb/s", sum("s1") + sum("s3"));
}
