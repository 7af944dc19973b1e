//! `sluice report STORE` on a sweep store (`sluice sweep --seeds`, `sluice.sweep`): one figure per
//! metric, the mean over seeds against the first grid key's values with its 95% confidence band,
//! one line per combination of the other keys.

use super::html::esc;
use super::plots::{encode_png, register_font, FONT_NAME, PALETTE};
use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;
use std::path::Path;

/// What `sweep.json` says about the sweep.
#[derive(serde::Deserialize)]
struct SweepSpec {
    scenario: String,
    grid: serde_json::Map<String, serde_json::Value>,
    seeds: Vec<u64>,
    metrics: Vec<String>,
}

/// One cell of aggregated.csv: its grid values and, per metric, (mean, ci_lo, ci_hi).
struct Cell {
    keys: Vec<String>,
    figures: Vec<(Option<f64>, Option<f64>, Option<f64>)>,
}

/// Whether `dir` is a sweep store rather than a run directory.
pub fn is_store(dir: &Path) -> bool {
    dir.join("sweep.json").is_file()
}

fn number(record: &csv::StringRecord, i: usize, file: &Path, line: usize) -> Result<Option<f64>> {
    let s = record.get(i).unwrap_or("").trim();
    if s.is_empty() {
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
    let path = dir.join("aggregated.csv");
    let mut r = csv::Reader::from_path(&path)
        .with_context(|| format!("cannot read {} (the sweep has not finished)", path.display()))?;
    let headers = r.headers().with_context(|| format!("{}: no header line", path.display()))?.clone();
    let col = |name: &str| {
        headers.iter().position(|h| h == name).ok_or_else(|| anyhow!("{}: no column `{name}`", path.display()))
    };
    // A key whose values carried units is typed in its own column and written as given in
    // `<key>:text`, which labels read better ("20KB", not 20000).
    let key_cols = spec.grid.keys().map(|k| col(&format!("{k}:text")).or_else(|_| col(k))).collect::<Result<Vec<_>>>()?;
    let metric_cols = spec
        .metrics
        .iter()
        .map(|m| Ok((col(&format!("{m}:mean"))?, col(&format!("{m}:ci_lo"))?, col(&format!("{m}:ci_hi"))?)))
        .collect::<Result<Vec<_>>>()?;
    let mut cells = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let line = i + 2;
        let rec = rec.with_context(|| format!("{}:{line}", path.display()))?;
        let keys = key_cols.iter().map(|&c| rec.get(c).unwrap_or("").to_string()).collect();
        let figures = metric_cols
            .iter()
            .map(|&(m, lo, hi)| {
                Ok((number(&rec, m, &path, line)?, number(&rec, lo, &path, line)?, number(&rec, hi, &path, line)?))
            })
            .collect::<Result<Vec<_>>>()?;
        cells.push(Cell { keys, figures });
    }
    if cells.is_empty() {
        bail!("{}: no cells", path.display());
    }
    Ok((spec, cells))
}

/// One line of a figure: its label and, per x position, (mean, lo, hi).
type Line = (String, Vec<(usize, f64, f64, f64)>);

fn lines(keys: &[&String], cells: &[Cell], xs: &[String], metric: usize) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    for c in cells {
        let label = keys[1..].iter().zip(&c.keys[1..]).map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ");
        let Some(x) = xs.iter().position(|v| *v == c.keys[0]) else { continue };
        let (Some(mean), lo, hi) = c.figures[metric] else { continue };
        let point = (x, mean, lo.unwrap_or(mean), hi.unwrap_or(mean));
        match out.iter_mut().find(|l| l.0 == label) {
            Some(l) => l.1.push(point),
            None => out.push((label, vec![point])),
        }
    }
    out
}

fn draw(spec: &SweepSpec, cells: &[Cell], metric: usize) -> Result<Vec<u8>> {
    let (w, h) = (960u32, 540u32);
    let mut xs: Vec<String> = Vec::new();
    for c in cells {
        if !xs.contains(&c.keys[0]) {
            xs.push(c.keys[0].clone());
        }
    }
    let keys: Vec<&String> = spec.grid.keys().collect();
    let lines = lines(&keys, cells, &xs, metric);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (_, pts) in &lines {
        for &(_, _, l, u) in pts {
            lo = lo.min(l);
            hi = hi.max(u);
        }
    }
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-9);
    let x_key = spec.grid.keys().next().cloned().unwrap_or_default();
    let mut rgb = vec![255u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        let result: Result<(), Box<dyn std::error::Error>> = (|| {
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(&spec.metrics[metric], (FONT_NAME, 20))
                .margin(16)
                .x_label_area_size(44)
                .y_label_area_size(80)
                .build_cartesian_2d(-0.5f64..(xs.len() as f64 - 0.5), (lo - pad)..(hi + pad))?;
            chart
                .configure_mesh()
                .x_labels(xs.len())
                .x_label_formatter(&|x| {
                    let i = x.round();
                    if (x - i).abs() < 1e-6 && i >= 0.0 {
                        xs.get(i as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .x_desc(x_key.as_str())
                .label_style((FONT_NAME, 14))
                .draw()?;
            for (i, (label, pts)) in lines.iter().enumerate() {
                let color = PALETTE[i % PALETTE.len()];
                let band: Vec<(f64, f64)> =
                    pts.iter().map(|p| (p.0 as f64, p.3)).chain(pts.iter().rev().map(|p| (p.0 as f64, p.2))).collect();
                chart.draw_series(std::iter::once(Polygon::new(band, color.mix(0.2).filled())))?;
                chart.draw_series(pts.iter().map(|p| Circle::new((p.0 as f64, p.1), 4, color.filled())))?;
                let series =
                    chart.draw_series(LineSeries::new(pts.iter().map(|p| (p.0 as f64, p.1)), color.stroke_width(2)))?;
                if !label.is_empty() {
                    series
                        .label(label.clone())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
                }
            }
            if lines.iter().any(|l| !l.0.is_empty()) {
                chart
                    .configure_series_labels()
                    .label_font((FONT_NAME, 14))
                    .background_style(WHITE.mix(0.8))
                    .border_style(BLACK)
                    .draw()?;
            }
            root.present()?;
            Ok(())
        })();
        result.map_err(|e| anyhow!("drawing {}: {e}", spec.metrics[metric]))?;
    }
    encode_png(&rgb, w, h)
}

/// Writes `sweep_<n>.png` per metric and report.html into the store; returns the page's path.
pub fn run(dir: &Path) -> Result<(std::path::PathBuf, usize)> {
    register_font()?;
    let (spec, cells) = read(dir)?;
    let mut page = format!(
        "<!doctype html><meta charset=utf-8><title>sluice sweep of {0}</title><h1>Sweep of {0}</h1>\n<p>{1} cells x {2} seeds ({3}). Each point is the mean over the seeds; the band is its 95% confidence interval (Student t); a cell with one value has no band.</p>\n",
        esc(&spec.scenario),
        cells.len(),
        spec.seeds.len(),
        esc(&spec.seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
    );
    for m in 0..spec.metrics.len() {
        let png = draw(&spec, &cells, m)?;
        let file = format!("sweep_{}.png", m + 1);
        let path = dir.join(&file);
        std::fs::write(&path, &png).with_context(|| format!("{}: cannot write", path.display()))?;
        page += &format!("<h2>{}</h2><img src=\"{file}\" alt=\"{}\">\n", esc(&spec.metrics[m]), esc(&spec.metrics[m]));
    }
    let path = dir.join("report.html");
    std::fs::write(&path, page).with_context(|| format!("{}: cannot write", path.display()))?;
    Ok((path, spec.metrics.len()))
}
