//! Collectives (`kind = "collective"`): each algorithm's completion time on an uncontended fabric
//! is its analytic value for its rank count, size, rate and latency; the collectives run on TCP,
//! RDMA and UET classes; and their outputs are the same bytes on 1, 2 and 3 threads.
//!
//! The analytic values: on a star of n hosts (one switch, links of rate R and delay d), a
//! message of m bytes that has its sender's link and its receiver's to itself arrives
//! T(m) = W(m)/R + F(m)/R + 2d after its first byte leaves: W(m) is its bytes on the wire (each
//! RoCE packet of up to 4,000 payload bytes with 82 bytes of IPv4, RoCE and Ethernet framing),
//! the switch forwards the last frame F(m) only once it has all of it (store and forward), and
//! each of the two links adds its delay. Two messages that share a link (two children sending to
//! one parent, or a parent's NIC sending to two children) take T2(m) = 2W(m)/R + F(m)/R + 2d:
//! the shared link is busy from the first frame to the last. A message that waits for another
//! starts when that one's last byte arrives (compute 0), so a chain of steps adds up. RDMA's
//! queue pairs start at line rate and, with ECN off, stay there; ACKs every 64 packets take a
//! thousandth of the reverse links.

mod common;

use sluice_sim::metrics;
use sluice_sim::scenario;
use sluice_sim::time::Time;
use sluice_sim::world::World;
use std::collections::BTreeMap;
use std::path::Path;

/// Link rate, bits per second.
const RATE: f64 = 100e9;
/// Link delay, seconds.
const DELAY: f64 = 1e-6;
/// RDMA payload per packet.
const MTU: u64 = 4000;
/// IPv4 (20) + RoCE (24) + Ethernet framing (38) bytes per packet.
const HEADERS: u64 = 82;

/// A star of `n` hosts at 100 Gb/s with 1 us links, RDMA with DCQCN and no ECN marking, and the
/// collective `workload` (its TOML lines).
fn star(n: usize, workload: &str) -> String {
    format!(
        "[sim]\nseed = 1\n[topology]\nkind = \"star\"\nhosts = {n}\nhost_rate = \"100Gbps\"\nhost_delay = \"1us\"\n\
         [switch]\nbuffer = \"64MB\"\n[rdma]\nmtu = {MTU}\nack_interval = 64\n\
         [classes.default]\ncc = \"dcqcn\"\ntransport = \"rdma\"\n[[workloads]]\nkind = \"collective\"\n{workload}"
    )
}

/// Bytes of `m` payload bytes on the wire, and its last frame's.
fn wire(m: u64) -> (f64, f64) {
    let packets = m.div_ceil(MTU);
    let last = m - (packets - 1) * MTU + HEADERS;
    ((m + packets * HEADERS) as f64, last as f64)
}

/// T(m): a message of `m` bytes over two uncontended links, seconds.
fn t(m: u64) -> f64 {
    let (w, last) = wire(m);
    (w + last) * 8.0 / RATE + 2.0 * DELAY
}

/// T2(m): two messages of `m` bytes sharing one link, seconds.
fn t2(m: u64) -> f64 {
    let (w, last) = wire(m);
    (2.0 * w + last) * 8.0 / RATE + 2.0 * DELAY
}

/// Each iteration's time in the run of `text`, seconds.
fn times(text: &str) -> Vec<f64> {
    let world = common::run_text(text, &[]);
    let runs = world.collectives();
    assert!(!runs.is_empty());
    runs.iter()
        .map(|r| {
            let (start, end) = metrics::collectives::span(&world, r);
            (end.expect("the iteration finished") - start.expect("it started")).secs_f64()
        })
        .collect()
}

/// Asserts that the collective's one iteration took `expected` seconds, within 1%.
fn within_one_percent(what: &str, text: &str, expected: f64) {
    let got = times(text)[0];
    let err = (got - expected).abs() / expected;
    println!("{what}: simulated {:.3} us, analytic {:.3} us ({:+.3}%)", got * 1e6, expected * 1e6, (got / expected - 1.0) * 100.0);
    assert!(err < 0.01, "{what}: simulated {got:e} s, analytic {expected:e} s ({:.2}% off)", err * 100.0);
}

#[test]
fn ring_all_reduce_takes_two_n_minus_one_steps_of_a_share() {
    // 2(n-1) steps, each a share of size/n, each waiting for the one before: 2(n-1) T(S/n).
    let (n, s) = (8, 8_000_000);
    within_one_percent("ring all-reduce", &star(n, "op = \"all_reduce\"\nsize = \"8MB\"\n"), 2.0 * (n - 1) as f64 * t(s / n as u64));
}

#[test]
fn ring_reduce_scatter_and_all_gather_take_n_minus_one_steps() {
    // Each is one phase of the ring all-reduce: (n-1) T(S/n).
    let (n, s) = (6, 6_000_000);
    let expected = (n - 1) as f64 * t(s / n as u64);
    within_one_percent("ring reduce-scatter", &star(n, "op = \"reduce_scatter\"\nsize = \"6MB\"\n"), expected);
    within_one_percent("ring all-gather", &star(n, "op = \"all_gather\"\nsize = \"6MB\"\n"), expected);
}

#[test]
fn halving_doubling_all_reduce_halves_then_doubles() {
    // Recursive halving sends S/2, S/4, ..., S/n; recursive doubling S/n, ..., S/2; each step's
    // pairs are disjoint, so every message has its links to itself: 2 (T(S/2) + ... + T(S/n)).
    let s: u64 = 8_000_000;
    let expected = 2.0 * (t(s / 2) + t(s / 4) + t(s / 8));
    within_one_percent("halving-doubling all-reduce", &star(8, "op = \"all_reduce\"\nalgorithm = \"halving_doubling\"\nsize = \"8MB\"\n"), expected);
    let half = t(s / 2) + t(s / 4) + t(s / 8);
    within_one_percent(
        "halving-doubling reduce-scatter",
        &star(8, "op = \"reduce_scatter\"\nalgorithm = \"halving_doubling\"\nsize = \"8MB\"\n"),
        half,
    );
}

#[test]
fn double_binary_tree_all_reduce_climbs_and_descends_both_trees() {
    // n = 8 (p = log2 n = 3), each tree carrying S/2. Tree 0 is 0 <- 4 <- {2, 6} <- {1, 3}, {5, 7}
    // and tree 1 its mirror, so the two climb and descend in step. Up: the leaves' pairs meet at
    // their parents (T2), then the parents' pairs at 4 and 3 (T2), then 4 and 3 reach the roots
    // alone (T). Down: the roots answer alone (T), then each inner rank's NIC sends to two
    // children (T2), twice. In all 2(p-1) T2(S/2) + 2 T(S/2).
    let half: u64 = 4_000_000;
    let expected = 4.0 * t2(half) + 2.0 * t(half);
    within_one_percent("double binary tree all-reduce", &star(8, "op = \"all_reduce\"\nalgorithm = \"double_binary_tree\"\nsize = \"8MB\"\n"), expected);
}

#[test]
fn all_to_all_sends_every_share_at_once() {
    // Each rank sends n-1 shares of S/n at once: its link carries (n-1) W(S/n), and each
    // receiver's link the same from n-1 senders; the last frame is forwarded once.
    let (n, s): (u64, u64) = (8, 8_000_000);
    let (w, last) = wire(s / n);
    let expected = ((n - 1) as f64 * w + last) * 8.0 / RATE + 2.0 * DELAY;
    within_one_percent("all-to-all", &star(n as usize, "op = \"all_to_all\"\nsize = \"8MB\"\n"), expected);
}

#[test]
fn broadcast_is_a_chain_and_chunks_pipeline_it() {
    // One chunk: the root's buffer crosses the n-1 links of the chain in turn, (n-1) T(S).
    let (n, s): (u64, u64) = (5, 2_000_000);
    within_one_percent("broadcast, one chunk", &star(n as usize, "op = \"broadcast\"\nsize = \"2MB\"\nroot = 2\n"), (n - 1) as f64 * t(s));
    // C chunks: chunk c leaves rank k when rank k has it and its own chunk c-1 is acknowledged
    // (A after it arrived: the last ACK's 86-byte frame over two links, plus 2d). Rank k
    // then starts chunk c at k T + c (T + A) with T = T(S/C): both conditions meet there, so
    // the last chunk reaches the last rank at (n-1) T + (C-1)(T + A).
    let c = 4;
    let ack = 2.0 * 86.0 * 8.0 / RATE + 2.0 * DELAY;
    let tc = t(s / c);
    let expected = (n - 1) as f64 * tc + (c - 1) as f64 * (tc + ack);
    within_one_percent("broadcast, 4 chunks", &star(n as usize, "op = \"broadcast\"\nsize = \"2MB\"\nchunks = 4\n"), expected);
    assert!(expected < 0.6 * (n - 1) as f64 * t(s), "pipelining pays");
}

#[test]
fn iterations_follow_each_rank_after_its_compute_time() {
    // Three ring all-reduces with 30 us of compute between them: each rank starts the next once
    // its last message has arrived and its own are acknowledged, and 30 us have passed.
    let world = common::run_text(&star(4, "op = \"all_reduce\"\nsize = \"4MB\"\niterations = 3\ncompute = \"30us\"\n"), &[]);
    let spans: Vec<(Time, Time)> = world
        .collectives()
        .iter()
        .map(|r| {
            let (s, e) = metrics::collectives::span(&world, r);
            (s.unwrap(), e.unwrap())
        })
        .collect();
    assert_eq!(spans.len(), 3);
    let one = t(1_000_000);
    for (i, w) in spans.windows(2).enumerate() {
        // The next starts 30 us plus at most the last ACK's return after the last arrival of
        // the one before: no rank starts before 30 us after its own last arrival.
        let gap = w[1].0.secs_f64() - w[0].1.secs_f64();
        assert!(gap > 30e-6 - one && gap < 30e-6 + 5e-6, "iteration {}: next one {:.2} us after", i + 1, gap * 1e6);
        let took = (w[1].1 - w[1].0).secs_f64();
        assert!((took / (6.0 * one) - 1.0).abs() < 0.01, "each iteration still takes 2(n-1) T(S/n): {took:e}");
    }
}

/// The collectives of a leaf-spine (4 partitions): a ring all-reduce on TCP, a double binary
/// tree on RDMA and an all-to-all on UET, side by side.
const THREE_TRANSPORTS: &str = r#"
[sim]
seed = 3
[topology]
kind = "leaf_spine"
hosts_per_leaf = 3
leaves = 4
spines = 2
host_rate = "100Gbps"
host_delay = "1us"
fabric_rate = "100Gbps"
fabric_delay = "1us"
[switch]
buffer = "32MB"
[switch.ecn]
mode = "step"
k = "200KB"
[rdma]
mtu = 4000
[classes.default]
cc = "dctcp"
[classes.roce]
cc = "dcqcn"
transport = "rdma"
[classes.uec]
cc = "nscc"
transport = "uet"
[[workloads]]
kind = "collective"
op = "all_reduce"
hosts = [0, 3, 6, 9]
size = "2MB"
iterations = 2
compute = "10us"
[[workloads]]
kind = "collective"
class = "roce"
op = "all_reduce"
algorithm = "double_binary_tree"
hosts = [1, 4, 7, 10]
size = "2MB"
chunks = 2
iterations = 2
[[workloads]]
kind = "collective"
class = "uec"
op = "all_to_all"
hosts = [2, 5, 8, 11]
size = "2MB"
iterations = 2
"#;

/// Every output of `world` run on `threads` threads, by file name.
fn outputs(text: &str, threads: usize) -> (BTreeMap<String, Vec<u8>>, usize, World) {
    let loaded = scenario::parse(text, "t.toml", Path::new("."), &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut world = scenario::build(&loaded).unwrap_or_else(|e| panic!("{e}"));
    let used = world.spread(threads);
    world.run(&mut |_| {});
    world.check_conservation().unwrap_or_else(|e| panic!("{threads} threads: {e}"));
    let dir = tempfile::tempdir().unwrap();
    metrics::write_outputs(&world, dir.path(), 0.0).unwrap();
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        files.insert(path.file_name().unwrap().to_string_lossy().to_string(), std::fs::read(&path).unwrap());
    }
    (files, used, world)
}

#[test]
fn collectives_on_tcp_rdma_and_uet_finish_and_are_the_same_bytes_on_one_two_and_three_threads() {
    let (one, used, world) = outputs(THREE_TRANSPORTS, 1);
    assert_eq!((used, world.partitions().count), (1, 4));
    let csv = String::from_utf8(one["collectives.csv"].clone()).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().skip(1).map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 6, "{csv}");
    for row in &rows {
        // Every iteration finished, its bus bandwidth below the 100 Gb/s (12.5 GB/s) links.
        let busbw: f64 = row[11].parse().unwrap_or_else(|_| panic!("unfinished: {row:?}"));
        assert!(busbw > 1.0 && busbw < 12.5, "{row:?}");
    }
    let classes: Vec<&str> = ["dctcp", "dcqcn", "nscc"].to_vec();
    for (i, cc) in classes.iter().enumerate() {
        let run = &world.collectives()[2 * i];
        assert!(run.flows.iter().all(|&f| world.flows()[f].cc_name() == *cc), "workloads[{i}] runs {cc}");
    }
    for threads in [2, 3] {
        let (other, used, _) = outputs(THREE_TRANSPORTS, threads);
        assert_eq!(used, threads);
        assert_eq!(one.keys().collect::<Vec<_>>(), other.keys().collect::<Vec<_>>());
        for (name, bytes) in &one {
            assert!(bytes == &other[name], "{name} differs on {threads} threads");
        }
    }
}

#[test]
fn the_bundled_scenario_reports_its_collectives_and_hottest_links() {
    let world = common::run_file("scenarios/collective_allreduce.toml", &[]);
    let summary = metrics::summarize(&world, 0.0);
    let c = summary.collectives.expect("a collectives section");
    assert_eq!(c.collectives.len(), 2);
    let ring = &c.collectives[0];
    assert_eq!((ring.op, ring.algorithm, ring.ranks, ring.completed), ("all_reduce", "ring", 16, 3));
    // 16 ranks over 4 racks on 100 Gb/s host links: the ring's bus bandwidth is bounded by a
    // host link's payload rate (12.5 GB/s less RoCE's 2%) and the per-step latency of 30 steps.
    let busbw = ring.busbw.unwrap();
    assert!(busbw > 10.0 && busbw < 12.25, "busbw {busbw}");
    assert_eq!(c.hottest_links.len(), 4);
    assert!(c.hottest_links.windows(2).all(|w| w[0].utilization >= w[1].utilization));
    let lines = metrics::headline(&metrics::summarize(&world, 0.0));
    assert!(lines.iter().any(|l| l.starts_with("collective workloads[0]: all_reduce by ring over 16 ranks")), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("hottest links: ")), "{lines:?}");
}
