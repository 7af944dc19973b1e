//! The report's figures, drawn with plotters into RGB buffers and encoded as PNG.

use super::inputs::{CwndSample, FctBucket, Flow, Inputs, PortUtilization, QueueSample, RequestSample, TelemetrySample};
use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::BTreeMap;
use std::error::Error;

/// One drawn figure: its file name in the run directory, what it shows, and its PNG bytes.
pub struct Figure {
    pub file: &'static str,
    pub title: String,
    pub caption: String,
    pub png: Vec<u8>,
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
pub(super) const FONT_NAME: &str = "sans-serif";

pub(super) const PALETTE: [RGBColor; 10] = [
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

pub(super) fn register_font() -> Result<()> {
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
fn tick(v: &f64) -> String {
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
        Some((buckets, source)) if !buckets.is_empty() => figures.push(slowdown_vs_size(&buckets, &source)?),
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

/// Renders `draw` into a PNG of `w` × `h` pixels.
fn render(
    file: &'static str,
    title: String,
    caption: String,
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
    Ok(Figure { file, title, caption, png: encode_png(&rgb, w, h)? })
}

pub(super) fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>> {
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

/// Slowdown statistics of one class's flows in one size bucket.
struct Bucket {
    class: String,
    /// Where the bucket sits on the size axis, in bytes.
    x: f64,
    p50: f64,
    p99: f64,
}

/// The slowdown buckets to plot and where they came from: fct_buckets.csv when the run wrote it,
/// else quarter-decade size buckets over flows.csv. `None` when neither file exists.
fn slowdown_buckets(inputs: &Inputs) -> Option<(Vec<Bucket>, String)> {
    if let Some(rows) = &inputs.fct_buckets {
        let buckets = rows.iter().filter_map(|r: &FctBucket| {
            let (p50, p99) = (r.slowdown_p50?, r.slowdown_p99?);
            let lo = r.bucket_lo_bytes.max(0.0);
            let hi = r.bucket_hi_bytes.filter(|h| h.is_finite() && *h > lo);
            let x = match hi {
                Some(hi) if lo > 0.0 => (lo * hi).sqrt(),
                Some(hi) => hi / 2.0,
                None => lo * 2.0,
            };
            (r.count > 0 && x > 0.0 && p50.is_finite() && p99.is_finite()).then(|| Bucket {
                class: r.class.clone(),
                x,
                p50,
                p99: p99.max(p50),
            })
        });
        return Some((buckets.collect(), "size buckets from fct_buckets.csv".into()));
    }
    let flows = inputs.flows.as_ref()?;
    // (class, quarter-decade index) → slowdowns
    let mut groups: BTreeMap<(String, i32), Vec<f64>> = BTreeMap::new();
    for f in flows {
        if let (Some(size), Some(s)) = (f.size_bytes, f.slowdown) {
            if size >= 1.0 && size.is_finite() && s.is_finite() {
                groups.entry((f.class.clone(), (size.log10() * 4.0).floor() as i32)).or_default().push(s);
            }
        }
    }
    let buckets = groups
        .into_iter()
        .map(|((class, i), mut v)| {
            v.sort_by(f64::total_cmp);
            Bucket { class, x: 10f64.powf((i as f64 + 0.5) / 4.0), p50: percentile(&v, 0.5), p99: percentile(&v, 0.99) }
        })
        .collect();
    Some((buckets, "quarter-decade size buckets computed from flows.csv".into()))
}

fn by_class<T>(items: impl IntoIterator<Item = (String, T)>) -> Vec<(String, Vec<T>)> {
    let mut map: BTreeMap<String, Vec<T>> = BTreeMap::new();
    for (k, v) in items {
        map.entry(k).or_default().push(v);
    }
    map.into_iter().collect()
}

fn slowdown_vs_size(buckets: &[Bucket], source: &str) -> Result<Figure> {
    let classes = by_class(buckets.iter().map(|b| (b.class.clone(), b)));
    let xmin = buckets.iter().map(|b| b.x).fold(f64::INFINITY, f64::min);
    let xmax = buckets.iter().map(|b| b.x).fold(0.0, f64::max);
    let ymax = buckets.iter().map(|b| b.p99).fold(1.0, f64::max);
    let caption = format!(
        "Slowdown (FCT / ideal FCT) of finished flows by size, over {source}: the line is the median (p50), \
         the shaded band reaches the p99."
    );
    render("slowdown_vs_size.png", "Slowdown vs flow size".into(), caption, (WIDTH, HEIGHT), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("Slowdown vs flow size", (FONT_NAME, 22))
            .margin(14)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d((xmin / 1.6..xmax * 1.6).log_scale(), 0.0..(ymax * 1.08).max(1.5))?;
        chart
            .configure_mesh()
            .x_desc("flow size (bytes, log scale)")
            .y_desc("slowdown")
            .x_label_formatter(&|x| bytes_label(*x))
            .y_label_formatter(&tick)
            .label_style((FONT_NAME, 14))
            .axis_desc_style((FONT_NAME, 16))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()?;
        for (i, (class, bs)) in classes.iter().enumerate() {
            let c = color(i);
            let mut band: Vec<(f64, f64)> = bs.iter().map(|b| (b.x, b.p50)).collect();
            band.extend(bs.iter().rev().map(|b| (b.x, b.p99)));
            chart.draw_series(std::iter::once(Polygon::new(band, c.mix(0.2).filled())))?;
            chart.draw_series(
                bs.windows(2).map(|w| PathElement::new(vec![(w[0].x, w[0].p99), (w[1].x, w[1].p99)], c.mix(0.5))),
            )?;
            let p50: Vec<(f64, f64)> = bs.iter().map(|b| (b.x, b.p50)).collect();
            chart.draw_series(p50.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
            chart
                .draw_series(segments(&p50, c.stroke_width(2)))?
                .label(format!("{class} p50"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), u32>>())?
                .label(format!("{class} p50–p99"))
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], c.mix(0.3).filled()));
        }
        legend(&mut chart)?;
        Ok(())
    })
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
        requests.iter().filter(|r| r.latency_ns.is_finite() && r.latency_ns > 0.0).map(|r| (r.class.clone(), r.latency_ns)),
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
    render(text.file, text.title.into(), text.caption.into(), (WIDTH, HEIGHT), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(text.heading, (FONT_NAME, 22))
            .margin(14)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d((lo / u.div / 1.25..hi / u.div * 1.25).log_scale(), 0.0..1.0)?;
        chart
            .configure_mesh()
            .x_desc(format!("{} ({}, log scale)", text.x_desc, u.name))
            .y_desc(format!("fraction of {}", text.items))
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .label_style((FONT_NAME, 14))
            .axis_desc_style((FONT_NAME, 16))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()?;
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

/// Draws lines over time into `area`: x in nanoseconds, y scaled by `yu`.
/// `days` (ns) are shaded behind the lines: the circuit days of a reconfigurable network.
fn time_panel(area: &Area, title: &str, y_desc: &str, series: &[Series], yu: Unit, days: &[(f64, f64)]) -> DrawResult {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (t0, t1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
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
    chart
        .configure_mesh()
        .x_desc(format!("time ({})", xu.name))
        .y_desc(format!("{y_desc} ({})", yu.name))
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .label_style((FONT_NAME, 14))
        .axis_desc_style((FONT_NAME, 16))
        .light_line_style(RGBColor(238, 238, 238))
        .draw()?;
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
    render("queue_depth.png", "Queue depth over time".into(), caption, (WIDTH, HEIGHT), |root| {
        time_panel(root, "Queue depth", "queue depth", &series, yu, days)
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
    render("cwnd.png", "Congestion window over time".into(), caption, (WIDTH, HEIGHT), |root| {
        time_panel(root, "Congestion window", "cwnd", &series, yu, days)
    })
    .map(Some)
}

fn utilization(ports: &[PortUtilization]) -> Result<Option<Figure>> {
    let mut rows: Vec<(String, f64, f64)> = ports
        .iter()
        .filter(|p| p.utilization.is_finite())
        .map(|p| (p.label(), p.utilization, p.tx_bytes))
        .collect();
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
    render("utilization.png", "Per-port utilization".into(), caption, (WIDTH, height), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption("Per-port utilization", (FONT_NAME, 22))
            .margin(14)
            .x_label_area_size(45)
            .y_label_area_size(130)
            // An integer range includes its end: 0..n - 1 gives the n segments 0, …, n - 1 (one spare
            // segment when n = 1, since plotters needs a non-empty range).
            .build_cartesian_2d(0.0..xmax, (0..(n as i32 - 1).max(1)).into_segmented())?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            // The busiest port on top: row i sits in segment n - 1 - i.
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(j) if (0..n as i32).contains(j) => rows[n - 1 - *j as usize].0.clone(),
                _ => String::new(),
            })
            .x_desc("utilization (% of line rate)")
            .x_label_formatter(&tick)
            .label_style((FONT_NAME, 13))
            .axis_desc_style((FONT_NAME, 16))
            .light_line_style(RGBColor(238, 238, 238))
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
        panels.push((title, y_desc, series, unit));
    }
    if panels.is_empty() {
        return Ok(None);
    }
    let caption =
        format!("TCP-INT telemetry as senders saw it, from telemetry.csv, one panel per signal. {}", notes.join(" "));
    let height = 300 * panels.len() as u32;
    render("telemetry.png", "Telemetry over time".into(), caption, (WIDTH, height), |root| {
        let areas = root.split_evenly((panels.len(), 1));
        for (area, (title, y_desc, series, unit)) in areas.iter().zip(&panels) {
            time_panel(area, title, y_desc, series, *unit, &[])?;
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
        let groups = queue_groups(&[sample("sw0", "2", Some("sw0->h2")), sample("sw1", "0", Some("sw1->sw0")), sample("sw0", "2", Some("sw0->h2"))]);
        let names: Vec<&str> = groups.iter().map(|g| g.0.as_str()).collect();
        assert_eq!(names, ["sw0->h2", "sw1->sw0"]);
        assert_eq!(groups[0].1.len(), 2);
        // Files written before ports had names still get a legend.
        assert_eq!(queue_groups(&[sample("sw0", "2", None)])[0].0, "sw0 port 2");
        let u = PortUtilization { node: "h3".into(), port: "0".into(), tx_bytes: 1.0, utilization: 0.5, link: Some("h3->sw1".into()) };
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
