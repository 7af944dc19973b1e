//! A `[[workloads]]` entry read as its kind: the one match on `kind`, the keys each kind takes and
//! requires, their defaults, and every check against the scenario. One pass does it all, because
//! `sluice check` stops at a missing key: the problems met before it must be reported first.

use super::chakra::Chakra;
use super::collective::Collective;
use super::rpc::Connections;
use crate::flow::waits::Wait;
use super::{cdf, trace, Classify, FlowSpec, Parsed, Qos, SizeSource, WorkloadConfig, WorkloadContext};
use crate::time::{Bytes, Rate, Time};
use std::sync::Arc;

/// A workload's kind with its settings checked and defaulted (a list of hosts left out is every host).
#[derive(Debug)]
pub enum Workload {
    /// `kind = "flows"`: the listed flows, classed, and what each waits for.
    Flows { flows: Vec<FlowSpec>, waits: Vec<Option<Wait>> },
    /// `kind = "collective"`: a collective over ranks, expanded into messages that wait for one another.
    Collective(Collective),
    /// `kind = "chakra"`: Chakra execution traces, one per rank, as messages that wait for one another.
    Chakra(Box<Chakra>),
    /// `kind = "trace"`: the flows read from the file.
    Trace { flows: Vec<trace::TraceFlow> },
    /// `kind = "bulk"`: a flow from each sender to the receiver; no size means endless flows.
    Bulk { senders: Vec<usize>, receiver: usize, size: Option<u64>, start: Time },
    /// `kind = "poisson"`: Poisson arrivals offering `load` of each source's link rate.
    Poisson {
        sizes: SizeSource,
        sources: Vec<(usize, Rate)>,
        destinations: Vec<usize>,
        load: f64,
        start: Time,
        duration: Time,
    },
    /// `kind = "permutation"`: each host sends to another, none receiving twice.
    Permutation { hosts: Vec<usize>, size: u64, start: Time },
    /// `kind = "all_to_all"`: every host sends to every other.
    AllToAll { hosts: Vec<usize>, size: u64, start: Time },
    /// `kind = "incast"` without `load`: synchronized rounds from the senders to the receiver.
    IncastRounds { senders: Vec<usize>, receiver: usize, size: u64, rounds: u32, flows_per_sender: u32, start: Time },
    /// `kind = "incast"` with `load`: Poisson events, each `fan_in` of the hosts sending to another.
    IncastPoisson {
        hosts: Vec<(usize, Rate)>,
        fan_in: usize,
        flows_per_sender: u32,
        size: u64,
        load: f64,
        start: Time,
        duration: Time,
    },
    /// `kind = "rpc"`: clients keeping requests outstanding to servers.
    Rpc {
        clients: Vec<usize>,
        servers: Vec<usize>,
        outstanding: usize,
        request: SizeSource,
        response: SizeSource,
        think_time: Time,
        connections: Connections,
        start: Time,
        duration: Time,
    },
    /// `kind = "proxy"`: clients' requests relayed by an L7 proxy to backends.
    Proxy {
        clients: Vec<usize>,
        proxy: usize,
        backends: Vec<usize>,
        outstanding: usize,
        header_size: u64,
        body_size: u64,
        start: Time,
        duration: Time,
    },
}

impl Workload {
    /// The key a flow's size comes from, for errors about it.
    pub fn size_key(&self) -> &'static str {
        match self {
            Workload::Trace { .. } | Workload::Chakra(_) => "file",
            Workload::Flows { .. } => "flows",
            Workload::Poisson { sizes: SizeSource::Cdf(_), .. } => "cdf",
            _ => "size",
        }
    }
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
            ("op", self.op.is_some()),
            ("algorithm", self.algorithm.is_some()),
            ("chunks", self.chunks.is_some()),
            ("iterations", self.iterations.is_some()),
            ("compute", self.compute.is_some()),
            ("root", self.root.is_some()),
            ("comm_groups", self.comm_groups.is_some()),
        ];
        // Class selection (tag, dst_port, intent) and QoS keys apply to every kind.
        p.iter().filter(|(_, present)| *present).map(|(k, _)| *k).collect()
    }

    /// Reads the entry as its kind, checked against the scenario; `key` is its path (e.g. "workloads[0]").
    pub fn parse(&self, key: &str, ctx: &WorkloadContext) -> Result<Parsed, String> {
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
        let class: Classify = match self.class.as_deref() {
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
        let host_list = |list: Option<&[usize]>, k: &str, min: usize| -> Result<Vec<usize>, String> {
            let list = match list {
                Some(l) => l.to_vec(),
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
        let with_rates = |list: Vec<usize>| -> Vec<(usize, Rate)> { list.into_iter().map(|h| (h, ctx.host_rates[h])).collect() };
        let only = |allowed: &[&str]| -> Result<(), String> {
            match self.present_keys().into_iter().find(|k| !allowed.contains(k)) {
                Some(k) => Err(format!("{key}.{k}: not used by kind = \"{kind}\"; it takes {}", allowed.join(", "))),
                None => Ok(()),
            }
        };
        let missing = |k: &str| format!("{key}.{k}: required for kind = \"{kind}\"");
        let positive_size = |b: Option<Bytes>, k: &str| -> Result<u64, String> {
            match b {
                Some(Bytes(0)) => Err(format!("{key}.{k}: expected a positive size like \"64KB\"")),
                Some(Bytes(n)) => Ok(n),
                None => Err(missing(k)),
            }
        };
        let load_of = |l: Option<f64>| -> Result<f64, String> {
            match l {
                Some(l) if l > 0.0 && l <= 1.0 => Ok(l),
                Some(l) => Err(format!("{key}.load: expected a fraction of link rate in (0, 1], got {l}")),
                None => Err(missing("load")),
            }
        };
        let duration_of = |d: Option<Time>| -> Result<Time, String> {
            match d {
                Some(Time::ZERO) => Err(format!("{key}.duration: expected a positive duration like \"10ms\"")),
                Some(d) => Ok(d),
                None => Err(missing("duration")),
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
        let flows_per_sender = || match self.flows_per_sender.unwrap_or(1) {
            0 => Err(format!("{key}.flows_per_sender: expected at least 1 flow")),
            n => Ok(n),
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
        // The keys of "permutation" and "all_to_all": hosts, at least two, and a flow size.
        let among_hosts = || -> Result<(Vec<usize>, u64), String> {
            only(&["hosts", "size", "start"])?;
            Ok((host_list(self.hosts.as_deref(), "hosts", 2)?, positive_size(self.size, "size")?))
        };
        let start = self.start.unwrap_or_default();
        let workload = match kind {
            "flows" => {
                only(&["flows"])?;
                let list = self.flows.as_ref().ok_or_else(|| missing("flows"))?;
                if list.is_empty() {
                    return Err(format!("{key}.flows: the list is empty; give at least one {{ src, dst, size }}"));
                }
                let (flows, waits) = super::listed::listed_flows(list, key, &host, &class_of, &class, qos)?;
                Workload::Flows { flows, waits }
            }
            "collective" => {
                only(&["op", "algorithm", "hosts", "size", "chunks", "iterations", "compute", "root", "start"])?;
                let ranks = host_list(self.hosts.as_deref(), "hosts", 2)?;
                let c = Collective::parse(self, key, ranks, positive_size(self.size, "size")?, start)?;
                at_most(c.flow_count() as f64, &format!("{} over {} ranks", c.describe(), c.ranks.len()), "hosts")?;
                Workload::Collective(c)
            }
            "chakra" => {
                only(&["file", "hosts", "algorithm", "comm_groups", "start"])?;
                let ranks = self.hosts.is_some().then(|| host_list(self.hosts.as_deref(), "hosts", 1)).transpose()?;
                let c = Chakra::parse(self, key, ctx.base_dir, ranks, hosts, start)?;
                at_most(c.flows.len() as f64, &format!("the trace's {} ranks", c.run.hosts.len()), "file")?;
                Workload::Chakra(Box::new(c))
            }
            "trace" => {
                only(&["file", "format"])?;
                let file = self.file.as_deref().ok_or_else(|| missing("file"))?;
                let path = ctx.base_dir.join(file);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("{key}.file: cannot read \"{}\": {e}", path.display()))?;
                let name = path.display().to_string();
                let flows = match self.format.as_deref().unwrap_or("csv") {
                    "csv" => trace::parse_csv_trace(&text, &name)?,
                    "hpcc" => trace::parse_hpcc_flows(&text, &name)?,
                    "htsim" => trace::parse_htsim_cm(&text, &name, hosts)?,
                    f => return Err(format!("{key}.format: expected \"csv\", \"hpcc\" or \"htsim\", got \"{f}\"")),
                };
                trace::validate(&flows, hosts, &name)?;
                Workload::Trace { flows }
            }
            "bulk" => {
                only(&["senders", "receiver", "size", "start"])?;
                let senders = self.senders.as_deref().ok_or_else(|| missing("senders"))?;
                let receiver = self.receiver.ok_or_else(|| missing("receiver"))?;
                let receiver = host(receiver, format!("{key}.receiver"))?;
                let senders = host_list(Some(senders), "senders", 1)?;
                if self.size.is_some_and(|s| s.0 == 0) {
                    return Err(format!("{key}.size: expected a positive size, or no size for endless flows"));
                }
                if let Some(i) = senders.iter().position(|&s| s == receiver) {
                    return Err(format!("{key}.senders[{i}]: host {receiver} is also the receiver"));
                }
                Workload::Bulk { senders, receiver, size: self.size.map(|b| b.0), start }
            }
            "poisson" => {
                only(&["cdf", "size", "load", "hosts", "destinations", "start", "duration"])?;
                let sizes = match (&self.cdf, self.size) {
                    (Some(_), Some(_)) => return Err(format!("{key}.size: give either size or cdf, not both")),
                    (Some(c), None) => SizeSource::Cdf(Arc::new(cdf::resolve(c, ctx.base_dir).map_err(|e| format!("{key}.cdf: {e}"))?)),
                    (None, Some(_)) => SizeSource::Fixed(positive_size(self.size, "size")?),
                    (None, None) => return Err(format!("{key}.cdf: required for kind = \"poisson\" (or a fixed size)")),
                };
                let sources = with_rates(host_list(self.hosts.as_deref(), "hosts", 1)?);
                let destinations = host_list(self.destinations.as_deref(), "destinations", 1)?;
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
                Workload::Poisson { sizes, sources, destinations, load, start, duration }
            }
            "permutation" => {
                let (hosts, size) = among_hosts()?;
                at_most(hosts.len() as f64, "every pair of its hosts", "hosts")?;
                Workload::Permutation { hosts, size, start }
            }
            "all_to_all" => {
                let (hosts, size) = among_hosts()?;
                let n = hosts.len() as f64;
                at_most(n * (n - 1.0), "every pair of its hosts", "hosts")?;
                Workload::AllToAll { hosts, size, start }
            }
            "incast" if self.load.is_some() => {
                only(&["hosts", "fan_in", "flows_per_sender", "size", "load", "start", "duration"])?;
                let hosts = with_rates(host_list(self.hosts.as_deref(), "hosts", 2)?);
                let fan_in = self.fan_in.ok_or_else(|| missing("fan_in"))?;
                if fan_in == 0 || fan_in >= hosts.len() {
                    return Err(format!("{key}.fan_in: expected 1 to {} senders (hosts minus the receiver), got {fan_in}", hosts.len() - 1));
                }
                let flows_per_sender = flows_per_sender()?;
                let size = positive_size(self.size, "size")?;
                let (load, duration) = (load_of(self.load)?, duration_of(self.duration)?);
                let capacity: f64 = hosts.iter().map(|h| h.1 .0 as f64).sum();
                let expected = load * capacity * duration.secs_f64() / (size as f64 * 8.0);
                at_most(expected, &format!("load {load} for {duration} in {size}-byte responses"), "duration")?;
                some_flow(expected, "duration")?;
                Workload::IncastPoisson { hosts, fan_in, flows_per_sender, size, load, start, duration }
            }
            "incast" => {
                only(&["senders", "receiver", "size", "rounds", "flows_per_sender", "start"])?;
                let senders = self.senders.as_deref().ok_or_else(|| missing("senders"))?;
                let receiver = self.receiver.ok_or_else(|| missing("receiver"))?;
                let receiver = host(receiver, format!("{key}.receiver"))?;
                let senders = host_list(Some(senders), "senders", 1)?;
                if let Some(i) = senders.iter().position(|&s| s == receiver) {
                    return Err(format!("{key}.senders[{i}]: host {receiver} is also the receiver"));
                }
                let size = positive_size(self.size, "size")?;
                let rounds = self.rounds.unwrap_or(1);
                if rounds == 0 {
                    return Err(format!("{key}.rounds: expected at least 1 round"));
                }
                let flows_per_sender = flows_per_sender()?;
                let per_round = senders.len() as f64 * flows_per_sender as f64;
                at_most(rounds as f64 * per_round, &format!("{rounds} rounds of {per_round} flows"), "rounds")?;
                Workload::IncastRounds { senders, receiver, size, rounds, flows_per_sender, start }
            }
            "rpc" => {
                only(&[
                    "clients", "servers", "outstanding", "request_size", "request_cdf", "response_size", "response_cdf",
                    "think_time", "connections", "start", "duration",
                ])?;
                let clients = self.clients.as_deref().ok_or_else(|| missing("clients"))?;
                let servers = self.servers.as_deref().ok_or_else(|| missing("servers"))?;
                let clients = host_list(Some(clients), "clients", 1)?;
                let servers = host_list(Some(servers), "servers", 1)?;
                if let Some(c) = clients.iter().find(|c| servers.iter().all(|s| s == *c)) {
                    return Err(format!("{key}.servers: client {c} has no server other than itself"));
                }
                let outstanding = outstanding_of(clients.len())?;
                let connections = match self.connections.as_deref() {
                    None | Some("per_request") => Connections::PerRequest,
                    Some("persistent") => Connections::Persistent,
                    Some("transaction") => Connections::Transaction,
                    Some(other) => {
                        return Err(format!(
                            "{key}.connections: expected \"per_request\", \"persistent\" or \"transaction\", got \"{other}\""
                        ))
                    }
                };
                let response = sizes(self.response_size, &self.response_cdf, "response")?;
                if connections == Connections::Transaction {
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
                let request = sizes(self.request_size, &self.request_cdf, "request")?;
                let (think_time, duration) = (self.think_time.unwrap_or_default(), duration_of(self.duration)?);
                Workload::Rpc { clients, servers, outstanding, request, response, think_time, connections, start, duration }
            }
            "proxy" => {
                if let Some((name, transport)) = ctx.non_tcp_class {
                    return Err(format!(
                        "{key}.kind: a proxy relays TCP connections, but class \"{name}\" runs on {transport}; use TCP classes with a proxy"
                    ));
                }
                only(&["clients", "proxy", "backends", "outstanding", "header_size", "body_size", "start", "duration"])?;
                let clients = self.clients.as_deref().ok_or_else(|| missing("clients"))?;
                let proxy = self.proxy.ok_or_else(|| missing("proxy"))?;
                let backends = self.backends.as_deref().ok_or_else(|| missing("backends"))?;
                if !ctx.handshake {
                    return Err(format!(
                        "{key}.kind: a proxy splices and closes established connections, so it needs transport.handshake = true"
                    ));
                }
                let proxy = host(proxy, format!("{key}.proxy"))?;
                let clients = host_list(Some(clients), "clients", 1)?;
                let backends = host_list(Some(backends), "backends", 1)?;
                if let Some(i) = clients.iter().position(|&c| c == proxy) {
                    return Err(format!("{key}.clients[{i}]: host {proxy} is the proxy"));
                }
                if let Some(i) = backends.iter().position(|&b| b == proxy) {
                    return Err(format!("{key}.backends[{i}]: host {proxy} is the proxy"));
                }
                let outstanding = outstanding_of(clients.len())?;
                let header_size = positive_size(self.header_size, "header_size")?;
                let body_size = self.body_size.map_or(0, |b| b.0);
                let duration = duration_of(self.duration)?;
                Workload::Proxy { clients, proxy, backends, outstanding, header_size, body_size, start, duration }
            }
            k => {
                return Err(format!(
                    "{key}.kind: expected \"flows\", \"trace\", \"bulk\", \"poisson\", \"incast\", \"permutation\", \"all_to_all\", \"rpc\", \"proxy\", \"collective\" or \"chakra\", got \"{k}\""
                ))
            }
        };
        Ok(Parsed { workload, class, qos })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::ClassRules;

    /// `toml` read as workloads[0] of a scenario with four 10 Gbps hosts and a `default` class.
    fn parse(toml: &str, handshake: bool) -> Result<Workload, String> {
        let (rates, names) = ([Rate::gbps(10); 4], vec!["default".to_string()]);
        let class_index = |n: &str| names.iter().position(|c| c == n);
        let ctx = WorkloadContext {
            max_flows: 100_000,
            max_outstanding: 1000,
            host_rates: &rates,
            base_dir: std::path::Path::new("."),
            class_index: &class_index,
            class_names: &names,
            seed: 1,
            mss: 1448,
            handshake,
            non_tcp_class: None,
            rules: Arc::new(ClassRules::default()),
        };
        toml::from_str::<WorkloadConfig>(toml).unwrap().parse("workloads[0]", &ctx).map(|p| p.workload)
    }

    #[test]
    fn incast_is_rounds_without_load_and_poisson_events_with_it() {
        let rounds = parse("kind = \"incast\"\nsenders = [1, 2]\nreceiver = 0\nsize = \"1KB\"\n", false).unwrap();
        assert!(
            matches!(rounds, Workload::IncastRounds { rounds: 1, flows_per_sender: 1, start: Time::ZERO, .. }),
            "rounds and flows per sender default to 1, the start to 0: {rounds:?}"
        );
        let events = parse("kind = \"incast\"\nfan_in = 2\nsize = \"1KB\"\nload = 0.5\nduration = \"1ms\"\n", false).unwrap();
        assert!(matches!(&events, Workload::IncastPoisson { fan_in: 2, hosts, .. } if hosts.len() == 4), "{events:?}");
    }

    #[test]
    fn a_key_the_kind_does_not_take_is_named_before_a_missing_one() {
        let err = parse("kind = \"bulk\"\nload = 0.5\n", false).unwrap_err();
        assert!(err.starts_with("workloads[0].load: not used by kind = \"bulk\""), "{err}");
        let err = parse("kind = \"bulk\"\nreceiver = 0\n", false).unwrap_err();
        assert_eq!(err, "workloads[0].senders: required for kind = \"bulk\"");
    }

    #[test]
    fn a_problem_met_before_a_missing_key_is_reported_first() {
        let rpc = "kind = \"rpc\"\nconnections = \"transaction\"\nclients = [1]\nservers = [0]\nrequest_size = \"32B\"\nresponse_size = \"40B\"\n";
        let err = parse(rpc, false).unwrap_err();
        assert!(err.starts_with("workloads[0].connections: \"transaction\" answers on the server's FIN"), "{err}");
        assert_eq!(parse(rpc, true).unwrap_err(), "workloads[0].duration: required for kind = \"rpc\"");
    }

    #[test]
    fn an_unknown_kind_lists_the_kinds() {
        let err = parse("kind = \"nope\"\n", false).unwrap_err();
        assert!(err.starts_with("workloads[0].kind: expected \"flows\", \"trace\"") && err.ends_with("got \"nope\""), "{err}");
    }
}
