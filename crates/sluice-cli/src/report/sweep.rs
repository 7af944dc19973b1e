//! `sluice report STORE` on a sweep store (`sluice sweep --seeds`, `sluice.sweep`): a table of
//! every cell's figures and one figure per metric, the mean over seeds against the first grid
//! key's values with its 95% confidence interval, one series per combination of the other keys.
//! Numeric grid values are positions on an axis and their points are joined; other values
//! (algorithm names, sizes with units) are categories, drawn as grouped bars.

use super::html::{esc, heading, img, sig4, STYLE, TABLE_CLOSE, TABLE_OPEN};
use super::plots::{
    byte_unit, encode_png, register_font, tick, time_unit, titled, whisker, Axes, TickAxis, FONT_NAME, PALETTE,
};
use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What `sweep.json` says about the sweep.
#[derive(serde::Deserialize)]
struct SweepSpec {
    scenario: String,
    grid: serde_json::Map<String, serde_json::Value>,
    seeds: Vec<u64>,
    metrics: Vec<String>,
}

/// One metric's figures in one cell: the mean over seeds, its 95% confidence interval and how
/// many seeds gave a value.
#[derive(Clone, Copy, Default)]
struct Figures {
    mean: Option<f64>,
    lo: Option<f64>,
    hi: Option<f64>,
    n: Option<f64>,
}

/// One cell of aggregated.csv: its grid values and each metric's figures.
struct Cell {
    keys: Vec<String>,
    figures: Vec<Figures>,
}

/// Whether `dir` is a sweep store rather than a run directory.
pub fn is_store(dir: &Path) -> bool {
    dir.join("sweep.json").is_file()
}

fn number(record: &csv::StringRecord, i: usize, file: &Path, line: usize) -> Result<Option<f64>> {
    let s = record.get(i).unwrap_or("").trim();
    if s.is_empty() || s == "<NA>" {
        return Ok(None);
    }
    s.parse()
        .map(Some)
        .map_err(|_| anyhow!("{}:{line}: column {}: expected a number or nothing, got `{s}`", file.display(), i + 1))
}

fn read(dir: &Path) -> Result<(SweepSpec, Vec<Cell>)> {
    let spec_path = dir.join("sweep.json");
    let text = std::fs::read_to_string(&spec_path).with_context(|| format!("cannot read {}", spec_path.display()))?;
    let spec: SweepSpec = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: expected the sweep description sluice writes (scenario, grid, seeds, metrics)",
            spec_path.display()
        )
    })?;
    if spec.grid.is_empty() || spec.metrics.is_empty() {
        bail!("{}: expected at least one grid key and one metric", spec_path.display());
    }
    let path = dir.join("aggregated.csv");
    let mut r = csv::Reader::from_path(&path)
        .with_context(|| format!("cannot read {} (the sweep has not finished)", path.display()))?;
    let headers = r.headers().with_context(|| format!("{}: no header line", path.display()))?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name);
    let need = |name: &str| col(name).ok_or_else(|| anyhow!("{}: no column `{name}`", path.display()));
    // A key whose values carried units is typed in its own column and written as given in
    // `<key>:text`, which labels read better ("20KB", not 20000).
    let key_cols = spec.grid.keys().map(|k| need(&format!("{k}:text")).or_else(|_| need(k))).collect::<Result<Vec<_>>>()?;
    let metric_cols = spec
        .metrics
        .iter()
        .map(|m| {
            Ok((
                need(&format!("{m}:mean"))?,
                need(&format!("{m}:ci_lo"))?,
                need(&format!("{m}:ci_hi"))?,
                col(&format!("{m}:n")),
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut cells = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let line = i + 2;
        let rec = rec.with_context(|| format!("{}:{line}", path.display()))?;
        let keys = key_cols.iter().map(|&c| rec.get(c).unwrap_or("").to_string()).collect();
        let figures = metric_cols
            .iter()
            .map(|&(m, lo, hi, n)| {
                Ok(Figures {
                    mean: number(&rec, m, &path, line)?,
                    lo: number(&rec, lo, &path, line)?,
                    hi: number(&rec, hi, &path, line)?,
                    n: n.map(|n| number(&rec, n, &path, line)).transpose()?.flatten(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        cells.push(Cell { keys, figures });
    }
    if cells.is_empty() {
        bail!("{}: no cells", path.display());
    }
    Ok((spec, cells))
}

/// How a metric is shown: its summary.json path, the unit its values are divided into and that
/// unit's name ("" for a plain number).
struct Shown {
    path: String,
    div: f64,
    unit: String,
}

impl Shown {
    /// The unit a metric spec names after its colon (its values are already in it), or else the
    /// one its key path implies (`fct_ns.p99` a time, scaled to the largest value `max`).
    fn new(spec: &str, max: f64) -> Shown {
        let (path, unit) = spec.split_once(':').unwrap_or((spec, ""));
        let shown = |div: f64, unit: &str| Shown { path: path.to_string(), div, unit: unit.to_string() };
        if !unit.is_empty() {
            return shown(1.0, unit);
        }
        let has = |suffix: &str| path.split('.').any(|k| k.ends_with(suffix));
        let first = |k: &str| path.split('.').next() == Some(k);
        if has("_ns") {
            let u = time_unit(max);
            shown(u.div, u.name)
        } else if has("_bps") {
            let (div, name) = [(1e12, "Tb/s"), (1e9, "Gb/s"), (1e6, "Mb/s"), (1e3, "kb/s")]
                .into_iter()
                .find(|(d, _)| max.abs() >= *d)
                .unwrap_or((1.0, "b/s"));
            shown(div, name)
        } else if has("_bytes") {
            let u = byte_unit(max);
            shown(u.div, u.name)
        } else if has("per_s") {
            shown(1.0, "/s")
        } else if has("_s") {
            shown(1.0, "s")
        } else if first("slowdown") {
            shown(1.0, "FCT / ideal FCT")
        } else if first("utilization") {
            shown(0.01, "% of line rate")
        } else {
            shown(1.0, "")
        }
    }

    /// The metric with its unit, as axis titles and table headings name it.
    fn label(&self) -> String {
        if self.unit.is_empty() {
            self.path.clone()
        } else {
            format!("{} ({})", self.path, self.unit)
        }
    }
}

/// The largest magnitude among a metric's figures, which picks its display unit.
fn largest(cells: &[Cell], metric: usize) -> f64 {
    let f = cells.iter().map(|c| c.figures[metric]);
    f.flat_map(|f| [f.mean, f.lo, f.hi]).flatten().map(f64::abs).fold(0.0, f64::max)
}

/// A file name for a metric's figure: its spec with anything but letters, digits, `.`, `_` and
/// `-` made `_` (`fct_ns.p99:ms` → `fct_ns.p99_ms.png`), made unique among `taken`.
fn file_name(spec: &str, taken: &[String]) -> String {
    let stem: String =
        spec.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    let mut name = format!("{stem}.png");
    let mut i = 2;
    while taken.contains(&name) {
        name = format!("{stem}_{i}.png");
        i += 1;
    }
    name
}

/// A grid value as a number: itself, or a size, rate or duration with its unit ("20KB" is
/// 20,000 bytes, "10Gbps" 10^10 bit/s, "5us" 5,000,000 ps).
fn grid_number(v: &str) -> Option<f64> {
    let v = v.trim();
    let x = v.parse::<f64>().ok().or_else(|| {
        sluice_sim::time::Bytes::parse(v)
            .map(|b| b.0 as f64)
            .or_else(|_| sluice_sim::time::Rate::parse(v).map(|r| r.0 as f64))
            .or_else(|_| sluice_sim::time::Time::parse(v).map(|t| t.0 as f64))
            .ok()
    })?;
    x.is_finite().then_some(x)
}

/// The x axis for the first grid key's values, in the grid's order: numbers (sizes, rates and
/// durations too) at themselves (on a log scale when they span two decades), anything else a
/// category at 0, 1, …, each tick labelled with the value as the grid gives it.
fn grid_axis(values: &[String]) -> TickAxis {
    let numbers: Option<Vec<f64>> = values.iter().map(|v| grid_number(v)).collect();
    let labels = values.to_vec();
    let Some(xs) = numbers else {
        return TickAxis {
            ticks: (0..values.len()).map(|i| i as f64).collect(),
            range: -0.5..values.len() as f64 - 0.5,
            labels,
            log: false,
            categorical: true,
        };
    };
    let (lo, hi) = xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    let log = lo > 0.0 && hi / lo >= 100.0;
    let range = if log {
        let pad = (hi / lo).powf(0.05);
        lo / pad..hi * pad
    } else if hi > lo {
        let pad = (hi - lo) * 0.05;
        lo - pad..hi + pad
    } else {
        lo - 1.0..hi + 1.0
    };
    TickAxis { labels, ticks: xs, range, log, categorical: false }
}

/// One series of a figure: its label (the other grid keys' values) and, per x position,
/// (x index, mean, lo, hi) in display units.
type Series = (String, Vec<(usize, f64, f64, f64)>);

fn series(keys: &[&String], cells: &[Cell], xs: &[String], metric: usize, div: f64) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for c in cells {
        let label = keys[1..].iter().zip(&c.keys[1..]).map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ");
        let Some(x) = xs.iter().position(|v| *v == c.keys[0]) else { continue };
        let f = c.figures[metric];
        let Some(mean) = f.mean else { continue };
        let point = (x, mean / div, f.lo.unwrap_or(mean) / div, f.hi.unwrap_or(mean) / div);
        match out.iter_mut().find(|l| l.0 == label) {
            Some(l) => l.1.push(point),
            None => out.push((label, vec![point])),
        }
    }
    for (_, pts) in &mut out {
        pts.sort_by_key(|p| p.0);
    }
    out
}

/// The first grid key's values in the grid's order (as aggregated.csv writes them), then any
/// others aggregated.csv holds.
fn x_values(spec: &SweepSpec, cells: &[Cell]) -> Vec<String> {
    let mut xs: Vec<String> = Vec::new();
    let first = spec.grid.values().next().and_then(|v| v.as_array()).cloned().unwrap_or_default();
    let from_grid = first.iter().map(|v| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    for x in from_grid.chain(cells.iter().map(|c| c.keys[0].clone())) {
        if cells.iter().any(|c| c.keys[0] == x) && !xs.contains(&x) {
            xs.push(x);
        }
    }
    xs
}

/// The y axis's range for `lines`: from zero (or to it, for negative figures), so that heights
/// compare, to above every interval, with room at the top for a legend of `legend` lines.
fn y_range(lines: &[Series], legend: usize) -> (f64, f64) {
    let (mut lo, mut hi) = (0.0f64, 0.0f64);
    for (_, pts) in lines {
        for &(_, m, l, u) in pts {
            lo = lo.min(m.min(l));
            hi = hi.max(m.max(u));
        }
    }
    if hi - lo <= 0.0 {
        hi = 1.0;
    }
    // The share of the plot's height the legend takes, at about 22 pixels a line of 400.
    let share = if legend == 0 { 0.08 } else { ((22 * legend + 24) as f64 / 400.0).min(0.6) };
    (lo, hi + (hi - lo) * share / (1.0 - share))
}

const WIDTH: u32 = 960;
const HEIGHT: u32 = 540;

/// Draws one metric against the first grid key; returns the PNG and the axis titles drawn.
fn draw(spec: &SweepSpec, cells: &[Cell], metric: usize) -> Result<(Vec<u8>, Axes)> {
    let shown = Shown::new(&spec.metrics[metric], largest(cells, metric));
    let xs = x_values(spec, cells);
    let keys: Vec<&String> = spec.grid.keys().collect();
    let lines = series(&keys, cells, &xs, metric, shown.div);
    let axis = grid_axis(&xs);
    let bars = axis.categorical;
    let legend = lines.iter().filter(|l| !l.0.is_empty()).count();
    let (lo, top) = y_range(&lines, legend);
    let x_key = keys[0].as_str();
    let axes = Axes::new(if axis.log { format!("{x_key} (log scale)") } else { x_key.to_string() }, shown.label());
    let longest = xs.iter().map(|x| x.chars().count()).max().unwrap_or(1);
    let fit = (780 / (8 * longest + 16)).max(2);
    let mut rgb = vec![255u8; WIDTH as usize * HEIGHT as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT)).into_drawing_area();
        let result: Result<(), Box<dyn std::error::Error>> = (|| {
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(format!("{} by {x_key}", shown.label()), (FONT_NAME, 20))
                .margin(16)
                .x_label_area_size(50)
                .y_label_area_size(80)
                .build_cartesian_2d(axis, lo..top)?;
            titled(&mut chart.configure_mesh(), &axes)
                .x_labels(fit)
                .y_label_formatter(&tick)
                .disable_x_mesh()
                .draw()?;
            let n = lines.len().max(1) as f64;
            // Bars of one category share 80% of its width.
            let width = 0.8 / n;
            for (i, (label, pts)) in lines.iter().enumerate() {
                let color = PALETTE[i % PALETTE.len()];
                let at = |p: &(usize, f64, f64, f64)| {
                    if bars {
                        p.0 as f64 - 0.4 + width * (i as f64 + 0.5)
                    } else {
                        grid_number(&xs[p.0]).unwrap_or(p.0 as f64)
                    }
                };
                let drawn = if bars {
                    chart.draw_series(pts.iter().map(|p| {
                        let x = at(p);
                        Rectangle::new([(x - width * 0.45, 0.0), (x + width * 0.45, p.1)], color.filled())
                    }))?
                } else {
                    // Joined in order of value, whatever order the grid lists them in.
                    let mut line: Vec<(f64, f64)> = pts.iter().map(|p| (at(p), p.1)).collect();
                    line.sort_by(|a, b| a.0.total_cmp(&b.0));
                    chart.draw_series(LineSeries::new(line, color.stroke_width(2)))?;
                    chart.draw_series(pts.iter().map(|p| Circle::new((at(p), p.1), 5, color.filled())))?
                };
                if !label.is_empty() {
                    drawn
                        .label(label.clone())
                        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], color.filled()));
                }
                // The 95% confidence interval as a capped whisker; a cell without one has none.
                let style = if bars { BLACK } else { color }.stroke_width(2);
                for p in pts.iter().filter(|p| p.3 > p.2) {
                    whisker(&mut chart, at(p), (p.2, p.3), style)?;
                }
            }
            if legend > 0 {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperRight)
                    .label_font((FONT_NAME, 14))
                    .background_style(WHITE.mix(0.85))
                    .border_style(RGBColor(200, 200, 200))
                    .draw()?;
            }
            root.present()?;
            Ok(())
        })();
        result.map_err(|e| anyhow!("drawing {}: {e}", spec.metrics[metric]))?;
    }
    Ok((encode_png(&rgb, WIDTH, HEIGHT)?, axes))
}

/// The table of every cell: its grid values, then per metric the mean, the 95% confidence
/// interval and how many seeds gave a value, in the unit of the metric's figure.
fn table(spec: &SweepSpec, cells: &[Cell]) -> String {
    let shown: Vec<Shown> = (0..spec.metrics.len()).map(|m| Shown::new(&spec.metrics[m], largest(cells, m))).collect();
    let mut out = String::from(TABLE_OPEN);
    out.push_str("<thead><tr>");
    for k in spec.grid.keys() {
        let _ = write!(out, "<th rowspan=\"2\">{}</th>", heading(k));
    }
    for s in &shown {
        let _ = write!(out, "<th colspan=\"3\">{}</th>", heading(&s.label()));
    }
    out.push_str("</tr>\n<tr>");
    for _ in &shown {
        out.push_str("<th>mean</th><th>95% CI</th><th>n</th>");
    }
    out.push_str("</tr></thead><tbody>\n");
    for c in cells {
        out.push_str("<tr>");
        for k in &c.keys {
            let _ = write!(out, "<td class=\"text\">{}</td>", esc(k));
        }
        for (f, s) in c.figures.iter().zip(&shown) {
            let v = |x: Option<f64>| x.map_or("—".to_string(), |x| sig4(x / s.div));
            let ci = match (f.lo, f.hi) {
                (Some(lo), Some(hi)) => format!("{} – {}", v(Some(lo)), v(Some(hi))),
                _ => "—".into(),
            };
            let n = f.n.map_or("—".to_string(), |n| format!("{n}"));
            let _ = write!(out, "<td>{}</td><td>{ci}</td><td>{n}</td>", v(f.mean));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>");
    out.push_str(TABLE_CLOSE);
    out
}

/// Writes one PNG per metric, named after it, and report.html into the store; returns the
/// page's path and the number of figures.
pub fn run(dir: &Path) -> Result<(PathBuf, usize)> {
    register_font()?;
    let (spec, cells) = read(dir)?;
    let scenario = esc(&spec.scenario);
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>sluice sweep of {scenario}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<h1>Sweep of <code>{scenario}</code></h1>\n<p class=\"meta\">Store \
         <code>{}</code> · sluice {}</p>\n<p>{} cells × {} seeds ({}). Each figure is the mean over the seeds with its 95% \
         confidence interval (Student t); a cell with one value, or whose seeds all gave the same run, has none.</p>\n\
         <h2>Figures per cell</h2>\n{}<h2>Plots</h2>\n",
        esc(&dir.display().to_string()),
        env!("CARGO_PKG_VERSION"),
        cells.len(),
        spec.seeds.len(),
        esc(&spec.seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
        table(&spec, &cells),
    );
    let mut files: Vec<String> = Vec::new();
    for m in 0..spec.metrics.len() {
        let (png, axes) = draw(&spec, &cells, m)?;
        let file = file_name(&spec.metrics[m], &files);
        let path = dir.join(&file);
        std::fs::write(&path, &png).with_context(|| format!("{}: cannot write", path.display()))?;
        let title = format!("{} by {}", axes.y, axes.x);
        let _ = write!(
            page,
            "<figure id=\"{}\">\n{}\n<figcaption><b>{}.</b> The mean over the seeds for each value of <code>{}</code>{}; \
             whiskers show the 95% confidence interval. (<code>{}</code>)</figcaption>\n</figure>\n",
            esc(file.trim_end_matches(".png")),
            img("", std::slice::from_ref(&axes), &png),
            esc(&title),
            esc(&axes.x),
            if spec.grid.len() > 1 { ", one series per combination of the other keys" } else { "" },
            esc(&file),
        );
        files.push(file);
    }
    page.push_str("</body>\n</html>\n");
    let path = dir.join("report.html");
    std::fs::write(&path, page).with_context(|| format!("{}: cannot write", path.display()))?;
    Ok((path, spec.metrics.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_take_the_unit_they_name_or_their_key_implies() {
        assert_eq!(Shown::new("fct_ns.p99:ms", 5.0).label(), "fct_ns.p99 (ms)");
        let t = Shown::new("classes.q.fct_ns.p99", 1_500_000.0);
        assert_eq!((t.label().as_str(), t.div), ("classes.q.fct_ns.p99 (ms)", 1e6));
        assert_eq!(Shown::new("classes.b.goodput_bps", 2.5e9).label(), "classes.b.goodput_bps (Gb/s)");
        assert_eq!(Shown::new("slowdown.p99", 3.0).label(), "slowdown.p99 (FCT / ideal FCT)");
        assert_eq!(Shown::new("drops", 40.0).label(), "drops");
    }

    #[test]
    fn y_axes_start_at_zero_and_hold_every_interval() {
        let line = |pts: &[(f64, f64, f64)]| {
            ("".to_string(), pts.iter().enumerate().map(|(i, p)| (i, p.0, p.1, p.2)).collect())
        };
        let (lo, hi) = y_range(&[line(&[(50.0, 45.0, 55.0), (60.0, 58.0, 62.0)])], 0);
        assert_eq!(lo, 0.0);
        assert!(hi > 62.0 && hi < 62.0 * 1.1, "{hi}");
        // A legend of three lines gets its room above the data.
        let (_, with_legend) = y_range(&[line(&[(50.0, 45.0, 55.0)])], 3);
        assert!(with_legend > 55.0 * 1.2, "{with_legend}");
        // Negative figures hang from zero.
        let (lo, hi) = y_range(&[line(&[(-4.0, -5.0, -3.0)])], 0);
        assert!(lo == -5.0 && hi >= 0.0, "{lo} {hi}");
    }

    #[test]
    fn figures_are_named_after_their_metric() {
        assert_eq!(file_name("fct_ns.p99:ms", &[]), "fct_ns.p99_ms.png");
        assert_eq!(file_name("classes.backup.goodput_bps:Mb/s", &[]), "classes.backup.goodput_bps_Mb_s.png");
        assert_eq!(file_name("a:b", &["a_b.png".into()]), "a_b_2.png");
    }

    #[test]
    fn numbers_are_positions_and_anything_else_a_category() {
        use plotters::coord::ranged1d::{Ranged, ValueFormatter};
        let a = grid_axis(&["cubic".into(), "dctcp".into()]);
        assert!(a.categorical && a.ticks == [0.0, 1.0]);
        assert_eq!(a.format_ext(&1.0), "dctcp");
        // Sizes, rates and durations are numbers in their base unit, labelled as given.
        let a = grid_axis(&["20KB".into(), "60KB".into()]);
        assert!(!a.categorical && a.ticks == [20_000.0, 60_000.0]);
        assert_eq!(a.format_ext(&60_000.0), "60KB");
        assert_eq!(grid_axis(&["10Gbps".into(), "5us".into()]).ticks, [1e10, 5e6]);
        let a = grid_axis(&["0.2".into(), "0.5".into(), "0.3".into()]);
        assert!(!a.categorical && !a.log && a.ticks == [0.2, 0.5, 0.3]);
        // Positions are proportional: 0.3 sits a third of the way from 0.2 to 0.5.
        let (x2, x3, x5) = (a.map(&0.2, (0, 900)), a.map(&0.3, (0, 900)), a.map(&0.5, (0, 900)));
        assert!(((x3 - x2) as f64 / (x5 - x2) as f64 - 1.0 / 3.0).abs() < 0.01);
        let a = grid_axis(&["4".into(), "64".into(), "2048".into()]);
        assert!(a.log);
        // On a log axis equal ratios are equal distances.
        let x = |v: f64| a.map(&v, (0, 1000)) as f64;
        assert!(((x(64.0) - x(4.0)) / (x(2048.0) - x(64.0)) - 4.0 / 5.0).abs() < 0.01);
        // A numbered category list of 0, 1, 2 is still numbers.
        assert!(!grid_axis(&["0".into(), "1".into(), "2".into()]).categorical);
    }
}
