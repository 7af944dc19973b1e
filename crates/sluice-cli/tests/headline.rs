//! What `sluice run` tells a user on stderr: a headline that names the figures of the mechanism each
//! bundled scenario is about (and agrees with summary.json), warnings for flows that ran another
//! algorithm than their class asks for, and no "did not finish" for connections that never end.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs a scenario with `--set` overrides; returns its stderr, summary.json and flows.csv rows.
fn run(scenario: &str, sets: &[&str]) -> (String, Value, Vec<csv::StringRecord>, csv::StringRecord) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["run", scenario, "--out"]).arg(dir.path()).current_dir(repo());
    for s in sets {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().expect("sluice runs");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "sluice run {scenario} {sets:?} failed: {err}");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap()).unwrap();
    let mut r = csv::Reader::from_path(dir.path().join("flows.csv")).unwrap();
    let header = r.headers().unwrap().clone();
    (err, summary, r.records().map(Result::unwrap).collect(), header)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("expected a count, got {v}"))
}

/// The number a headline rate like "1.34 k/s" or "347/s" stands for.
fn parse_rate(text: &str) -> f64 {
    let t = text.strip_suffix("/s").unwrap_or_else(|| panic!("not a rate: {text:?}")).trim();
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('M') => (&t[..t.len() - 1], 1e6),
        Some('G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    num.trim().parse::<f64>().unwrap_or_else(|e| panic!("not a rate: {text:?} ({e})")) * mult
}

/// What a scenario is about, so what its headline must show.
#[derive(Clone, Copy, Debug)]
enum Fig {
    /// Flows that ran the class's fallback algorithm.
    Fallback,
    /// Modelled host CPU: utilization and cycles per request.
    Cpu,
    /// NIC offload counts.
    Offload,
    /// Closed-loop requests and their rate.
    Requests,
    /// Sized flows and their FCT.
    Flows,
    /// Endless flows and their goodput.
    Endless,
    /// Persistent connections.
    Persistent,
    /// ECN marks.
    Ecn,
    /// PFC pauses.
    Pfc,
    /// Circuit utilization and ToR latency.
    Circuit,
    /// TLT's important packets and colour drops.
    Tlt,
    /// Packets trimmed to headers.
    Trim,
    /// The Ultra Ethernet transport's counts.
    Uet,
    /// TCP-INT echoes.
    Int,
    /// Collectives: their iterations, bus bandwidth and the hottest links.
    Collective,
    /// Chakra traces: their ranks, nodes and when every rank was done.
    Chakra,
}

/// The classes the headline gives a line each (several carry traffic), or none (it sums them).
fn class_lines(s: &Value) -> Vec<(String, &Value)> {
    let busy: Vec<(String, &Value)> = s["classes"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, c)| u(&c["flows"]["total"]) > 0 || c.get("requests").is_some())
        .map(|(n, c)| (n.clone(), c))
        .collect();
    if busy.len() > 1 {
        busy
    } else {
        Vec::new()
    }
}

/// The traffic figures a scope (the whole run or one class) must show for `fig`.
fn traffic(fig: Fig, scope: &Value, line: &str, what: &str) -> Vec<String> {
    let f = &scope["flows"];
    match fig {
        Fig::Requests => {
            let Some(r) = scope.get("requests") else { return Vec::new() };
            let head = format!("requests {} (", u(&r["completed"]));
            let at = line.find(&head).unwrap_or_else(|| panic!("{what}: no `{head}` in {line:?}"));
            let rest = &line[at + head.len()..];
            let shown = parse_rate(&rest[..rest.find(')').unwrap()]);
            let per_s = r["per_s"].as_f64().unwrap();
            // Three significant digits: within half a unit of the third.
            assert!((shown - per_s).abs() <= per_s * 0.005, "{what}: rate {shown} shown for {per_s}/s in {line:?}");
            vec![head]
        }
        Fig::Flows => {
            let sized = u(&f["completed"]) + u(&f["unfinished"]);
            if sized + u(&f["not_started"]) == 0 {
                return Vec::new();
            }
            vec![format!("flows {}/{sized} completed", u(&f["completed"])), "FCT mean".into()]
        }
        Fig::Endless => {
            let n = u(&f["endless"]);
            assert!(n > 0, "{what}: expected endless flows");
            vec![format!("{n} endless flow"), "goodput ".into()]
        }
        Fig::Persistent => {
            let n = u(&f["persistent"]);
            assert!(n > 0, "{what}: expected persistent connections");
            vec![format!("{n} persistent connections")]
        }
        _ => Vec::new(),
    }
}

/// The substrings the headline of a run with summary `s` must hold for `fig`.
fn expected(fig: Fig, s: &Value, err: &str, what: &str) -> Vec<String> {
    match fig {
        Fig::Fallback => {
            let mut out = Vec::new();
            for (name, c) in s["classes"].as_object().unwrap() {
                let fb = &c["fallbacks"];
                if u(&fb["flows"]) > 0 {
                    let ran: Vec<&String> = fb["cc"].as_object().unwrap().keys().collect();
                    assert_eq!(ran.len(), 1, "{what}: one fallback algorithm per class");
                    out.push(format!(
                        "negotiation: class {name} asks for {}, but {} of its {} flows ran {}",
                        c["cc"].as_str().unwrap(),
                        u(&fb["flows"]),
                        u(&c["flows"]["total"]),
                        ran[0]
                    ));
                }
            }
            assert!(!out.is_empty(), "{what}: expected a class with fallbacks in {s}");
            out
        }
        Fig::Cpu => {
            let c = &s["cpu"];
            vec![
                format!("CPU: {} core", u(&c["cores"])),
                format!("{:.1}% busy", c["utilization"].as_f64().unwrap() * 100.0),
                format!("{:.0} cycles per request", c["cycles_per_request"].as_f64().unwrap()),
            ]
        }
        Fig::Offload => {
            let o = &s["offload"];
            vec![format!("offload: {} SYN cookies, {} teardowns, {} connection pairs spliced", u(&o["syn_cookies"]), u(&o["teardowns"]), u(&o["spliced"]))]
        }
        Fig::Ecn => vec![format!("ECN marks {}", u(&s["ecn_marks"]))],
        Fig::Pfc => {
            let p = &s["pfc"];
            assert_eq!(p["pauses"], s["pfc_pauses"], "{what}: PFC pauses counted twice differently");
            if u(&p["pauses"]) == 0 {
                vec!["PFC: no pauses".into()]
            } else {
                vec![
                    format!("PFC: {} pauses", u(&p["pauses"])),
                    format!("{} ports paused ({} host NICs)", u(&p["ports_paused"]), u(&p["host_ports_paused"])),
                ]
            }
        }
        Fig::Circuit => {
            let c = &s["circuit"];
            vec![
                format!("circuit: utilization {:.1}% over {} days", c["utilization"].as_f64().unwrap() * 100.0, u(&c["days"])),
                "ToR latency mean ".into(),
                format!("VOQ drops {}", u(&c["voq_drops"])),
            ]
        }
        Fig::Tlt => {
            let t = &s["tlt"];
            vec![
                format!("TLT: {} important packets", u(&t["important_packets"])),
                format!("{} proactive retransmissions, {} colour drops", u(&t["proactive_retransmissions"]), u(&t["colour_drops"])),
            ]
        }
        Fig::Trim => {
            let t = &s["trimming"];
            assert!(u(&t["trimmed"]) > 0 && u(&t["evicted"]) > 0, "{what}: nothing trimmed: {t}");
            vec![
                format!("trimming: {} packets cut to headers as they arrived, {} queued ones cut", u(&t["trimmed"]), u(&t["evicted"])),
                format!("{} discarded by receivers that take none", u(&t["headers_discarded"])),
            ]
        }
        Fig::Uet => {
            let t = &s["uet"];
            assert!(u(&t["nacks"]) > 0 && u(&t["rtx"]) > 0, "{what}: no NACKs: {t}");
            vec![format!("UET: {} new packets, {} resent; {} ACKs, {} NACKs", u(&t["new"]), u(&t["rtx"]), u(&t["acks"]), u(&t["nacks"]))]
        }
        Fig::Int => vec![format!("TCP-INT: {} echoes; path latency p50 ", u(&s["telemetry"]["echoes"]))],
        Fig::Collective => {
            let c = &s["collectives"];
            let mut out = Vec::new();
            for k in c["collectives"].as_array().unwrap() {
                let (ranks, done, iterations) = (u(&k["ranks"]), u(&k["completed"]), u(&k["iterations"]));
                assert!(done == iterations && done > 0, "{what}: {done} of {iterations} iterations finished");
                let name = |key: &str| k[key].as_str().unwrap().to_string();
                out.push(format!("collective {}: {} by {} over {ranks} ranks", name("workload"), name("op"), name("algorithm")));
                out.push(format!("{done} of {iterations} iterations"));
                out.push(format!("algbw {:.2} GB/s, busbw {:.2} GB/s", k["algbw_GBps"].as_f64().unwrap(), k["busbw_GBps"].as_f64().unwrap()));
            }
            let hottest = c["hottest_links"][0]["link"].as_str().unwrap();
            out.push(format!("hottest links: {hottest} "));
            out
        }
        Fig::Chakra => {
            let mut out = Vec::new();
            for c in s["chakra"].as_array().unwrap() {
                let ranks = u(&c["ranks"]);
                assert_eq!(u(&c["ranks_done"]), ranks, "{what}: a rank of {} was not done", c["workload"]);
                out.push(format!("chakra {}: {} over {ranks} ranks", c["workload"].as_str().unwrap(), c["file"].as_str().unwrap()));
                out.push(format!("{} messages: all {ranks} ranks done in ", u(&c["messages"])));
            }
            out
        }
        Fig::Requests | Fig::Flows | Fig::Endless | Fig::Persistent => {
            let classes = class_lines(s);
            if classes.is_empty() {
                // One traffic line, ending in the network's counters.
                let tail = format!("drops {}, ECN marks {}", u(&s["drops"]), u(&s["ecn_marks"]));
                let line = err.lines().find(|l| l.contains(&tail)).unwrap_or_else(|| panic!("{what}: no `{tail}` line in\n{err}"));
                let out = traffic(fig, s, line, what);
                assert!(!out.is_empty(), "{what}: {fig:?} expected of the run");
                out.into_iter().map(|t| assert_in(line, t, what)).collect()
            } else {
                let mut out = Vec::new();
                for (name, c) in classes {
                    let head = format!("class {name} ({}): ", c["cc"].as_str().unwrap());
                    let line = err.lines().find(|l| l.starts_with(&head)).unwrap_or_else(|| panic!("{what}: no `{head}` line in\n{err}"));
                    if matches!(fig, Fig::Endless | Fig::Persistent) && u(&c["flows"][if matches!(fig, Fig::Endless) { "endless" } else { "persistent" }]) == 0 {
                        continue;
                    }
                    out.extend(traffic(fig, c, line, what).into_iter().map(|t| assert_in(line, t, what)));
                }
                assert!(!out.is_empty(), "{what}: {fig:?} expected of some class");
                out
            }
        }
    }
}

fn assert_in(line: &str, needle: String, what: &str) -> String {
    assert!(line.contains(&needle), "{what}: `{needle}` not in the line {line:?}");
    needle
}

/// A scenario's name, the overrides that keep it short, what its headline is about, and what it
/// must not say.
type Case = (&'static str, &'static [&'static str], &'static [Fig], &'static [&'static str]);

/// Each bundled scenario's case (one with offload for the proxy, whose default runs without).
const SCENARIOS: &[Case] = &[
    ("acceltcp_kv", &[], &[Fig::Fallback, Fig::Cpu, Fig::Requests], &[]),
    ("acceltcp_proxy", &[], &[Fig::Cpu, Fig::Requests], &[]),
    ("acceltcp_proxy", &["offload.hosts=[0]"], &[Fig::Offload, Fig::Cpu, Fig::Requests], &[]),
    ("acceltcp_proxy_mtcp", &[], &[Fig::Cpu, Fig::Requests], &[]),
    ("cc_compare", &[], &[Fig::Flows, Fig::Ecn], &[]),
    ("collective_allreduce", &[], &[Fig::Collective, Fig::Flows], &["waiting:"]),
    ("chakra_allreduce", &[], &[Fig::Chakra, Fig::Collective, Fig::Flows], &["waiting:"]),
    // NSCC on one path each: flows meet on links, and their trimmed packets are NACKed.
    (
        "cc_compare",
        &["classes.default.transport=uet", "classes.default.cc=nscc", "switch.trim.enabled=true", "uet.paths=1"],
        &[Fig::Uet, Fig::Trim, Fig::Flows],
        &[],
    ),
    ("dctcp_two_flows", &[], &[Fig::Endless, Fig::Ecn], &["flows 0/", "FCT mean n/a"]),
    ("fat_tree_bulk", &[], &[Fig::Endless, Fig::Ecn], &["flows 0/", "FCT mean n/a"]),
    ("hpcc_ws320", &["sim.duration=1ms"], &[Fig::Pfc, Fig::Flows], &[]),
    ("incast", &[], &[Fig::Requests, Fig::Flows, Fig::Ecn], &[]),
    ("incast", &["switch.trim.threshold=\"50KB\""], &[Fig::Trim, Fig::Requests, Fig::Flows], &[]),
    ("ns3_dctcp_example", &["sim.duration=\"300ms\""], &[Fig::Endless, Fig::Ecn], &["flows 0/", "FCT mean n/a"]),
    ("opencc_storage", &[], &[Fig::Requests, Fig::Flows, Fig::Endless], &[]),
    ("pfc_incast", &[], &[Fig::Pfc, Fig::Flows], &[]),
    ("quickstart", &[], &[Fig::Flows, Fig::Ecn], &[]),
    ("rdcn_etalon", &[], &[Fig::Circuit, Fig::Endless], &["flows 0/", "FCT mean n/a"]),
    ("rdma_incast", &[], &[Fig::Pfc, Fig::Flows], &[]),
    ("storage_query_backup", &[], &[Fig::Requests, Fig::Flows, Fig::Endless], &[]),
    ("tcp_int_storage", &[], &[Fig::Int, Fig::Requests, Fig::Persistent, Fig::Endless], &["flows 0/", "did not finish"]),
    ("tlt_incast", &[], &[Fig::Tlt, Fig::Requests, Fig::Flows], &["M/s)"]),
    ("tlt_leafspine", &["sim.duration=5ms"], &[Fig::Tlt, Fig::Flows], &[]),
    ("tlt_rdma", &["sim.duration=2ms"], &[Fig::Tlt, Fig::Flows], &[]),
    ("twin_bbr_cubic", &[], &[Fig::Endless], &[]),
    ("twin_incast", &[], &[Fig::Requests, Fig::Persistent, Fig::Ecn], &[]),
    ("twin_small", &[], &[Fig::Requests, Fig::Persistent, Fig::Endless], &[]),
    ("uet_incast", &[], &[Fig::Uet, Fig::Trim, Fig::Flows], &[]),
    ("websearch_leafspine", &[], &[Fig::Flows, Fig::Ecn], &[]),
];

#[test]
fn every_bundled_scenario_headline_names_its_mechanism_figures() {
    let mut bundled: Vec<String> = std::fs::read_dir(repo().join("scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    bundled.sort();
    for name in &bundled {
        assert!(SCENARIOS.iter().any(|(n, ..)| n == name), "scenarios/{name}.toml has no expected headline here");
    }
    for &(name, sets, figs, never) in SCENARIOS {
        let what = format!("{name} {sets:?}");
        let (err, s, _, _) = run(&format!("scenarios/{name}.toml"), sets);
        for bad in never {
            assert!(!err.contains(bad), "{what}: the headline says `{bad}`:\n{err}");
        }
        // Every flow is counted in exactly one state, overall and per class.
        for scope in std::iter::once(&s).chain(s["classes"].as_object().unwrap().values()) {
            let f = &scope["flows"];
            let parts: u64 = ["completed", "unfinished", "not_started", "endless", "persistent"].iter().map(|k| u(&f[*k])).sum();
            assert_eq!(parts, u(&f["total"]), "{what}: flow states do not add up: {f}");
        }
        for &fig in figs {
            for needle in expected(fig, &s, &err, &what) {
                assert!(err.contains(&needle), "{what}: the headline does not show `{needle}`:\n{err}");
            }
        }
    }
}

#[test]
fn a_class_whose_flows_fall_back_says_so_in_a_warning_and_counts_them_in_the_summary() {
    let (err, s, rows, header) = run("scenarios/acceltcp_kv.toml", &[]);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (cc, negotiation) = (col("cc"), col("negotiation"));
    let fell: Vec<_> = rows.iter().filter(|r| r[negotiation].starts_with("fallback_")).collect();
    // acceltcp_kv's star switch marks no ECN, so DCTCP's every flow falls back to CUBIC.
    assert_eq!(fell.len(), rows.len(), "every flow falls back");
    assert!(fell.iter().all(|r| &r[cc] == "cubic" && &r[negotiation] == "fallback_path_no_ecn"));
    let n = rows.len() as u64;
    let warning = format!("warning: class \"default\" asks for dctcp, but {n} of its {n} flows ran cubic instead: a switch on the path does not mark ECN (fallback_path_no_ecn: {n} flows; see switch.ecn.mode)");
    assert!(err.contains(&warning), "no fallback warning `{warning}` in\n{err}");
    assert!(err.contains(&format!("negotiation: class default asks for dctcp, but {n} of its {n} flows ran cubic (fallback_path_no_ecn {n})")), "{err}");
    let class = &s["classes"]["default"];
    assert_eq!(class["cc"], "dctcp", "summary.json still names the algorithm the class asks for");
    let fb = &class["fallbacks"];
    assert_eq!(u(&fb["flows"]), n);
    assert_eq!(u(&fb["reasons"]["fallback_path_no_ecn"]), n);
    assert_eq!(u(&fb["reasons"]["fallback_peer_no_int"]), 0, "every reason is listed, with its zero");
    assert_eq!(fb["cc"], serde_json::json!({ "cubic": n }));

    // With ECN marking on the path, DCTCP is accepted: nothing falls back and nothing warns.
    let (err, s, rows, _) = run("scenarios/acceltcp_kv.toml", &["switch.ecn.mode=step", "switch.ecn.k=100KB"]);
    assert!(rows.iter().all(|r| &r[negotiation] == "accepted" && &r[cc] == "dctcp"));
    assert_eq!(u(&s["classes"]["default"]["fallbacks"]["flows"]), 0);
    assert_eq!(s["classes"]["default"]["fallbacks"]["cc"], serde_json::json!({}));
    assert!(!err.contains("negotiation:") && !err.contains("instead:"), "{err}");
}

#[test]
fn persistent_connections_and_endless_flows_are_not_unfinished_flows() {
    let (err, s, rows, header) = run("scenarios/tcp_int_storage.toml", &["sim.duration=2ms", "workloads.0.duration=2ms"]);
    let size = header.iter().position(|h| h == "size_bytes").unwrap();
    let endless = rows.iter().filter(|r| r[size].is_empty()).count() as u64;
    assert!(!err.contains("did not finish") && !err.contains("had not started"), "{err}");
    assert!(!err.contains("flows 0/"), "{err}");
    assert!(err.contains("512 persistent connections and 32 endless flows, goodput "), "{err}");
    let f = &s["flows"];
    // 16 clients x 16 servers, a connection each way; two replication pushes into each client.
    assert_eq!((u(&f["persistent"]), u(&f["endless"]), endless), (512, 32, 32), "{f}");
    assert_eq!(u(&f["total"]), 544);
    assert_eq!((u(&f["unfinished"]), u(&f["not_started"])), (0, 0), "{f}");
}

#[test]
fn flows_the_run_did_not_reach_are_not_counted_as_unfinished() {
    let (err, s, rows, header) = run("scenarios/quickstart.toml", &["sim.duration=1ms"]);
    let (start, fct) = (header.iter().position(|h| h == "start_ns").unwrap(), header.iter().position(|h| h == "fct_ns").unwrap());
    let begun = |r: &&csv::StringRecord| r[start].parse::<f64>().unwrap() < 1e6;
    let started = rows.iter().filter(begun).count() as u64;
    let unfinished = rows.iter().filter(begun).filter(|r| r[fct].is_empty()).count() as u64;
    let later = rows.len() as u64 - started;
    assert!(unfinished > 0 && later > 0, "1 ms into the quickstart some flows run and some have not begun");
    let warning = format!("warning: {unfinished} of 400 sized flows did not finish: the run stopped at sim.duration = 1ms ({later} more had not started)");
    assert!(err.contains(&warning), "no `{warning}` in\n{err}");
    assert!(err.contains(&format!("flows {}/{started} completed ({later} not started)", started - unfinished)), "{err}");
    let f = &s["flows"];
    assert_eq!((u(&f["unfinished"]), u(&f["not_started"])), (unfinished, later), "{f}");
}

#[test]
fn an_incast_reports_its_round_rate_at_its_scale() {
    let (err, s, _, _) = run("scenarios/tlt_incast.toml", &[]);
    let r = &s["classes"]["incast"]["requests"];
    let (n, per_s) = (u(&r["completed"]), r["per_s"].as_f64().unwrap());
    // 10 back-to-back rounds whose latency is the span they cover: the rate is rounds over that span.
    let lat = &s["classes"]["incast"]["request_latency_ns"];
    let span_s = lat["mean"].as_f64().unwrap() * n as f64 / 1e9;
    assert!((per_s * span_s / n as f64 - 1.0).abs() < 0.01, "{per_s}/s over {span_s} s");
    assert!((1000.0..2000.0).contains(&per_s), "about 1.3 k rounds/s: {per_s}");
    let head = format!("requests {n} (");
    let line = err.lines().find(|l| l.contains(&head)).unwrap_or_else(|| panic!("no `{head}` in\n{err}"));
    let rest = &line[line.find(&head).unwrap() + head.len()..];
    let shown = &rest[..rest.find(')').unwrap()];
    // Thousands of rounds a second read in k/s, to three significant digits.
    assert!(shown.ends_with(" k/s"), "{line}");
    assert!((parse_rate(shown) - per_s).abs() <= per_s * 0.005, "{shown} for {per_s}/s");
}
