//! sluice against the HPCC paper's own simulator (alibaba-edu/High-Precision-Congestion-Control,
//! ns-3) on the same flows: the reference's flow completion times for two workloads and four
//! algorithms are stored in `hpcc_reference/ref/` (its README says how they were made), and each
//! test runs `hpcc_reference/scenario.toml` on the same flow file with the algorithm's `hpcc_sim`
//! parameter set.
//!
//! Source of the figures: the reference's `mix/fct_*.txt` and `mix/pfc_*.txt`. Tolerance: slowdown
//! p50, p95 and p99, for all flows, flows under 100 KB and flows of at least 1 MB, within 15% of
//! the reference's (computed as its `analysis/fct_analysis.py` does: max(1, fct / standalone fct),
//! the element at index int(n p) of the sorted list); PFC pauses within 2x, or both under 100.
//! `tools/hpcc-reference.py` prints the same comparison as a table (docs/rdma.md).

mod common;

use common::run_file;

const DIR: &str = "crates/sluice-sim/tests/hpcc_reference";

/// The flow groups compared: all, under 100 KB, at least 1 MB.
const GROUPS: [Group; 3] = [("all", |_| true), ("<100KB", |s| s < 100_000), (">=1MB", |s| s >= 1_000_000)];

/// A named set of flows by size.
type Group = (&'static str, fn(u64) -> bool);

/// Slowdowns and flow sizes of the reference's run, and its PFC pause count.
fn reference(cc: &str, workload: &str) -> (Vec<(u64, f64)>, u64) {
    let path = format!("{}/../../{DIR}/ref/{cc}_{workload}.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut pauses = None;
    let mut rows = Vec::new();
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("# pfc_pauses ") {
            pauses = Some(n.trim().parse().unwrap());
        } else if !line.starts_with('#') {
            let v: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
            rows.push((v[0], (v[1] as f64 / v[2] as f64).max(1.0)));
        }
    }
    (rows, pauses.expect("the reference's pause count"))
}

/// The percentile as the reference's analysis takes it: index int(n p) of the sorted values.
fn pctl(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() as f64 * p) as usize]
}

/// Runs sluice on the reference's flows and compares.
fn compare(cc: &str, workload: &str) {
    let mut sets = vec![format!("classes.default.cc={cc}"), format!("workloads.0.file={workload}.flows")];
    if cc == "dctcp_rate" {
        // run.py's DCTCP marks by a step at 30 bw / 10 KB with pmax 1 (kmin = kmax).
        for (rate, k) in [("100Gbps", 300_000), ("400Gbps", 1_200_000)] {
            let ecn = format!("switch.rates.\"{rate}\".ecn");
            sets.push(format!("{ecn}.kmin={k}B"));
            sets.push(format!("{ecn}.kmax={}B", k + 1));
            sets.push(format!("{ecn}.pmax=1.0"));
        }
    }
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let world = run_file(&format!("{DIR}/scenario.toml"), &sets);
    let ours: Vec<(u64, f64)> = world
        .flows()
        .iter()
        .map(|f| {
            let finish = f.finish.unwrap_or_else(|| panic!("{cc} {workload}: flow {} did not finish", f.id));
            let size = f.size.unwrap();
            (size, ((finish - f.start).0 as f64 / f.ideal_fct.0 as f64).max(1.0))
        })
        .collect();
    let (theirs, their_pauses) = reference(cc, workload);
    assert_eq!(ours.len(), theirs.len(), "{cc} {workload}: the same flows");
    let mut report = Vec::new();
    let mut worst: f64 = 0.0;
    for (name, keep) in GROUPS {
        let pick = |rows: &[(u64, f64)]| rows.iter().filter(|r| keep(r.0)).map(|r| r.1).collect::<Vec<_>>();
        let (a, b) = (pick(&ours), pick(&theirs));
        for p in [0.5, 0.95, 0.99] {
            let (x, y) = (pctl(a.clone(), p), pctl(b.clone(), p));
            let off = x / y - 1.0;
            worst = worst.max(off.abs());
            report.push(format!("{name} p{}: {x:.2} vs {y:.2} ({:+.0}%)", p * 100.0, off * 100.0));
        }
    }
    let pauses = world.counters().pfc_pauses;
    report.push(format!("PFC pauses {pauses} vs {their_pauses}"));
    eprintln!("{cc} {workload}: {}", report.join("; "));
    assert!(worst <= 0.15, "{cc} {workload}: a slowdown percentile is off by {:.0}%: {}", worst * 100.0, report.join("; "));
    let within_2x = pauses <= 2 * their_pauses && their_pauses <= 2 * pauses;
    assert!(within_2x || (pauses < 100 && their_pauses < 100), "{cc} {workload}: {}", report.join("; "));
}

#[test]
fn dcqcn_agrees_with_the_reference_on_websearch_at_50_percent() {
    compare("dcqcn", "ws50");
}

#[test]
fn dcqcn_agrees_with_the_reference_on_fb_hadoop_at_30_percent() {
    compare("dcqcn", "fb30");
}

#[test]
fn dctcp_rate_agrees_with_the_reference_on_websearch_at_50_percent() {
    compare("dctcp_rate", "ws50");
}

#[test]
fn dctcp_rate_agrees_with_the_reference_on_fb_hadoop_at_30_percent() {
    compare("dctcp_rate", "fb30");
}

#[test]
fn hpcc_agrees_with_the_reference_on_websearch_at_50_percent() {
    compare("hpcc", "ws50");
}

#[test]
fn hpcc_agrees_with_the_reference_on_fb_hadoop_at_30_percent() {
    compare("hpcc", "fb30");
}

#[test]
fn timely_agrees_with_the_reference_on_websearch_at_50_percent() {
    compare("timely", "ws50");
}

#[test]
fn timely_agrees_with_the_reference_on_fb_hadoop_at_30_percent() {
    compare("timely", "fb30");
}
