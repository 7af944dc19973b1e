//! Chakra execution traces (`kind = "chakra"`): the bundled traces from ASTRA-sim's examples
//! decode to what their files hold; a 4-rank all-reduce trace takes the analytic ring
//! all-reduce time; sends, receives and compute make the timeline their dependencies say, to
//! the picosecond; broken traces are refused at check time naming the file, the rank and the
//! node; and a trace's outputs are the same bytes on 1, 2 and 3 threads.
//!
//! The analytic values are those of `tests/collectives.rs`: on a star of hosts at rate R with
//! links of delay d, RDMA with 4,000-byte packets and 82 bytes of headers each, a message of m
//! bytes with its links to itself arrives T(m) = (W(m) + F(m)) / R + 2d after it starts (W: its
//! bytes on the wire, F: its last frame, which the switch forwards once whole).

use sluice_sim::check::check_text;
use sluice_sim::metrics;
use sluice_sim::scenario;
use sluice_sim::time::Time;
use sluice_sim::workload::chakra::reader::{self, write};
use sluice_sim::workload::chakra::schema::{node_type, AttributeProto, GlobalMetadata, Node, Value};
use sluice_sim::world::World;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Link rate, bits per second.
const RATE: f64 = 100e9;
/// Link delay, seconds.
const DELAY: f64 = 1e-6;
/// RDMA payload per packet.
const MTU: u64 = 4000;
/// IPv4 (20) + RoCE (24) + Ethernet framing (38) bytes per packet.
const HEADERS: u64 = 82;

/// T(m): a message of `m` bytes over two uncontended links, seconds.
fn t(m: u64) -> f64 {
    let packets = m.div_ceil(MTU);
    let last = m - (packets - 1) * MTU + HEADERS;
    ((m + packets * HEADERS) as f64 + last as f64) * 8.0 / RATE + 2.0 * DELAY
}

/// The repository's bundled traces.
fn traces() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/traces/chakra")
}

/// A star of `n` hosts at 100 Gb/s with 1 us links, RDMA (DCQCN, no ECN marking), and the
/// Chakra workload `workload` (its TOML lines).
fn star(n: usize, workload: &str) -> String {
    format!(
        "[sim]\nseed = 1\n[topology]\nkind = \"star\"\nhosts = {n}\nhost_rate = \"100Gbps\"\nhost_delay = \"1us\"\n\
         [switch]\nbuffer = \"64MB\"\n[rdma]\nmtu = {MTU}\nack_interval = 64\n\
         [classes.default]\ncc = \"dcqcn\"\ntransport = \"rdma\"\n[[workloads]]\nkind = \"chakra\"\n{workload}"
    )
}

/// Builds and runs `text` with files relative to `base` on `threads` threads.
fn run(text: &str, base: &Path, threads: usize) -> World {
    let loaded = scenario::parse(text, "t.toml", base, &[]).unwrap_or_else(|e| panic!("{e}"));
    let mut world = scenario::build(&loaded).unwrap_or_else(|e| panic!("{e}"));
    world.spread(threads);
    world.run(&mut |_| {});
    world.check_conservation().unwrap_or_else(|e| panic!("{e}"));
    world
}

fn attr(name: &str, value: Value) -> AttributeProto {
    AttributeProto { name: name.into(), doc_string: String::new(), value: Some(value) }
}

fn int(n: &Node, name: &str) -> i128 {
    n.attr(name).and_then(AttributeProto::integer).unwrap_or_else(|| panic!("node {} has no {name}", n.id))
}

fn read(path: &Path) -> reader::RankTrace {
    reader::read(&std::fs::read(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_bundled_traces_decode_to_what_their_files_hold() {
    for (dir, name, comm_type) in [("all_reduce_4npus_1MB", "all_reduce", 0), ("all_to_all_4npus_1MB", "all_to_all", 6)]
    {
        for r in 0..4 {
            let t = read(&traces().join(format!("{dir}/{name}.{r}.et")));
            assert_eq!((t.version.as_str(), t.nodes.len()), ("0.0.4", 1));
            let n = &t.nodes[0];
            // The generator numbers nodes across files: rank r's one node is node r.
            assert_eq!(
                (n.id, n.r#type, n.name.as_str()),
                (r, node_type::COMM_COLL, format!("{name}_4npus_1MB").as_str())
            );
            assert_eq!((int(n, "comm_type"), int(n, "comm_size"), int(n, "is_cpu_op")), (comm_type, 1 << 20, 0));
            assert!(n.data_deps.is_empty() && n.ctrl_deps.is_empty());
        }
    }
    for r in 0..8i128 {
        let t = read(&traces().join(format!("custom_ring_allreduce_8npus_1MB/custom_allreduce.{r}.et")));
        // No version field: the schema attribute "1.0.2-chakra.0.0.4" gives it.
        assert_eq!((t.version.as_str(), t.nodes.len()), ("0.0.4", 35));
        let of = |ty: i32| t.nodes.iter().filter(|n| n.r#type == ty).collect::<Vec<_>>();
        let (sends, recvs, comps) = (of(node_type::COMM_SEND), of(node_type::COMM_RECV), of(node_type::COMP));
        assert_eq!((sends.len(), recvs.len(), comps.len()), (14, 14, 7));
        assert!(sends
            .iter()
            .all(|n| int(n, "comm_dst") == (r + 1) % 8 && int(n, "comm_size") == 131_072 && int(n, "comm_tag") == 0));
        assert!(recvs.iter().all(|n| int(n, "comm_src") == (r + 7) % 8 && int(n, "comm_size") == 131_072));
        assert!(comps.iter().all(|n| n.duration_micros == 7));
        // One chain: node i waits for node i - 1.
        for (i, n) in t.nodes.iter().enumerate() {
            assert_eq!((n.id, n.data_deps.clone()), (i as u64, if i == 0 { vec![] } else { vec![i as u64 - 1] }));
        }
    }
}

#[test]
fn a_four_rank_all_reduce_trace_takes_the_ring_s_analytic_time() {
    // One COMM_COLL_NODE per rank, ALL_REDUCE of S = 1 MiB, run as a ring: 2(n-1) steps of S/n.
    let file = "file = \"all_reduce_4npus_1MB/all_reduce\"\n";
    let world = run(&star(4, file), &traces(), 1);
    let (n, s) = (4u64, 1u64 << 20);
    let expected = 2.0 * (n - 1) as f64 * t(s / n);
    let runs = world.collectives();
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].op.name(), runs[0].algorithm.name(), runs[0].ranks, runs[0].size, runs[0].flows.len()),
        ("all_reduce", "ring", 4, s, 24)
    );
    let (start, end) = metrics::collectives::span(&world, &runs[0]);
    let got = (end.unwrap() - start.unwrap()).secs_f64();
    println!(
        "4-rank all-reduce trace: simulated {:.3} us, analytic {:.3} us ({:+.3}%)",
        got * 1e6,
        expected * 1e6,
        (got / expected - 1.0) * 100.0
    );
    assert!((got / expected - 1.0).abs() < 0.01, "simulated {got:e} s, analytic {expected:e} s");
    // And to the picosecond what kind = "collective" makes of the same all-reduce: the trace
    // adds nothing of its own.
    let same =
        star(4, "").replace("kind = \"chakra\"\n", "kind = \"collective\"\nop = \"all_reduce\"\nsize = \"1048576B\"\n");
    let direct = run(&same, &traces(), 1);
    assert_eq!(metrics::collectives::span(&direct, &direct.collectives()[0]), (start, end));
    let c = &metrics::summarize(&world, 0.0).chakra.expect("a chakra section")[0];
    assert_eq!((c.ranks, c.ranks_done, c.collectives, c.messages, c.nodes.collective), (4, 4, 1, 24, 4));
    // A rank is done when its last message has arrived and its own are acknowledged: every
    // rank after the collective's last arrival, within an ACK's return (an 86-byte frame over
    // two 1 us links) of it.
    let (first, all) = (c.first_rank_ns.unwrap() * 1e-9, c.time_ns.unwrap() * 1e-9);
    let ack = 2.0 * 86.0 * 8.0 / RATE + 2.0 * DELAY;
    assert!(
        first > got && first <= all && all < got + ack * 1.01,
        "ranks done from {first:e} to {all:e}; collective {got:e}"
    );
}

/// Node `id` of `ty` waiting for `data` and `ctrl`, with `attrs`.
fn node(id: u64, ty: i32, data: &[u64], ctrl: &[u64], attrs: Vec<AttributeProto>) -> Node {
    Node { id, r#type: ty, data_deps: data.to_vec(), ctrl_deps: ctrl.to_vec(), attr: attrs, ..Node::default() }
}

fn comp(id: u64, us: u64, data: &[u64], ctrl: &[u64]) -> Node {
    Node { duration_micros: us, ..node(id, node_type::COMP, data, ctrl, Vec::new()) }
}

fn send(id: u64, dst: i32, bytes: i64, tag: i32, data: &[u64], ctrl: &[u64]) -> Node {
    let attrs = vec![
        attr("comm_dst", Value::Int32Val(dst)),
        attr("comm_size", Value::Int64Val(bytes)),
        attr("comm_tag", Value::Int32Val(tag)),
    ];
    node(id, node_type::COMM_SEND, data, ctrl, attrs)
}

fn recv(id: u64, src: i32, tag: i32, data: &[u64]) -> Node {
    node(
        id,
        node_type::COMM_RECV,
        data,
        &[],
        vec![attr("comm_src", Value::Int32Val(src)), attr("comm_tag", Value::Int32Val(tag))],
    )
}

/// Writes `ranks` as `<dir>/job.<rank>.et`.
fn write_trace(dir: &Path, ranks: &[Vec<Node>]) {
    let meta = GlobalMetadata { version: "0.0.4".into(), attr: Vec::new() };
    for (r, nodes) in ranks.iter().enumerate() {
        std::fs::write(dir.join(format!("job.{r}.et")), write(&meta, nodes)).unwrap();
    }
}

/// Three ranks: 0 computes 10 us and sends to 1; 1 receives it, computes 5 us and sends on to 2
/// once its own 12 us of compute from the start are done too (a ctrl dep), and sends again
/// after 12 + 40 us of compute; 2 computes 3 us once both have arrived.
fn pipeline() -> Vec<Vec<Node>> {
    vec![
        vec![comp(0, 10, &[], &[]), send(1, 1, 40_000, 1, &[0], &[])],
        vec![
            comp(10, 12, &[], &[]),
            recv(11, 0, 1, &[]),
            comp(12, 5, &[11], &[]),
            send(13, 2, 40_000, 2, &[12], &[10]),
            comp(15, 40, &[10], &[]),
            send(14, 2, 8_000, 3, &[15], &[]),
        ],
        vec![recv(20, 1, 2, &[]), recv(21, 1, 3, &[]), comp(22, 3, &[20, 21], &[])],
    ]
}

#[test]
fn sends_receives_and_compute_make_the_timeline_their_dependencies_say() {
    let dir = tempfile::tempdir().unwrap();
    write_trace(dir.path(), &pipeline());
    let world = run(&star(3, "file = \"job\"\n"), dir.path(), 1);
    let flows = world.flows();
    let by = |src: usize, size: u64| flows.iter().find(|f| f.src.index() == src && f.size == Some(size)).unwrap();
    let (a, b, c) = (by(0, 40_000), by(1, 40_000), by(1, 8_000));
    // 0 -> 1 starts when rank 0's 10 us of compute end, and takes T(40,000 B).
    assert_eq!(a.start, Time::from_us(10));
    let arrived = a.rx_done.unwrap();
    assert!(((arrived - a.start).secs_f64() / t(40_000) - 1.0).abs() < 0.005, "{arrived:?}");
    // 1 -> 2 starts 5 us after the arrival (later than the 12 us of its ctrl dep).
    assert_eq!(b.start, arrived + Time::from_us(5));
    // The second 1 -> 2 waits for compute only: 12 + 40 us from the start.
    assert_eq!(c.start, Time::from_us(52));
    // Rank 2 is done 3 us after the later of its two arrivals; ranks 0 and 1 when their sends
    // are acknowledged.
    let run = &world.chakra_runs()[0];
    let ends = metrics::chakra::rank_ends(&world, run);
    let last = b.rx_done.unwrap().max(c.rx_done.unwrap());
    assert_eq!(ends, [a.finish, Some(b.finish.unwrap().max(c.finish.unwrap())), Some(last + Time::from_us(3))]);
    let figures = &metrics::summarize(&world, 0.0).chakra.unwrap()[0];
    assert_eq!(figures.time_ns, Some((last + Time::from_us(3)).0 as f64 / 1e3));
    assert_eq!((figures.messages, figures.nodes.compute, figures.nodes.send, figures.nodes.recv), (3, 5, 3, 3));
    let lines = metrics::headline(&metrics::summarize(&world, 0.0));
    let line = lines
        .iter()
        .find(|l| l.starts_with("chakra workloads[0]: job over 3 ranks, 11 nodes (5 compute, 3 send, 3 recv)"))
        .unwrap();
    assert!(line.contains("0 collectives, 3 messages: all 3 ranks done in "), "{line}");
}

/// The first problem `sluice check` finds with the trace `ranks` (as written by `edit`) on a
/// star of `hosts` hosts with the workload keys `keys`; and the directory's path.
fn refused(
    ranks: &[Vec<Node>],
    edit: impl Fn(usize, Vec<u8>) -> Vec<u8>,
    hosts: usize,
    keys: &str,
) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    write_trace(dir.path(), ranks);
    for r in 0..ranks.len() {
        let p = dir.path().join(format!("job.{r}.et"));
        std::fs::write(&p, edit(r, std::fs::read(&p).unwrap())).unwrap();
    }
    let text = star(hosts, &format!("file = \"job\"\n{keys}"));
    let err = match check_text(&text, "job.toml", dir.path(), &[]) {
        Ok(_) => panic!("accepted"),
        Err(problems) => problems[0].to_string(),
    };
    (err, dir.path().display().to_string())
}

#[test]
fn broken_traces_are_refused_naming_the_file_the_rank_and_the_node() {
    let same = |_: usize, b: Vec<u8>| b;
    let at = |dir: &str, r: usize| format!("job.toml:18: workloads[0].file: \"{dir}/job.{r}.et\" (rank {r})");
    // Rank 1's file cut by a byte: its last node (after node 12) is truncated.
    let (err, dir) = refused(&pipeline(), |r, b| if r == 1 { b[..b.len() - 1].to_vec() } else { b }, 3, "");
    assert!(
        err.starts_with(&format!("{}: message 6 (the node after node 15): truncated: its length says", at(&dir, 1))),
        "{err}"
    );
    // A length that never ends.
    let (err, dir) = refused(
        &pipeline(),
        |r, mut b| {
            if r == 2 {
                b.extend([0x80; 12]);
            }
            b
        },
        3,
        "",
    );
    assert!(
        err.starts_with(&format!("{}: message 4 (the node after node 22): its length at byte", at(&dir, 2))),
        "{err}"
    );
    assert!(err.ends_with("is not a valid varint (it runs past 10 bytes)"), "{err}");
    // A version the reader does not know.
    let (err, dir) = refused(
        &pipeline(),
        |r, b| {
            if r == 0 {
                let mut out = write(&GlobalMetadata { version: "0.0.5".into(), attr: Vec::new() }, &[]);
                let skip = 1 + b[0] as usize;
                out.extend_from_slice(&b[skip..]);
                out
            } else {
                b
            }
        },
        3,
        "",
    );
    assert_eq!(
        err,
        format!(
            "{}: the GlobalMetadata (message 0): schema version \"0.0.5\" is not supported; this reader knows 0.0.4",
            at(&dir, 0)
        )
    );
    // A dependency on a node the file does not have.
    let mut lost = pipeline();
    lost[1][3].ctrl_deps = vec![10, 99];
    let (err, dir) = refused(&lost, same, 3, "");
    assert_eq!(err, format!("{}, node 13: ctrl_deps names node 99, which the file does not have", at(&dir, 1)));
    // An unknown node type and an unknown collective.
    let mut odd = pipeline();
    odd[2][2].r#type = 9;
    let (err, dir) = refused(&odd, same, 3, "");
    assert_eq!(err, format!("{}, node 22: node type 9 is not a NodeType of the schema", at(&dir, 2)));
    let mut coll = pipeline();
    coll[0].push(node(
        2,
        node_type::COMM_COLL,
        &[],
        &[],
        vec![attr("comm_type", Value::Int64Val(11)), attr("comm_size", Value::Int64Val(64))],
    ));
    let (err, dir) = refused(&coll, same, 3, "");
    assert_eq!(
        err,
        format!("{}, node 2: COMM_COLL_NODE: comm_type 11 is not a CollectiveCommType of the schema", at(&dir, 0))
    );
    // A receive no send matches.
    let mut unmatched = pipeline();
    unmatched[2].push(recv(23, 0, 9, &[]));
    let (err, dir) = refused(&unmatched, same, 3, "");
    assert!(
        err.starts_with(&format!(
            "{}, node 23: COMM_RECV_NODE: a receive from rank 0 with comm_tag 9 that no send of rank 0 matches",
            at(&dir, 2)
        )),
        "{err}"
    );
    // A rank's file missing, and more ranks than hosts.
    let (err, dir) = refused(&pipeline(), same, 4, "hosts = [0, 1, 2, 3]\n");
    assert!(
        err.starts_with(&format!("job.toml:18: workloads[0].file: rank 3's file \"{dir}/job.3.et\" does not exist")),
        "{err}"
    );
    let (err, dir) = refused(&pipeline(), same, 2, "");
    assert_eq!(err, format!("job.toml:18: workloads[0].file: the trace has 3 ranks ({dir}/job.0.et to .2.et), more than the topology's 2 hosts"));
}

/// Every output of `text` on `threads` threads, by file name (the run's wall time left out).
fn outputs(text: &str, base: &Path, threads: usize) -> BTreeMap<String, Vec<u8>> {
    let world = run(text, base, threads);
    let dir = tempfile::tempdir().unwrap();
    metrics::write_outputs(&world, dir.path(), 0.0).unwrap();
    std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

#[test]
fn the_bundled_scenario_is_the_same_bytes_on_one_two_and_three_threads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/chakra_allreduce.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let base = path.parent().unwrap();
    let one = outputs(&text, base, 1);
    let csv = String::from_utf8(one["collectives.csv"].clone()).unwrap();
    assert_eq!(csv.lines().count(), 2, "one collective: {csv}");
    let summary: serde_json::Value = serde_json::from_slice(&one["summary.json"]).unwrap();
    let chakra = summary["chakra"].as_array().unwrap();
    assert_eq!(chakra.len(), 2);
    // The MSCCL ring: 8 ranks, 14 sends each; every rank done, after 7 reductions of 7 us
    // and 14 steps of 128 KiB at least.
    let ring = &chakra[1];
    assert_eq!(
        (ring["ranks"].as_u64(), ring["ranks_done"].as_u64(), ring["messages"].as_u64()),
        (Some(8), Some(8), Some(112))
    );
    let floor = 14.0 * t(131_072) * 1e9 + 49_000.0;
    assert!(ring["time_ns"].as_f64().unwrap() > floor, "{ring}");
    for threads in [2, 3] {
        let other = outputs(&text, base, threads);
        assert_eq!(one.keys().collect::<Vec<_>>(), other.keys().collect::<Vec<_>>());
        for (name, bytes) in &one {
            assert!(bytes == &other[name], "{name} differs on {threads} threads");
        }
    }
}
