//! The report pages as a browser shows them. A run report (from `scenarios/quickstart.toml`,
//! whose negotiation table has seven columns of long names, and `scenarios/incast.toml`, whose
//! flows all have one size) and a sweep report (from a store of real runs of
//! `scenarios/websearch_leafspine.toml`) are loaded in headless Chromium at a laptop's width and
//! at a narrow one. In each: nothing is wider than the window, every image decodes at its drawn
//! size, every plot's axes are titled (in the page, and as text in the image's margins), the
//! tables of figures are there, and a screenshot shows the figures and nothing right of the
//! page's column. Screenshots are kept in `target/tmp/report-screenshots/` for a person to look at.
//!
//! Needs Chromium (Debian: `apt-get install chromium`; `tools/test-all` installs it and refuses to
//! run without it). Where it is not installed, the tests say so and pass without checking.

use base64::Engine;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The widths every page is checked at: a laptop's window and a narrow one (a phone turned
/// sideways, a window beside an editor).
const WIDTHS: [u32; 2] = [1280, 700];
/// Tall enough that the screenshot shows the first figures below the tables.
const HEIGHT: u32 = 3000;
/// The colour of the first series in every figure (`PALETTE[0]`).
const BLUE: [u8; 3] = [31, 119, 180];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sluice(args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).current_dir(repo()).output().expect("sluice runs");
    assert!(out.status.success(), "sluice {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// The Chromium on PATH, or `None` after saying why the test checks nothing.
fn chromium(test: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"] {
        if let Some(found) = std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file()) {
            return Some(found);
        }
    }
    eprintln!(
        "{test}: skipped: no Chromium on PATH, so the report pages are not checked in a browser \
         (Debian: apt-get install chromium; tools/test-all installs it)"
    );
    None
}

/// Runs Chromium headless on `page` with `args`, killing it after a minute; returns its stdout.
fn browse(browser: &Path, page: &Path, width: u32, args: &[String]) -> String {
    let profile = tempfile::tempdir().unwrap();
    // Into a file, not a pipe: a page's DOM outgrows a pipe's buffer, and Chromium would wait on it.
    let stdout = profile.path().join("stdout");
    let mut child = Command::new(browser)
        .args(["--headless", "--disable-gpu", "--no-first-run", "--hide-scrollbars", "--force-device-scale-factor=1"])
        // Root (as on CI) cannot use Chromium's sandbox; the page is our own, from a local file.
        .arg("--no-sandbox")
        .arg("--disable-dev-shm-usage")
        // Lets the page finish loading and decoding its images before the DOM or screenshot is taken.
        .arg("--virtual-time-budget=10000")
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={width},{HEIGHT}"))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("chromium did not finish with {} within a minute", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "chromium failed on {}", page.display());
    String::from_utf8_lossy(&std::fs::read(&stdout).unwrap()).into_owned()
}

/// What the page measures of itself once loaded, stored on `<html data-probe>` for --dump-dom.
const PROBE: &str = r#"<script>
window.addEventListener('load', () => {
  const root = document.documentElement;
  const box = e => e.getBoundingClientRect();
  const r = {
    scrollWidth: root.scrollWidth,
    clientWidth: root.clientWidth,
    bodyRight: box(document.body).right - parseFloat(getComputedStyle(document.body).paddingRight),
    images: [...document.images].map(i => ({
      complete: i.complete, naturalWidth: i.naturalWidth, naturalHeight: i.naturalHeight,
      right: box(i).right, x: i.dataset.xAxis || '', y: i.dataset.yAxis || '', alt: i.alt })),
    tables: [...document.querySelectorAll('table')].map(t => ({
      right: box(t.parentElement).right,
      rows: [...t.rows].map(r => [...r.cells].map(c => c.textContent.trim())) })),
  };
  root.setAttribute('data-probe', JSON.stringify(r));
});
</script>"#;

/// Undoes the escaping of an attribute value in Chromium's serialized DOM.
fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The page's measurements of itself at `width`, taken in Chromium from a copy of the page with
/// [`PROBE`] added (beside it, so relative references resolve alike).
fn measure(browser: &Path, page: &Path, width: u32) -> Value {
    let html = std::fs::read_to_string(page).unwrap();
    let probed = page.with_file_name("probe.html");
    std::fs::write(&probed, html.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let dom = browse(browser, &probed, width, &["--dump-dom".into()]);
    std::fs::remove_file(&probed).unwrap();
    let start = dom.find("data-probe=\"").unwrap_or_else(|| panic!("the probe did not run on {}", page.display()));
    let rest = &dom[start + "data-probe=\"".len()..];
    serde_json::from_str(&unescape(&rest[..rest.find('"').unwrap()])).unwrap()
}

/// Decoded RGB pixels of a PNG with its width and height.
fn pixels(png: &[u8]) -> (Vec<u8>, u32, u32) {
    let mut reader = png::Decoder::new(png).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    let rgb = match info.color_type {
        png::ColorType::Rgb => buf,
        png::ColorType::Rgba => buf.chunks(4).flat_map(|p| [p[0], p[1], p[2]]).collect(),
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    (rgb, info.width, info.height)
}

/// Pixels darker than mid grey (text) in the rectangle `xs` × `ys`.
fn ink(rgb: &[u8], width: u32, xs: std::ops::Range<u32>, ys: std::ops::Range<u32>) -> usize {
    ys.flat_map(|y| xs.clone().map(move |x| ((y * width + x) * 3) as usize))
        .filter(|&i| (rgb[i] as u32 + rgb[i + 1] as u32 + rgb[i + 2] as u32) < 300)
        .count()
}

/// Every `data:image/png;base64,` image of the page, decoded, in page order.
fn embedded_pngs(html: &str) -> Vec<Vec<u8>> {
    html.split("src=\"data:image/png;base64,")
        .skip(1)
        .map(|rest| base64::engine::general_purpose::STANDARD.decode(&rest[..rest.find('"').unwrap()]).unwrap())
        .collect()
}

/// The checks every report page passes at every width; returns the measurements at the first.
fn check_page(browser: &Path, page: &Path, name: &str) -> Value {
    let html = std::fs::read_to_string(page).unwrap();
    let pngs = embedded_pngs(&html);
    assert!(!pngs.is_empty(), "{name}: no figure");
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let mut first = None;
    for width in WIDTHS {
        let m = measure(browser, page, width);
        let what = format!("{name} at {width} px");
        // Nothing is wider than the window: the page never scrolls sideways, and each table's
        // box (which scrolls itself when the table is wider) ends inside the window.
        let (scroll, client) = (m["scrollWidth"].as_f64().unwrap(), m["clientWidth"].as_f64().unwrap());
        assert!(client > 0.0 && scroll <= client, "{what}: the page is {scroll} px wide in a {client} px window");
        let tables = m["tables"].as_array().unwrap();
        assert!(!tables.is_empty(), "{what}: no table of figures");
        for t in tables {
            assert!(
                t["right"].as_f64().unwrap() <= client,
                "{what}: a table reaches past the window: {:?}",
                t["rows"][0]
            );
        }
        // Every image loaded at the size it was drawn, shown within the window, and says what its
        // axes are.
        let images = m["images"].as_array().unwrap();
        assert_eq!(images.len(), pngs.len(), "{what}: images on the page");
        for (img, png) in images.iter().zip(&pngs) {
            let (_, w, h) = pixels(png);
            assert_eq!(img["complete"], true, "{what}: {} did not load", img["alt"]);
            assert_eq!(
                (img["naturalWidth"].as_u64(), img["naturalHeight"].as_u64()),
                (Some(w.into()), Some(h.into())),
                "{what}: {}",
                img["alt"]
            );
            assert!(img["right"].as_f64().unwrap() <= client, "{what}: {} reaches past the window", img["alt"]);
        }
        // The screenshot: the figures are on screen, and right of the page's column is blank.
        let shot = shots.join(format!("{name}-{width}.png"));
        browse(browser, page, width, &[format!("--screenshot={}", shot.display())]);
        let (rgb, w, h) = pixels(&std::fs::read(&shot).unwrap());
        assert_eq!((w, h), (width, HEIGHT), "{what}: screenshot size");
        let blue = rgb.chunks(3).filter(|p| p.iter().zip(BLUE).all(|(a, b)| a.abs_diff(b) <= 8)).count();
        assert!(blue > 500, "{what}: only {blue} pixels of the figures' blue on screen ({})", shot.display());
        let column = m["bodyRight"].as_f64().unwrap().ceil() as u32 + 1;
        assert!(column < width, "{what}: the page's column ends at {column}");
        assert_eq!(
            ink(&rgb, w, column..w, 0..h),
            0,
            "{what}: something is drawn right of the column ({})",
            shot.display()
        );
        first.get_or_insert(m);
    }
    let m = first.unwrap();
    // Every plot's axes are titled: the page names them, and the image has text where the titles
    // are drawn, in the left margin of each panel (the y title; tick labels stand further right)
    // and along the bottom of the image (the x title, below the tick labels).
    for (img, png) in m["images"].as_array().unwrap().iter().zip(&pngs) {
        let (x, y) = (img["x"].as_str().unwrap(), img["y"].as_str().unwrap());
        let panels: Vec<(&str, &str)> = x.split(" | ").zip(y.split(" | ")).collect();
        assert!(
            panels.iter().all(|(x, y)| !x.trim().is_empty() && !y.trim().is_empty()),
            "{name}: {} has untitled axes",
            img["alt"]
        );
        let (rgb, w, h) = pixels(png);
        let band = h / panels.len() as u32;
        for p in 0..panels.len() as u32 {
            let y_title = ink(&rgb, w, 0..32, p * band..(p + 1) * band);
            let x_title = ink(&rgb, w, 0..w, (p + 1) * band - 34..(p + 1) * band - 6);
            assert!(
                y_title > 40 && x_title > 40,
                "{name}: {} panel {p}: no drawn axis titles ({y_title}, {x_title} dark pixels)",
                img["alt"]
            );
        }
    }
    m
}

#[test]
fn run_reports_fit_the_window_with_titled_axes_in_chromium() {
    let Some(browser) = chromium("run_reports_fit_the_window_with_titled_axes_in_chromium") else { return };
    for scenario in ["quickstart", "incast"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().to_str().unwrap();
        sluice(&["run", &format!("scenarios/{scenario}.toml"), "--out", out, "--quiet"]);
        sluice(&["report", out]);
        let m = check_page(&browser, &dir.path().join("report.html"), &format!("run-{scenario}"));
        let tables = m["tables"].as_array().unwrap();
        let row = |first: &str| {
            tables
                .iter()
                .flat_map(|t| t["rows"].as_array().unwrap())
                .find(|r| r[0].as_str().unwrap().starts_with(first))
                .cloned()
        };
        // The summary says what its times are.
        let sim = row("simulated time").unwrap_or_else(|| panic!("{scenario}: no simulated time row"));
        assert!(sim[0].as_str().unwrap().contains("sim_time_ns"), "{sim}");
        // Each figure is titled for what it shows: slowdown against size, with its units.
        let images = m["images"].as_array().unwrap();
        let slowdown = images.iter().find(|i| i["alt"].as_str().unwrap().starts_with("Slowdown vs flow size")).unwrap();
        assert_eq!(
            (slowdown["x"].as_str().unwrap(), slowdown["y"].as_str().unwrap()),
            ("flow size (bytes, log scale)", "slowdown (FCT / ideal FCT)")
        );
        if scenario == "quickstart" {
            // The negotiation table, whose eight columns are wider than the narrow window, stays
            // inside it (checked at each width above) and is on the page.
            let negotiation = row("negotiation").expect("negotiation row");
            assert_eq!(negotiation.as_array().unwrap().len(), 9, "{negotiation}");
            let queues = images.iter().find(|i| i["alt"].as_str().unwrap().starts_with("Queue depth")).unwrap();
            assert!(
                queues["y"].as_str().unwrap().starts_with("queue depth (")
                    && queues["x"].as_str().unwrap().starts_with("time ("),
                "{queues}"
            );
        }
    }
}

/// The figures of one cell and seed: (fct_ns.p99 in ms, slowdown.p99, drops).
type Figures = [f64; 3];

/// Student's t for a 95% interval of the mean of three values (two degrees of freedom).
const T95_3: f64 = 4.302_652_729_749_464;

/// Writes a sweep store as `sluice.sweep` leaves it (sweep.json, aggregated.csv) from real runs:
/// the scenario under each cell's overrides and seeds 1–3, with the mean and Student-t 95%
/// interval of each metric. Returns each cell's means.
fn store(
    dir: &Path,
    grid: &[(&str, Vec<Value>)],
    set: &[(&str, &str)],
    runs: &mut BTreeMap<String, Figures>,
) -> Vec<Figures> {
    const METRICS: [&str; 3] = ["fct_ns.p99:ms", "slowdown.p99", "drops"];
    let seeds = [1u64, 2, 3];
    let mut cells: Vec<Vec<(&str, String)>> = vec![vec![]];
    for (key, values) in grid {
        let text = |v: &Value| v.as_str().map_or(v.to_string(), String::from);
        cells = cells
            .iter()
            .flat_map(|c| values.iter().map(move |v| [c.clone(), vec![(*key, text(v))]].concat()))
            .collect();
    }
    let mut csv = grid.iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>().join(",");
    for m in METRICS {
        csv += &format!(",{m}:n,{m}:mean,{m}:ci_lo,{m}:ci_hi");
    }
    csv.push('\n');
    let mut means = Vec::new();
    for cell in &cells {
        let overrides: Vec<String> =
            set.iter().map(|(k, v)| format!("{k}={v}")).chain(cell.iter().map(|(k, v)| format!("{k}={v}"))).collect();
        let per_seed: Vec<Figures> = seeds
            .iter()
            .map(|seed| {
                let key = format!("{overrides:?} {seed}");
                *runs.entry(key).or_insert_with(|| {
                    let out = tempfile::tempdir().unwrap();
                    let mut args = vec![
                        "run",
                        "scenarios/websearch_leafspine.toml",
                        "--quiet",
                        "--out",
                        out.path().to_str().unwrap(),
                    ];
                    let seed = seed.to_string();
                    args.extend(["--seed", &seed]);
                    for o in &overrides {
                        args.extend(["--set", o]);
                    }
                    sluice(&args);
                    let s: Value =
                        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap())
                            .unwrap();
                    [
                        s["fct_ns"]["p99"].as_f64().unwrap() / 1e6,
                        s["slowdown"]["p99"].as_f64().unwrap(),
                        s["drops"].as_f64().unwrap(),
                    ]
                })
            })
            .collect();
        csv += &cell.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>().join(",");
        let mut cell_means = [0.0; 3];
        for m in 0..METRICS.len() {
            let xs: Vec<f64> = per_seed.iter().map(|f| f[m]).collect();
            let mean = xs.iter().sum::<f64>() / 3.0;
            let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
            let half = T95_3 * sd / 3f64.sqrt();
            csv += &format!(",3,{mean},{},{}", mean - half, mean + half);
            cell_means[m] = mean;
        }
        csv.push('\n');
        means.push(cell_means);
    }
    std::fs::write(dir.join("aggregated.csv"), csv).unwrap();
    let spec = json!({
        "scenario": "scenarios/websearch_leafspine.toml",
        "grid": grid.iter().map(|(k, v)| (k.to_string(), Value::from(v.clone()))).collect::<serde_json::Map<_, _>>(),
        "seeds": seeds, "metrics": METRICS, "set": set.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
    });
    std::fs::write(dir.join("sweep.json"), serde_json::to_string_pretty(&spec).unwrap()).unwrap();
    means
}

#[test]
fn sweep_reports_show_a_table_and_titled_plots_in_chromium() {
    let Some(browser) = chromium("sweep_reports_show_a_table_and_titled_plots_in_chromium") else { return };
    let short = [("workloads.0.duration", "1ms")];
    let mut runs = BTreeMap::new();
    // Algorithms are categories (bars); ECN thresholds are sizes, numbers (points on a line).
    let by_cc = tempfile::tempdir().unwrap();
    let cc_grid = [
        ("classes.default.cc", vec![json!("cubic"), json!("dctcp")]),
        ("switch.ecn.k", vec![json!("20KB"), json!("100KB")]),
    ];
    let cc_means = store(by_cc.path(), &cc_grid, &short, &mut runs);
    let by_k = tempfile::tempdir().unwrap();
    let k_grid = [("switch.ecn.k", vec![json!("20KB"), json!("60KB"), json!("100KB")])];
    store(by_k.path(), &k_grid, &[short[0], ("classes.default.cc", "dctcp")], &mut runs);

    for (dir, name, x_key, cells) in
        [(&by_cc, "sweep-cc", "classes.default.cc", 4), (&by_k, "sweep-k", "switch.ecn.k", 3)]
    {
        sluice(&["report", dir.path().to_str().unwrap()]);
        // One figure per metric, named after it.
        for file in ["fct_ns.p99_ms.png", "slowdown.p99.png", "drops.png"] {
            assert!(dir.path().join(file).is_file(), "{name}: {file} not written");
        }
        assert!(!dir.path().join("sweep_1.png").exists());
        let m = check_page(&browser, &dir.path().join("report.html"), name);
        let images = m["images"].as_array().unwrap();
        let titles: Vec<(&str, &str)> =
            images.iter().map(|i| (i["x"].as_str().unwrap(), i["y"].as_str().unwrap())).collect();
        assert_eq!(
            titles,
            [(x_key, "fct_ns.p99 (ms)"), (x_key, "slowdown.p99 (FCT / ideal FCT)"), (x_key, "drops")],
            "{name}"
        );
        // The table of values: two heading rows, then one row per cell.
        let rows = m["tables"][0]["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 2 + cells, "{name}: {rows:?}");
        assert_eq!(rows[1].as_array().unwrap()[..3], [json!("mean"), json!("95% CI"), json!("n")], "{name}");
        let keys: Vec<&str> =
            if name == "sweep-cc" { vec!["classes.default.cc", "switch.ecn.k"] } else { vec!["switch.ecn.k"] };
        let headings: Vec<&str> =
            keys.into_iter().chain(["fct_ns.p99 (ms)", "slowdown.p99 (FCT / ideal FCT)", "drops"]).collect();
        assert_eq!(rows[0], json!(headings), "{name}");
        if name == "sweep-cc" {
            // Each cell's mean in its row, to 4 significant digits, and the seeds it is over.
            assert_eq!((rows[2][0].as_str(), rows[2][1].as_str()), (Some("cubic"), Some("20KB")));
            for (row, means) in rows[2..].iter().zip(&cc_means) {
                let shown: f64 = row[2].as_str().unwrap().parse().unwrap();
                assert!(
                    (shown - means[0]).abs() <= means[0] * 5e-4,
                    "{row}: fct p99 mean {} shown as {shown}",
                    means[0]
                );
                assert_eq!(row[4], "3", "{row}: n");
            }
        }
    }
    // Categories are bars: the first series fills a good share of its figure; numbers are a line
    // with markers, a small share.
    let blue_share = |png: &[u8]| {
        let (rgb, w, h) = pixels(png);
        rgb.chunks(3).filter(|p| *p == BLUE).count() as f64 / (w * h) as f64
    };
    let bars = blue_share(&std::fs::read(by_cc.path().join("fct_ns.p99_ms.png")).unwrap());
    let line = blue_share(&std::fs::read(by_k.path().join("fct_ns.p99_ms.png")).unwrap());
    assert!(bars > 0.03 && line < 0.01 && line > 0.0005, "bars {bars}, line {line}");
}
