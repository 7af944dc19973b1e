//! The report's figures, drawn with plotters into RGB buffers and encoded as PNG.

use super::inputs::{CwndSample, Flow, Inputs, PortUtilization, QueueSample, RequestSample, TelemetrySample};
use anyhow::{anyhow, Result};
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::BTreeMap;
use std::error::Error;
use std::ops::Range;

/// One drawn figure: its file name in the run directory, what it shows, the axis titles of each
/// of its panels (as drawn, so the page can state them), and its PNG bytes.
pub struct Figure {
    pub file: &'static str,
    pub title: String,
    pub caption: String,
    pub axes: Vec<Axes>,
    pub png: Vec<u8>,
}

/// The titles of one panel's axes, each naming its quantity and unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Axes {
    pub x: String,
    pub y: String,
}

impl Axes {
    /// Axis titles from anything printable.
    pub fn new(x: impl Into<String>, y: impl Into<String>) -> Axes {
        Axes { x: x.into(), y: y.into() }
    }
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
type DrawResult = Result<(), Box<dyn Error>>;

const WIDTH: u32 = 960;
const HEIGHT: u32 = 540;
/// Lines drawn individually in one chart; the rest are summarised as one grey line.
const MAX_SERIES: usize = 8;
/// Points per drawn line; longer series keep each bin's minimum and maximum so peaks survive.
const MAX_POINTS: usize = 2000;
/// Bars in the utilization chart.
const MAX_BARS: usize = 30;

/// DejaVu Sans (see assets/fonts/README.md): bundled so drawing text needs no system font library.
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
pub(crate) const FONT_NAME: &str = "sans-serif";

pub(crate) const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(127, 127, 127),
];
const OTHERS: RGBColor = RGBColor(160, 160, 160);
/// The shade of a circuit day behind time series.
const DAY: RGBColor = RGBColor(222, 236, 250);

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

pub(crate) fn register_font() -> Result<()> {
    static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *ONCE.get_or_init(|| plotters::style::register_font(FONT_NAME, FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(anyhow!("the bundled font could not be loaded"))
    }
}

/// A display unit: values are divided by `div` and the axis says `name`.
#[derive(Clone, Copy)]
pub struct Unit {
    pub div: f64,
    pub name: &'static str,
}

/// The unit that shows nanosecond values up to `max` with at most three integer digits.
pub fn time_unit(max_ns: f64) -> Unit {
    match max_ns.abs() {
        m if m >= 1e9 => Unit { div: 1e9, name: "s" },
        m if m >= 1e6 => Unit { div: 1e6, name: "ms" },
        m if m >= 1e3 => Unit { div: 1e3, name: "µs" },
        _ => Unit { div: 1.0, name: "ns" },
    }
}

/// The decimal unit (1 KB = 1000 B) that shows byte values up to `max`.
pub fn byte_unit(max: f64) -> Unit {
    match max.abs() {
        m if m >= 1e9 => Unit { div: 1e9, name: "GB" },
        m if m >= 1e6 => Unit { div: 1e6, name: "MB" },
        m if m >= 1e3 => Unit { div: 1e3, name: "KB" },
        _ => Unit { div: 1.0, name: "B" },
    }
}

const PERCENT: Unit = Unit { div: 0.01, name: "%" };

/// A byte count as a short label for log axes: 1 KB, 10 MB.
fn bytes_label(v: f64) -> String {
    let u = byte_unit(v);
    let x = v / u.div;
    if (x - x.round()).abs() < 1e-9 {
        format!("{} {}", x.round(), u.name)
    } else {
        format!("{x:.1} {}", u.name)
    }
}

/// A tick label without trailing zeros: 300, 2.5, 0.05.
pub(super) fn tick(v: &f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// Draws every figure the inputs allow; `notes` collects why an expected figure is missing.
pub fn draw_all(inputs: &Inputs, notes: &mut Vec<String>) -> Result<Vec<Figure>> {
    register_font()?;
    let mut figures = Vec::new();
    match slowdown_buckets(inputs) {
        Some((series, source)) if !series.is_empty() => figures.push(slowdown_vs_size(&series, &source)?),
        Some(_) => notes.push("No finished flow has a size and a slowdown: slowdown vs flow size not drawn.".into()),
        None => {}
    }
    // Each series file present gives a figure, or a note saying why none was drawn.
    let mut add = |drawn: Option<Figure>, why: &str| match drawn {
        Some(f) => figures.push(f),
        None => notes.push(why.into()),
    };
    if let Some(flows) = &inputs.flows {
        add(fct_cdf(flows)?, "flows.csv has no finished flow: FCT CDF not drawn.");
    }
    if let Some(r) = &inputs.requests {
        add(request_latency_cdf(r)?, "requests.csv has no completed request: request latency CDF not drawn.");
    }
    if let Some(q) = &inputs.queues {
        add(queue_depth(q, &inputs.data_days())?, "queues.csv has no plottable samples: queue depth not drawn.");
    }
    if let Some(c) = &inputs.cwnd {
        add(cwnd(c, &inputs.data_days())?, "cwnd.csv has no plottable samples: cwnd not drawn.");
    }
    if let Some(u) = &inputs.utilization {
        add(utilization(u)?, "utilization.csv has no plottable ports: utilization not drawn.");
    }
    if let Some(t) = &inputs.telemetry {
        add(telemetry(t)?, "telemetry.csv has no plottable samples: telemetry not drawn.");
    }
    Ok(figures)
}

/// Renders `draw` into a PNG of `w` × `h` pixels; `axes` are the titles `draw` gives its panels.
fn render(
    file: &'static str,
    title: String,
    caption: String,
    axes: Vec<Axes>,
    (w, h): (u32, u32),
    draw: impl FnOnce(&Area) -> DrawResult,
) -> Result<Figure> {
    let mut rgb = vec![255u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        let drawn = root.fill(&WHITE).map_err(Box::<dyn Error>::from).and_then(|_| draw(&root));
        drawn
            .and_then(|_| root.present().map_err(Box::<dyn Error>::from))
            .map_err(|e| anyhow!("drawing {file}: {e}"))?;
    }
    Ok(Figure { file, title, caption, axes, png: encode_png(&rgb, w, h)? })
}

/// Titles a chart's axes from `axes` in the report's text styles. Every chart is titled through
/// here, so the titles a figure records are the ones its image shows.
pub(super) fn titled<'m, 'a, 'b, X: Ranged, Y: Ranged>(
    mesh: &'m mut MeshStyle<'a, 'b, X, Y, BitMapBackend<'a>>,
    axes: &Axes,
) -> &'m mut MeshStyle<'a, 'b, X, Y, BitMapBackend<'a>> {
    mesh.x_desc(axes.x.as_str())
        .y_desc(axes.y.as_str())
        .label_style((FONT_NAME, 14))
        .axis_desc_style((FONT_NAME, 16))
        .light_line_style(RGBColor(238, 238, 238))
}

pub(crate) fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Best);
    encoder.set_filter(png::FilterType::Paeth);
    encoder.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(out)
}

/// A polyline as separate two-point segments. Plotters turns a thick polyline into one polygon,
/// which breaks up and spikes where a dense series turns back on itself; separate segments do not.
fn segments(points: &[(f64, f64)], style: ShapeStyle) -> impl Iterator<Item = PathElement<(f64, f64)>> + '_ {
    points.windows(2).map(move |w| PathElement::new(vec![w[0], w[1]], style))
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Slowdown statistics of the finished flows of one size bucket.
#[derive(Debug)]
struct Bucket {
    /// Where the bucket sits on the size axis, in bytes.
    x: f64,
    p50: f64,
    p99: f64,
}

/// A class (or `all`) and its slowdown buckets in size order.
type Slowdowns = (String, Vec<Bucket>);

/// The grey of the line for every flow, drawn beside the classes' own.
const ALL: RGBColor = RGBColor(70, 70, 70);

/// The slowdown series to plot, each a class (or `all`) with its buckets in size order, and a
/// sentence on where they came from; `None` when the run wrote neither flows.csv nor
/// fct_buckets.csv.
///
/// From flows.csv, per class, quarter-decade size buckets (1 KB–1.78 KB, …), each placed at the
/// median size of its flows: flows of one size make one point at that size, however many there
/// are. Only without flows.csv does fct_buckets.csv serve: its rows are equal shares of flows and
/// split one size over many rows, so each row is placed at the largest size it holds and rows
/// ending at one size merge into one point. `all` is drawn only beside two or more classes: with
/// one class it is the same line.
fn slowdown_buckets(inputs: &Inputs) -> Option<(Vec<Slowdowns>, String)> {
    let mut series: Vec<Slowdowns>;
    let source;
    if let Some(flows) = &inputs.flows {
        // (class, quarter-decade) → (size, slowdown) of its finished flows
        let mut groups: BTreeMap<(&str, i32), Vec<(f64, f64)>> = BTreeMap::new();
        for f in flows {
            if let (Some(size), Some(s)) = (f.size_bytes, f.slowdown) {
                if size >= 1.0 && size.is_finite() && s.is_finite() {
                    let decade = (size.log10() * 4.0).floor() as i32;
                    groups.entry((&f.class, decade)).or_default().push((size, s));
                    groups.entry(("", decade)).or_default().push((size, s));
                }
            }
        }
        series = Vec::new();
        for ((class, _), mut v) in groups {
            let mut sizes: Vec<f64> = v.iter().map(|p| p.0).collect();
            sizes.sort_by(f64::total_cmp);
            v.sort_by(|a, b| a.1.total_cmp(&b.1));
            let slowdowns: Vec<f64> = v.iter().map(|p| p.1).collect();
            let b = Bucket {
                x: percentile(&sizes, 0.5),
                p50: percentile(&slowdowns, 0.5),
                p99: percentile(&slowdowns, 0.99),
            };
            let name = if class.is_empty() { "all" } else { class };
            match series.iter_mut().find(|(n, _)| n == name) {
                Some((_, bs)) => bs.push(b),
                None => series.push((name.to_string(), vec![b])),
            }
        }
        // The key "" sorts first, so `all` leads.
        source = "quarter-decade size buckets of flows.csv, each at the median size of its flows".to_string();
    } else {
        let rows = inputs.fct_buckets.as_ref()?;
        // Per class: (bucket, flows in it, sum of p50 × flows), to merge rows of one size.
        type Weighted = (Bucket, f64, f64);
        let mut weighted: Vec<(String, Vec<Weighted>)> = Vec::new();
        for r in rows {
            let (Some(p50), Some(p99)) = (r.slowdown_p50, r.slowdown_p99) else { continue };
            let lo = r.bucket_lo_bytes.max(0.0);
            // A row holds sizes up to its upper edge; the open last row of explicit edges, sizes
            // beyond its lower one.
            let x = match r.bucket_hi_bytes.filter(|h| h.is_finite() && *h > 0.0) {
                Some(hi) => hi,
                None => lo * 2.0,
            };
            if r.count == 0 || x <= 0.0 || !p50.is_finite() || !p99.is_finite() {
                continue;
            }
            let i = match weighted.iter().position(|(n, _)| *n == r.class) {
                Some(i) => i,
                None => {
                    weighted.push((r.class.clone(), Vec::new()));
                    weighted.len() - 1
                }
            };
            weighted[i].1.push((Bucket { x, p50, p99: p99.max(p50) }, r.count as f64, p50 * r.count as f64));
        }
        series = Vec::new();
        for (class, rows) in weighted {
            let mut out: Vec<Weighted> = Vec::new();
            for (b, n, sum) in rows {
                match out.last_mut() {
                    Some(last) if last.0.x == b.x => {
                        last.0.p99 = last.0.p99.max(b.p99);
                        last.1 += n;
                        last.2 += sum;
                        last.0.p50 = last.2 / last.1;
                    }
                    _ => out.push((b, n, sum)),
                }
            }
            series.push((class, out.into_iter().map(|r| r.0).collect()));
        }
        source = "fct_buckets.csv, each row at the largest size it holds (rows ending at one size are merged: their \
                  p50 is the flow-weighted mean, their p99 the largest)"
            .to_string();
    }
    series.retain(|(_, bs)| !bs.is_empty());
    if series.iter().filter(|(n, _)| n != "all").count() < 2 {
        series.retain(|(n, _)| n != "all");
    }
    Some((series, source))
}

fn slowdown_vs_size(series: &[Slowdowns], source: &str) -> Result<Figure> {
    let all = || series.iter().flat_map(|(_, bs)| bs.iter());
    let xmin = all().map(|b| b.x).fold(f64::INFINITY, f64::min);
    let xmax = all().map(|b| b.x).fold(0.0, f64::max);
    let ymax = all().map(|b| b.p99).fold(1.0, f64::max);
    // Half a decade beyond the extreme points, so a single size sits mid-axis with ticks around it.
    let (x0, x1) = (xmin / 10f64.sqrt(), xmax * 10f64.sqrt());
    let caption = format!(
        "Slowdown (FCT / ideal FCT) of finished flows by size, over {source}: the line is the median (p50), \
         the shaded band (a whisker for a lone bucket) reaches the p99."
    );
    let axes = Axes::new("flow size (bytes, log scale)", "slowdown (FCT / ideal FCT)");
    render(
        "slowdown_vs_size.png",
        "Slowdown vs flow size".into(),
        caption,
        vec![axes.clone()],
        (WIDTH, HEIGHT),
        |root| {
            let mut chart = ChartBuilder::on(root)
                .caption("Slowdown vs flow size", (FONT_NAME, 22))
                .margin(14)
                .x_label_area_size(50)
                .y_label_area_size(70)
                .build_cartesian_2d(TickAxis::log_sizes(x0..x1), 0.0..(ymax * 1.08).max(1.5))?;
            titled(&mut chart.configure_mesh(), &axes).x_labels(12).y_label_formatter(&tick).draw()?;
            let mut classes = 0;
            for (name, bs) in series {
                let c = if name == "all" {
                    ALL
                } else {
                    classes += 1;
                    color(classes - 1)
                };
                if bs.len() >= 2 {
                    let mut band: Vec<(f64, f64)> = bs.iter().map(|b| (b.x, b.p50)).collect();
                    band.extend(bs.iter().rev().map(|b| (b.x, b.p99)));
                    chart.draw_series(std::iter::once(Polygon::new(band, c.mix(0.18).filled())))?;
                    let p99: Vec<(f64, f64)> = bs.iter().map(|b| (b.x, b.p99)).collect();
                    chart.draw_series(segments(&p99, c.mix(0.5).stroke_width(1)))?;
                } else {
                    // One bucket: a whisker from its p50 to its p99.
                    let b = &bs[0];
                    whisker(&mut chart, b.x, (b.p50, b.p99), c.stroke_width(2))?;
                }
                let p50: Vec<(f64, f64)> = bs.iter().map(|b| (b.x, b.p50)).collect();
                chart.draw_series(segments(&p50, c.stroke_width(2)))?;
                chart
                    .draw_series(p50.iter().map(|&p| Circle::new(p, 4, c.filled())))?
                    .label(format!("{name}: p50, to p99"))
                    .legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + Rectangle::new([(0, -6), (22, 6)], c.mix(0.25).filled())
                            + PathElement::new(vec![(0, 0), (22, 0)], c.stroke_width(2))
                            + Circle::new((11, 0), 4, c.filled())
                    });
            }
            legend(&mut chart)?;
            Ok(())
        },
    )
}

/// Draws a vertical line at `x` from `lo` to `hi` with a 12-pixel cap at each end: a range about
/// a figure (a confidence interval, or a median to its p99).
pub(super) fn whisker<'a, X: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
    x: f64,
    (lo, hi): (f64, f64),
    style: ShapeStyle,
) -> DrawResult {
    chart.draw_series(std::iter::once(PathElement::new(vec![(x, lo), (x, hi)], style)))?;
    chart.draw_series([lo, hi].map(|y| EmptyElement::at((x, y)) + PathElement::new(vec![(-6, 0), (6, 0)], style)))?;
    Ok(())
}

/// Items grouped by class, classes in name order.
fn by_class<T>(items: impl IntoIterator<Item = (String, T)>) -> Vec<(String, Vec<T>)> {
    let mut map: BTreeMap<String, Vec<T>> = BTreeMap::new();
    for (k, v) in items {
        map.entry(k).or_default().push(v);
    }
    map.into_iter().collect()
}

/// An axis whose ticks sit exactly where the figure says, each with its own label: a sweep's
/// grid values (numbers, or categories at 0, 1, …), or round sizes on a log size axis.
pub(super) struct TickAxis {
    pub labels: Vec<String>,
    pub ticks: Vec<f64>,
    pub range: Range<f64>,
    pub log: bool,
    /// The ticks are categories at 0, 1, … (bars), not numbers (points on a line).
    pub categorical: bool,
}

impl TickAxis {
    /// A log axis over `range` (bytes) with ticks at 1, 2 and 5 times each power of ten in it, or
    /// only at the powers of ten when those would crowd the axis.
    fn log_sizes(range: Range<f64>) -> TickAxis {
        let (a, b) = (range.start.log10(), range.end.log10());
        // Not at the very ends, where a label would run off the chart.
        let inside = |t: &f64| ((t.log10() - a) / (b - a) - 0.5).abs() <= 0.48;
        let mut ticks = Vec::new();
        for mantissas in [&[1.0, 2.0, 5.0][..], &[1.0][..]] {
            ticks.clear();
            let mut decade = 10f64.powf(a.floor());
            while decade <= range.end {
                ticks.extend(mantissas.iter().map(|m| m * decade).filter(inside));
                decade *= 10.0;
            }
            if ticks.len() <= 9 {
                break;
            }
        }
        TickAxis {
            labels: ticks.iter().map(|t| bytes_label(*t)).collect(),
            ticks,
            range,
            log: true,
            categorical: false,
        }
    }

    fn scaled(&self, x: f64) -> f64 {
        if self.log {
            x.log10()
        } else {
            x
        }
    }
}

impl Ranged for TickAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let (a, b) = (self.scaled(self.range.start), self.scaled(self.range.end));
        let t = (self.scaled(*value) - a) / (b - a);
        limit.0 + ((limit.1 - limit.0) as f64 * t).round() as i32
    }

    /// The ticks; every k-th of them when fewer labels fit.
    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        let step = self.ticks.len().div_ceil(hint.max_num_points().max(1)).max(1);
        self.ticks.iter().step_by(step).copied().collect()
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

impl ValueFormatter<f64> for TickAxis {
    fn format_ext(&self, value: &f64) -> String {
        self.ticks.iter().position(|t| t == value).map(|i| self.labels[i].clone()).unwrap_or_default()
    }
}

fn legend<'a, X: Ranged, Y: Ranged>(chart: &mut ChartContext<'a, BitMapBackend<'a>, Cartesian2d<X, Y>>) -> DrawResult {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT_NAME, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .draw()?;
    Ok(())
}

fn fct_cdf(flows: &[Flow]) -> Result<Option<Figure>> {
    let classes =
        by_class(flows.iter().filter_map(|f| Some((f.class.clone(), f.fct_ns.filter(|v| v.is_finite() && *v > 0.0)?))));
    let text = CdfText {
        file: "fct_cdf.png",
        title: "FCT CDF per class",
        caption: "Cumulative distribution of flow completion times of finished flows, per class (log time axis).",
        heading: "Flow completion time CDF",
        x_desc: "flow completion time",
        items: "flows",
    };
    latency_cdf(classes, &text)
}

fn request_latency_cdf(requests: &[RequestSample]) -> Result<Option<Figure>> {
    let classes = by_class(
        requests
            .iter()
            .filter(|r| r.latency_ns.is_finite() && r.latency_ns > 0.0)
            .map(|r| (r.class.clone(), r.latency_ns)),
    );
    let text = CdfText {
        file: "request_latency_cdf.png",
        title: "Request latency CDF per class",
        caption: "Cumulative distribution of request latency (issue to last response byte), per class (log time axis).",
        heading: "Request latency CDF",
        x_desc: "request latency",
        items: "requests",
    };
    latency_cdf(classes, &text)
}

/// The words around one CDF figure.
struct CdfText {
    file: &'static str,
    title: &'static str,
    caption: &'static str,
    heading: &'static str,
    x_desc: &'static str,
    items: &'static str,
}

/// A CDF per class of positive times in nanoseconds, on a log time axis.
fn latency_cdf(classes: Vec<(String, Vec<f64>)>, text: &CdfText) -> Result<Option<Figure>> {
    if classes.is_empty() {
        return Ok(None);
    }
    let mut curves = Vec::new();
    for (class, mut v) in classes {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let step = n.div_ceil(MAX_POINTS).max(1);
        let mut pts: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .filter(|(i, _)| i % step == 0 || *i == n - 1)
            .map(|(i, x)| (*x, (i + 1) as f64 / n as f64))
            .collect();
        pts.insert(0, (v[0], 0.0));
        curves.push((format!("{class} ({n} {})", text.items), pts));
    }
    let lo = curves.iter().map(|(_, p)| p[0].0).fold(f64::INFINITY, f64::min);
    let hi = curves.iter().flat_map(|(_, p)| p.iter().map(|q| q.0)).fold(0.0, f64::max);
    let u = time_unit(hi);
    let axes = Axes::new(format!("{} ({}, log scale)", text.x_desc, u.name), format!("fraction of {}", text.items));
    render(text.file, text.title.into(), text.caption.into(), vec![axes.clone()], (WIDTH, HEIGHT), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(text.heading, (FONT_NAME, 22))
            .margin(14)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d((lo / u.div / 1.25..hi / u.div * 1.25).log_scale(), 0.0..1.0)?;
        titled(&mut chart.configure_mesh(), &axes).x_label_formatter(&tick).y_label_formatter(&tick).draw()?;
        for (i, (label, pts)) in curves.iter().enumerate() {
            let c = color(i);
            let scaled: Vec<(f64, f64)> = pts.iter().map(|&(x, y)| (x / u.div, y)).collect();
            chart
                .draw_series(segments(&scaled, c.stroke_width(2)))?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        }
        legend(&mut chart)?;
        Ok(())
    })
    .map(Some)
}

/// A line to draw: its legend label and (x, y) points in raw units.
struct Series {
    label: String,
    color: RGBColor,
    points: Vec<(f64, f64)>,
}

/// Keeps at most `max` points of a time-sorted series: each bin's first, minimum, maximum and last,
/// so a downsampled sawtooth keeps its peaks.
fn decimate(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max {
        return points.to_vec();
    }
    let chunk = points.len().div_ceil(max / 4).max(1);
    let mut out = Vec::with_capacity(max);
    for c in points.chunks(chunk) {
        let min = (0..c.len()).min_by(|&a, &b| c[a].1.total_cmp(&c[b].1)).unwrap_or(0);
        let max = (0..c.len()).max_by(|&a, &b| c[a].1.total_cmp(&c[b].1)).unwrap_or(0);
        let mut idx = [0, min, max, c.len() - 1];
        idx.sort_unstable();
        let mut last = usize::MAX;
        for i in idx {
            if i != last {
                out.push(c[i]);
                last = i;
            }
        }
    }
    out
}

/// Chooses up to MAX_SERIES series with the highest peak and folds the others into one grey line
/// (their maximum at each time). Returns the lines and a sentence on what was folded.
fn cap_series(mut groups: Vec<(String, Vec<(f64, f64)>)>, what: &str) -> (Vec<Series>, String) {
    for (_, pts) in &mut groups {
        pts.retain(|p| p.0.is_finite() && p.1.is_finite());
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    groups.retain(|(_, p)| !p.is_empty());
    let total = groups.len();
    let peak = |p: &[(f64, f64)]| p.iter().map(|q| q.1).fold(f64::NEG_INFINITY, f64::max);
    let mut note = format!("{total} {what}{}.", if total == 1 { "" } else { "s" });
    let mut others = Vec::new();
    if total > MAX_SERIES {
        // Highest peak first; ties keep file order.
        groups.sort_by(|a, b| peak(&b.1).total_cmp(&peak(&a.1)));
        others = groups.split_off(MAX_SERIES);
        note = format!(
            "{total} {what}s: the {MAX_SERIES} with the highest peak are drawn; the other {} are folded into one grey \
             line, their maximum at each time.",
            others.len()
        );
    }
    let mut series: Vec<Series> = groups
        .into_iter()
        .enumerate()
        .map(|(i, (label, pts))| Series { label, color: color(i), points: decimate(&pts, MAX_POINTS) })
        .collect();
    if !others.is_empty() {
        let mut all: Vec<(f64, f64)> = others.into_iter().flat_map(|(_, p)| p).collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut folded: Vec<(f64, f64)> = Vec::new();
        for (t, v) in all {
            match folded.last_mut() {
                Some(last) if last.0 == t => last.1 = last.1.max(v),
                _ => folded.push((t, v)),
            }
        }
        let n = series.len();
        series.push(Series {
            label: format!("max of {} others", total - n),
            color: OTHERS,
            points: decimate(&folded, MAX_POINTS),
        });
    }
    (series, note)
}

/// The time span of `series`, in ns.
fn time_span(series: &[Series]) -> (f64, f64) {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)))
}

/// The axis titles of a time panel of `series`, its values named `y_desc` in unit `yu`.
fn time_axes(series: &[Series], y_desc: &str, yu: Unit) -> Axes {
    Axes::new(format!("time ({})", time_unit(time_span(series).1).name), format!("{y_desc} ({})", yu.name))
}

/// Draws lines over time into `area`, titled by `axes` (from [`time_axes`]): x in nanoseconds,
/// y scaled by `yu`. `days` (ns) are shaded behind the lines: the circuit days of a
/// reconfigurable network.
fn time_panel(area: &Area, title: &str, axes: &Axes, series: &[Series], yu: Unit, days: &[(f64, f64)]) -> DrawResult {
    let (t0, t1) = time_span(series);
    let ymax = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max);
    let ymin = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::min);
    let xu = time_unit(t1);
    let (x0, mut x1) = (t0 / xu.div, t1 / xu.div);
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let (y0, mut y1) = (ymin / yu.div, ymax / yu.div * 1.08);
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT_NAME, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(75)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    titled(&mut chart.configure_mesh(), axes).x_label_formatter(&tick).y_label_formatter(&tick).draw()?;
    let shown = days.iter().map(|&(a, b)| (a / xu.div, b / xu.div)).filter(|&(a, b)| b > x0 && a < x1);
    chart.draw_series(shown.map(|(a, b)| Rectangle::new([(a.max(x0), y0), (b.min(x1), y1)], DAY.filled())))?;
    for s in series {
        let c = s.color;
        let scaled: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x / xu.div, y / yu.div)).collect();
        chart
            .draw_series(segments(&scaled, c.stroke_width(if c == OTHERS { 1 } else { 2 })))?
            .label(s.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FONT_NAME, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .draw()?;
    Ok(())
}

/// Queue samples grouped by port in order of first appearance, each named as legends name it.
fn queue_groups(samples: &[QueueSample]) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut order: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut index: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for s in samples {
        let i = *index.entry((&s.node, &s.port)).or_insert_with(|| {
            order.push((s.label(), Vec::new()));
            order.len() - 1
        });
        order[i].1.push((s.t_ns, s.bytes));
    }
    order
}

/// The sentence a caption adds when circuit days are shaded.
fn days_note(days: &[(f64, f64)]) -> &'static str {
    if days.is_empty() {
        ""
    } else {
        " Shaded: the circuit days of the rack pairs that carried data (circuit.csv)."
    }
}

fn queue_depth(samples: &[QueueSample], days: &[(f64, f64)]) -> Result<Option<Figure>> {
    let (series, note) = cap_series(queue_groups(samples), "port");
    if series.is_empty() {
        return Ok(None);
    }
    let peak = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max);
    let yu = byte_unit(peak);
    let caption = format!("Queue depth sampled at switch ports, from queues.csv. {note}{}", days_note(days));
    let axes = time_axes(&series, "queue depth", yu);
    render("queue_depth.png", "Queue depth over time".into(), caption, vec![axes.clone()], (WIDTH, HEIGHT), |root| {
        time_panel(root, "Queue depth", &axes, &series, yu, days)
    })
    .map(Some)
}

fn cwnd(samples: &[CwndSample], days: &[(f64, f64)]) -> Result<Option<Figure>> {
    let mut flows: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for s in samples {
        flows.entry(s.flow).or_default().push((s.t_ns, s.cwnd_bytes));
    }
    let groups = flows.into_iter().map(|(f, p)| (format!("flow {f}"), p)).collect();
    let (series, note) = cap_series(groups, "flow");
    if series.is_empty() {
        return Ok(None);
    }
    let peak = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max);
    let yu = byte_unit(peak);
    let caption = format!("Congestion window sampled per flow, from cwnd.csv. {note}{}", days_note(days));
    let axes = time_axes(&series, "cwnd", yu);
    render("cwnd.png", "Congestion window over time".into(), caption, vec![axes.clone()], (WIDTH, HEIGHT), |root| {
        time_panel(root, "Congestion window", &axes, &series, yu, days)
    })
    .map(Some)
}

fn utilization(ports: &[PortUtilization]) -> Result<Option<Figure>> {
    let mut rows: Vec<(String, f64, f64)> =
        ports.iter().filter(|p| p.utilization.is_finite()).map(|p| (p.label(), p.utilization, p.tx_bytes)).collect();
    if rows.is_empty() {
        return Ok(None);
    }
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total = rows.len();
    let mut caption =
        format!("Utilization (bytes sent / line rate × run time) of {total} ports, from utilization.csv.");
    if total > MAX_BARS {
        let shown_min = rows[MAX_BARS - 1].1;
        rows.truncate(MAX_BARS);
        caption += &format!(
            " The {MAX_BARS} busiest are drawn; the other {} are at or below {:.1}%.",
            total - MAX_BARS,
            shown_min * 100.0
        );
    }
    let n = rows.len();
    let xmax = rows.iter().map(|r| r.1 * 100.0).fold(100.0, f64::max) * 1.12;
    let height = (110 + 26 * n as u32).max(260);
    let axes = Axes::new("utilization (% of line rate)", "port");
    render("utilization.png", "Per-port utilization".into(), caption, vec![axes.clone()], (WIDTH, height), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("Per-port utilization", (FONT_NAME, 22))
            .margin(14)
            .x_label_area_size(45)
            .y_label_area_size(130)
            // An integer range includes its end: 0..n - 1 gives the n segments 0, …, n - 1 (one spare
            // segment when n = 1, since plotters needs a non-empty range).
            .build_cartesian_2d(0.0..xmax, (0..(n as i32 - 1).max(1)).into_segmented())?;
        titled(&mut chart.configure_mesh(), &axes)
            .disable_y_mesh()
            .y_labels(n)
            // The busiest port on top: row i sits in segment n - 1 - i.
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(j) if (0..n as i32).contains(j) => rows[n - 1 - *j as usize].0.clone(),
                _ => String::new(),
            })
            .x_label_formatter(&tick)
            .label_style((FONT_NAME, 13))
            .draw()?;
        let seg = |i: usize| (n - 1 - i) as i32;
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let mut bar = Rectangle::new(
                [(0.0, SegmentValue::Exact(seg(i))), (r.1 * 100.0, SegmentValue::Exact(seg(i) + 1))],
                color(0).filled(),
            );
            bar.set_margin(3, 3, 0, 0);
            bar
        }))?;
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            Text::new(
                format!("{:.1}%", r.1 * 100.0),
                (r.1 * 100.0 + xmax * 0.01, SegmentValue::CenterOf(seg(i))),
                (FONT_NAME, 13).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center)),
            )
        }))?;
        Ok(())
    })
    .map(Some)
}

fn telemetry(samples: &[TelemetrySample]) -> Result<Option<Figure>> {
    type Pick = fn(&TelemetrySample) -> Option<f64>;
    let metrics: [(&str, &str, Pick); 5] = [
        ("Smoothed RTT", "srtt", |s| s.srtt_ns),
        ("Path latency (TCP-INT)", "path latency", |s| s.path_latency_ns),
        ("Bottleneck queue depth (TCP-INT)", "queue depth", |s| s.qdepth_bytes),
        ("Bottleneck utilization (TCP-INT)", "utilization", |s| s.util),
        ("Congestion window", "cwnd", |s| s.cwnd_bytes),
    ];
    let mut panels = Vec::new();
    let mut notes = Vec::new();
    for (title, y_desc, pick) in metrics {
        let mut flows: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
        for s in samples {
            if let Some(v) = pick(s) {
                flows.entry(s.flow).or_default().push((s.t_ns, v));
            }
        }
        let groups = flows.into_iter().map(|(f, p)| (format!("flow {f}"), p)).collect();
        let (series, note) = cap_series(groups, "flow");
        if series.is_empty() {
            continue;
        }
        let peak = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max);
        let unit = match y_desc {
            "srtt" | "path latency" => time_unit(peak),
            "utilization" => PERCENT,
            _ => byte_unit(peak),
        };
        if notes.is_empty() {
            notes.push(note);
        }
        panels.push((title, time_axes(&series, y_desc, unit), series, unit));
    }
    if panels.is_empty() {
        return Ok(None);
    }
    let caption =
        format!("TCP-INT telemetry as senders saw it, from telemetry.csv, one panel per signal. {}", notes.join(" "));
    let height = 300 * panels.len() as u32;
    let axes = panels.iter().map(|p| p.1.clone()).collect();
    render("telemetry.png", "Telemetry over time".into(), caption, axes, (WIDTH, height), |root| {
        let areas = root.split_evenly((panels.len(), 1));
        for (area, (title, axes, series, unit)) in areas.iter().zip(&panels) {
            time_panel(area, title, axes, series, *unit, &[])?;
        }
        Ok(())
    })
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legends_name_ports_as_scenarios_do() {
        let sample = |node: &str, port: &str, link: Option<&str>| QueueSample {
            t_ns: 0.0,
            node: node.into(),
            port: port.into(),
            bytes: 1.0,
            link: link.map(String::from),
        };
        let groups = queue_groups(&[
            sample("sw0", "2", Some("sw0->h2")),
            sample("sw1", "0", Some("sw1->sw0")),
            sample("sw0", "2", Some("sw0->h2")),
        ]);
        let names: Vec<&str> = groups.iter().map(|g| g.0.as_str()).collect();
        assert_eq!(names, ["sw0->h2", "sw1->sw0"]);
        assert_eq!(groups[0].1.len(), 2);
        // Files written before ports had names still get a legend.
        assert_eq!(queue_groups(&[sample("sw0", "2", None)])[0].0, "sw0 port 2");
        let u = PortUtilization {
            node: "h3".into(),
            port: "0".into(),
            tx_bytes: 1.0,
            utilization: 0.5,
            link: Some("h3->sw1".into()),
        };
        assert_eq!(u.label(), "h3->sw1");
    }

    #[test]
    fn decimate_keeps_peaks_and_bounds_length() {
        let pts: Vec<(f64, f64)> =
            (0..100_000).map(|i| (i as f64, if i == 54_321 { 1e6 } else { (i % 7) as f64 })).collect();
        let d = decimate(&pts, 2000);
        assert!(d.len() <= 2000, "{}", d.len());
        assert!(d.contains(&(54_321.0, 1e6)));
        assert_eq!(d.first(), pts.first());
        assert_eq!(d.last(), pts.last());
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn cap_series_folds_the_rest_as_their_maximum() {
        let groups: Vec<_> =
            (0..12).map(|i| (format!("p{i}"), vec![(0.0, i as f64), (1.0, 100.0 - i as f64 * 2.0)])).collect();
        let (series, note) = cap_series(groups, "port");
        assert_eq!(series.len(), MAX_SERIES + 1);
        // p0 peaks at 100, p11 at 78: the four lowest peaks (p8..p11) are folded.
        assert_eq!(series[0].label, "p0");
        let others = series.last().unwrap();
        assert_eq!(others.label, "max of 4 others");
        assert_eq!(others.points, vec![(0.0, 11.0), (1.0, 84.0)]);
        assert!(note.contains("other 4"), "{note}");
    }

    /// Each bucket's (size, p50, p99).
    type Points = Vec<(f64, f64, f64)>;

    /// The slowdown series of a run directory holding `files` (name, contents).
    fn slowdown_series(files: &[(&str, String)]) -> Vec<(String, Points)> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let (series, _) = slowdown_buckets(&Inputs::load(dir.path()).unwrap()).unwrap();
        series.into_iter().map(|(name, bs)| (name, bs.iter().map(|b| (b.x, b.p50, b.p99)).collect())).collect()
    }

    /// flows.csv with one finished flow per (class, size, slowdown).
    fn flows_csv(flows: &[(&str, u64, f64)]) -> String {
        let mut text = String::from(
            "id,src,dst,class,cc,size_bytes,start_ns,finish_ns,fct_ns,ideal_fct_ns,slowdown,retransmits,timeouts\n",
        );
        for (i, (class, size, slowdown)) in flows.iter().enumerate() {
            text += &format!("{i},0,1,{class},dctcp,{size},0,{f},{f},1000,{slowdown},0,0\n", f = 1000.0 * slowdown);
        }
        text
    }

    #[test]
    fn flows_of_one_size_are_one_point_at_that_size_and_one_class_is_drawn_once() {
        // An incast: 100 flows of 64 KB, slowdowns 1.01 … 2.00.
        let incast: Vec<(&str, u64, f64)> = (1..=100).map(|i| ("default", 64_000, 1.0 + i as f64 / 100.0)).collect();
        let series = slowdown_series(&[("flows.csv", flows_csv(&incast))]);
        assert_eq!(series, [("default".to_string(), vec![(64_000.0, 1.5, 1.99)])]);

        // Two classes: `all` leads, then each class; a class's buckets sit at its flows' median size.
        let mut two = vec![("a", 1_000, 1.0), ("a", 1_200, 3.0), ("a", 1_500, 2.0), ("b", 1_000_000, 4.0)];
        two.push(("b", 1_100_000, 5.0));
        let series = slowdown_series(&[("flows.csv", flows_csv(&two))]);
        let names: Vec<&str> = series.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(names, ["all", "a", "b"]);
        assert_eq!(series[1].1, [(1_200.0, 2.0, 3.0)]);
        assert_eq!(series[0].1.len(), 2, "{series:?}");

        // Without flows.csv, fct_buckets.csv's equal shares of one size merge into one point; its
        // `all` rows repeat the one class and are not drawn.
        let head = "class,bucket_lo_bytes,bucket_hi_bytes,count,fct_mean_ns,fct_p50_ns,fct_p99_ns,slowdown_mean,\
                    slowdown_p50,slowdown_p95,slowdown_p99,slowdown_p999\n";
        let mut buckets = String::from(head);
        for class in ["all", "default"] {
            buckets += &format!("{class},0,64000,30,1,1,1,1,1.2,1,1.5,1\n{class},64000,64000,10,1,1,1,1,2.0,1,4.0,1\n");
        }
        let series = slowdown_series(&[("fct_buckets.csv", buckets)]);
        assert_eq!(series, [("default".to_string(), vec![(64_000.0, 1.4, 4.0)])]);
    }

    #[test]
    fn size_ticks_are_round_and_never_crowd_the_axis() {
        let mapped = |a: &TickAxis| a.ticks.iter().map(|t| a.map(t, (0, 860))).collect::<Vec<_>>();
        // One size, 64 KB, half a decade either side.
        let one = TickAxis::log_sizes(64_000.0 / 10f64.sqrt()..64_000.0 * 10f64.sqrt());
        assert_eq!(one.labels, ["50 KB", "100 KB"]);
        // Sizes from 100 B to 10 MB: only powers of ten fit.
        let wide = TickAxis::log_sizes(50.0..20e6);
        assert_eq!(wide.labels, ["100 B", "1 KB", "10 KB", "100 KB", "1 MB", "10 MB"]);
        for axis in [&one, &wide, &TickAxis::log_sizes(900.0..40_000.0)] {
            let px = mapped(axis);
            assert!(px.windows(2).all(|w| w[1] - w[0] >= 60), "{:?} at {px:?}", axis.labels);
            assert!(px.iter().all(|&x| (10..=850).contains(&x)), "{:?} at {px:?}", axis.labels);
        }
    }

    #[test]
    fn units_scale_to_readable_ranges() {
        assert_eq!(time_unit(999.0).name, "ns");
        assert_eq!(time_unit(57_266.0).name, "µs");
        assert_eq!(time_unit(1_601_820.0).name, "ms");
        assert_eq!(byte_unit(99_970.0).name, "KB");
        assert_eq!(bytes_label(10_000.0), "10 KB");
        assert_eq!(
            (tick(&300.0), tick(&2.5), tick(&0.05), tick(&-0.0)),
            ("300".into(), "2.5".into(), "0.05".into(), "0".into())
        );
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.99), 4.0);
    }
}
