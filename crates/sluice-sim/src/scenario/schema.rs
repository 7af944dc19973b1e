//! The scenario file's schema: every table and key, with its defaults, as serde reads them.

use super::*;
use crate::flow::build::IntRuntime;
use crate::host::cpu::CpuConfig;
use crate::host::offload::OffloadConfig;
use crate::net::circuit::CircuitConfig;
use crate::net::failure::FailureConfig;
use crate::net::qdisc::{Discipline, EcnConfig, PortConfig, TrimConfig};
use crate::net::topology::{Graph, TopologyConfig};
use crate::time::{Bytes, Rate, Time};
use crate::transport::rdma::RdmaConfig;
use crate::transport::uet::UetConfig;
use crate::transport::tcp::TcpConfig;
use crate::words::value_in_words;
use crate::workload::WorkloadConfig;
use crate::world::{Bucketing, World};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A whole scenario as written in TOML.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Run length, seed and stopping rule.
    #[serde(default)]
    pub sim: SimConfig,
    /// The network.
    pub topology: TopologyConfig,
    /// Switch buffers, queues and ECN.
    #[serde(default)]
    pub switch: SwitchConfig,
    /// TCP settings.
    #[serde(default)]
    pub transport: TcpConfig,
    /// Traffic classes by name, each with its congestion control.
    #[serde(default)]
    pub classes: BTreeMap<String, ClassConfig>,
    /// Traffic.
    #[serde(default)]
    pub workloads: Vec<WorkloadConfig>,
    /// Changes during the run: a class's parameters at a time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<classes::ClassEvent>,
    /// Optional time series.
    #[serde(default)]
    pub output: OutputConfig,
    /// TCP-INT: switch stamping and host option handling.
    #[serde(default)]
    pub int: IntConfig,
    /// The application interface: QoS intents ("latency_sensitive", "bulk", "target_rate",
    /// "deadline") mapped to class names.
    #[serde(default)]
    pub policy: BTreeMap<String, String>,
    /// Bounds on what the scenario may create, checked before anything is allocated.
    #[serde(default)]
    pub limits: Limits,
    /// TLT: important-packet marking at hosts and colour-aware dropping at switches.
    #[serde(default)]
    pub tlt: TltConfig,
    /// Priority flow control on every switch.
    #[serde(default)]
    pub pfc: PfcTable,
    /// RDMA queue-pair settings, for classes with `transport = "rdma"`.
    #[serde(default)]
    pub rdma: RdmaConfig,
    /// The Ultra Ethernet transport's settings, for classes with `transport = "uet"`.
    #[serde(default, skip_serializing_if = "UetConfig::is_default")]
    pub uet: UetConfig,
    /// The circuit schedule and ToR VOQs of a `topology.kind = "rdcn"` network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit: Option<CircuitConfig>,
    /// Hosts whose CPU is modelled: cores, clock and the cycles of each operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuConfig>,
    /// AccelTCP's NIC offloads of connection setup and teardown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload: Option<OffloadConfig>,
    /// Links that fail or slow down, from the start or at a time (`net/failure.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<FailureConfig>,
}

/// `[pfc]`: IEEE 802.1Qbb priority flow control on every switch (`net/pfc.rs`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PfcTable {
    /// Switches pause their upstream instead of dropping the lossless priorities.
    pub enabled: bool,
    /// The lossless priorities (default `[0]`).
    pub priorities: Vec<u8>,
    /// The pause threshold is the free shared buffer (less every port's headroom) shifted right
    /// by this (default 3: an eighth, as Broadcom's dynamic threshold with alpha 1/8).
    pub shift: u32,
    /// Each doubling of an ingress port's rate above the fastest host link takes one from
    /// `shift`, down to 0, as the HPCC simulator sets each port's alpha (default false: every
    /// port uses `shift`).
    pub shift_by_rate: bool,
    /// Bytes each ingress port and lossless priority keeps for what is in flight after its
    /// PAUSE; default per port: 3 x rate x delay of its link plus two full frames.
    pub headroom: Option<Bytes>,
    /// Resume once the bytes held are this far below the threshold (default 3 KiB).
    pub resume_offset: Bytes,
    /// The pause a PAUSE frame asks for, in quanta of 512 bit times (default 65535, the most).
    pub quanta: u16,
}

impl Default for PfcTable {
    fn default() -> Self {
        PfcTable { enabled: false, priorities: vec![0], shift: 3, shift_by_rate: false, headroom: None, resume_offset: Bytes(3 * 1024), quanta: u16::MAX }
    }
}

impl PfcTable {
    /// Each switch's settings, from its ports and the fastest host link's rate, when PFC is on;
    /// errors name the key.
    pub(super) fn settings(&self, frame: u64, host_rate: crate::time::Rate) -> Result<Option<crate::world::PfcSettings>, String> {
        if !self.enabled {
            return Ok(None);
        }
        let mut lossless = 0u8;
        for (i, &p) in self.priorities.iter().enumerate() {
            if p as usize >= crate::net::pfc::PRIORITIES {
                return Err(format!("pfc.priorities[{i}]: expected a priority from 0 to 7, got {p}"));
            }
            lossless |= 1 << p;
        }
        if lossless == 0 {
            return Err("pfc.priorities: expected at least one lossless priority, like [0]".into());
        }
        if self.shift > 30 {
            return Err(format!("pfc.shift: expected 0 to 30, got {}", self.shift));
        }
        if self.quanta == 0 {
            return Err("pfc.quanta: expected 1 to 65535 quanta of 512 bit times".into());
        }
        if self.headroom.is_some_and(|h| h.0 < frame) {
            return Err(format!("pfc.headroom: expected at least one full frame ({frame} bytes)"));
        }
        let (shift, headroom, resume_offset, quanta) = (self.shift, self.headroom.map(|b| b.0), self.resume_offset.0, self.quanta);
        let by_rate = self.shift_by_rate;
        let port_shift = move |rate: crate::time::Rate| {
            let (mut s, mut r) = (shift, rate.0);
            while by_rate && r > host_rate.0 && s > 0 {
                s -= 1;
                r /= 2;
            }
            s
        };
        Ok(Some(Box::new(move |ports: &[crate::net::port::Port]| crate::net::pfc::PfcConfig {
            lossless,
            shift: ports.iter().map(|p| port_shift(p.rate)).collect(),
            headroom: ports
                .iter()
                .map(|p| headroom.unwrap_or_else(|| 3 * (p.rate.0 as u128 * p.link.delay.0 as u128 / 8_000_000_000_000) as u64 + 2 * frame))
                .collect(),
            resume_offset,
            quanta,
        })))
    }
}

/// `[tlt]`: timeout-less transport (Lim et al., EuroSys 2021) for every flow and switch port.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TltConfig {
    /// Senders mark important packets, receivers echo them, switches drop unimportant ones first.
    pub enabled: bool,
    /// Every switch port's colour threshold, unless a rate or port entry sets `tlt_threshold`:
    /// an unimportant packet is dropped when the port's unimportant bytes plus it would reach
    /// this. Default: the port's ECN step threshold K.
    pub threshold: Option<Bytes>,
    /// RDMA queue pairs marking by rate also mark every this many packets important (0: only
    /// each message's last packet and the first packet of each retransmission).
    pub every: u32,
    /// How RDMA queue pairs mark: `auto` (window-based with IRN or SACK, rate-based with
    /// go-back-N), `rate` or `window`.
    pub rdma_marking: crate::transport::rdma::TltMarking,
}

/// `[limits]`: the most a scenario may create. `check` estimates each before the run and refuses
/// a scenario beyond one, naming the key that drives it; raise a limit here to go further.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Flows, counting those closed-loop applications open (default 10,000,000).
    pub flows: u64,
    /// Requests kept outstanding by one `rpc` workload's clients together (default 1,000,000).
    pub outstanding: u64,
    /// Queue and window samples together (default 100,000,000).
    pub samples: u64,
    /// Rows of `fct_buckets.csv` per class (default 10,000).
    pub fct_buckets: u64,
    /// Packets kept by `[output.pcap]` (default 10,000,000).
    pub captured_packets: u64,
    /// Memory a run may take, like "16GB" (default: what this process may use: the least of the
    /// machine's memory, its control group's limit and its `ulimit -v`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Bytes>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { flows: 10_000_000, outstanding: 1_000_000, samples: 100_000_000, fct_buckets: 10_000, captured_packets: 10_000_000, memory: None }
    }
}

/// `[int]`: TCP-INT in the fabric. Switches stamp unless listed as legacy; flows carry the option
/// when their algorithm uses it (or every flow with `all_flows`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct IntConfig {
    /// Every flow carries the option (telemetry), not only those whose algorithm consumes it.
    pub all_flows: bool,
    /// Queue depth at and above which a hop reports its queue instead of its utilization.
    pub qdepth_threshold: Bytes,
    /// Right shift of queue bytes into INTval's 7 bits (13: 8 KiB units).
    pub qdepth_shift: u32,
    /// Right shift of utilization percent into INTval's 7 bits (0: 1% units).
    pub util_shift: u32,
    /// Window over which a port's transmit rate is measured.
    pub util_window: Time,
    /// Unit of the 24-bit latency field.
    pub latency_unit: Time,
    /// Processing latency each INT hop adds besides queueing.
    pub processing: Time,
    /// Switches without TCP-INT (they forward the option untouched), by name ("sw3").
    pub legacy_switches: Vec<String>,
    /// Hosts whose stack lacks TCP-INT: they neither add nor echo the option.
    pub legacy_hosts: Vec<usize>,
    /// Per-switch encoding overrides, by switch name.
    pub switches: BTreeMap<String, IntSwitchConfig>,
}

impl Default for IntConfig {
    fn default() -> Self {
        let e = crate::packet::tcp_int::IntEncoding::default();
        IntConfig {
            all_flows: false,
            qdepth_threshold: Bytes(e.qdepth_threshold),
            qdepth_shift: e.qdepth_shift,
            util_shift: e.util_shift,
            util_window: Time(10_000_000),
            latency_unit: Time(1_000),
            processing: Time::ZERO,
            legacy_switches: Vec::new(),
            legacy_hosts: Vec::new(),
            switches: BTreeMap::new(),
        }
    }
}

/// `[int.switches.<name>]`: one switch's encoding, overriding the fabric-wide keys.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IntSwitchConfig {
    /// Queue threshold for this switch.
    pub qdepth_threshold: Option<Bytes>,
    /// Queue shift for this switch.
    pub qdepth_shift: Option<u32>,
    /// Utilization shift for this switch.
    pub util_shift: Option<u32>,
}

impl IntConfig {
    /// Validates the table against the topology's switch names and host count.
    pub fn runtime(&self, switch_names: &[String], hosts: usize) -> Result<IntRuntime, String> {
        use crate::packet::tcp_int::IntEncoding;
        if self.latency_unit == Time::ZERO {
            return Err("int.latency_unit: expected a positive duration like \"1ns\"".into());
        }
        if self.util_window == Time::ZERO {
            return Err("int.util_window: expected a positive duration like \"10us\"".into());
        }
        let shift_ok = |v: u32, key: &str| {
            if v < 64 {
                Ok(v)
            } else {
                Err(format!("{key}: expected a shift of 0 to 63 bits, got {v}"))
            }
        };
        shift_ok(self.qdepth_shift, "int.qdepth_shift")?;
        shift_ok(self.util_shift, "int.util_shift")?;
        let encoding =
            IntEncoding { qdepth_threshold: self.qdepth_threshold.0, qdepth_shift: self.qdepth_shift, util_shift: self.util_shift };
        let known = |name: &str, key: String| -> Result<usize, String> {
            switch_names.iter().position(|n| n == name).ok_or_else(|| {
                format!("{key}: no switch named \"{name}\"; switches are sw0 to sw{}", switch_names.len().saturating_sub(1))
            })
        };
        let mut switches: Vec<Option<crate::net::switch::IntStamping>> = vec![
            Some(crate::net::switch::IntStamping { encoding, lat_unit: self.latency_unit, processing: self.processing });
            switch_names.len()
        ];
        for (name, o) in &self.switches {
            let s = known(name, format!("int.switches.{name}"))?;
            if let Some(st) = switches[s].as_mut() {
                if let Some(b) = o.qdepth_threshold {
                    st.encoding.qdepth_threshold = b.0;
                }
                if let Some(v) = o.qdepth_shift {
                    st.encoding.qdepth_shift = shift_ok(v, &format!("int.switches.{name}.qdepth_shift"))?;
                }
                if let Some(v) = o.util_shift {
                    st.encoding.util_shift = shift_ok(v, &format!("int.switches.{name}.util_shift"))?;
                }
            }
        }
        for (i, name) in self.legacy_switches.iter().enumerate() {
            switches[known(name, format!("int.legacy_switches[{i}]"))?] = None;
        }
        let mut host_supports = vec![true; hosts];
        for (i, &h) in self.legacy_hosts.iter().enumerate() {
            if h >= hosts {
                return Err(format!("int.legacy_hosts[{i}]: host {h} does not exist; the topology has hosts 0 to {}", hosts - 1));
            }
            host_supports[h] = false;
        }
        Ok(IntRuntime {
            switches,
            encoding,
            latency_unit: self.latency_unit,
            util_window: self.util_window,
            all_flows: self.all_flows,
            host_supports,
        })
    }
}

/// The `[sim]` table.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Stop at this simulated time (required when flows are endless).
    pub duration: Option<Time>,
    /// Seed of every random stream: a whole number from 0 to 18446744073709551615 (above
    /// 9223372036854775807, TOML's largest integer, write it as a string).
    #[serde(deserialize_with = "seed_from_toml")]
    pub seed: u64,
    /// End the run as soon as every finite flow has finished.
    pub stop_when_done: bool,
    /// Threads the partitions run on: a whole number from 1 to 1024, or "auto" (the machine's
    /// cores for a fabric of 256 hosts or more, one for a smaller one). Outputs are the same
    /// for any number.
    pub threads: Threads,
}

/// How many threads a run's partitions take.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "toml::Value")]
pub enum Threads {
    /// The machine's cores for a large fabric, one for a small one.
    Auto,
    /// This many, at most one per partition.
    Count(usize),
}

/// Hosts from which `threads = "auto"` runs a fabric on every core.
pub(super) const AUTO_THREADS_HOSTS: usize = 256;

impl Threads {
    /// What a thread count is, in words.
    pub const WORDS: &'static str = "a whole number of threads from 1 to 1024, or \"auto\"";

    /// Reads a thread count as the command line or a TOML string writes it.
    pub fn parse(s: &str) -> Result<Threads, String> {
        match s.trim() {
            "auto" => Ok(Threads::Auto),
            t => match t.parse::<usize>() {
                Ok(n @ 1..=crate::world::MAX_THREADS) => Ok(Threads::Count(n)),
                _ => Err(format!("expected {}; got \"{s}\"", Threads::WORDS)),
            },
        }
    }

    /// The threads to ask of a run of `world`; `cores` is what the machine has.
    pub fn resolve(self, world: &World, cores: usize) -> usize {
        match self {
            Threads::Count(n) => n,
            Threads::Auto if world.nics().len() >= AUTO_THREADS_HOSTS => cores.min(world.partitions().count).max(1),
            Threads::Auto => 1,
        }
    }
}

impl From<Threads> for toml::Value {
    fn from(t: Threads) -> toml::Value {
        match t {
            Threads::Auto => toml::Value::String("auto".into()),
            Threads::Count(n) => toml::Value::Integer(n as i64),
        }
    }
}

impl<'de> Deserialize<'de> for Threads {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Threads, D::Error> {
        use serde::de::Error;
        match toml::Value::deserialize(d)? {
            toml::Value::Integer(i) => match usize::try_from(i) {
                Ok(n @ 1..=crate::world::MAX_THREADS) => Ok(Threads::Count(n)),
                _ => Err(D::Error::custom(format!("expected {}; got {i}", Threads::WORDS))),
            },
            toml::Value::String(s) => Threads::parse(&s).map_err(D::Error::custom),
            other => Err(D::Error::custom(format!("expected {}; got {}", Threads::WORDS, value_in_words(&other)))),
        }
    }
}

/// A seed written as a TOML integer or, for the upper half of the range, as a decimal string.
pub(super) fn seed_from_toml<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use serde::de::Error;
    const WORDS: &str = "a whole number from 0 to 18446744073709551615";
    match toml::Value::deserialize(d)? {
        toml::Value::Integer(i) => u64::try_from(i).map_err(|_| D::Error::custom(format!("expected {WORDS}; got {i}"))),
        toml::Value::String(s) => s.trim().parse().map_err(|_| D::Error::custom(format!("expected {WORDS}; got \"{s}\""))),
        other => Err(D::Error::custom(format!("expected {WORDS}; got {}", value_in_words(&other)))),
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { duration: None, seed: 1, stop_when_done: true, threads: Threads::Auto }
    }
}

/// The `[switch]` table, applied to every switch.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SwitchConfig {
    /// Shared packet buffer per switch.
    pub buffer: Bytes,
    /// Dynamic-threshold factor: a queue may hold up to alpha times the free buffer.
    pub alpha: f64,
    /// Strict-priority queues per port.
    pub priorities: u8,
    /// ECN marking of every port, unless a rate or port entry below replaces it.
    pub ecn: EcnConfig,
    /// Per link rate ("10Gbps"): ECN and a queue limit for the switch ports of that rate.
    pub rates: BTreeMap<String, PortConfig>,
    /// Per named port ("sw0->h1"): ECN and a queue limit, over the per-rate entries.
    pub ports: BTreeMap<String, PortConfig>,
    /// Packet trimming at every switch port, unless a rate or port entry replaces it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trim: Option<TrimConfig>,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            buffer: Bytes(16_000_000),
            alpha: 1.0,
            priorities: 1,
            ecn: EcnConfig { mode: "off".into(), ..EcnConfig::default() },
            rates: BTreeMap::new(),
            ports: BTreeMap::new(),
            trim: None,
        }
    }
}

impl SwitchConfig {
    /// Each switch port's queue discipline by global port id (host ports get the default):
    /// a named port's entry wins over its rate's, which wins over `[switch.ecn]` (and, for the
    /// colour threshold, `[tlt]`). A colour threshold must hold at least one frame of `frame` bytes.
    pub(super) fn disciplines(&self, graph: &Graph, names: &[String], tlt: &TltConfig, frame: u64) -> Result<Vec<Discipline>, String> {
        let mut by_rate = Vec::new();
        for (key, cfg) in &self.rates {
            let rate = Rate::parse(key).map_err(|e| format!("switch.rates.\"{key}\": {e}"))?;
            by_rate.push((rate, key, cfg));
        }
        let node_ports = graph.ports();
        let total: usize = node_ports.iter().map(Vec::len).sum();
        let mut by_port: Vec<Option<(&String, &PortConfig)>> = vec![None; total];
        for (key, cfg) in &self.ports {
            let ids = crate::net::naming::resolve_ports(names, graph, key)
                .map_err(|e| format!("switch.ports.\"{key}\": {e} (expected \"sw0->sw1\" or \"sw0\")"))?;
            for p in ids {
                by_port[p as usize] = Some((key, cfg));
            }
        }
        let default = self.ecn.discipline("switch.ecn", None)?;
        let mut out = Vec::with_capacity(total);
        for (n, plist) in node_ports.iter().enumerate() {
            for &(li, peer) in plist {
                let p = out.len();
                if !matches!(graph.nodes[n], crate::net::topology::NodeKind::Switch { .. }) {
                    out.push(Discipline::default());
                    continue;
                }
                let rate = graph.links[li].rate;
                let mut d = default;
                let mut colour = tlt.threshold.map(|b| (b.0, "tlt.threshold".to_string()));
                let mut trim = self.trim.clone().map(|t| (t, "switch.trim".to_string()));
                let mut apply = |cfg: &PortConfig, prefix: String| -> Result<(), String> {
                    if let Some(ecn) = &cfg.ecn {
                        d = Discipline { ring: d.ring, ..ecn.discipline(&format!("{prefix}.ecn"), d.limit)? };
                    }
                    if let Some(b) = cfg.buffer {
                        d.limit = Some(b.0);
                    }
                    if let Some(b) = cfg.ring {
                        d.ring = b.0;
                    }
                    if let Some(b) = cfg.tlt_threshold {
                        colour = Some((b.0, format!("{prefix}.tlt_threshold")));
                    }
                    if let Some(t) = &cfg.trim {
                        trim = Some((t.clone(), format!("{prefix}.trim")));
                    }
                    Ok(())
                };
                if let Some((_, key, cfg)) = by_rate.iter().find(|(r, _, _)| *r == rate) {
                    apply(cfg, format!("switch.rates.\"{key}\""))?;
                }
                if let Some((key, cfg)) = by_port[p] {
                    apply(cfg, format!("switch.ports.\"{key}\""))?;
                }
                if tlt.enabled {
                    let bytes = match (colour, d.marking) {
                        (Some((b, key)), _) if b < frame => {
                            return Err(format!("{key}: expected at least one full frame ({frame} bytes), got {b} bytes"));
                        }
                        (Some((b, _)), _) => b,
                        (None, crate::net::qdisc::Marking::Step(step)) => step.k.max(frame),
                        (None, _) => {
                            return Err(format!(
                                "tlt.threshold: required, since port {}->{} marks no ECN step threshold K to default to \
                                 (the paper's guideline: the base transport's steady-state maximum queue, max(K, BDP) for DCTCP)",
                                names[n], names[peer]
                            ));
                        }
                    };
                    d.colour = Some(crate::net::qdisc::ColourThreshold { bytes });
                }
                if let Some((t, key)) = trim {
                    let port = format!("{}->{}", names[n], names[peer]);
                    d.trim = t.trim(&key, &port, d.limit, frame)?;
                    if d.trim.is_some() && tlt.enabled {
                        return Err(format!("{key}: trimming cannot be combined with TLT's colour-aware dropping (tlt.enabled) at port {port}"));
                    }
                }
                out.push(d);
            }
        }
        Ok(out)
    }
}

/// The `[output]` table: which time series to sample.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    /// Queue-depth sampling (`queues.csv`).
    pub queues: Option<QueueSampling>,
    /// Congestion-window sampling (`cwnd.csv`).
    pub cwnd: Option<CwndSampling>,
    /// How `fct_buckets.csv` groups flows by size.
    pub fct_buckets: Option<FctBuckets>,
    /// `telemetry.csv`: TCP-INT echoes per flow.
    pub telemetry: Option<TelemetrySampling>,
    /// `trace.pcap`: packets leaving chosen ports, or of chosen flows.
    pub pcap: Option<PcapCapture>,
}

/// `[output.pcap]`: capture packets as they start on the wire at `ports` (like `output.queues`)
/// and every packet of `flows` at the hosts that send them, up to `max_packets`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PcapCapture {
    /// Ports to capture, "sw0->h3", "sw0" or "h3".
    #[serde(default)]
    pub ports: Vec<String>,
    /// Flow ids whose packets are captured at their sending host.
    #[serde(default)]
    pub flows: Vec<u32>,
    /// Capture at most this many packets (default 1,000,000); later ones are counted, not kept.
    pub max_packets: Option<u64>,
    /// Write whole frames with their zero payload instead of headers only.
    #[serde(default)]
    pub full_frames: bool,
}

/// `[output.telemetry]`: a row per flow at most every `interval` (0: every echo), for `flows`
/// (empty: all).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySampling {
    /// Minimum time between rows of one flow.
    pub interval: Time,
    /// Flow ids (empty: all).
    #[serde(default)]
    pub flows: Vec<u32>,
}

/// `[output.fct_buckets]`: equal-count buckets of `percent` of the flows each (default 5, as the
/// HPCC analysis), or explicit size `edges`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FctBuckets {
    /// Percent of flows per bucket.
    pub percent: Option<f64>,
    /// Ascending upper edges, like ["10KB", "100KB", "1MB"].
    pub edges: Option<Vec<Bytes>>,
}

impl FctBuckets {
    /// Validates and converts.
    pub fn bucketing(&self) -> Result<Bucketing, String> {
        match (self.percent, &self.edges) {
            (Some(_), Some(_)) => Err("output.fct_buckets.edges: give either percent or edges, not both".into()),
            (Some(p), None) if p > 0.0 && p <= 100.0 => Ok(Bucketing::Percent(p)),
            (Some(p), None) => Err(format!("output.fct_buckets.percent: expected a percent in (0, 100], got {p}")),
            (None, Some(e)) if !e.is_empty() && e.windows(2).all(|w| w[0].0 < w[1].0) => {
                Ok(Bucketing::Edges(e.iter().map(|b| b.0).collect()))
            }
            (None, Some(_)) => Err("output.fct_buckets.edges: expected ascending sizes like [\"10KB\", \"1MB\"]".into()),
            (None, None) => Ok(Bucketing::default()),
        }
    }
}

/// `[output.queues]`: sample chosen egress ports every `interval`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSampling {
    /// Sampling period.
    pub interval: Time,
    /// Ports as "sw0->sw1" (the egress of sw0 towards sw1), "sw0" (all its ports) or "h3" (a NIC).
    pub ports: Vec<String>,
}

/// `[output.cwnd]`: sample chosen flows' windows every `interval`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CwndSampling {
    /// Sampling period.
    pub interval: Time,
    /// Flow ids; empty means every flow.
    #[serde(default)]
    pub flows: Vec<u32>,
}

