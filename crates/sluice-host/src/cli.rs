//! The `sluice host` and `sluice testbed` subcommands.

use crate::agent::{self, LoadOptions, PolicyKey};
use crate::circuit::{self, Change, CircuitPlan};
use crate::delay::DelayLine;
use crate::fleet::{self, FleetOptions};
use sluice_platform::cli::EtcdArgs;
use crate::proxy;
use crate::switch::{self, PortConfig};
use crate::sys;
use crate::telemetry::{self, HistField};
use crate::testbed::{self, Shaper, TestbedOptions};
use anyhow::{bail, Context, Result};
use clap::{Subcommand, ValueEnum};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
        #[arg(long, default_value = agent::DEFAULT_CGROUP)]
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

/// `sluice agent status` and the first part of `sluice host status`: the programs, the policy in
/// force and, in fleet mode, the fleet figures.
fn agent_status() -> Result<String> {
    if agent::state()?.is_none() {
        return Ok("host agent: not loaded\n".into());
    }
    Ok(format!("{}{}{}", agent::status_text()?, crate::classes::status_text()?, sluice_platform::fleet::figures_text()))
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
            let p = crate::service::check(&policy).map_err(anyhow::Error::msg)?;
            let names: Vec<String> = p.classes.iter().map(|c| format!("{} ({})", c.name, c.cc)).collect();
            println!("policy {}: {}", policy.display(), if names.is_empty() { "no classes".into() } else { names.join(", ") });
        }
        (None, Some(policy)) => {
            let opts = crate::service::AgentOptions { policy, cgroup: args.cgroup, poll: Duration::from_millis(args.poll_ms) };
            if crate::service::run(&opts)? == crate::service::Stopped::Refused {
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
        /// Egress rate the queue estimate drains at (match the port's shaper), e.g. 1gbit.
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
    /// Ports, queue estimates and counters.
    Status {
        /// Network namespace.
        #[arg(long)]
        netns: Option<String>,
    },
}

/// `sluice testbed ...`: network namespaces to try the host path on one machine.
#[derive(Subcommand, Debug)]
pub enum TestbedCmd {
    /// Create hosts, a switch, veths, shapers and the INT switch; print names and addresses.
    Up {
        /// Namespace prefix.
        #[arg(long, default_value = "sl")]
        prefix: String,
        /// Number of hosts.
        #[arg(long, default_value_t = 3)]
        hosts: u8,
        /// Rate of each switch port, e.g. 1gbit.
        #[arg(long, default_value = "1gbit")]
        rate: String,
        /// Shaper on switch ports.
        #[arg(long, value_enum, default_value = "htb")]
        shaper: ShaperArg,
        /// CE marking threshold of the INT switch, bytes (0: off).
        #[arg(long, default_value_t = 30_000)]
        ce_threshold: u64,
        /// Do not attach the INT switch.
        #[arg(long)]
        no_int_switch: bool,
        /// MTU of every link.
        #[arg(long, default_value_t = 1500)]
        mtu: u32,
        /// Each shaper's queue limit, packets.
        #[arg(long, default_value_t = 1000)]
        queue_packets: u32,
    },
    /// Circuit mode: one host pair's path alternates between a slow rate and a fast one (a
    /// circuit day) every week, and ACKs to the sender carry ECE from tau before each day to its
    /// end, as a reconfigurable network's ToR signals reTCP (docs/rdcn.md).
    Circuit {
        /// Namespace prefix.
        #[arg(long, default_value = "sl")]
        prefix: String,
        /// The sending host's number (1 for <prefix>-h1).
        #[arg(long, default_value_t = 1)]
        sender: u8,
        /// The receiving host's number.
        #[arg(long, default_value_t = 3)]
        receiver: u8,
        /// Rate outside the days, e.g. 100mbit.
        #[arg(long, default_value = "100mbit")]
        slow: String,
        /// Rate during a day, e.g. 1gbit.
        #[arg(long, default_value = "1gbit")]
        fast: String,
        /// Day length, ms.
        #[arg(long, default_value_t = 20.0)]
        day_ms: f64,
        /// A day begins every this many ms.
        #[arg(long, default_value_t = 100.0)]
        week_ms: f64,
        /// The ECE signal starts this many ms before each day.
        #[arg(long, default_value_t = 5.0)]
        tau_ms: f64,
        /// Weeks to run.
        #[arg(long, default_value_t = 10)]
        weeks: u32,
        /// Hold the receiver's packets to the sender this many ms in the switch (a delay line;
        /// 0: none), for a round trip like a rack-to-rack path's.
        #[arg(long, default_value_t = 0.0)]
        ack_delay_ms: f64,
    },
    /// Remove everything `up` made.
    Down {
        /// Namespace prefix.
        #[arg(long, default_value = "sl")]
        prefix: String,
    },
}

/// Shaper kinds on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ShaperArg {
    /// htb with one class.
    Htb,
    /// tbf.
    Tbf,
}

fn secs(d: Option<f64>) -> Result<Option<Duration>> {
    match d {
        Some(s) if !(s > 0.0 && s.is_finite()) => bail!("duration {s}: expected a positive number of seconds"),
        Some(s) => Ok(Some(Duration::from_secs_f64(s))),
        None => Ok(None),
    }
}

fn policy_key(port: Option<u16>, cgroup: Option<PathBuf>) -> Result<PolicyKey> {
    match (port, cgroup) {
        (Some(p), None) => Ok(PolicyKey::Port(p)),
        (None, Some(c)) => {
            if !c.is_dir() {
                bail!("cgroup {}: no such directory (expected a cgroup v2 directory, e.g. {}/sluice)", c.display(), sys::CGROUP2_ROOT);
            }
            Ok(PolicyKey::Cgroup(c))
        }
        _ => bail!("policy: expected exactly one of --port N or --cgroup PATH"),
    }
}

/// Runs a `sluice host` subcommand.
pub fn run_host(cmd: HostCmd) -> Result<()> {
    let mut out = std::io::stdout();
    match cmd {
        HostCmd::Load { cgroup, no_int, no_echo, sample_us, no_cc } => {
            let st = agent::load(&LoadOptions {
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
            for d in agent::unload()? {
                println!("{d}");
            }
        }
        HostCmd::Status { netns, cgroup: _ } => {
            print!("{}", agent_status()?);
            if sys::pin_root().join("switch").exists() || netns.is_some() {
                print!("{}", switch::status_text(netns.as_deref())?);
            }
        }
        HostCmd::Set { int, echo, sample_us, echo_queue_max, echo_util_max, echo_lat_max } => {
            let c = agent::set(int.map(Into::into), echo.map(Into::into), sample_us.map(|u| u * 1000))?;
            println!("int: {}  echo: {}  sample: {} us", c.int_enabled, c.echo_enabled, c.sample_ns / 1000);
            if echo_queue_max.is_some() || echo_util_max.is_some() || echo_lat_max.is_some() {
                let enc = sluice_sim::packet::tcp_int::IntEncoding::default();
                let now = c.echo_bounds;
                let b = agent::EchoBounds::from_units(
                    echo_queue_max.unwrap_or(u64::from(now.queue_code) << enc.qdepth_shift),
                    echo_util_max.unwrap_or(u64::from(now.util_code) << enc.util_shift),
                    echo_lat_max.unwrap_or(u64::from(now.lat_ns)),
                    &enc,
                );
                println!("echoes clamped to: {}", agent::set_echo_bounds(b)?.echo_bounds.text(&enc));
            }
        }
        HostCmd::Policy { cmd } => match cmd {
            PolicyCmd::Set { port, cgroup, cc } => agent::policy_set(&policy_key(port, cgroup)?, &cc)?,
            PolicyCmd::Del { port, cgroup } => {
                if !agent::policy_del(&policy_key(port, cgroup)?)? {
                    bail!("no such policy entry");
                }
            }
            PolicyCmd::List => {
                for (kind, value, name) in agent::policy_list()? {
                    println!("{kind} {value} {name}");
                }
            }
        },
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
        HostCmd::Switch { cmd } => match cmd {
            SwitchCmd::Attach { dev, netns, rate, ce_threshold, qdepth_threshold, qdepth_shift, util_shift } => {
                if qdepth_shift > 63 || util_shift > 63 {
                    bail!("shifts: expected 0 to 63");
                }
                let cfg = PortConfig {
                    rate_bps: sys::parse_rate(&rate)?,
                    ce_threshold,
                    qdepth_threshold,
                    qdepth_shift,
                    util_shift,
                    ..PortConfig::default()
                };
                switch::attach(&dev, netns.as_deref(), &cfg)?;
                println!("INT switch attached to {dev}");
            }
            SwitchCmd::Detach { dev, netns } => {
                switch::detach(&dev, netns.as_deref())?;
                println!("INT switch detached from {dev}");
            }
            SwitchCmd::Status { netns } => print!("{}", switch::status_text(netns.as_deref())?),
        },
    }
    Ok(())
}

/// Runs a `sluice testbed` subcommand.
pub fn run_testbed(cmd: TestbedCmd) -> Result<()> {
    match cmd {
        TestbedCmd::Up { prefix, hosts, rate, shaper, ce_threshold, no_int_switch, mtu, queue_packets } => {
            let tb = testbed::up(&TestbedOptions {
                prefix,
                hosts,
                rate_bps: sys::parse_rate(&rate)?,
                shaper: match shaper {
                    ShaperArg::Htb => Shaper::Htb,
                    ShaperArg::Tbf => Shaper::Tbf,
                },
                ce_threshold,
                int_switch: !no_int_switch,
                mtu,
                queue_packets,
            })?;
            print!("{}", tb.describe());
        }
        TestbedCmd::Circuit { prefix, sender, receiver, slow, fast, day_ms, week_ms, tau_ms, weeks, ack_delay_ms } => {
            let tb = testbed::get(&prefix)?.with_context(|| format!("--prefix {prefix}: no testbed is up (run `sluice testbed up --prefix {prefix}`)"))?;
            let ms = |flag: &str, v: f64| match v {
                v if v >= 0.0 && v.is_finite() => Ok(Duration::from_secs_f64(v / 1e3)),
                _ => Err(anyhow::anyhow!("{flag}: expected a non-negative number of milliseconds, got {v}")),
            };
            let plan = CircuitPlan {
                sender_port: format!("p{sender}"),
                receiver_port: format!("p{receiver}"),
                slow_bps: sys::parse_rate(&slow).with_context(|| "--slow")?,
                fast_bps: sys::parse_rate(&fast).with_context(|| "--fast")?,
                day: ms("--day-ms", day_ms)?,
                week: ms("--week-ms", week_ms)?,
                tau: ms("--tau-ms", tau_ms)?,
                weeks,
            };
            plan.validate(&tb)?;
            let delay = ms("--ack-delay-ms", ack_delay_ms)?;
            let line = if delay.is_zero() { None } else { Some(DelayLine::start(&tb, receiver, sender, delay)?) };
            let log = circuit::run(&tb, &plan, Instant::now(), |a| {
                let what = match a.change {
                    Change::Signal(on) => format!("ECE signal {}", if on { "on" } else { "off" }),
                    Change::Rate(bps) => format!("rate {} Mb/s", bps / 1_000_000),
                };
                // A closed stdout must not stop the schedule before it restores the slow rate.
                let _ = writeln!(std::io::stdout(), "{:>10.3} ms  {what}  ({} bytes sent to the receiver)", a.at.as_secs_f64() * 1e3, a.tx_bytes);
            })?;
            if let Some(line) = line {
                line.stop()?;
            }
            for (i, r) in circuit::day_rates(&log, plan.fast_bps).iter().enumerate() {
                let share = r / plan.fast_bps as f64 * 100.0;
                let _ = writeln!(std::io::stdout(), "day {}: {:.1} Mb/s to the receiver ({share:.0}% of the fast rate)", i + 1, r / 1e6);
            }
        }
        TestbedCmd::Down { prefix } => {
            let removed = testbed::down(&prefix)?;
            if removed.is_empty() {
                println!("testbed {prefix}: nothing to remove");
            }
            for r in removed {
                println!("removed {r}");
            }
        }
    }
    Ok(())
}

/// `sluice proxy ...`: an L7 proxy relaying by userspace copy, `splice(2)` or a BPF sockmap.
#[derive(Subcommand, Debug)]
pub enum ProxyCmd {
    /// Relay clients to backends until interrupted (clients send `CONNECT\n` and wait for `OK\n`).
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// A backend address (repeat for several; chosen round robin).
        #[arg(long, required = true)]
        backend: Vec<std::net::SocketAddr>,
        /// How the bytes move (sockmap needs root).
        #[arg(long, value_enum, default_value = "copy")]
        mode: proxy::Mode,
    },
    /// Measure every mode on loopback against a checking backend: throughput of checksummed
    /// streams and short connections, the machine's CPU per byte and per request, and what the
    /// relay adds to a direct path's.
    Bench {
        /// Megabytes each of the two streams carries.
        #[arg(long, default_value_t = 512)]
        megabytes: u64,
        /// Seconds of short connections per mode.
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
        /// Rounds over all modes, interleaved; the figures are medians, with the range over rounds.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Relay modes to measure besides the direct path (repeat for several; default all).
        #[arg(long, value_enum)]
        mode: Vec<proxy::Mode>,
    },
}

/// Runs a `sluice proxy` subcommand.
pub fn run_proxy(cmd: ProxyCmd) -> Result<()> {
    match cmd {
        ProxyCmd::Serve { listen, backend, mode } => {
            let p = proxy::Proxy::start(listen, backend, mode)?;
            eprintln!("sluice proxy: relaying from {} in {mode:?} mode; Ctrl-C stops", p.addr);
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        ProxyCmd::Bench { megabytes, seconds, rounds, mode } => {
            if megabytes == 0 || megabytes > 1 << 20 {
                bail!("--megabytes: expected 1 to 1048576 megabytes per stream, got {megabytes}");
            }
            if !(seconds > 0.0 && seconds <= 600.0) {
                bail!("--seconds: expected more than 0 and at most 600 seconds, got {seconds}");
            }
            if !(1..=100).contains(&rounds) {
                bail!("--rounds: expected 1 to 100 rounds, got {rounds}");
            }
            let relays = if mode.is_empty() { vec![proxy::Mode::Copy, proxy::Mode::Splice, proxy::Mode::Sockmap] } else { mode };
            let modes: Vec<_> = std::iter::once(None).chain(relays.into_iter().map(Some)).collect();
            proxy_bench(megabytes << 20, seconds, rounds, &modes)
        }
    }
}

/// `sluice proxy bench`: the direct path (`None`) and each relay mode, in interleaved rounds; a
/// relay's cost is the machine's CPU beyond the direct path's, per byte and per request.
fn proxy_bench(bytes: u64, seconds: f64, rounds: usize, modes: &[Option<proxy::Mode>]) -> Result<()> {
    let lo = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    let backend = proxy::Backend::start(lo)?;
    // Per mode, a (bulk, short connections) measurement per round.
    let mut runs = vec![Vec::new(); modes.len()];
    for round in 0..rounds {
        eprintln!("round {} of {rounds}", round + 1);
        for (i, mode) in modes.iter().enumerate() {
            let p = mode.map(|m| proxy::Proxy::start(std::net::SocketAddr::new(lo, 0), vec![backend.addr], m)).transpose()?;
            let (via, direct) = p.as_ref().map_or((backend.addr, true), |p| (p.addr, false));
            runs[i].push((proxy::bulk(via, direct, 2, bytes)?, proxy::short(via, direct, 4, seconds)?));
        }
    }
    let figures: Vec<_> = runs.iter().map(|r| proxy::BenchFigures::median(r)).collect();
    let mhz = sys::cpu_mhz().unwrap_or(0.0);
    println!("medians of {rounds} rounds (range); a relay's cost is the machine's CPU beyond the direct path's");
    println!("mode     Gbit/s  CPU s/GB             Gbit/s/core  relay CPU s/GB  relay Gbit/s/core  requests/s  CPU us/request  relay cycles/request");
    for (mode, f) in modes.iter().zip(&figures) {
        let name = mode.map_or("direct".to_string(), |m| format!("{m:?}").to_lowercase());
        let (gb, lo_gb, hi_gb) = f.cpu_per_gb;
        let relay = match mode {
            Some(_) => {
                let extra = gb - figures[0].cpu_per_gb.0;
                let per_core = if extra > 0.0 { format!("{:.1}", 8.0 / extra) } else { "-".into() };
                let cycles = (f.cpu_us_per_request - figures[0].cpu_us_per_request) * mhz;
                format!("{extra:>14.3}  {per_core:>17}  {:>10.0}  {:>14.1}  {cycles:>20.0}", f.requests_per_s, f.cpu_us_per_request)
            }
            None => format!("{:>14}  {:>17}  {:>10.0}  {:>14.1}  {:>20}", "-", "-", f.requests_per_s, f.cpu_us_per_request, "-"),
        };
        println!("{name:<8} {:>6.2}  {gb:>6.3} ({lo_gb:.3}-{hi_gb:.3})  {:>11.1}  {relay}", f.gbit_per_s, 8.0 / gb);
    }
    Ok(())
}
