//! The `sluice agent` and `sluice host` subcommands.

use crate::kernel::agent_config::{self, EchoBounds};
use crate::kernel::cc_policy::{self, Selector};
use crate::kernel::int_switch::{self, PortConfig};
use crate::kernel::sockops::{self, LoadOptions};
use crate::service::enforce::{check_file, Stopped};
use crate::service::fleet::{self, FleetOptions};
use crate::service::local::{self, AgentOptions};
use crate::service::status::agent_status;
use crate::service::telemetry::{self, HistField};
use crate::sys;
use anyhow::{bail, Result};
use clap::{Subcommand, ValueEnum};
use sluice_platform::cli::EtcdArgs;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// On or off.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Switch {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

impl From<Switch> for bool {
    fn from(s: Switch) -> bool {
        matches!(s, Switch::On)
    }
}

/// `sluice host ...`: TCP-INT and BPF congestion control on this Linux host.
#[derive(Subcommand, Debug)]
pub enum HostCmd {
    /// Load the TCP-INT agent and CC policy on a cgroup and register the BPF congestion controls.
    Load {
        /// cgroup v2 directory whose processes' connections carry TCP-INT (created if missing).
        #[arg(long, default_value = sockops::DEFAULT_CGROUP)]
        cgroup: PathBuf,
        /// Start with the option off.
        #[arg(long)]
        no_int: bool,
        /// Start with the echo off.
        #[arg(long)]
        no_echo: bool,
        /// At most one telemetry record per flow per this many microseconds (0: every segment).
        #[arg(long, default_value_t = 100)]
        sample_us: u64,
        /// Do not register dctcp, ecn_int and retcp.
        #[arg(long)]
        no_cc: bool,
    },
    /// Detach and unpin everything `load` made.
    Unload,
    /// Show what is loaded, the switches and the counters.
    Status {
        /// Also show the INT switch of this network namespace.
        #[arg(long)]
        netns: Option<String>,
        /// Accepted for symmetry with `load`: the status is of the loaded agent wherever it is.
        #[arg(long)]
        cgroup: Option<PathBuf>,
    },
    /// Change the agent's runtime switches.
    Set {
        /// Add the TCP-INT option to outgoing segments.
        #[arg(long, value_enum)]
        int: Option<Switch>,
        /// Echo what arrived in the echo fields.
        #[arg(long, value_enum)]
        echo: Option<Switch>,
        /// Telemetry sampling interval per flow, microseconds.
        #[arg(long)]
        sample_us: Option<u64>,
        /// Largest echoed queue reading accepted, bytes: larger ones are clamped and counted.
        #[arg(long)]
        echo_queue_max: Option<u64>,
        /// Largest echoed utilization accepted, percent: larger ones are clamped and counted.
        #[arg(long)]
        echo_util_max: Option<u64>,
        /// Largest echoed path latency accepted, ns: larger ones are clamped and counted.
        #[arg(long)]
        echo_lat_max: Option<u64>,
    },
    /// Choose the congestion control per port or cgroup (the per-class selection).
    Policy {
        #[command(subcommand)]
        cmd: PolicyCmd,
    },
    /// Print a line per telemetry record.
    Trace {
        /// Stop after this many seconds (default: until Ctrl-C).
        #[arg(long)]
        duration: Option<f64>,
        /// Only records that carry an echo (the sender's view of its path).
        #[arg(long)]
        echo_only: bool,
    },
    /// A live table of flows and their telemetry.
    Flows {
        /// Stop after this many seconds (default: until Ctrl-C).
        #[arg(long)]
        duration: Option<f64>,
    },
    /// Log2 histogram of one telemetry field.
    Hist {
        /// qdepth, util, lat, rtt or cwnd.
        field: String,
        /// One histogram per hop ID.
        #[arg(long)]
        per_hop: bool,
        /// Collect for this many seconds (default: until Ctrl-C).
        #[arg(long)]
        duration: Option<f64>,
    },
    /// Serve flows and counters in Prometheus text format.
    Export {
        /// Address to listen on, e.g. 127.0.0.1:9372.
        #[arg(long)]
        listen: String,
        /// Stop after this many seconds (default: until Ctrl-C).
        #[arg(long)]
        duration: Option<f64>,
    },
    /// The software INT switch on tc.
    Switch {
        #[command(subcommand)]
        cmd: SwitchCmd,
    },
}

/// `sluice agent ...`: the host's platform service.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AgentArgs {
    #[command(subcommand)]
    cmd: Option<AgentCmd>,
    /// The policy to run: `[classes]` (and `version`) in a scenario's schema (docs/platform.md).
    #[arg(long, value_name = "FILE", conflicts_with = "etcd")]
    policy: Option<PathBuf>,
    /// The cgroup whose connections (its processes' and its descendants') the agent sees, when it
    /// loads the programs itself: by default the cgroup v2 root, every connection of the host.
    #[arg(long, default_value = sys::CGROUP2_ROOT)]
    cgroup: PathBuf,
    /// How often the policy file is looked at for changes, in milliseconds.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    poll_ms: u64,
    #[command(flatten)]
    etcd: EtcdArgs,
    /// Fleet mode: this host's labels, which choose its policy's groups (repeat: --label rack=b).
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    labels: Vec<(String, String)>,
    /// Fleet mode: the host's name in reports (default: the kernel's host name).
    #[arg(long)]
    host: Option<String>,
    /// Fleet mode: where the last version applied and the log of versions are kept.
    #[arg(long, default_value = "/var/lib/sluice")]
    state_dir: PathBuf,
    /// Fleet mode: check and report each version without writing the kernel's tables.
    #[arg(long)]
    dry_run: bool,
    /// Fleet mode: seconds the host's registration outlives its last renewal.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(2..=3600))]
    lease_ttl: u64,
    /// Fleet mode: how often the report (versions, counters) is written, in milliseconds.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    report_every_ms: u64,
    /// Fleet mode: negotiation outcomes are reported over the last this many seconds, the window
    /// `sluice admin status` flags falls_back over.
    #[arg(long, default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    window_s: u64,
}

/// `KEY=VALUE` of `--label`.
fn parse_label(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, as rack=b; got {s:?}")),
    }
}

/// `sluice agent status|check`.
#[derive(Subcommand, Debug)]
pub enum AgentCmd {
    /// The policy in force: version, generation, classes with their connections, refusals.
    Status,
    /// Check a policy file as the agent would, without applying it.
    Check {
        /// The policy file.
        policy: PathBuf,
    },
}

/// Runs `sluice agent ...`.
pub fn run_agent(args: AgentArgs) -> Result<()> {
    let fleet = !args.etcd.etcd.is_empty();
    if !fleet && (!args.labels.is_empty() || args.dry_run) {
        bail!("--label and --dry-run belong to fleet mode: add --etcd URL");
    }
    match (args.cmd, args.policy) {
        (Some(AgentCmd::Status), _) => print!("{}", agent_status()?),
        (Some(AgentCmd::Check { policy }), _) => {
            let p = check_file(&policy).map_err(anyhow::Error::msg)?;
            let names: Vec<String> = p.classes.iter().map(|c| format!("{} ({})", c.name, c.cc)).collect();
            println!("policy {}: {}", policy.display(), if names.is_empty() { "no classes".into() } else { names.join(", ") });
        }
        (None, Some(policy)) => {
            let opts = AgentOptions { policy, cgroup: args.cgroup, poll: Duration::from_millis(args.poll_ms) };
            if local::run(&opts)? == Stopped::Refused {
                bail!("the agent did not start");
            }
        }
        (None, None) if fleet => {
            let labels: BTreeMap<String, String> = args.labels.iter().cloned().collect();
            if labels.len() != args.labels.len() {
                bail!("--label: each label key once");
            }
            let opts = FleetOptions {
                etcd: args.etcd.client()?,
                prefix: args.etcd.prefix.clone(),
                host: args.host.unwrap_or_else(sluice_platform::fleet::hostname),
                labels,
                state_dir: args.state_dir,
                dry_run: args.dry_run,
                cgroup: args.cgroup,
                lease_ttl: args.lease_ttl,
                report_every: Duration::from_millis(args.report_every_ms),
                window: Duration::from_secs(args.window_s),
            };
            fleet::run(&opts)?;
        }
        (None, None) => bail!(
            "sluice agent: expected --policy FILE (the policy to run) or --etcd URL (the fleet's), or `sluice agent status` or `sluice agent check FILE`"
        ),
    }
    Ok(())
}

/// `sluice host policy ...`.
#[derive(Subcommand, Debug)]
pub enum PolicyCmd {
    /// Connections on a port, or opened from a cgroup, use an algorithm.
    Set {
        /// Local or remote TCP port.
        #[arg(long, conflicts_with = "cgroup", required_unless_present = "cgroup")]
        port: Option<u16>,
        /// cgroup v2 directory of the connecting processes.
        #[arg(long)]
        cgroup: Option<PathBuf>,
        /// Algorithm name, e.g. dctcp, ecn_int, retcp, cubic.
        cc: String,
    },
    /// Remove an entry.
    Del {
        /// Local or remote TCP port.
        #[arg(long, conflicts_with = "cgroup", required_unless_present = "cgroup")]
        port: Option<u16>,
        /// cgroup v2 directory.
        #[arg(long)]
        cgroup: Option<PathBuf>,
    },
    /// List the entries.
    List,
}

/// `sluice host switch ...`.
#[derive(Subcommand, Debug)]
pub enum SwitchCmd {
    /// Attach the INT switch programs to a device's tc ingress and egress.
    Attach {
        /// Network device, e.g. eth1.
        dev: String,
        /// Network namespace the device is in (default: this one).
        #[arg(long)]
        netns: Option<String>,
        /// The port's egress rate (its shaper's), for utilization and the backlog's wait, e.g. 1gbit.
        #[arg(long, default_value = "1gbit")]
        rate: String,
        /// Mark ECT packets CE above this many queued bytes (0: never).
        #[arg(long, default_value_t = 0)]
        ce_threshold: u64,
        /// Queue bytes at which INTval reports the queue branch.
        #[arg(long, default_value_t = 8192)]
        qdepth_threshold: u64,
        /// INTval queue unit, 2^N bytes.
        #[arg(long, default_value_t = 13)]
        qdepth_shift: u32,
        /// INTval utilization unit, 2^N percent.
        #[arg(long, default_value_t = 0)]
        util_shift: u32,
    },
    /// Detach them.
    Detach {
        /// Network device.
        dev: String,
        /// Network namespace the device is in.
        #[arg(long)]
        netns: Option<String>,
    },
    /// Ports, their backlogs and counters.
    Status {
        /// Network namespace.
        #[arg(long)]
        netns: Option<String>,
    },
}

fn secs(d: Option<f64>) -> Result<Option<Duration>> {
    match d {
        Some(s) if !(s > 0.0 && s.is_finite()) => bail!("duration {s}: expected a positive number of seconds"),
        Some(s) => Ok(Some(Duration::from_secs_f64(s))),
        None => Ok(None),
    }
}

/// The connections `--port` or `--cgroup` name in `sluice host policy`.
fn selector(port: Option<u16>, cgroup: Option<PathBuf>) -> Result<Selector> {
    match (port, cgroup) {
        (Some(p), None) => Ok(Selector::Port(p)),
        (None, Some(c)) => {
            if !c.is_dir() {
                bail!("cgroup {}: no such directory (expected a cgroup v2 directory, e.g. {}/sluice)", c.display(), sys::CGROUP2_ROOT);
            }
            Ok(Selector::Cgroup(c))
        }
        _ => bail!("policy: expected exactly one of --port N or --cgroup PATH"),
    }
}

/// Runs a `sluice host` subcommand.
pub fn run_host(cmd: HostCmd) -> Result<()> {
    let mut out = std::io::stdout();
    match cmd {
        HostCmd::Load { cgroup, no_int, no_echo, sample_us, no_cc } => {
            let st = sockops::load(&LoadOptions {
                cgroup,
                int_enabled: !no_int,
                echo_enabled: !no_echo,
                sample_ns: sample_us * 1000,
                register_cc: !no_cc,
            })?;
            println!("host agent loaded on cgroup {} (add processes: echo PID > {}/cgroup.procs)", st.cgroup.display(), st.cgroup.display());
            if !st.ccs.is_empty() {
                println!("congestion control registered: {}", st.ccs.join(" "));
            }
        }
        HostCmd::Unload => {
            for d in sockops::unload()? {
                println!("{d}");
            }
        }
        HostCmd::Status { netns, cgroup: _ } => {
            print!("{}", agent_status()?);
            if crate::kernel::pins::pin_root().join("switch").exists() || netns.is_some() {
                print!("{}", int_switch::switch_status(netns.as_deref())?);
            }
        }
        HostCmd::Set { int, echo, sample_us, echo_queue_max, echo_util_max, echo_lat_max } => {
            let c = agent_config::set(int.map(Into::into), echo.map(Into::into), sample_us.map(|u| u * 1000))?;
            println!("int: {}  echo: {}  sample: {} us", c.int_enabled, c.echo_enabled, c.sample_ns / 1000);
            if echo_queue_max.is_some() || echo_util_max.is_some() || echo_lat_max.is_some() {
                set_echo_bounds(c.echo_bounds, echo_queue_max, echo_util_max, echo_lat_max)?;
            }
        }
        HostCmd::Policy { cmd } => run_policy(cmd)?,
        HostCmd::Trace { duration, echo_only } => {
            telemetry::trace(secs(duration)?, echo_only, &mut out)?;
        }
        HostCmd::Flows { duration } => {
            telemetry::flows(secs(duration)?, &mut out)?;
        }
        HostCmd::Hist { field, per_hop, duration } => {
            let f: HistField = field.parse()?;
            telemetry::hist(f, per_hop, secs(duration)?, &mut out)?;
        }
        HostCmd::Export { listen, duration } => telemetry::export(&listen, secs(duration)?)?,
        HostCmd::Switch { cmd } => run_switch(cmd)?,
    }
    Ok(())
}

/// `sluice host set --echo-*-max`: the bounds given, the others as they are now.
fn set_echo_bounds(now: EchoBounds, queue: Option<u64>, util: Option<u64>, lat: Option<u64>) -> Result<()> {
    let enc = sluice_sim::packet::tcp_int::IntEncoding::default();
    let b = EchoBounds::from_units(
        queue.unwrap_or(u64::from(now.queue_code) << enc.qdepth_shift),
        util.unwrap_or(u64::from(now.util_code) << enc.util_shift),
        lat.unwrap_or(u64::from(now.lat_ns)),
        &enc,
    );
    println!("echoes clamped to: {}", agent_config::set_echo_bounds(b)?.echo_bounds.text(&enc));
    Ok(())
}

/// Runs a `sluice host policy` subcommand.
fn run_policy(cmd: PolicyCmd) -> Result<()> {
    match cmd {
        PolicyCmd::Set { port, cgroup, cc } => cc_policy::set(&selector(port, cgroup)?, &cc)?,
        PolicyCmd::Del { port, cgroup } => {
            if !cc_policy::del(&selector(port, cgroup)?)? {
                bail!("no such policy entry");
            }
        }
        PolicyCmd::List => {
            for (kind, value, name) in cc_policy::list()? {
                println!("{kind} {value} {name}");
            }
        }
    }
    Ok(())
}

/// Runs a `sluice host switch` subcommand.
fn run_switch(cmd: SwitchCmd) -> Result<()> {
    match cmd {
        SwitchCmd::Attach { dev, netns, rate, ce_threshold, qdepth_threshold, qdepth_shift, util_shift } => {
            if qdepth_shift > 63 || util_shift > 63 {
                bail!("shifts: expected 0 to 63");
            }
            let cfg = PortConfig { rate_bps: sys::parse_rate(&rate)?, ce_threshold, qdepth_threshold, qdepth_shift, util_shift, ..PortConfig::default() };
            int_switch::attach(&dev, netns.as_deref(), &cfg)?;
            println!("INT switch attached to {dev}");
        }
        SwitchCmd::Detach { dev, netns } => {
            int_switch::detach(&dev, netns.as_deref())?;
            println!("INT switch detached from {dev}");
        }
        SwitchCmd::Status { netns } => print!("{}", int_switch::switch_status(netns.as_deref())?),
    }
    Ok(())
}

