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

/// A sweep store as `sluice.sweep` leaves it: sweep.json and aggregated.csv.
fn store(aggregated: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("sweep.json"),
        r#"{"scenario": "s.toml", "grid": {"classes.q.cc": ["cubic", "dctcp"], "switch.ecn.k": ["20KB", "60KB"]},
           "seeds": [1, 2, 3], "metrics": ["drops"], "set": []}"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("aggregated.csv"), aggregated).unwrap();
    dir
}

#[test]
fn report_on_a_sweep_store_plots_each_metric_against_the_grid() {
    let dir = store(
        "classes.q.cc,switch.ecn.k,drops:n,drops:mean,drops:ci_lo,drops:ci_hi\n\
         cubic,20KB,3,10.0,8.0,12.0\ncubic,60KB,3,4.0,3.5,4.5\ndctcp,20KB,3,2.0,,\ndctcp,60KB,1,1.0,,\n",
    );
    let out = sluice(&["report", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The figure is named after its metric.
    let png = std::fs::read(dir.path().join("drops.png")).unwrap();
    let decoder = png::Decoder::new(png.as_slice());
    let info = decoder.read_info().unwrap();
    assert_eq!((info.info().width, info.info().height), (960, 540));
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(html.contains("4 cells × 3 seeds"), "{html}");
    assert!(html.contains("data-x-axis=\"classes.q.cc\" data-y-axis=\"drops\""), "{html}");
    // The table has every cell: a mean with its interval, or a dash where there is none.
    assert!(html.contains("<td class=\"text\">cubic</td><td class=\"text\">20KB</td><td>10.00</td><td>8.000 – 12.00</td><td>3</td>"), "{html}");
    assert!(html.contains("<td class=\"text\">dctcp</td><td class=\"text\">60KB</td><td>1.000</td><td>—</td><td>1</td>"), "{html}");
}

#[test]
fn report_on_a_broken_sweep_store_names_the_file_and_column() {
    let dir =
        store("classes.q.cc,switch.ecn.k,drops:n,drops:mean,drops:ci_lo,drops:ci_hi\ncubic,20KB,3,ten,8.0,12.0\n");
    let out = sluice(&["report", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("aggregated.csv:2: column 4: expected a number or nothing, got `ten`"), "{err}");
    let dir = store("classes.q.cc,drops:mean\ncubic,1\n");
    let err = String::from_utf8_lossy(&sluice(&["report", dir.path().to_str().unwrap()]).stderr).to_string();
    assert!(err.contains("aggregated.csv: no column `switch.ecn.k`"), "{err}");
}

#[test]
fn seeds_without_the_python_package_say_how_to_install_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["sweep", "scenarios/opencc_storage.toml", "--grid", "classes.query.cc=cubic", "--metric", "drops"])
        .args(["--seeds", "1..2", "--out"])
        .arg(tempfile::tempdir().unwrap().path())
        .env("SLUICE_PYTHON", "/nonexistent/python3")
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sluice Python package") && err.contains("pip install '.[dask]'"), "{err}");
}
