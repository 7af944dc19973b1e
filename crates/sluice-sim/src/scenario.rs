//! The scenario file: its schema, `--set` overrides, and validation that names the file, line and
//! key of every problem.

use crate::cc::{self, CcFactory};
use crate::net::qdisc::{Discipline, EcnConfig, PortConfig};
use crate::net::topology::{Graph, TopologyConfig};
use crate::time::{Bytes, Rate, Time};
use crate::world::{Bucketing, ClassRuntime, IntRuntime, Parts, World};
use crate::transport::tcp::TcpConfig;
use crate::workload::{WorkloadConfig, WorkloadContext};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

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
    /// Seed of every random stream.
    pub seed: u64,
    /// End the run as soon as every finite flow has finished.
    pub stop_when_done: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { duration: None, seed: 1, stop_when_done: true }
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
    /// a named port's entry wins over its rate's, which wins over `[switch.ecn]`.
    fn disciplines(&self, graph: &Graph, names: &[String]) -> Result<Vec<Discipline>, String> {
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
            for &(li, _) in plist {
                let p = out.len();
                if !matches!(graph.nodes[n], crate::net::topology::NodeKind::Switch { .. }) {
                    out.push(Discipline::default());
                    continue;
                }
                let rate = graph.links[li].rate;
                let mut d = default;
                let mut apply = |cfg: &PortConfig, prefix: String| -> Result<(), String> {
                    if let Some(ecn) = &cfg.ecn {
                        d = ecn.discipline(&format!("{prefix}.ecn"), d.limit)?;
                    }
                    if let Some(b) = cfg.buffer {
                        d.limit = Some(b.0);
                    }
                    Ok(())
                };
                if let Some((_, key, cfg)) = by_rate.iter().find(|(r, _, _)| *r == rate) {
                    apply(cfg, format!("switch.rates.\"{key}\""))?;
                }
                if let Some((key, cfg)) = by_port[p] {
                    apply(cfg, format!("switch.ports.\"{key}\""))?;
                }
                out.push(d);
            }
        }
        Ok(out)
    }
}

/// A `[classes.<name>]` table: what the administrator chose for this traffic.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// Congestion-control algorithm name (see `sluice list`).
    pub cc: String,
    /// The algorithm's parameters.
    #[serde(default)]
    pub params: toml::Table,
    /// Switch priority queue (0 = highest), also the NIC scheduler's priority.
    #[serde(default)]
    pub priority: u8,
    /// The algorithm a flow falls back to when the peer or path lacks what `cc` needs
    /// (default "cubic").
    pub fallback: Option<String>,
    /// Administrator match rules: flows of no explicit class join the first class that matches.
    #[serde(rename = "match")]
    pub matches: Option<MatchRules>,
}

pub use crate::workload::MatchRules;

/// The algorithm flows of no other class use when the scenario does not define `default`.
pub const DEFAULT_CC: &str = "cubic";

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
    text: String,
}

impl LoadedScenario {
    /// An error about `key` located at its line in the file when it can be found there.
    pub fn error_at(&self, message: String) -> ScenarioError {
        let key = message.split(':').next().unwrap_or_default();
        ScenarioError { file: self.file.clone(), line: line_of_key(&self.text, key), message }
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
    let err = |line, message| ScenarioError { file: file.to_string(), line, message };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let line = e.span().map(|s| line_at(text, s.start));
        err(line, format!("not valid TOML: {}", e.message().trim()))
    })?;
    for o in overrides {
        apply_override(&mut doc, o).map_err(|m| err(None, m))?;
    }
    let text = doc.to_string();
    let de = toml::Deserializer::new(&text);
    let scenario: Scenario = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.inner();
        let line = inner.span().map(|s| line_at(&text, s.start));
        let msg = inner.message().trim().to_string();
        if path == "." || path.is_empty() {
            err(line, msg)
        } else {
            err(line, format!("{path}: {msg}"))
        }
    })?;
    Ok(LoadedScenario { scenario, file: file.to_string(), base_dir: base_dir.to_path_buf(), text })
}

/// Sets one `a.b.c=value` override; the value is TOML if it parses as TOML, a string otherwise.
fn apply_override(doc: &mut toml_edit::DocumentMut, o: &str) -> Result<(), String> {
    let (path, raw) = o
        .split_once('=')
        .ok_or_else(|| format!("--set {o}: expected key.path=value, like classes.query.cc=dctcp"))?;
    let keys: Vec<&str> = path.trim().split('.').collect();
    if keys.iter().any(|k| k.is_empty()) {
        return Err(format!("--set {o}: empty key in \"{path}\""));
    }
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
            return Ok(());
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
                .ok_or_else(|| format!("--set {o}: \"{here}\" has {len} entries; index {idx} is out of range"))?;
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
    Ok(())
}

/// 1-based line of a byte offset.
fn line_at(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

/// Best-effort line of a dotted key path such as "switch.ecn.k" or "workloads[1].src".
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let key = key.trim();
    let parts: Vec<&str> = key.split('.').collect();
    let leaf = parts.last()?.split('[').next()?;
    if leaf.is_empty() {
        return None;
    }
    let table = parts[..parts.len() - 1].join(".");
    let table = table.split('[').next().unwrap_or_default();
    let mut in_table = table.is_empty();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            let name = t.trim_matches(|c| c == '[' || c == ']').trim();
            in_table = table.is_empty() || name == table || name.starts_with(&format!("{table}."));
            if !table.is_empty() && name == format!("{table}.{leaf}") {
                return Some(i + 1);
            }
            continue;
        }
        if in_table && (t.starts_with(&format!("{leaf} ")) || t.starts_with(&format!("{leaf}="))) {
            return Some(i + 1);
        }
    }
    None
}

/// Builds the world a loaded scenario describes, validating everything that needs the topology.
pub fn build(loaded: &LoadedScenario) -> Result<World, String> {
    let graph = loaded.scenario.topology.build(&loaded.base_dir)?;
    let parts = prepare(loaded, &graph)?;
    Ok(World::new(&graph, parts))
}

/// Validates everything that needs the topology and materializes the flows.
pub fn prepare(loaded: &LoadedScenario, graph: &Graph) -> Result<Parts, String> {
    let sc = &loaded.scenario;
    sc.transport.validate()?;
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

    let mut classes = Vec::new();
    let mut class_cfgs: Vec<(String, ClassConfig)> = sc.classes.clone().into_iter().collect();
    if !sc.classes.contains_key("default") {
        class_cfgs.insert(0, ("default".into(), ClassConfig { cc: DEFAULT_CC.into(), params: toml::Table::new(), priority: 0, fallback: None, matches: None }));
    }
    for (name, c) in &class_cfgs {
        let info = cc::lookup(&c.cc).ok_or_else(|| {
            format!("classes.{name}.cc: unknown congestion control \"{}\"; expected one of: {}", c.cc, cc::known_names())
        })?;
        let factory: CcFactory = cc::factory(info.name, &c.params).map_err(|e| format!("classes.{name}.params.{e}"))?;
        if c.priority >= sc.switch.priorities {
            return Err(format!(
                "classes.{name}.priority: {} is not below switch.priorities = {}",
                c.priority, sc.switch.priorities
            ));
        }
        let fallback_name = c.fallback.as_deref().unwrap_or(DEFAULT_CC);
        let fb = cc::lookup(fallback_name).ok_or_else(|| {
            format!("classes.{name}.fallback: unknown congestion control \"{fallback_name}\"; expected one of: {}", cc::known_names())
        })?;
        let fallback = cc::factory(fb.name, &toml::Table::new()).map_err(|e| format!("classes.{name}.fallback: {e}"))?;
        classes.push(ClassRuntime {
            name: name.clone(),
            cc: info.name.to_string(),
            factory,
            priority: c.priority,
            fallback: (fb.name.to_string(), fallback),
        });
    }
    let names: Vec<String> = classes.iter().map(|c| c.name.clone()).collect();
    let class_index = |n: &str| names.iter().position(|c| c == n);
    let node_ports = graph.ports();
    let host_rates: Vec<crate::time::Rate> =
        graph.hosts().iter().map(|&n| graph.links[node_ports[n][0].0].rate).collect();
    let mut rules = crate::workload::ClassRules { default: class_index("default").unwrap_or(0), ..Default::default() };
    for (intent, class) in &sc.policy {
        if !["latency_sensitive", "bulk", "target_rate", "deadline"].contains(&intent.as_str()) {
            return Err(format!("policy.{intent}: unknown intent; expected latency_sensitive, bulk, target_rate or deadline"));
        }
        let c = class_index(class)
            .ok_or_else(|| format!("policy.{intent}: unknown class \"{class}\"; defined classes: {}", names.join(", ")))?;
        rules.intents.push((intent.clone(), c));
    }
    for (name, c) in &class_cfgs {
        if let Some(m) = &c.matches {
            if m.tags.is_none() && m.dst_ports.is_none() && m.hosts.is_none() {
                return Err(format!("classes.{name}.match: give at least one of tags, dst_ports, hosts"));
            }
            rules.rules.push((class_index(name).unwrap_or(0), m.clone()));
        }
    }
    let ctx = WorkloadContext {
        rules: std::sync::Arc::new(rules),
        host_rates: &host_rates,
        base_dir: &loaded.base_dir,
        class_index: &class_index,
        class_names: &names,
        seed: sc.sim.seed,
    };
    let mut flows = Vec::new();
    let mut apps = Vec::new();
    for (i, w) in sc.workloads.iter().enumerate() {
        let generated = w.generate(&format!("workloads[{i}]"), i, &ctx)?;
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
    let disciplines = sc.switch.disciplines(graph, &names)?;
    let switch_names: Vec<String> = names.iter().filter(|n| n.starts_with("sw")).cloned().collect();
    let int = sc.int.runtime(&switch_names, graph.hosts().len())?;
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
            Some(crate::net::capture::CaptureSpec {
                ports,
                flows: pc.flows.clone(),
                max_packets: pc.max_packets.unwrap_or(1_000_000),
                full_frames: pc.full_frames,
            })
        }
    };
    let (mut queue_ports, mut queue_interval) = (Vec::new(), Time::ZERO);
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
    }
    let (mut cwnd_flows, mut cwnd_interval) = (None, Time::ZERO);
    if let Some(cs) = &sc.output.cwnd {
        if cs.interval == Time::ZERO {
            return Err("output.cwnd.interval: expected a positive duration like \"10us\"".into());
        }
        if let Some(&bad) = cs.flows.iter().find(|&&f| f as usize >= flows.len()) {
            return Err(format!("output.cwnd.flows: flow {bad} does not exist; the scenario has {} flows", flows.len()));
        }
        cwnd_interval = cs.interval;
        cwnd_flows = Some(cs.flows.clone());
    }
    Ok(Parts {
        seed: sc.sim.seed,
        duration: sc.sim.duration,
        stop_when_done: sc.sim.stop_when_done,
        buffer: (sc.switch.buffer.0, sc.switch.alpha),
        priorities: sc.switch.priorities,
        disciplines,
        tcp: sc.transport.clone(),
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
    })
}
