//! `sluice twin SCENARIO`: one scenario on both halves. The simulator runs it with Linux's
//! stack; the netns testbed runs it on this machine's kernel with the classes applied by
//! `sluice agent`; each class's figures are shown side by side (docs/twin.md).

pub mod compare;
pub mod fit;
mod simulator;
#[cfg(feature = "host")]
mod testbed;

use anyhow::{bail, Context, Result};
use compare::Run;
use fit::Fit;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `sluice twin` options.
#[derive(clap::Args, Debug)]
pub struct TwinArgs {
    /// The scenario (TOML): one switch of at most 16 hosts, ports up to 10 Gb/s, bulk and rpc
    /// workloads.
    pub scenario: PathBuf,
    /// Override a scenario key (repeatable), as `sluice run --set`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Output directory: twin.md, twin.csv, twin.png, simulator/ and testbed/run-N/.
    #[arg(long, default_value = "out/twin")]
    pub out: PathBuf,
    /// Testbed runs; the kernel's figures are their mean and range.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeats: u32,
    /// Seconds of traffic before the measured window (the scenario's duration), on the testbed
    /// and in the simulator alike.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// The simulator's host TCP stack (transport.stack).
    #[arg(long, default_value = "linux", value_parser = ["linux", "rfc"])]
    pub stack: String,
    /// The testbed's segmentation and receive offloads: off, or on as Linux ships a NIC.
    #[arg(long, default_value = "off", value_parser = ["off", "linux"])]
    pub offloads: String,
    /// Each testbed host's transmit queue: one per flow served round robin, as Linux's default
    /// `fq_codel` and the simulator's NIC serve a host's flows, or one FIFO (`pfifo_fast`).
    #[arg(long, default_value = "flows", value_parser = ["flows", "fifo"])]
    pub host_queue: String,
    /// Only check that the scenario fits and print the testbed it would run on.
    #[arg(long)]
    pub plan: bool,
    /// The testbed's namespace prefix.
    #[arg(long, default_value = "tw")]
    pub prefix: String,
}

/// Runs `sluice twin`.
pub fn run(args: TwinArgs) -> Result<()> {
    if !(0.0..=60.0).contains(&args.warmup) {
        bail!("--warmup {}: expected seconds from 0 to 60", args.warmup);
    }
    let mut overrides = args.overrides.clone();
    overrides.push(format!("transport.stack=\"{}\"", args.stack));
    if args.offloads == "linux" && args.stack == "linux" {
        // The testbed's TCP then builds TSO packets, as the simulator's Linux stack does with tso.
        overrides.push("transport.tso=true".into());
    }
    // Built once here so that a scenario that does not build is refused before anything runs.
    let (loaded, _) = crate::build(&args.scenario, &overrides)?;
    let fit = fit::fit(&loaded.scenario).map_err(|reasons| {
        let lines: Vec<String> = reasons.into_iter().map(|r| format!("  {}", loaded.error_at(r))).collect();
        anyhow::anyhow!("the testbed cannot host {}:\n{}", loaded.file, lines.join("\n"))
    })?;
    println!("{}", describe(&fit));
    let setup = format!(
        "the testbed's hosts send through {}, offloads {}",
        if args.host_queue == "flows" {
            "a queue per flow, served a frame each in turn (as fq_codel, and the simulator's NIC)"
        } else {
            "one FIFO (as pfifo_fast; the simulator's NIC still serves its flows in turn)"
        },
        if args.offloads == "linux" {
            "as Linux ships a NIC (TCP's packets of up to 64 KB cut into frames at the host's device, GRO at each host; the simulator's Linux stack sends such packets, transport.tso)"
        } else {
            "off (each packet a frame)"
        }
    );
    println!("{setup}");
    if args.plan {
        return Ok(());
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let window = simulator::Window::after(args.warmup, &fit);
    let simulator = simulator::figures(&args.scenario, &overrides, &fit, window, &args.out.join("simulator"))?;
    let (kernel, flagged) = testbed_runs(&fit, &args)?;
    let rows = compare::rows(&kernel, &simulator);
    let mut md = compare::markdown(&rows, kernel.len(), flagged.len());
    if !flagged.is_empty() {
        md.push_str(
            "\nCPU-bound testbed runs, left out of the kernel's figures (a core was busy 95 % of the run):\n\n",
        );
        md.push_str(&compare::markdown(&compare::rows(&flagged, &simulator), flagged.len(), 0));
    }
    md.push_str(&format!("\nHow it ran: {setup}; the simulator's stack: {}.\n", args.stack));
    md.push_str("\nWhat the testbed does differently:\n");
    for n in &fit.notes {
        md.push_str(&format!("- {n}\n"));
    }
    write(&args.out.join("twin.md"), md.as_bytes())?;
    write(&args.out.join("twin.csv"), &compare::csv(&rows)?)?;
    let title = format!("{} on Linux (testbed) and in the simulator ({} stack)", loaded.file, args.stack);
    write(&args.out.join("twin.png"), &compare::png(&rows, &title)?)?;
    print!("{md}");
    println!("wrote {}/twin.md, twin.csv and twin.png", args.out.display());
    Ok(())
}

/// What the testbed will be, in words.
fn describe(f: &Fit) -> String {
    let mut s = format!(
        "testbed: {} hosts on one switch, ports at {}, a {}-byte buffer each, {}, MTU {}, minimum RTO {:?}, initial window {}; {} measured a run\n",
        f.hosts,
        sluice_sim::time::Rate(f.rate_bps),
        f.queue_bytes,
        if f.ce_threshold > 0 { format!("CE marks above {} bytes", f.ce_threshold) } else { "no ECN marking".into() },
        f.mtu,
        f.rto_min,
        f.init_cwnd,
        humantime(f.duration),
    );
    for (class, cc) in &f.classes {
        s.push_str(&format!("class {class}: {cc}\n"));
    }
    s.trim_end().to_string()
}

fn humantime(d: Duration) -> String {
    format!("{} s", crate::sweep::display(Some(d.as_secs_f64())))
}

/// The testbed's runs: those that were not CPU-bound, and those that were.
#[cfg(feature = "host")]
fn testbed_runs(fit: &Fit, args: &TwinArgs) -> Result<(Vec<Run>, Vec<Run>)> {
    testbed::runs(fit, args)
}

#[cfg(not(feature = "host"))]
fn testbed_runs(_: &Fit, _: &TwinArgs) -> Result<(Vec<Run>, Vec<Run>)> {
    bail!(
        "this sluice was built without the Linux half, which runs the testbed: build it with `cargo build --release -p sluice-cli --features host` \
         (`sluice twin --plan` checks a scenario's fit without it)"
    )
}

fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
