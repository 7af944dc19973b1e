//! report.html: the summary as tables, a per-class flow table, the figures embedded as base64 PNGs,
//! and what the run did not record. One file with no external references.

use super::inputs::{Flow, Inputs};
use super::plots::{time_unit, Axes, Figure};
use base64::Engine;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The pages' style sheet (run and sweep reports). Nothing may be wider than the page: a table
/// too wide for it scrolls inside its own box, and images shrink to fit.
pub const STYLE: &str = "
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2em auto; max-width: 1040px;
       padding: 0 1em; color: #222; overflow-wrap: anywhere; }
h1 { margin-bottom: 0.2em; }
.meta { color: #666; margin-top: 0; }
.wide { max-width: 100%; overflow-x: auto; margin: 0.6em 0 1.2em; }
table { border-collapse: collapse; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 0.3em 0.7em; text-align: right; overflow-wrap: normal; }
td { white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th[colspan] { text-align: center; }
thead th { background: #f3f5f8; vertical-align: bottom; }
td.text { text-align: left; }
th .desc { font-weight: normal; color: #555; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #444; font-size: 0.92em; }
code { background: #f3f3f3; padding: 0 0.25em; }
.missing li { color: #555; }
";

/// Opens a table in a box of the page's width that scrolls sideways when the table is wider.
pub const TABLE_OPEN: &str = "<div class=\"wide\"><table>";
/// Closes what [`TABLE_OPEN`] opened.
pub const TABLE_CLOSE: &str = "</table></div>\n";

/// A column heading that may wrap after `_` and `.`: summary keys such as
/// `fallback_path_legacy_int` are long words, and a table of them would otherwise be wider than
/// the page.
pub fn heading(key: &str) -> String {
    esc(key).replace('_', "_<wbr>").replace('.', ".<wbr>")
}

/// What a top-level summary key means, where its name alone does not say (`sim_time_ns` is
/// simulated time, not the time the run took).
fn describe(key: &str) -> Option<&'static str> {
    match key {
        "sim_time_ns" => Some("simulated time"),
        "wall_s" => Some("wall-clock time"),
        "events_per_s" => Some("events per wall-clock second"),
        _ => None,
    }
}

/// Where each optional series comes from, for the "not recorded" list.
fn how_to_record(file: &str) -> &'static str {
    match file {
        "summary.json" | "flows.csv" => "written by every `sluice run`; this directory may be incomplete",
        "fct_buckets.csv" => "slowdown by size was computed from flows.csv instead",
        "requests.csv" => "written when the run has closed-loop traffic (`rpc` or `incast` rounds)",
        "queues.csv" => "add `[output.queues]` to the scenario to sample queue depths",
        "cwnd.csv" => "add `[output.cwnd]` to the scenario to sample congestion windows",
        "utilization.csv" => "per-port utilization was not written by this run",
        "telemetry.csv" => "TCP-INT telemetry was not recorded by this run",
        _ => "",
    }
}

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Four significant digits, no exponent for ordinary magnitudes.
pub fn sig4(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == 0.0 {
        return "0".into();
    }
    let a = x.abs();
    if !(1e-3..1e15).contains(&a) {
        return format!("{x:.3e}");
    }
    let decimals = (3 - a.log10().floor() as i32).max(0) as usize;
    format!("{x:.decimals$}")
}

/// `x` in the largest unit it reaches; the last step (divisor 1) also takes zero and fractions.
fn scaled(x: f64, steps: &[(f64, &str)]) -> String {
    let (div, name) = steps.iter().find(|(d, _)| x.abs() >= *d).copied().unwrap_or(*steps.last().expect("non-empty"));
    format!("{} {name}", sig4(x / div))
}

/// Renders a number whose key says its unit: `*_ns` times, `*_bps` rates, `*_bytes` sizes,
/// `*per_s` frequencies, `*_s` seconds. `unit_key` is the leaf key or, for a statistic like
/// `fct_ns.p99`, the key of the object holding it.
pub fn format_number(unit_key: &str, n: &serde_json::Number) -> String {
    let scaled_unit = ["_ns", "_bps", "_bytes"].iter().any(|s| unit_key.ends_with(s));
    if (n.is_i64() || n.is_u64()) && !scaled_unit {
        return n.to_string();
    }
    let x = n.as_f64().unwrap_or(f64::NAN);
    if unit_key.ends_with("_ns") {
        let u = time_unit(x);
        format!("{} {}", sig4(x / u.div), u.name)
    } else if unit_key.ends_with("_bps") {
        scaled(x, &[(1e12, "Tb/s"), (1e9, "Gb/s"), (1e6, "Mb/s"), (1e3, "kb/s"), (1.0, "b/s")])
    } else if unit_key.ends_with("_bytes") {
        scaled(x, &[(1e9, "GB"), (1e6, "MB"), (1e3, "KB"), (1.0, "B")])
    } else if unit_key.ends_with("per_s") {
        scaled(x, &[(1e9, "G/s"), (1e6, "M/s"), (1e3, "k/s"), (1.0, "/s")])
    } else if unit_key.ends_with("_s") {
        format!("{} s", sig4(x))
    } else {
        sig4(x)
    }
}

/// A table cell for a JSON value; numbers carry their exact value in a tooltip.
fn cell(unit_key: &str, v: &Value) -> String {
    match v {
        Value::Number(n) => {
            let shown = format_number(unit_key, n);
            let raw = n.to_string();
            if shown == raw {
                format!("<td>{}</td>", esc(&shown))
            } else {
                format!("<td title=\"{}\">{}</td>", esc(&raw), esc(&shown))
            }
        }
        Value::String(s) => format!("<td class=\"text\">{}</td>", esc(s)),
        Value::Bool(b) => format!("<td class=\"text\">{b}</td>"),
        Value::Null => "<td>—</td>".into(),
        other => format!("<td class=\"text\"><code>{}</code></td>", esc(&other.to_string())),
    }
}

/// Keys whose values are counts, shown as plain integers even inside a table of times or sizes.
fn is_count(k: &str) -> bool {
    matches!(k, "count" | "n" | "samples" | "total" | "completed") || k.ends_with("_count")
}

fn is_flat(v: &Value) -> bool {
    v.as_object().is_some_and(|o| o.values().all(|x| !x.is_object()))
}

/// Renders a JSON object generically, so keys added to summary.json later appear without changes
/// here: its scalar entries form one key/value table; sub-objects of scalars with the same keys
/// (e.g. `fct_ns` and `slowdown`, each with mean/p50/…/p999) form one matrix; deeper objects
/// (e.g. `classes`) get a heading and are rendered the same way, one level down.
fn render_object(out: &mut String, obj: &Map<String, Value>, depth: usize) {
    let scalars: Vec<(&String, &Value)> = obj.iter().filter(|(_, v)| !v.is_object()).collect();
    if !scalars.is_empty() {
        out.push_str(TABLE_OPEN);
        out.push_str("<tbody>\n");
        for (k, v) in scalars {
            let name = match describe(k).filter(|_| depth == 0) {
                Some(d) => format!("{d} <span class=\"desc\">(<code>{}</code>)</span>", esc(k)),
                None => esc(k),
            };
            let _ = writeln!(out, "<tr><th>{name}</th>{}</tr>", cell(k, v));
        }
        out.push_str("</tbody>");
        out.push_str(TABLE_CLOSE);
    }
    // Matrices of flat sub-objects, grouped by their key list, in order of first appearance.
    type Rows<'a> = Vec<(&'a String, &'a Map<String, Value>)>;
    let mut groups: Vec<(Vec<&String>, Rows)> = Vec::new();
    for (k, v) in obj.iter().filter(|(_, v)| is_flat(v)) {
        let o = v.as_object().expect("flat objects are objects");
        let keys: Vec<&String> = o.keys().collect();
        match groups.iter_mut().find(|(ks, _)| *ks == keys) {
            Some((_, rows)) => rows.push((k, o)),
            None => groups.push((keys, vec![(k, o)])),
        }
    }
    for (keys, rows) in groups {
        if keys.is_empty() {
            continue;
        }
        out.push_str(TABLE_OPEN);
        out.push_str("<thead><tr><th></th>");
        for k in &keys {
            let _ = write!(out, "<th>{}</th>", heading(k));
        }
        out.push_str("</tr></thead><tbody>\n");
        for (name, o) in rows {
            let _ = write!(out, "<tr><th>{}</th>", esc(name));
            for k in &keys {
                // A column with its own unit, or a statistic's sample count (a count whatever its
                // row measures), keeps its key; others take the row's unit.
                let own_unit = ["_ns", "_bps", "_bytes", "_s"].iter().any(|s| k.ends_with(s));
                let unit_key = if own_unit || is_count(k) { k.as_str() } else { name.as_str() };
                out.push_str(&cell(unit_key, &o[k.as_str()]));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>");
        out.push_str(TABLE_CLOSE);
    }
    let h = (depth + 3).min(6);
    for (k, v) in obj.iter().filter(|(_, v)| v.is_object() && !is_flat(v)) {
        let _ = writeln!(out, "<h{h}>{}</h{h}>", esc(k));
        render_object(out, v.as_object().expect("checked"), depth + 1);
    }
}

fn flows_table(out: &mut String, flows: &[Flow]) {
    #[derive(Default)]
    struct Row {
        ccs: Vec<String>,
        total: usize,
        finished: usize,
        sized_bytes: f64,
        retransmits: u64,
        timeouts: u64,
    }
    let mut rows: BTreeMap<&str, Row> = BTreeMap::new();
    for f in flows {
        let r = rows.entry(&f.class).or_default();
        if !r.ccs.contains(&f.cc) {
            r.ccs.push(f.cc.clone());
        }
        r.total += 1;
        r.finished += usize::from(f.fct_ns.is_some());
        r.sized_bytes += f.size_bytes.unwrap_or(0.0);
        r.retransmits += f.retransmits;
        r.timeouts += f.timeouts;
    }
    out.push_str(TABLE_OPEN);
    out.push_str(
        "<thead><tr><th>class</th><th>cc</th><th>flows</th><th>finished</th><th>unfinished</th>\
         <th>bytes (sized flows)</th><th>retransmits</th><th>timeouts</th></tr></thead><tbody>\n",
    );
    for (class, r) in rows {
        let bytes =
            serde_json::Number::from_f64(r.sized_bytes).map_or("—".into(), |n| format_number("size_bytes", &n));
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td class=\"text\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(class),
            esc(&r.ccs.join(", ")),
            r.total,
            r.finished,
            r.total - r.finished,
            esc(&bytes),
            r.retransmits,
            r.timeouts
        );
    }
    out.push_str("</tbody>");
    out.push_str(TABLE_CLOSE);
}

/// A figure's `<img>`, embedded as a `data:` URL. Its alternative text is `title` (when not
/// empty) and what each panel plots against what; `data-x-axis` / `data-y-axis` carry the axis
/// titles as drawn (one per panel, joined by ` | `), so a reader without the image, or a test in a
/// browser, can check them.
pub fn img(title: &str, axes: &[Axes], png: &[u8]) -> String {
    let against: Vec<String> = axes.iter().map(|a| format!("{} against {}", a.y, a.x)).collect();
    let alt = if title.is_empty() { against.join("; ") } else { format!("{title}: {}", against.join("; ")) };
    let join = |f: fn(&Axes) -> &str| axes.iter().map(f).collect::<Vec<_>>().join(" | ");
    format!(
        "<img alt=\"{}\" data-x-axis=\"{}\" data-y-axis=\"{}\" width=\"{}\" height=\"{}\" \
         src=\"data:image/png;base64,{}\">",
        esc(&alt),
        esc(&join(|a| &a.x)),
        esc(&join(|a| &a.y)),
        png_size(png).0,
        png_size(png).1,
        base64::engine::general_purpose::STANDARD.encode(png)
    )
}

/// Width and height of a PNG from its header (the page reserves the image's space before it
/// decodes).
fn png_size(png: &[u8]) -> (u32, u32) {
    let be = |at: usize| png.get(at..at + 4).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    (be(16), be(20))
}

/// The whole page.
pub fn render(inputs: &Inputs, figures: &[Figure], notes: &[String]) -> String {
    let dir = inputs.dir.display().to_string();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>sluice report: {}</title>\n\
         <style>{STYLE}</style>\n</head>\n<body>\n<h1>sluice report</h1>\n<p class=\"meta\">Run directory <code>{}</code> \
         · sluice {}</p>\n",
        esc(&dir),
        esc(&dir),
        env!("CARGO_PKG_VERSION")
    );
    out.push_str("<h2>Summary</h2>\n");
    match inputs.summary.as_ref().and_then(Value::as_object) {
        Some(obj) => render_object(&mut out, obj, 0),
        None => out.push_str("<p>summary.json was not recorded.</p>\n"),
    }
    if let Some(flows) = &inputs.flows {
        out.push_str("<h2>Flows</h2>\n");
        flows_table(&mut out, flows);
    }
    out.push_str("<h2>Plots</h2>\n");
    if figures.is_empty() {
        out.push_str("<p>Nothing in this run could be plotted.</p>\n");
    }
    for f in figures {
        let _ = write!(
            out,
            "<figure id=\"{}\">\n{}\n<figcaption><b>{}.</b> {} (<code>{}</code>)</figcaption>\n</figure>\n",
            esc(f.file.trim_end_matches(".png")),
            img(&f.title, &f.axes, &f.png),
            esc(&f.title),
            esc(&f.caption),
            esc(f.file)
        );
    }
    let missing: Vec<&str> = inputs.present().iter().filter(|(_, p)| !p).map(|(f, _)| *f).collect();
    if !missing.is_empty() || !notes.is_empty() {
        out.push_str("<h2>Not recorded</h2>\n<ul class=\"missing\">\n");
        for f in missing {
            let _ = writeln!(out, "<li><code>{f}</code> was not recorded: {}.</li>", esc(how_to_record(f)));
        }
        for n in notes {
            let _ = writeln!(out, "<li>{}</li>", esc(n));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(x: f64) -> serde_json::Number {
        serde_json::Number::from_f64(x).unwrap()
    }

    #[test]
    fn numbers_take_the_unit_their_key_names() {
        assert_eq!(format_number("fct_ns", &num(1_601_820.44)), "1.602 ms");
        assert_eq!(format_number("fct_ns", &num(57_266.04)), "57.27 µs");
        assert_eq!(format_number("sim_time_ns", &num(812.0)), "812.0 ns");
        assert_eq!(format_number("goodput_bps", &num(216_368_418_167.8)), "216.4 Gb/s");
        assert_eq!(format_number("events_per_s", &num(9_676_559.6)), "9.677 M/s");
        assert_eq!(format_number("wall_s", &num(0.100536)), "0.1005 s");
        assert_eq!(format_number("slowdown", &num(6.253618)), "6.254");
        assert_eq!(format_number("events", &serde_json::Number::from(972_846u64)), "972846");
    }

    #[test]
    fn summary_objects_become_tables_generically() {
        let v: Value = serde_json::from_str(
            r#"{"seed": 7, "fct_ns": {"mean": 2000, "p99": 3000}, "slowdown": {"mean": 1.5, "p99": 2.5},
                "classes": {"q": {"cc": "dctcp", "new_key": {"a": 1}}}}"#,
        )
        .unwrap();
        let mut out = String::new();
        render_object(&mut out, v.as_object().unwrap(), 0);
        assert_eq!(out.matches("<table>").count(), 4, "{out}");
        assert!(out.contains("<tr><th>seed</th><td>7</td></tr>"), "{out}");
        assert!(out.contains("<td title=\"3000\">3.000 µs</td>"), "{out}");
        assert!(
            out.contains("<tr><th>slowdown</th><td title=\"1.5\">1.500</td><td title=\"2.5\">2.500</td></tr>"),
            "{out}"
        );
        assert!(out.contains("<h3>classes</h3>") && out.contains("<h4>q</h4>"), "{out}");
        assert!(out.contains("<th>new_key</th>"), "{out}");
    }

    #[test]
    fn counts_show_as_counts_zero_as_zero_and_empty_statistics_as_a_dash() {
        let v: Value = serde_json::from_str(
            r#"{"qdepth_bytes": {"count": 1251, "mean": 2000000, "p99": 0},
                "fct_ns": {"count": 0, "mean": null, "p99": null}, "goodput_bps": 0.0}"#,
        )
        .unwrap();
        let mut out = String::new();
        render_object(&mut out, v.as_object().unwrap(), 0);
        assert!(out.contains("<tr><th>qdepth_bytes</th><td>1251</td><td title=\"2000000\">2.000 MB</td><td title=\"0\">0 B</td></tr>"), "{out}");
        assert!(out.contains("<tr><th>fct_ns</th><td>0</td><td>—</td><td>—</td></tr>"), "{out}");
        assert!(out.contains("<tr><th>goodput_bps</th><td title=\"0.0\">0 b/s</td></tr>"), "{out}");
        assert!(!out.contains("NaN"), "{out}");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a href='x'>&\""), "&lt;a href=&#39;x&#39;&gt;&amp;&quot;");
    }
}
