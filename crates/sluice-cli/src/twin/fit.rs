//! Whether a scenario fits the netns testbed, and if so the testbed that hosts it: one switch of
//! at most 16 hosts, ports up to 10 Gb/s, a byte buffer and step marking as the scenario's switch
//! gives them, the classes' algorithms a host runs, and the workloads the testbed's traffic
//! generates. A scenario that does not fit is refused with every reason and what to change.

use sluice_sim::cc::portable::{KERNEL_BUILT_IN, PORTABLE};
use sluice_sim::scenario::Scenario;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The most hosts the testbed runs (one namespace each, on one switch): an 8-to-1 incast needs
/// nine; past this a 2-core machine's testbed saturates a core even at 100 Mb/s, and every run
/// would be flagged.
pub const MAX_HOSTS: u32 = 16;
/// The fastest port the testbed's shapers hold.
pub const MAX_RATE_BPS: u64 = 10_000_000_000;

/// A workload as the testbed runs it, hosts numbered as the scenario numbers them.
#[derive(Clone, Debug, PartialEq)]
pub enum Traffic {
    /// Endless flows from each sender to the receiver.
    Bulk { class: String, senders: Vec<usize>, receiver: usize },
    /// Closed-loop clients on persistent connections.
    Rpc {
        class: String,
        clients: Vec<usize>,
        servers: Vec<usize>,
        outstanding: usize,
        request: u64,
        response: u64,
        think: Duration,
    },
}

impl Traffic {
    /// The class it runs in.
    pub fn class(&self) -> &str {
        match self {
            Traffic::Bulk { class, .. } | Traffic::Rpc { class, .. } => class,
        }
    }

    /// The hosts whose switch port carries its data towards them (a bulk receiver, a client
    /// reading responses).
    fn receivers(&self) -> Vec<usize> {
        match self {
            Traffic::Bulk { receiver, .. } => vec![*receiver],
            Traffic::Rpc { clients, .. } => clients.clone(),
        }
    }
}

/// The testbed a scenario runs on, and its traffic.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// Hosts, one namespace each.
    pub hosts: u32,
    /// Every switch port's rate, bits/s.
    pub rate_bps: u64,
    /// MTU of every link.
    pub mtu: u32,
    /// Each switch port's buffer, bytes.
    pub queue_bytes: u64,
    /// CE marking threshold, bytes (0: no marking).
    pub ce_threshold: u64,
    /// The minimum RTO, set on every host route.
    pub rto_min: Duration,
    /// The initial window, set on every host route.
    pub init_cwnd: u32,
    /// The scenario's duration: the testbed's measured window.
    pub duration: Duration,
    /// Each class that carries traffic, with its algorithm.
    pub classes: BTreeMap<String, String>,
    /// The workloads, in the scenario's order.
    pub traffic: Vec<Traffic>,
    /// What the testbed does differently from the scenario, said with the results.
    pub notes: Vec<String>,
}

/// The testbed for `s`, or every reason it does not fit, each starting with its key path.
pub fn fit(s: &Scenario) -> Result<Fit, Vec<String>> {
    let (mut no, mut notes) = (Vec::new(), Vec::new());
    let (hosts, rate_bps) = fabric(s, &mut no, &mut notes);
    let ce_threshold = switch(s, &mut no);
    let unsupported = [
        (s.pfc.enabled, "pfc.enabled: the testbed has no PFC; set it to false"),
        (s.tlt.enabled, "tlt.enabled: the testbed's switch does not drop by colour yet; set it to false"),
        (s.transport.tlt, "transport.tlt: the testbed's hosts do not mark important packets yet; set it to false"),
        (
            s.circuit.is_some(),
            "circuit: the twin runs packet-switched scenarios; `sluice testbed circuit` runs a circuit",
        ),
        (s.cpu.is_some(), "cpu: the testbed's hosts are this machine's cores; leave [cpu] out"),
        (s.offload.is_some(), "offload: the testbed has no NIC offload engine; leave [offload] out"),
        (!s.failures.is_empty(), "failures: the testbed's links do not fail; leave [[failures]] out"),
        (!s.events.is_empty(), "events: the twin applies one policy for the whole run; leave [[events]] out"),
    ];
    no.extend(unsupported.iter().filter(|(bad, _)| *bad).map(|(_, why)| why.to_string()));
    let Some(duration) = s.sim.duration else {
        no.push("sim.duration: the testbed measures a fixed window; give the run a duration, e.g. \"3s\"".into());
        return Err(no);
    };
    let mut traffic = Vec::new();
    for (i, w) in s.workloads.iter().enumerate() {
        match workload(i, w, duration.ns()) {
            Ok(x) => traffic.push(x),
            Err(why) => no.push(why),
        }
    }
    let classes = classes(s, &traffic, &mut no, &mut notes);
    if !no.is_empty() {
        return Err(no);
    }
    // The scenario's switch shares its buffer with a dynamic threshold: with n ports congested
    // at once, each holds alpha / (1 + n alpha) of it. The testbed's ports are fixed byte limits,
    // the share of the ports that receive the workloads' data.
    let congested = traffic.iter().flat_map(Traffic::receivers).collect::<BTreeSet<_>>().len().max(1) as f64;
    let (sw, alpha) = (&s.switch, s.switch.alpha);
    let queue_bytes = (sw.buffer.0 as f64 * alpha / (1.0 + congested * alpha)).round() as u64;
    notes.push(format!(
        "switch: a fixed {queue_bytes}-byte buffer a port, the scenario's {} shared buffer (alpha {alpha}) split over the {congested} ports that receive data",
        sluice_sim::words::bytes(sw.buffer.0)
    ));
    Ok(Fit {
        hosts,
        rate_bps,
        mtu: s.transport.mtu,
        queue_bytes,
        ce_threshold,
        rto_min: Duration::from_nanos(s.transport.rto_min.ns()),
        init_cwnd: s.transport.init_cwnd,
        duration: Duration::from_nanos(duration.ns()),
        classes,
        traffic,
        notes,
    })
}

/// The hosts and their links: how many, and their rate in bits per second.
fn fabric(s: &Scenario, no: &mut Vec<String>, notes: &mut Vec<String>) -> (u32, u64) {
    let t = &s.topology;
    if t.kind != "star" {
        no.push(format!(
            "topology.kind: the testbed is one switch; expected \"star\" with at most {MAX_HOSTS} hosts, got \"{}\"",
            t.kind
        ));
    }
    let hosts = t.hosts.unwrap_or(0);
    if t.kind == "star" && !(2..=MAX_HOSTS).contains(&hosts) {
        no.push(format!("topology.hosts: the testbed runs 2 to {MAX_HOSTS} hosts, got {hosts}; use fewer hosts"));
    }
    let rate_bps = t.host_rate.map_or(0, |r| r.0);
    if let Some(r) = t.host_rate.filter(|r| r.0 > MAX_RATE_BPS) {
        no.push(format!("topology.host_rate: the testbed's ports run at most 10Gbps, got {r}; lower it"));
    }
    if t.host_loss.is_some_and(|l| l > 0.0) {
        no.push("topology.host_loss: the testbed's links lose nothing; leave it out".into());
    }
    if let Some(d) = t.host_delay.filter(|d| d.0 > 0) {
        notes.push(format!(
            "links: the scenario's {d} a link is not added on the testbed, whose base RTT is the software's (tens of microseconds)"
        ));
    }
    (hosts, rate_bps)
}

/// The switch: its CE marking threshold in bytes (0: no marking).
fn switch(s: &Scenario, no: &mut Vec<String>) -> u64 {
    let sw = &s.switch;
    let ce_threshold = match sw.ecn.mode.as_str() {
        "off" | "" => 0,
        "step" => sw.ecn.k.map_or(0, |k| k.0),
        m => {
            no.push(format!("switch.ecn.mode: the testbed's switch marks at one threshold; expected \"step\" or \"off\", got \"{m}\""));
            0
        }
    };
    if sw.ecn.non_ect.as_deref().is_some_and(|n| n != "pass") {
        no.push("switch.ecn.non_ect: the testbed's switch passes packets that are not ECN-capable up to its buffer; expected \"pass\"".into());
    }
    if !sw.rates.is_empty() || !sw.ports.is_empty() {
        no.push(
            "switch.rates, switch.ports: the testbed's ports are all alike; leave out per-rate and per-port settings"
                .into(),
        );
    }
    if sw.trim.is_some() {
        no.push("switch.trim: the testbed's switch does not trim packets; leave it out".into());
    }
    ce_threshold
}

/// Each class's algorithm, refused where no host runs it.
fn classes(
    s: &Scenario,
    traffic: &[Traffic],
    no: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut classes = BTreeMap::new();
    for x in traffic {
        let name = x.class();
        let Some(c) = s.classes.get(name) else { continue };
        let host_runs = PORTABLE.contains(&c.cc.as_str()) || KERNEL_BUILT_IN.contains(&c.cc.as_str());
        if !host_runs {
            no.push(format!("classes.{name}.cc: {}", sluice_sim::cc::unknown_on_host(&c.cc)));
        }
        if !c.params.is_empty() || c.preset.is_some() {
            notes.push(format!(
                "classes.{name}: parameters are the simulator's; the testbed's {} runs with its defaults",
                c.cc
            ));
        }
        classes.insert(name.to_string(), c.cc.clone());
    }
    classes
}

/// Workload `i` as the testbed runs it, or why it cannot.
fn workload(i: usize, w: &sluice_sim::workload::WorkloadConfig, duration_ns: u64) -> Result<Traffic, String> {
    let key = format!("workloads[{i}]");
    let class = w.class.clone().unwrap_or_else(|| "default".into());
    let starts_at_zero = w.start.is_none_or(|t| t.ns() == 0);
    match w.kind.as_str() {
        "bulk" if w.size.is_none() && starts_at_zero => {
            let (Some(senders), Some(receiver)) = (w.senders.clone(), w.receiver) else {
                return Err(format!("{key}: a bulk workload names its senders and receiver"));
            };
            Ok(Traffic::Bulk { class, senders, receiver })
        }
        "bulk" => Err(format!("{key}: the testbed runs endless bulk flows from the start; leave out size and start")),
        "rpc" => {
            let (Some(clients), Some(servers)) = (w.clients.clone(), w.servers.clone()) else {
                return Err(format!("{key}: list the rpc workload's clients and servers"));
            };
            if w.connections.as_deref() != Some("persistent") {
                return Err(format!(
                    "{key}.connections: the testbed's clients keep one connection a slot; set it to \"persistent\" (--set {key}.connections=persistent)"
                ));
            }
            let (Some(request), Some(response)) = (w.request_size, w.response_size) else {
                return Err(format!(
                    "{key}: the testbed's clients use fixed sizes; give request_size and response_size, not cdfs"
                ));
            };
            if !starts_at_zero || w.duration.is_some_and(|d| d.ns() < duration_ns) {
                return Err(format!(
                    "{key}: the testbed's clients run for the whole window; leave out start and duration"
                ));
            }
            if clients.iter().any(|c| servers.iter().all(|s| s == c)) {
                return Err(format!("{key}: a client that is the only server has no one to ask"));
            }
            let think = Duration::from_nanos(w.think_time.map_or(0, |t| t.ns()));
            Ok(Traffic::Rpc {
                class,
                clients,
                servers,
                outstanding: w.outstanding.unwrap_or(1),
                request: request.0,
                response: response.0,
                think,
            })
        }
        k => Err(format!("{key}.kind: the testbed runs \"bulk\" and \"rpc\" workloads, not \"{k}\"")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra: &[&str]) -> Scenario {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/opencc_storage.toml");
        let mut sets: Vec<String> = ["workloads[0].connections=persistent", "workloads[1].connections=persistent"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        sets.extend(extra.iter().map(|s| s.to_string()));
        sluice_sim::scenario::load(&path, &sets).expect("the bundled scenario loads").scenario
    }

    #[test]
    fn the_open_cc_storage_experiment_fits_with_its_buffer_split_over_its_two_receivers() {
        let f = fit(&scenario(&[])).expect("fits");
        assert_eq!((f.hosts, f.rate_bps, f.mtu, f.ce_threshold), (4, 1_000_000_000, 1500, 30_000));
        // 1 MB shared, alpha 1, two receiving ports (h0 and h1): 1e6 / 3 each.
        assert_eq!(f.queue_bytes, 333_333);
        assert_eq!((f.rto_min, f.init_cwnd, f.duration), (Duration::from_millis(10), 10, Duration::from_secs(1)));
        assert_eq!(f.classes.get("query").map(String::as_str), Some("cubic"));
        assert_eq!(f.traffic.len(), 4);
        assert_eq!(f.traffic[2], Traffic::Bulk { class: "backup".into(), senders: vec![1, 2], receiver: 0 });
        let Traffic::Rpc { request, response, think, outstanding, .. } = &f.traffic[0] else { panic!("rpc first") };
        assert_eq!((*request, *response, *think, *outstanding), (2000, 32000, Duration::from_millis(1), 1));
        assert!(f.notes.iter().any(|n| n.contains("25us")), "the link delay the testbed lacks is said: {:?}", f.notes);
    }

    #[test]
    fn a_scenario_the_testbed_cannot_host_is_refused_with_every_reason_and_the_fix() {
        let no = fit(&scenario(&[
            "topology.hosts=17",
            "topology.host_rate=\"25Gbps\"",
            "switch.ecn.mode=\"red\"",
            "classes.query.cc=\"hpcc\"",
            "workloads[1].connections=\"per_request\"",
        ]))
        .expect_err("refused");
        let has = |p: &str| no.iter().any(|n| n.starts_with(p));
        assert!(has("topology.hosts: the testbed runs 2 to 16 hosts, got 17"), "{no:?}");
        assert!(has("topology.host_rate: the testbed's ports run at most 10Gbps"), "{no:?}");
        assert!(has("switch.ecn.mode: "), "{no:?}");
        assert!(has("classes.query.cc: unknown congestion control \"hpcc\"; a host runs one of"), "{no:?}");
        assert!(
            has("workloads[1].connections: ")
                && no.iter().any(|n| n.contains("--set workloads[1].connections=persistent")),
            "{no:?}"
        );
        assert_eq!(no.len(), 5, "one reason each: {no:?}");
    }

    #[test]
    fn workloads_the_testbed_does_not_generate_are_named_with_their_kind() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/incast.toml");
        let no = fit(&sluice_sim::scenario::load(
            &path,
            &[
                "topology.hosts=8".into(),
                "workloads[0].senders=[0,1,2,3,4,5,6]".into(),
                "workloads[0].receiver=7".into(),
                "sim.duration=\"1s\"".into(),
            ],
        )
        .expect("loads")
        .scenario)
        .expect_err("refused");
        assert_eq!(
            no,
            vec!["workloads[0].kind: the testbed runs \"bulk\" and \"rpc\" workloads, not \"incast\"".to_string()]
        );
    }
}
