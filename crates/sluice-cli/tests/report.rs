//! End-to-end tests of `sluice report`: the page and plots it makes from real runs and from files
//! the simulator does not write yet, and the errors bad or missing inputs get.

use base64::Engine;
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

fn run_scenario(scenario: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    run_ok(&["run", scenario, "--out", dir.path().to_str().unwrap(), "--quiet"]);
    dir
}

fn report(dir: &Path) -> String {
    run_ok(&["report", dir.to_str().unwrap()]);
    std::fs::read_to_string(dir.join("report.html")).expect("report.html written")
}

fn report_err(dir: &Path) -> String {
    let out = sluice(&["report", dir.to_str().unwrap()]);
    assert!(!out.status.success(), "sluice report {} should fail", dir.display());
    assert_eq!(out.status.code(), Some(2));
    assert!(!dir.join("report.html").exists(), "no report is written from bad inputs");
    String::from_utf8(out.stderr).unwrap()
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

/// The report's rendering of a nanosecond figure: four significant digits in ns, µs, ms or s.
fn time_text(ns: f64) -> String {
    let (div, unit) = match ns {
        x if x >= 1e9 => (1e9, "s"),
        x if x >= 1e6 => (1e6, "ms"),
        x if x >= 1e3 => (1e3, "µs"),
        _ => (1.0, "ns"),
    };
    let v = ns / div;
    let decimals = (3 - v.log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$} {unit}")
}

/// Decodes a PNG and checks it is a real chart: sane size, many colours, a fair share of ink.
fn check_png(bytes: &[u8], what: &str) -> (u32, u32) {
    let decoder = png::Decoder::new(bytes);
    let mut reader = decoder.read_info().unwrap_or_else(|e| panic!("{what}: not a PNG: {e}"));
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap_or_else(|e| panic!("{what}: undecodable: {e}"));
    let (w, h) = (info.width, info.height);
    assert!((400..=4000).contains(&w) && (200..=4000).contains(&h), "{what}: {w}x{h}");
    assert_eq!(info.color_type, png::ColorType::Rgb, "{what}");
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()].chunks(3).collect();
    let non_white = pixels.iter().filter(|p| **p != [255, 255, 255]).count();
    let share = non_white as f64 / pixels.len() as f64;
    assert!(share > 0.01 && share < 0.9, "{what}: {:.1}% of pixels are not white", share * 100.0);
    let colours: std::collections::HashSet<&[u8]> = pixels.iter().copied().collect();
    assert!(colours.len() > 20, "{what}: only {} colours", colours.len());
    // A drawn line in a palette colour (not only grey axes and text).
    assert!(pixels.iter().any(|p| p[0].abs_diff(p[1]) > 60 || p[1].abs_diff(p[2]) > 60), "{what}: no coloured pixel");
    (w, h)
}

/// Every `data:image/png;base64,` image in the page, decoded.
fn embedded_pngs(html: &str) -> Vec<Vec<u8>> {
    html.split("src=\"data:image/png;base64,")
        .skip(1)
        .map(|rest| {
            let b64 = &rest[..rest.find('"').expect("closing quote")];
            base64::engine::general_purpose::STANDARD.decode(b64).expect("valid base64")
        })
        .collect()
}

#[test]
fn quickstart_report_has_the_summary_figures_and_decodable_plots() {
    let dir = run_scenario("scenarios/quickstart.toml");
    let html = report(dir.path());
    let s = summary(dir.path());

    let p99 = s["fct_ns"]["p99"].as_f64().unwrap();
    assert!(
        html.contains(&format!("<td title=\"{}\">{}</td>", s["fct_ns"]["p99"], time_text(p99))),
        "FCT p99 {p99} not rendered"
    );
    let p50 = s["fct_ns"]["p50"].as_f64().unwrap();
    assert!(html.contains(&time_text(p50)), "FCT p50 {p50} not rendered as {}", time_text(p50));
    assert!(html.contains(&format!("<tr><th>events</th><td>{}</td></tr>", s["events"])));
    assert!(html.contains(&format!("<tr><th>ecn_marks</th><td>{}</td></tr>", s["ecn_marks"])));
    assert!(html.contains("<h3>classes</h3>") && html.contains("<h4>default</h4>"));
    assert!(html.contains("<td class=\"text\">dctcp</td>"));
    // The flows table: 400 flows in class default, all finished.
    assert!(
        html.contains("<tr><th>default</th><td class=\"text\">dctcp</td><td>400</td><td>400</td><td>0</td>"),
        "flows table"
    );

    // Self-contained: no external references, every figure embedded and also written beside it.
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http") && !html.contains("<link"));
    let pngs = embedded_pngs(&html);
    assert_eq!(pngs.len(), 4, "slowdown vs size, FCT CDF, queue depth, port utilization");
    for (i, png) in pngs.iter().enumerate() {
        let (w, h) = check_png(png, &format!("embedded image {i}"));
        // The utilization bars grow with the number of ports; the other plots are 960 x 540.
        assert!(w == 960 && (h == 540 || i == 3), "embedded image {i} is {w} x {h}");
    }
    for file in ["slowdown_vs_size.png", "fct_cdf.png", "queue_depth.png", "utilization.png"] {
        let bytes = std::fs::read(dir.path().join(file)).unwrap_or_else(|_| panic!("{file} written"));
        check_png(&bytes, file);
        assert!(pngs.contains(&bytes), "{file} is the image embedded in report.html");
    }
    // quickstart samples the 10 ports of sw0 (naming one twice): 8 drawn, the rest folded.
    assert!(html.contains("10 ports: the 8 with the highest peak are drawn; the other 2 are folded"), "queue caption");
    // What the run did not record is said, not silently skipped (every run writes
    // utilization.csv and fct_buckets.csv).
    for absent in ["cwnd.csv", "telemetry.csv"] {
        assert!(html.contains(&format!("<li><code>{absent}</code> was not recorded")), "{absent}");
    }
    assert!(!dir.path().join("cwnd.png").exists());
}

#[test]
fn dctcp_report_plots_queue_and_cwnd_and_says_why_fct_plots_are_missing() {
    let dir = run_scenario("scenarios/dctcp_two_flows.toml");
    let html = report(dir.path());
    for file in ["queue_depth.png", "cwnd.png", "utilization.png"] {
        let bytes = std::fs::read(dir.path().join(file)).unwrap_or_else(|_| panic!("{file} written"));
        check_png(&bytes, file);
    }
    assert_eq!(embedded_pngs(&html).len(), 3);
    // Two bulk flows that never finish: no size, no FCT.
    assert!(html.contains("No finished flow has a size and a slowdown"));
    assert!(html.contains("flows.csv has no finished flow: FCT CDF not drawn."));
    assert!(html.contains("<td>2</td><td>0</td><td>2</td>"), "2 flows, 0 finished, 2 unfinished");
    assert!(html.contains("2 flows."), "cwnd caption counts the flows");
    // sim_time_ns is 100 ms.
    assert!(html.contains(&time_text(summary(dir.path())["sim_time_ns"].as_f64().unwrap())));
}

const FLOWS_HEADER: &str =
    "id,src,dst,class,cc,size_bytes,start_ns,finish_ns,fct_ns,ideal_fct_ns,slowdown,retransmits,timeouts";

#[test]
fn future_series_and_extra_columns_are_plotted() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let mut flows = format!("{FLOWS_HEADER},negotiated\n");
    for i in 0..200u64 {
        let size = 1000 * (1 + i * i);
        let fct = 10_000.0 + size as f64 * 0.1 * (1.0 + (i % 5) as f64);
        let ideal = 10_000.0 + size as f64 * 0.1;
        let class = if i % 2 == 0 { "query" } else { "bulk" };
        flows += &format!(
            "{i},{},{},{class},dctcp,{size},0,{fct},{fct},{ideal},{:.4},0,0,yes\n",
            i % 4,
            4 + i % 4,
            fct / ideal
        );
    }
    flows += "200,0,4,query,dctcp,5000,0,,,,,3,1,no\n";
    std::fs::write(p.join("flows.csv"), flows).unwrap();
    let mut util = String::from("node,port,tx_bytes,utilization\n");
    for i in 0..40 {
        util += &format!("sw{},{},{},{:.3}\n", i / 8, i % 8, i * 1000, (i as f64 / 40.0).powi(2));
    }
    std::fs::write(p.join("utilization.csv"), util).unwrap();
    let mut tel = String::from("t_ns,flow,srtt_ns,cwnd_bytes,util,qdepth_bytes,path_latency_ns,hop_id\n");
    for i in 0..500 {
        for f in 0..2 {
            let x = (i as f64 / 40.0 + f as f64).sin();
            tel += &format!(
                "{},{f},{},{},{},{},,{f}\n",
                i * 1000,
                20_000.0 + 5_000.0 * x,
                60_000.0 + 10_000.0 * x,
                0.5 + 0.4 * x,
                30_000.0 * (1.0 + x)
            );
        }
    }
    std::fs::write(p.join("telemetry.csv"), tel).unwrap();

    let html = report(p);
    let pngs = embedded_pngs(&html);
    assert_eq!(pngs.len(), 4, "slowdown, FCT CDF, utilization, telemetry");
    for file in ["slowdown_vs_size.png", "fct_cdf.png", "utilization.png", "telemetry.png"] {
        check_png(&std::fs::read(p.join(file)).unwrap(), file);
    }
    // Utilization bars are capped: 40 ports, 30 drawn.
    assert!(
        html.contains("of 40 ports, from utilization.csv. The 30 busiest are drawn; the other 10"),
        "utilization caption"
    );
    let (_, h) = check_png(&std::fs::read(p.join("utilization.png")).unwrap(), "utilization.png");
    assert!(h > 540, "one row per bar: {h}");
    // Telemetry: four signals recorded (path latency empty), one panel each.
    let (_, h) = check_png(&std::fs::read(p.join("telemetry.png")).unwrap(), "telemetry.png");
    assert_eq!(h, 4 * 300);
    assert!(html.contains("quarter-decade size buckets of flows.csv"));
    assert!(
        html.contains("<tr><th>query</th><td class=\"text\">dctcp</td><td>101</td><td>100</td><td>1</td>"),
        "flows table"
    );
    assert!(html.contains("<p>summary.json was not recorded.</p>"));

    // Without flows.csv, the slowdown plot uses fct_buckets.csv.
    std::fs::remove_file(p.join("flows.csv")).unwrap();
    std::fs::write(
        p.join("fct_buckets.csv"),
        "class,bucket_lo_bytes,bucket_hi_bytes,count,fct_mean_ns,fct_p50_ns,fct_p99_ns,slowdown_mean,slowdown_p50,slowdown_p95,slowdown_p99,slowdown_p999\n\
         query,0,10000,5,1,1,1,1.2,1.1,1.5,2.0,2.2\n\
         query,10000,100000,5,1,1,1,1.4,1.3,1.8,2.6,3.0\n\
         query,100000,,0,,,,,,,,\n",
    )
    .unwrap();
    let html = report(p);
    assert!(html.contains("over fct_buckets.csv, each row at the largest size it holds"));
    assert!(!html.contains("<code>fct_buckets.csv</code> was not recorded"));
}

fn quickstart_copy() -> tempfile::TempDir {
    let dir = run_scenario("scenarios/quickstart.toml");
    std::fs::remove_file(dir.path().join("queues.csv")).unwrap();
    dir
}

fn replace_line(path: &Path, line: usize, with: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[line - 1] = with;
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn malformed_flows_line_names_file_line_and_column() {
    let dir = quickstart_copy();
    let flows = dir.path().join("flows.csv");
    replace_line(&flows, 5, "3,1,2,default,dctcp,1000,0,5000,fast,4000,1.25,0,0,accepted,1000,2000000000.0");
    let err = report_err(dir.path());
    assert!(err.contains("flows.csv: line 5: column `fct_ns`"), "{err}");
    assert!(err.contains("expected a time in nanoseconds, or empty for an unfinished flow, found `fast`"), "{err}");

    replace_line(&flows, 5, "3,1,2,default,dctcp,1000,0,5000");
    let err = report_err(dir.path());
    assert!(err.contains("flows.csv: line 5: expected 16 comma-separated fields like the header, found 8"), "{err}");

    replace_line(
        &flows,
        1,
        "id,src,dst,class,size_bytes,cc,start_ns,finish_ns,fct_ns,ideal_fct_ns,slowdown,retransmits,timeouts",
    );
    let err = report_err(dir.path());
    assert!(err.contains("flows.csv: line 1: expected the header `id,src,dst,class,cc,size_bytes,"), "{err}");
}

#[test]
fn malformed_summary_and_series_name_the_file() {
    let dir = quickstart_copy();
    std::fs::write(dir.path().join("summary.json"), "{\n  \"seed\": 1,\n  \"events\": oops\n}\n").unwrap();
    let err = report_err(dir.path());
    assert!(err.contains("summary.json: line 3, column"), "{err}");
    assert!(err.contains("expected a JSON object"), "{err}");

    std::fs::write(dir.path().join("summary.json"), "[1, 2]").unwrap();
    let err = report_err(dir.path());
    assert!(
        err.contains("summary.json: line 1: expected a JSON object as written by `sluice run`, found an array"),
        "{err}"
    );

    std::fs::remove_file(dir.path().join("summary.json")).unwrap();
    std::fs::write(dir.path().join("cwnd.csv"), "t_ns,flow,cwnd\n0,0,14480\n").unwrap();
    let err = report_err(dir.path());
    assert!(
        err.contains("cwnd.csv: line 1: missing column `cwnd_bytes`; expected the header `t_ns,flow,cwnd_bytes`"),
        "{err}"
    );

    std::fs::write(dir.path().join("cwnd.csv"), "").unwrap();
    let err = report_err(dir.path());
    assert!(err.contains("cwnd.csv: line 1: the file is empty; expected the header `t_ns,flow,cwnd_bytes`"), "{err}");

    std::fs::write(dir.path().join("cwnd.csv"), "t_ns,flow,cwnd_bytes\n0,0,14480\n10,-1,14480\n").unwrap();
    let err = report_err(dir.path());
    assert!(err.contains("cwnd.csv: line 3: column `flow`: expected a flow id (an integer), found `-1`"), "{err}");
}

#[test]
fn a_directory_without_outputs_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a run").unwrap();
    let err = report_err(dir.path());
    assert!(err.contains("no run outputs found; expected at least one of summary.json, flows.csv"), "{err}");
    assert!(err.contains("sluice run SCENARIO --out DIR"), "{err}");

    let missing = dir.path().join("nope");
    let err = report_err(&missing);
    assert!(err.contains("nope: no such directory"), "{err}");
}

#[test]
fn requests_csv_holds_every_request_and_the_report_plots_their_latency() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    run_ok(&["run", "scenarios/tcp_int_storage.toml", "--set", "sim.duration=1ms", "--set", "workloads.0.duration=1ms", "--out", out, "--quiet"]);
    let text = std::fs::read_to_string(dir.path().join("requests.csv")).expect("requests.csv written");
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("class,start_ns,end_ns,latency_ns"));
    let rows: Vec<Vec<f64>> =
        lines.map(|l| l.split(',').skip(1).map(|v| v.parse::<f64>().unwrap()).collect()).collect();
    let s = summary(dir.path());
    assert_eq!(rows.len() as u64, s["requests"]["completed"].as_u64().unwrap());
    for r in &rows {
        assert!((r[1] - r[0] - r[2]).abs() < 1e-3 && r[2] > 0.0, "{r:?}");
    }
    let mean = rows.iter().map(|r| r[2]).sum::<f64>() / rows.len() as f64;
    assert!((mean - s["request_latency_ns"]["mean"].as_f64().unwrap()).abs() < 1.0, "mean {mean}");
    let html = report(dir.path());
    check_png(&std::fs::read(dir.path().join("request_latency_cdf.png")).unwrap(), "request_latency_cdf.png");
    assert!(html.contains("Request latency CDF per class"), "the figure is on the page");
    std::fs::remove_file(dir.path().join("report.html")).unwrap();

    std::fs::write(dir.path().join("requests.csv"), "class,start_ns,end_ns,latency_ns\nstorage,0,10,10\nstorage,0,x,10\n")
        .unwrap();
    let err = report_err(dir.path());
    assert!(err.contains("requests.csv: line 3: column `end_ns`"), "{err}");
}
