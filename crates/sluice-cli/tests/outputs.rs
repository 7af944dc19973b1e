//! Outputs a user can trust: a run directory holds exactly this run's files and says where they
//! came from; undefined statistics are null, not 0; every flow has its delivered bytes; ports go
//! by the names scenarios use; a run cut short by sim.duration says so.

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

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn records(path: &Path) -> (csv::StringRecord, Vec<csv::StringRecord>) {
    let mut r = csv::Reader::from_path(path).unwrap();
    let headers = r.headers().unwrap().clone();
    (headers, r.records().map(Result::unwrap).collect())
}

#[test]
fn a_run_replaces_an_earlier_runs_files_and_leaves_the_users() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    run_ok(&["run", "scenarios/dctcp_two_flows.toml", "--quiet", "--out", out]);
    run_ok(&["report", out]);
    for f in ["cwnd.csv", "queues.csv", "report.html", "cwnd.png"] {
        assert!(dir.path().join(f).exists(), "{f}");
    }
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    // The quickstart samples no cwnd: an old cwnd.csv beside its flows.csv would pass for its own.
    run_ok(&["run", "scenarios/quickstart.toml", "--quiet", "--out", out]);
    for gone in ["cwnd.csv", "report.html", "cwnd.png", "queue_depth.png"] {
        assert!(!dir.path().join(gone).exists(), "{gone} from the earlier run survived");
    }
    assert_eq!(std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(), "mine");
    assert_eq!(json(&dir.path().join("run.json"))["scenario_file"], "scenarios/quickstart.toml");
}

#[test]
fn out_errors_name_the_path() {
    let out = sluice(&["run", "scenarios/quickstart.toml", "--quiet", "--out", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--out /dev/null: exists and is not a directory"), "{err}");
    let out = sluice(&["run", "scenarios/quickstart.toml", "--quiet", "--out", "/dev/null/run"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("/dev/null/run"), "{err}");
}

#[test]
fn run_json_records_the_resolved_scenario_overrides_seed_and_revision() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    run_ok(&[
        "run",
        "scenarios/quickstart.toml",
        "--quiet",
        "--out",
        out,
        "--set",
        "classes.default.cc=cubic",
        "--seed",
        "9",
    ]);
    let run = json(&dir.path().join("run.json"));
    assert_eq!(run["overrides"], serde_json::json!(["classes.default.cc=cubic", "sim.seed=9"]));
    assert_eq!(run["seed"], 9);
    assert_eq!(run["sluice_version"], env!("CARGO_PKG_VERSION"));
    let rev = run["git_revision"].as_str().unwrap();
    assert!(rev == "unknown" || (rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit())), "{rev}");
    // The scenario as run: the override applied, the file's other values kept.
    assert_eq!(run["scenario"]["classes"]["default"]["cc"], "cubic");
    assert_eq!(run["scenario"]["sim"]["seed"], 9);
    assert_eq!(run["scenario"]["topology"]["leaves"], 4);
}

#[test]
fn statistics_over_no_flow_are_null_and_a_cut_short_run_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    // At 5 us no flow of the quickstart has finished.
    let o = run_ok(&["run", "scenarios/quickstart.toml", "--out", out, "--set", "sim.duration=5us"]);
    let summary = json(&dir.path().join("summary.json"));
    assert_eq!(summary["flows"]["completed"], 0);
    for stat in ["fct_ns", "slowdown"] {
        assert_eq!(summary[stat]["count"], 0);
        for k in ["mean", "p50", "p99"] {
            assert!(summary[stat][k].is_null(), "{stat}.{k} = {}", summary[stat][k]);
        }
    }
    let err = String::from_utf8_lossy(&o.stderr);
    // Only the flows that had started by 5 us count as unfinished; the others had not begun.
    let (headers, rows) = records(&dir.path().join("flows.csv"));
    let start = headers.iter().position(|h| h == "start_ns").unwrap();
    let started = rows.iter().filter(|r| r[start].parse::<f64>().unwrap() < 5e3).count();
    assert!(started > 0 && started < 400);
    let warning = format!(
        "{started} of 400 sized flows did not finish: the run stopped at sim.duration = 5us ({} more had not started)",
        400 - started
    );
    assert!(err.contains(&warning), "no `{warning}` in {err}");
    assert!(err.contains("FCT mean n/a"), "{err}");
    // A run that ends because every flow is done has nothing to explain.
    let o = run_ok(&["run", "scenarios/quickstart.toml", "--out", out]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("did not finish"));
}

#[test]
fn every_flow_has_its_delivered_bytes_and_goodput() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    run_ok(&["run", "scenarios/opencc_storage.toml", "--quiet", "--out", out]);
    let (headers, rows) = records(&dir.path().join("flows.csv"));
    let names: Vec<&str> = headers.iter().collect();
    assert_eq!(&names[14..], ["bytes_delivered", "goodput_bps"]);
    let summary = json(&dir.path().join("summary.json"));
    let sim_s = summary["sim_time_ns"].as_f64().unwrap() / 1e9;
    let backup: Vec<&csv::StringRecord> = rows.iter().filter(|r| &r[3] == "backup").collect();
    assert_eq!(backup.len(), 4, "two bulk senders to each of two receivers");
    let mut delivered = 0.0;
    let mut rates = Vec::new();
    for r in &backup {
        assert!(r[5].is_empty() && r[7].is_empty(), "bulk flows are endless");
        let bytes: f64 = r[14].parse().unwrap();
        let goodput: f64 = r[15].parse().unwrap();
        let start_s = r[6].parse::<f64>().unwrap() / 1e9;
        // Goodput over the flow's time in the run, to the 0.1 b/s the column keeps.
        assert!((goodput - bytes * 8.0 / (sim_s - start_s)).abs() <= 0.06, "{r:?}");
        delivered += bytes;
        rates.push(goodput);
    }
    // The per-flow bytes add up to the class goodput summary.json reports.
    let class = summary["classes"]["backup"]["goodput_bps"].as_f64().unwrap();
    assert!((delivered * 8.0 / sim_s - class).abs() < 1e-6 * class, "{delivered} vs {class}");
    let jain = rates.iter().sum::<f64>().powi(2) / (rates.len() as f64 * rates.iter().map(|x| x * x).sum::<f64>());
    assert!(jain > 0.25 && jain <= 1.0, "Jain's index over 4 flows lies in [1/4, 1]: {jain}");
}

#[test]
fn ports_go_by_scenario_names() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    run_ok(&["run", "scenarios/dctcp_two_flows.toml", "--quiet", "--out", out]);
    let (h, ports) = records(&dir.path().join("ports.csv"));
    assert_eq!(h.iter().collect::<Vec<_>>(), ["port", "node", "peer", "rate_bps"]);
    // A star of 3 hosts: each host and the switch have a port per link, 6 in all.
    assert_eq!(ports.len(), 6);
    let sw_h2 = ports.iter().find(|r| &r[0] == "sw0->h2").expect("the sampled port is in ports.csv");
    assert_eq!((&sw_h2[1], &sw_h2[2], &sw_h2[3]), ("sw0", "h2", "10000000000"));
    // Every file names a port as ports.csv does, in its `port` column.
    let (h, queues) = records(&dir.path().join("queues.csv"));
    assert_eq!(h.iter().collect::<Vec<_>>(), ["t_ns", "node", "port", "bytes"]);
    assert!(!queues.is_empty() && queues.iter().all(|r| &r[1] == "sw0" && &r[2] == "sw0->h2"), "the scenario samples sw0->h2 only");
    let (h, util) = records(&dir.path().join("utilization.csv"));
    assert_eq!(h.iter().collect::<Vec<_>>(), ["node", "port", "tx_bytes", "utilization"]);
    assert!(util.iter().all(|r| r[1].starts_with(&format!("{}->", &r[0]))), "a port is named from its node: {util:?}");
    let names: Vec<&str> = util.iter().map(|r| r.get(1).unwrap()).collect();
    let mut from_ports: Vec<&str> = ports.iter().map(|r| r.get(0).unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    from_ports.sort();
    assert_eq!(sorted, from_ports);
}

#[test]
fn a_class_name_with_a_comma_stays_one_field() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(
        &scenario,
        "[topology]\nkind = \"star\"\nhosts = 2\nhost_rate = \"10Gbps\"\nhost_delay = \"1us\"\n\
         [classes.\"query,fast\"]\ncc = \"dctcp\"\n\
         [[workloads]]\nkind = \"flows\"\nclass = \"query,fast\"\nflows = [{src = 0, dst = 1, size = \"10KB\", start = \"0us\"}]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    run_ok(&["run", scenario.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()]);
    let (h, rows) = records(&out.join("flows.csv"));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].len(), h.len());
    assert_eq!(&rows[0][3], "query,fast");
    let (_, buckets) = records(&out.join("fct_buckets.csv"));
    assert!(buckets.iter().any(|r| &r[0] == "query,fast"), "{buckets:?}");
}
