//! `sluice sweep`: the tables it writes, and the error each kind of bad argument gets.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sluice(args: &[&str]) -> Output {
    let repo: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).current_dir(repo).output().expect("sluice runs")
}

#[test]
fn a_one_key_sweep_writes_a_row_per_cell_and_each_cells_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = sluice(&[
        "sweep",
        "scenarios/opencc_storage.toml",
        "--out",
        out,
        "--quiet",
        "--set",
        "sim.duration=100ms",
        "--grid",
        "classes.backup.cc=cubic,dctcp",
        "--metric",
        "classes.backup.goodput_bps:Mb/s",
        "--metric",
        "drops",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(dir.path().join("table.md")).unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), md);
    assert!(md.contains("| classes.backup.cc | classes.backup.goodput_bps (Mb/s) | drops |"), "{md}");
    let csv = std::fs::read_to_string(dir.path().join("table.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "classes.backup.cc,cell,classes.backup.goodput_bps:Mb/s,drops");
    assert_eq!(rows.len(), 3);
    for (row, cc) in rows[1..].iter().zip(["cubic", "dctcp"]) {
        let f: Vec<&str> = row.split(',').collect();
        assert_eq!(f[..2], [cc, &format!("classes.backup.cc={cc}")]);
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(f[1]).join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(summary["classes"]["backup"]["cc"], cc);
        let mbps = summary["classes"]["backup"]["goodput_bps"].as_f64().unwrap() / 1e6;
        assert!((f[2].parse::<f64>().unwrap() - mbps).abs() < 1e-6 * mbps);
        assert_eq!(f[3], summary["drops"].to_string());
    }
    // DCTCP keeps the queue at K: no drops; CUBIC fills the buffer.
    let drops = |row: &str| row.rsplit(',').next().unwrap().parse::<u64>().unwrap();
    assert!(drops(rows[1]) > 0 && drops(rows[2]) == 0, "{csv}");
}

#[test]
fn bad_arguments_name_the_argument_and_the_expected_form() {
    let base = ["sweep", "scenarios/opencc_storage.toml", "--out", "/nonexistent/never-written"];
    for (args, expect) in [
        (
            vec!["--grid", "classes.query.cc", "--metric", "drops"],
            "--grid classes.query.cc: no `=`; expected KEY=V1,V2,...",
        ),
        (vec!["--grid", "classes.query.cc=", "--metric", "drops"], "--grid classes.query.cc=: an empty value"),
        (
            vec!["--grid", "classes.query.cc=reno,,bbr", "--metric", "drops"],
            "--grid classes.query.cc=reno,,bbr: an empty value",
        ),
        (vec!["--grid", "a=1", "--grid", "a=2", "--metric", "drops"], "--grid a=2: the key `a` is swept twice"),
        (
            vec!["--grid", "classes.query.cc=reno", "--metric", "classes.query.goodput_bps:ms"],
            "--metric classes.query.goodput_bps:ms: unit ms converts nanoseconds",
        ),
        (
            vec!["--grid", "classes.query.cc=reno", "--metric", "fct_ns.mean:fortnights"],
            "--metric fct_ns.mean:fortnights: unknown unit `fortnights`",
        ),
        (vec!["--grid", "classes.query.cc=nosuchcc", "--metric", "drops"], "cell classes.query.cc=nosuchcc"),
    ] {
        let o = sluice(&base.iter().copied().chain(args.iter().copied()).collect::<Vec<_>>());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: expected {expect:?} in {err}");
    }
}

#[test]
fn a_metric_missing_from_summary_json_names_the_path_and_what_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let o = sluice(&[
        "sweep",
        "scenarios/opencc_storage.toml",
        "--out",
        dir.path().to_str().unwrap(),
        "--set",
        "sim.duration=20ms",
        "--grid",
        "classes.backup.cc=cubic",
        "--metric",
        "classes.bakup.goodput_bps",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--metric classes.bakup.goodput_bps: summary.json of cell classes.backup.cc=cubic has no `bakup` at `classes`"), "{err}");
    assert!(err.contains("keys there: backup, default, query"), "{err}");
    assert!(!dir.path().join("table.md").exists());
}
