//! What a testbed run leaves as evidence, so each of its figures can be explained: per switch
//! port, bytes and packets sent, drops by reason (the port's buffer full, the device's backlog
//! full) and its queue's depth in bytes over time (tc's qdisc statistics); per host, its
//! device's drops and the kernel's TCP counters (retransmissions, RTOs, tail-loss probes,
//! recoveries, reordering, CE marks received: each CE packet a host receives was marked on the
//! one switch port facing it); per connection, its window, RTT, RTO, pacing and delivery rates
//! and retransmissions over time (`ss -tin`); the offloads in effect on every device; and the CPU of every core,
//! with the run flagged when a core was busy nearly all the time, so a figure the testbed's own
//! CPU shaped is shown apart.

use crate::sys::{run, NetnsGuard};
use crate::testbed::netns::Testbed;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A core busy at least this share of a run makes the run CPU-bound: veth forwarding, the
/// shapers and the senders all run on the host's cores, so a saturated core delays packets as no
/// switch would.
pub const CPU_BOUND: f64 = 0.95;

/// The kernel's TCP and IP counters recorded per host (`/proc/net/snmp`, `/proc/net/netstat`).
pub const HOST_COUNTERS: [(&str, &str); 16] = [
    ("Tcp", "OutSegs"),
    ("Tcp", "RetransSegs"),
    ("TcpExt", "TCPTimeouts"),
    ("TcpExt", "TCPSpuriousRTOs"),
    ("TcpExt", "TCPLossProbes"),
    ("TcpExt", "TCPLossProbeRecovery"),
    ("TcpExt", "TCPSackRecovery"),
    ("TcpExt", "TCPRenoRecovery"),
    ("TcpExt", "TCPFastRetrans"),
    ("TcpExt", "TCPLostRetransmit"),
    ("TcpExt", "TCPSACKReorder"),
    ("TcpExt", "TCPDSACKRecv"),
    ("TcpExt", "DelayedACKs"),
    ("TcpExt", "TCPDeliveredCE"),
    ("IpExt", "InCEPkts"),
    ("IpExt", "InOctets"),
];

/// A switch port's qdisc statistics at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QdiscStats {
    /// Bytes sent.
    pub bytes: u64,
    /// Packets sent (a GSO packet counts once).
    pub packets: u64,
    /// Packets dropped because the buffer was full.
    pub drops: u64,
    /// Times the shaper held a packet back.
    pub overlimits: u64,
    /// Bytes queued now.
    pub backlog: u64,
}

/// One port's figures over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PortFigures {
    /// The switch port (`p1`).
    pub port: String,
    /// The host it faces.
    pub host: String,
    /// Bytes and packets sent, drops and overlimits over the run; the backlog at its end.
    pub sent: QdiscStats,
    /// Packets the device dropped (a veth's peer backlog full), over the run.
    pub device_drops: u64,
    /// The largest queue sampled, bytes.
    pub queue_max: u64,
    /// The mean of the queue samples, bytes.
    pub queue_mean: f64,
}

/// One host's figures over a run: each counter of `HOST_COUNTERS` by `Group.Name`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HostFigures {
    /// The host's namespace.
    pub host: String,
    /// Counter deltas.
    pub counters: BTreeMap<String, u64>,
    /// Packets its eth0 dropped (towards the switch: the switch port's backlog full).
    pub device_drops: u64,
}

/// The offloads a device runs with (`ethtool -k`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceOffloads {
    /// `namespace/device`.
    pub device: String,
    /// TCP segmentation offload.
    pub tso: bool,
    /// Generic segmentation offload.
    pub gso: bool,
    /// Generic receive offload.
    pub gro: bool,
    /// Transmit checksumming (TSO and GSO need it).
    pub tx_checksum: bool,
}

/// One connection's state at one moment, as `ss -tin` shows it (the kernel's `tcp_info`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ConnSample {
    /// Milliseconds since the recording started.
    pub ms: f64,
    /// The host's namespace.
    pub host: String,
    /// This end, `addr:port`.
    pub local: String,
    /// The peer's end.
    pub remote: String,
    /// The congestion control.
    pub cc: String,
    /// Congestion window, segments.
    pub cwnd: u64,
    /// Slow-start threshold, segments, once set.
    pub ssthresh: Option<u64>,
    /// Smoothed RTT, microseconds.
    pub rtt_us: f64,
    /// The retransmission timeout, milliseconds.
    pub rto_ms: f64,
    /// Pacing rate, bits/s, where the kernel paces.
    pub pacing_bps: Option<u64>,
    /// Delivery rate, bits/s.
    pub delivery_bps: Option<u64>,
    /// Segments retransmitted over the connection's life.
    pub retrans_total: u64,
    /// Segments presumed lost now.
    pub lost: u64,
}

/// How often the connections are sampled: each sample runs `ss` in every host.
const CONN_EVERY: Duration = Duration::from_millis(100);

/// A rate as `ss` prints it: `394299253656bps`, or with a k, M or G before `bps`.
fn ss_rate(v: &str) -> Option<u64> {
    let v = v.strip_suffix("bps")?;
    let (num, mult) = match v.chars().last()? {
        'k' | 'K' => (&v[..v.len() - 1], 1e3),
        'M' => (&v[..v.len() - 1], 1e6),
        'G' => (&v[..v.len() - 1], 1e9),
        _ => (v, 1.0),
    };
    num.parse::<f64>().ok().map(|x| (x * mult) as u64)
}

/// The connections of `ss -tinH state established`: an address line, then an indented line of
/// `key:value` and `key value` fields.
fn parse_ss(text: &str, ms: f64, host: &str) -> Vec<ConnSample> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        let cols: Vec<&str> = l.split_whitespace().collect();
        if cols.len() < 4 || l.starts_with(char::is_whitespace) {
            continue;
        }
        let Some(info) = lines.next_if(|n| n.starts_with(char::is_whitespace)) else { continue };
        let mut c = ConnSample { ms, host: host.to_string(), local: cols[2].to_string(), remote: cols[3].to_string(), ..ConnSample::default() };
        let fields: Vec<&str> = info.split_whitespace().collect();
        c.cc = fields.first().map_or(String::new(), |f| f.to_string());
        for (i, f) in fields.iter().enumerate() {
            let next = fields.get(i + 1).copied().unwrap_or("");
            match f.split_once(':') {
                Some(("cwnd", v)) => c.cwnd = v.parse().unwrap_or(0),
                Some(("ssthresh", v)) => c.ssthresh = v.parse().ok(),
                Some(("rtt", v)) => c.rtt_us = v.split('/').next().and_then(|x| x.parse::<f64>().ok()).map_or(0.0, |x| x * 1e3),
                Some(("rto", v)) => c.rto_ms = v.parse().unwrap_or(0.0),
                Some(("retrans", v)) => c.retrans_total = v.split('/').nth(1).and_then(|x| x.parse().ok()).unwrap_or(0),
                Some(("lost", v)) => c.lost = v.parse().unwrap_or(0),
                _ if *f == "pacing_rate" => c.pacing_bps = ss_rate(next),
                _ if *f == "delivery_rate" => c.delivery_bps = ss_rate(next),
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

/// Every established connection of every host now.
fn connections(tb: &Testbed, ms: f64) -> Result<Vec<ConnSample>> {
    let mut out = Vec::new();
    for h in &tb.hosts {
        let text = run("ip", &["netns", "exec", &h.netns, "ss", "-tinH", "state", "established"])?;
        out.extend(parse_ss(&text, ms, &h.netns));
    }
    Ok(out)
}

/// What a run leaves.
#[derive(Clone, Debug, Serialize)]
pub struct Evidence {
    /// How long the recording ran, seconds.
    pub secs: f64,
    /// Per switch port.
    pub ports: Vec<PortFigures>,
    /// Per host.
    pub hosts: Vec<HostFigures>,
    /// Every device's offloads.
    pub offloads: Vec<DeviceOffloads>,
    /// Each core's busy share of the run (0 to 1).
    pub cpu_busy: Vec<f64>,
    /// A core was busy at least `CPU_BOUND` of the run: its figures are shown apart.
    pub cpu_bound: bool,
    /// Packets dropped because a CPU's input backlog was full (`/proc/net/softnet_stat`; the
    /// machine's, every namespace's).
    pub backlog_drops: u64,
    /// The queue samples: milliseconds since the start, port, bytes queued.
    #[serde(skip)]
    pub queue: Vec<(f64, String, u64)>,
    /// Every connection every `CONN_EVERY`.
    #[serde(skip)]
    pub connections: Vec<ConnSample>,
}

/// Each root qdisc's statistics in a namespace, by device (`tc -s -j qdisc show`).
fn qdisc_stats(netns: &str) -> Result<BTreeMap<String, QdiscStats>> {
    let out = run("tc", &["-n", netns, "-s", "-j", "qdisc", "show"])?;
    let v: serde_json::Value = serde_json::from_str(&out).with_context(|| format!("tc's JSON statistics in {netns}: {out}"))?;
    let mut stats = BTreeMap::new();
    for q in v.as_array().into_iter().flatten() {
        if q.get("root").and_then(|r| r.as_bool()) != Some(true) {
            continue;
        }
        let Some(dev) = q.get("dev").and_then(|d| d.as_str()) else { continue };
        let n = |k: &str| q.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
        stats.insert(dev.to_string(), QdiscStats { bytes: n("bytes"), packets: n("packets"), drops: n("drops"), overlimits: n("overlimits"), backlog: n("backlog") });
    }
    Ok(stats)
}

/// A device's transmit and receive drops (`ip -s -j link`).
fn device_drops(netns: &str, dev: &str) -> Result<u64> {
    let out = run("ip", &["-n", netns, "-s", "-j", "link", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out).with_context(|| format!("ip's JSON statistics of {dev}: {out}"))?;
    let stats = &v[0]["stats64"];
    Ok(stats["tx"]["dropped"].as_u64().unwrap_or(0) + stats["rx"]["dropped"].as_u64().unwrap_or(0))
}

/// The named counters of a `/proc/net/snmp`-style text: header and value lines in pairs.
fn proc_counters(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((group, names)), Some((_, values))) = (names.split_once(':'), values.split_once(':')) else { continue };
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse() {
                out.insert(format!("{group}.{n}"), v);
            }
        }
    }
    out
}

/// A host's `HOST_COUNTERS` now, read inside its namespace.
fn host_counters(netns: &str) -> Result<BTreeMap<String, u64>> {
    let ns = netns.to_string();
    let read = std::thread::spawn(move || -> Result<String> {
        let _in = NetnsGuard::enter(Some(&ns))?;
        // The thread's own view: /proc/self/net is the process's namespace, not this thread's.
        let mut s = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
        s.push_str(&std::fs::read_to_string("/proc/thread-self/net/netstat")?);
        Ok(s)
    });
    let all = proc_counters(&read.join().map_err(|_| anyhow::anyhow!("reading {netns}'s counters panicked"))??);
    Ok(HOST_COUNTERS.iter().map(|(g, n)| format!("{g}.{n}")).map(|k| (k.clone(), all.get(&k).copied().unwrap_or(0))).collect())
}

/// Each core's (busy, total) jiffies (`/proc/stat`); idle and iowait are not busy.
fn cpu_times() -> Result<Vec<(u64, u64)>> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let mut cores = Vec::new();
    for l in stat.lines().filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit)) {
        let v: Vec<u64> = l.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 5 {
            bail!("/proc/stat: a line with fewer than five times: {l}");
        }
        let total: u64 = v.iter().take(8).sum();
        cores.push((total - v[3] - v[4], total));
    }
    Ok(cores)
}

/// Packets every CPU's input backlog dropped since boot (`/proc/net/softnet_stat`, hex).
fn backlog_drops() -> Result<u64> {
    let stat = std::fs::read_to_string("/proc/net/softnet_stat")?;
    stat.lines()
        .map(|l| {
            let field = l.split_whitespace().nth(1).with_context(|| format!("/proc/net/softnet_stat: a line without drops: {l}"))?;
            u64::from_str_radix(field, 16).with_context(|| format!("/proc/net/softnet_stat: drops {field:?} are not hex"))
        })
        .sum()
}

/// Each core's busy share between two readings.
fn busy_shares(before: &[(u64, u64)], after: &[(u64, u64)]) -> Vec<f64> {
    before.iter().zip(after).map(|(b, a)| if a.1 > b.1 { (a.0 - b.0) as f64 / (a.1 - b.1) as f64 } else { 0.0 }).collect()
}

/// Each core's busy share from a starting reading of `/proc/stat` to now.
pub struct CpuMeter(Vec<(u64, u64)>);

impl CpuMeter {
    /// Takes the starting reading.
    pub fn start() -> Result<CpuMeter> {
        Ok(CpuMeter(cpu_times()?))
    }

    /// Each core's busy share since the start.
    pub fn busy(&self) -> Result<Vec<f64>> {
        Ok(busy_shares(&self.0, &cpu_times()?))
    }
}

/// A device's offloads (`ethtool -k`).
fn offloads(netns: &str, dev: &str) -> Result<DeviceOffloads> {
    let out = run("ip", &["netns", "exec", netns, "ethtool", "-k", dev])?;
    let on = |feature: &str| out.lines().any(|l| l.trim_start().strip_prefix(feature).and_then(|r| r.strip_prefix(": ")).is_some_and(|r| r.starts_with("on")));
    Ok(DeviceOffloads {
        device: format!("{netns}/{dev}"),
        // The summary line `tcp-segmentation-offload` stays "on" when checksum offload is turned
        // off, though TSO is then off: the feature itself says.
        tso: on("tx-tcp-segmentation"),
        gso: on("generic-segmentation-offload"),
        gro: on("generic-receive-offload"),
        tx_checksum: on("tx-checksumming"),
    })
}

/// Every device's offloads: each host's eth0 and each switch port.
pub fn testbed_offloads(tb: &Testbed) -> Result<Vec<DeviceOffloads>> {
    let mut out = Vec::new();
    for h in &tb.hosts {
        out.push(offloads(&h.netns, "eth0")?);
        out.push(offloads(&tb.switch, &h.switch_port)?);
    }
    Ok(out)
}

/// The counters at the start of a run.
struct Start {
    at: Instant,
    ports: BTreeMap<String, QdiscStats>,
    device_drops: Vec<u64>,
    host_device_drops: Vec<u64>,
    hosts: Vec<BTreeMap<String, u64>>,
    cpu: CpuMeter,
    backlog_drops: u64,
}

/// A recording in progress: the starting counters, and a thread sampling every port's queue.
pub struct Recorder {
    tb: Testbed,
    start: Start,
    stop: Arc<AtomicBool>,
    sampler: JoinHandle<Result<Samples>>,
}

/// What the sampler thread collects: the ports' queues and the connections.
type Samples = (Vec<(f64, String, u64)>, Vec<ConnSample>);

impl Recorder {
    /// Reads the starting counters and starts sampling each port's queue every `every`.
    pub fn start(tb: &Testbed, every: Duration) -> Result<Recorder> {
        if every < Duration::from_millis(1) {
            bail!("sample interval {every:?}: expected at least 1 ms (each sample runs tc)");
        }
        let start = Start {
            at: Instant::now(),
            ports: qdisc_stats(&tb.switch)?,
            device_drops: tb.hosts.iter().map(|h| device_drops(&tb.switch, &h.switch_port)).collect::<Result<_>>()?,
            host_device_drops: tb.hosts.iter().map(|h| device_drops(&h.netns, "eth0")).collect::<Result<_>>()?,
            hosts: tb.hosts.iter().map(|h| host_counters(&h.netns)).collect::<Result<_>>()?,
            cpu: CpuMeter::start()?,
            backlog_drops: backlog_drops()?,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (tb, t0, stop) = (tb.clone(), start.at, stop.clone());
            std::thread::spawn(move || sample(&tb, t0, every, &stop))
        };
        Ok(Recorder { tb: tb.clone(), start, stop, sampler })
    }

    /// Stops sampling and reads the counters again: the run's evidence.
    pub fn finish(self) -> Result<Evidence> {
        self.stop.store(true, Ordering::Relaxed);
        let (queue, connections) = self.sampler.join().map_err(|_| anyhow::anyhow!("the queue sampler panicked"))??;
        let secs = self.start.at.elapsed().as_secs_f64();
        let cpu_busy = self.start.cpu.busy()?;
        let ports_now = qdisc_stats(&self.tb.switch)?;
        let mut ports = Vec::new();
        for (i, h) in self.tb.hosts.iter().enumerate() {
            let (a, b) = (self.start.ports.get(&h.switch_port).copied().unwrap_or_default(), ports_now.get(&h.switch_port).copied().unwrap_or_default());
            let samples: Vec<u64> = queue.iter().filter(|(_, p, _)| *p == h.switch_port).map(|s| s.2).collect();
            ports.push(PortFigures {
                port: h.switch_port.clone(),
                host: h.netns.clone(),
                sent: QdiscStats {
                    bytes: b.bytes - a.bytes,
                    packets: b.packets - a.packets,
                    drops: b.drops - a.drops,
                    overlimits: b.overlimits - a.overlimits,
                    backlog: b.backlog,
                },
                device_drops: device_drops(&self.tb.switch, &h.switch_port)? - self.start.device_drops[i],
                queue_max: samples.iter().copied().max().unwrap_or(0),
                queue_mean: if samples.is_empty() { 0.0 } else { samples.iter().sum::<u64>() as f64 / samples.len() as f64 },
            });
        }
        let mut hosts = Vec::new();
        for (i, (h, before)) in self.tb.hosts.iter().zip(&self.start.hosts).enumerate() {
            let now = host_counters(&h.netns)?;
            hosts.push(HostFigures {
                host: h.netns.clone(),
                counters: now.iter().map(|(k, v)| (k.clone(), v.saturating_sub(before[k]))).collect(),
                device_drops: device_drops(&h.netns, "eth0")? - self.start.host_device_drops[i],
            });
        }
        let cpu_bound = cpu_busy.iter().any(|&b| b >= CPU_BOUND);
        let backlog_drops = backlog_drops()? - self.start.backlog_drops;
        Ok(Evidence { secs, ports, hosts, offloads: testbed_offloads(&self.tb)?, cpu_busy, cpu_bound, backlog_drops, queue, connections })
    }
}

/// Samples every port's backlog every `every`, and every connection every `CONN_EVERY`, until
/// `stop`.
fn sample(tb: &Testbed, t0: Instant, every: Duration, stop: &AtomicBool) -> Result<Samples> {
    let (mut queue, mut conns) = (Vec::new(), Vec::new());
    let mut next = Instant::now();
    let mut conns_at: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        let at = t0.elapsed().as_secs_f64() * 1e3;
        let stats = qdisc_stats(&tb.switch)?;
        for h in &tb.hosts {
            queue.push((at, h.switch_port.clone(), stats.get(&h.switch_port).map_or(0, |s| s.backlog)));
        }
        if conns_at.is_none_or(|t| t.elapsed() >= CONN_EVERY) {
            conns_at = Some(Instant::now());
            conns.extend(connections(tb, at)?);
        }
        next += every;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        } else {
            next = Instant::now();
        }
    }
    Ok((queue, conns))
}

impl Evidence {
    /// The figures as tables: ports, hosts, offloads and CPU.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut s = format!("{:.2} s recorded{}\n", self.secs, if self.cpu_bound { "; CPU-BOUND: a core was saturated, figures shown apart" } else { "" });
        let _ = writeln!(s, "{:<6} {:<10} {:>12} {:>9} {:>7} {:>8} {:>11} {:>10} {:>10}", "port", "host", "sent_bytes", "packets", "drops", "dev_drop", "overlimits", "queue_max", "queue_mean");
        for p in &self.ports {
            let _ = writeln!(
                s,
                "{:<6} {:<10} {:>12} {:>9} {:>7} {:>8} {:>11} {:>10} {:>10.0}",
                p.port, p.host, p.sent.bytes, p.sent.packets, p.sent.drops, p.device_drops, p.sent.overlimits, p.queue_max, p.queue_mean
            );
        }
        let short = |k: &str| k.split('.').nth(1).unwrap_or(k).trim_start_matches("TCP").to_string();
        let keys: Vec<&String> = self.hosts.first().map(|h| h.counters.keys().collect()).unwrap_or_default();
        let _ = write!(s, "{:<10} {:>8}", "host", "dev_drop");
        for k in &keys {
            let _ = write!(s, " {:>12}", short(k));
        }
        s.push('\n');
        for h in &self.hosts {
            let _ = write!(s, "{:<10} {:>8}", h.host, h.device_drops);
            for k in &keys {
                let _ = write!(s, " {:>12}", h.counters[*k]);
            }
            s.push('\n');
        }
        let on = |b: bool| if b { "on" } else { "off" };
        for o in &self.offloads {
            let _ = writeln!(s, "offloads {:<14} tso {:<3} gso {:<3} gro {:<3} tx-checksum {}", o.device, on(o.tso), on(o.gso), on(o.gro), on(o.tx_checksum));
        }
        let busy: Vec<String> = self.cpu_busy.iter().map(|b| format!("{:.0}%", b * 100.0)).collect();
        let _ = writeln!(s, "cpu busy per core: {}; input backlog drops: {}", busy.join(" "), self.backlog_drops);
        s
    }

    /// The connection samples as CSV.
    pub fn connections_csv(&self) -> String {
        let mut s = String::from("ms,host,local,remote,cc,cwnd,ssthresh,rtt_us,rto_ms,pacing_bps,delivery_bps,retrans_total,lost\n");
        let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
        for c in &self.connections {
            s.push_str(&format!(
                "{:.3},{},{},{},{},{},{},{:.1},{},{},{},{},{}\n",
                c.ms, c.host, c.local, c.remote, c.cc, c.cwnd, opt(c.ssthresh), c.rtt_us, c.rto_ms, opt(c.pacing_bps), opt(c.delivery_bps), c.retrans_total, c.lost
            ));
        }
        s
    }

    /// The queue samples as CSV: `ms,port,bytes`.
    pub fn queue_csv(&self) -> String {
        let mut s = String::from("ms,port,bytes\n");
        for (at, p, b) in &self.queue {
            s.push_str(&format!("{at:.3},{p},{b}\n"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_counters_pair_each_header_with_its_values() {
        let text = "Tcp: RtoAlgorithm OutSegs RetransSegs\nTcp: 1 200 7\nIpExt: InCEPkts InOctets\nIpExt: 3 4096\n";
        let c = proc_counters(text);
        assert_eq!((c["Tcp.OutSegs"], c["Tcp.RetransSegs"], c["IpExt.InCEPkts"], c["IpExt.InOctets"]), (200, 7, 3, 4096));
        assert_eq!(c.len(), 5);
    }

    #[test]
    fn ss_lines_become_connection_samples() {
        let text = "0       2029973 10.72.1.1:42556 10.72.3.1:5201 \n\t cubic wscale:10,10 rto:204 rtt:0.231/0.293 mss:1448 cwnd:28 ssthresh:8 bytes_sent:5 send 63498666667bps pacing_rate 37044650904bps delivery_rate 1.5Gbps retrans:0/12 lost:2 minrtt:0.002\n3797908 0 10.72.3.1:5201 10.72.1.1:42556\n\t cubic rto:204 rtt:0.019/0.009 cwnd:10\n";
        let c = parse_ss(text, 5.0, "h1");
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].local.as_str(), c[0].remote.as_str(), c[0].cc.as_str()), ("10.72.1.1:42556", "10.72.3.1:5201", "cubic"));
        assert_eq!((c[0].cwnd, c[0].ssthresh, c[0].retrans_total, c[0].lost), (28, Some(8), 12, 2));
        assert_eq!((c[0].pacing_bps, c[0].delivery_bps), (Some(37_044_650_904), Some(1_500_000_000)));
        assert!((c[0].rtt_us - 231.0).abs() < 1e-9 && c[0].rto_ms == 204.0);
        assert_eq!((c[1].cwnd, c[1].ssthresh, c[1].pacing_bps), (10, None, None));
    }

    #[test]
    fn busy_shares_leave_out_idle_and_iowait() {
        // (busy, total) jiffies: core 0 busy 95 of 100, core 1 10 of 100.
        let shares = busy_shares(&[(100, 1000), (50, 1000)], &[(195, 1100), (60, 1100)]);
        assert_eq!(shares, [0.95, 0.1]);
        assert!(shares[0] >= CPU_BOUND && shares[1] < CPU_BOUND);
    }
}
