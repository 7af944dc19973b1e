//! The agent's class table in the kernel. A checked policy (the scenario's class schema,
//! `sluice_sim::scenario::host_policy`) passes the checks only a host can make (the kernel has
//! the algorithm, the cgroups exist, the table's sizes), becomes `struct sluice_class` slots
//! (bpf/tcp_int.h) in the half of the pinned table not in use, and takes effect with one write of
//! the generation. Each class keeps an id while its name stays in the policy, so the per-class
//! connection counters survive reloads and agent restarts.

use crate::pins::{open_pinned as pinned, percpu_range_sums};
use crate::cc;
use crate::sys;
use anyhow::Result;
use libbpf_rs::{MapCore, MapFlags};
use sluice_platform::applied::{applied, digest, now_unix, record, Applied, AppliedClass, AppliedIntent, ClassCounts};
use sluice_platform::fleet::Report;
use sluice_sim::cc::negotiation::{Negotiation, Offer};
use sluice_sim::cc::portable::KERNEL_BUILT_IN;
use sluice_sim::scenario::classes::INTENTS;
use sluice_sim::scenario::host_policy::CheckedPolicy;
use sluice_sim::scenario::ScenarioError;
use std::path::{Path, PathBuf};

/// Slots in one half of the table (`SLUICE_CLASSES`).
pub const SLOTS: usize = 32;
/// Port ranges one class may match (`SLUICE_CLASS_PORTS`).
pub const PORTS: usize = 8;
/// Cgroups one class may match (`SLUICE_CLASS_CGROUPS`).
pub const CGROUPS: usize = 4;
/// Class ids, 1 to IDS - 1 (`SLUICE_CLASS_IDS`).
pub const IDS: u32 = 256;
/// Counters per class id (`CLASS_NCOUNTERS`): opened, closed, algorithm refused, clients per
/// negotiation outcome (`Negotiation::ALL`'s order), malformed answers.
const NCOUNTERS: u32 = 3 + Negotiation::ALL.len() as u32 + 1;
/// Size of `struct sluice_class`.
const SLOT_BYTES: usize = 128;
/// Size of `struct scc_class_params`: the algorithm's id, padding, 56 bytes of parameters.
const PARAMS_BYTES: usize = 64;
/// Size of `struct sluice_intent_rule`.
const INTENT_RULE_BYTES: usize = 40;
/// Outcomes of a declaration (`enum intent_counter`), as status names them.
pub const INTENT_OUTCOMES: [&str; 4] = ["accepted", "not_permitted", "not_mapped", "late"];


/// A class ready for the kernel.
#[derive(Clone, Debug, PartialEq)]
struct Slot {
    class: AppliedClass,
    ports: Vec<(u16, u16)>,
    cgroup_ids: Vec<u64>,
    /// The C parameters of a portable algorithm.
    params: Option<Vec<u8>>,
    /// What the algorithm needs of the peer and the path (`Caps::WANTS_*`), proposed on the SYN.
    offer: u8,
    /// No rule matches the class: only an intent's declaration joins it.
    intent_only: bool,
}

/// An intent ready for the kernel.
#[derive(Clone, Debug, PartialEq)]
struct IntentRule {
    applied: AppliedIntent,
    /// The class's slot, plus one.
    class_key: u32,
    cgroup_ids: Vec<u64>,
}

/// What a policy becomes in the kernel.
struct Plan {
    slots: Vec<Slot>,
    /// Indexed by intent number less one (`INTENTS`' order).
    intents: Vec<Option<IntentRule>>,
    unmatched: Vec<String>,
    next_id: u32,
}

/// What a class's algorithm needs of the peer and the path, asked of the simulator's build of it
/// as the simulator's own flows ask it.
fn offer_of(c: &sluice_sim::scenario::classes::CheckedClass) -> u8 {
    use sluice_sim::cc::FlowContext;
    use sluice_sim::time::{Rate, Time};
    let ctx = FlowContext { mss: 1448, init_cwnd: 14_480, link_rate: Rate::gbps(10), base_rtt: Time::from_us(10), size: None, deadline: None, uet: None };
    Offer::of((c.factory)(&ctx).as_ref(), true).wants()
}

/// The checks only a host can make, and the slots in the order the kernel tries them: classes
/// with ports and cgroups, ports alone, cgroups alone, then `default`. `cgroup_root` anchors
/// relative cgroup paths; `kernel` lists the algorithms the kernel offers besides the agent's.
fn plan(p: &CheckedPolicy, cgroup_root: &Path, kernel: &[String], previous: Option<&Applied>) -> Result<Plan, ScenarioError> {
    // A cgroup given relative to the root, checked to exist, and its id; `key` names it in errors.
    let cgroup = |g: &str, key: String| -> Result<(PathBuf, u64), ScenarioError> {
        let path = if Path::new(g).is_absolute() { PathBuf::from(g) } else { cgroup_root.join(g) };
        if !path.is_dir() {
            return Err(p.error_at(format!(
                "{key}: no cgroup {}; expected a cgroup v2 directory, absolute or relative to {}",
                path.display(),
                cgroup_root.display()
            )));
        }
        let id = sys::cgroup_id(&path).map_err(|e| p.error_at(format!("{key}: {e:#}")))?;
        Ok((path, id))
    };
    let runs = |name: &str| cc::ALGORITHMS.contains(&name) || (KERNEL_BUILT_IN.contains(&name) && kernel.iter().any(|k| k == name));
    let host_names = || {
        let mut v: Vec<&str> = cc::ALGORITHMS.to_vec();
        v.extend(KERNEL_BUILT_IN.iter().filter(|n| kernel.iter().any(|k| k == *n)));
        v.join(", ")
    };
    let mut slots: Vec<(u8, Slot)> = Vec::new();
    let mut unmatched = Vec::new();
    let mut ids_taken: Vec<u32> = Vec::new();
    let mut next_id = previous.map_or(1, |a| a.next_id.max(1));
    // `reno` is Linux's own Reno where the kernel has it (in the simulator, an alias of NewReno);
    // `newreno` is sluice's portable one.
    let kernel_name = |written: Option<&str>, registry: &'static str| -> &'static str {
        if written == Some("reno") && kernel.iter().any(|k| k == "reno") {
            "reno"
        } else {
            registry
        }
    };
    for (i, c) in p.classes.iter().enumerate() {
        let name = &c.name;
        let cc_name = kernel_name(Some(&c.config.cc), c.cc);
        let fallback = kernel_name(c.config.fallback.as_deref(), c.fallback);
        for (key, alg) in [("cc", cc_name), ("fallback", fallback)] {
            if !runs(alg) {
                return Err(p.error_at(format!(
                    "classes.{name}.{key}: {alg} runs only in the simulator; on this host the algorithms are {}",
                    host_names()
                )));
            }
        }
        // The portable algorithms read their class's parameters; the kernel's own have none to read.
        let params = if cc::ALGORITHMS.contains(&cc_name) {
            Some(sluice_sim::cc::portable::c_params(c.cc, &c.params).map_err(|e| p.error_at(format!("classes.{name}.params.{e}")))?)
        } else if !c.config.params.is_empty() {
            return Err(p.error_at(format!(
                "classes.{name}.params: the kernel's own {} takes no parameters from a policy; sluice's portable algorithms ({}) do",
                cc_name,
                cc::ALGORITHMS.join(", ")
            )));
        } else {
            None
        };
        let rules = p.matches.iter().find(|(j, _)| *j == i).map(|(_, m)| m);
        let intent_only = rules.is_none() && name != "default";
        if intent_only && !p.intents.iter().any(|(_, c)| *c == i) {
            unmatched.push(name.clone());
            continue;
        }
        let ports: Vec<(u16, u16)> = rules.and_then(|m| m.dst_ports.as_ref()).map_or(vec![], |v| v.iter().map(|r| (r.first, r.last)).collect());
        if ports.len() > PORTS {
            return Err(p.error_at(format!("classes.{name}.match.dst_ports: {} ranges; a class matches at most {PORTS} (merge neighbouring ports into ranges like \"5200-5299\")", ports.len())));
        }
        let cgroups: Vec<String> = rules.and_then(|m| m.cgroups.clone()).unwrap_or_default();
        if cgroups.len() > CGROUPS {
            return Err(p.error_at(format!("classes.{name}.match.cgroups: {} cgroups; a class matches at most {CGROUPS}", cgroups.len())));
        }
        let mut paths = Vec::new();
        let mut cgroup_ids = Vec::new();
        for (k, g) in cgroups.iter().enumerate() {
            let (path, id) = cgroup(g, format!("classes.{name}.match.cgroups[{k}]"))?;
            cgroup_ids.push(id);
            paths.push(path);
        }
        let id = match previous.and_then(|a| a.classes.iter().find(|c| &c.name == name)) {
            Some(old) => old.id,
            None => {
                let in_use = |id: u32| ids_taken.contains(&id) || previous.is_some_and(|a| a.classes.iter().any(|c| c.id == id && p.classes.iter().any(|n| n.name == c.name)));
                let mut id = next_id;
                while id == 0 || id >= IDS || in_use(id) {
                    id = if id + 1 >= IDS { 1 } else { id + 1 };
                }
                next_id = if id + 1 >= IDS { 1 } else { id + 1 };
                id
            }
        };
        ids_taken.push(id);
        let order = match (ports.is_empty(), cgroup_ids.is_empty(), intent_only) {
            (_, _, true) => 4,
            (false, false, _) => 0,
            (false, true, _) => 1,
            (true, false, _) => 2,
            (true, true, _) => 3,
        };
        let class = AppliedClass {
            name: name.clone(),
            id,
            cc: cc_name.to_string(),
            priority: c.config.priority,
            fallback: fallback.to_string(),
            params: c.config.params.clone(),
            dst_ports: rules.and_then(|m| m.dst_ports.as_ref()).map_or(vec![], |v| v.iter().map(|r| r.to_string()).collect()),
            cgroups: paths,
        };
        slots.push((order, Slot { offer: offer_of(c), intent_only, class, ports, cgroup_ids, params }));
    }
    if slots.len() > SLOTS {
        return Err(p.error_at(format!("classes: {} classes; the kernel's table holds {SLOTS}", slots.len())));
    }
    // Stable: within one kind of rule the classes keep name order (they do not overlap).
    slots.sort_by_key(|(order, _)| *order);
    let slots: Vec<Slot> = slots.into_iter().map(|(_, s)| s).collect();
    let mut intents = vec![None; INTENTS.len()];
    for (intent, c) in &p.intents {
        let class = &p.classes[*c].name;
        let given = p.policy.permits.get(intent).map(Vec::as_slice).unwrap_or_default();
        if given.len() > CGROUPS {
            return Err(p.error_at(format!("permits.{intent}: {} cgroups; an intent may be claimed from at most {CGROUPS}", given.len())));
        }
        let mut cgroups = Vec::new();
        let mut cgroup_ids = Vec::new();
        for (k, g) in given.iter().enumerate() {
            let (path, id) = cgroup(g, format!("permits.{intent}[{k}]"))?;
            cgroups.push(path);
            cgroup_ids.push(id);
        }
        let slot = slots.iter().position(|s| &s.class.name == class).expect("a class an intent names has a slot");
        let at = INTENTS.iter().position(|i| i == intent).expect("a checked intent");
        intents[at] = Some(IntentRule {
            applied: AppliedIntent { intent: intent.clone(), class: class.clone(), cgroups },
            class_key: slot as u32 + 1,
            cgroup_ids,
        });
    }
    Ok(Plan { slots, intents, unmatched, next_id })
}

/// `struct sluice_intent_rule` of an intent, or of one the policy does not map.
fn intent_bytes(r: Option<&IntentRule>) -> Vec<u8> {
    let mut b = vec![0u8; INTENT_RULE_BYTES];
    let Some(r) = r else { return b };
    b[0..4].copy_from_slice(&r.class_key.to_ne_bytes());
    b[4..8].copy_from_slice(&(r.cgroup_ids.len() as u32).to_ne_bytes());
    for (j, id) in r.cgroup_ids.iter().enumerate() {
        b[8 + 8 * j..16 + 8 * j].copy_from_slice(&id.to_ne_bytes());
    }
    b
}

/// `struct sluice_class` of a slot, or of an empty one.
fn slot_bytes(s: Option<&Slot>) -> Vec<u8> {
    let mut b = vec![0u8; SLOT_BYTES];
    let Some(s) = s else { return b };
    let name = s.class.cc.as_bytes();
    b[..name.len().min(15)].copy_from_slice(&name[..name.len().min(15)]);
    let mut put32 = |at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    put32(16, if s.intent_only { 2 } else { 1 });
    put32(20, s.class.id);
    put32(24, s.class.priority as u32);
    put32(28, s.ports.len() as u32);
    put32(32, s.cgroup_ids.len() as u32);
    for (j, (first, last)) in s.ports.iter().enumerate() {
        b[36 + 2 * j..38 + 2 * j].copy_from_slice(&first.to_ne_bytes());
        b[52 + 2 * j..54 + 2 * j].copy_from_slice(&last.to_ne_bytes());
    }
    for (j, id) in s.cgroup_ids.iter().enumerate() {
        b[72 + 8 * j..80 + 8 * j].copy_from_slice(&id.to_ne_bytes());
    }
    let fallback = s.class.fallback.as_bytes();
    b[104..104 + fallback.len().min(15)].copy_from_slice(&fallback[..fallback.len().min(15)]);
    b[120..124].copy_from_slice(&(s.offer as u32).to_ne_bytes());
    b
}

/// Checks a policy on this host, without applying it; the errors name the file, line and key.
pub fn check(p: &CheckedPolicy) -> Result<(), ScenarioError> {
    let kernel = cc::available().unwrap_or_default();
    plan(p, Path::new(sys::CGROUP2_ROOT), &kernel, applied().ok().flatten().as_ref()).map(|_| ())
}

/// Puts a checked policy in force: the slots go to the half of the table not in use, then the
/// generation names that half. Connections already open keep their algorithm. Returns what was
/// applied, also recorded for `status`.
pub fn apply(p: &CheckedPolicy, file: &str) -> Result<std::result::Result<Applied, ScenarioError>> {
    sys::require_root("applying a policy")?;
    let previous = applied()?;
    let kernel = cc::available()?;
    let Plan { slots, intents, unmatched, next_id } = match plan(p, Path::new(sys::CGROUP2_ROOT), &kernel, previous.as_ref()) {
        Ok(x) => x,
        Err(e) => return Ok(Err(e)),
    };
    let table = pinned("sluice_classes")?;
    let gen_map = pinned("class_generation")?;
    let counters = pinned("class_counters")?;
    // Parameters first: a connection the new table puts in a class finds them in place. Open
    // connections of a class whose parameters changed read the new ones at their next ACK.
    let class_params = pinned("class_params")?;
    for s in &slots {
        let mut b = vec![0u8; PARAMS_BYTES];
        if let Some(p) = &s.params {
            let alg = cc::ALGORITHMS.iter().position(|a| *a == s.class.cc).map_or(0, |i| i as u32 + 1);
            b[..4].copy_from_slice(&alg.to_ne_bytes());
            b[8..8 + p.len()].copy_from_slice(p);
        }
        class_params.update(&s.class.id.to_ne_bytes(), &b, MapFlags::ANY)?;
    }
    let zero = 0u32.to_ne_bytes();
    let gen = gen_map.lookup(&zero, MapFlags::ANY)?.map_or(0, |v| u32::from_ne_bytes(v[..4].try_into().unwrap()));
    let next = gen.wrapping_add(1);
    let base = (next & 1) * SLOTS as u32;
    for i in 0..SLOTS {
        table.update(&(base + i as u32).to_ne_bytes(), &slot_bytes(slots.get(i)), MapFlags::ANY)?;
    }
    let intent_table = pinned("sluice_intents")?;
    let intent_base = (next & 1) * INTENTS.len() as u32;
    for (i, r) in intents.iter().enumerate() {
        intent_table.update(&(intent_base + i as u32).to_ne_bytes(), &intent_bytes(r.as_ref()), MapFlags::ANY)?;
    }
    // A new class starts from zero, also where its id served a class removed earlier.
    let cpus = libbpf_rs::num_possible_cpus()?;
    for s in &slots {
        if !previous.as_ref().is_some_and(|a| a.classes.iter().any(|c| c.id == s.class.id)) {
            for k in 0..NCOUNTERS {
                counters.update_percpu(&(s.class.id * NCOUNTERS + k).to_ne_bytes(), &vec![vec![0u8; 8]; cpus], MapFlags::ANY)?;
            }
        }
    }
    gen_map.update(&zero, &next.to_ne_bytes(), MapFlags::ANY)?;
    let a = Applied {
        file: file.to_string(),
        version: p.policy.version,
        digest: digest(p.text()),
        generation: next,
        applied_unix: now_unix(),
        classes: slots.into_iter().map(|s| s.class).collect(),
        unmatched,
        refused: None,
        next_id,
        intents: intents.into_iter().flatten().map(|r| r.applied).collect(),
    };
    record(&a)?;
    Ok(Ok(a))
}

/// The counts of class `id`.
pub fn counts(id: u32) -> Result<ClassCounts> {
    let sums = percpu_range_sums(&pinned("class_counters")?, id * NCOUNTERS..(id + 1) * NCOUNTERS)?;
    let n = Negotiation::ALL.len();
    Ok(ClassCounts { opened: sums[0], closed: sums[1], cc_failed: sums[2], negotiated: sums[3..3 + n].try_into().unwrap(), malformed: sums[3 + n] })
}

/// Declarations of intent number `intent` (0: requests naming none) per outcome
/// (`INTENT_OUTCOMES`' order).
pub fn intent_counts(intent: u32) -> Result<[u64; 4]> {
    let n = INTENT_OUTCOMES.len() as u32;
    let sums = percpu_range_sums(&pinned("intent_counters")?, intent * n..(intent + 1) * n)?;
    Ok(sums.try_into().expect("one sum per outcome"))
}

/// The number of an intent (`INTENTS`' order, from 1), as `include/sluice/intent.h` has it.
fn intent_number(intent: &str) -> u32 {
    INTENTS.iter().position(|i| *i == intent).map_or(0, |i| i as u32 + 1)
}

/// The policy in force as Prometheus metrics, for `sluice host export`: its generation and
/// version, and each class's connections.
pub fn prometheus_text() -> Result<String> {
    let Some(a) = applied()? else { return Ok(String::new()) };
    let counts = a.classes.iter().map(|c| counts(c.id)).collect::<Result<Vec<_>>>()?;
    let declared = a.intents.iter().map(|i| intent_counts(intent_number(&i.intent))).collect::<Result<Vec<_>>>()?;
    let mut s = metrics(&a, &counts, &declared);
    if let Some(r) = sluice_platform::fleet::figures() {
        s.push_str(&fleet_metrics(&r));
    }
    Ok(s)
}

/// An agent's fleet figures: the version it runs and the latest it saw, for `sluice admin
/// status`'s view from each host.
fn fleet_metrics(r: &Report) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let seen = r.seen_version.or(r.version).unwrap_or(0);
    let figures = [
        ("sluice_fleet_version", "The fleet policy version in force on this host.", r.version.unwrap_or(0)),
        ("sluice_fleet_seen_version", "The latest fleet policy version this host saw in etcd.", seen),
        ("sluice_fleet_lag_versions", "Versions seen but not in force.", seen.saturating_sub(r.version.unwrap_or(0))),
        ("sluice_fleet_refused_version", "The last version this host refused (0: none).", r.refused.as_ref().map_or(0, |(v, _)| *v)),
        ("sluice_fleet_report_timestamp_seconds", "When the agent last wrote its report.", r.reported_unix_ms / 1000),
    ];
    for (name, help, v) in figures {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
    }
    let name = "sluice_fleet_failing";
    let _ = writeln!(s, "# HELP {name} Whether the agent cannot watch the policy or write its report (its log and `sluice agent status` say why).\n# TYPE {name} gauge");
    for (what, e) in [("watch", &r.watch_error), ("report", &r.report_error)] {
        let _ = writeln!(s, "{name}{{what=\"{what}\"}} {}", u8::from(e.is_some()));
    }
    s
}

/// [`prometheus_text`] of a policy, its classes' counts and its intents' declarations.
fn metrics(a: &Applied, counts: &[ClassCounts], declared: &[[u64; 4]]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "# HELP sluice_policy_generation The agent's generation of the policy in force.\n# TYPE sluice_policy_generation gauge");
    let _ = writeln!(s, "sluice_policy_generation {}", a.generation);
    if let Some(v) = a.version {
        let _ = writeln!(s, "# HELP sluice_policy_version The operator's version of the policy in force.\n# TYPE sluice_policy_version gauge");
        let _ = writeln!(s, "sluice_policy_version {v}");
    }
    let _ = writeln!(s, "# HELP sluice_policy_refused Whether the last policy read was refused (the one in force stays).\n# TYPE sluice_policy_refused gauge");
    let _ = writeln!(s, "sluice_policy_refused {}", u8::from(a.refused.is_some()));
    type Figure = (&'static str, &'static str, &'static str, fn(&ClassCounts) -> u64);
    let figures: [Figure; 3] = [
        ("sluice_class_connections_open", "gauge", "Connections of the class open now.", ClassCounts::open),
        ("sluice_class_connections_total", "counter", "Connections the class took.", |n| n.opened),
        ("sluice_class_cc_failures_total", "counter", "Connections whose algorithm the kernel refused.", |n| n.cc_failed),
    ];
    for (name, kind, help, f) in figures {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (c, n) in a.classes.iter().zip(counts) {
            let _ = writeln!(s, "{name}{{class=\"{}\",cc=\"{}\"}} {}", c.name, c.cc, f(n));
        }
    }
    let name = "sluice_class_negotiations_total";
    let _ = writeln!(s, "# HELP {name} The class's clients by how negotiation ended (accepted, or the reason for the fallback).\n# TYPE {name} counter");
    for (c, n) in a.classes.iter().zip(counts) {
        for (outcome, k) in Negotiation::ALL.iter().zip(n.negotiated) {
            let _ = writeln!(s, "{name}{{class=\"{}\",cc=\"{}\",outcome=\"{}\"}} {k}", c.name, c.cc, outcome.label());
        }
    }
    let name = "sluice_class_negotiation_malformed_total";
    let _ = writeln!(s, "# HELP {name} Malformed negotiation answers the class's clients ignored.\n# TYPE {name} counter");
    for (c, n) in a.classes.iter().zip(counts) {
        let _ = writeln!(s, "{name}{{class=\"{}\",cc=\"{}\"}} {}", c.name, c.cc, n.malformed);
    }
    if !a.intents.is_empty() {
        let name = "sluice_intent_declarations_total";
        let _ = writeln!(s, "# HELP {name} Applications' declarations of the intent, by outcome.\n# TYPE {name} counter");
        for (i, k) in a.intents.iter().zip(declared) {
            for (outcome, n) in INTENT_OUTCOMES.iter().zip(k) {
                let _ = writeln!(s, "{name}{{intent=\"{}\",class=\"{}\",outcome=\"{outcome}\"}} {n}", i.intent, i.class);
            }
        }
    }
    s
}

/// The policy part of `sluice agent status` and `sluice host status`.
pub fn status_text() -> Result<String> {
    use std::fmt::Write;
    let mut s = String::new();
    let Some(a) = applied()? else {
        return Ok("policy: none applied (start `sluice agent --policy FILE`)\n".into());
    };
    let version = a.version.map_or("none".to_string(), |v| v.to_string());
    writeln!(s, "policy: {} version {version} (generation {}, digest {}), applied {}s ago", a.file, a.generation, a.digest, now_unix().saturating_sub(a.applied_unix))?;
    writeln!(s, "  {:<16} {:>3} {:<10} {:<10} {:>4} {:>7} {:>7} {:>6}  match", "class", "id", "cc", "fallback", "prio", "open", "opened", "failed")?;
    for c in &a.classes {
        let n = counts(c.id)?;
        let mut rules = Vec::new();
        if !c.dst_ports.is_empty() {
            rules.push(format!("dst_ports {}", c.dst_ports.join(",")));
        }
        if !c.cgroups.is_empty() {
            rules.push(format!("cgroups {}", c.cgroups.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(",")));
        }
        let rules = if rules.is_empty() { "every other connection".to_string() } else { rules.join("; ") };
        writeln!(s, "  {:<16} {:>3} {:<10} {:<10} {:>4} {:>7} {:>7} {:>6}  {rules}", c.name, c.id, c.cc, c.fallback, c.priority, n.open(), n.opened, n.cc_failed)?;
        if !c.params.is_empty() {
            let params: Vec<String> = c.params.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            writeln!(s, "  {:<16} params {}", "", params.join(", "))?;
        }
        let mut outcomes: Vec<String> =
            Negotiation::ALL.iter().zip(n.negotiated).filter(|(_, k)| *k > 0).map(|(o, k)| format!("{} {k}", o.label())).collect();
        if n.malformed > 0 {
            outcomes.push(format!("malformed answers {}", n.malformed));
        }
        if !outcomes.is_empty() {
            writeln!(s, "  {:<16} negotiated {}", "", outcomes.join(", "))?;
        }
    }
    for i in &a.intents {
        let k = intent_counts(intent_number(&i.intent))?;
        let who: Vec<String> = i.cgroups.iter().map(|p| p.display().to_string()).collect();
        let outcomes: Vec<String> = INTENT_OUTCOMES.iter().zip(k).map(|(o, n)| format!("{o} {n}")).collect();
        writeln!(s, "  intent {} -> class {} (claimed from {}): {}", i.intent, i.class, who.join(", "), outcomes.join(", "))?;
    }
    for u in &a.unmatched {
        writeln!(s, "  warning: class {u} has no match rules, no intent names it and it is not default: no connection joins it")?;
    }
    if let Some(r) = &a.refused {
        writeln!(s, "  refused {}s ago (the policy above stays in force):", now_unix().saturating_sub(r.at_unix))?;
        for e in &r.errors {
            writeln!(s, "    {e}")?;
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_name_each_class_and_its_algorithm() {
        let class = |name: &str, id, cc: &str| AppliedClass {
            name: name.into(),
            id,
            cc: cc.into(),
            priority: 0,
            fallback: "cubic".into(),
            params: toml::Table::new(),
            dst_ports: vec![],
            cgroups: vec![],
        };
        let a = Applied { version: Some(7), generation: 3, classes: vec![class("bulk", 1, "dctcp"), class("default", 2, "cubic")], ..Applied::default() };
        let mut negotiated = [0; Negotiation::ALL.len()];
        negotiated[Negotiation::PeerSilent as usize] = 3;
        let counts = [
            ClassCounts { opened: 10, closed: 4, cc_failed: 1, negotiated, malformed: 2 },
            ClassCounts { opened: 2, closed: 2, ..ClassCounts::default() },
        ];
        let m = metrics(&a, &counts, &[]);
        for line in [
            "sluice_policy_generation 3",
            "sluice_policy_version 7",
            "sluice_policy_refused 0",
            "sluice_class_connections_open{class=\"bulk\",cc=\"dctcp\"} 6",
            "sluice_class_connections_total{class=\"bulk\",cc=\"dctcp\"} 10",
            "sluice_class_cc_failures_total{class=\"bulk\",cc=\"dctcp\"} 1",
            "sluice_class_connections_open{class=\"default\",cc=\"cubic\"} 0",
            "# TYPE sluice_class_connections_total counter",
            "sluice_class_negotiations_total{class=\"bulk\",cc=\"dctcp\",outcome=\"fallback_peer_silent\"} 3",
            "sluice_class_negotiations_total{class=\"bulk\",cc=\"dctcp\",outcome=\"accepted\"} 0",
            "sluice_class_negotiation_malformed_total{class=\"bulk\",cc=\"dctcp\"} 2",
        ] {
            assert!(m.lines().any(|l| l == line), "missing {line:?} in\n{m}");
        }
    }

    #[test]
    fn the_fleet_dashboard_reads_only_metrics_the_agent_exports() {
        let a = Applied { classes: vec![], ..Applied::default() };
        let r = Report {
            version: Some(3),
            seen_version: Some(4),
            refused: Some((4, vec![])),
            report_error: Some("etcd: user name is empty".into()),
            ..Default::default()
        };
        let exported = format!("{}{}# TYPE sluice_agent_total counter\n", metrics(&a, &[], &[]), fleet_metrics(&r));
        assert!(exported.contains("sluice_fleet_lag_versions 1"), "{exported}");
        assert!(exported.contains("sluice_fleet_failing{what=\"report\"} 1\n") && exported.contains("sluice_fleet_failing{what=\"watch\"} 0\n"), "{exported}");
        let names: Vec<&str> = exported.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.split(' ').next()).collect();
        let dashboard = include_str!("../../../docs/grafana/sluice-fleet.json");
        let mut used = 0;
        for (i, _) in dashboard.match_indices("sluice_") {
            let name: String = dashboard[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            assert!(names.contains(&name.as_str()), "the dashboard reads {name}, which no agent exports: {names:?}");
            used += 1;
        }
        assert!(used >= 9, "the dashboard's queries name {used} metrics");
    }
}
