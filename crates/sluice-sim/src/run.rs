//! One run of a scenario, as the command line and the Python module make it: the world spread
//! over its threads, run, checked and written out.

use crate::metrics::{self, Provenance, Summary};
use crate::scenario::Threads;
use crate::time::Time;
use crate::world::World;
use std::path::Path;
use std::time::Instant;

/// A finished run: the world as it ended, its summary, and how it ran.
pub struct Ran {
    /// The world at the end of the run, every shard's state gathered into it.
    pub world: World,
    /// What `summary.json` holds.
    pub summary: Summary,
    /// Wall-clock seconds the simulation took, the world's build left out.
    pub wall_s: f64,
    /// Threads asked for (the flag or `sim.threads`, `auto` resolved).
    pub asked: usize,
    /// Threads the run took: no more than its partitions, nor than the memory fits.
    pub threads: usize,
    /// What the user should know of the outputs (flows that did not finish, samples cut short).
    pub warnings: Vec<String>,
}

/// Runs `world`, built from `provenance.loaded`, on `threads` threads (`None`: `sim.threads`),
/// checks that every packet and byte is accounted for, and writes the outputs to `out`.
/// `progress` is called now and then with the simulated time.
pub fn run(mut world: World, provenance: &Provenance, threads: Option<Threads>, out: &Path, progress: &mut dyn FnMut(Time)) -> Result<Ran, String> {
    let loaded = provenance.loaded;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let asked = threads.unwrap_or(loaded.scenario.sim.threads).resolve(&world, cores);
    let threads = world.spread(asked);
    let started = Instant::now();
    world.run(progress);
    let wall_s = started.elapsed().as_secs_f64();
    world.check_conservation().map_err(|e| format!("internal invariant violated: {e}"))?;
    let summary = metrics::write_run(&world, out, wall_s, provenance).map_err(|e| format!("{}: {e}", out.display()))?;
    let warnings = metrics::warnings(loaded, &world);
    Ok(Ran { world, summary, wall_s, asked, threads, warnings })
}
