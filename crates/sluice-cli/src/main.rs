//! The `sluice` command: run, check, list, sweep and report.

mod huge_pages;
mod report;
mod sweep;
mod twin;

use anyhow::Result;
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sluice_sim::metrics::Provenance;
use sluice_sim::run::Ran;
use sluice_sim::scenario::{self, LoadedScenario, ScenarioError, Threads};
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
        /// Threads to run the fabric's partitions on: 1 to 1024, or "auto" (overrides
        /// sim.threads; outputs are the same for any number).
        #[arg(long, value_name = "N", value_parser = Threads::parse)]
        threads: Option<Threads>,
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
    /// Run a scenario on the netns testbed's kernels and in the simulator, and show each class's
    /// figures side by side (root; the testbed needs the `host` feature).
    Twin(twin::TwinArgs),
    /// The host's platform service: runs a policy of classes (algorithm, priority, matches),
    /// reloads it on SIGHUP or change; `status`, `check FILE`.
    #[cfg(feature = "host")]
    Agent(sluice_host::service::cli::AgentArgs),
    /// The fleet's policy in etcd: apply, diff, history, rollback; every host's status.
    Admin(sluice_platform::cli::AdminArgs),
    /// TCP-INT, the INT switch and BPF congestion control on this Linux host.
    #[cfg(feature = "host")]
    Host {
        #[command(subcommand)]
        cmd: sluice_host::service::cli::HostCmd,
    },
    /// A network-namespace testbed (hosts, a switch, shaped links) on this machine.
    #[cfg(feature = "host")]
    Testbed {
        #[command(subcommand)]
        cmd: sluice_host::testbed::cli::TestbedCmd,
    },
    /// An L7 proxy relaying by userspace copy, splice(2) or a BPF sockmap, and its benchmark.
    #[cfg(feature = "host")]
    Proxy {
        #[command(subcommand)]
        cmd: sluice_host::testbed::cli::ProxyCmd,
    },
    /// The host's platform service (needs the `host` feature).
    #[cfg(not(feature = "host"))]
    #[command(disable_help_flag = true)]
    Agent {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<String>,
    },
    /// TCP-INT, the INT switch and BPF congestion control on this Linux host (needs the `host` feature).
    #[cfg(not(feature = "host"))]
    #[command(disable_help_flag = true)]
    Host {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<String>,
    },
    /// A network-namespace testbed (needs the `host` feature).
    #[cfg(not(feature = "host"))]
    #[command(disable_help_flag = true)]
    Testbed {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<String>,
    },
    /// An L7 proxy with a BPF sockmap relay (needs the `host` feature).
    #[cfg(not(feature = "host"))]
    #[command(disable_help_flag = true)]
    Proxy {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<String>,
    },
}

/// Why `sluice host` and `sluice testbed` are missing from a default build, and how to get them.
#[cfg(not(feature = "host"))]
const HOST_FEATURE_MISSING: &str = "this sluice was built without the Linux half; `sluice agent`, `sluice host`, \
`sluice testbed` and `sluice proxy` need the cargo feature `host`: install the Debian packages clang llvm bpftool \
libelf-dev zlib1g-dev pkg-config, then `cargo build --release -p sluice-cli --features host`";

/// `--seed` as an override: a TOML integer where one can hold it, a string above 2^63 - 1.
fn seed_override(seed: u64) -> String {
    if i64::try_from(seed).is_ok() {
        format!("sim.seed={seed}")
    } else {
        format!("sim.seed=\"{seed}\"")
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Run { .. } | Command::Sweep(_)) {
        huge_pages::restart_on_huge_pages();
    }
    let result = match cli.command {
        Command::Run { scenario, out, seed, mut overrides, quiet, threads } => {
            if let Some(s) = seed {
                overrides.push(seed_override(s));
            }
            run(&scenario, &out, &overrides, quiet, threads)
        }
        Command::Check { scenario, overrides } => check(&scenario, &overrides),
        Command::Sweep(args) => sweep::run(args),
        Command::List => {
            list();
            Ok(())
        }
        Command::Report { dir } => report::run(&dir),
        Command::Twin(args) => twin::run(args),
        #[cfg(feature = "host")]
        Command::Agent(args) => sluice_host::service::cli::run_agent(args),
        Command::Admin(args) => sluice_platform::cli::run_admin(args),
        #[cfg(feature = "host")]
        Command::Host { cmd } => sluice_host::service::cli::run_host(cmd),
        #[cfg(feature = "host")]
        Command::Testbed { cmd } => sluice_host::testbed::cli::run_testbed(cmd),
        #[cfg(feature = "host")]
        Command::Proxy { cmd } => sluice_host::testbed::cli::run_proxy(cmd),
        #[cfg(not(feature = "host"))]
        Command::Agent { .. } | Command::Host { .. } | Command::Testbed { .. } | Command::Proxy { .. } => Err(anyhow::anyhow!(HOST_FEATURE_MISSING)),
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

/// Prints what a valid scenario builds, or every problem it has (one `error:` line each).
fn check(path: &Path, overrides: &[String]) -> Result<()> {
    let checked = match sluice_sim::check::check(path, overrides) {
        Ok(checked) => checked,
        Err(problems) => {
            let (last, others) = problems.split_last().expect("a failed check names a problem");
            for p in others {
                eprintln!("error: {p}");
            }
            return Err(last.clone().into());
        }
    };
    println!("{}", sluice_sim::metrics::describe(&checked));
    for warning in sluice_sim::metrics::warnings(&checked.loaded, &checked.world) {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

/// The provenance `run.json` records for a run of this program.
fn provenance<'a>(loaded: &'a LoadedScenario, overrides: &'a [String]) -> Provenance<'a> {
    Provenance {
        loaded,
        overrides,
        version: env!("CARGO_PKG_VERSION"),
        git_revision: option_env!("SLUICE_GIT_REVISION").unwrap_or("unknown"),
    }
}

fn run(path: &Path, out: &Path, overrides: &[String], quiet: bool, threads: Option<Threads>) -> Result<()> {
    let (loaded, world) = build(path, overrides)?;
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
                None => ProgressBar::new_spinner().with_style(
                    ProgressStyle::with_template("{elapsed_precise} {spinner} {msg} sim").expect("static template"),
                ),
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
    let ran = sluice_sim::run::run(world, &provenance(&loaded, overrides), threads, out, &mut progress);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let Ran { world, summary, wall_s, asked, threads, warnings } = ran.map_err(|e| anyhow::anyhow!(e))?;
    if !quiet {
        let packets = world.counters().packets_sent as f64;
        eprintln!(
            "{}: {} simulated in {:.2} s — {} events ({:.2} M events/s), {:.2} M packets/s, peak memory {}",
            loaded.file,
            world.now(),
            wall_s,
            summary.events,
            summary.events_per_s / 1e6,
            packets / wall_s.max(1e-9) / 1e6,
            peak_memory().unwrap_or_else(|| "unknown".into())
        );
        let parts = world.partitions();
        // Only the memory caps the threads below the partitions.
        let held_back = if threads < asked.min(parts.count) { format!(" (of {asked} asked: the memory fits {threads})") } else { String::new() };
        match (parts.lookahead, parts.note) {
            (Some(l), _) => eprintln!(
                "{} partitions on {threads} thread{}{held_back}, {l} lookahead (the smallest delay of a link between them)",
                parts.count,
                if threads == 1 { "" } else { "s" }
            ),
            (None, Some(why)) => eprintln!("one partition: {why}"),
            (None, None) => eprintln!("one partition"),
        }
        // What the scenario is about (its mechanisms' figures), then its traffic.
        for line in sluice_sim::metrics::headline(&summary) {
            eprintln!("{line}");
        }
        eprintln!("wrote {}", out.display());
    }
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

/// Peak resident memory of this process (Linux `VmHWM`).
fn peak_memory() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(sluice_sim::words::bytes(kb * 1024))
}

fn list() {
    println!("congestion control (classes.<name>.cc, parameters under classes.<name>.params):");
    for a in sluice_sim::cc::REGISTRY {
        let aliases = if a.aliases.is_empty() { String::new() } else { format!(" (alias {})", a.aliases.join(", ")) };
        println!("  {}{} — {}", a.name, aliases, a.summary);
        for (p, d) in a.params {
            println!("      {p} = {d}");
        }
        for set in sluice_sim::cc::presets::PRESETS.iter().filter(|s| s.algorithm == a.name) {
            println!("      preset = \"{}\": {}", set.name, set.source);
        }
    }
    println!("\ntopologies (topology.kind, then its keys):");
    for kind in sluice_sim::net::topology::KINDS {
        let keys = sluice_sim::net::topology::keys_of(kind).unwrap_or_default();
        println!("  {kind:<12} {}", keys.replace(' ', ", "));
    }
    println!("host TCP stacks (transport.stack):");
    println!("  rfc          (default) TCP as RFCs state it and the published simulators model it");
    println!("  linux        Linux's TCP; the [transport] values it sets where the scenario sets none:");
    for p in sluice_sim::transport::tcp::LINUX_PRESET {
        println!("                 {} = {} ({})", p.key, p.value, p.source);
    }
    println!("               and what its hosts do beyond them:");
    for (what, source) in sluice_sim::transport::tcp::LINUX_BEHAVIOURS {
        println!("                 {what} ({source})");
    }
    println!("workloads (workloads[].kind):");
    for (kind, what) in [
        ("flows", "an explicit list of {src, dst, size, start}; a flow may wait for others (name, after, compute) and for receives (receive, tag)"),
        ("trace", "a flow file: csv (src,dst,size_bytes,start) or hpcc"),
        ("bulk", "long-lived N-to-1 flows (senders, receiver, optional size)"),
        ("poisson", "open-loop arrivals at a load with sizes from a cdf (websearch, fb_hadoop, ali_storage, google_rpc or a file)"),
        ("incast", "N-to-1 rounds (senders, receiver, size, rounds) or Poisson events (hosts, fan_in, size, load)"),
        ("permutation", "each host sends size to a distinct other host"),
        ("all_to_all", "every ordered host pair exchanges size"),
        ("rpc", "closed-loop request/response clients (clients, servers, outstanding, sizes or cdfs, think_time)"),
        ("proxy", "closed-loop clients of an L7 proxy relaying to backends (clients, proxy, backends, outstanding, header_size, body_size)"),
        ("collective", "all_reduce (ring, halving_doubling, double_binary_tree), reduce_scatter, all_gather (ring, halving_doubling), all_to_all or broadcast over hosts in rank order (op, algorithm, hosts, size, chunks, iterations, compute, root)"),
        ("chakra", "Chakra execution traces (mlcommons/chakra et_def.proto, schema 0.0.4), one <file>.<rank>.et per rank as ASTRA-sim reads them: compute, collectives, sends and receives with their dependencies (file, hosts in rank order, algorithm, comm_groups, start)"),
    ] {
        println!("  {kind:<12} {what}");
    }
    println!("ECN marking (switch.ecn, or per rate or port under switch.rates.\"<rate>\".ecn, switch.ports.\"<port>\".ecn):");
    println!("  mode         off, step or red");
    println!("  step         k (the threshold)");
    println!("  red          kmin, kmax, pmax; weight (EWMA weight of the newest sample, default 1), gentle (ramp from kmax");
    println!("               to 2 x kmax, default false), spacing (none, uniform or wait; default none), mean_packet (default 500B)");
    println!("  mark_at      enqueue (default) or dequeue");
    println!("  non_ect      pass (default) or drop: what happens to a packet that is not ECN-capable where one would be marked");
    println!("packet trimming (switch.trim, or per rate or port under switch.rates.\"<rate>\".trim, switch.ports.\"<port>\".trim):");
    println!("  threshold    trim data once the queue it joins would pass this (at least one full frame); absent: where the buffer would drop it");
    println!("  header       bytes of a trimmed header (default 64B); it is sent ahead of the port's queue");
    println!("  header_queue header bytes a port queues at most (default twice the threshold, or twice the port's buffer); past it headers drop");
    println!("  victim       coin (default: the arrival or the packet queued last, even odds, as the UEC reference) or arrival");
    println!("  enabled      false turns it off for a rate or port under a switch-wide table");
    println!("per-packet spraying (classes.<name>.spray = true): each data packet takes an ECMP hash of its own");
    println!("the Ultra Ethernet transport (classes.<name>.transport = \"uet\", with cc = \"nscc\", \"rccc\" or \"constant\"; settings in [uet]):");
    println!("  mtu          packet bytes with the 64-byte UET header (default 4150)");
    println!("  framing      Ethernet framing bytes each packet adds on the wire (default 38; 0 counts as the UEC reference does)");
    println!("  sack_threshold  the receiver acknowledges at least every this many bytes (default 16384B)");
    println!("  load_balancing_algo  oblivious, bitmap, reps (needs trimming), reps_legacy or mixed (default): how each packet's entropy is chosen");
    println!("  paths        entropy values a flow spreads over, a power of two (default 64; 1 pins a flow to one path)");
    println!("  rto          retransmission timeout (default auto: 15us plus six trimming thresholds at line rate)");
    println!("  network_rtt  the round trip NSCC scales by (default auto: one packet out and one ACK back on the longest path)");
    println!("  accurate_base_rtt  true starts each flow's NSCC at its own pair's longest round trip (default false)");
    println!("  timeout_feedback   unknown (default: a timeout penalises entropy 0, as the reference) or packet (the lost packet's)");
    println!("link failures ([[failures]], each one link):");
    println!("  link         the link by its two ends, \"sw0->sw4\"; both directions fail unless one_way = true");
    println!("  at, until    when it fails (default: from the start) and when it is back (default: never)");
    println!("  down         true: it loses everything sent on it; or");
    println!("  rate         the fraction of its rate it keeps, above 0 and below 1 (0.25: the UEC reference's -failed)");
}
