//! The `sluice testbed` and `sluice proxy` subcommands.

use crate::sys;
use crate::testbed::circuit::{self, Change, CircuitPlan};
use crate::testbed::delay::DelayLine;
use crate::testbed::evidence::Recorder;
use crate::testbed::netns::{self, Offloads, Shaper, TestbedOptions};
use crate::testbed::proxy;
use anyhow::{bail, Context, Result};
use clap::{Subcommand, ValueEnum};
use std::io::Write;
use std::time::{Duration, Instant};

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
        /// Each shaper's queue limit in bytes, as a scenario states a buffer (replaces
        /// --queue-packets).
        #[arg(long)]
        queue_bytes: Option<u64>,
        /// Segmentation and receive offloads: off (every queued packet one frame) or as Linux
        /// ships a NIC (TCP's packets of up to 64 KB cut into frames at the host's device, GRO
        /// at each host; the switch forwards frames).
        #[arg(long, value_enum, default_value = "off")]
        offloads: OffloadsArg,
        /// Steer each flow to one CPU (RPS), so a sender moving between CPUs does not reorder
        /// its packets.
        #[arg(long)]
        steer_flows: bool,
        /// Shape each host's own link at the rate too, as a NIC serializes.
        #[arg(long)]
        shape_hosts: bool,
    },
    /// Record a run's evidence: per switch port bytes, packets, drops and the queue over time;
    /// per host the kernel's TCP counters; every device's offloads; CPU per core, flagging a run
    /// in which a core was saturated.
    Record {
        /// Namespace prefix.
        #[arg(long, default_value = "sl")]
        prefix: String,
        /// Seconds to record.
        #[arg(long)]
        secs: f64,
        /// Milliseconds between queue samples.
        #[arg(long, default_value_t = 10)]
        sample_ms: u64,
        /// Also write evidence.json, queue.csv and connections.csv into this directory.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
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

/// Offloads on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OffloadsArg {
    /// Checksums in software, no TSO, no GRO.
    Off,
    /// As Linux ships a NIC: GSO at the hosts' devices (where a NIC's TSO cuts), GRO at the hosts.
    Linux,
}

/// Runs a `sluice testbed` subcommand.
pub fn run_testbed(cmd: TestbedCmd) -> Result<()> {
    match cmd {
        TestbedCmd::Up { prefix, hosts, rate, shaper, ce_threshold, no_int_switch, mtu, queue_packets, queue_bytes, offloads, steer_flows, shape_hosts } => {
            let tb = netns::up(&TestbedOptions {
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
                queue_bytes,
                offloads: match offloads {
                    OffloadsArg::Off => Offloads::Off,
                    OffloadsArg::Linux => Offloads::Linux,
                },
                steer_flows,
                shape_hosts,
            })?;
            print!("{}", tb.describe());
        }
        TestbedCmd::Record { prefix, secs, sample_ms, out } => record(&prefix, secs, sample_ms, out.as_deref())?,
        TestbedCmd::Circuit { prefix, sender, receiver, slow, fast, day_ms, week_ms, tau_ms, weeks, ack_delay_ms } => {
            circuit(&prefix, sender, receiver, (&slow, &fast), (day_ms, week_ms, tau_ms), weeks, ack_delay_ms)?
        }
        TestbedCmd::Down { prefix } => {
            let removed = netns::down(&prefix)?;
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

/// `sluice testbed circuit`: the schedule on a running testbed, a line per change and the rate
/// each day reached.
fn circuit(prefix: &str, sender: u8, receiver: u8, (slow, fast): (&str, &str), (day_ms, week_ms, tau_ms): (f64, f64, f64), weeks: u32, ack_delay_ms: f64) -> Result<()> {
    let tb = netns::get(prefix)?.with_context(|| format!("--prefix {prefix}: no testbed is up (run `sluice testbed up --prefix {prefix}`)"))?;
    let ms = |flag: &str, v: f64| match v {
        v if v >= 0.0 && v.is_finite() => Ok(Duration::from_secs_f64(v / 1e3)),
        _ => Err(anyhow::anyhow!("{flag}: expected a non-negative number of milliseconds, got {v}")),
    };
    let plan = CircuitPlan {
        sender_port: format!("p{sender}"),
        receiver_port: format!("p{receiver}"),
        slow_bps: sys::parse_rate(slow).with_context(|| "--slow")?,
        fast_bps: sys::parse_rate(fast).with_context(|| "--fast")?,
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
    Ok(())
}

/// `sluice testbed record`: a run's evidence, printed and, with `out`, written as evidence.json,
/// queue.csv and connections.csv.
fn record(prefix: &str, secs: f64, sample_ms: u64, out: Option<&std::path::Path>) -> Result<()> {
    if !(secs > 0.0 && secs <= 3600.0) {
        bail!("--secs: expected more than 0 and at most 3600 seconds, got {secs}");
    }
    let tb = netns::get(prefix)?.with_context(|| format!("--prefix {prefix}: no testbed is up (run `sluice testbed up --prefix {prefix}`)"))?;
    let r = Recorder::start(&tb, Duration::from_millis(sample_ms)).context("--sample-ms")?;
    std::thread::sleep(Duration::from_secs_f64(secs));
    let e = r.finish()?;
    print!("{}", e.text());
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).with_context(|| format!("--out {}: cannot create it", dir.display()))?;
        std::fs::write(dir.join("evidence.json"), serde_json::to_string_pretty(&e)?)?;
        std::fs::write(dir.join("queue.csv"), e.queue_csv())?;
        std::fs::write(dir.join("connections.csv"), e.connections_csv())?;
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
