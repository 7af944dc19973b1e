//! A testbed on one machine: network namespaces for N hosts and one switch, a veth pair per host,
//! a shaped egress (htb or tbf) on every switch port, checksum offload off on the path (so the
//! switch's checksum fixes are checked by real receivers) and the INT switch on every port.
//!
//! ```text
//!   <p>-h1 eth0 10.72.1.1 ──── p1 10.72.1.254 ┐
//!   <p>-h2 eth0 10.72.2.1 ──── p2 10.72.2.254 ├ <p>-sw (forwarding, INT switch on p1..pN)
//!   <p>-h3 eth0 10.72.3.1 ──── p3 10.72.3.254 ┘
//! ```

use crate::kernel::int_switch::{self, PortConfig};
use crate::sys::{self, run};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// The egress shaper on switch ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Shaper {
    /// Hierarchical token bucket, one class at the rate.
    Htb,
    /// Token bucket filter.
    Tbf,
}

/// Segmentation and receive offloads on every device of the testbed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Offloads {
    /// Checksums in software, so no TSO (GSO segments each send at the host's own device) and
    /// no GRO (a veth's default): every packet queued at the switch is one frame.
    #[default]
    Off,
    /// As Linux ships a NIC: checksum offload on, TCP building packets of up to 64 KB (TSO
    /// autosizing) that the host's device cuts into frames as a NIC's TSO does, and GRO at
    /// every host's receive; the switch forwards frames.
    Linux,
}

/// Options of `testbed up`.
#[derive(Debug, Clone)]
pub struct TestbedOptions {
    /// Namespace name prefix (`<prefix>-h1`, `<prefix>-sw`).
    pub prefix: String,
    /// Number of hosts (at least 2).
    pub hosts: u8,
    /// Rate of every switch egress, bits/s.
    pub rate_bps: u64,
    /// Shaper kind.
    pub shaper: Shaper,
    /// Shaper queue limit, packets.
    pub queue_packets: u32,
    /// Shaper queue limit in bytes, as a scenario states a buffer; replaces `queue_packets`.
    pub queue_bytes: Option<u64>,
    /// Segmentation and receive offloads.
    pub offloads: Offloads,
    /// Steer each flow to one CPU (RPS), so a sender moving between CPUs does not reorder its
    /// packets (`steer_flows`).
    pub steer_flows: bool,
    /// Shape each host's own link at the rate too, as a NIC serializes (`shape_hosts`); without
    /// it a host sends at memory speed and only the switch ports are bottlenecks.
    pub shape_hosts: bool,
    /// CE marking threshold of the INT switch, bytes (0: no marking).
    pub ce_threshold: u64,
    /// Attach the INT switch.
    pub int_switch: bool,
    /// MTU of every link (9000 spares CPU on small machines; 1500 is the Ethernet default).
    pub mtu: u32,
}

impl Default for TestbedOptions {
    fn default() -> Self {
        TestbedOptions {
            prefix: "sl".into(),
            hosts: 3,
            rate_bps: 1_000_000_000,
            shaper: Shaper::Htb,
            queue_packets: 1000,
            queue_bytes: None,
            offloads: Offloads::Off,
            steer_flows: false,
            shape_hosts: false,
            ce_threshold: 30_000,
            int_switch: true,
            mtu: 1500,
        }
    }
}

/// One host of a running testbed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Host {
    /// Network namespace.
    pub netns: String,
    /// Its address on eth0.
    pub addr: Ipv4Addr,
    /// The switch port facing it.
    pub switch_port: String,
}

/// A running testbed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Testbed {
    /// Namespace prefix.
    pub prefix: String,
    /// The switch's namespace.
    pub switch: String,
    /// Hosts.
    pub hosts: Vec<Host>,
    /// Port rate, bits/s.
    pub rate_bps: u64,
    /// Whether the INT switch is attached.
    pub int_switch: bool,
    /// The switch ports' shaper.
    #[serde(default = "default_shaper")]
    pub shaper: Shaper,
    /// MTU of every link.
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// Each shaper's queue limit, packets.
    #[serde(default = "default_queue")]
    pub queue_packets: u32,
    /// Each shaper's queue limit in bytes, where given (it replaces `queue_packets`).
    #[serde(default)]
    pub queue_bytes: Option<u64>,
    /// Segmentation and receive offloads.
    #[serde(default)]
    pub offloads: Offloads,
    /// Whether each flow is steered to one CPU.
    #[serde(default)]
    pub steer_flows: bool,
    /// Whether each host's own link is shaped at the rate.
    #[serde(default)]
    pub shape_hosts: bool,
}

fn default_shaper() -> Shaper {
    Shaper::Htb
}

fn default_mtu() -> u32 {
    1500
}

fn default_queue() -> u32 {
    1000
}

impl Testbed {
    /// A human-readable summary.
    pub fn describe(&self) -> String {
        let buffer = match self.queue_bytes {
            Some(b) => format!("{b} B"),
            None => format!("{} packets", self.queue_packets),
        };
        let mut s = format!(
            "testbed {}: switch netns {} ({} Mb/s per port, buffer {buffer}, offloads {:?}{}{})\n",
            self.prefix,
            self.switch,
            self.rate_bps / 1_000_000,
            self.offloads,
            if self.shape_hosts { ", hosts' links shaped" } else { "" },
            if self.int_switch { ", INT switch attached" } else { "" }
        );
        for h in &self.hosts {
            s += &format!("  {:<10} eth0 {:<12} <-> {} {}\n", h.netns, h.addr, self.switch, h.switch_port);
        }
        s
    }
}

fn state_file(prefix: &str) -> PathBuf {
    PathBuf::from(sys::STATE_DIR).join(format!("testbed-{prefix}.json"))
}

fn check_prefix(p: &str) -> Result<()> {
    if p.is_empty() || p.len() > 8 || !p.bytes().all(|c| c.is_ascii_alphanumeric()) {
        bail!("testbed prefix {p:?}: expected 1-8 letters or digits (it names namespaces like {p}-h1)");
    }
    Ok(())
}

/// Brings a testbed up; on failure removes whatever it had made.
pub fn up(o: &TestbedOptions) -> Result<Testbed> {
    sys::require_root("the testbed")?;
    check_prefix(&o.prefix)?;
    if !(576..=65535).contains(&o.mtu) {
        bail!("mtu: expected 576 to 65535, got {}", o.mtu);
    }
    if o.queue_packets == 0 {
        bail!("queue_packets: expected at least 1 packet");
    }
    if let Some(b) = o.queue_bytes.filter(|&b| b < o.mtu as u64 + 14) {
        bail!("queue_bytes: {b} B holds no full frame; expected at least the MTU plus 14 ({} B)", o.mtu + 14);
    }
    if !(2..=200).contains(&o.hosts) {
        bail!("hosts: expected 2 to 200, got {}", o.hosts);
    }
    let sw = format!("{}-sw", o.prefix);
    if sys::netns_path(&sw).exists() || state_file(&o.prefix).exists() {
        bail!("testbed {} is already up (run `sluice testbed down --prefix {}`)", o.prefix, o.prefix);
    }
    let tb = Testbed {
        prefix: o.prefix.clone(),
        switch: sw.clone(),
        hosts: (1..=o.hosts)
            .map(|i| Host { netns: format!("{}-h{i}", o.prefix), addr: Ipv4Addr::new(10, 72, i, 1), switch_port: format!("p{i}") })
            .collect(),
        rate_bps: o.rate_bps,
        int_switch: o.int_switch,
        shaper: o.shaper,
        mtu: o.mtu,
        queue_packets: o.queue_packets,
        queue_bytes: o.queue_bytes,
        offloads: o.offloads,
        steer_flows: o.steer_flows,
        shape_hosts: o.shape_hosts,
    };
    fs::create_dir_all(sys::STATE_DIR)?;
    fs::write(state_file(&o.prefix), serde_json::to_string_pretty(&tb)?)?;
    if let Err(e) = build(&tb, o) {
        let _ = down(&o.prefix);
        return Err(e);
    }
    Ok(tb)
}

fn build(tb: &Testbed, o: &TestbedOptions) -> Result<()> {
    let sw = tb.switch.as_str();
    run("ip", &["netns", "add", sw])?;
    run("ip", &["-n", sw, "link", "set", "lo", "up"])?;
    run("ip", &["netns", "exec", sw, "sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    let rate = format!("{}bit", o.rate_bps);
    for (i, h) in tb.hosts.iter().enumerate() {
        let i = i + 1;
        let ns = h.netns.as_str();
        let port = h.switch_port.as_str();
        run("ip", &["netns", "add", ns])?;
        run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        run("ip", &["link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", sw])?;
        run("ip", &["-n", ns, "addr", "add", &format!("{}/24", h.addr), "dev", "eth0"])?;
        run("ip", &["-n", sw, "addr", "add", &format!("10.72.{i}.254/24"), "dev", port])?;
        let mtu = o.mtu.to_string();
        run("ip", &["-n", ns, "link", "set", "eth0", "mtu", &mtu, "up"])?;
        run("ip", &["-n", sw, "link", "set", port, "mtu", &mtu, "up"])?;
        run("ip", &["-n", ns, "route", "add", "default", "via", &format!("10.72.{i}.254")])?;
        // Offloads off: software checksums end to end, so receivers verify every header the
        // switch rewrites, and each queued packet is one frame. On: as Linux ships a NIC (the
        // switch's checksum fixes leave a partial checksum to its final computation). A veth's
        // TSO would hand its peer a 64 KB packet whole, which the switch would then queue and
        // mark as one; a NIC's TSO puts frames on the wire. So the host's device keeps GSO and
        // drops TSO, which cuts each packet into frames where a NIC would, and the switch's
        // ports leave GRO off, as a switch forwards frames.
        let (host, switch): (&[&str], &[&str]) = match o.offloads {
            Offloads::Off => (&["rx", "off", "tx", "off"], &["rx", "off", "tx", "off"]),
            Offloads::Linux => (&["tso", "off", "gso", "on", "gro", "on"], &["gro", "off"]),
        };
        for (n, dev, features) in [(ns, "eth0", host), (sw, port, switch)] {
            run("ip", &[&["netns", "exec", n, "ethtool", "-K", dev][..], features].concat()).context("setting the offloads")?;
        }
        if o.steer_flows {
            for (n, dev) in [(ns, "eth0"), (sw, port)] {
                steer_flows(n, dev)?;
            }
        }
        shape(sw, port, &rate, o)?;
        if o.shape_hosts {
            shape_host(ns, &rate, o)?;
        }
        if o.int_switch {
            let cfg = PortConfig { rate_bps: o.rate_bps, ce_threshold: o.ce_threshold, ..PortConfig::default() };
            int_switch::attach(port, Some(sw), &cfg)?;
        }
    }
    Ok(())
}

/// Steers each flow arriving on `dev` to one CPU (RPS over every CPU, by flow hash). A veth
/// hands a packet to the backlog of the CPU its sender runs on; a sender that moves between
/// CPUs leaves packets in two backlogs, which drain out of order, and the receiver's SACKs then
/// make its peer retransmit what was never lost (seen as thousands of `TCPSACKReorder` and
/// `TCPDSACKRecv` a second with no drop anywhere). With RPS the flow's hash picks the backlog,
/// so a flow's packets stay in order, as on a switch.
fn steer_flows(netns: &str, dev: &str) -> Result<()> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mask = rps_mask(cpus);
    let script = format!("echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus");
    run("ip", &["netns", "exec", netns, "sh", "-c", &script]).with_context(|| format!("steering {dev}'s flows (RPS) in {netns}"))?;
    Ok(())
}

/// A CPU mask of the first `cpus` CPUs as sysfs takes it: hex, in comma-separated 32-bit words.
fn rps_mask(cpus: usize) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut left = cpus;
    while left > 0 {
        let n = left.min(32);
        words.push(format!("{:08x}", if n == 32 { u32::MAX } else { (1u32 << n) - 1 }));
        left -= n;
    }
    words.reverse();
    words.join(",")
}

/// The shaper's token bucket, bytes: one frame plus 100 us at the rate. tc's default for htb is
/// rate/HZ-derived and at 1 Gb/s comes to 1375 bytes, less than one 9000-byte frame, so every
/// frame waits for the qdisc watchdog and each microsecond the timer fires late is lost for good:
/// on a virtual machine the port then carried 76-80% of its rate with megabytes queued.
fn shaper_burst(mtu: u32, rate_bps: u64) -> u64 {
    mtu as u64 + 14 + rate_bps / 8 / 10_000
}

/// A tbf queue limit in bytes: `packets` full frames of the links' MTU.
fn tbf_limit(packets: u32, mtu: u32) -> u64 {
    packets as u64 * (mtu as u64 + 14)
}

fn shape(sw: &str, port: &str, rate: &str, o: &TestbedOptions) -> Result<()> {
    let limit = o.queue_packets.to_string();
    let fifo = match o.queue_bytes {
        Some(b) => ["bfifo", "limit", &b.to_string()].map(String::from),
        None => ["pfifo", "limit", &limit].map(String::from),
    };
    let burst = format!("{}b", shaper_burst(o.mtu, o.rate_bps));
    match o.shaper {
        Shaper::Htb => {
            run("tc", &["-n", sw, "qdisc", "add", "dev", port, "root", "handle", "1:", "htb", "default", "1"])?;
            let class = ["-n", sw, "class", "add", "dev", port, "parent", "1:", "classid", "1:1", "htb"];
            let shaping = ["rate", rate, "ceil", rate, "burst", &burst, "cburst", &burst];
            run("tc", &[&class[..], &shaping[..]].concat())?;
            let leaf = ["-n", sw, "qdisc", "add", "dev", port, "parent", "1:1", "handle", "10:"];
            run("tc", &[&leaf[..], &fifo.each_ref().map(String::as_str)[..]].concat())?;
        }
        Shaper::Tbf => {
            let bytes = o.queue_bytes.unwrap_or(tbf_limit(o.queue_packets, o.mtu)).to_string();
            run("tc", &["-n", sw, "qdisc", "add", "dev", port, "root", "tbf", "rate", rate, "burst", &burst, "limit", &bytes])?;
        }
    }
    Ok(())
}

/// Shapes a host's eth0 at the rate, as its NIC would serialize, with a NIC's transmit queue
/// (1,000 packets, a device's default `txqueuelen`): the kernel's own TCP small queues keep each
/// flow's share of it short, as on a NIC. With offloads off each packet the host queues is one
/// frame, as on a NIC without TSO: TCP builds GSO packets whatever the device's features
/// (`sk_setup_caps` adds `NETIF_F_GSO`), and the shaper would pass a 64 KB one at once (tc
/// charges it after), so the device's `gso_max_segs` is set to one segment instead.
fn shape_host(ns: &str, rate: &str, o: &TestbedOptions) -> Result<()> {
    if o.offloads == Offloads::Off {
        run("ip", &["-n", ns, "link", "set", "dev", "eth0", "gso_max_segs", "1"]).context("limiting GSO packets to one frame")?;
    }
    let burst = format!("{}b", shaper_burst(o.mtu, o.rate_bps));
    run("tc", &["-n", ns, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1"])?;
    run("tc", &["-n", ns, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate, "burst", &burst, "cburst", &burst])?;
    run("tc", &["-n", ns, "qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", "10:", "pfifo", "limit", "1000"])?;
    Ok(())
}

/// The packets a host sends to `peer` from or to TCP port `port`: one of its flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FlowKey {
    /// The other end's address.
    pub peer: Ipv4Addr,
    /// The service's port, the source or the destination of the host's packets.
    pub port: u16,
}

/// Gives each of a shaped host's flows its own queue, served round robin a frame at a time, as
/// `fq_codel` (the qdisc systemd makes Linux's default) serves a host's flows; pure ACKs and
/// handshakes (IP packets under 128 bytes) go first, and what no key matches shares one more
/// queue. htb's leaves under the host's rate borrow all of it in turn, a quantum of one frame each.
pub fn queue_per_flow(tb: &Testbed, host: usize, flows: &[FlowKey]) -> Result<()> {
    let Some(h) = tb.hosts.get(host) else { bail!("the testbed has no host {host}") };
    if !tb.shape_hosts {
        bail!("testbed {}: the hosts' links are not shaped, so they have no queue to divide", tb.prefix);
    }
    let ns = h.netns.as_str();
    let rate = tb.rate_bps;
    let quantum = (tb.mtu as u64 + 14).to_string();
    run("tc", &["-n", ns, "qdisc", "del", "dev", "eth0", "root"])?;
    run("tc", &["-n", ns, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "3"])?;
    let burst = format!("{}b", shaper_burst(tb.mtu, rate));
    let all = format!("{rate}bit");
    run("tc", &["-n", ns, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", &all, "ceil", &all, "burst", &burst, "cburst", &burst])?;
    // The control queue may take the whole link without borrowing, so it is always served first;
    // each flow's guaranteed share is a sliver, so the flows borrow, and share, the rest.
    let sliver = format!("{}bit", (rate / 1000).max(8));
    let leaf = |id: u32, prio: &str, guaranteed: &str| -> Result<()> {
        let classid = format!("1:{id}");
        run("tc", &["-n", ns, "class", "add", "dev", "eth0", "parent", "1:1", "classid", &classid, "htb", "rate", guaranteed, "ceil", &all, "prio", prio, "quantum", &quantum, "burst", &burst, "cburst", &burst])?;
        let handle = format!("{id}:");
        run("tc", &["-n", ns, "qdisc", "add", "dev", "eth0", "parent", &classid, "handle", &handle, "pfifo", "limit", "1000"])?;
        Ok(())
    };
    leaf(2, "0", &all)?;
    leaf(3, "1", &sliver)?;
    // Filters of a lower prio are tried first: the control queue's, then the flows'.
    let filter = |prio: &'static str| ["-n", ns, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", prio, "u32"];
    run("tc", &[&filter("1")[..], &["match", "u16", "0x0000", "0xff80", "at", "2", "flowid", "1:2"]].concat())?;
    for (i, f) in flows.iter().enumerate() {
        let id = 10 + i as u32;
        leaf(id, "1", &sliver)?;
        let (peer, port, flowid) = (format!("{}/32", f.peer), f.port.to_string(), format!("1:{id}"));
        for end in ["sport", "dport"] {
            let m = ["match", "ip", "dst", &peer, "match", "ip", end, &port, "0xffff", "flowid", &flowid];
            run("tc", &[&filter("2")[..], &m[..]].concat())?;
        }
    }
    Ok(())
}

/// Changes the rate of switch port `port`'s shaper (and the INT switch's utilization with it);
/// what is queued stays queued.
pub fn set_rate(tb: &Testbed, port: &str, rate_bps: u64) -> Result<()> {
    let (sw, rate) = (tb.switch.as_str(), format!("{rate_bps}bit"));
    let burst = format!("{}b", shaper_burst(tb.mtu, rate_bps));
    match tb.shaper {
        Shaper::Htb => {
            let class = ["-n", sw, "class", "change", "dev", port, "parent", "1:", "classid", "1:1", "htb"];
            run("tc", &[&class[..], &["rate", &rate, "ceil", &rate, "burst", &burst, "cburst", &burst]].concat())?;
        }
        Shaper::Tbf => {
            let bytes = tb.queue_bytes.unwrap_or(tbf_limit(tb.queue_packets, tb.mtu)).to_string();
            run("tc", &["-n", sw, "qdisc", "change", "dev", port, "root", "tbf", "rate", &rate, "burst", &burst, "limit", &bytes])?;
        }
    }
    if tb.int_switch {
        let mut cfg = int_switch::port_config(port, Some(sw))?;
        cfg.rate_bps = rate_bps;
        int_switch::set_port_config(port, Some(sw), &cfg)?;
    }
    Ok(())
}

/// Bytes switch port `port` has sent, from its root qdisc's counters.
pub fn port_tx_bytes(tb: &Testbed, port: &str) -> Result<u64> {
    let s = run("tc", &["-n", &tb.switch, "-s", "qdisc", "show", "dev", port])?;
    let sent = s.lines().find_map(|l| l.trim_start().strip_prefix("Sent ")?.split_whitespace().next()?.parse().ok());
    sent.with_context(|| format!("{port}: no \"Sent\" figure in tc's statistics: {s}"))
}

/// The testbed recorded under a prefix, if up.
pub fn get(prefix: &str) -> Result<Option<Testbed>> {
    match fs::read_to_string(state_file(prefix)) {
        Ok(s) => Ok(Some(serde_json::from_str(&s)?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Removes everything `up` made under a prefix; returns what it removed.
pub fn down(prefix: &str) -> Result<Vec<String>> {
    sys::require_root("the testbed")?;
    check_prefix(prefix)?;
    let mut removed = vec![];
    let mut names: Vec<String> = match get(prefix)? {
        Some(tb) => std::iter::once(tb.switch.clone()).chain(tb.hosts.iter().map(|h| h.netns.clone())).collect(),
        None => vec![],
    };
    // Also anything left by an interrupted `up` that had not written its record.
    if let Ok(d) = fs::read_dir("/run/netns") {
        for e in d.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')).is_some_and(|r| r == "sw" || r.starts_with('h')) && !names.contains(&n) {
                names.push(n);
            }
        }
    }
    let sw = format!("{prefix}-sw");
    // Deleting the namespace deletes its veths, qdiscs and tc filters; the pinned maps remain.
    int_switch::unpin_namespace(Some(&sw))?;
    for n in &names {
        if sys::netns_path(n).exists() {
            run("ip", &["netns", "del", n])?;
            removed.push(format!("netns {n}"));
        }
    }
    let sf = state_file(prefix);
    if sf.exists() {
        fs::remove_file(sf)?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rps_masks_name_every_cpu_in_32_bit_words() {
        assert_eq!(rps_mask(2), "00000003");
        assert_eq!(rps_mask(32), "ffffffff");
        assert_eq!(rps_mask(40), "000000ff,ffffffff");
    }
}
