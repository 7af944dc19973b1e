//! Workloads: the scenario's `[[workloads]]` entries turned into the flows a run starts.

pub mod app;
pub mod cdf;
pub mod generators;
pub mod incast;
pub mod proxy;
pub mod rpc;
pub mod runtime;
pub mod trace;

use crate::time::{Bytes, Rate, Time};
use app::App;
use cdf::Cdf;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// `[classes.<name>.match]`: a flow matches when every rule given holds. The same table selects
/// connections on real hosts (`docs/platform.md`), where `dst_ports` and `cgroups` apply and
/// `tags` and `hosts` have no meaning.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MatchRules {
    /// Workload tags (`tag = "..."` on a workload).
    pub tags: Option<Vec<String>>,
    /// Destination (service) ports, single or ranges (`dst_port` on a workload; on a host, the
    /// remote port of an active open and the local port of a passive one).
    pub dst_ports: Option<Vec<PortRange>>,
    /// Hosts, either end of the flow.
    pub hosts: Option<Vec<usize>>,
    /// On real hosts: cgroup v2 directories whose processes' connections belong to the class.
    pub cgroups: Option<Vec<String>>,
}

/// A port or an inclusive range of ports: `5201` or `"5200-5299"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRange {
    /// First port.
    pub first: u16,
    /// Last port, inclusive.
    pub last: u16,
}

impl PortRange {
    /// Whether `port` is in the range.
    pub fn contains(&self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }
    /// Whether the two ranges share a port.
    pub fn overlaps(&self, other: &PortRange) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl Serialize for PortRange {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.first == self.last {
            s.serialize_u16(self.first)
        } else {
            s.serialize_str(&self.to_string())
        }
    }
}

impl<'de> Deserialize<'de> for PortRange {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        const WORDS: &str = "a port from 0 to 65535 or a range like \"5200-5299\"";
        let port = |s: &str| s.trim().parse::<u16>().ok();
        match toml::Value::deserialize(d)? {
            toml::Value::Integer(i) => u16::try_from(i)
                .map(|p| PortRange { first: p, last: p })
                .map_err(|_| D::Error::custom(format!("expected {WORDS}; got {i}"))),
            toml::Value::String(s) => {
                let range = match s.split_once('-') {
                    Some((a, b)) => port(a).zip(port(b)),
                    None => port(&s).map(|p| (p, p)),
                };
                match range {
                    Some((first, last)) if first <= last => Ok(PortRange { first, last }),
                    _ => Err(D::Error::custom(format!("expected {WORDS}, its first port not above its last; got \"{s}\""))),
                }
            }
            other => Err(D::Error::custom(format!("expected {WORDS}; got {}", crate::words::value_in_words(&other)))),
        }
    }
}

/// Where flow sizes come from: one fixed size or an empirical distribution.
#[derive(Clone, Debug)]
pub enum SizeSource {
    /// Every flow has this many bytes.
    Fixed(u64),
    /// Sizes drawn from a CDF.
    Cdf(Arc<Cdf>),
}

impl SizeSource {
    /// Draws one size.
    pub fn draw<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match self {
            SizeSource::Fixed(b) => *b,
            SizeSource::Cdf(c) => c.sample(rng),
        }
    }
    /// The size at cumulative probability `u` (inverse-CDF sampling with a chosen `u`).
    pub fn draw_at(&self, u: f64) -> u64 {
        match self {
            SizeSource::Fixed(b) => *b,
            SizeSource::Cdf(c) => c.sample_with(u),
        }
    }
    /// The mean size in bytes.
    pub fn mean(&self) -> f64 {
        match self {
            SizeSource::Fixed(b) => *b as f64,
            SizeSource::Cdf(c) => c.mean(),
        }
    }
}

/// One flow to start: endpoints as host ordinals, size (None = endless), start time, class index.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowSpec {
    /// Sending host ordinal.
    pub src: usize,
    /// Receiving host ordinal.
    pub dst: usize,
    /// Bytes to transfer; `None` keeps sending until the run ends.
    pub size: Option<u64>,
    /// When the application opens the flow.
    pub start: Time,
    /// Index into the scenario's class table.
    pub class: usize,
    /// The application's QoS: a rate the NIC holds the flow to, and a completion deadline.
    pub qos: Qos,
    /// A request/response transaction: the server answers with this many bytes on its FIN.
    pub response: Option<u32>,
    /// A request to an L7 proxy (the flow's receiver), relayed to a backend.
    pub relay: Option<proxy::Relay>,
}

/// What an application asks of the network for a flow, besides its class.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Qos {
    /// The NIC's token bucket holds the flow to this rate.
    pub target_rate: Option<Rate>,
    /// The flow should complete within this time of its start.
    pub deadline: Option<Time>,
}

/// Picks a flow's class from its endpoints (rules may name host sets).
pub type Classify = Arc<dyn Fn(usize, usize) -> usize + Send + Sync>;

/// The administrator's class selection: QoS intents mapped by the policy table, then match
/// rules in class-name order, then `default`.
#[derive(Clone, Debug, Default)]
pub struct ClassRules {
    /// Index of the `default` class.
    pub default: usize,
    /// Intent name ("latency_sensitive", "bulk", "target_rate", "deadline") to class index.
    pub intents: Vec<(String, usize)>,
    /// Classes with match rules, in class-name order.
    pub rules: Vec<(usize, MatchRules)>,
}

impl ClassRules {
    /// The class of a flow from `src` to `dst` of a workload with `tag`, `dst_port` and `intent`.
    pub fn classify(&self, tag: Option<&str>, dst_port: Option<u16>, intent: Option<&str>, src: usize, dst: usize) -> usize {
        if let Some(c) = intent.and_then(|i| self.intents.iter().find(|(n, _)| n == i)) {
            return c.1;
        }
        for (class, r) in &self.rules {
            let tag_ok = r.tags.as_ref().is_none_or(|t| tag.is_some_and(|tag| t.iter().any(|x| x == tag)));
            let port_ok = r.dst_ports.as_ref().is_none_or(|p| dst_port.is_some_and(|d| p.iter().any(|r| r.contains(d))));
            let host_ok = r.hosts.as_ref().is_none_or(|h| h.contains(&src) || h.contains(&dst));
            if tag_ok && port_ok && host_ok {
                return *class;
            }
        }
        self.default
    }
}

/// One entry of an explicit flow list.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FlowEntry {
    /// Sending host ordinal.
    pub src: usize,
    /// Receiving host ordinal.
    pub dst: usize,
    /// Bytes to transfer.
    pub size: Bytes,
    /// Start time (default 0).
    #[serde(default)]
    pub start: Time,
    /// Class name (default: the workload's class).
    pub class: Option<String>,
}

/// A `[[workloads]]` entry. One flat table serves every kind so that errors can name the key;
/// each kind states which keys it uses and rejects the others.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    /// "flows", "trace", "bulk", "poisson", "incast", "permutation", "all_to_all", "rpc" or "proxy".
    pub kind: String,
    /// Traffic class of the flows (default "default").
    pub class: Option<String>,
    /// kind = "flows": the list.
    pub flows: Option<Vec<FlowEntry>>,
    /// kind = "trace": path to the file, relative to the scenario.
    pub file: Option<String>,
    /// kind = "trace": "csv" (`src,dst,size_bytes,start`) or "hpcc" (the HPCC simulator's flow file).
    pub format: Option<String>,
    /// kind = "bulk" / "incast": sending host ordinals.
    pub senders: Option<Vec<usize>>,
    /// kind = "bulk" / "incast": the receiving host ordinal.
    pub receiver: Option<usize>,
    /// Bytes per flow (bulk: absent means endless).
    pub size: Option<Bytes>,
    /// When the workload starts (default 0).
    pub start: Option<Time>,
    /// kind = "poisson": flow sizes, a bundled name (websearch, fb_hadoop, ali_storage,
    /// google_rpc) or a CDF file relative to the scenario.
    pub cdf: Option<String>,
    /// kind = "poisson" / "incast" (Poisson events): offered load, a fraction of link rate.
    pub load: Option<f64>,
    /// Participating hosts (sources of "poisson"; members of "permutation", "all_to_all" and
    /// Poisson "incast"); default all.
    pub hosts: Option<Vec<usize>>,
    /// kind = "poisson": destinations to choose from uniformly; default all hosts.
    pub destinations: Option<Vec<usize>>,
    /// How long arrivals (or new requests) continue after `start`.
    pub duration: Option<Time>,
    /// kind = "incast": synchronized rounds, the next when all responses of one arrived.
    pub rounds: Option<u32>,
    /// kind = "incast" with `load`: senders per event.
    pub fan_in: Option<usize>,
    /// kind = "incast": flows each sender opens per round or event (default 1).
    pub flows_per_sender: Option<u32>,
    /// kind = "rpc": client hosts.
    pub clients: Option<Vec<usize>>,
    /// kind = "rpc": server hosts.
    pub servers: Option<Vec<usize>>,
    /// kind = "rpc": requests each client keeps outstanding (default 1).
    pub outstanding: Option<usize>,
    /// kind = "rpc": request size.
    pub request_size: Option<Bytes>,
    /// kind = "rpc": request sizes from a CDF (instead of `request_size`).
    pub request_cdf: Option<String>,
    /// kind = "rpc": response size.
    pub response_size: Option<Bytes>,
    /// kind = "rpc": response sizes from a CDF (instead of `response_size`).
    pub response_cdf: Option<String>,
    /// kind = "rpc": pause between a response and the next request (default 0).
    pub think_time: Option<Time>,
    /// kind = "rpc": "per_request" (a new connection for every request and response, the
    /// default), "persistent" (messages on one long-lived connection per client and server) or
    /// "transaction" (one connection per request, answered on the server's FIN; needs
    /// `[transport] handshake = true` and a response of at most one segment).
    pub connections: Option<String>,
    /// kind = "proxy": the proxy's host ordinal.
    pub proxy: Option<usize>,
    /// kind = "proxy": backend hosts, used round robin.
    pub backends: Option<Vec<usize>>,
    /// kind = "proxy": header bytes the proxy reads before it connects to the backend.
    pub header_size: Option<Bytes>,
    /// kind = "proxy": body bytes after the header (default 0).
    pub body_size: Option<Bytes>,
    /// A tag class match rules can select on.
    pub tag: Option<String>,
    /// The flows' destination (service) port, for match rules.
    pub dst_port: Option<u16>,
    /// QoS intent: "latency_sensitive" or "bulk"; the scenario's `[policy]` maps it to a class.
    pub intent: Option<String>,
    /// QoS intent: hold each flow to this rate (the NIC's token bucket); mapped by `policy.target_rate`.
    pub target_rate: Option<Rate>,
    /// QoS intent: each flow should finish within this time; mapped by `policy.deadline`.
    pub deadline: Option<Time>,
}

/// What a workload needs to know about the scenario to produce flows.
pub struct WorkloadContext<'a> {
    /// The most flows the workload may create (the scenario's `limits.flows`).
    pub max_flows: u64,
    /// The most requests an `rpc` workload may keep outstanding (`limits.outstanding`).
    pub max_outstanding: u64,
    /// Link rate of each host, by ordinal.
    pub host_rates: &'a [Rate],
    /// Directory relative file paths resolve against.
    pub base_dir: &'a Path,
    /// Resolves a class name to its index, or explains the error.
    pub class_index: &'a dyn Fn(&str) -> Option<usize>,
    /// Class names, for error messages.
    pub class_names: &'a [String],
    /// The run's seed; each workload draws from its own stream of it.
    pub seed: u64,
    /// The largest segment payload (what a transaction's response must fit in).
    pub mss: u64,
    /// Connections open with a handshake and close with FINs.
    pub handshake: bool,
    /// Class selection for flows of workloads that name no class.
    pub rules: Arc<ClassRules>,
}

/// A workload's traffic: flows known up front and, for closed-loop kinds, an application.
#[derive(Default)]
pub struct Generated {
    /// Flows to start at their start times.
    pub flows: Vec<FlowSpec>,
    /// A closed-loop source that opens flows during the run.
    pub app: Option<Box<dyn App>>,
}

impl WorkloadConfig {
    /// Names of the keys present besides `kind` and `class`.
    fn present_keys(&self) -> Vec<&'static str> {
        let p = [
            ("flows", self.flows.is_some()),
            ("file", self.file.is_some()),
            ("format", self.format.is_some()),
            ("senders", self.senders.is_some()),
            ("receiver", self.receiver.is_some()),
            ("size", self.size.is_some()),
            ("start", self.start.is_some()),
            ("cdf", self.cdf.is_some()),
            ("load", self.load.is_some()),
            ("hosts", self.hosts.is_some()),
            ("destinations", self.destinations.is_some()),
            ("duration", self.duration.is_some()),
            ("rounds", self.rounds.is_some()),
            ("fan_in", self.fan_in.is_some()),
            ("flows_per_sender", self.flows_per_sender.is_some()),
            ("clients", self.clients.is_some()),
            ("servers", self.servers.is_some()),
            ("outstanding", self.outstanding.is_some()),
            ("request_size", self.request_size.is_some()),
            ("request_cdf", self.request_cdf.is_some()),
            ("response_size", self.response_size.is_some()),
            ("response_cdf", self.response_cdf.is_some()),
            ("think_time", self.think_time.is_some()),
            ("connections", self.connections.is_some()),
            ("proxy", self.proxy.is_some()),
            ("backends", self.backends.is_some()),
            ("header_size", self.header_size.is_some()),
            ("body_size", self.body_size.is_some()),
        ];
        // Class selection (tag, dst_port, intent) and QoS keys apply to every kind.
        p.iter().filter(|(_, present)| *present).map(|(k, _)| *k).collect()
    }

    /// Produces this workload's traffic; `key` is its path in the scenario (e.g. "workloads[0]")
    /// and `index` its position, which selects its random stream.
    pub fn generate(&self, key: &str, index: usize, ctx: &WorkloadContext) -> Result<Generated, String> {
        let hosts = ctx.host_rates.len();
        let kind = self.kind.as_str();
        let class_of = |name: Option<&str>, at: &str| -> Result<usize, String> {
            let name = name.unwrap_or("default");
            (ctx.class_index)(name).ok_or_else(|| {
                format!("{at}.class: unknown class \"{name}\"; defined classes: {}", ctx.class_names.join(", "))
            })
        };
        // An explicit class wins; otherwise the intent (through the policy table), the match
        // rules and `default` decide per flow.
        let intent: Option<&str> = match (&self.intent, self.target_rate, self.deadline) {
            (Some(i), _, _) => {
                if !["latency_sensitive", "bulk"].contains(&i.as_str()) {
                    return Err(format!("{key}.intent: expected \"latency_sensitive\" or \"bulk\", got \"{i}\""));
                }
                Some(i)
            }
            (None, Some(_), _) => Some("target_rate"),
            (None, None, Some(_)) => Some("deadline"),
            _ => None,
        };
        if let Some(i) = intent {
            if self.class.is_none() && !ctx.rules.intents.iter().any(|(n, _)| n == i) {
                return Err(format!("{key}.intent: no class for intent \"{i}\"; add policy.{i} = \"<class>\""));
            }
        }
        if self.target_rate.is_some_and(|r| r.0 == 0) {
            return Err(format!("{key}.target_rate: expected a positive rate like \"2Gbps\""));
        }
        let qos = Qos { target_rate: self.target_rate, deadline: self.deadline };
        let pick: Classify = match self.class.as_deref() {
            Some(name) => {
                let c = class_of(Some(name), key)?;
                Arc::new(move |_, _| c)
            }
            None => {
                let (rules, tag, port, intent) = (ctx.rules.clone(), self.tag.clone(), self.dst_port, intent.map(String::from));
                Arc::new(move |s, d| rules.classify(tag.as_deref(), port, intent.as_deref(), s, d))
            }
        };
        let host = |h: usize, at: String| -> Result<usize, String> {
            if h < hosts {
                Ok(h)
            } else {
                Err(format!("{at}: host {h} does not exist; the topology has hosts 0 to {}", hosts - 1))
            }
        };
        let host_list = |list: &Option<Vec<usize>>, k: &str, min: usize| -> Result<Vec<usize>, String> {
            let list = match list {
                Some(l) => l.clone(),
                None => (0..hosts).collect(),
            };
            for (i, &h) in list.iter().enumerate() {
                host(h, format!("{key}.{k}[{i}]"))?;
                if let Some(j) = list[..i].iter().position(|&x| x == h) {
                    return Err(format!("{key}.{k}[{i}]: host {h} is listed twice (also at [{j}]); list each host once"));
                }
            }
            if list.len() < min {
                return Err(format!("{key}.{k}: expected at least {min} hosts, got {}", list.len()));
            }
            Ok(list)
        };
        let only = |allowed: &[&str]| -> Result<(), String> {
            match self.present_keys().into_iter().find(|k| !allowed.contains(k)) {
                Some(k) => Err(format!("{key}.{k}: not used by kind = \"{kind}\"; it takes {}", allowed.join(", "))),
                None => Ok(()),
            }
        };
        let required = |present: bool, k: &str| -> Result<(), String> {
            if present {
                Ok(())
            } else {
                Err(format!("{key}.{k}: required for kind = \"{kind}\""))
            }
        };
        let positive_size = |b: Option<Bytes>, k: &str| -> Result<u64, String> {
            match b {
                Some(Bytes(0)) => Err(format!("{key}.{k}: expected a positive size like \"64KB\"")),
                Some(Bytes(n)) => Ok(n),
                None => Err(format!("{key}.{k}: required for kind = \"{kind}\"")),
            }
        };
        let load_of = |l: Option<f64>| -> Result<f64, String> {
            match l {
                Some(l) if l > 0.0 && l <= 1.0 => Ok(l),
                Some(l) => Err(format!("{key}.load: expected a fraction of link rate in (0, 1], got {l}")),
                None => Err(format!("{key}.load: required for kind = \"{kind}\"")),
            }
        };
        let duration_of = |d: Option<Time>| -> Result<Time, String> {
            match d {
                Some(Time::ZERO) => Err(format!("{key}.duration: expected a positive duration like \"10ms\"")),
                Some(d) => Ok(d),
                None => Err(format!("{key}.duration: required for kind = \"{kind}\"")),
            }
        };
        let sizes = |fixed: Option<Bytes>, cdf: &Option<String>, k: &str| -> Result<SizeSource, String> {
            match (fixed, cdf) {
                (Some(_), Some(_)) => Err(format!("{key}.{k}_size: give either {k}_size or {k}_cdf, not both")),
                (Some(b), None) => positive_size(Some(b), &format!("{k}_size")).map(SizeSource::Fixed),
                (None, Some(c)) => Ok(SizeSource::Cdf(Arc::new(
                    cdf::resolve(c, ctx.base_dir).map_err(|e| format!("{key}.{k}_cdf: {e}"))?,
                ))),
                (None, None) => Err(format!("{key}.{k}_size: required for kind = \"{kind}\" (or {k}_cdf)")),
            }
        };
        // Counts are estimated before anything is allocated, so a typo cannot exhaust memory.
        let at_most = |expected: f64, what: &str, k: &str| -> Result<(), String> {
            let limit = ctx.max_flows as f64;
            if expected.is_nan() || expected > limit {
                return Err(format!(
                    "{key}.{k}: {what} would make about {expected:.0} flows, above limits.flows = {}; make fewer or raise the limit",
                    ctx.max_flows
                ));
            }
            Ok(())
        };
        let some_flow = |expected: f64, k: &str| -> Result<(), String> {
            if expected < 1.0 {
                return Err(format!(
                    "{key}.{k}: the workload is expected to make {expected:.2} flows; it would likely make none (raise load or duration)"
                ));
            }
            Ok(())
        };
        // Requests each client keeps in flight, within the scenario's limit on them all.
        let outstanding_of = |clients: usize| -> Result<usize, String> {
            let outstanding = self.outstanding.unwrap_or(1);
            if outstanding == 0 {
                return Err(format!("{key}.outstanding: expected at least 1 request per client"));
            }
            let slots = (clients as u64).saturating_mul(outstanding as u64);
            let limit = ctx.max_outstanding.min(u32::MAX as u64);
            if slots > limit {
                return Err(format!(
                    "{key}.outstanding: {clients} clients keeping {outstanding} requests each would hold {slots} requests, above limits.outstanding = {limit}; keep fewer or raise the limit"
                ));
            }
            Ok(outstanding)
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(ctx.seed ^ (0x1000 + index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let start = self.start.unwrap_or_default();
        let flows = |mut flows: Vec<FlowSpec>| {
            if flows.is_empty() {
                return Err(format!("{key}: the workload makes no flow; check its hosts, load and duration"));
            }
            for f in &mut flows {
                f.class = pick(f.src, f.dst);
                f.qos = qos;
            }
            Ok(Generated { flows, app: None })
        };
        match kind {
            "flows" => {
                only(&["flows"])?;
                required(self.flows.is_some(), "flows")?;
                if self.flows.as_ref().is_some_and(Vec::is_empty) {
                    return Err(format!("{key}.flows: the list is empty; give at least one {{ src, dst, size }}"));
                }
                let mut out = Vec::new();
                for (i, f) in self.flows.iter().flatten().enumerate() {
                    let at = format!("{key}.flows[{i}]");
                    let (src, dst) = (host(f.src, format!("{at}.src"))?, host(f.dst, format!("{at}.dst"))?);
                    if src == dst {
                        return Err(format!("{at}: src and dst are both host {src}; a flow needs two hosts"));
                    }
                    if f.size.0 == 0 {
                        return Err(format!("{at}.size: expected a positive size like \"1MB\""));
                    }
                    let class = match &f.class {
                        Some(c) => class_of(Some(c), &at)?,
                        None => pick(src, dst),
                    };
                    out.push(FlowSpec { src, dst, size: Some(f.size.0), start: f.start, class, qos, response: None, relay: None });
                }
                Ok(Generated { flows: out, app: None })
            }
            "trace" => {
                only(&["file", "format"])?;
                required(self.file.is_some(), "file")?;
                let file = self.file.as_deref().unwrap_or_default();
                let path = ctx.base_dir.join(file);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("{key}.file: cannot read \"{}\": {e}", path.display()))?;
                let name = path.display().to_string();
                let parsed = match self.format.as_deref().unwrap_or("csv") {
                    "csv" => trace::parse_csv_trace(&text, &name)?,
                    "hpcc" => trace::parse_hpcc_flows(&text, &name)?,
                    f => return Err(format!("{key}.format: expected \"csv\" or \"hpcc\", got \"{f}\"")),
                };
                trace::validate(&parsed, hosts, &name)?;
                flows(parsed
                    .iter()
                    .map(|f| FlowSpec { src: f.src, dst: f.dst, size: Some(f.size_bytes), start: f.start, ..FlowSpec::default() })
                    .collect())
            }
            "bulk" => {
                only(&["senders", "receiver", "size", "start"])?;
                required(self.senders.is_some(), "senders")?;
                required(self.receiver.is_some(), "receiver")?;
                let dst = host(self.receiver.unwrap_or_default(), format!("{key}.receiver"))?;
                let senders = host_list(&self.senders, "senders", 1)?;
                if self.size.is_some_and(|s| s.0 == 0) {
                    return Err(format!("{key}.size: expected a positive size, or no size for endless flows"));
                }
                let mut out = Vec::new();
                for (i, &src) in senders.iter().enumerate() {
                    if src == dst {
                        return Err(format!("{key}.senders[{i}]: host {src} is also the receiver"));
                    }
                    out.push(FlowSpec { src, dst, size: self.size.map(|b| b.0), start, ..FlowSpec::default() });
                }
                flows(out)
            }
            "poisson" => {
                only(&["cdf", "size", "load", "hosts", "destinations", "start", "duration"])?;
                let sizes = match (&self.cdf, self.size) {
                    (Some(_), Some(_)) => return Err(format!("{key}.size: give either size or cdf, not both")),
                    (Some(c), None) => SizeSource::Cdf(Arc::new(cdf::resolve(c, ctx.base_dir).map_err(|e| format!("{key}.cdf: {e}"))?)),
                    (None, Some(_)) => SizeSource::Fixed(positive_size(self.size, "size")?),
                    (None, None) => return Err(format!("{key}.cdf: required for kind = \"poisson\" (or a fixed size)")),
                };
                let sources: Vec<(usize, Rate)> =
                    host_list(&self.hosts, "hosts", 1)?.into_iter().map(|h| (h, ctx.host_rates[h])).collect();
                let destinations = host_list(&self.destinations, "destinations", 1)?;
                if let Some((h, _)) = sources.iter().find(|(h, _)| destinations.iter().all(|d| d == h)) {
                    return Err(format!("{key}.destinations: host {h} has no destination other than itself"));
                }
                let size_key = if self.cdf.is_some() { "cdf" } else { "size" };
                let mean = sizes.mean();
                if !(mean >= 1.0 && mean.is_finite()) {
                    return Err(format!("{key}.{size_key}: the mean flow size is {mean} bytes; expected a distribution of flows of at least one byte"));
                }
                let (load, duration) = (load_of(self.load)?, duration_of(self.duration)?);
                let expected: f64 = sources.iter().map(|(_, r)| load * r.0 as f64 * duration.secs_f64() / (mean * 8.0)).sum();
                at_most(expected, &format!("load {load} for {duration} at a mean size of {mean:.0} bytes"), size_key)?;
                some_flow(expected, "duration")?;
                let gen = generators::PoissonLoad { sources: &sources, destinations: &destinations, sizes: &sizes, load, start, duration };
                flows(gen.generate(&mut rng))
            }
            "permutation" | "all_to_all" => {
                only(&["hosts", "size", "start"])?;
                let members = host_list(&self.hosts, "hosts", 2)?;
                let size = positive_size(self.size, "size")?;
                let n = members.len() as f64;
                at_most(if kind == "permutation" { n } else { n * (n - 1.0) }, "every pair of its hosts", "hosts")?;
                if kind == "permutation" {
                    flows(generators::permutation(&members, size, start, &mut rng))
                } else {
                    flows(generators::all_to_all(&members, size, start))
                }
            }
            "incast" if self.load.is_some() => {
                only(&["hosts", "fan_in", "flows_per_sender", "size", "load", "start", "duration"])?;
                let members: Vec<(usize, Rate)> =
                    host_list(&self.hosts, "hosts", 2)?.into_iter().map(|h| (h, ctx.host_rates[h])).collect();
                required(self.fan_in.is_some(), "fan_in")?;
                let fan_in = self.fan_in.unwrap_or_default();
                if fan_in == 0 || fan_in >= members.len() {
                    return Err(format!("{key}.fan_in: expected 1 to {} senders (hosts minus the receiver), got {fan_in}", members.len() - 1));
                }
                let per_sender = self.flows_per_sender.unwrap_or(1);
                if per_sender == 0 {
                    return Err(format!("{key}.flows_per_sender: expected at least 1 flow"));
                }
                let size = positive_size(self.size, "size")?;
                let (load, duration) = (load_of(self.load)?, duration_of(self.duration)?);
                let capacity: f64 = members.iter().map(|h| h.1 .0 as f64).sum();
                let expected = load * capacity * duration.secs_f64() / (size as f64 * 8.0);
                at_most(expected, &format!("load {load} for {duration} in {size}-byte responses"), "duration")?;
                some_flow(expected, "duration")?;
                flows(generators::poisson_incast(&members, fan_in, per_sender as usize, size, load, start, duration, &mut rng))
            }
            "incast" => {
                only(&["senders", "receiver", "size", "rounds", "flows_per_sender", "start"])?;
                required(self.senders.is_some(), "senders")?;
                required(self.receiver.is_some(), "receiver")?;
                let receiver = host(self.receiver.unwrap_or_default(), format!("{key}.receiver"))?;
                let senders = host_list(&self.senders, "senders", 1)?;
                if let Some(i) = senders.iter().position(|&s| s == receiver) {
                    return Err(format!("{key}.senders[{i}]: host {receiver} is also the receiver"));
                }
                let size = positive_size(self.size, "size")?;
                let rounds = self.rounds.unwrap_or(1);
                if rounds == 0 {
                    return Err(format!("{key}.rounds: expected at least 1 round"));
                }
                let per_sender = self.flows_per_sender.unwrap_or(1);
                if per_sender == 0 {
                    return Err(format!("{key}.flows_per_sender: expected at least 1 flow"));
                }
                let per_round = senders.len() as f64 * per_sender as f64;
                at_most(rounds as f64 * per_round, &format!("{rounds} rounds of {per_round} flows"), "rounds")?;
                let senders: Vec<usize> = senders.iter().flat_map(|&s| std::iter::repeat_n(s, per_sender as usize)).collect();
                let app = incast::IncastRounds::new(senders, receiver, size, rounds, start, pick, qos);
                Ok(Generated { flows: Vec::new(), app: Some(Box::new(app)) })
            }
            "rpc" => {
                only(&[
                    "clients", "servers", "outstanding", "request_size", "request_cdf", "response_size", "response_cdf",
                    "think_time", "connections", "start", "duration",
                ])?;
                required(self.clients.is_some(), "clients")?;
                required(self.servers.is_some(), "servers")?;
                let clients = host_list(&self.clients, "clients", 1)?;
                let servers = host_list(&self.servers, "servers", 1)?;
                if let Some(c) = clients.iter().find(|c| servers.iter().all(|s| s == *c)) {
                    return Err(format!("{key}.servers: client {c} has no server other than itself"));
                }
                let outstanding = outstanding_of(clients.len())?;
                let mode = match self.connections.as_deref() {
                    None | Some("per_request") => rpc::Connections::PerRequest,
                    Some("persistent") => rpc::Connections::Persistent,
                    Some("transaction") => rpc::Connections::Transaction,
                    Some(other) => {
                        return Err(format!(
                            "{key}.connections: expected \"per_request\", \"persistent\" or \"transaction\", got \"{other}\""
                        ))
                    }
                };
                let response = sizes(self.response_size, &self.response_cdf, "response")?;
                if mode == rpc::Connections::Transaction {
                    if !ctx.handshake {
                        return Err(format!(
                            "{key}.connections: \"transaction\" answers on the server's FIN, so it needs transport.handshake = true"
                        ));
                    }
                    let largest = match &response {
                        SizeSource::Fixed(b) => *b,
                        SizeSource::Cdf(c) => c.sample_with(1.0),
                    };
                    if largest > ctx.mss {
                        return Err(format!(
                            "{key}.response_size: a transaction's response rides on one segment, so at most {} bytes (the MSS); got {largest}",
                            ctx.mss
                        ));
                    }
                }
                let cfg = rpc::RpcConfig {
                    clients,
                    servers,
                    outstanding,
                    request: sizes(self.request_size, &self.request_cdf, "request")?,
                    response,
                    connections: mode,
                    think_time: self.think_time.unwrap_or_default(),
                    start,
                    stop: start + duration_of(self.duration)?,
                    class: pick,
                    qos,
                };
                Ok(Generated { flows: Vec::new(), app: Some(Box::new(rpc::RpcClients::new(cfg, rng))) })
            }
            "proxy" => {
                only(&["clients", "proxy", "backends", "outstanding", "header_size", "body_size", "start", "duration"])?;
                required(self.clients.is_some(), "clients")?;
                required(self.proxy.is_some(), "proxy")?;
                required(self.backends.is_some(), "backends")?;
                if !ctx.handshake {
                    return Err(format!(
                        "{key}.kind: a proxy splices and closes established connections, so it needs transport.handshake = true"
                    ));
                }
                let proxy = host(self.proxy.unwrap_or_default(), format!("{key}.proxy"))?;
                let clients = host_list(&self.clients, "clients", 1)?;
                let backends = host_list(&self.backends, "backends", 1)?;
                if let Some(i) = clients.iter().position(|&c| c == proxy) {
                    return Err(format!("{key}.clients[{i}]: host {proxy} is the proxy"));
                }
                if let Some(i) = backends.iter().position(|&b| b == proxy) {
                    return Err(format!("{key}.backends[{i}]: host {proxy} is the proxy"));
                }
                let outstanding = outstanding_of(clients.len())?;
                let cfg = proxy::ProxyConfig {
                    clients,
                    proxy,
                    backends,
                    outstanding,
                    header: positive_size(self.header_size, "header_size")?,
                    body: self.body_size.map_or(0, |b| b.0),
                    start,
                    stop: start + duration_of(self.duration)?,
                    class: pick,
                    qos,
                };
                Ok(Generated { flows: Vec::new(), app: Some(Box::new(proxy::ProxyClients::new(cfg))) })
            }
            k => Err(format!(
                "{key}.kind: expected \"flows\", \"trace\", \"bulk\", \"poisson\", \"incast\", \"permutation\", \"all_to_all\", \"rpc\" or \"proxy\", got \"{k}\""
            )),
        }
    }
}
