//! Workloads: the scenario's `[[workloads]]` entries turned into the flows a run starts.

pub mod app;
pub mod cdf;
pub mod chakra;
pub mod collective;
pub mod generators;
pub mod incast;
pub mod kind;
pub mod listed;
pub mod proxy;
pub mod rpc;
pub mod runtime;
pub mod trace;

use crate::flow::waits::Wait;
use crate::time::{Bytes, Rate, Time};
use app::App;
use cdf::Cdf;
use kind::Workload;
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

/// One entry of an explicit flow list: a flow, or (`receive = true`) a receive that completes
/// when the flow it matches arrives.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FlowEntry {
    /// Sending host ordinal.
    pub src: usize,
    /// Receiving host ordinal.
    pub dst: usize,
    /// Bytes to transfer (a receive has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<Bytes>,
    /// Start time (default 0); for a flow that waits, the earliest it may start.
    #[serde(default)]
    pub start: Time,
    /// Class name (default: the workload's class).
    pub class: Option<String>,
    /// The name other entries' `after` calls this one by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Names of the flows and receives this flow waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<Vec<String>>,
    /// Time between the last of `after` being done and the flow's start (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<Time>,
    /// A tag that matches a receive to the flow (with the two hosts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<u32>,
    /// The entry is a receive at `dst` of the flow from `src` with its `tag`, not a flow.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub receive: bool,
}

/// A `[[workloads]]` entry. One flat table serves every kind so that errors can name the key;
/// each kind states which keys it uses and rejects the others.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    /// "flows", "trace", "bulk", "poisson", "incast", "permutation", "all_to_all", "rpc", "proxy",
    /// "collective" or "chakra".
    pub kind: String,
    /// Traffic class of the flows (default "default").
    pub class: Option<String>,
    /// kind = "flows": the list.
    pub flows: Option<Vec<FlowEntry>>,
    /// kind = "trace": path to the file, relative to the scenario; kind = "chakra": the path
    /// before each rank's `.<rank>.et`.
    pub file: Option<String>,
    /// kind = "trace": "csv" (`src,dst,size_bytes,start`), "hpcc" (the HPCC simulator's flow file)
    /// or "htsim" (the UEC reference simulator's `.cm` connection matrix).
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
    /// Poisson "incast"; the ranks of a "collective", in rank order); default all.
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
    /// kind = "collective": "all_reduce", "reduce_scatter", "all_gather", "all_to_all" or "broadcast".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// kind = "collective": "ring", "halving_doubling", "double_binary_tree" or "direct" (what
    /// each op allows; default ring, or direct for all_to_all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// kind = "collective": pieces each message is cut into, sent one after another (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<u32>,
    /// kind = "collective": times the collective runs, each rank starting the next `compute` after
    /// its part of the last is done (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// kind = "collective": compute time between iterations (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<Time>,
    /// kind = "collective", op = "broadcast": the rank (an index into `hosts`) that sends (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<usize>,
    /// kind = "chakra": ASTRA-sim's communicator group file (JSON, `{"<pg_name>": [<rank>, ..]}`),
    /// relative to the scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_groups: Option<String>,
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
    /// The first class (by name) that runs on RDMA or UET, whose flows a proxy cannot relay,
    /// and that transport's name.
    pub non_tcp_class: Option<(&'a str, &'static str)>,
    /// Class selection for flows of workloads that name no class.
    pub rules: Arc<ClassRules>,
}

/// A workload's traffic: flows known up front and, for closed-loop kinds, an application.
#[derive(Default)]
pub struct Generated {
    /// Flows to start at their start times.
    pub flows: Vec<FlowSpec>,
    /// What each flow waits for, by index into `flows` (empty: none waits).
    pub waits: Vec<Option<Wait>>,
    /// The collectives the flows make, by index into `flows`.
    pub collectives: Vec<collective::CollectiveRun>,
    /// The Chakra traces the flows come from, by index into `flows`.
    pub chakra: Vec<chakra::ChakraRun>,
    /// A closed-loop source that opens flows during the run.
    pub app: Option<Box<dyn App>>,
}

/// A `[[workloads]]` entry as [`WorkloadConfig::parse`] read it: its kind, and its flows' class and QoS.
pub struct Parsed {
    /// The kind with its settings.
    pub workload: Workload,
    /// Picks each flow's class from its endpoints.
    pub class: Classify,
    /// The QoS of every flow.
    pub qos: Qos,
}

impl Parsed {
    /// The workload's traffic; `key` is its path in the scenario and `index` picks its stream of `seed`.
    pub fn generate(&self, key: &str, index: usize, seed: u64) -> Result<Generated, String> {
        let (class, qos) = (self.class.clone(), self.qos);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ (0x1000 + index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let flows = |mut flows: Vec<FlowSpec>| {
            if flows.is_empty() {
                return Err(format!("{key}: the workload makes no flow; check its hosts, load and duration"));
            }
            for f in &mut flows {
                f.class = class(f.src, f.dst);
                f.qos = qos;
            }
            Ok(Generated { flows, ..Generated::default() })
        };
        let app = |app: Box<dyn App>| -> Result<Generated, String> { Ok(Generated { app: Some(app), ..Generated::default() }) };
        match &self.workload {
            Workload::Flows { flows: listed, waits } => Ok(Generated { flows: listed.clone(), waits: waits.clone(), ..Generated::default() }),
            Workload::Chakra(c) => {
                let mut flows = c.flows.clone();
                for f in &mut flows {
                    f.class = class(f.src, f.dst);
                    f.qos = qos;
                }
                let (waits, collectives, chakra) = (c.waits.clone(), c.collectives.clone(), vec![c.run.clone()]);
                Ok(Generated { flows, waits, collectives, chakra, app: None })
            }
            Workload::Collective(c) => {
                let mut made = c.expand(key);
                for f in &mut made.flows {
                    f.class = class(f.src, f.dst);
                    f.qos = qos;
                }
                Ok(made)
            }
            Workload::Trace { flows: read } => flows(
                read.iter()
                    .map(|f| FlowSpec { src: f.src, dst: f.dst, size: Some(f.size_bytes), start: f.start, ..FlowSpec::default() })
                    .collect(),
            ),
            Workload::Bulk { senders, receiver, size, start } => flows(
                senders.iter().map(|&src| FlowSpec { src, dst: *receiver, size: *size, start: *start, ..FlowSpec::default() }).collect(),
            ),
            Workload::Poisson { sizes, sources, destinations, load, start, duration } => {
                let gen = generators::PoissonLoad { sources, destinations, sizes, load: *load, start: *start, duration: *duration };
                flows(gen.generate(&mut rng))
            }
            Workload::Permutation { hosts, size, start } => flows(generators::permutation(hosts, *size, *start, &mut rng)),
            Workload::AllToAll { hosts, size, start } => flows(generators::all_to_all(hosts, *size, *start)),
            Workload::IncastPoisson { hosts, fan_in, flows_per_sender, size, load, start, duration } => flows(
                generators::poisson_incast(hosts, *fan_in, *flows_per_sender as usize, *size, *load, *start, *duration, &mut rng),
            ),
            Workload::IncastRounds { senders, receiver, size, rounds, flows_per_sender, start } => {
                let senders: Vec<usize> = senders.iter().flat_map(|&s| std::iter::repeat_n(s, *flows_per_sender as usize)).collect();
                app(Box::new(incast::IncastRounds::new(senders, *receiver, *size, *rounds, *start, class, qos)))
            }
            Workload::Rpc { clients, servers, outstanding, request, response, think_time, connections, start, duration } => {
                let cfg = rpc::RpcConfig {
                    clients: clients.clone(),
                    servers: servers.clone(),
                    outstanding: *outstanding,
                    request: request.clone(),
                    response: response.clone(),
                    connections: *connections,
                    think_time: *think_time,
                    start: *start,
                    stop: *start + *duration,
                    class,
                    qos,
                };
                app(Box::new(rpc::RpcClients::new(cfg, rng)))
            }
            Workload::Proxy { clients, proxy, backends, outstanding, header_size, body_size, start, duration } => {
                let cfg = proxy::ProxyConfig {
                    clients: clients.clone(),
                    proxy: *proxy,
                    backends: backends.clone(),
                    outstanding: *outstanding,
                    header: *header_size,
                    body: *body_size,
                    start: *start,
                    stop: *start + *duration,
                    class,
                    qos,
                };
                app(Box::new(proxy::ProxyClients::new(cfg)))
            }
        }
    }
}
