//! The twin's simulator side, measured over the testbed's window: the same warm-up, then the
//! scenario's duration. A run is the same up to its end whatever that end is, so the scenario
//! runs to the window's start and to its end, and the counters of the window are the second's
//! less the first's; a third run goes on until the requests issued in the window have been
//! answered (as the testbed's clients finish the request in hand) and writes the outputs.

use super::compare::{self, Figure, Run};
use super::fit::{Fit, Traffic};
use anyhow::{anyhow, Context, Result};
use sluice_sim::time::Time;
use sluice_sim::world::World;
use std::collections::BTreeMap;
use std::path::Path;

/// How long the last run goes on past the window, at least: time for the requests issued in
/// the window to be answered.
const ANSWER_TIME: Time = Time::from_ms(1_000);

/// The measured window, from the run's start.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub from: Time,
    pub to: Time,
}

impl Window {
    /// The window after `warmup_s` seconds, as long as the scenario's duration.
    pub fn after(warmup_s: f64, fit: &Fit) -> Window {
        let from = Time((warmup_s * 1e12).round() as u64);
        Window { from, to: from + Time(fit.duration.as_nanos() as u64 * 1_000) }
    }
}

/// What a class's flows had done by some time.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    delivered: u64,
    retransmits: u64,
    timeouts: u64,
}

/// Every class's counts, and the fabric's drops and CE marks, when a run ended.
#[derive(Debug, Default)]
struct Snapshot {
    classes: BTreeMap<String, Counts>,
    drops: u64,
    ecn_marks: u64,
}

impl Snapshot {
    fn of(world: &World) -> Snapshot {
        let mut s = Snapshot::default();
        for f in world.flows() {
            let c = s.classes.entry(world.classes()[f.class as usize].name.clone()).or_default();
            c.delivered += f.bytes_delivered();
            c.retransmits += f.retransmits();
            c.timeouts += f.timeouts().len() as u64;
        }
        let summary = sluice_sim::metrics::summarize(world, 0.0);
        (s.drops, s.ecn_marks) = (summary.drops, summary.ecn_marks);
        s
    }
}

/// The scenario's overrides for a run that ends at `end`, its clients issuing requests until
/// the window closes, as the testbed's do.
fn overrides(base: &[String], fit: &Fit, w: Window, end: Time) -> Vec<String> {
    let mut o = base.to_vec();
    o.push(format!("sim.duration=\"{}ns\"", end.ns()));
    for (i, t) in fit.traffic.iter().enumerate() {
        if matches!(t, Traffic::Rpc { .. }) {
            o.push(format!("workloads[{i}].duration=\"{}ns\"", w.to.ns()));
        }
    }
    o
}

/// The scenario run to `end`, what it had done by then.
fn snapshot(scenario: &Path, base: &[String], fit: &Fit, w: Window, end: Time) -> Result<Snapshot> {
    if end == Time::ZERO {
        return Ok(Snapshot::default());
    }
    let (_, mut world) = crate::build(scenario, &overrides(base, fit, w, end))?;
    world.run(&mut |_| {});
    Ok(Snapshot::of(&world))
}

/// The simulator's figures per class over window `w`; its outputs (the run that answers the
/// window's requests) go to `dir`.
pub fn figures(scenario: &Path, base: &[String], fit: &Fit, w: Window, dir: &Path) -> Result<Run> {
    let start = snapshot(scenario, base, fit, w, w.from)?;
    let end = snapshot(scenario, base, fit, w, w.to)?;
    let last = overrides(base, fit, w, w.to + ANSWER_TIME.max(w.to - w.from));
    let (loaded, world) = crate::build(scenario, &last)?;
    let ran = sluice_sim::run::run(world, &crate::provenance(&loaded, &last), None, dir, &mut |_| {})
        .map_err(|e| anyhow!(e))
        .with_context(|| format!("the simulator's run of {}", loaded.file))?;
    eprintln!("simulator: {} simulated in {:.2} s, outputs in {}", ran.world.now(), ran.wall_s, dir.display());

    let secs = (w.to - w.from).secs_f64();
    let mut run = Run::new();
    for t in &fit.traffic {
        let class = t.class().to_string();
        let (a, b) = (
            start.classes.get(&class).copied().unwrap_or_default(),
            end.classes.get(&class).copied().unwrap_or_default(),
        );
        match t {
            Traffic::Bulk { .. } => {
                run.insert(
                    (class.clone(), Figure::ThroughputMbps),
                    (b.delivered - a.delivered) as f64 * 8.0 / secs / 1e6,
                );
            }
            Traffic::Rpc { .. } => {
                let index = ran.world.classes().iter().position(|c| c.name == class);
                let mut ns: Vec<u64> = ran
                    .world
                    .requests()
                    .iter()
                    .filter(|r| Some(r.class) == index && r.start >= w.from && r.start < w.to)
                    .map(|r| (r.end - r.start).ns())
                    .collect();
                ns.sort_unstable();
                compare::insert_completions(&mut run, &class, &ns);
            }
        }
        run.insert((class.clone(), Figure::RetransSegs), (b.retransmits - a.retransmits) as f64);
        run.insert((class, Figure::Rtos), (b.timeouts - a.timeouts) as f64);
    }
    run.insert(("fabric".into(), Figure::Drops), (end.drops - start.drops) as f64);
    run.insert(("fabric".into(), Figure::EcnMarks), (end.ecn_marks - start.ecn_marks) as f64);
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The small twin case measured over half a second after a second's warm-up: the window's
    /// counts are the run's since the window opened, so the bulk flow's throughput is its share
    /// of the 100 Mb/s port (half, beside the answers), not the warm-up's bytes too, and every
    /// request counted was issued in the window and answered.
    #[test]
    fn the_window_counts_what_happened_in_it_only() {
        let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/twin_small.toml");
        let base = vec!["transport.stack=\"linux\"".to_string(), "sim.duration=\"500ms\"".to_string()];
        let (loaded, _) = crate::build(&scenario, &base).unwrap();
        let fit = super::super::fit::fit(&loaded.scenario).unwrap();
        let w = Window::after(1.0, &fit);
        assert_eq!((w.from, w.to), (Time::from_ms(1_000), Time::from_ms(1_500)));
        let dir = tempfile::tempdir().unwrap();
        let run = figures(&scenario, &base, &fit, w, dir.path()).unwrap();
        let got = |class: &str, f: Figure| run[&(class.to_string(), f)];
        let bulk = got("bulk", Figure::ThroughputMbps);
        assert!((45.0..55.0).contains(&bulk), "bulk {bulk} Mb/s in the window");
        // One 128 KB answer at a time, 1 ms apart, each ~22 ms at half the port: ~22 in 0.5 s.
        let mean = got("query", Figure::CompletionMeanMs);
        assert!((20.0..25.0).contains(&mean), "query mean {mean} ms");
        let ran: Vec<_> = std::fs::read_to_string(dir.path().join("requests.csv"))
            .unwrap()
            .lines()
            .skip(1)
            .map(str::to_string)
            .collect();
        let in_window = ran
            .iter()
            .filter(|l| {
                let start: f64 = l.split(',').nth(1).unwrap().parse().unwrap();
                (1e9..1.5e9).contains(&start)
            })
            .count();
        assert!((20..=24).contains(&in_window), "{in_window} requests issued in the window");
        assert_eq!((got("fabric", Figure::Drops), got("bulk", Figure::Rtos)), (0.0, 0.0));
    }
}
