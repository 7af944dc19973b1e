//! A host policy's plan: the checks only a host can make (the algorithm runs here, the cgroups
//! exist, the kernel's table holds the classes) and the slots the class table will hold, in the
//! order the kernel tries them. Nothing here touches the kernel: `sluice-host`'s class table
//! writes a plan as it is, and decides nothing. Each class keeps its id while its name stays in
//! the policy, so the per-class connection counters survive reloads and agent restarts.

use crate::applied::{Applied, AppliedClass, AppliedIntent};
use sluice_sim::cc::negotiation::Offer;
use sluice_sim::cc::portable::{KERNEL_BUILT_IN, PORTABLE};
use sluice_sim::scenario::classes::{CheckedClass, INTENTS};
use sluice_sim::scenario::host_policy::CheckedPolicy;
use sluice_sim::scenario::ScenarioError;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Slots in one half of the table (`SLUICE_CLASSES` in bpf/tcp_int.h).
pub const SLOTS: usize = 32;
/// Port ranges one class may match (`SLUICE_CLASS_PORTS`).
pub const PORTS: usize = 8;
/// Cgroups one class may match (`SLUICE_CLASS_CGROUPS`).
pub const CGROUPS: usize = 4;
/// Class ids, 1 to IDS - 1 (`SLUICE_CLASS_IDS`).
pub const IDS: u32 = 256;

/// A class ready for the kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Slot {
    /// The class as the agent records it.
    pub class: AppliedClass,
    /// Destination port ranges, first and last.
    pub ports: Vec<(u16, u16)>,
    /// The cgroups' ids, as `bpf_get_current_cgroup_id` sees them.
    pub cgroup_ids: Vec<u64>,
    /// The C parameters of a portable algorithm.
    pub params: Option<Vec<u8>>,
    /// What the algorithm needs of the peer and the path (`Caps::WANTS_*`), proposed on the SYN.
    pub offer: u8,
    /// No rule matches the class: only an intent's declaration joins it.
    pub intent_only: bool,
}

/// An intent ready for the kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct IntentRule {
    /// The intent as the agent records it.
    pub applied: AppliedIntent,
    /// The class's slot, plus one.
    pub class_key: u32,
    /// The ids of the cgroups that may claim it.
    pub cgroup_ids: Vec<u64>,
}

/// What a policy becomes in the kernel.
#[derive(Debug)]
pub struct Plan {
    /// The classes, in the order the kernel tries them.
    pub slots: Vec<Slot>,
    /// Indexed by intent number less one (`INTENTS`' order).
    pub intents: Vec<Option<IntentRule>>,
    /// Classes no connection can join.
    pub unmatched: Vec<String>,
    /// The id the next new class gets.
    pub next_id: u32,
}

/// What the host offers a plan: where relative cgroup paths start, and the algorithms the kernel
/// has besides sluice's portable ones (`tcp_available_congestion_control`).
pub struct Host<'a> {
    /// The cgroup v2 root relative paths are under.
    pub cgroup_root: &'a Path,
    /// The kernel's algorithms.
    pub kernel: &'a [String],
}

/// The cgroup v2 id of a cgroup directory (its inode number), as bpf_get_current_cgroup_id sees it.
pub fn cgroup_id(path: &Path) -> std::io::Result<u64> {
    Ok(std::fs::metadata(path)?.ino())
}

/// What a class's algorithm needs of the peer and the path, asked of the simulator's build of it
/// as the simulator's own flows ask it.
fn offer_of(c: &CheckedClass) -> u8 {
    use sluice_sim::cc::FlowContext;
    use sluice_sim::time::{Rate, Time};
    let ctx = FlowContext { mss: 1448, init_cwnd: 14_480, link_rate: Rate::gbps(10), base_rtt: Time::from_us(10), size: None, deadline: None, uet: None, stack: sluice_sim::transport::tcp::Stack::Linux };
    Offer::of((c.factory)(&ctx).as_ref(), true).wants()
}

impl Host<'_> {
    /// A cgroup given relative to the root, checked to exist, and its id; `key` names it in errors.
    fn cgroup(&self, p: &CheckedPolicy, g: &str, key: String) -> Result<(PathBuf, u64), ScenarioError> {
        let path = if Path::new(g).is_absolute() { PathBuf::from(g) } else { self.cgroup_root.join(g) };
        if !path.is_dir() {
            return Err(p.error_at(format!(
                "{key}: no cgroup {}; expected a cgroup v2 directory, absolute or relative to {}",
                path.display(),
                self.cgroup_root.display()
            )));
        }
        let id = cgroup_id(&path).map_err(|e| p.error_at(format!("{key}: reading cgroup {}: {e}", path.display())))?;
        Ok((path, id))
    }

    /// Whether an algorithm runs here: sluice's portable ones always (the agent registers them),
    /// the kernel's own where it has them.
    fn runs(&self, name: &str) -> bool {
        PORTABLE.contains(&name) || (KERNEL_BUILT_IN.contains(&name) && self.kernel.iter().any(|k| k == name))
    }

    /// The algorithms that run here, for errors.
    fn names(&self) -> String {
        let mut v: Vec<&str> = PORTABLE.to_vec();
        v.extend(KERNEL_BUILT_IN.iter().filter(|n| self.kernel.iter().any(|k| k == *n)));
        v.join(", ")
    }

    /// The kernel name a class's algorithm runs under: `reno` is Linux's own Reno where the
    /// kernel has it (in the simulator, an alias of NewReno); `newreno` is sluice's portable one.
    fn kernel_name(&self, written: Option<&str>, registry: &'static str) -> &'static str {
        if written == Some("reno") && self.kernel.iter().any(|k| k == "reno") {
            "reno"
        } else {
            registry
        }
    }
}

/// Class ids: a class keeps the id it had in `previous`; a new one takes the next free id.
struct Ids<'a> {
    previous: Option<&'a Applied>,
    taken: Vec<u32>,
    next: u32,
}

impl Ids<'_> {
    /// The id of class `name` of policy `p`.
    fn of(&mut self, p: &CheckedPolicy, name: &str) -> u32 {
        let id = match self.previous.and_then(|a| a.classes.iter().find(|c| c.name == name)) {
            Some(old) => old.id,
            None => {
                let previous = self.previous;
                let in_use = |taken: &[u32], id: u32| {
                    taken.contains(&id) || previous.is_some_and(|a| a.classes.iter().any(|c| c.id == id && p.classes.iter().any(|n| n.name == c.name)))
                };
                let mut id = self.next;
                while id == 0 || id >= IDS || in_use(&self.taken, id) {
                    id = if id + 1 >= IDS { 1 } else { id + 1 };
                }
                self.next = if id + 1 >= IDS { 1 } else { id + 1 };
                id
            }
        };
        self.taken.push(id);
        id
    }
}

/// The checks only a host can make, and the slots in the order the kernel tries them: classes
/// with ports and cgroups, ports alone, cgroups alone, then `default`, then those only an intent
/// joins. `previous` is the policy in force, whose class ids carry over.
pub fn plan(p: &CheckedPolicy, host: &Host, previous: Option<&Applied>) -> Result<Plan, ScenarioError> {
    let mut ids = Ids { previous, taken: Vec::new(), next: previous.map_or(1, |a| a.next_id.max(1)) };
    let mut slots: Vec<(u8, Slot)> = Vec::new();
    let mut unmatched = Vec::new();
    for (i, c) in p.classes.iter().enumerate() {
        match slot(p, host, i, c, &mut ids)? {
            Some(s) => slots.push(s),
            None => unmatched.push(c.name.clone()),
        }
    }
    if slots.len() > SLOTS {
        return Err(p.error_at(format!("classes: {} classes; the kernel's table holds {SLOTS}", slots.len())));
    }
    // Stable: within one kind of rule the classes keep name order (they do not overlap).
    slots.sort_by_key(|(order, _)| *order);
    let slots: Vec<Slot> = slots.into_iter().map(|(_, s)| s).collect();
    let intents = intent_rules(p, host, &slots)?;
    Ok(Plan { slots, intents, unmatched, next_id: ids.next })
}

/// Class `i`'s slot with the rank of its kind of rule, or `None` when no connection can join it.
fn slot(p: &CheckedPolicy, host: &Host, i: usize, c: &CheckedClass, ids: &mut Ids) -> Result<Option<(u8, Slot)>, ScenarioError> {
    let name = &c.name;
    let cc_name = host.kernel_name(Some(&c.config.cc), c.cc);
    let fallback = host.kernel_name(c.config.fallback.as_deref(), c.fallback);
    for (key, alg) in [("cc", cc_name), ("fallback", fallback)] {
        if !host.runs(alg) {
            return Err(p.error_at(format!("classes.{name}.{key}: {alg} runs only in the simulator; on this host the algorithms are {}", host.names())));
        }
    }
    // The portable algorithms read their class's parameters; the kernel's own have none to read.
    let params = if PORTABLE.contains(&cc_name) {
        Some(sluice_sim::cc::portable::c_params(c.cc, &c.params).map_err(|e| p.error_at(format!("classes.{name}.params.{e}")))?)
    } else if !c.config.params.is_empty() {
        return Err(p.error_at(format!(
            "classes.{name}.params: the kernel's own {cc_name} takes no parameters from a policy; sluice's portable algorithms ({}) do",
            PORTABLE.join(", ")
        )));
    } else {
        None
    };
    let rules = p.matches.iter().find(|(j, _)| *j == i).map(|(_, m)| m);
    let intent_only = rules.is_none() && name != "default";
    if intent_only && !p.intents.iter().any(|(_, c)| *c == i) {
        return Ok(None);
    }
    let ports: Vec<(u16, u16)> = rules.and_then(|m| m.dst_ports.as_ref()).map_or(vec![], |v| v.iter().map(|r| (r.first, r.last)).collect());
    if ports.len() > PORTS {
        return Err(p.error_at(format!("classes.{name}.match.dst_ports: {} ranges; a class matches at most {PORTS} (merge neighbouring ports into ranges like \"5200-5299\")", ports.len())));
    }
    let cgroups: Vec<String> = rules.and_then(|m| m.cgroups.clone()).unwrap_or_default();
    if cgroups.len() > CGROUPS {
        return Err(p.error_at(format!("classes.{name}.match.cgroups: {} cgroups; a class matches at most {CGROUPS}", cgroups.len())));
    }
    let (mut paths, mut cgroup_ids) = (Vec::new(), Vec::new());
    for (k, g) in cgroups.iter().enumerate() {
        let (path, id) = host.cgroup(p, g, format!("classes.{name}.match.cgroups[{k}]"))?;
        cgroup_ids.push(id);
        paths.push(path);
    }
    let order = match (ports.is_empty(), cgroup_ids.is_empty(), intent_only) {
        (_, _, true) => 4,
        (false, false, _) => 0,
        (false, true, _) => 1,
        (true, false, _) => 2,
        (true, true, _) => 3,
    };
    let class = AppliedClass {
        name: name.clone(),
        id: ids.of(p, name),
        cc: cc_name.to_string(),
        priority: c.config.priority,
        fallback: fallback.to_string(),
        params: c.config.params.clone(),
        dst_ports: rules.and_then(|m| m.dst_ports.as_ref()).map_or(vec![], |v| v.iter().map(|r| r.to_string()).collect()),
        cgroups: paths,
    };
    Ok(Some((order, Slot { offer: offer_of(c), intent_only, class, ports, cgroup_ids, params })))
}

/// The policy's intents, each pointing at its class's slot, in `INTENTS`' order.
fn intent_rules(p: &CheckedPolicy, host: &Host, slots: &[Slot]) -> Result<Vec<Option<IntentRule>>, ScenarioError> {
    let mut intents = vec![None; INTENTS.len()];
    for (intent, c) in &p.intents {
        let class = &p.classes[*c].name;
        let given = p.policy.permits.get(intent).map(Vec::as_slice).unwrap_or_default();
        if given.len() > CGROUPS {
            return Err(p.error_at(format!("permits.{intent}: {} cgroups; an intent may be claimed from at most {CGROUPS}", given.len())));
        }
        let (mut cgroups, mut cgroup_ids) = (Vec::new(), Vec::new());
        for (k, g) in given.iter().enumerate() {
            let (path, id) = host.cgroup(p, g, format!("permits.{intent}[{k}]"))?;
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
    Ok(intents)
}

/// The number of an intent (`INTENTS`' order, from 1), as `include/sluice/intent.h` has it.
pub fn intent_number(intent: &str) -> u32 {
    INTENTS.iter().position(|i| *i == intent).map_or(0, |i| i as u32 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sim::scenario::host_policy;

    const POLICY: &str = r#"
[classes.storage]
cc = "dctcp"
params = { g = 0.125 }
match = { dst_ports = [5001, "6000-6099"] }

[classes.query]
cc = "bbr"
match = { cgroups = ["query"] }

[classes.both]
cc = "newreno"
match = { dst_ports = [7000], cgroups = ["query"] }

[classes.default]
cc = "cubic"
"#;

    fn host_with(root: &Path) -> (Vec<String>, PathBuf) {
        std::fs::create_dir_all(root.join("query")).unwrap();
        (vec!["reno".into(), "cubic".into(), "bbr".into()], root.to_path_buf())
    }

    #[test]
    fn slots_follow_the_kernels_order_and_ids_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let (kernel, root) = host_with(dir.path());
        let host = Host { cgroup_root: &root, kernel: &kernel };
        let p = host_policy::parse(POLICY, "p.toml").unwrap();
        let first = plan(&p, &host, None).unwrap();
        let order: Vec<&str> = first.slots.iter().map(|s| s.class.name.as_str()).collect();
        assert_eq!(order, ["both", "storage", "query", "default"], "ports and cgroups, ports, cgroups, then default");
        let storage = &first.slots[1];
        assert_eq!(storage.ports, [(5001, 5001), (6000, 6099)]);
        assert!(storage.params.is_some(), "a portable algorithm carries its C parameters");
        assert!(first.slots[2].params.is_none(), "the kernel's bbr takes none");
        assert_eq!(first.slots[2].cgroup_ids, [cgroup_id(&root.join("query")).unwrap()]);
        let ids: Vec<u32> = first.slots.iter().map(|s| s.class.id).collect();
        assert_eq!(ids.iter().collect::<std::collections::BTreeSet<_>>().len(), 4, "distinct ids: {ids:?}");

        // A reload without `storage` and with a new class: the others keep their ids, the new
        // class takes neither a kept id nor the removed one's (its counters would carry over).
        let applied = Applied { classes: first.slots.iter().map(|s| s.class.clone()).collect(), next_id: first.next_id, ..Applied::default() };
        let second = POLICY.replace("[classes.storage]\ncc = \"dctcp\"\nparams = { g = 0.125 }\nmatch = { dst_ports = [5001, \"6000-6099\"] }", "[classes.bulk]\ncc = \"dctcp\"\nmatch = { dst_ports = [5001] }");
        let p2 = host_policy::parse(&second, "p.toml").unwrap();
        let again = plan(&p2, &host, Some(&applied)).unwrap();
        let id = |plan: &Plan, name: &str| plan.slots.iter().find(|s| s.class.name == name).unwrap().class.id;
        for name in ["both", "query", "default"] {
            assert_eq!(id(&again, name), id(&first, name), "{name} keeps its id");
        }
        assert!(!ids.contains(&id(&again, "bulk")), "bulk took a used id: {} of {ids:?}", id(&again, "bulk"));
    }

    #[test]
    fn what_only_a_host_can_check_is_refused_with_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let (kernel, root) = host_with(dir.path());
        let host = Host { cgroup_root: &root, kernel: &kernel };
        let err = |text: &str| plan(&host_policy::parse(text, "p.toml").unwrap(), &host, None).unwrap_err().to_string();
        let e = err("[classes.fast]\ncc = \"hpcc\"\nmatch = { dst_ports = [1] }\n");
        assert!(e.contains("classes.fast.cc: hpcc runs only in the simulator; on this host the algorithms are newreno, dctcp, ecn_int, retcp, reno, cubic, bbr"), "{e}");
        let e = err("[classes.q]\ncc = \"cubic\"\nmatch = { cgroups = [\"nope\"] }\n");
        assert!(e.starts_with("p.toml:") && e.contains("classes.q.match.cgroups[0]: no cgroup"), "{e}");
        let ports: Vec<String> = (1..=9).map(|p| (p * 10).to_string()).collect();
        let e = err(&format!("[classes.q]\ncc = \"cubic\"\nmatch = {{ dst_ports = [{}] }}\n", ports.join(", ")));
        assert!(e.contains("classes.q.match.dst_ports: 9 ranges; a class matches at most 8"), "{e}");
        let e = err("[classes.q]\ncc = \"cubic\"\nparams = { beta = 0.7 }\nmatch = { dst_ports = [1] }\n");
        assert!(e.contains("classes.q.params: the kernel's own cubic takes no parameters"), "{e}");
        // Linux's own Reno where the kernel has it; sluice's portable NewReno is `newreno`.
        let p = host_policy::parse("[classes.default]\ncc = \"reno\"\n", "p.toml").unwrap();
        assert_eq!(plan(&p, &host, None).unwrap().slots[0].class.cc, "reno");
        let no_reno: Vec<String> = vec!["cubic".into()];
        let p = plan(&p, &Host { cgroup_root: &root, kernel: &no_reno }, None).unwrap();
        assert_eq!(p.slots[0].class.cc, "newreno", "without the kernel's reno, the portable one");
    }
}
