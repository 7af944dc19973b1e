//! `sluice._native`: the simulator behind the `sluice` Python package. The Python half
//! (python/sluice) turns these outputs into DataFrames; this half loads, checks and runs scenarios
//! exactly as the `sluice` command does, and turns every failure into a Python exception.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError};
use pyo3::prelude::*;
use sluice_sim::metrics::{self, Provenance};
use sluice_sim::run::Ran;
use sluice_sim::scenario::{self, LoadedScenario, ScenarioError, Threads};
use sluice_sim::world::World;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

// Named `sluice.SluiceError`, where the package exports it, so that pickle finds the class by that
// name: an error raised in a sweep's worker process (Dask) reaches the caller as itself.
create_exception!(sluice, SluiceError, PyException, "A scenario or run that sluice rejects; the message is the CLI's.");

/// Parses scenario text; `file` names it in errors and relative paths resolve against `base_dir`.
fn load(text: &str, file: &str, base_dir: &str, overrides: &[String]) -> Result<LoadedScenario, ScenarioError> {
    scenario::parse(text, file, Path::new(base_dir), overrides)
}

/// How often a run looks up from the simulation to let Python handle Ctrl-C and call its `tick`.
const TICK: Duration = Duration::from_millis(100);

/// A Python exception (Ctrl-C's KeyboardInterrupt, or what `tick` raised) that ends a run early,
/// carried out of the simulation loop by unwinding.
struct Stop(PyErr);

/// Runs `f` without the GIL, turning a panic into an error rather than unwinding into Python.
fn guarded<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, String> + Send) -> PyResult<T> {
    let outcome = py.allow_threads(|| catch_unwind(AssertUnwindSafe(f)));
    match outcome {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(message)) => Err(SluiceError::new_err(message)),
        Err(panic) => {
            let panic = match panic.downcast::<Stop>() {
                Ok(stop) => return Err(stop.0),
                Err(other) => other,
            };
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(PyRuntimeError::new_err(format!("internal error in sluice (please report it): {what}")))
        }
    }
}

fn build(text: &str, file: &str, base_dir: &str, overrides: &[String]) -> Result<(LoadedScenario, World), String> {
    let loaded = load(text, file, base_dir, overrides).map_err(|e| e.to_string())?;
    let world = sluice_sim::scenario::build(&loaded).map_err(|m| loaded.error_at(m).to_string())?;
    Ok((loaded, world))
}

/// Simulates a scenario and writes the run's files into `out`; returns summary.json's text and the
/// run's warnings (flows cut short by sim.duration, classes no flow uses).
///
/// About every 100 ms of wall time the run takes the GIL to handle signals (Ctrl-C raises
/// KeyboardInterrupt there) and calls `tick(now_ns, end_ns)` (`end_ns` None without
/// sim.duration); an exception from either ends the run and is raised.
///
/// `threads` (1 to 1024) overrides sim.threads: the threads the fabric's partitions run on.
#[pyfunction]
#[pyo3(signature = (text, file, base_dir, overrides, out, tick=None, threads=None))]
fn run(
    py: Python<'_>,
    text: String,
    file: String,
    base_dir: String,
    overrides: Vec<String>,
    out: String,
    tick: Option<PyObject>,
    threads: Option<usize>,
) -> PyResult<(String, Vec<String>)> {
    let tick = tick.as_ref();
    guarded(py, move || {
        let (loaded, world) = build(&text, &file, &base_dir, &overrides)?;
        let threads = threads.map(|n| Threads::parse(&n.to_string()).map_err(|e| format!("threads: {e}"))).transpose()?;
        let end_ns = loaded.scenario.sim.duration.map(|d| d.ns());
        let mut looked = Instant::now();
        let provenance = Provenance {
            loaded: &loaded,
            overrides: &overrides,
            version: env!("CARGO_PKG_VERSION"),
            git_revision: option_env!("SLUICE_GIT_REVISION").unwrap_or("unknown"),
        };
        let Ran { summary, warnings, .. } = sluice_sim::run::run(world, &provenance, threads, Path::new(&out), &mut |now| {
            if looked.elapsed() < TICK {
                return;
            }
            looked = Instant::now();
            let outcome = Python::with_gil(|py| {
                py.check_signals()?;
                tick.map_or(Ok(()), |t| t.call1(py, (now.ns(), end_ns)).map(drop))
            });
            if let Err(e) = outcome {
                // The engine's loop has no way to be stopped from its progress callback; unwinding
                // out of it (resume_unwind, so no panic message) drops the world, which is all a
                // stop needs, and `guarded` turns the payload back into the exception.
                resume_unwind(Box::new(Stop(e)));
            }
        })?;
        Ok((serde_json::to_string(&summary).map_err(|e| e.to_string())?, warnings))
    })
}

/// Validates a scenario; returns the line `sluice check` prints and its warnings, or raises with
/// every problem, one a line.
#[pyfunction]
fn check(
    py: Python<'_>,
    text: String,
    file: String,
    base_dir: String,
    overrides: Vec<String>,
) -> PyResult<(String, Vec<String>)> {
    guarded(py, move || {
        let checked = sluice_sim::check::check_text(&text, &file, Path::new(&base_dir), &overrides)
            .map_err(|problems| problems.iter().map(ScenarioError::to_string).collect::<Vec<_>>().join("\n"))?;
        Ok((metrics::describe(&checked), metrics::warnings(&checked.loaded, &checked.world)))
    })
}

/// The scenario as the simulator reads it, every override applied, as JSON: what a sweep keys its
/// stored results by, so that a changed file or override is never mistaken for the same inputs.
#[pyfunction]
fn resolved(text: String, file: String, base_dir: String, overrides: Vec<String>) -> PyResult<String> {
    let loaded = load(&text, &file, &base_dir, &overrides).map_err(|e| SluiceError::new_err(e.to_string()))?;
    serde_json::to_string(&loaded.scenario).map_err(|e| SluiceError::new_err(format!("{file}: {e}")))
}

/// A quantity written with a unit, in the unit sluice's tables use: ("bytes", n) for a size like
/// "20KB", ("bps", n) for a rate, ("ns", x) for a duration; None for text that is none of these.
/// A sweep types its grid values by it.
#[pyfunction]
fn quantity(py: Python<'_>, text: &str) -> Option<(&'static str, PyObject)> {
    use sluice_sim::time::{Bytes, Rate, Time};
    if let Ok(b) = Bytes::parse(text) {
        return Some(("bytes", b.0.into_pyobject(py).ok()?.into_any().unbind()));
    }
    if let Ok(r) = Rate::parse(text) {
        return Some(("bps", r.0.into_pyobject(py).ok()?.into_any().unbind()));
    }
    let t = Time::parse(text).ok()?;
    Some(("ns", (t.ps() as f64 / 1e3).into_pyobject(py).ok()?.into_any().unbind()))
}

/// Every congestion-control algorithm: (name, aliases, summary, [(parameter, default line)]).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn algorithms() -> Vec<(String, Vec<String>, String, Vec<(String, String)>)> {
    sluice_sim::cc::REGISTRY
        .iter()
        .map(|a| {
            (
                a.name.to_string(),
                a.aliases.iter().map(|s| s.to_string()).collect(),
                a.summary.to_string(),
                a.params.iter().map(|(p, d)| (p.to_string(), d.to_string())).collect(),
            )
        })
        .collect()
}

/// TOML text for a scenario given as JSON (a Python dict serialized by `json.dumps`).
#[pyfunction]
fn toml_from_json(json: &str) -> PyResult<String> {
    let value: toml::Value = serde_json::from_str(json).map_err(|e| {
        SluiceError::new_err(format!("<scenario dict>: {e} (TOML has no null: leave the key out instead)"))
    })?;
    if !value.is_table() {
        return Err(SluiceError::new_err("<scenario dict>: expected a dict of scenario sections"));
    }
    toml::to_string(&value).map_err(|e| SluiceError::new_err(format!("<scenario dict>: {e}")))
}

/// The sluice version this module was built from.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SluiceError", m.py().get_type::<SluiceError>())?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(resolved, m)?)?;
    m.add_function(wrap_pyfunction!(quantity, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms, m)?)?;
    m.add_function(wrap_pyfunction!(toml_from_json, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    Ok(())
}
