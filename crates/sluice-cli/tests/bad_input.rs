//! Every example of issue 14 ("bad input never crashes, hangs or lies"): each asserts the clean
//! refusal (exit status 2, the key named, the expected form in words, no panic) or the correct
//! figure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sluice_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).current_dir(dir).output().expect("sluice runs")
}

/// A four-host star running one 100 KB flow for 1 ms, with `extra` appended.
fn scenario(dir: &Path, extra: &str) -> PathBuf {
    let text = format!(
        "[sim]\nduration = \"1ms\"\n\n[topology]\nkind = \"star\"\nhosts = 4\nhost_rate = \"10Gbps\"\nhost_delay = \"1us\"\n\n{extra}\n"
    );
    let with_flow = if extra.contains("[[workloads]]") {
        text
    } else {
        format!("{text}\n[[workloads]]\nkind = \"flows\"\nflows = [{{ src = 0, dst = 1, size = \"100KB\" }}]\n")
    };
    let path = dir.join("s.toml");
    std::fs::write(&path, with_flow).unwrap();
    path
}

/// Runs `check` (and `args`) on the scenario and returns stderr, asserting a clean refusal that
/// names each of `needles`.
fn refused(extra: &str, args: &[&str], needles: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), extra);
    let mut all = vec!["check", path.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = sluice_in(dir.path(), &all);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "expected a refusal of {extra:?} {args:?}; stderr: {err}");
    assert!(!err.contains("panicked") && !err.contains("memory allocation"), "{err}");
    for n in needles {
        assert!(err.contains(n), "the error should mention {n:?}: {err}");
    }
    for rust in ["u32", "usize", "u64", "struct ", "untagged enum", "StrOrInt"] {
        assert!(!err.contains(rust), "the error should not speak Rust ({rust}): {err}");
    }
    err
}

#[test]
fn a_cdf_with_mean_zero_is_refused_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("zero.cdf"), "0 100\n").unwrap();
    let path =
        scenario(dir.path(), "[[workloads]]\nkind = \"poisson\"\ncdf = \"zero.cdf\"\nload = 0.5\nduration = \"1ms\"\n");
    let out = sluice_in(dir.path(), &["check", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("workloads[0].cdf") && err.contains("mean flow size is 0"), "{err}");
}

#[test]
fn huge_outstanding_counts_are_refused_before_allocating() {
    for n in ["9223372036854775807", "4294967295"] {
        refused(
            &format!("[[workloads]]\nkind = \"rpc\"\nclients = [0]\nservers = [1]\noutstanding = {n}\nrequest_size = \"1KB\"\nresponse_size = \"1KB\"\nduration = \"1ms\"\n"),
            &[],
            &["workloads[0].outstanding", "limits.outstanding"],
        );
    }
}

#[test]
fn a_billion_poisson_flows_are_refused_with_the_count() {
    let err = refused(
        "[[workloads]]\nkind = \"poisson\"\nsize = \"1B\"\nload = 1.0\nduration = \"100s\"\n",
        &[],
        &["workloads[0].size", "limits.flows"],
    );
    // 4 hosts x 10 Gb/s x 100 s / 8 bits = 5e11 flows.
    assert!(err.contains("500000000000"), "{err}");
}

#[test]
fn poisson_incast_over_a_huge_duration_is_refused() {
    refused(
        "[[workloads]]\nkind = \"incast\"\nload = 0.5\nfan_in = 2\nsize = \"1KB\"\nduration = \"100000s\"\n",
        &[],
        &["workloads[0].duration", "limits.flows"],
    );
}

#[test]
fn one_picosecond_queue_sampling_is_refused() {
    refused(
        "[output.queues]\ninterval = \"1ps\"\nports = [\"sw0\"]\n",
        &[],
        &["output.queues.interval", "limits.samples"],
    );
}

#[test]
fn a_tiny_bucket_percent_is_refused_instead_of_hanging() {
    refused("[output.fct_buckets]\npercent = 1e-300\n", &[], &["output.fct_buckets.percent", "limits.fct_buckets"]);
}

#[test]
fn times_beyond_the_representable_range_name_the_largest_that_works() {
    refused(
        "[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0, dst = 1, size = \"1KB\", start = \"18446744.0737s\" }]\n",
        &[],
        &["workloads[0].flows[0].start", "at most 1000000s"],
    );
    let err = refused("", &["--set", "topology.host_delay=5000000s"], &["topology.host_delay", "at most 1000000s"]);
    assert!(err.contains("--set topology.host_delay=5000000s"), "an override's error cites the override: {err}");
}

#[test]
fn flow_sizes_whose_transmission_leaves_the_range_are_refused() {
    // 20,000 TB is above the 1 PB input limit.
    refused(
        "[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0, dst = 1, size = \"20000TB\" }]\n",
        &[],
        &["size", "1PB"],
    );
    // 1 PB at 1 Gb/s takes 8e6 s, past the 1e6 s horizon: the error gives the largest that works.
    let err = refused(
        "[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0, dst = 1, size = \"1000TB\" }]\n",
        &["--set", "topology.host_rate=1Gbps", "--set", "sim.duration=2s"],
        &["workloads[0].flows", "largest size that works"],
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn ideal_fct_grows_with_size_up_to_the_limit() {
    // Two flows of 1 TB and 100 TB at 100 Gb/s: the larger has the larger ideal time (no wrap).
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(
        dir.path(),
        "[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0, dst = 1, size = \"1TB\" }, { src = 2, dst = 3, size = \"100TB\" }]\n",
    );
    let out_dir = dir.path().join("out");
    let out = sluice_in(
        dir.path(),
        &[
            "run",
            path.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
            "--quiet",
            "--set",
            "topology.host_rate=100Gbps",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let flows = std::fs::read_to_string(out_dir.join("flows.csv")).unwrap();
    let ideal: Vec<f64> = flows.lines().skip(1).map(|l| l.split(',').nth(9).unwrap().parse().unwrap()).collect();
    // 1 TB of payload is at least 80 s at 100 Gb/s, 100 TB at least 8000 s.
    assert!(ideal[0] >= 80e9 && ideal[1] >= 8000e9 && ideal[1] > 99.0 * ideal[0], "{ideal:?}");
}

#[test]
fn repeated_hosts_and_self_flows_are_refused() {
    refused(
        "[[workloads]]\nkind = \"permutation\"\nhosts = [0, 0]\nsize = \"1KB\"\n",
        &[],
        &["workloads[0].hosts[1]", "listed twice"],
    );
    refused(
        "[[workloads]]\nkind = \"all_to_all\"\nhosts = [2, 2, 2]\nsize = \"1KB\"\n",
        &[],
        &["workloads[0].hosts[1]", "listed twice"],
    );
}

#[test]
fn a_workload_that_makes_no_flow_is_refused() {
    refused("[[workloads]]\nkind = \"flows\"\nflows = []\n", &[], &["workloads[0].flows", "empty"]);
    refused(
        "[[workloads]]\nkind = \"poisson\"\nsize = \"1GB\"\nload = 0.01\nduration = \"1us\"\n",
        &[],
        &["workloads[0].duration", "none"],
    );
}

#[test]
fn a_link_too_slow_for_one_frame_is_refused() {
    refused("", &["--set", "topology.host_rate=1Mbps"], &["topology.host_rate", "longer than the whole run"]);
}

#[test]
fn a_table_written_as_a_list_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(&path, "sim = [\"5ms\", 7, false]\n[topology]\nkind = \"star\"\nhosts = 2\n").unwrap();
    let out = sluice_in(dir.path(), &["check", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("s.toml:1: sim: expected a table") && err.contains("got a list"), "{err}");
}

#[test]
fn flow_ids_that_name_no_flow_are_refused() {
    refused("[output.pcap]\nflows = [4294967295]\n", &[], &["output.pcap.flows[0]", "does not exist"]);
    refused(
        "[output.telemetry]\ninterval = \"1us\"\nflows = [7]\n",
        &[],
        &["output.telemetry.flows[0]", "does not exist"],
    );
}

#[test]
fn toml_errors_always_give_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    for text in ["# c\r\r\n", "[topology]\nkind = "] {
        let path = dir.path().join("s.toml");
        std::fs::write(&path, text).unwrap();
        let out = sluice_in(dir.path(), &["check", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        assert_eq!(out.status.code(), Some(2));
        let reason = err.split("not valid TOML:").nth(1).unwrap_or_default().trim();
        assert!(reason.len() > 10, "an empty reason: {err}");
    }
}

#[test]
fn wrong_kinds_are_explained_in_words() {
    refused(
        "",
        &["--set", "sim.duration=true"],
        &["sim.duration", "expected a duration with a unit", "the boolean true"],
    );
    refused(
        "[switch]\npriorities = 300\n",
        &[],
        &["switch.priorities", "a whole number from 0 to 255", "the number 300"],
    );
    refused("[int]\nqdepth_shift = \"x\"\n", &[], &["int.qdepth_shift", "a whole number from 0 to 4294967295"]);
    refused("[output]\nqueues = 5\n", &[], &["output.queues", "a table of named keys"]);
}

#[test]
fn set_errors_cite_the_override_not_a_line() {
    let err = refused("", &["--set", "switch.alpha=\"x\""], &["--set switch.alpha=\"x\"", "switch.alpha"]);
    assert!(
        !err.split("s.toml:").skip(1).any(|rest| rest.starts_with(|c: char| c.is_ascii_digit())),
        "no line of the file is to blame: {err}"
    );
    let deep = vec!["a"; 10_000].join(".") + "=1";
    refused("", &["--set", &deep], &["levels"]);
}

#[test]
fn set_of_an_unknown_class_is_refused() {
    refused("", &["--set", "classes.query.cc=dctcp"], &["--set classes.query.cc=dctcp", "no class \"query\""]);
}

#[test]
fn check_lists_every_problem_in_one_pass() {
    let extra = "[switch]\nbufer = \"1MB\"\nalpha = -1\n\n[classes.default]\ncc = \"nosuch\"\n\n\
                 [[workloads]]\nkind = \"flows\"\nflows = [{ src = 0, dst = 9, size = \"1KB\" }]\n";
    let err = refused(extra, &["--set", "sim.seed=\"x\""], &[]);
    let problems: Vec<&str> = err.lines().collect();
    let expected = [
        "--set sim.seed=\"x\": sim.seed: expected a whole number",
        "s.toml:11: switch.bufer: unknown field",
        "s.toml:12: switch.alpha: expected a positive number",
        "s.toml:15: classes.default.cc: unknown congestion control \"nosuch\"",
        "workloads[0].flows[0].dst: host 9 does not exist",
    ];
    assert_eq!(problems.len(), expected.len(), "one line a problem, no follow-on: {err}");
    for (line, want) in problems.iter().zip(expected) {
        assert!(line.starts_with("error: ") && line.contains(want), "{want:?} in {line:?}");
    }
}

#[test]
fn set_of_an_unknown_class_lists_each_class_once() {
    let err =
        refused("[classes.default]\ncc = \"dctcp\"\n", &["--set", "classes.query.cc=dctcp"], &["no class \"query\""]);
    assert!(err.contains("it defines none besides default"), "{err}");
}

#[test]
fn a_class_no_flow_belongs_to_is_a_warning_the_user_sees() {
    let dir = tempfile::tempdir().unwrap();
    let bulk = "[classes.bulk]\ncc = \"cubic\"\n\n[classes.bulk.match]\nhosts = [";
    for (hosts, warned) in [("2, 3]", true), ("1]", false)] {
        let path = scenario(dir.path(), &format!("{bulk}{hosts}\n"));
        for cmd in ["check", "run"] {
            let out_dir = dir.path().join("out");
            let mut args = vec![cmd, path.to_str().unwrap()];
            if cmd == "run" {
                args.extend(["--out", out_dir.to_str().unwrap(), "--quiet"]);
            }
            let out = sluice_in(dir.path(), &args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{err}");
            assert_eq!(
                err.contains("warning: no flow belongs to class \"bulk\""),
                warned,
                "hosts = [{hosts}, {cmd}: {err}"
            );
        }
    }
}

#[test]
fn the_whole_seed_range_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), "");
    let out_dir = dir.path().join("out");
    let out = sluice_in(
        dir.path(),
        &[
            "run",
            path.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
            "--quiet",
            "--seed",
            "9223372036854775808",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["seed"].as_u64(), Some(9_223_372_036_854_775_808));
}

/// `sluice report` on a directory holding only `file` with `body`.
fn report_refuses(file: &str, body: &str, needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(file), body).unwrap();
    let out = sluice_in(dir.path(), &["report", dir.path().to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "report accepted {file}: {body}; {err}");
    for n in needles {
        assert!(err.contains(n), "the error should mention {n:?}: {err}");
    }
}

#[test]
fn report_refuses_nan_inf_and_negative_figures() {
    report_refuses(
        "queues.csv",
        "t_ns,node,port,bytes\n0,sw0,1,5\n10,sw0,1,NaN\n",
        &["queues.csv", "line 3", "column `bytes`"],
    );
    report_refuses("queues.csv", "t_ns,node,port,bytes\n-5,sw0,1,5\n", &["line 2", "column `t_ns`"]);
    report_refuses(
        "utilization.csv",
        "node,port,tx_bytes,utilization\nsw0,1,100,inf\n",
        &["utilization.csv", "line 2", "column `utilization`"],
    );
    report_refuses(
        "fct_buckets.csv",
        "class,bucket_lo_bytes,bucket_hi_bytes,count,fct_mean_ns,fct_p50_ns,fct_p99_ns,slowdown_mean,slowdown_p50,slowdown_p95,slowdown_p99,slowdown_p999\ndefault,0,100,3,-1,1,1,1,1,1,1,1\n",
        &["fct_buckets.csv", "line 2", "column `fct_mean_ns`"],
    );
}

#[test]
fn tlt_settings_are_refused_at_their_keys() {
    refused("[tlt]\nenable = true\n", &[], &["s.toml:11: tlt.enable: unknown field `enable`", "expected one of `enabled`, `threshold`, `every`"]);
    refused("[tlt]\nenabled = true\nthreshold = \"lots\"\n", &[], &["s.toml:12: tlt.threshold", "size"]);
    refused("[tlt]\nenabled = true\nrdma_marking = \"windows\"\n", &[], &["s.toml:12: tlt.rdma_marking", "`auto`, `rate`, `window`"]);
    // No ECN step threshold to default to: the port is named, and the paper's guideline given.
    refused("[tlt]\nenabled = true\n", &[], &["tlt.threshold: required", "sw0->h0", "max(K, BDP)"]);
    refused(
        "[switch.ecn]\nmode = \"step\"\nk = \"30KB\"\n[switch.ports.\"sw0->h1\"]\ntlt_threshold = \"100B\"\n[tlt]\nenabled = true\n",
        &[],
        &["switch.ports.\"sw0->h1\".tlt_threshold", "at least one full frame (1538 bytes)"],
    );
    refused("[[workloads]]\nkind = \"incast\"\nsenders = [1]\nreceiver = 0\nsize = \"1KB\"\nflows_per_sender = 0\n", &[], &["workloads[0].flows_per_sender", "at least 1"]);
}

#[test]
fn pfc_settings_are_refused_at_their_keys() {
    refused("[pfc]\nenabled = true\npriorities = [9]\n", &[], &["pfc.priorities[0]", "0 to 7", "9"]);
    refused("[pfc]\nenabled = true\npriorities = []\n", &[], &["pfc.priorities", "at least one lossless priority"]);
    refused("[pfc]\nenabled = true\nquanta = 0\n", &[], &["pfc.quanta", "1 to 65535"]);
    refused("[pfc]\nenabled = true\nheadroom = \"100B\"\n", &[], &["pfc.headroom", "at least one full frame (1538 bytes)"]);
    refused("[pfc]\nenabled = true\npause = 3\n", &[], &["s.toml:12: pfc.pause: unknown field `pause`", "`quanta`"]);
}

#[test]
fn rdma_settings_are_refused_at_their_keys() {
    refused("[rdma]\nmtu = 100\n", &[], &["rdma.mtu", "256 to 9000", "100"]);
    refused(
        "[rdma]\nrecovery = \"selective\"\n",
        &[],
        &["rdma.recovery", "s.toml:11: rdma.recovery", "unknown variant `selective`, expected one of `gbn`, `irn`, `sack`"],
    );
    refused("[rdma]\nrecovery = \"irn\"\nrto_low = \"1ms\"\n", &[], &["rdma.rto_low", "at most rdma.rto (320us)"]);
    refused("[rdma]\nack_interval = 0\n", &[], &["rdma.ack_interval", "at least 1"]);
    refused("[classes.r]\ncc = \"dcqcn\"\ntransport = \"roce\"\n", &[], &["classes.r.transport", "expected one of `tcp`, `rdma`, `uet`"]);
    refused("[classes.r]\ncc = \"dcqcn\"\ntransport = \"rdma\"\nparams = { g = 2.0 }\n", &[], &["classes.r.params.g", "(0, 1]"]);
    refused("[classes.r]\ncc = \"timely\"\ntransport = \"rdma\"\nparams = { t_high = \"10us\" }\n", &[], &["t_high", "more than t_low (50us)"]);
}

/// Runs `check` on a three-rack `rdcn` scenario with `circuit` as its `[circuit]` table and
/// `schedule` as `sched.txt`, asserting a clean refusal that names each of `needles`.
fn circuit_refused(circuit: &str, schedule: &str, needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[sim]\nduration = \"1ms\"\n\n[topology]\nkind = \"rdcn\"\nracks = 3\nhosts_per_rack = 2\nhost_rate = \"10Gbps\"\n\
         host_delay = \"1us\"\npacket_rate = \"10Gbps\"\npacket_delay = \"5us\"\ncircuit_rate = \"80Gbps\"\ncircuit_delay = \"30us\"\n\n\
         [circuit]\n{circuit}\n\n[[workloads]]\nkind = \"bulk\"\nsenders = [0]\nreceiver = 2\n"
    );
    std::fs::write(dir.path().join("s.toml"), text).unwrap();
    std::fs::write(dir.path().join("sched.txt"), schedule).unwrap();
    let out = sluice_in(dir.path(), &["check", "s.toml"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "expected a refusal of {circuit:?} / {schedule:?}; stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "the error should mention {n:?}: {err}");
    }
}

#[test]
fn circuit_settings_and_schedule_files_are_refused_at_their_keys_and_lines() {
    let file = "schedule = \"file\"\nfile = \"sched.txt\"";
    circuit_refused(file, "0us 0->1 1->2\n180us\n200us 0->3\n400us repeat\n", &["circuit.file: sched.txt:3: 0->3: racks are 0 to 2"]);
    circuit_refused(file, "0us 0->1\n180us 2=>0\n", &["sched.txt:2: \"2=>0\" is not a circuit", "<source rack>-><destination rack>"]);
    circuit_refused(file, "0us 0->1 2->1\n", &["sched.txt:1: 2->1: a rack sends on one circuit and receives on one circuit at a time"]);
    circuit_refused(file, "0us 0->1\n200us\n100us 1->0\n", &["sched.txt:3: 100us is not after the previous line's 200us"]);
    circuit_refused(file, "# only a comment\n", &["sched.txt: no configurations"]);
    circuit_refused("schedule = \"file\"\nfile = \"missing.txt\"", "", &["circuit.file: cannot read", "missing.txt"]);
    circuit_refused("schedule = \"rotor\"", "", &["circuit.schedule: unknown schedule \"rotor\"", "\"strobe\" or \"file\""]);
    circuit_refused("voq_packets = 0", "", &["circuit.voq_packets: expected at least 1 packet"]);
    circuit_refused("voq_large_packets = 4", "", &["circuit.voq_large_packets: expected at least voq_packets = 16, got 4"]);
    circuit_refused("strobe_racks = 2", "", &["circuit.strobe_racks: expected at least the 3 racks there are"]);
    circuit_refused("day = \"0us\"", "", &["circuit.day: expected a positive duration"]);
    circuit_refused("cycle = 3", "", &["s.toml:16: circuit.cycle: unknown field `cycle`", "`voq_packets`"]);
    refused("[circuit]\nvoq_packets = 16\n", &[], &["circuit: only for topology.kind = \"rdcn\", not \"star\""]);
}

#[test]
fn cpu_and_offload_settings_are_refused_at_their_keys() {
    let hs = "[transport]\nhandshake = true\n";
    refused("[cpu]\nhosts = [7]\n", &[], &["cpu.hosts: host 7 does not exist; the topology has hosts 0 to 3"]);
    refused("[cpu]\ncores = 0\n", &[], &["cpu.cores: expected 1 to 1024 cores, got 0"]);
    refused("[cpu]\nghz = -1.0\n", &[], &["cpu.ghz: expected a clock rate between 0.01 and 100 GHz"]);
    refused("[cpu.costs]\nsetup = -5\n", &[], &["s.toml:11: cpu.costs.setup: expected a whole number of 0 or more; got the number -5"]);
    refused("[cpu.costs]\nsyn = 5\n", &[], &["cpu.costs.syn: unknown field `syn`", "`setup`"]);
    refused("[offload]\nhosts = [0]\n", &[], &["offload: setup and teardown offloads act on the handshake", "transport.handshake = true"]);
    refused(&format!("{hs}[offload]\nhosts = [9]\n"), &[], &["offload.hosts: host 9 does not exist"]);
    refused(&format!("{hs}[offload]\ntable_entries = 0\n"), &[], &["offload.table_entries: expected 1 to 16777216 connections, got 0"]);
    refused(&format!("{hs}[offload]\nwheel_slot = \"2ms\"\n"), &[], &["offload.wheel_slot: expected a slot above 0 and at most offload.rto (1ms), got 2ms"]);
    refused(&format!("{hs}[offload]\nrto = \"0us\"\n"), &[], &["offload.rto: expected a timeout above 0"]);
    let rpc = "[[workloads]]\nkind = \"rpc\"\nconnections = \"transaction\"\nclients = [1]\nservers = [0]\nrequest_size = \"32B\"\nresponse_size";
    refused(&format!("{rpc} = \"40B\"\n"), &[], &["connections: \"transaction\" answers on the server's FIN, so it needs transport.handshake = true"]);
    refused(&format!("{hs}{rpc} = \"3KB\"\n"), &[], &["response_size: a transaction's response rides on one segment, so at most 1448 bytes (the MSS); got 3000"]);
    refused(&format!("{hs}{rpc} = \"40B\"\n").replace("transaction", "pipelined"), &[], &["\"per_request\", \"persistent\" or \"transaction\", got \"pipelined\""]);
}

#[test]
fn proxy_workloads_are_refused_at_their_keys() {
    let hs = "[transport]\nhandshake = true\n";
    let proxy = "[[workloads]]\nkind = \"proxy\"\nclients = [1, 2]\nproxy = 0\nbackends = [3]\nduration = \"1ms\"\n";
    refused(&format!("{proxy}header_size = \"100B\"\n"), &[], &["workloads[0].kind: a proxy splices and closes established connections, so it needs transport.handshake = true"]);
    refused(&format!("{hs}{proxy}"), &[], &["workloads[0].header_size: required for kind = \"proxy\""]);
    refused(&format!("{hs}{proxy}header_size = 0\n"), &[], &["workloads[0].header_size: expected a positive size"]);
    refused(&format!("{hs}{proxy}header_size = \"100B\"\n").replace("[1, 2]", "[0, 1]"), &[], &["workloads[0].clients[0]: host 0 is the proxy"]);
    refused(&format!("{hs}{proxy}header_size = \"100B\"\n").replace("[3]", "[0]"), &[], &["workloads[0].backends[0]: host 0 is the proxy"]);
    refused(&format!("{hs}{proxy}header_size = \"100B\"\n").replace("proxy = 0", "proxy = 7"), &[], &["workloads[0].proxy: host 7 does not exist"]);
    refused(&format!("{hs}{proxy}header_size = \"100B\"\nservers = [3]\n"), &[], &["workloads[0].servers: not used by kind = \"proxy\""]);
    refused(&format!("{hs}{proxy}header_size = \"100B\"\nbody_size = \"1MB\"\n[classes.r]\ncc = \"dcqcn\"\ntransport = \"rdma\"\n"), &[], &["a proxy relays TCP connections, but class \"r\" runs on RDMA"]);
}

#[test]
fn an_unknown_parameter_set_names_the_sets_the_algorithm_has() {
    refused(
        "[classes.default]\ncc = \"dcqcn\"\ntransport = \"rdma\"\npreset = \"hpcc\"\n",
        &[],
        &["classes.default.preset", "unknown parameter set \"hpcc\" for dcqcn", "\"paper\", \"hpcc_sim\", \"tlt_sim\""],
    );
    refused("[classes.default]\ncc = \"cubic\"\npreset = \"paper\"\n", &[], &["classes.default.preset", "cubic has no named parameter sets"]);
}

#[test]
fn a_zero_cnp_interval_is_refused_and_points_to_every_ack() {
    refused(
        "[rdma]\ncnp_interval = \"0us\"\n[classes.default]\ncc = \"dcqcn\"\ntransport = \"rdma\"\n",
        &[],
        &["rdma.cnp_interval", "positive duration", "rdma.cnp = \"every_ack\""],
    );
    refused("[rdma]\ncnp = \"always\"\n", &[], &["rdma.cnp", "paced", "every_ack"]);
    refused(
        "[switch.ecn]\nmode = \"step\"\nk = \"10KB\"\nmark_at = \"egress\"\n",
        &[],
        &["switch.ecn.mark_at", "expected \"enqueue\" or \"dequeue\""],
    );
}

#[test]
fn sack_recovery_without_an_rdma_class_is_refused() {
    // TCP always recovers with SACK; rdma.recovery only shapes queue pairs.
    refused("[rdma]\nrecovery = \"sack\"\n", &[], &["rdma.recovery", "\"sack\" recovers RDMA queue pairs", "transport = \"rdma\""]);
}

/// Runs `sluice ARGS` in `dir` and returns (exit status, stdout, stderr).
fn sluice_out(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = sluice_in(dir, args);
    (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
}

#[test]
fn check_lists_independent_problems_in_one_pass_with_what_was_meant() {
    // Issue 39's rounds: a schema error hid the unknown algorithm; the unknown algorithm hid its
    // unknown parameter; a threshold without its unit came back as a second, false "required".
    let extra = "[switch]\nbufer = \"1MB\"\n\n[switch.ecn]\nmode = \"step\"\nk = 40\n\n\
                 [classes.default]\ncc = \"dctpc\"\nparams = { gg = 0.5 }\n\n\
                 [classes.bulk]\ncc = \"dctcp\"\nparams = { g = \"abc\" }\n\n\
                 [[workloads]]\nkind = \"flows\"\nflows = [{ src = 0, dst = 9, size = \"1KB\" }]\n";
    let err = refused(extra, &["--set", "sim.duration=10"], &[]);
    let problems: Vec<&str> = err.lines().collect();
    let expected: [&[&str]; 7] = [
        &["--set sim.duration=10: sim.duration: expected a duration with a unit; got the number 10", "\"10us\""],
        &["s.toml:11: switch.bufer: unknown field `bufer`", "did you mean `buffer`?"],
        &["s.toml:15: switch.ecn.k: expected a size with a unit; got the number 40", "write \"40KB\""],
        &["s.toml:23: classes.bulk.params.g: expected a number; got the text \"abc\""],
        &["s.toml:18: classes.default.cc: unknown congestion control \"dctpc\"", "did you mean `dctcp`?"],
        // Read against the algorithm meant, in the same pass.
        &["s.toml:19: classes.default.params.gg: unknown field `gg`, expected `g` or `alpha_init`", "did you mean `g`?"],
        &["s.toml:27: workloads[0].flows[0].dst: host 9 does not exist"],
    ];
    assert_eq!(problems.len(), expected.len(), "one line a problem, none that the check's own edits caused: {err}");
    for (line, want) in problems.iter().zip(expected) {
        for w in want {
            assert!(line.starts_with("error: ") && line.contains(w), "{w:?} in {line:?}");
        }
    }
    assert!(!err.contains("required") && !err.contains("f64"), "{err}");
}

#[test]
fn a_size_without_a_unit_is_refused_as_a_duration_is() {
    refused("[switch.ecn]\nmode = \"step\"\nk = 40\n", &[], &["s.toml:12: switch.ecn.k", "got the number 40", "\"40KB\""]);
    refused("", &["--set", "switch.buffer=1000000"], &["--set switch.buffer=1000000", "\"1000000B\""]);
    refused("", &["--set", "switch.buffer=\"1000000\""], &["switch.buffer", "with a unit", "\"1000000B\""]);
    refused("", &["--set", "sim.duration=10"], &["sim.duration", "got the number 10", "\"10us\""]);
    // 0 needs no unit, for sizes as for durations.
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), "[pfc]\nenabled = true\nresume_offset = 0\n");
    let (code, _, err) = sluice_out(dir.path(), &["check", path.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn check_refuses_a_frame_longer_than_the_run_as_run_does() {
    // 9,000-byte RDMA packets take 7.3 ms at 10 Mb/s: longer than the 1.3 ms run.
    let extra = "[rdma]\nmtu = 9000\n\n[classes.default]\ncc = \"dcqcn\"\ntransport = \"rdma\"\n";
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), extra);
    let sets = ["--set", "topology.host_rate=10Mbps", "--set", "sim.duration=1.3ms"];
    let (code, _, check) = sluice_out(dir.path(), &[&["check", path.to_str().unwrap()][..], &sets].concat());
    assert_eq!(code, Some(2), "{check}");
    assert_eq!(check.lines().count(), 1, "one problem, and no false \"required\" after it: {check}");
    assert!(check.contains("--set topology.host_rate=10Mbps: topology.host_rate: at 10Mbps one full 9082-byte frame takes 7.265ms, longer than the whole run"), "{check}");
    let out = dir.path().join("out");
    let (code, _, run) = sluice_out(dir.path(), &[&["run", path.to_str().unwrap(), "--out", out.to_str().unwrap()][..], &sets].concat());
    assert_eq!((code, run), (Some(2), check), "run refuses what check refuses, in the same words");
}

/// A four-host star of 1-byte flows (a one-point CDF) at half load for `duration`.
fn one_byte_flows(dir: &Path, duration: &str, extra: &str) -> PathBuf {
    std::fs::write(dir.join("one.cdf"), "1 100\n").unwrap();
    scenario(dir, &format!("{extra}\n[[workloads]]\nkind = \"poisson\"\ncdf = \"one.cdf\"\nload = 0.5\nduration = \"{duration}\"\n"))
}

#[test]
fn a_run_beyond_the_memory_limit_is_refused_with_the_memory_it_would_take() {
    // 4 hosts x 10 Gb/s x 0.5 / 8 bits = 2.5e9 one-byte flows a second: 2.5 million in 1 ms, and
    // each needs a frame of 91 bytes, so the links fall behind and nearly all are open at once.
    let dir = tempfile::tempdir().unwrap();
    let path = one_byte_flows(dir.path(), "1ms", "[limits]\nmemory = \"1GB\"\n");
    let (code, _, check) = sluice_out(dir.path(), &["check", path.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{check}");
    assert!(!check.contains("memory allocation") && !check.contains("panicked"), "{check}");
    let gb: f64 = check
        .split("a run would take about ")
        .nth(1)
        .and_then(|r| r.split(" GB of memory").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the memory it would take, in GB: {check}"));
    // 2.5 M flows at ~1.7 KB each, open or not.
    assert!((3.6..=4.8).contains(&gb), "{gb} GB: {check}");
    assert!(check.contains("s.toml:13: workloads[0]: ") && check.contains("more than limits.memory = 1.0 GB"), "{check}");
    assert!(check.contains("make fewer flows, or set limits.memory"), "{check}");
    let out = dir.path().join("out");
    let (code, _, run) = sluice_out(dir.path(), &["run", path.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!((code, run), (Some(2), check), "run refuses before allocating, in the same words");
}

#[test]
fn the_memory_check_expects_is_the_peak_a_run_reaches() {
    // Nearly every flow open at once (1-byte flows the links fall behind on), and flows spread out
    // (1 KB flows at half load over 100 ms, each open for a microsecond or two): 250,000 each.
    let dir = tempfile::tempdir().unwrap();
    let spread = "[[workloads]]\nkind = \"poisson\"\nsize = \"1KB\"\nload = 0.5\nduration = \"100ms\"\n";
    for path in [one_byte_flows(dir.path(), "100us", ""), scenario(dir.path(), spread)] {
        let (code, said, err) = sluice_out(dir.path(), &["check", path.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{err}");
        assert!(said.contains("250000 flows"), "{said}");
        let mb = |text: &str, after: &str, before: &str| -> f64 {
            let n = text.split(after).nth(1).and_then(|r| r.split(before).next()).and_then(|n| n.trim().parse().ok());
            n.unwrap_or_else(|| panic!("{after}...{before} in {text}"))
        };
        let expected = mb(&said, "a run takes about ", " MB of memory");
        let out = dir.path().join("out");
        let (code, _, report) = sluice_out(dir.path(), &["run", path.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{report}");
        let peak = mb(&report, "peak memory ", " MB");
        assert!((expected - peak).abs() <= 0.25 * peak, "check expects {expected} MB, the run peaked at {peak} MB");
    }
}

#[test]
fn the_memory_check_expects_on_several_threads_is_the_peak_a_run_reaches() {
    // The 10,240-host fat tree's 0.3 ms prefix (its million flows built): the world on the first
    // thread and a shard for each other one. Issue 50 asks for the estimate within 10% of the
    // measured peak on 1, 2 and 8 threads.
    let dir = tempfile::tempdir().unwrap();
    let bench = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/fat_tree_10k.toml");
    let prefix = ["--set", "sim.duration=\"0.3ms\""];
    let (code, said, err) = sluice_out(dir.path(), &[&["check", bench.to_str().unwrap()][..], &prefix].concat());
    assert_eq!(code, Some(0), "{err}");
    let mb = |text: &str, after: &str, before: &str| -> f64 {
        let n = text.split(after).nth(1).and_then(|r| r.split(before).next()).and_then(|n| n.trim().parse().ok());
        n.unwrap_or_else(|| panic!("{after}...{before} in {text}"))
    };
    let one = mb(&said, "a run takes about ", " MB of memory on one thread");
    let more = mb(&said, "and ", " MB more for each other thread");
    let eight = mb(&said, "partitions (", " MB on 8 threads)");
    for (threads, expected) in [(1, one), (2, one + more), (8, eight)] {
        let out = dir.path().join(format!("out{threads}"));
        let threads_arg = threads.to_string();
        let run = [&["run", bench.to_str().unwrap(), "--out", out.to_str().unwrap(), "--threads", &threads_arg][..], &prefix].concat();
        let (code, _, report) = sluice_out(dir.path(), &run);
        assert_eq!(code, Some(0), "{report}");
        let peak = mb(&report, "peak memory ", " MB");
        assert!((expected - peak).abs() <= 0.1 * peak, "on {threads} threads check expects {expected} MB, the run peaked at {peak} MB");
    }
}

#[test]
fn counts_are_written_with_their_noun_in_the_right_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), "");
    let (code, said, err) = sluice_out(dir.path(), &["check", path.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(said.contains("ok — 4 hosts, 1 switch, 1 flow; classes: default (cubic)"), "{said}");
    refused("", &["--set", "workloads.3.size=1KB"], &["\"workloads\" has 1 entry; index 3 is out of range"]);
}

#[test]
fn sluice_list_names_every_topology_kind_and_ecn_key() {
    let dir = tempfile::tempdir().unwrap();
    let (_, list, _) = sluice_out(dir.path(), &["list"]);
    // What the scenario reader accepts, as its own errors list it.
    let kinds = refused("", &["--set", "topology.kind=ring"], &["topology.kind: unknown kind \"ring\""]);
    let ecn = refused("[switch.ecn]\nnosuch = 1\n", &[], &["switch.ecn.nosuch: unknown field"]);
    let quoted = |text: &str, q: char| -> Vec<String> { text.split(q).skip(1).step_by(2).map(String::from).collect() };
    let kinds = quoted(kinds.split("expected one of").nth(1).unwrap(), '"');
    let keys = quoted(ecn.split("expected one of").nth(1).unwrap(), '`');
    assert!(kinds.contains(&"rdcn".to_string()) && keys.contains(&"spacing".to_string()), "{kinds:?} {keys:?}");
    let topologies = list.split("topologies").nth(1).unwrap().split("workloads").next().unwrap();
    for k in &kinds {
        assert!(topologies.lines().any(|l| l.trim_start().starts_with(&format!("{k} "))), "`sluice list` omits topology {k}: {list}");
    }
    let marking = list.split("ECN marking").nth(1).unwrap();
    for k in &keys {
        assert!(marking.contains(k.as_str()), "`sluice list` omits the ECN key {k}: {marking}");
    }
    assert!(topologies.contains("rdcn         racks, hosts_per_rack"), "{topologies}");
}

#[test]
fn thread_counts_outside_1_to_1024_are_refused_at_the_key_or_the_flag() {
    for v in ["0", "1025", "-3", "\"many\"", "2.5"] {
        refused("", &["--set", &format!("sim.threads={v}")], &["sim.threads", "from 1 to 1024", "\"auto\""]);
    }
    // In the file: its line.
    let dir = tempfile::tempdir().unwrap();
    let path = scenario(dir.path(), "");
    let text = std::fs::read_to_string(&path).unwrap().replacen("[sim]\n", "[sim]\nthreads = 0\n", 1);
    std::fs::write(&path, text).unwrap();
    let out = sluice_in(dir.path(), &["check", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("s.toml:2") && err.contains("sim.threads") && err.contains("got 0"), "{err}");
    // On the command line: the flag.
    for v in ["0", "1025", "lots"] {
        let out = sluice_in(dir.path(), &["run", path.to_str().unwrap(), "--threads", v, "--quiet"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--threads {v}: {err}");
        assert!(err.contains("--threads") && err.contains("from 1 to 1024") && !err.contains("panicked"), "{err}");
    }
}
