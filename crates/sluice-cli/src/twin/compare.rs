//! The twin's comparison: each class's figures from the testbed's runs (mean and range over the
//! runs that were not CPU-bound) beside the simulator's, as a table, a CSV and a figure.

use crate::report::plots::{encode_png, register_font, FONT_NAME, PALETTE};
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::error::Error;
use std::fmt::Write as _;

/// How far the simulator may be from the kernel's mean and still agree, where the kernel's own
/// run-to-run range is narrower (issue 64's bound).
pub const AGREE: f64 = 0.15;

/// A figure compared: its name in the CSV, its unit, and whether a bound applies (counters are
/// shown for explanation, not judged).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Figure {
    ThroughputMbps,
    CompletionMeanMs,
    CompletionP95Ms,
    CompletionP99Ms,
    RetransSegs,
    Rtos,
    Drops,
    EcnMarks,
}

impl Figure {
    /// The CSV's name of the figure.
    pub fn name(self) -> &'static str {
        match self {
            Figure::ThroughputMbps => "throughput_mbps",
            Figure::CompletionMeanMs => "completion_mean_ms",
            Figure::CompletionP95Ms => "completion_p95_ms",
            Figure::CompletionP99Ms => "completion_p99_ms",
            Figure::RetransSegs => "retransmitted_segments",
            Figure::Rtos => "rtos",
            Figure::Drops => "drops",
            Figure::EcnMarks => "ecn_marks",
        }
    }

    /// Whether the twin's bound applies to it.
    pub fn judged(self) -> bool {
        matches!(
            self,
            Figure::ThroughputMbps | Figure::CompletionMeanMs | Figure::CompletionP95Ms | Figure::CompletionP99Ms
        )
    }
}

/// One side's figures of one run: (class, figure) -> value; the class "fabric" holds drops and
/// marks, which the switch counts for every class together.
pub type Run = BTreeMap<(String, Figure), f64>;

/// Puts a class's completion mean, p95 and p99 (ms) into `run`, from completion times in
/// nanoseconds, sorted; both halves' figures come through here.
pub fn insert_completions(run: &mut Run, class: &str, sorted_ns: &[u64]) {
    if sorted_ns.is_empty() {
        return;
    }
    let mean = sorted_ns.iter().sum::<u64>() as f64 / sorted_ns.len() as f64;
    run.insert((class.to_string(), Figure::CompletionMeanMs), mean / 1e6);
    for (figure, p) in [(Figure::CompletionP95Ms, 0.95), (Figure::CompletionP99Ms, 0.99)] {
        if let Some(v) = percentile(sorted_ns, p) {
            run.insert((class.to_string(), figure), v / 1e6);
        }
    }
}

/// A sorted sample's percentile, nearest rank.
fn percentile(sorted: &[u64], p: f64) -> Option<f64> {
    let n = sorted.len();
    (n > 0).then(|| sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1] as f64)
}

/// One (class, figure) compared.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub class: String,
    pub figure: Figure,
    /// The testbed's runs that were not CPU-bound.
    pub kernel: Vec<f64>,
    /// The simulator's value, where it has one.
    pub simulator: Option<f64>,
}

impl Row {
    /// The kernel's mean over its runs.
    pub fn kernel_mean(&self) -> Option<f64> {
        (!self.kernel.is_empty()).then(|| self.kernel.iter().sum::<f64>() / self.kernel.len() as f64)
    }

    /// The kernel's lowest and highest run.
    pub fn kernel_range(&self) -> Option<(f64, f64)> {
        let lo = self.kernel.iter().copied().reduce(f64::min)?;
        Some((lo, self.kernel.iter().copied().fold(lo, f64::max)))
    }

    /// The simulator against the kernel's mean, percent.
    pub fn difference_pct(&self) -> Option<f64> {
        let (k, s) = (self.kernel_mean()?, self.simulator?);
        (k != 0.0).then(|| (s - k) / k * 100.0)
    }

    /// Whether the simulator agrees: within `AGREE` of the kernel's mean, or inside the
    /// kernel's own range. None for figures not judged or without both sides.
    pub fn agrees(&self) -> Option<bool> {
        if !self.figure.judged() {
            return None;
        }
        let (k, s, (lo, hi)) = (self.kernel_mean()?, self.simulator?, self.kernel_range()?);
        Some((s - k).abs() <= AGREE * k.abs() || (lo..=hi).contains(&s))
    }
}

/// Every (class, figure) either side has, the kernel's runs gathered.
pub fn rows(kernel: &[Run], simulator: &Run) -> Vec<Row> {
    let mut keys: Vec<(String, Figure)> =
        kernel.iter().flat_map(|r| r.keys().cloned()).chain(simulator.keys().cloned()).collect();
    keys.sort_by(|a, b| (a.0 == "fabric", &a.0, a.1).cmp(&(b.0 == "fabric", &b.0, b.1)));
    keys.dedup();
    keys.into_iter()
        .map(|(class, figure)| Row {
            kernel: kernel.iter().filter_map(|r| r.get(&(class.clone(), figure)).copied()).collect(),
            simulator: simulator.get(&(class.clone(), figure)).copied(),
            class,
            figure,
        })
        .collect()
}

/// Three significant digits, as the sweep's tables show figures.
fn sig(v: f64) -> String {
    crate::sweep::display(Some(v))
}

/// The comparison as a Markdown table.
pub fn markdown(rows: &[Row], kernel_runs: usize, flagged: usize) -> String {
    let mut md = format!(
        "kernel: mean of {kernel_runs} testbed run{} (lowest-highest){}; simulator: one run over the same window; agrees: within {:.0} % of the kernel's mean or inside its range\n\n",
        if kernel_runs == 1 { "" } else { "s" },
        if flagged > 0 { format!(", {flagged} CPU-bound run{} shown apart", if flagged == 1 { "" } else { "s" }) } else { String::new() },
        AGREE * 100.0
    );
    md.push_str(
        "| class | figure | kernel | simulator | difference | agrees |\n| --- | --- | ---: | ---: | ---: | :---: |\n",
    );
    for r in rows {
        let kernel = match (r.kernel_mean(), r.kernel_range()) {
            (Some(m), Some((lo, hi))) if r.kernel.len() > 1 => format!("{} ({}-{})", sig(m), sig(lo), sig(hi)),
            (Some(m), _) => sig(m),
            _ => "-".into(),
        };
        let diff = r.difference_pct().map_or("-".into(), |d| format!("{d:+.0} %"));
        let agrees = match r.agrees() {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "",
        };
        let _ = writeln!(
            md,
            "| {} | {} | {kernel} | {} | {diff} | {agrees} |",
            r.class,
            r.figure.name(),
            r.simulator.map_or("-".into(), sig)
        );
    }
    md
}

/// The comparison as CSV: `class,figure,kernel_mean,kernel_min,kernel_max,kernel_runs,simulator,difference_pct,agrees`.
pub fn csv(rows: &[Row]) -> Result<Vec<u8>> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    w.write_record([
        "class",
        "figure",
        "kernel_mean",
        "kernel_min",
        "kernel_max",
        "kernel_runs",
        "simulator",
        "difference_pct",
        "agrees",
    ])?;
    let num = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
    for r in rows {
        let (lo, hi) = r.kernel_range().unzip();
        let agrees = r.agrees().map_or(String::new(), |a| a.to_string());
        w.write_record([
            r.class.clone(),
            r.figure.name().into(),
            num(r.kernel_mean()),
            num(lo),
            num(hi),
            r.kernel.len().to_string(),
            num(r.simulator),
            num(r.difference_pct()),
            agrees,
        ])?;
    }
    w.into_inner().map_err(|e| anyhow!("writing twin.csv: {e}"))
}

/// The judged figures as bars, kernel (with its range) beside simulator, one panel per figure.
pub fn png(rows: &[Row], title: &str) -> Result<Vec<u8>> {
    register_font()?;
    let panels: Vec<(Figure, Vec<&Row>)> =
        [Figure::ThroughputMbps, Figure::CompletionMeanMs, Figure::CompletionP95Ms, Figure::CompletionP99Ms]
            .into_iter()
            .map(|f| (f, rows.iter().filter(|r| r.figure == f && r.kernel_mean().is_some()).collect::<Vec<_>>()))
            .filter(|(_, rs)| !rs.is_empty())
            .collect();
    let (w, h) = (360 * panels.len().max(1) as u32, 420);
    let mut rgb = vec![255u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        let drawn = (|| -> Result<(), Box<dyn Error>> {
            root.fill(&WHITE)?;
            let root = root.titled(title, (FONT_NAME, 18))?;
            for ((figure, rs), area) in panels.iter().zip(root.split_evenly((1, panels.len().max(1)))) {
                let top =
                    rs.iter().flat_map(|r| r.kernel.iter().copied().chain(r.simulator)).fold(0.0, f64::max) * 1.15;
                let n = rs.len();
                let mut chart = ChartBuilder::on(&area)
                    .margin(12)
                    .x_label_area_size(36)
                    .y_label_area_size(56)
                    .caption(figure.name(), (FONT_NAME, 15))
                    .build_cartesian_2d(0.0..n as f64, 0.0..top.max(1e-9))?;
                let labels: Vec<String> = rs.iter().map(|r| r.class.clone()).collect();
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .x_labels(n)
                    .x_label_formatter(&|x| labels.get(x.floor() as usize).cloned().unwrap_or_default())
                    .label_style((FONT_NAME, 13))
                    .draw()?;
                for (i, r) in rs.iter().enumerate() {
                    let x = i as f64;
                    let k = r.kernel_mean().unwrap_or(0.0);
                    chart.draw_series([Rectangle::new([(x + 0.1, 0.0), (x + 0.48, k)], PALETTE[0].filled())])?;
                    if let Some((lo, hi)) = r.kernel_range() {
                        chart.draw_series([PathElement::new(
                            vec![(x + 0.29, lo), (x + 0.29, hi)],
                            BLACK.stroke_width(2),
                        )])?;
                    }
                    if let Some(s) = r.simulator {
                        chart.draw_series([Rectangle::new([(x + 0.52, 0.0), (x + 0.9, s)], PALETTE[1].filled())])?;
                    }
                }
            }
            let legend = [("Linux kernels (testbed), range of runs", PALETTE[0]), ("simulator", PALETTE[1])];
            for (i, (text, color)) in legend.iter().enumerate() {
                let y = h as i32 - 46 + 18 * i as i32;
                root.draw(&Rectangle::new([(14, y), (26, y + 10)], color.filled()))?;
                root.draw(&Text::new(*text, (32, y - 2), (FONT_NAME, 13)))?;
            }
            root.present()?;
            Ok(())
        })();
        drawn.map_err(|e| anyhow!("drawing twin.png: {e}"))?;
    }
    encode_png(&rgb, w, h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(figure: Figure, kernel: &[f64], simulator: Option<f64>) -> Row {
        Row { class: "query".into(), figure, kernel: kernel.to_vec(), simulator }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(
            (percentile(&v, 0.5), percentile(&v, 0.95), percentile(&v, 0.99)),
            (Some(50.0), Some(95.0), Some(99.0))
        );
        assert_eq!(percentile(&[7], 0.99), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
        let mut run = Run::new();
        insert_completions(&mut run, "q", &[1_000_000, 2_000_000, 6_000_000]);
        let got = |f| run[&("q".to_string(), f)];
        assert_eq!((got(Figure::CompletionMeanMs), got(Figure::CompletionP95Ms)), (3.0, 6.0));
    }

    #[test]
    fn agreement_is_within_fifteen_percent_of_the_mean_or_inside_the_kernels_range() {
        assert_eq!(row(Figure::CompletionMeanMs, &[10.0, 10.0], Some(11.4)).agrees(), Some(true));
        assert_eq!(row(Figure::CompletionMeanMs, &[10.0, 10.0], Some(11.6)).agrees(), Some(false));
        assert_eq!(row(Figure::CompletionMeanMs, &[10.0, 10.0], Some(8.4)).agrees(), Some(false));
        // A kernel that varies 5-25 between runs: 24 is inside its range, 26 is not.
        assert_eq!(row(Figure::CompletionP95Ms, &[5.0, 25.0], Some(24.0)).agrees(), Some(true));
        assert_eq!(row(Figure::CompletionP95Ms, &[5.0, 25.0], Some(26.0)).agrees(), Some(false));
        // Counters explain; they are not judged. A figure one side lacks is not judged either.
        assert_eq!(row(Figure::Drops, &[100.0], Some(1.0)).agrees(), None);
        assert_eq!(row(Figure::ThroughputMbps, &[], Some(1.0)).agrees(), None);
        assert_eq!(row(Figure::ThroughputMbps, &[50.0, 70.0], Some(66.0)).difference_pct(), Some(10.0));
    }

    #[test]
    fn rows_gather_the_kernels_runs_and_put_the_fabric_last() {
        let run = |v: f64| -> Run {
            [
                (("query".to_string(), Figure::CompletionMeanMs), v),
                (("fabric".to_string(), Figure::Drops), 3.0),
                (("backup".to_string(), Figure::ThroughputMbps), 90.0),
            ]
            .into_iter()
            .collect()
        };
        let sim: Run = [(("query".to_string(), Figure::CompletionMeanMs), 2.0)].into_iter().collect();
        let rs = rows(&[run(1.0), run(3.0)], &sim);
        let names: Vec<(&str, Figure)> = rs.iter().map(|r| (r.class.as_str(), r.figure)).collect();
        assert_eq!(
            names,
            vec![("backup", Figure::ThroughputMbps), ("query", Figure::CompletionMeanMs), ("fabric", Figure::Drops)]
        );
        assert_eq!((rs[1].kernel_mean(), rs[1].simulator, rs[1].agrees()), (Some(2.0), Some(2.0), Some(true)));
        assert_eq!(rs[0].simulator, None);
        let text = String::from_utf8(csv(&rs).expect("csv")).expect("utf8");
        assert!(text.contains("query,completion_mean_ms,2,1,3,2,2,0,true\n"), "{text}");
        assert!(
            markdown(&rs, 2, 1).contains("| query | completion_mean_ms | 2.00 (1.00-3.00) | 2.00 | +0 % | yes |"),
            "{}",
            markdown(&rs, 2, 1)
        );
        assert!(png(&rs, "twin").expect("drawn").starts_with(b"\x89PNG"));
    }
}
