//! The scenario file: its schema, `--set` overrides, and validation that names the file, line and
//! key of every problem.

use crate::host::cpu::CpuConfig;
use crate::host::offload::OffloadConfig;
use crate::net::circuit::{CircuitConfig, CircuitParts};
use crate::net::qdisc::{Discipline, EcnConfig, PortConfig};
use crate::net::topology::{Graph, TopologyConfig};
use crate::time::{Bytes, Rate, Time};
use crate::transport::build::{ClassRuntime, IntRuntime};
use crate::world::{Bucketing, Parts, World};
use crate::transport::rdma::{RdmaConfig, RdmaTlt};
use crate::transport::tcp::TcpConfig;
use crate::workload::{FlowSpec, WorkloadConfig, WorkloadContext};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use crate::words::{in_words, value_in_words};

pub mod classes;
mod edit;
mod footprint;
pub mod host_policy;

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
    /// The circuit schedule and ToR VOQs of a `topology.kind = "rdcn"` network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit: Option<CircuitConfig>,
    /// Hosts whose CPU is modelled: cores, clock and the cycles of each operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuConfig>,
    /// AccelTCP's NIC offloads of connection setup and teardown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload: Option<OffloadConfig>,
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
    fn settings(&self, frame: u64, host_rate: crate::time::Rate) -> Result<Option<crate::world::PfcSettings>, String> {
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
const AUTO_THREADS_HOSTS: usize = 256;

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
fn seed_from_toml<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
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
        }
    }
}

impl SwitchConfig {
    /// Each switch port's queue discipline by global port id (host ports get the default):
    /// a named port's entry wins over its rate's, which wins over `[switch.ecn]` (and, for the
    /// colour threshold, `[tlt]`). A colour threshold must hold at least one frame of `frame` bytes.
    fn disciplines(&self, graph: &Graph, names: &[String], tlt: &TltConfig, frame: u64) -> Result<Vec<Discipline>, String> {
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
                let mut apply = |cfg: &PortConfig, prefix: String| -> Result<(), String> {
                    if let Some(ecn) = &cfg.ecn {
                        d = ecn.discipline(&format!("{prefix}.ecn"), d.limit)?;
                    }
                    if let Some(b) = cfg.buffer {
                        d.limit = Some(b.0);
                    }
                    if let Some(b) = cfg.tlt_threshold {
                        colour = Some((b.0, format!("{prefix}.tlt_threshold")));
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
                out.push(d);
            }
        }
        Ok(out)
    }
}

pub use classes::{ClassConfig, ClassTransport, MatchRules, DEFAULT_CC};
pub(crate) use edit::Edit;
pub use footprint::Footprint;

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

/// A scenario problem, located as precisely as the input allows.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioError {
    /// The scenario file.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong, starting with the key path when there is one.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

/// A scenario read from disk, with where it came from.
#[derive(Clone, Debug)]
pub struct LoadedScenario {
    /// The parsed scenario (overrides applied).
    pub scenario: Scenario,
    /// The file it was read from.
    pub file: String,
    /// Directory relative paths in it resolve against.
    pub base_dir: PathBuf,
    /// The user's text, before overrides: lines in errors point into it.
    text: String,
    /// Each override as written, with the key path it sets ("workloads[0].size").
    overrides: Vec<(String, String)>,
}

impl LoadedScenario {
    /// An error about the key that starts `message`, located at the `--set` that set it or at its
    /// line in the file.
    pub fn error_at(&self, message: String) -> ScenarioError {
        let key = message.split(':').next().unwrap_or_default();
        locate(&self.file, &self.text, &self.overrides, key, message.clone(), None)
    }
}

/// Places an error about `key`: an override that set the key (or a table above it) is cited by
/// its `--set`; otherwise the key's line in the user's text, or `line` when given.
fn locate(file: &str, text: &str, overrides: &[(String, String)], key: &str, message: String, line: Option<usize>) -> ScenarioError {
    let key = key.trim();
    let set_by = overrides.iter().rev().find(|(path, _)| {
        key == path || key.starts_with(&format!("{path}.")) || key.starts_with(&format!("{path}["))
    });
    match set_by {
        Some((_, o)) => ScenarioError { file: file.to_string(), line: None, message: format!("--set {o}: {message}") },
        None => ScenarioError { file: file.to_string(), line: line.or_else(|| line_of_key(text, key)), message },
    }
}

/// Reads `path`, applies `key.path=value` overrides and parses it.
pub fn load(path: &Path, overrides: &[String]) -> Result<LoadedScenario, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ScenarioError { file: file.clone(), line: None, message: format!("cannot read the scenario: {e}") })?;
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    parse(&text, &file, &base_dir, overrides)
}

/// Parses scenario text; `file` names it in errors.
pub fn parse(text: &str, file: &str, base_dir: &Path, overrides: &[String]) -> Result<LoadedScenario, ScenarioError> {
    parse_edited(text, file, base_dir, overrides, &[])
}

/// [`parse`], with `edits` made once the overrides are applied (keys removed, near misses
/// corrected): how [`crate::check`] reads on past a problem.
pub(crate) fn parse_edited(
    text: &str,
    file: &str,
    base_dir: &Path,
    overrides: &[String],
    edits: &[Edit],
) -> Result<LoadedScenario, ScenarioError> {
    let err = |line, message| ScenarioError { file: file.to_string(), line, message };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let line = e.span().map(|s| line_at(text, s.start));
        let why = e.message().trim();
        let why = if why.is_empty() {
            "this line cannot be read; expected `key = value`, a [table] header, a comment or a blank line"
        } else {
            why
        };
        err(line, format!("not valid TOML: {why}"))
    })?;
    tables_not_lists(doc.as_item(), &mut Vec::new()).map_err(|(key, m)| locate(file, text, &[], &key, m, None))?;
    let defined: Vec<String> =
        doc.get("classes").and_then(|c| c.as_table_like()).map(|t| t.iter().map(|(k, _)| k.to_string()).collect()).unwrap_or_default();
    let mut set = Vec::new();
    for o in overrides {
        let path = apply_override(&mut doc, o).map_err(|m| err(None, m))?;
        set.push((path, o.clone()));
    }
    tables_not_lists(doc.as_item(), &mut Vec::new()).map_err(|(key, m)| locate(file, text, &set, &key, m, None))?;
    known_classes(&defined, &set).map_err(|m| err(None, m))?;
    for edit in edits {
        edit.apply(&mut doc);
    }
    let edited = doc.to_string();
    let de = toml::Deserializer::new(&edited);
    let scenario: Scenario = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.inner();
        // Spans point into the edited text, which matches the user's only when nothing was changed.
        let line = if set.is_empty() && edits.is_empty() { inner.span().map(|s| line_at(&edited, s.start)) } else { None };
        let msg = in_words(inner.message().trim());
        if path == "." || path.is_empty() {
            err(line, msg)
        } else {
            locate(file, text, &set, &path, format!("{path}: {msg}"), line)
        }
    })?;
    Ok(LoadedScenario { scenario, file: file.to_string(), base_dir: base_dir.to_path_buf(), text: text.to_string(), overrides: set })
}

/// Key paths (with `*` for any name or index) whose value must be a table, never a list.
const TABLE_KEYS: &[&str] = &[
    "sim", "topology", "switch", "switch.ecn", "transport", "classes", "classes.*", "classes.*.params",
    "classes.*.match", "events.*", "events.*.params", "workloads.*", "workloads.*.flows.*", "output", "output.queues", "output.cwnd",
    "output.fct_buckets", "output.telemetry", "output.pcap", "int", "int.switches", "int.switches.*", "policy", "limits", "tlt", "pfc", "rdma",
    "groups", "groups.*", "groups.*.hosts", "groups.*.classes", "groups.*.classes.*", "groups.*.classes.*.params", "groups.*.classes.*.match",
];

/// Refuses a list where the schema has a table (`sim = ["5ms", 7, false]`), which serde would
/// otherwise read by position.
fn tables_not_lists(item: &toml_edit::Item, at: &mut Vec<String>) -> Result<(), (String, String)> {
    let is_table_key = |at: &[String]| {
        TABLE_KEYS.iter().any(|k| {
            let parts: Vec<&str> = k.split('.').collect();
            parts.len() == at.len() && parts.iter().zip(at).all(|(p, a)| *p == "*" || p == a)
        })
    };
    let shown = |at: &[String]| {
        let mut out = String::new();
        for seg in at {
            match seg.parse::<usize>() {
                Ok(i) => out.push_str(&format!("[{i}]")),
                Err(_) if out.is_empty() => out.push_str(seg),
                Err(_) => out.push_str(&format!(".{seg}")),
            }
        }
        out
    };
    if let Some(arr) = item.as_array() {
        if is_table_key(at) {
            let key = shown(at);
            return Err((key.clone(), format!("{key}: expected a table of named keys ([{key}] or {key} = {{ .. }}); got a list, whose entries cannot be matched to keys")));
        }
        for (i, v) in arr.iter().enumerate() {
            at.push(i.to_string());
            let r = tables_not_lists(&toml_edit::Item::Value(v.clone()), at);
            at.pop();
            r?;
        }
    } else if let Some(arr) = item.as_array_of_tables() {
        for (i, t) in arr.iter().enumerate() {
            at.push(i.to_string());
            let r = tables_not_lists(&toml_edit::Item::Table(t.clone()), at);
            at.pop();
            r?;
        }
    } else if let Some(t) = item.as_table_like() {
        if at.len() > 6 {
            return Ok(()); // deeper than any key of the schema: serde names what is wrong there
        }
        for (k, v) in t.iter() {
            at.push(k.to_string());
            let r = tables_not_lists(v, at);
            at.pop();
            r?;
        }
    }
    Ok(())
}

/// A `--set classes.<name>...` must name a class of the scenario (or `default`), unless another
/// override also assigns that class to flows; otherwise it configures a class no flow uses.
fn known_classes(defined: &[String], set: &[(String, String)]) -> Result<(), String> {
    for (path, o) in set {
        let Some(name) = path.strip_prefix("classes.").map(|r| r.split(['.', '[']).next().unwrap_or_default()) else {
            continue;
        };
        let assigned = set.iter().any(|(p, v)| {
            (p.ends_with(".class") || p.starts_with("policy.")) && v.split_once('=').is_some_and(|(_, v)| v.trim().trim_matches('"') == name)
        });
        if name != "default" && !defined.iter().any(|d| d == name) && !assigned {
            let others: Vec<&str> = defined.iter().map(String::as_str).filter(|d| *d != "default").collect();
            let list = if others.is_empty() {
                "it defines none besides default".to_string()
            } else {
                format!("its classes are default, {}", others.join(", "))
            };
            return Err(format!("--set {o}: the scenario has no class \"{name}\" and no flow would use it; {list}"));
        }
    }
    Ok(())
}

/// The most levels a `--set` key path may have; the schema's deepest key has six.
const MAX_KEY_DEPTH: usize = 16;

/// Sets one `a.b.c=value` override; the value is TOML if it parses as TOML, a string otherwise.
/// Returns the key path it set, as errors spell it ("workloads[0].size").
/// Splits a `--set` key path at its dots, as TOML does: a double-quoted key is one key, dots
/// and all, without its quotes. `None` when a quote is left open.
fn split_key_path(path: &str) -> Option<Vec<String>> {
    let (mut keys, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    for c in path.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => keys.push(std::mem::take(&mut cur).trim().to_string()),
            c => cur.push(c),
        }
    }
    keys.push(cur.trim().to_string());
    (!quoted).then_some(keys)
}

fn apply_override(doc: &mut toml_edit::DocumentMut, o: &str) -> Result<String, String> {
    let (path, raw) = o
        .split_once('=')
        .ok_or_else(|| format!("--set {o}: expected key.path=value, like classes.query.cc=dctcp"))?;
    let keys = split_key_path(path.trim()).ok_or_else(|| {
        format!("--set {o}: unbalanced quotes in \"{}\"; quote a key with dots whole, like switch.rates.\"2.5Gbps\".ecn.k", path.trim())
    })?;
    if keys.iter().any(|k| k.is_empty()) {
        return Err(format!("--set {o}: empty key in \"{}\"; expected key.path=value", path.trim()));
    }
    if keys.len() > MAX_KEY_DEPTH {
        return Err(format!("--set {o}: the key has {} levels; no scenario key has more than {MAX_KEY_DEPTH}", keys.len()));
    }
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let shown = {
        let mut out = String::new();
        for (i, k) in keys.iter().enumerate() {
            match k.parse::<usize>() {
                Ok(n) if i > 0 => out.push_str(&format!("[{n}]")),
                _ if i == 0 => out.push_str(k),
                _ => out.push_str(&format!(".{k}")),
            }
        }
        out
    };
    let value: toml_edit::Value = raw
        .trim()
        .parse::<toml_edit::Value>()
        .unwrap_or_else(|_| toml_edit::Value::from(raw.trim()));
    let mut table: &mut dyn toml_edit::TableLike = doc.as_table_mut();
    let mut i = 0;
    while i < keys.len() {
        let k = keys[i];
        if i + 1 == keys.len() {
            table.insert(k, toml_edit::Item::Value(value));
            return Ok(shown);
        }
        let here = keys[..=i].join(".");
        if let Ok(idx) = keys[i + 1].parse::<usize>() {
            let arr = table
                .get_mut(k)
                .and_then(|it| it.as_array_of_tables_mut())
                .ok_or_else(|| format!("--set {o}: \"{here}\" is not a list of tables"))?;
            let len = arr.len();
            table = arr
                .get_mut(idx)
                .ok_or_else(|| {
                    format!("--set {o}: \"{here}\" has {}; index {idx} is out of range", crate::words::count(len as u64, "entry", "entries"))
                })?;
            i += 2;
            if i == keys.len() {
                return Err(format!("--set {o}: name a key inside the entry, like {here}.{idx}.size"));
            }
            continue;
        }
        if table.get(k).is_none() {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            table.insert(k, toml_edit::Item::Table(t));
        }
        table = table
            .get_mut(k)
            .and_then(|it| it.as_table_like_mut())
            .ok_or_else(|| format!("--set {o}: \"{here}\" is a value, not a table"))?;
        i += 1;
    }
    Ok(shown)
}

/// 1-based line of a byte offset.
fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

/// Best-effort line of a dotted key path such as "switch.ecn.k" or "workloads[1].src", or else of
/// the nearest table or key above it that the text writes out (`params = { gg = 1 }` for
/// "classes.q.params.gg").
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let mut key = key.trim();
    // An entry of a list of tables ("workloads[1].size"): its own `[[workloads]]` block, not the
    // first entry's.
    let entry = key.split_once('[').and_then(|(name, r)| {
        let (i, rest) = r.split_once(']')?;
        let header = format!("[[{name}]]");
        let start = text.lines().enumerate().filter(|(_, l)| l.trim() == header).nth(i.parse().ok()?)?.0;
        Some((name, start, rest.trim_start_matches('.')))
    });
    if let Some((name, start, rest)) = entry {
        // The entry runs to the next table that is not its own sub-table.
        let own = |l: &str| l.starts_with(&format!("[{name}.")) || l.starts_with(&format!("[[{name}."));
        let entry: Vec<&str> =
            text.lines().skip(start + 1).take_while(|l| !l.trim_start().starts_with('[') || own(l.trim_start())).collect();
        let within = (!rest.is_empty()).then(|| line_of_key(&entry.join("\n"), rest)).flatten();
        return Some(start + 1 + within.unwrap_or(0));
    }
    loop {
        if let Some(line) = line_of_written_key(text, key) {
            return Some(line);
        }
        key = key.rsplit_once('.')?.0;
    }
}

/// The line that writes the key path `key` itself, if one does.
fn line_of_written_key(text: &str, key: &str) -> Option<usize> {
    let parts: Vec<&str> = key.split('.').collect();
    let leaf = parts.last()?.split('[').next()?;
    if leaf.is_empty() {
        return None;
    }
    let table = parts[..parts.len() - 1].join(".");
    let table = table.split('[').next().unwrap_or_default();
    let mut in_table = table.is_empty();
    let mut current = "";
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            let name = t.trim_matches(|c| c == '[' || c == ']').trim();
            in_table = table.is_empty() || name == table || name.starts_with(&format!("{table}."));
            current = name;
            if !table.is_empty() && name == format!("{table}.{leaf}") {
                return Some(i + 1);
            }
            continue;
        }
        if in_table && (t.starts_with(&format!("{leaf} ")) || t.starts_with(&format!("{leaf}="))) {
            return Some(i + 1);
        }
        // A dotted key (`classes.q = { ... }` in `[groups.g]`) writes its whole path.
        if let Some((lhs, _)) = t.split_once('=') {
            let lhs: String = lhs.split('.').map(str::trim).collect::<Vec<_>>().join(".");
            let full = if current.is_empty() { lhs } else { format!("{current}.{lhs}") };
            if full == key {
                return Some(i + 1);
            }
        }
    }
    None
}

/// Builds the world a loaded scenario describes, validating everything that needs the topology.
pub fn build(loaded: &LoadedScenario) -> Result<World, String> {
    build_measured(loaded).map(|(mut world, footprint)| {
        world.room_for = footprint.fit(loaded.scenario.limits.memory.map(|b| b.0)).map(|n| n as usize);
        world
    })
}

/// Readies a world built from `loaded` to run on `threads` threads (at most one per partition,
/// and as many as the memory holds replicas of the world), each other thread's replica built from
/// `loaded` again; returns the threads the run will use.
pub fn spread(loaded: &LoadedScenario, world: &mut World, threads: usize) -> Result<usize, String> {
    world.spread(threads, &|| build(loaded))
}

/// [`build`], with what a run of the world will hold in memory.
pub fn build_measured(loaded: &LoadedScenario) -> Result<(World, Footprint), String> {
    let graph = loaded.scenario.topology.build(&loaded.base_dir)?;
    let (parts, footprint) = prepare(loaded, &graph)?;
    Ok((World::new(&graph, parts), footprint))
}

/// Validates everything that needs the topology and materializes the flows; refuses a scenario
/// whose run would not fit in memory (`limits.memory`, or what this process may use).
pub fn prepare(loaded: &LoadedScenario, graph: &Graph) -> Result<(Parts, Footprint), String> {
    let sc = &loaded.scenario;
    sc.transport.validate()?;
    sc.rdma.validate()?;
    if sc.rdma.recovery != crate::transport::rdma::Recovery::Gbn && !sc.classes.values().any(|c| c.transport == ClassTransport::Rdma) {
        return Err(format!(
            "rdma.recovery: \"{}\" recovers RDMA queue pairs, and no class has transport = \"rdma\"; TCP classes always recover with SACK (RFC 6675), so remove the key or give a class transport = \"rdma\"",
            sc.rdma.recovery.name()
        ));
    }
    if sc.switch.buffer.0 == 0 {
        return Err("switch.buffer: expected a positive size like \"16MB\"".into());
    }
    if !(sc.switch.alpha > 0.0 && sc.switch.alpha.is_finite()) {
        return Err(format!("switch.alpha: expected a positive number, got {}", sc.switch.alpha));
    }
    if !(1..=8).contains(&sc.switch.priorities) {
        return Err(format!("switch.priorities: expected 1 to 8 queues, got {}", sc.switch.priorities));
    }
    let bucketing = match &sc.output.fct_buckets {
        Some(b) => b.bucketing()?,
        None => Bucketing::default(),
    };
    if sc.sim.duration == Some(Time::ZERO) {
        return Err("sim.duration: expected a positive duration like \"10ms\"".into());
    }
    let limits = &sc.limits;
    let buckets = match &bucketing {
        Bucketing::Percent(p) => (100.0 / p).ceil(),
        Bucketing::Edges(e) => e.len() as f64 + 1.0,
    };
    if buckets > limits.fct_buckets as f64 {
        let key = if matches!(bucketing, Bucketing::Percent(_)) { "percent" } else { "edges" };
        return Err(format!(
            "output.fct_buckets.{key}: would make {buckets:.0} buckets per class, above limits.fct_buckets = {}; use at least {} percent per bucket or raise the limit",
            limits.fct_buckets,
            100.0 / limits.fct_buckets as f64
        ));
    }
    if let Some(d) = sc.sim.duration {
        // The largest frame on the wire: a full TCP segment, or an RDMA class's full packet.
        let tcp = sc.transport.frame(sc.transport.mss()) as u64;
        let rdma = sc.classes.values().any(|c| c.transport == ClassTransport::Rdma).then(|| sc.rdma.frame(sc.rdma.mtu as u64) as u64);
        slow_links(graph, &sc.topology.kind, tcp.max(rdma.unwrap_or(0)), d)?;
    }

    let node_ports = graph.ports();
    let host_rates: Vec<crate::time::Rate> =
        graph.hosts().iter().map(|&n| graph.links[node_ports[n][0].0].rate).collect();
    // A source scales its preset's steps to the NIC's rate: the fastest host's here.
    let line = host_rates.iter().copied().max().unwrap_or(crate::time::Rate::gbps(100));
    let checked = classes::check(&sc.classes, classes::Side::Simulator { priorities: sc.switch.priorities }, line)?;
    let names: Vec<String> = checked.iter().map(|c| c.name.clone()).collect();
    let class_index = |n: &str| names.iter().position(|c| c == n);
    let rules = crate::workload::ClassRules {
        default: class_index("default").unwrap_or(0),
        intents: classes::check_intents(&sc.policy, &checked)?,
        rules: classes::check_matches(&checked, classes::Side::Simulator { priorities: sc.switch.priorities })?,
    };
    let mut changes = classes::check_events(&sc.events, &checked, sc.sim.duration)?;
    let classes: Vec<ClassRuntime> = checked
        .into_iter()
        .enumerate()
        .map(|(i, c)| ClassRuntime {
            changes: std::mem::take(&mut changes[i]).into(),
            cc: c.cc.to_string(),
            factory: c.factory,
            priority: c.config.priority,
            fallback: (c.fallback.to_string(), c.fallback_factory),
            rdma: c.config.transport == ClassTransport::Rdma,
            nic: sc.rdma.class_nic(c.nic),
            name: c.name,
        })
        .collect();
    let ctx = WorkloadContext {
        max_flows: limits.flows,
        max_outstanding: limits.outstanding,
        rules: std::sync::Arc::new(rules),
        host_rates: &host_rates,
        base_dir: &loaded.base_dir,
        class_index: &class_index,
        class_names: &names,
        seed: sc.sim.seed,
        mss: sc.transport.mss(),
        handshake: sc.transport.handshake,
    };
    let mut flows = Vec::new();
    let mut apps = Vec::new();
    // The workload that makes the most flows, which a refusal for memory names.
    let mut most_made = (0, "workloads".to_string());
    for (i, w) in sc.workloads.iter().enumerate() {
        let key = format!("workloads[{i}]");
        if w.kind == "proxy" {
            if let Some((name, _)) = sc.classes.iter().find(|(_, c)| c.transport == ClassTransport::Rdma) {
                return Err(format!(
                    "{key}.kind: a proxy relays TCP connections, but class \"{name}\" runs on RDMA; use TCP classes with a proxy"
                ));
            }
        }
        let generated = w.generate(&key, i, &ctx)?;
        sizes_fit_in_time(&generated.flows, &host_rates, &sc.transport, &key, w)?;
        if (flows.len() + generated.flows.len()) as u64 > limits.flows {
            return Err(format!(
                "{key}: the workloads make {} flows so far, above limits.flows = {}; make fewer or raise the limit",
                flows.len() + generated.flows.len(),
                limits.flows
            ));
        }
        if generated.flows.len() > most_made.0 {
            most_made = (generated.flows.len(), key.clone());
        }
        flows.extend(generated.flows);
        apps.extend(generated.app);
    }
    // Stable: flows starting together keep workload order, so ids are deterministic.
    flows.sort_by_key(|f| f.start);
    if sc.sim.duration.is_none() {
        if let Some(i) = sc.workloads.iter().position(|w| w.kind == "bulk" && w.size.is_none()) {
            return Err(format!("sim.duration: required because workloads[{i}] has endless flows (kind = \"bulk\" without size)"));
        }
    }

    let names = crate::net::naming::node_names(graph);
    let disciplines = sc.switch.disciplines(graph, &names, &sc.tlt, sc.transport.frame(sc.transport.mss()) as u64)?;
    let switch_names: Vec<String> = names.iter().filter(|n| n.starts_with("sw")).cloned().collect();
    let int = sc.int.runtime(&switch_names, graph.hosts().len())?;
    let hosts = graph.hosts().len();
    for (i, &h) in sc.transport.agentless_hosts.iter().enumerate() {
        if h >= hosts {
            return Err(format!("transport.agentless_hosts[{i}]: host {h} does not exist; the topology has hosts 0 to {}", hosts - 1));
        }
        if !sc.transport.handshake {
            return Err(format!(
                "transport.agentless_hosts: negotiation happens in the handshake; set transport.handshake = true for host {h} to be seen without an agent"
            ));
        }
    }
    let capture = match &sc.output.pcap {
        None => None,
        Some(pc) => {
            let total_ports: usize = graph.ports().iter().map(Vec::len).sum();
            let mut ports = vec![false; total_ports];
            for (i, spec) in pc.ports.iter().enumerate() {
                let ps = crate::net::naming::resolve_ports(&names, graph, spec)
                    .map_err(|e| format!("output.pcap.ports[{i}]: {e} (expected \"sw0->sw1\", \"sw0\" or \"h3\")"))?;
                for p in ps {
                    ports[p as usize] = true;
                }
            }
            if pc.ports.is_empty() && pc.flows.is_empty() {
                return Err("output.pcap: name ports = [..] or flows = [..] to capture".into());
            }
            if pc.max_packets == Some(0) {
                return Err("output.pcap.max_packets: expected at least 1".into());
            }
            if let Some(m) = pc.max_packets.filter(|&m| m > limits.captured_packets) {
                return Err(format!(
                    "output.pcap.max_packets: {m} packets is above limits.captured_packets = {}; capture fewer or raise the limit",
                    limits.captured_packets
                ));
            }
            flow_ids_exist(&pc.flows, "output.pcap.flows", flows.len(), !apps.is_empty(), limits)?;
            Some(crate::net::capture::CaptureSpec {
                ports,
                flows: pc.flows.clone(),
                max_packets: pc.max_packets.unwrap_or(1_000_000),
                full_frames: pc.full_frames,
            })
        }
    };
    // How long the run lasts: its duration, or at least until the last flow starts.
    let horizon = sc.sim.duration.unwrap_or_else(|| flows.last().map_or(Time::ZERO, |f| f.start));
    let samples = |count: usize, interval: Time| count as f64 * (horizon.0 as f64 / interval.0.max(1) as f64).floor();
    let (mut queue_ports, mut queue_interval, mut queue_samples) = (Vec::new(), Time::ZERO, 0.0);
    if let Some(qs) = &sc.output.queues {
        if qs.interval == Time::ZERO {
            return Err("output.queues.interval: expected a positive duration like \"1us\"".into());
        }
        queue_interval = qs.interval;
        for (i, spec) in qs.ports.iter().enumerate() {
            let ps = crate::net::naming::resolve_ports(&names, graph, spec)
                .map_err(|e| format!("output.queues.ports[{i}]: {e} (expected \"sw0->sw1\", \"sw0\" or \"h3\")"))?;
            // A port named twice ("sw0->h0" and "sw0") is sampled once.
            queue_ports.extend(ps.into_iter().filter(|p| !queue_ports.contains(p)).collect::<Vec<_>>());
        }
        let n = samples(queue_ports.len(), qs.interval);
        queue_samples = n;
        if n > limits.samples as f64 {
            return Err(format!(
                "output.queues.interval: sampling {} every {} for {horizon} makes {n:.0} samples, above limits.samples = {}; sample less often or raise the limit",
                crate::words::count(queue_ports.len() as u64, "port", "ports"),
                qs.interval,
                limits.samples
            ));
        }
    }
    let (mut cwnd_flows, mut cwnd_interval, mut cwnd_samples) = (None, Time::ZERO, 0.0);
    if let Some(cs) = &sc.output.cwnd {
        if cs.interval == Time::ZERO {
            return Err("output.cwnd.interval: expected a positive duration like \"10us\"".into());
        }
        if let Some(&bad) = cs.flows.iter().find(|&&f| f as usize >= flows.len()) {
            return Err(format!(
                "output.cwnd.flows: flow {bad} does not exist; the scenario has {}",
                crate::words::count(flows.len() as u64, "flow", "flows")
            ));
        }
        let sampled = if cs.flows.is_empty() { flows.len() } else { cs.flows.len() };
        let n = samples(sampled, cs.interval);
        cwnd_samples = n;
        if n > limits.samples as f64 {
            return Err(format!(
                "output.cwnd.interval: sampling {} every {} for {horizon} makes {n:.0} samples, above limits.samples = {}; sample less often or raise the limit",
                crate::words::count(sampled as u64, "flow", "flows"),
                cs.interval,
                limits.samples
            ));
        }
        cwnd_interval = cs.interval;
        cwnd_flows = Some(cs.flows.clone());
    }
    if let Some(t) = &sc.output.telemetry {
        flow_ids_exist(&t.flows, "output.telemetry.flows", flows.len(), !apps.is_empty(), limits)?;
    }
    // A capture keeps at most max_packets, and no more than each data segment and its ACK at
    // each place it looks (a captured port, or the senders of captured flows).
    let captured = capture.as_ref().map_or(0, |c| {
        let places = c.ports.iter().filter(|&&p| p).count() as u64 + u64::from(!c.flows.is_empty());
        let segments: Option<u64> = flows.iter().map(|f| f.size.map(|s| s.div_ceil(sc.transport.mss()))).sum();
        match segments {
            Some(s) if apps.is_empty() => c.max_packets.min(2 * s * places),
            _ => c.max_packets,
        }
    });
    let footprint = Footprint::new(&flows, most_made.1, &host_rates, &sc.transport, queue_samples, cwnd_samples, captured);
    footprint.within(limits.memory.map(|b| b.0))?;
    let parts = Parts {
        seed: sc.sim.seed,
        duration: sc.sim.duration,
        stop_when_done: sc.sim.stop_when_done,
        buffer: (sc.switch.buffer.0, sc.switch.alpha),
        priorities: sc.switch.priorities,
        disciplines,
        tcp: TcpConfig { tlt: sc.tlt.enabled, ..sc.transport.clone() },
        rdma: (sc.rdma.clone(), sc.tlt.enabled.then_some(RdmaTlt { every: sc.tlt.every, marking: sc.tlt.rdma_marking })),
        pfc: sc.pfc.settings(sc.transport.frame(sc.transport.mss()) as u64, host_rates.iter().copied().max().unwrap_or(crate::time::Rate(1)))?,
        circuit: circuit_parts(sc, &loaded.base_dir, &classes)?,
        cpu: cpu_config(sc, graph.hosts().len())?,
        offload: offload_config(sc, graph.hosts().len())?,
        classes,
        flows,
        apps,
        queue_ports,
        queue_interval,
        cwnd_flows,
        cwnd_interval,
        bucketing,
        int,
        capture,
        telemetry: sc.output.telemetry.as_ref().map(|t| (t.interval, (!t.flows.is_empty()).then(|| t.flows.clone()))),
    };
    Ok((parts, footprint))
}

/// The circuit side of an `rdcn` network (absent elsewhere, where a `[circuit]` table is an error).
fn circuit_parts(sc: &Scenario, base_dir: &Path, classes: &[ClassRuntime]) -> Result<Option<CircuitParts>, String> {
    let t = &sc.topology;
    if t.kind != "rdcn" {
        return match sc.circuit {
            Some(_) => Err(format!("circuit: only for topology.kind = \"rdcn\", not \"{}\"", t.kind)),
            None => Ok(None),
        };
    }
    let cfg = sc.circuit.clone().unwrap_or_default();
    // The topology was built, so its counts are there and positive.
    let (racks, hosts_per_rack) = (t.racks.unwrap_or(2), t.hosts_per_rack.unwrap_or(1));
    if racks > u16::MAX as u32 {
        return Err(format!("topology.racks: at most {} racks, got {racks}", u16::MAX));
    }
    let schedule = cfg.build_schedule(racks as u16, base_dir)?;
    if pfc_or_rdma(sc) {
        return Err("circuit: the circuit network carries TCP; PFC and RDMA classes are not supported on it".into());
    }
    let ece_signal = cfg.ece_signal.unwrap_or_else(|| classes.iter().any(|c| c.cc == "retcp"));
    Ok(Some(CircuitParts { schedule: std::sync::Arc::new(schedule), racks: racks as u16, hosts_per_rack, sizing: cfg.sizing()?, ece_signal }))
}

/// `[cpu]`, checked: hosts that exist, at least one core, a clock and costs that make sense.
fn cpu_config(sc: &Scenario, hosts: usize) -> Result<Option<CpuConfig>, String> {
    let Some(c) = &sc.cpu else { return Ok(None) };
    host_ordinals(&c.hosts, "cpu.hosts", hosts)?;
    if !(1..=1024).contains(&c.cores) {
        return Err(format!("cpu.cores: expected 1 to 1024 cores, got {}", c.cores));
    }
    if !(c.ghz.is_finite() && (0.01..=100.0).contains(&c.ghz)) {
        return Err(format!("cpu.ghz: expected a clock rate between 0.01 and 100 GHz, got {}", c.ghz));
    }
    let k = &c.costs;
    let cycles = [k.setup, k.accept, k.rx_packet, k.tx_packet, k.request, k.teardown, k.timer, k.handover];
    if cycles.iter().any(|&n| n > 1_000_000_000) || !(k.per_byte.is_finite() && (0.0..=1e6).contains(&k.per_byte)) {
        return Err("cpu.costs: expected whole numbers of cycles up to 10^9 per operation (per_byte: 0 to 10^6)".into());
    }
    Ok(Some(c.clone()))
}

/// `[offload]`, checked: hosts that exist, a table, a timer and a wheel slot.
fn offload_config(sc: &Scenario, hosts: usize) -> Result<Option<OffloadConfig>, String> {
    let Some(o) = &sc.offload else { return Ok(None) };
    host_ordinals(&o.hosts, "offload.hosts", hosts)?;
    if sc.classes.values().any(|c| c.transport == ClassTransport::Rdma) {
        return Err("offload: AccelTCP's offloads act on TCP connections; RDMA classes are not supported with it".into());
    }
    if (o.teardown || o.splice) && (o.table_entries == 0 || o.table_entries > 1 << 24) {
        return Err(format!("offload.table_entries: expected 1 to 16777216 connections, got {}", o.table_entries));
    }
    if o.rto == Time::ZERO || o.rto > Time::from_ms(60_000) {
        return Err(format!("offload.rto: expected a timeout above 0 and at most 60s, got {}", o.rto));
    }
    if o.wheel_slot == Time::ZERO || o.wheel_slot > o.rto {
        return Err(format!("offload.wheel_slot: expected a slot above 0 and at most offload.rto ({}), got {}", o.rto, o.wheel_slot));
    }
    if (o.setup || o.teardown) && !sc.transport.handshake {
        return Err("offload: setup and teardown offloads act on the handshake and the close, so they need transport.handshake = true".into());
    }
    Ok(Some(o.clone()))
}

/// Host ordinals listed under `key` must exist.
fn host_ordinals(list: &[usize], key: &str, hosts: usize) -> Result<(), String> {
    match list.iter().find(|&&h| h >= hosts) {
        Some(h) => Err(format!("{key}: host {h} does not exist; the topology has hosts 0 to {}", hosts - 1)),
        None => Ok(()),
    }
}

fn pfc_or_rdma(sc: &Scenario) -> bool {
    sc.pfc.enabled || sc.classes.values().any(|c| c.transport == ClassTransport::Rdma)
}

/// Flow ids listed under `key` must name flows: ids below the count of flows known up front, or,
/// when applications open flows during the run, below `limits.flows`.
fn flow_ids_exist(ids: &[u32], key: &str, known: usize, apps: bool, limits: &Limits) -> Result<(), String> {
    let bound = if apps { limits.flows.max(known as u64) } else { known as u64 };
    match ids.iter().position(|&f| f as u64 >= bound) {
        None => Ok(()),
        Some(i) if apps => Err(format!(
            "{key}[{i}]: flow {} cannot exist; the scenario makes at most limits.flows = {bound} flows (ids 0 to {})",
            ids[i],
            bound.saturating_sub(1)
        )),
        Some(i) => Err(format!(
            "{key}[{i}]: flow {} does not exist; the scenario has {} (ids 0 to {})",
            ids[i],
            crate::words::count(known as u64, "flow", "flows"),
            known.saturating_sub(1)
        )),
    }
}

/// Every link must carry at least one full frame of `frame` bytes within the run, or nothing it
/// reports means much.
fn slow_links(graph: &Graph, kind: &str, frame: u64, duration: Time) -> Result<(), String> {
    let hosts = graph.hosts();
    for l in &graph.links {
        let takes = l.rate.tx_time(frame);
        if takes <= duration {
            continue;
        }
        let host_link = hosts.contains(&l.a) || hosts.contains(&l.b);
        let key = match kind {
            "hpcc_file" => "topology.file",
            _ if host_link => "topology.host_rate",
            "dumbbell" => "topology.core_rate",
            "leaf_spine" => "topology.fabric_rate",
            _ => "topology.agg_rate",
        };
        return Err(format!(
            "{key}: at {} one full {frame}-byte frame takes {takes}, longer than the whole run (sim.duration = {duration}); use a faster link or a longer run",
            l.rate
        ));
    }
    Ok(())
}

/// A flow's transmission at its sender's rate must end within the representable time, or its
/// ideal completion time (and slowdown) would be wrong.
fn sizes_fit_in_time(flows: &[FlowSpec], host_rates: &[crate::time::Rate], tcp: &TcpConfig, key: &str, w: &WorkloadConfig) -> Result<(), String> {
    for f in flows {
        let (Some(size), Some(&rate)) = (f.size, host_rates.get(f.src)) else { continue };
        let t = rate.tx_time(tcp.wire_bytes_at(size.min(Bytes::INPUT_MAX.0), tcp.mss()));
        if size > Bytes::INPUT_MAX.0 || t.checked_add(f.start).is_none_or(|end| end > Time::INPUT_MAX) {
            let field = match w.kind.as_str() {
                "trace" => "file",
                "flows" => "flows",
                "poisson" if w.cdf.is_some() => "cdf",
                _ => "size",
            };
            let largest = rate.bytes_in(Time::INPUT_MAX.saturating_sub(f.start)).min(Bytes::INPUT_MAX.0) * 95 / 100;
            return Err(format!(
                "{key}.{field}: a flow of {size} bytes from host {} starting at {} does not finish sending at {rate} within {}; the largest size that works there is about {largest} bytes",
                f.src,
                f.start,
                Time::INPUT_MAX
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::link::Link;
    use crate::net::port::Port;
    use crate::time::Rate;

    #[test]
    fn shift_by_rate_takes_one_per_doubling_above_the_host_rate() {
        // The HPCC simulator's third.cc: shift 3 at the NIC's 100G, 1 at 400G, never below 0.
        let ports: Vec<Port> = [25, 100, 200, 400, 6400]
            .iter()
            .map(|&g| Port::new(0, 0, 1, Rate::gbps(g), Link { delay: Time::from_us(1), ..Link::default() }, 1))
            .collect();
        let table = PfcTable { enabled: true, shift_by_rate: true, ..PfcTable::default() };
        let cfg = table.settings(1538, Rate::gbps(100)).unwrap().unwrap()(&ports);
        assert_eq!(cfg.shift, vec![3, 3, 2, 1, 0]);
        let fixed = PfcTable { enabled: true, ..PfcTable::default() }.settings(1538, Rate::gbps(100)).unwrap().unwrap()(&ports);
        assert_eq!(fixed.shift, vec![3; 5], "off by default");
    }

    #[test]
    fn a_key_is_found_on_its_own_line_or_the_nearest_one_above_it() {
        let text = "[[workloads]]\nkind = \"flows\"\nsize = \"1KB\"\n\n[[workloads]]\nkind = \"bulk\"\nsize = 5\n\
                    [classes.q]\ncc = \"dctcp\"\nparams = { gg = 1 }\n";
        assert_eq!(line_of_key(text, "workloads[1].size"), Some(7), "the second entry's, not the first's");
        assert_eq!(line_of_key(text, "workloads[0].size"), Some(3));
        assert_eq!(line_of_key(text, "workloads[1]"), Some(5), "the entry's header");
        assert_eq!(line_of_key(text, "workloads[1].cc"), Some(5), "a key the entry lacks: its header");
        assert_eq!(line_of_key(text, "classes.q.params.gg"), Some(10), "inside an inline table: its line");
        assert_eq!(line_of_key(text, "classes.q.cc"), Some(9));
    }

    #[test]
    fn a_quoted_key_in_a_set_path_is_one_key_without_its_quotes() {
        let keys = split_key_path(r#"switch.rates."2.5Gbps".ecn.k"#).unwrap();
        assert_eq!(keys, ["switch", "rates", "2.5Gbps", "ecn", "k"]);
        assert_eq!(split_key_path("classes.query.cc").unwrap(), ["classes", "query", "cc"]);
        assert_eq!(split_key_path(r#"switch.rates."100Gbps.ecn"#), None, "an open quote");
        let mut doc: toml_edit::DocumentMut = "[switch.rates.\"100Gbps\".ecn]\nmode = \"red\"\n".parse().unwrap();
        apply_override(&mut doc, r#"switch.rates."100Gbps".ecn.mark_at=dequeue"#).unwrap();
        let t: toml::Table = doc.to_string().parse().unwrap();
        assert_eq!(t["switch"]["rates"]["100Gbps"]["ecn"]["mark_at"].as_str(), Some("dequeue"));
        assert_eq!(t["switch"]["rates"]["100Gbps"]["ecn"]["mode"].as_str(), Some("red"), "the table is the same one");
    }
}
