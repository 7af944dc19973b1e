//! `sluice sweep`: run a scenario over the cartesian product of override values and tabulate
//! chosen summary.json figures per cell.

use anyhow::{anyhow, bail, Context, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The arguments of `sluice sweep`.
#[derive(clap::Args)]
pub struct SweepArgs {
    /// The scenario file (TOML).
    scenario: PathBuf,
    /// A key and the values it takes, e.g. --grid classes.query.cc=reno,cubic,bbr,dctcp
    /// (repeatable; every combination of the values runs; the first two keys are a 2-key
    /// table's rows and columns).
    #[arg(long = "grid", value_name = "KEY=V1,V2,...", required = true)]
    grid: Vec<String>,
    /// A summary.json figure to tabulate, as its key path with an optional display unit:
    /// classes.backup.goodput_bps:MB/s, classes.query.request_latency_ns.p95:ms (repeatable).
    /// Units: MB/s, Mb/s, Gb/s for *_bps figures; s, ms, us for *_ns figures.
    #[arg(long = "metric", value_name = "PATH[:UNIT]", required = true)]
    metrics: Vec<String>,
    /// Output directory: one subdirectory per cell with the usual outputs, plus table.md and
    /// table.csv.
    #[arg(long, default_value = "out/sweep")]
    out: PathBuf,
    /// Override a scenario key in every cell (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Override sim.seed in every cell.
    #[arg(long)]
    seed: Option<u64>,
    /// Cells run at once (default: the available cores).
    #[arg(long, short)]
    jobs: Option<usize>,
    /// No per-cell progress lines on stderr.
    #[arg(long, short)]
    quiet: bool,
    /// Seeds to run every cell with: a range 1..5 (inclusive) or a list 1,2,7. With seeds the
    /// sweep runs on the sluice Python package: one resumable result file per cell and seed in
    /// --out, a mean and 95% confidence interval per cell, Parquet tables.
    #[arg(long, value_name = "A..B|A,B,...")]
    seeds: Option<String>,
    /// Run the tasks on this Dask scheduler (tcp://host:port), through the sluice Python package.
    #[arg(long, value_name = "ADDRESS")]
    dask: Option<String>,
}

/// Hands a seeded or Dask sweep to the Python package (`python3 -m sluice sweep`), which owns the
/// resumable store and the cluster client.
fn hand_to_python(args: &SweepArgs) -> Result<()> {
    let python = std::env::var("SLUICE_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = std::process::Command::new(&python).args(["-c", "import sluice"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        bail!(
            "--seeds and --dask run on the sluice Python package, which `{python}` cannot import; install it \
             with `pip install '.[dask]'` from the repository (or set SLUICE_PYTHON to a Python that has it)"
        );
    }
    let mut cmd = std::process::Command::new(&python);
    cmd.args(["-m", "sluice", "sweep"]).arg(&args.scenario).arg("--out").arg(&args.out);
    for g in &args.grid {
        cmd.arg(format!("--grid={g}"));
    }
    for m in &args.metrics {
        cmd.arg(format!("--metric={m}"));
    }
    for o in &args.overrides {
        cmd.arg(format!("--set={o}"));
    }
    let seeds = match (&args.seeds, args.seed) {
        (Some(s), _) => s.clone(),
        (None, Some(s)) => s.to_string(),
        (None, None) => "1".into(),
    };
    cmd.arg(format!("--seeds={seeds}"));
    if let Some(j) = args.jobs {
        cmd.arg(format!("--jobs={j}"));
    }
    if let Some(d) = &args.dask {
        cmd.arg(format!("--dask={d}"));
    }
    if args.quiet {
        cmd.arg("--quiet");
    }
    let status = cmd.status().with_context(|| format!("cannot start {python}"))?;
    if !status.success() {
        // The Python side has printed its error.
        std::process::exit(status.code().unwrap_or(2));
    }
    Ok(())
}

/// One swept key and its values, in the order given.
#[derive(Debug, Clone, PartialEq)]
struct Axis {
    key: String,
    values: Vec<String>,
}

/// What a display unit converts from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Dimension {
    BitsPerSecond,
    Nanoseconds,
}

/// A display unit: the figure is divided by `divisor`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Unit {
    name: &'static str,
    from: Dimension,
    divisor: f64,
}

const UNITS: &[Unit] = &[
    Unit { name: "MB/s", from: Dimension::BitsPerSecond, divisor: 8e6 },
    Unit { name: "Mb/s", from: Dimension::BitsPerSecond, divisor: 1e6 },
    Unit { name: "Gb/s", from: Dimension::BitsPerSecond, divisor: 1e9 },
    Unit { name: "s", from: Dimension::Nanoseconds, divisor: 1e9 },
    Unit { name: "ms", from: Dimension::Nanoseconds, divisor: 1e6 },
    Unit { name: "us", from: Dimension::Nanoseconds, divisor: 1e3 },
];

/// One tabulated figure.
#[derive(Debug, Clone, PartialEq)]
struct Metric {
    /// As given on the command line.
    spec: String,
    path: Vec<String>,
    unit: Option<Unit>,
}

impl Metric {
    /// The table heading: the path and its unit.
    fn heading(&self) -> String {
        match self.unit {
            Some(u) => format!("{} ({})", self.path.join("."), u.name),
            None => self.path.join("."),
        }
    }
}

/// Each cell's figures, or why it failed; None until it has run.
type Results = Vec<Option<Result<Vec<Option<f64>>>>>;

/// One combination of axis values.
struct Cell {
    /// Index into each axis's values.
    at: Vec<usize>,
    /// Its subdirectory name.
    name: String,
    overrides: Vec<String>,
}

const GRID_FORM: &str = "expected KEY=V1,V2,..., like classes.query.cc=reno,dctcp";

/// Splits a `--grid` argument into its key and values. Commas inside brackets or braces belong
/// to a value (`workloads.0.senders=[1,2],[3,4]` has two values).
fn parse_axis(arg: &str) -> Result<Axis> {
    let Some((key, list)) = arg.split_once('=') else { bail!("--grid {arg}: no `=`; {GRID_FORM}") };
    let key = key.trim();
    if key.is_empty() || key.split('.').any(str::is_empty) {
        bail!("--grid {arg}: `{key}` is not a key path; {GRID_FORM}");
    }
    let mut values = Vec::new();
    let (mut depth, mut current) = (0i32, String::new());
    for c in list.chars() {
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                values.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    values.push(current);
    let values: Vec<String> = values.into_iter().map(|v| v.trim().to_string()).collect();
    if values.iter().any(String::is_empty) {
        bail!("--grid {arg}: an empty value in `{list}`; {GRID_FORM}");
    }
    for (i, v) in values.iter().enumerate() {
        if values[..i].contains(v) {
            bail!("--grid {arg}: `{v}` is listed twice");
        }
    }
    Ok(Axis { key: key.to_string(), values })
}

/// Splits a `--metric` argument into its summary.json path and display unit.
fn parse_metric(arg: &str) -> Result<Metric> {
    let form = "expected PATH[:UNIT], like classes.backup.goodput_bps:MB/s or classes.query.request_latency_ns.mean:ms";
    let (path, unit) = match arg.split_once(':') {
        Some((p, u)) => (p.trim(), Some(u.trim())),
        None => (arg.trim(), None),
    };
    if path.is_empty() || path.split('.').any(str::is_empty) {
        bail!("--metric {arg}: `{path}` is not a summary.json key path; {form}");
    }
    let path: Vec<String> = path.split('.').map(str::to_string).collect();
    let unit = match unit {
        None => None,
        Some(name) => {
            let Some(u) = UNITS.iter().find(|u| u.name == name) else {
                let names: Vec<&str> = UNITS.iter().map(|u| u.name).collect();
                bail!("--metric {arg}: unknown unit `{name}`; expected one of {}", names.join(", "));
            };
            let dimension = if path.iter().any(|s| s.ends_with("_bps")) {
                Some(Dimension::BitsPerSecond)
            } else if path.iter().any(|s| s.ends_with("_ns")) {
                Some(Dimension::Nanoseconds)
            } else {
                None
            };
            if dimension != Some(u.from) {
                let what = match u.from {
                    Dimension::BitsPerSecond => "bits per second (a *_bps key)",
                    Dimension::Nanoseconds => "nanoseconds (a *_ns key)",
                };
                bail!("--metric {arg}: unit {name} converts {what}, and `{}` is not one", path.join("."));
            }
            Some(*u)
        }
    };
    Ok(Metric { spec: arg.to_string(), path, unit })
}

/// A value as a directory-name fragment.
fn sanitize(v: &str) -> String {
    v.chars().map(|c| if c.is_ascii_alphanumeric() || "._-+".contains(c) { c } else { '_' }).collect()
}

/// Every combination of the axes' values, the first axis outermost.
fn cells(axes: &[Axis]) -> Vec<Cell> {
    let total: usize = axes.iter().map(|a| a.values.len()).product();
    (0..total)
        .map(|mut n| {
            let mut at = vec![0; axes.len()];
            for (i, a) in axes.iter().enumerate().rev() {
                at[i] = n % a.values.len();
                n /= a.values.len();
            }
            let pairs = axes.iter().zip(&at).map(|(a, &i)| (a.key.as_str(), a.values[i].as_str()));
            let name = pairs.clone().map(|(k, v)| format!("{k}={}", sanitize(v))).collect::<Vec<_>>().join("__");
            let overrides = pairs.map(|(k, v)| format!("{k}={v}")).collect();
            Cell { at, name, overrides }
        })
        .collect()
}

/// Reads one figure from a cell's summary.json: a number, or None when it is null (e.g. a
/// latency with no completed request).
fn lookup(summary: &serde_json::Value, m: &Metric, cell: &str) -> Result<Option<f64>> {
    let mut v = summary;
    for (i, seg) in m.path.iter().enumerate() {
        let next = match v {
            serde_json::Value::Object(map) => map.get(seg),
            serde_json::Value::Array(items) => seg.parse::<usize>().ok().and_then(|n| items.get(n)),
            _ => None,
        };
        v = next.ok_or_else(|| {
            let at = if i == 0 { "the top level".to_string() } else { format!("`{}`", m.path[..i].join(".")) };
            let keys = match v {
                serde_json::Value::Object(map) => {
                    format!("keys there: {}", map.keys().cloned().collect::<Vec<_>>().join(", "))
                }
                serde_json::Value::Array(items) => format!("an array of {}", items.len()),
                _ => "not an object".to_string(),
            };
            anyhow!("--metric {}: summary.json of cell {cell} has no `{seg}` at {at} ({keys})", m.spec)
        })?;
    }
    match v {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::Number(n) => {
            Ok(Some(n.as_f64().expect("a JSON number is an f64") / m.unit.map_or(1.0, |u| u.divisor)))
        }
        other => bail!(
            "--metric {}: `{}` in summary.json of cell {cell} is not a number but {other}",
            m.spec,
            m.path.join(".")
        ),
    }
}

/// A figure for the markdown table: three significant digits, no exponent.
pub(crate) fn display(v: Option<f64>) -> String {
    match v {
        None => "n/a".into(),
        Some(x) if x == 0.0 || !x.is_finite() => format!("{x}"),
        Some(x) => {
            let decimals = (2 - x.abs().log10().floor() as i32).max(0) as usize;
            format!("{x:.decimals$}")
        }
    }
}

/// The markdown report: a rows x columns table per metric for a 2-key grid, otherwise one table
/// with a row per cell.
fn markdown(
    scenario: &str,
    fixed: &[String],
    axes: &[Axis],
    metrics: &[Metric],
    cells: &[Cell],
    values: &[Vec<Option<f64>>],
) -> String {
    let mut md = format!("# sluice sweep of {scenario}\n\n");
    if !fixed.is_empty() {
        let _ = writeln!(md, "In every cell: `{}`.\n", fixed.join("`, `"));
    }
    if axes.len() == 2 {
        let (rows, cols) = (&axes[0], &axes[1]);
        for (m, metric) in metrics.iter().enumerate() {
            let _ = writeln!(md, "## {}\n", metric.heading());
            let _ = writeln!(md, "| {} \\ {} | {} |", rows.key, cols.key, cols.values.join(" | "));
            let _ = writeln!(md, "| --- |{}", " ---: |".repeat(cols.values.len()));
            for (r, rv) in rows.values.iter().enumerate() {
                let line: Vec<String> =
                    (0..cols.values.len()).map(|c| display(values[r * cols.values.len() + c][m])).collect();
                let _ = writeln!(md, "| {rv} | {} |", line.join(" | "));
            }
            md.push('\n');
        }
    } else {
        let heads: Vec<String> =
            axes.iter().map(|a| a.key.clone()).chain(metrics.iter().map(Metric::heading)).collect();
        let _ = writeln!(md, "| {} |", heads.join(" | "));
        let aligns: Vec<&str> = axes.iter().map(|_| "---").chain(metrics.iter().map(|_| "---:")).collect();
        let _ = writeln!(md, "| {} |", aligns.join(" | "));
        for (cell, vals) in cells.iter().zip(values) {
            let line: Vec<String> = axes
                .iter()
                .zip(&cell.at)
                .map(|(a, &i)| a.values[i].clone())
                .chain(vals.iter().map(|&v| display(v)))
                .collect();
            let _ = writeln!(md, "| {} |", line.join(" | "));
        }
        md.push('\n');
    }
    md
}

/// The long-form CSV: one row per cell with its axis values, directory and figures (in the
/// display units, full precision; empty when null).
fn csv_table(axes: &[Axis], metrics: &[Metric], cells: &[Cell], values: &[Vec<Option<f64>>]) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let header: Vec<String> = axes
        .iter()
        .map(|a| a.key.clone())
        .chain(["cell".to_string()])
        .chain(metrics.iter().map(|m| m.spec.clone()))
        .collect();
    w.write_record(&header)?;
    for (cell, vals) in cells.iter().zip(values) {
        let row: Vec<String> = axes
            .iter()
            .zip(&cell.at)
            .map(|(a, &i)| a.values[i].clone())
            .chain([cell.name.clone()])
            .chain(vals.iter().map(|v| v.map(|x| x.to_string()).unwrap_or_default()))
            .collect();
        w.write_record(&row)?;
    }
    w.into_inner().map_err(|e| anyhow!("writing table.csv: {e}"))
}

/// Runs `sluice sweep`.
pub fn run(args: SweepArgs) -> Result<()> {
    if args.seeds.is_some() || args.dask.is_some() {
        return hand_to_python(&args);
    }
    let axes = args.grid.iter().map(|g| parse_axis(g)).collect::<Result<Vec<_>>>()?;
    for (i, a) in axes.iter().enumerate() {
        if axes[..i].iter().any(|b| b.key == a.key) {
            bail!("--grid {}: the key `{}` is swept twice", args.grid[i], a.key);
        }
    }
    let metrics = args.metrics.iter().map(|m| parse_metric(m)).collect::<Result<Vec<_>>>()?;
    if args.jobs == Some(0) {
        bail!("--jobs 0: expected at least 1");
    }
    let mut fixed = args.overrides.clone();
    if let Some(s) = args.seed {
        fixed.push(format!("sim.seed={s}"));
    }
    let cells = cells(&axes);
    let overrides_of = |c: &Cell| fixed.iter().chain(&c.overrides).cloned().collect::<Vec<_>>();
    // Every cell must build before any runs: a bad key or value fails in seconds, not after
    // half the grid.
    for c in &cells {
        crate::build(&args.scenario, &overrides_of(c)).with_context(|| format!("cell {}", c.name))?;
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;

    let jobs =
        args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).min(cells.len());
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Results> = Mutex::new((0..cells.len()).map(|_| None).collect());
    let done = AtomicUsize::new(0);
    // Cells that run side by side take a core each; a sweep of one at a time runs each cell
    // on the threads its scenario asks for.
    let threads = (jobs > 1).then_some(sluice_sim::scenario::Threads::Count(1));
    let run_cell = |c: &Cell| -> Result<Vec<Option<f64>>> {
        let dir = args.out.join(&c.name);
        crate::run(&args.scenario, &dir, &overrides_of(c), true, threads).with_context(|| format!("cell {}", c.name))?;
        let text = std::fs::read_to_string(dir.join("summary.json"))
            .with_context(|| format!("cell {}: reading summary.json", c.name))?;
        let summary: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("cell {}: summary.json", c.name))?;
        metrics.iter().map(|m| lookup(&summary, m, &c.name)).collect()
    };
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= cells.len() || failed.load(Ordering::SeqCst) {
                    break;
                }
                let r = run_cell(&cells[i]);
                failed.fetch_or(r.is_err(), Ordering::SeqCst);
                if !args.quiet {
                    let n = done.fetch_add(1, Ordering::SeqCst) + 1;
                    match &r {
                        Ok(v) => {
                            let figs: Vec<String> = metrics
                                .iter()
                                .zip(v)
                                .map(|(m, &x)| format!("{} {}", m.heading(), display(x)))
                                .collect();
                            eprintln!("[{n}/{}] {}: {}", cells.len(), cells[i].name, figs.join(", "));
                        }
                        Err(_) => eprintln!("[{n}/{}] {}: failed", cells.len(), cells[i].name),
                    }
                }
                results.lock().expect("no worker panics holding the lock")[i] = Some(r);
            });
        }
    });
    // The first failure in cell order, so the error does not depend on scheduling.
    let values = results.into_inner().expect("no worker panicked").into_iter().flatten().collect::<Result<Vec<_>>>()?;
    assert_eq!(values.len(), cells.len(), "every cell ran when none failed");
    let md = markdown(&args.scenario.display().to_string(), &fixed, &axes, &metrics, &cells, &values);
    write(&args.out.join("table.md"), md.as_bytes())?;
    write(&args.out.join("table.csv"), &csv_table(&axes, &metrics, &cells, &values)?)?;
    print!("{md}");
    if !args.quiet {
        eprintln!("wrote {} and table.csv with {} cells", args.out.join("table.md").display(), cells.len());
    }
    Ok(())
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_arguments_split_on_top_level_commas() {
        let a = parse_axis("classes.query.cc=reno, cubic,bbr").unwrap();
        assert_eq!(
            a,
            Axis { key: "classes.query.cc".into(), values: vec!["reno".into(), "cubic".into(), "bbr".into()] }
        );
        let b = parse_axis("workloads.0.senders=[1,2],[3,4]").unwrap();
        assert_eq!(b.values, vec!["[1,2]", "[3,4]"]);
        for bad in ["classes.query.cc", "=reno", "k=", "k=a,,b", "k=a,a", "a..b=1"] {
            let e = parse_axis(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--grid {bad}:")), "{e}");
        }
    }

    #[test]
    fn metric_units_convert_only_their_dimension() {
        let m = parse_metric("classes.backup.goodput_bps:MB/s").unwrap();
        assert_eq!(m.unit.unwrap().divisor, 8e6);
        assert_eq!(m.heading(), "classes.backup.goodput_bps (MB/s)");
        let l = parse_metric("classes.query.request_latency_ns.p95:ms").unwrap();
        assert_eq!(l.unit.unwrap().name, "ms");
        assert!(parse_metric("drops").unwrap().unit.is_none());
        for bad in ["classes.backup.goodput_bps:ms", "drops:MB/s", "fct_ns.mean:hours", "a..b"] {
            let e = parse_metric(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--metric {bad}:")), "{e}");
        }
    }

    #[test]
    fn cells_run_first_axis_outermost_and_lookups_name_what_is_missing() {
        let axes = vec![parse_axis("a.x=1,2").unwrap(), parse_axis("b=p,q/r,s").unwrap()];
        let cs = cells(&axes);
        assert_eq!(cs.len(), 6);
        assert_eq!(cs[1].name, "a.x=1__b=q_r");
        assert_eq!(cs[1].overrides, vec!["a.x=1", "b=q/r"]);
        assert_eq!(cs[3].at, vec![1, 0]);
        let summary: serde_json::Value =
            serde_json::from_str(r#"{"classes": {"q": {"goodput_bps": 8e6, "lat_ns": null}}}"#).unwrap();
        let m = parse_metric("classes.q.goodput_bps:MB/s").unwrap();
        assert_eq!(lookup(&summary, &m, "c").unwrap(), Some(1.0));
        assert_eq!(lookup(&summary, &parse_metric("classes.q.lat_ns").unwrap(), "c").unwrap(), None);
        let e = lookup(&summary, &parse_metric("classes.z.goodput_bps").unwrap(), "c").unwrap_err().to_string();
        assert!(
            e.contains("--metric classes.z.goodput_bps")
                && e.contains("no `z` at `classes`")
                && e.contains("keys there: q"),
            "{e}"
        );
    }

    #[test]
    fn figures_show_three_significant_digits() {
        assert_eq!(display(Some(117.23)), "117");
        assert_eq!(display(Some(4.5678)), "4.57");
        assert_eq!(display(Some(0.0123456)), "0.0123");
        assert_eq!(display(None), "n/a");
    }
}
