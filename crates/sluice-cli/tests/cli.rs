//! End-to-end tests of the `sluice` command: outputs, determinism, the bundled scenarios, and the
//! error every kind of bad input gets.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).current_dir(repo()).output().expect("sluice runs")
}

fn run_ok(args: &[&str]) -> Output {
    let out = sluice(args);
    assert!(out.status.success(), "sluice {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn quickstart_writes_the_output_contract() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    run_ok(&["run", "scenarios/quickstart.toml", "--out", out, "--quiet"]);
    let flows = std::fs::read_to_string(dir.path().join("flows.csv")).unwrap();
    let mut lines = flows.lines();
    assert_eq!(
        lines.next().unwrap(),
        // The contract's columns exactly, then sluice's own.
        "id,src,dst,class,cc,size_bytes,start_ns,finish_ns,fct_ns,ideal_fct_ns,slowdown,retransmits,timeouts,negotiation,\
         bytes_delivered,goodput_bps"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 400);
    for r in &rows {
        assert_eq!(r.len(), 16);
        assert_eq!(r[13], "accepted");
        assert_eq!(r[14], r[5], "a finished flow delivered its size");
        let (fct, ideal, slowdown): (f64, f64, f64) = (r[8].parse().unwrap(), r[9].parse().unwrap(), r[10].parse().unwrap());
        assert!(slowdown >= 1.0);
        assert!((slowdown - (fct / ideal).max(1.0)).abs() < 1e-3, "slowdown = max(1, fct / ideal) in {r:?}");
    }
    let s = summary(dir.path());
    assert_eq!(s["flows"]["total"], 400);
    assert_eq!(s["flows"]["completed"], 400);
    for key in ["seed", "sim_time_ns", "wall_s", "events", "events_per_s", "drops", "ecn_marks", "timeouts", "retransmits", "pfc_pauses"] {
        assert!(s.get(key).is_some(), "summary.json lacks {key}");
    }
    for key in ["mean", "p50", "p95", "p99", "p999"] {
        assert!(s["fct_ns"][key].as_f64().unwrap() > 0.0);
        assert!(s["slowdown"][key].as_f64().unwrap() >= 1.0);
    }
    assert!(s["classes"]["default"]["goodput_bps"].as_f64().unwrap() > 0.0);
    assert_eq!(s["classes"]["default"]["cc"], "dctcp");
    let queues = std::fs::read_to_string(dir.path().join("queues.csv")).unwrap();
    assert!(queues.starts_with("t_ns,node,port,bytes\n"));
    assert!(queues.lines().count() > 100);
}

#[test]
fn same_seed_same_outputs_other_seed_other_outputs() {
    // Random link loss makes the seed matter.
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    for (d, seed) in dirs.iter().zip(["7", "7", "8"]) {
        run_ok(&[
            "run",
            "scenarios/quickstart.toml",
            "--out",
            d.path().to_str().unwrap(),
            "--seed",
            seed,
            "--set",
            "topology.fabric_loss=0.002",
            "--quiet",
        ]);
    }
    let read = |d: &tempfile::TempDir, f: &str| std::fs::read(d.path().join(f)).unwrap();
    assert_eq!(read(&dirs[0], "flows.csv"), read(&dirs[1], "flows.csv"));
    assert_eq!(read(&dirs[0], "queues.csv"), read(&dirs[1], "queues.csv"));
    let strip = |d: &tempfile::TempDir| {
        let mut s = summary(d.path());
        let o = s.as_object_mut().unwrap();
        o.remove("wall_s");
        o.remove("events_per_s");
        s
    };
    assert_eq!(strip(&dirs[0]), strip(&dirs[1]));
    assert_eq!(strip(&dirs[0])["seed"], 7);
    assert!(strip(&dirs[0])["drops_by_reason"]["link_loss"].as_u64().unwrap() > 0);
    assert_ne!(read(&dirs[0], "flows.csv"), read(&dirs[2], "flows.csv"), "a different seed draws different losses");
}

#[test]
fn bundled_scenarios_run_and_conserve_packets() {
    // `sluice run` checks conservation after every run and fails if it is broken.
    for (scenario, extra) in [
        ("scenarios/dctcp_two_flows.toml", "sim.duration=\"5ms\""),
        ("scenarios/fat_tree_bulk.toml", "sim.duration=\"1ms\""),
    ] {
        let dir = tempfile::tempdir().unwrap();
        run_ok(&["run", scenario, "--out", dir.path().to_str().unwrap(), "--set", extra, "--quiet"]);
        let s = summary(dir.path());
        assert!(s["classes"]["default"]["goodput_bps"].as_f64().unwrap() > 1e9, "{scenario}: {s}");
    }
}

#[test]
fn set_switches_a_class_algorithm() {
    let dir = tempfile::tempdir().unwrap();
    run_ok(&[
        "run",
        "scenarios/quickstart.toml",
        "--out",
        dir.path().to_str().unwrap(),
        "--set",
        "classes.default.cc=cubic",
        "--set",
        "switch.ecn.mode=off",
        "--quiet",
    ]);
    let s = summary(dir.path());
    assert_eq!(s["classes"]["default"]["cc"], "cubic");
    assert_eq!(s["ecn_marks"], 0, "marking is off");
    assert_eq!(s["flows"]["completed"], 400);
}

#[test]
fn list_names_every_algorithm_and_its_parameters() {
    let out = run_ok(&["list"]);
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in ["newreno", "reno", "cubic", "dctcp", "g = 0.0625", "fat_tree", "hpcc"] {
        assert!(text.contains(needle), "`sluice list` lacks {needle}:\n{text}");
    }
    // What the Linux stack sets and does, each with where the kernel has it.
    for p in sluice_sim::transport::tcp::LINUX_PRESET {
        assert!(text.contains(&format!("{} = {} ({})", p.key, p.value, p.source)), "`sluice list` lacks the preset's {}:\n{text}", p.key);
    }
    assert!(text.contains("bbr_quantization_budget"), "`sluice list` lacks the Linux stack's behaviours:\n{text}");
}

/// Writes `files` into a temporary directory and runs `sluice check` on the first one.
fn check_bad(files: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let path = dir.path().join(files[0].0);
    let out = sluice(&["check", path.to_str().unwrap()]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "bad input must exit 2; stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

const STAR: &str = "[topology]\nkind = \"star\"\nhosts = 4\nhost_rate = \"10Gbps\"\nhost_delay = \"1us\"\n";

#[test]
fn unknown_key_is_named_with_file_line_and_the_expected_keys() {
    let err = check_bad(&[("s.toml", &format!("{STAR}[switch]\nbufer = \"1MB\"\n"))]);
    assert!(err.contains("s.toml:7"), "{err}");
    assert!(err.contains("switch.bufer") && err.contains("expected one of `buffer`"), "{err}");
}

#[test]
fn wrong_unit_names_the_key_and_the_expected_form() {
    let err = check_bad(&[("s.toml", &STAR.replace("\"10Gbps\"", "\"10GB\""))]);
    assert!(err.contains("s.toml:4") && err.contains("topology.host_rate"), "{err}");
    assert!(err.contains("like \"100Gbps\""), "{err}");
}

#[test]
fn negative_size_is_rejected() {
    let text = format!("{STAR}[[workloads]]\nkind = \"flows\"\nflows = [{{ src = 0, dst = 1, size = -5 }}]\n");
    let err = check_bad(&[("s.toml", &text)]);
    assert!(err.contains("s.toml") && err.contains("workloads[0].flows[0].size"), "{err}");
    assert!(err.contains("non-negative size"), "{err}");
}

#[test]
fn unknown_cc_lists_the_known_algorithms() {
    let err = check_bad(&[("s.toml", &format!("{STAR}[classes.default]\ncc = \"vegas\"\n"))]);
    assert!(err.contains("s.toml:7") && err.contains("classes.default.cc"), "{err}");
    assert!(err.contains("\"vegas\"") && err.contains("newreno, cubic, dctcp"), "{err}");
}

#[test]
fn bad_cc_parameter_names_the_parameter_and_range() {
    let err = check_bad(&[("s.toml", &format!("{STAR}[classes.default]\ncc = \"dctcp\"\n[classes.default.params]\ng = 3\n"))]);
    assert!(err.contains("s.toml:9") && err.contains("classes.default.params.g") && err.contains("(0, 1]"), "{err}");
}

#[test]
fn malformed_trace_line_is_named() {
    let scenario = format!("{STAR}[[workloads]]\nkind = \"trace\"\nfile = \"flows.csv\"\n");
    let err = check_bad(&[("s.toml", &scenario), ("flows.csv", "src,dst,size_bytes,start\n0,1,1000,0us\n0,1,lots,1us\n")]);
    assert!(err.contains("flows.csv line 3"), "{err}");
    assert!(err.contains("size_bytes"), "{err}");
}

#[test]
fn malformed_topology_line_is_named() {
    let scenario = "[topology]\nkind = \"hpcc_file\"\nfile = \"topo.txt\"\n";
    let topo = "3 1 2\n2\n0 2 10Gbps 1us 0\n1 2 10Gbps\n";
    let err = check_bad(&[("s.toml", scenario), ("topo.txt", topo)]);
    assert!(err.contains("topo.txt line 4"), "{err}");
    assert!(err.contains("<src> <dst> <rate> <delay> <error rate>"), "{err}");
}

#[test]
fn endless_flows_need_a_duration() {
    let text = format!("{STAR}[[workloads]]\nkind = \"bulk\"\nsenders = [0]\nreceiver = 1\n");
    let err = check_bad(&[("s.toml", &text)]);
    assert!(err.contains("sim.duration") && err.contains("workloads[0]"), "{err}");
}

#[test]
fn threads_write_the_same_outputs_and_the_report_says_how_many_ran() {
    // A leaf-spine of 8 racks: 8 partitions. The CLI is where the thread count is resolved
    // (flag over `sim.threads`, capped by partitions and memory), so its outputs are compared
    // here too; tests/schedules.rs compares every schedule on more scenarios.
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let run = |dir: &Path, extra: &[&str]| -> String {
        let mut args = vec!["run", "scenarios/websearch_leafspine.toml", "--out", dir.to_str().unwrap()];
        args.extend_from_slice(&["--set", "sim.duration=\"1ms\""]);
        args.extend_from_slice(extra);
        String::from_utf8_lossy(&run_ok(&args).stderr).to_string()
    };
    let one = run(dirs[0].path(), &["--threads", "1"]);
    let three = run(dirs[1].path(), &["--threads", "3"]);
    // 9 MB on one thread and 2 MB for each other's shard (`sluice check`): 12 MB fits two.
    let capped = run(dirs[2].path(), &["--threads", "4", "--set", "limits.memory=\"12MB\""]);
    assert!(one.contains("8 partitions on 1 thread,"), "{one}");
    assert!(three.contains("8 partitions on 3 threads,"), "{three}");
    assert!(capped.contains("8 partitions on 2 threads (of 4 asked: the memory fits 2),"), "{capped}");
    for dir in &dirs[1..] {
        for name in ["flows.csv", "ports.csv", "utilization.csv", "fct_buckets.csv"] {
            let a = std::fs::read(dirs[0].path().join(name)).unwrap();
            assert!(a == std::fs::read(dir.path().join(name)).unwrap(), "{name} differs");
        }
        let (mut a, mut b) = (summary(dirs[0].path()), summary(dir.path()));
        for s in [&mut a, &mut b] {
            s["wall_s"] = 0.into();
            s["events_per_s"] = 0.into();
        }
        assert_eq!(a, b);
    }
}
