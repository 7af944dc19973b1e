//! A run's output directory: which files a run owns, clearing an earlier run's, and `run.json`,
//! the provenance that makes a directory reproducible.

use super::summary::{Fallbacks, FlowState};
use super::{write_outputs, Summary};
use crate::scenario::LoadedScenario;
use crate::world::World;
use serde::Serialize;
use std::io;
use std::path::Path;

/// Every file a run or `sluice report` writes into a run directory. A new run removes these
/// first, so no file from an earlier run (a queues.csv its scenario no longer samples, an old
/// report) can pass for this run's.
pub const OWNED_FILES: &[&str] = &[
    "flows.csv",
    "summary.json",
    "fct_buckets.csv",
    "utilization.csv",
    "ports.csv",
    "pfc.csv",
    "circuit.csv",
    "collectives.csv",
    "cpu.csv",
    "queues.csv",
    "requests.csv",
    "cwnd.csv",
    "cc_state.csv",
    "telemetry.csv",
    "trace.pcap",
    "run.json",
    "report.html",
    "slowdown_vs_size.png",
    "fct_cdf.png",
    "request_latency_cdf.png",
    "queue_depth.png",
    "cwnd.png",
    "utilization.png",
    "telemetry.png",
];

/// Where a run came from, as `run.json` records it.
pub struct Provenance<'a> {
    /// The scenario as loaded, overrides applied.
    pub loaded: &'a LoadedScenario,
    /// Every `--set` in the order given (a `--seed` appears as `sim.seed=N`).
    pub overrides: &'a [String],
    /// The sluice version of the program that ran it.
    pub version: &'a str,
    /// The git revision it was built from, or "unknown".
    pub git_revision: &'a str,
}

#[derive(Serialize)]
struct RunJson<'a> {
    sluice_version: &'a str,
    git_revision: &'a str,
    scenario_file: &'a str,
    overrides: &'a [String],
    seed: u64,
    scenario: &'a crate::scenario::Scenario,
}

/// An I/O error that names the path it concerns.
fn at<'a>(path: &'a Path, what: &str) -> impl FnOnce(io::Error) -> io::Error + 'a {
    let what = what.to_string();
    move |e| io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// Prepares `dir` for a run: creates it, or removes the files an earlier run left there.
pub fn prepare_run_dir(dir: &Path) -> io::Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("--out {}: exists and is not a directory; name a directory for the run's files", dir.display()),
        ));
    }
    std::fs::create_dir_all(dir).map_err(at(dir, "--out: cannot create the directory"))?;
    for f in OWNED_FILES {
        let p = dir.join(f);
        match std::fs::remove_file(&p) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(at(&p, "cannot remove the earlier run's")(e)),
            _ => {}
        }
    }
    Ok(())
}

/// Writes a whole run into `dir`: clears an earlier run's files, writes every output and
/// `run.json`. Returns the summary.
pub fn write_run(world: &World, dir: &Path, wall_s: f64, provenance: &Provenance) -> io::Result<Summary> {
    prepare_run_dir(dir)?;
    let summary = write_outputs(world, dir, wall_s).map_err(at(dir, "writing the run's files into"))?;
    let run = RunJson {
        sluice_version: provenance.version,
        git_revision: provenance.git_revision,
        scenario_file: &provenance.loaded.file,
        overrides: provenance.overrides,
        seed: world.seed(),
        scenario: &provenance.loaded.scenario,
    };
    let json = serde_json::to_string_pretty(&run).map_err(io::Error::other)?;
    let path = dir.join("run.json");
    std::fs::write(&path, json + "\n").map_err(at(&path, "cannot write"))?;
    Ok(summary)
}

/// What a user should know about a run's figures (after `run`) or a scenario (before it) that is
/// not an error: sized flows cut short by `sim.duration`, flows that ran a class's fallback
/// algorithm, classes no flow uses. The CLI prints each as a warning, the Python package raises
/// each as a `SluiceWarning`.
pub fn warnings(loaded: &LoadedScenario, world: &World) -> Vec<String> {
    unfinished(loaded, world).into_iter().chain(waiting(world)).chain(fallbacks(world)).chain(unused_classes(world)).collect()
}

/// Flows that never started because what they wait for never arrived: which wait on what, so a
/// graph that cannot go on says where it stopped.
fn waiting(world: &World) -> Option<String> {
    let stuck = world.waiting_flows();
    if stuck.is_empty() || world.events() == 0 {
        return None;
    }
    const SHOWN: usize = 8;
    let ids = |l: &[crate::ids::FlowId]| l.iter().map(|f| f.0.to_string()).collect::<Vec<_>>().join(", ");
    let mut each: Vec<String> = stuck
        .iter()
        .take(SHOWN)
        .map(|(f, on)| match on.len() {
            0 => format!("flow {f} (released too late to start)"),
            1 => format!("flow {f} waits for flow {}", ids(on)),
            _ => format!("flow {f} waits for flows {}", ids(on)),
        })
        .collect();
    if stuck.len() > SHOWN {
        each.push(format!("and {} more", stuck.len() - SHOWN));
    }
    Some(format!(
        "{} never started: what {} for never arrived ({}); summary.json lists them under waiting",
        crate::words::count(stuck.len() as u64, "flow", "flows"),
        if stuck.len() == 1 { "it waits" } else { "they wait" },
        each.join("; ")
    ))
}

/// Why sized flows are missing from the FCT figures, when the run stopped at `sim.duration` before
/// they finished. Persistent connections and endless flows are not expected to finish, and flows
/// whose start the run did not reach are named apart: neither "did not finish".
fn unfinished(loaded: &LoadedScenario, world: &World) -> Option<String> {
    let duration = loaded.scenario.sim.duration?;
    if world.now() < duration {
        return None;
    }
    let (mut total, mut unfinished, mut not_started) = (0u64, 0u64, 0u64);
    for f in world.flows() {
        match FlowState::of(f, world.now()) {
            FlowState::Completed => total += 1,
            FlowState::Unfinished => (total, unfinished) = (total + 1, unfinished + 1),
            FlowState::NotStarted => (total, not_started) = (total + 1, not_started + 1),
            FlowState::Endless | FlowState::Persistent => {}
        }
    }
    let fix = "(raise sim.duration, or leave it out so the run ends when every flow is done)";
    match (unfinished, not_started) {
        (0, 0) => None,
        (0, n) => Some(format!(
            "{n} of {total} sized flows had not started when the run stopped at sim.duration = {duration}; \
             they have no FCT in flows.csv and are left out of the FCT and slowdown figures {fix}"
        )),
        (u, n) => {
            let later = if n > 0 { format!(" ({n} more had not started)") } else { String::new() };
            Some(format!(
                "{u} of {total} sized flows did not finish: the run stopped at sim.duration = {duration}{later}; \
                 they have no FCT in flows.csv and are left out of the FCT and slowdown figures {fix}"
            ))
        }
    }
}

/// Why a negotiation outcome made a flow fall back, and the scenario key that provides what was
/// missing.
fn fallback_reason(label: &str) -> (&'static str, &'static str) {
    match label {
        "fallback_path_no_ecn" => ("a switch on the path does not mark ECN", "switch.ecn.mode"),
        "fallback_local_no_int" => ("the sender's stack lacks TCP-INT", "int.legacy_hosts"),
        "fallback_peer_no_int" => ("the receiver's stack lacks TCP-INT", "int.legacy_hosts"),
        "fallback_path_no_int" => ("no switch on the path stamps TCP-INT", "int.legacy_switches"),
        "fallback_path_legacy_int" => ("a switch on the path writes no per-hop INT record", "int.legacy_switches"),
        "fallback_peer_silent" => ("the receiver did not answer the negotiation (it has no agent)", "transport.agentless_hosts"),
        _ => ("negotiation failed", "the class's cc"),
    }
}

/// Classes some of whose flows ran the class's fallback algorithm instead of the one the class
/// asks for: summary.json's `classes.<name>.cc` names what was asked, so this says what ran.
fn fallbacks(world: &World) -> Vec<String> {
    let mut out = Vec::new();
    for (i, c) in world.classes().iter().enumerate() {
        let flows = || world.flows().iter().filter(move |f| f.class as usize == i);
        let fb = Fallbacks::of(flows());
        if fb.flows == 0 {
            continue;
        }
        let total = flows().count();
        let ran: Vec<&str> = fb.cc.keys().copied().collect();
        let why: Vec<String> = fb
            .reasons
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(label, n)| {
                let (what, key) = fallback_reason(label);
                format!("{what} ({label}: {}; see {key})", crate::words::count(*n, "flow", "flows"))
            })
            .collect();
        out.push(format!(
            "class \"{}\" asks for {}, but {} of its {total} flows ran {} instead: {}; \
             summary.json counts them in classes.{}.fallbacks",
            c.name,
            c.cc,
            fb.flows,
            ran.join(", "),
            why.join("; "),
            c.name,
        ));
    }
    out
}

/// Classes the scenario configures but no flow belongs to, whose settings therefore change
/// nothing. Before a run, applications have not opened their flows yet, so a scenario with
/// applications is judged only after its run.
fn unused_classes(world: &World) -> Option<String> {
    if world.events() == 0 && world.has_applications() {
        return None;
    }
    let mut used = vec![false; world.classes().len()];
    for f in world.flows() {
        used[f.class as usize] = true;
    }
    let unused: Vec<String> = world
        .classes()
        .iter()
        .zip(&used)
        .filter(|(c, used)| !**used && c.name != "default")
        .map(|(c, _)| format!("\"{}\"", c.name))
        .collect();
    (!unused.is_empty()).then(|| {
        let these = if unused.len() == 1 { "class" } else { "classes" };
        format!(
            "no flow belongs to {these} {}, so {} settings change nothing (flows join a class by a workload's class key, the class's [classes.<name>.match] rules or a [policy] intent mapped to it)",
            unused.join(", "),
            if unused.len() == 1 { "its" } else { "their" },
        )
    })
}

/// What `sluice check` says about a valid scenario: what it builds, and about how much memory a
/// run takes, on one thread and on as many as it has partitions (each other thread's shard).
pub fn describe(checked: &crate::check::Checked) -> String {
    use crate::words::{bytes, count};
    let world = &checked.world;
    let nodes = world.ports().iter().map(|p| p.node).collect::<std::collections::BTreeSet<_>>().len();
    let classes: Vec<String> = world.classes().iter().map(|c| format!("{} ({})", c.name, c.cc)).collect();
    let footprint = &checked.footprint;
    let threads = match world.partitions().count {
        1 => String::new(),
        n => format!(
            ", and {} more for each other thread up to its {n} partitions ({} on {})",
            bytes(footprint.shard),
            bytes(footprint.bytes_on(n.min(8))),
            count(n.min(8) as u64, "thread", "threads")
        ),
    };
    format!(
        "{}: ok — {}, {}, {}; classes: {}; a run takes about {} of memory on one thread{threads}",
        checked.loaded.file,
        count(world.host_count() as u64, "host", "hosts"),
        count((nodes - world.host_count()) as u64, "switch", "switches"),
        count(world.flows().len() as u64, "flow", "flows"),
        classes.join(", "),
        bytes(footprint.bytes())
    )
}
