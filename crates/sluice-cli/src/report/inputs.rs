//! Reading a run's output directory: the CSV series and summary.json, each optional, each checked
//! against the output contract with errors that name the file, the line and the expected form.

use anyhow::{bail, Result};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::fs::File;
use std::io::{BufReader, ErrorKind};
use std::path::{Path, PathBuf};

/// One row of flows.csv. Columns the report does not use are still parsed, so a malformed row is
/// reported rather than plotted from half its fields.
#[derive(Debug, Deserialize)]
pub struct Flow {
    #[serde(rename = "id")]
    _id: u64,
    #[serde(rename = "src")]
    _src: String,
    #[serde(rename = "dst")]
    _dst: String,
    #[serde(rename = "start_ns")]
    _start_ns: f64,
    #[serde(rename = "finish_ns")]
    _finish_ns: Option<f64>,
    #[serde(rename = "ideal_fct_ns")]
    _ideal_fct_ns: Option<f64>,
    pub class: String,
    pub cc: String,
    /// Empty for flows without a size (long-lived bulk flows).
    pub size_bytes: Option<f64>,
    pub fct_ns: Option<f64>,
    pub slowdown: Option<f64>,
    pub retransmits: u64,
    pub timeouts: u64,
}

/// One row of requests.csv: one completed request of closed-loop traffic.
#[derive(Debug, Deserialize)]
pub struct RequestSample {
    pub class: String,
    #[serde(rename = "start_ns")]
    _start_ns: f64,
    #[serde(rename = "end_ns")]
    _end_ns: f64,
    pub latency_ns: f64,
}

/// One row of queues.csv.
#[derive(Debug, Deserialize)]
pub struct QueueSample {
    pub t_ns: f64,
    pub node: String,
    /// The port by the name scenarios use (`sw0->h2`); in files of older versions, the node's port
    /// number, with the name in `link`.
    pub port: String,
    pub bytes: f64,
    #[serde(default)]
    pub link: Option<String>,
}

impl QueueSample {
    /// The port as legends name it.
    pub fn label(&self) -> String {
        port_label(&self.node, &self.port, self.link.as_deref())
    }
}

/// A port's name for legends and tables: the scenario's `sw0->h2`, from `port` or, in files of
/// older versions, `link`.
pub fn port_label(node: &str, port: &str, link: Option<&str>) -> String {
    match link {
        Some(l) if !l.is_empty() => l.to_string(),
        _ if port.parse::<u32>().is_ok() => format!("{node} port {port}"),
        _ => port.to_string(),
    }
}

/// One row of cwnd.csv.
#[derive(Debug, Deserialize)]
pub struct CwndSample {
    pub t_ns: f64,
    pub flow: u64,
    pub cwnd_bytes: f64,
}

/// One row of fct_buckets.csv: FCT and slowdown statistics of one class's flows in one size bucket.
#[derive(Debug, Deserialize)]
pub struct FctBucket {
    pub class: String,
    pub bucket_lo_bytes: f64,
    pub bucket_hi_bytes: Option<f64>,
    pub count: u64,
    pub slowdown_p50: Option<f64>,
    pub slowdown_p99: Option<f64>,
    #[serde(rename = "fct_mean_ns")]
    _fct_mean_ns: Option<f64>,
    #[serde(rename = "fct_p50_ns")]
    _fct_p50_ns: Option<f64>,
    #[serde(rename = "fct_p99_ns")]
    _fct_p99_ns: Option<f64>,
    #[serde(rename = "slowdown_mean")]
    _slowdown_mean: Option<f64>,
    #[serde(rename = "slowdown_p95")]
    _slowdown_p95: Option<f64>,
    #[serde(rename = "slowdown_p999")]
    _slowdown_p999: Option<f64>,
}

/// One row of utilization.csv: bytes a port sent and its utilization as a fraction of line rate.
#[derive(Debug, Deserialize)]
pub struct PortUtilization {
    pub node: String,
    /// The port by name, or in files of older versions its number with the name in `link`.
    pub port: String,
    pub tx_bytes: f64,
    pub utilization: f64,
    #[serde(default)]
    pub link: Option<String>,
}

impl PortUtilization {
    /// The port as legends and tables name it.
    pub fn label(&self) -> String {
        port_label(&self.node, &self.port, self.link.as_deref())
    }
}

/// One row of telemetry.csv: what a sender learned from one TCP-INT echo.
#[derive(Debug, Deserialize)]
pub struct TelemetrySample {
    pub t_ns: f64,
    pub flow: u64,
    pub srtt_ns: Option<f64>,
    pub cwnd_bytes: Option<f64>,
    pub util: Option<f64>,
    pub qdepth_bytes: Option<f64>,
    pub path_latency_ns: Option<f64>,
    #[serde(rename = "hop_id")]
    _hop_id: Option<String>,
}

/// One row of circuit.csv: one circuit day of one rack pair.
#[derive(Debug, Deserialize)]
pub struct CircuitDay {
    pub start_ns: f64,
    pub end_ns: f64,
    #[serde(rename = "src_rack")]
    _src_rack: u32,
    #[serde(rename = "dst_rack")]
    _dst_rack: u32,
    #[serde(rename = "circuit_bytes")]
    _circuit_bytes: f64,
    #[serde(rename = "busy")]
    _busy: f64,
    /// 1 when the pair's VOQ carried data (its days count for utilization).
    pub counted: u8,
}

/// Everything found in a run's output directory; `None` for a file the run did not write.
pub struct Inputs {
    pub dir: PathBuf,
    pub flows: Option<Vec<Flow>>,
    pub summary: Option<serde_json::Value>,
    pub queues: Option<Vec<QueueSample>>,
    pub cwnd: Option<Vec<CwndSample>>,
    pub fct_buckets: Option<Vec<FctBucket>>,
    pub utilization: Option<Vec<PortUtilization>>,
    pub telemetry: Option<Vec<TelemetrySample>>,
    pub requests: Option<Vec<RequestSample>>,
    /// Circuit days, in a reconfigurable network's run (drawn under the time series, not a
    /// figure of its own).
    pub circuit: Option<Vec<CircuitDay>>,
}

/// The columns a CSV file must have, each with the form its values take.
struct Spec {
    file: &'static str,
    columns: &'static [(&'static str, &'static str)],
    /// The header must start with exactly these columns, in this order (flows.csv's contract).
    exact_prefix: bool,
}

const NUM_NS: &str = "a time in nanoseconds (a number)";
const OPT_NUM: &str = "a number, or empty";

const FLOWS: Spec = Spec {
    file: "flows.csv",
    columns: &[
        ("id", "a flow id (an integer)"),
        ("src", "a host"),
        ("dst", "a host"),
        ("class", "a class name"),
        ("cc", "an algorithm name"),
        ("size_bytes", "a size in bytes, or empty for a flow without one"),
        ("start_ns", NUM_NS),
        ("finish_ns", "a time in nanoseconds, or empty for an unfinished flow"),
        ("fct_ns", "a time in nanoseconds, or empty for an unfinished flow"),
        ("ideal_fct_ns", "a time in nanoseconds, or empty"),
        ("slowdown", "a number >= 1, or empty for an unfinished flow"),
        ("retransmits", "a count (a non-negative integer)"),
        ("timeouts", "a count (a non-negative integer)"),
    ],
    exact_prefix: true,
};

const QUEUES: Spec = Spec {
    file: "queues.csv",
    columns: &[
        ("t_ns", NUM_NS),
        ("node", "a node name"),
        ("port", "a port name like sw0->h2"),
        ("bytes", "a queue depth in bytes (a number)"),
    ],
    exact_prefix: false,
};

const CWND: Spec = Spec {
    file: "cwnd.csv",
    columns: &[("t_ns", NUM_NS), ("flow", "a flow id (an integer)"), ("cwnd_bytes", "a window in bytes (a number)")],
    exact_prefix: false,
};

const FCT_BUCKETS: Spec = Spec {
    file: "fct_buckets.csv",
    columns: &[
        ("class", "a class name"),
        ("bucket_lo_bytes", "a size in bytes (a number)"),
        ("bucket_hi_bytes", "a size in bytes, or empty for an open bucket"),
        ("count", "a count (a non-negative integer)"),
        ("fct_mean_ns", OPT_NUM),
        ("fct_p50_ns", OPT_NUM),
        ("fct_p99_ns", OPT_NUM),
        ("slowdown_mean", OPT_NUM),
        ("slowdown_p50", OPT_NUM),
        ("slowdown_p95", OPT_NUM),
        ("slowdown_p99", OPT_NUM),
        ("slowdown_p999", OPT_NUM),
    ],
    exact_prefix: false,
};

const UTILIZATION: Spec = Spec {
    file: "utilization.csv",
    columns: &[
        ("node", "a node name"),
        ("port", "a port name like sw0->h2"),
        ("tx_bytes", "a byte count (a number)"),
        ("utilization", "a fraction of line rate (a number, 1 = line rate)"),
    ],
    exact_prefix: false,
};

const TELEMETRY: Spec = Spec {
    file: "telemetry.csv",
    columns: &[
        ("t_ns", NUM_NS),
        ("flow", "a flow id (an integer)"),
        ("srtt_ns", OPT_NUM),
        ("cwnd_bytes", OPT_NUM),
        ("util", OPT_NUM),
        ("qdepth_bytes", OPT_NUM),
        ("path_latency_ns", OPT_NUM),
        ("hop_id", "a hop id, or empty"),
    ],
    exact_prefix: false,
};

const REQUESTS: Spec = Spec {
    file: "requests.csv",
    columns: &[
        ("class", "a class name"),
        ("start_ns", NUM_NS),
        ("end_ns", NUM_NS),
        ("latency_ns", "a latency in nanoseconds (a number)"),
    ],
    exact_prefix: false,
};

const CIRCUIT: Spec = Spec {
    file: "circuit.csv",
    columns: &[
        ("start_ns", NUM_NS),
        ("end_ns", NUM_NS),
        ("src_rack", "a rack number"),
        ("dst_rack", "a rack number"),
        ("circuit_bytes", "a byte count (a number)"),
        ("busy", "a fraction of the day (a number)"),
        ("counted", "0 or 1"),
    ],
    exact_prefix: false,
};

/// Every file `sluice report` knows how to read, in the order the report mentions them.
pub const KNOWN_FILES: [&str; 8] = [
    "summary.json",
    "flows.csv",
    "fct_buckets.csv",
    "requests.csv",
    "queues.csv",
    "cwnd.csv",
    "utilization.csv",
    "telemetry.csv",
];

impl Inputs {
    /// The circuit days of the rack pairs that carried data, as (start, end) in ns.
    pub fn data_days(&self) -> Vec<(f64, f64)> {
        self.circuit.iter().flatten().filter(|d| d.counted == 1).map(|d| (d.start_ns, d.end_ns)).collect()
    }

    /// Reads every known file in `dir`; absent files are `None`, malformed ones are errors.
    pub fn load(dir: &Path) -> Result<Inputs> {
        if !dir.is_dir() {
            bail!(
                "{}: no such directory; expected the output directory of `sluice run SCENARIO --out DIR`",
                dir.display()
            );
        }
        let inputs = Inputs {
            dir: dir.to_path_buf(),
            summary: read_summary(dir)?,
            flows: read_csv(dir, &FLOWS)?,
            fct_buckets: read_csv(dir, &FCT_BUCKETS)?,
            queues: read_csv(dir, &QUEUES)?,
            cwnd: read_csv(dir, &CWND)?,
            utilization: read_csv(dir, &UTILIZATION)?,
            telemetry: read_csv(dir, &TELEMETRY)?,
            requests: read_csv(dir, &REQUESTS)?,
            circuit: read_csv(dir, &CIRCUIT)?,
        };
        if inputs.present().iter().all(|(_, p)| !p) {
            bail!(
                "{}: no run outputs found; expected at least one of {} as written by `sluice run SCENARIO --out DIR`",
                dir.display(),
                KNOWN_FILES.join(", ")
            );
        }
        Ok(inputs)
    }

    /// Each known file with whether the run wrote it.
    pub fn present(&self) -> [(&'static str, bool); 8] {
        [
            ("summary.json", self.summary.is_some()),
            ("flows.csv", self.flows.is_some()),
            ("fct_buckets.csv", self.fct_buckets.is_some()),
            ("requests.csv", self.requests.is_some()),
            ("queues.csv", self.queues.is_some()),
            ("cwnd.csv", self.cwnd.is_some()),
            ("utilization.csv", self.utilization.is_some()),
            ("telemetry.csv", self.telemetry.is_some()),
        ]
    }
}

fn read_summary(dir: &Path) -> Result<Option<serde_json::Value>> {
    let path = dir.join("summary.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => bail!("{}: cannot read: {e}", path.display()),
    };
    parse_summary(&text, &path).map(Some)
}

/// Parses summary.json's text; `path` names it in errors.
fn parse_summary(text: &str, path: &Path) -> Result<serde_json::Value> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        anyhow::anyhow!(
            "{}: line {}, column {}: {e}; expected a JSON object as written by `sluice run`",
            path.display(),
            e.line(),
            e.column()
        )
    })?;
    if !value.is_object() {
        bail!(
            "{}: line 1: expected a JSON object as written by `sluice run`, found {}",
            path.display(),
            kind_of(&value)
        );
    }
    Ok(value)
}

fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn expected_header(spec: &Spec) -> String {
    spec.columns.iter().map(|(c, _)| *c).collect::<Vec<_>>().join(",")
}

/// Reads one CSV file of the contract into rows; `Ok(None)` when the run did not write it.
fn read_csv<T: DeserializeOwned>(dir: &Path, spec: &Spec) -> Result<Option<Vec<T>>> {
    let path = dir.join(spec.file);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => bail!("{}: cannot read: {e}", path.display()),
    };
    parse_csv(BufReader::new(file), &path, spec).map(Some)
}

/// Parses one CSV file of the contract; `path` names it in errors.
fn parse_csv<T: DeserializeOwned, R: std::io::Read>(input: R, path: &Path, spec: &Spec) -> Result<Vec<T>> {
    let shown = path.display();
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(input);
    let headers = reader.headers().map_err(|e| record_error(path, e))?.clone();
    let expected = expected_header(spec);
    if headers.is_empty() || headers.iter().all(str::is_empty) {
        bail!("{shown}: line 1: the file is empty; expected the header `{expected}`");
    }
    if spec.exact_prefix {
        let n = spec.columns.len();
        if headers.len() < n || !headers.iter().take(n).eq(spec.columns.iter().map(|(c, _)| *c)) {
            bail!(
                "{shown}: line 1: expected the header `{expected}` (extra columns may follow), found `{}`",
                headers.iter().collect::<Vec<_>>().join(",")
            );
        }
    } else {
        let missing: Vec<&str> =
            spec.columns.iter().map(|(c, _)| *c).filter(|c| !headers.iter().any(|h| h == *c)).collect();
        if !missing.is_empty() {
            bail!(
                "{shown}: line 1: missing column{} `{}`; expected the header `{expected}`, found `{}`",
                if missing.len() > 1 { "s" } else { "" },
                missing.join("`, `"),
                headers.iter().collect::<Vec<_>>().join(",")
            );
        }
    }
    let mut rows = Vec::new();
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(record_error(path, e)),
        }
        let line = record.position().map_or(0, |p| p.line());
        if let Some((name, form, value)) = improper_figure(spec, &headers, &record) {
            bail!("{shown}: line {line}: column `{name}`: expected {form}, found `{value}` (a figure is finite and not negative)");
        }
        match record.deserialize::<T>(Some(&headers)) {
            Ok(row) => rows.push(row),
            Err(e) => {
                let (field, why) = match e.kind() {
                    csv::ErrorKind::Deserialize { err, .. } => (err.field(), err.kind().to_string()),
                    other => (None, format!("{other:?}")),
                };
                let Some(i) = field.map(|f| f as usize) else {
                    bail!("{shown}: line {line}: {why}; expected the columns `{expected}`");
                };
                let name = headers.get(i).unwrap_or("?");
                let form = spec.columns.iter().find(|(c, _)| *c == name).map_or("a value", |(_, f)| *f);
                bail!(
                    "{shown}: line {line}: column `{name}`: expected {form}, found `{}` ({why})",
                    record.get(i).unwrap_or("")
                );
            }
        }
    }
    Ok(rows)
}

#[cfg_attr(not(test), allow(dead_code))] // called by the fuzz target, which includes this file
/// Reads `data` as the output file `name` (one of [`KNOWN_FILES`]) with the checks `sluice report`
/// applies; the fuzz target and its replay test call this.
pub fn check_file(name: &str, data: &[u8]) -> Result<()> {
    let path = Path::new(name);
    match name {
        "summary.json" => parse_summary(&String::from_utf8_lossy(data), path).map(drop),
        "flows.csv" => parse_csv::<Flow, _>(data, path, &FLOWS).map(drop),
        "fct_buckets.csv" => parse_csv::<FctBucket, _>(data, path, &FCT_BUCKETS).map(drop),
        "requests.csv" => parse_csv::<RequestSample, _>(data, path, &REQUESTS).map(drop),
        "queues.csv" => parse_csv::<QueueSample, _>(data, path, &QUEUES).map(drop),
        "cwnd.csv" => parse_csv::<CwndSample, _>(data, path, &CWND).map(drop),
        "utilization.csv" => parse_csv::<PortUtilization, _>(data, path, &UTILIZATION).map(drop),
        "telemetry.csv" => parse_csv::<TelemetrySample, _>(data, path, &TELEMETRY).map(drop),
        other => bail!("{other}: not an output file; expected one of {}", KNOWN_FILES.join(", ")),
    }
}

/// The first numeric column of `record` holding NaN, an infinity or a negative value: no output
/// of a run has one, and a plot of it would be empty or wrong.
fn improper_figure<'r>(spec: &Spec, headers: &csv::StringRecord, record: &'r csv::StringRecord) -> Option<(&'static str, &'static str, &'r str)> {
    let numeric = |form: &str| ["a number", "nanoseconds", "in bytes", "count"].iter().any(|w| form.contains(w));
    spec.columns.iter().filter(|(_, form)| numeric(form)).find_map(|&(name, form)| {
        let i = headers.iter().position(|h| h == name)?;
        let raw = record.get(i)?.trim();
        let v: f64 = raw.parse().ok()?;
        (!v.is_finite() || v < 0.0).then_some((name, form, raw))
    })
}

fn record_error(path: &Path, e: csv::Error) -> anyhow::Error {
    let shown = path.display();
    match e.kind() {
        csv::ErrorKind::UnequalLengths { pos, expected_len, len } => {
            let line = pos.as_ref().map_or(0, |p| p.line());
            anyhow::anyhow!(
                "{shown}: line {line}: expected {expected_len} comma-separated fields like the header, found {len}"
            )
        }
        csv::ErrorKind::Utf8 { pos, .. } => {
            let line = pos.as_ref().map_or(0, |p| p.line());
            anyhow::anyhow!("{shown}: line {line}: expected UTF-8 text")
        }
        _ => anyhow::anyhow!("{shown}: {e}"),
    }
}

#[cfg(test)]
mod fuzz_replay {
    use super::*;

    /// Every file of fuzz/corpus/report and fuzz/artifacts/report (first byte: which output file)
    /// goes through the readers without panicking; the seeds, cut from a real run, are accepted.
    #[test]
    fn report_corpus_and_crash_files_replay() {
        let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
        let mut seeds = 0;
        for (dir, seeds_must_pass) in [("corpus/report", true), ("artifacts/report", false)] {
            let Ok(entries) = std::fs::read_dir(fuzz.join(dir)) else { continue };
            for file in entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()) {
                let data = std::fs::read(&file).unwrap();
                let Some((&pick, body)) = data.split_first() else { continue };
                let name = KNOWN_FILES[pick as usize % KNOWN_FILES.len()];
                let outcome = std::panic::catch_unwind(|| check_file(name, body).map_err(|e| e.to_string()));
                let result = outcome.unwrap_or_else(|_| panic!("the {name} reader panicked on {}", file.display()));
                if seeds_must_pass {
                    assert!(result.is_ok(), "seed {} rejected: {result:?}", file.display());
                    seeds += 1;
                }
            }
        }
        assert!(seeds >= 5, "only {seeds} report seeds");
    }
}
