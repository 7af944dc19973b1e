//! The class table, shared by scenarios and by the host agent's policy: `[classes.<name>]` (an
//! algorithm, its parameters, a priority, a fallback and match rules) and `[policy]` (the
//! applications' intents mapped to classes). One schema and one set of checks, so a class means
//! the same in the simulator and on a real host (`docs/platform.md`).

use crate::cc::{self, CcFactory, ParamChange, Transports};
use crate::time::{Rate, Time};
use crate::transport::rdma::ClassNic;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A `[classes.<name>]` table: what the administrator chose for this traffic.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// Congestion-control algorithm name (see `sluice list`).
    pub cc: String,
    /// The algorithm's parameters.
    #[serde(default)]
    pub params: toml::Table,
    /// A named parameter set whose values stand under `params` ("paper", "hpcc_sim";
    /// `cc/presets.rs`), with the RDMA NIC behaviour its source pairs with them.
    pub preset: Option<String>,
    /// Switch priority queue (0 = highest), also the NIC scheduler's priority.
    #[serde(default)]
    pub priority: u8,
    /// The algorithm a flow falls back to when the peer or path lacks what `cc` needs
    /// (default "cubic").
    pub fallback: Option<String>,
    /// Administrator match rules: flows of no explicit class join the first class that matches.
    #[serde(rename = "match")]
    pub matches: Option<MatchRules>,
    /// The transport the class's flows run on: "tcp" (default), "rdma" (RoCEv2 queue pairs,
    /// `[rdma]`) or "uet" (the Ultra Ethernet transport, `[uet]`).
    #[serde(default)]
    pub transport: ClassTransport,
    /// Each data packet takes an ECMP hash of its own (per-packet entropy), so switches spray
    /// the class's flows over every equal-cost path instead of pinning each flow to one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spray: bool,
}

pub use crate::transport::ClassTransport;

pub use crate::workload::MatchRules;

/// The algorithm flows of no other class use when the scenario does not define `default`.
pub const DEFAULT_CC: &str = "cubic";


/// The intents an application may declare (the open CC draft's application interface, 6.1).
pub const INTENTS: [&str; 4] = ["latency_sensitive", "bulk", "target_rate", "deadline"];

/// Where a class table is used; match keys and priorities differ between the two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// A scenario: priorities are switch queues below `switch.priorities`; flows match by tags,
    /// dst_ports and hosts; a missing `default` class runs [`DEFAULT_CC`].
    Simulator {
        /// `switch.priorities`.
        priorities: u8,
    },
    /// A host's policy: priorities 0 to 7 (the socket's `SO_PRIORITY`); connections match by
    /// dst_ports and cgroups; with no `default` class, unmatched connections keep the kernel's
    /// default algorithm.
    Host,
}

/// Highest priority a host class may have: `SO_PRIORITY` values 0-7 need no capability.
pub const HOST_PRIORITIES: u8 = 8;

/// A class whose algorithm, parameters and fallback are known to be valid.
#[derive(Clone)]
pub struct CheckedClass {
    /// Class name.
    pub name: String,
    /// The class as written.
    pub config: ClassConfig,
    /// The algorithm's registry name (an alias resolved).
    pub cc: &'static str,
    /// The parameters the algorithm runs with: a preset's overlaid by the class's own.
    pub params: toml::Table,
    /// Builds the algorithm for each flow.
    pub factory: CcFactory,
    /// What an RDMA class's NICs do where the preset's source says.
    pub nic: ClassNic,
    /// The fallback's registry name.
    pub fallback: &'static str,
    /// Builds the fallback for each flow.
    pub fallback_factory: CcFactory,
}

/// Checks every class: a known algorithm with valid parameters (a preset scaled to
/// `line_rate`, the fastest host's), a priority the side has, a known fallback. Classes come
/// back in name order, a scenario's implicit `default` first.
pub fn check(classes: &BTreeMap<String, ClassConfig>, side: Side, line_rate: Rate) -> Result<Vec<CheckedClass>, String> {
    let mut table: Vec<(String, ClassConfig)> = classes.clone().into_iter().collect();
    if matches!(side, Side::Simulator { .. }) && !classes.contains_key("default") {
        let default = ClassConfig {
            cc: DEFAULT_CC.into(),
            params: toml::Table::new(),
            preset: None,
            priority: 0,
            fallback: None,
            matches: None,
            transport: ClassTransport::Tcp,
            spray: false,
        };
        table.insert(0, ("default".into(), default));
    }
    let mut out = Vec::with_capacity(table.len());
    // A host's error offers what a host can run; a scenario's, the whole registry.
    let unknown = |n: &str| if side == Side::Host { cc::unknown_on_host(n) } else { cc::unknown(n) };
    for (name, c) in table {
        let info = cc::lookup(&c.cc).ok_or_else(|| format!("classes.{name}.cc: {}", unknown(&c.cc)))?;
        runs_on(info, c.transport).map_err(|e| format!("classes.{name}.cc: {e}"))?;
        let (params, nic) = match &c.preset {
            None => (c.params.clone(), ClassNic::default()),
            Some(set) => {
                let preset = cc::presets::lookup(info.name, set).map_err(|e| format!("classes.{name}.preset: {e}"))?;
                (cc::presets::overlay(preset.params(line_rate), &c.params), preset.nic)
            }
        };
        let factory = cc::factory(info.name, &params).map_err(|e| format!("classes.{name}.params.{e}"))?;
        match side {
            Side::Simulator { priorities } if c.priority >= priorities => {
                return Err(format!("classes.{name}.priority: {} is not below switch.priorities = {priorities}", c.priority));
            }
            Side::Host if c.priority >= HOST_PRIORITIES => {
                return Err(format!(
                    "classes.{name}.priority: expected 0 (highest) to {}, the socket priorities a host sets; got {}",
                    HOST_PRIORITIES - 1,
                    c.priority
                ));
            }
            Side::Host if c.transport != ClassTransport::Tcp => {
                return Err(format!(
                    "classes.{name}.transport: the host agent selects TCP congestion control; \"{}\" classes run only in the simulator",
                    c.transport.name()
                ));
            }
            Side::Host if c.spray => {
                return Err(format!("classes.{name}.spray: a Linux host keeps each connection on one path; per-packet spraying runs only in the simulator"));
            }
            _ if c.spray && c.transport == ClassTransport::Uet => {
                return Err(format!("classes.{name}.spray: a UET class chooses each packet's path itself (uet.load_balancing_algo); remove spray"));
            }
            _ => {}
        }
        let fallback_name = c.fallback.as_deref().unwrap_or(DEFAULT_CC);
        let fb = cc::lookup(fallback_name).ok_or_else(|| format!("classes.{name}.fallback: {}", unknown(fallback_name)))?;
        match (c.transport, &c.fallback) {
            (ClassTransport::Uet, Some(_)) => {
                return Err(format!("classes.{name}.fallback: a UET connection negotiates nothing, so nothing falls back; remove fallback"));
            }
            (ClassTransport::Uet, None) => {}
            _ => runs_on(fb, c.transport).map_err(|e| format!("classes.{name}.fallback: {e}"))?,
        }
        let fallback_factory = cc::factory(fb.name, &toml::Table::new()).map_err(|e| format!("classes.{name}.fallback: {e}"))?;
        out.push(CheckedClass { name, cc: info.name, params, factory, nic, fallback: fb.name, fallback_factory, config: c });
    }
    Ok(out)
}

/// Refuses an algorithm written for another transport than the class's.
fn runs_on(info: &cc::AlgorithmInfo, transport: ClassTransport) -> Result<(), String> {
    let (set, word) = match transport {
        ClassTransport::Tcp => (Transports::TCP, "tcp"),
        ClassTransport::Rdma => (Transports::RDMA, "rdma"),
        ClassTransport::Uet => (Transports::UET, "uet"),
    };
    if info.transports.has(set) {
        return Ok(());
    }
    if transport == ClassTransport::Uet {
        let uet: Vec<_> = cc::REGISTRY.iter().filter(|a| a.transports.has(Transports::UET)).map(|a| format!("\"{}\"", a.name)).collect();
        let (last, rest) = uet.split_last().expect("UET has algorithms");
        return Err(format!("transport = \"uet\" runs UET's congestion control; expected {} or {last}, got \"{}\"", rest.join(", "), info.name));
    }
    let owner = if info.transports.has(Transports::UET) { ("UET's", "uet") } else { ("TCP and RDMA's", "tcp\" or \"rdma") };
    Err(format!(
        "\"{}\" is {} congestion control and runs only with transport = \"{}\"; this class has transport = \"{word}\"",
        info.name, owner.0, owner.1
    ))
}

/// Refuses an intent name that is none of [`INTENTS`], as `table.<intent>`.
pub fn known_intent(intent: &str, table: &str) -> Result<(), String> {
    if INTENTS.contains(&intent) {
        return Ok(());
    }
    Err(format!(
        "{table}.{intent}: unknown intent; expected latency_sensitive, bulk, target_rate or deadline{}",
        crate::words::did_you_mean(intent, INTENTS)
    ))
}

/// Checks `[policy]` against the classes: each key an intent, each value a class. Returns
/// (intent, class index) pairs.
pub fn check_intents(policy: &BTreeMap<String, String>, classes: &[CheckedClass]) -> Result<Vec<(String, usize)>, String> {
    let names: Vec<&str> = classes.iter().map(|c| c.name.as_str()).collect();
    let mut out = Vec::new();
    for (intent, class) in policy {
        known_intent(intent, "policy")?;
        let c = names.iter().position(|n| n == class).ok_or_else(|| {
            format!(
                "policy.{intent}: unknown class \"{class}\"; defined classes: {}{}",
                names.join(", "),
                crate::words::did_you_mean(class, names.iter().copied())
            )
        })?;
        out.push((intent.clone(), c));
    }
    Ok(out)
}

/// Checks the classes' match rules for `side` and returns (class index, rules) in class order.
/// Two classes whose rules give the same criteria (hosts aside) with a value in common in each
/// would both claim a flow: that is refused, since which one wins would rest on their names.
pub fn check_matches(classes: &[CheckedClass], side: Side) -> Result<Vec<(usize, MatchRules)>, String> {
    let mut out: Vec<(usize, MatchRules)> = Vec::new();
    for (i, c) in classes.iter().enumerate() {
        let Some(m) = &c.config.matches else { continue };
        let name = &c.name;
        match side {
            Side::Simulator { .. } => {
                if m.cgroups.is_some() {
                    return Err(format!("classes.{name}.match.cgroups: cgroups select connections on real hosts (`sluice agent`); in a scenario match by tags, dst_ports or hosts"));
                }
                if m.tags.is_none() && m.dst_ports.is_none() && m.hosts.is_none() {
                    return Err(format!("classes.{name}.match: give at least one of tags, dst_ports, hosts"));
                }
            }
            Side::Host => {
                for (key, given) in [("tags", m.tags.is_some()), ("hosts", m.hosts.is_some())] {
                    if given {
                        return Err(format!("classes.{name}.match.{key}: {key} select a scenario's flows; on a host match by dst_ports or cgroups"));
                    }
                }
                if m.dst_ports.is_none() && m.cgroups.is_none() {
                    return Err(format!("classes.{name}.match: give at least one of dst_ports, cgroups"));
                }
            }
        }
        for (key, empty) in [
            ("tags", m.tags.as_ref().is_some_and(Vec::is_empty)),
            ("dst_ports", m.dst_ports.as_ref().is_some_and(Vec::is_empty)),
            ("hosts", m.hosts.as_ref().is_some_and(Vec::is_empty)),
            ("cgroups", m.cgroups.as_ref().is_some_and(Vec::is_empty)),
        ] {
            if empty {
                return Err(format!("classes.{name}.match.{key}: an empty list matches nothing; remove the key or name at least one"));
            }
        }
        for (j, other) in &out {
            if let Some(why) = overlap(m, other) {
                let first = &classes[*j].name;
                return Err(format!(
                    "classes.{name}.match: overlaps classes.{first}.match ({why}), so a connection could belong to either; make them disjoint or give one another criterion"
                ));
            }
        }
        out.push((i, m.clone()));
    }
    Ok(out)
}

/// Why two rule sets could both claim a flow, if they could: the same criteria given, each with
/// a value in common. Rules that name hosts are left to class order.
fn overlap(a: &MatchRules, b: &MatchRules) -> Option<String> {
    if a.hosts.is_some() || b.hosts.is_some() {
        return None;
    }
    let mut why = Vec::new();
    macro_rules! criterion {
        ($key:ident, $common:expr) => {
            match (&a.$key, &b.$key) {
                (None, None) => {}
                (Some(x), Some(y)) => match $common(x, y) {
                    Some(v) => why.push(format!("{} {v} in both", stringify!($key))),
                    None => return None,
                },
                _ => return None,
            }
        };
    }
    criterion!(tags, |x: &Vec<String>, y: &Vec<String>| x.iter().find(|t| y.contains(t)).map(|t| format!("\"{t}\"")));
    criterion!(dst_ports, |x: &Vec<crate::workload::PortRange>, y: &Vec<crate::workload::PortRange>| {
        x.iter().find_map(|r| y.iter().find(|s| r.overlaps(s)).map(|s| {
            let port = r.first.max(s.first);
            port.to_string()
        }))
    });
    criterion!(cgroups, |x: &Vec<String>, y: &Vec<String>| x.iter().find(|t| y.contains(t)).map(|t| format!("\"{t}\"")));
    (!why.is_empty()).then(|| why.join(", "))
}

/// An `[[events]]` entry: at `at`, class `class`'s parameters change to its own overlaid with
/// `params` (and with every earlier change's). Its flows take them at their next ACK.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassEvent {
    /// When.
    pub at: Time,
    /// The class whose parameters change.
    pub class: String,
    /// The parameters that change.
    pub params: toml::Table,
}

/// Checks `[[events]]` against the classes and returns each class's changes in time order.
pub fn check_events(events: &[ClassEvent], classes: &[CheckedClass], duration: Option<Time>) -> Result<Vec<Vec<ParamChange>>, String> {
    let mut out: Vec<Vec<ParamChange>> = vec![Vec::new(); classes.len()];
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| events[i].at); // stable: same-time changes apply in file order
    for i in order {
        let e = &events[i];
        let names = classes.iter().map(|c| c.name.as_str());
        let Some(k) = classes.iter().position(|c| c.name == e.class) else {
            return Err(format!(
                "events[{i}].class: unknown class \"{}\"; defined classes: {}{}",
                e.class,
                names.clone().collect::<Vec<_>>().join(", "),
                crate::words::did_you_mean(&e.class, names)
            ));
        };
        let c = &classes[k];
        if !cc::portable::PORTABLE.contains(&c.cc) || c.config.transport == ClassTransport::Rdma {
            return Err(format!(
                "events[{i}].class: class {} runs {}, whose parameters are fixed once a flow starts; changes after setup reach TCP classes of the portable algorithms ({})",
                c.name,
                c.cc,
                cc::portable::PORTABLE.join(", ")
            ));
        }
        if c.cc == "newreno" && e.params.contains_key("ecn") {
            return Err(format!("events[{i}].params.ecn: NewReno's ECN is negotiated when a connection opens and cannot change after"));
        }
        if let Some(d) = duration.filter(|d| e.at > *d) {
            return Err(format!("events[{i}].at: {} is after sim.duration = {d}, so the change would never happen", e.at));
        }
        let mut params = out[k].last().map_or_else(|| c.params.clone(), |p| p.params.clone());
        params.extend(e.params.clone());
        let factory = cc::factory(c.cc, &params).map_err(|m| format!("events[{i}].params.{m}"))?;
        out[k].push(ParamChange { at: e.at, params, factory });
    }
    Ok(out)
}
