//! The `sluice` command: run, check, list, sweep and report.

mod report;
mod sweep;

use anyhow::Result;
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sluice_sim::scenario::{self, LoadedScenario, ScenarioError};
use sluice_sim::time::Time;
use sluice_sim::world::World;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(name = "sluice", version, about = "An open congestion-control platform for datacenter transports")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a scenario and write flows.csv, summary.json and any sampled series.
    Run {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Output directory.
        #[arg(long, default_value = "out")]
        out: PathBuf,
        /// Override sim.seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Override a scenario key, e.g. --set classes.query.cc=dctcp (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// No progress bar and no closing report on stderr.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Validate a scenario and report every problem with its file, line and key.
    Check {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// Override a scenario key (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// Run a scenario over every combination of --grid values and tabulate summary.json figures.
    Sweep(sweep::SweepArgs),
    /// List congestion-control algorithms with their parameters, topologies and workloads.
    List,
    /// Plot a run's output directory and write report.html (with the plots embedded) into it.
    Report {
        /// The directory `sluice run --out` wrote.
        dir: PathBuf,
    },
    /// TCP-INT, the INT switch and BPF congestion control on this Linux host.
    Host {
        #[command(subcommand)]
        cmd: sluice_host::cli::HostCmd,
    },
    /// A network-namespace testbed (hosts, a switch, shaped links) on this machine.
    Testbed {
        #[command(subcommand)]
        cmd: sluice_host::cli::TestbedCmd,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { scenario, out, seed, mut overrides, quiet } => {
            if let Some(s) = seed {
                overrides.push(format!("sim.seed={s}"));
            }
            run(&scenario, &out, &overrides, quiet)
        }
        Command::Check { scenario, overrides } => check(&scenario, &overrides),
        Command::Sweep(args) => sweep::run(args),
        Command::List => {
            list();
            Ok(())
        }
        Command::Report { dir } => report::run(&dir),
        Command::Host { cmd } => sluice_host::cli::run_host(cmd),
        Command::Testbed { cmd } => sluice_host::cli::run_testbed(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Loads and fully validates a scenario, building the world it describes.
fn build(path: &Path, overrides: &[String]) -> Result<(LoadedScenario, World), ScenarioError> {
    let loaded = scenario::load(path, overrides)?;
    let world = sluice_sim::scenario::build(&loaded).map_err(|m| loaded.error_at(m))?;
    Ok((loaded, world))
}

fn check(path: &Path, overrides: &[String]) -> Result<()> {
    let (loaded, world) = build(path, overrides)?;
    let switches = world.ports().iter().map(|p| p.node).collect::<std::collections::BTreeSet<_>>().len() - world.host_count();
    let classes: Vec<String> = world.classes().iter().map(|c| format!("{} ({})", c.name, c.cc)).collect();
    println!(
        "{}: ok — {} hosts, {} switches, {} flows; classes: {}",
        loaded.file,
        world.host_count(),
        switches,
        world.flows().len(),
        classes.join(", ")
    );
    Ok(())
}

fn run(path: &Path, out: &Path, overrides: &[String], quiet: bool) -> Result<()> {
    let (loaded, mut world) = build(path, overrides)?;
    let show = !quiet && std::io::stderr().is_terminal();
    let end = loaded.scenario.sim.duration;
    let started = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    let mut progress = |now: Time| {
        if !show || started.elapsed().as_secs_f64() < 1.0 {
            return;
        }
        let b = bar.get_or_insert_with(|| {
            let b = match end {
                Some(e) => ProgressBar::new(e.ns()).with_style(
                    ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {msg} sim, ETA {eta}")
                        .expect("static template")
                        .progress_chars("=> "),
                ),
                None => ProgressBar::new_spinner()
                    .with_style(ProgressStyle::with_template("{elapsed_precise} {spinner} {msg} sim").expect("static template")),
            };
            b.set_draw_target(ProgressDrawTarget::stderr());
            b
        });
        b.set_position(now.ns());
        b.set_message(format!("{now}"));
        if end.is_none() {
            b.tick();
        }
    };
    world.run(&mut progress);
    let wall = started.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    world.check_conservation().map_err(|e| anyhow::anyhow!("internal invariant violated: {e}"))?;
    let summary = sluice_sim::metrics::write_outputs(&world, out, wall)?;
    if !quiet {
        let packets = world.counters().packets_sent as f64;
        eprintln!(
            "{}: {} simulated in {:.2} s — {} events ({:.2} M events/s), {:.2} M packets/s, peak memory {}",
            loaded.file,
            world.now(),
            wall,
            summary.events,
            summary.events_per_s / 1e6,
            packets / wall.max(1e-9) / 1e6,
            peak_memory().unwrap_or_else(|| "unknown".into())
        );
        eprintln!(
            "flows {}/{} completed; FCT mean {:.1} us, p99 {:.1} us; slowdown p50 {:.2}, p99 {:.2}; drops {}, ECN marks {}, timeouts {}",
            summary.flows.completed,
            summary.flows.total,
            summary.fct_ns.mean / 1e3,
            summary.fct_ns.p99 / 1e3,
            summary.slowdown.p50,
            summary.slowdown.p99,
            summary.drops,
            summary.ecn_marks,
            summary.timeouts
        );
        if let (Some(n), Some(lat)) = (&summary.requests, &summary.request_latency_ns) {
            eprintln!(
                "requests {} ({:.3} M/s); latency mean {:.1} us, p99 {:.1} us",
                n.completed,
                n.per_s / 1e6,
                lat.mean / 1e3,
                lat.p99 / 1e3
            );
        }
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}

/// Peak resident memory of this process (Linux `VmHWM`).
fn peak_memory() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(format!("{:.1} MB", kb as f64 / 1024.0))
}

fn list() {
    println!("congestion control (classes.<name>.cc, parameters under classes.<name>.params):");
    for a in sluice_sim::cc::REGISTRY {
        let aliases = if a.aliases.is_empty() { String::new() } else { format!(" (alias {})", a.aliases.join(", ")) };
        println!("  {}{} — {}", a.name, aliases, a.summary);
        for (p, d) in a.params {
            println!("      {p} = {d}");
        }
    }
    println!("\ntopologies (topology.kind): star, dumbbell, leaf_spine, fat_tree, hpcc_file");
    println!("workloads (workloads[].kind):");
    for (kind, what) in [
        ("flows", "an explicit list of {src, dst, size, start}"),
        ("trace", "a flow file: csv (src,dst,size_bytes,start) or hpcc"),
        ("bulk", "long-lived N-to-1 flows (senders, receiver, optional size)"),
        ("poisson", "open-loop arrivals at a load with sizes from a cdf (websearch, fb_hadoop, ali_storage, google_rpc or a file)"),
        ("incast", "N-to-1 rounds (senders, receiver, size, rounds) or Poisson events (hosts, fan_in, size, load)"),
        ("permutation", "each host sends size to a distinct other host"),
        ("all_to_all", "every ordered host pair exchanges size"),
        ("rpc", "closed-loop request/response clients (clients, servers, outstanding, sizes or cdfs, think_time)"),
    ] {
        println!("  {kind:<12} {what}");
    }
    println!("ECN marking (switch.ecn.mode): off, step (k), red (kmin, kmax, pmax)");
}
