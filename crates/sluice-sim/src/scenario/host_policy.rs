//! A host's policy file, the input of `sluice agent` (crate `sluice-host`): a scenario's
//! `[classes]` and `[policy]` tables with a version, parsed and checked by the same code as a
//! scenario's, so its errors name the file, line and key the same way. A fleet's policy (`sluice
//! admin`) may also declare host `labels` and `[groups]` that change classes on the hosts whose
//! labels match; [`CheckedPolicy::for_host`] gives the policy one host runs.

use super::classes::{self, CheckedClass, ClassConfig, MatchRules, Side};
use super::overrides::{line_at, locate, tables_not_lists};
use super::ScenarioError;
use crate::time::Rate;
use crate::words::{did_you_mean, in_words};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// A policy file as written.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HostPolicy {
    /// The operator's number for this policy, shown by `sluice agent status`.
    pub version: Option<u64>,
    /// Traffic classes by name: algorithm, parameters, priority, fallback and match rules.
    #[serde(default)]
    pub classes: BTreeMap<String, ClassConfig>,
    /// Applications' intents mapped to class names.
    #[serde(default)]
    pub policy: BTreeMap<String, String>,
    /// Which cgroups' processes may claim each intent (host only): cgroup v2 directories,
    /// absolute or relative to the cgroup root.
    #[serde(default)]
    pub permits: BTreeMap<String, Vec<String>>,
    /// The label keys a fleet's hosts carry ("rack", "role"): the only ones groups may select on.
    #[serde(default)]
    pub labels: Vec<String>,
    /// Host groups by name: which hosts, and what their classes change.
    #[serde(default)]
    pub groups: BTreeMap<String, Group>,
}

/// Hosts selected by labels, and the class keys that differ on them.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// Every label must have this value on a host of the group (`{ rack = "b" }`).
    pub hosts: BTreeMap<String, String>,
    /// Per class, the keys that replace the policy's own (`{ cc = "cubic" }`).
    #[serde(default)]
    pub classes: BTreeMap<String, toml::Table>,
}

impl Group {
    /// Whether a host with these labels belongs to the group.
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.hosts.iter().all(|(k, v)| labels.get(k) == Some(v))
    }

    /// Whether some host could belong to both groups: no label is asked a different value.
    fn overlaps(&self, other: &Group) -> bool {
        self.hosts.iter().all(|(k, v)| other.hosts.get(k).is_none_or(|w| w == v))
    }
}

/// A policy whose every class, match and intent passed the shared checks.
#[derive(Clone)]
pub struct CheckedPolicy {
    /// The policy as written.
    pub policy: HostPolicy,
    /// The classes, in name order.
    pub classes: Vec<CheckedClass>,
    /// (class index, its rules), in class order.
    pub matches: Vec<(usize, MatchRules)>,
    /// (intent, class index).
    pub intents: Vec<(String, usize)>,
    /// The file it was read from, and its text: where errors found later point.
    file: String,
    text: String,
}

impl CheckedPolicy {
    /// An error about the key that starts `message` ("classes.q.match.cgroups[0]: ..."), at its
    /// line in the file: for what only the host can check (a cgroup, the kernel's algorithms).
    pub fn error_at(&self, message: String) -> ScenarioError {
        let key = message.split(':').next().unwrap_or_default().to_string();
        locate(&self.file, &self.text, &[], &key, message, None)
    }

    /// The policy's text, as read.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The policy a host with these labels runs: its groups' class keys in place of the
    /// policy's (a group's `cc` without `params` takes that algorithm's defaults), checked again. Groups that could both select a host never set the same key, so
    /// the order they apply in does not matter.
    pub fn for_host(&self, labels: &BTreeMap<String, String>) -> Result<CheckedPolicy, ScenarioError> {
        let chosen: Vec<&str> = self.policy.groups.iter().filter(|(_, g)| g.selects(labels)).map(|(n, _)| n.as_str()).collect();
        self.with_groups(&chosen)
    }

    /// Label keys of `labels` the policy does not declare.
    pub fn undeclared<'a>(&self, labels: &'a BTreeMap<String, String>) -> Vec<&'a str> {
        labels.keys().filter(|k| !self.policy.labels.contains(k)).map(String::as_str).collect()
    }

    /// The policy with the named groups' class keys in place, checked.
    fn with_groups(&self, groups: &[&str]) -> Result<CheckedPolicy, ScenarioError> {
        if groups.is_empty() {
            return Ok(self.clone());
        }
        let mut p = self.policy.clone();
        p.groups.clear();
        let mut classes = toml::Table::try_from(&p.classes).expect("classes serialize as a table");
        for g in groups {
            for (class, keys) in &self.policy.groups[*g].classes {
                let target = classes.get_mut(class).and_then(toml::Value::as_table_mut).expect("groups change known classes");
                // Parameters belong to an algorithm: a group that changes it without giving them
                // takes the new algorithm's defaults.
                if keys.contains_key("cc") && !keys.contains_key("params") {
                    target.remove("params");
                }
                target.extend(keys.clone());
            }
        }
        let at = |m: String| {
            let key = m.split(':').next().unwrap_or_default().to_string();
            // A key a group set is shown at the group's line.
            let set_by = groups.iter().find(|g| {
                self.policy.groups[**g].classes.iter().any(|(c, keys)| {
                    keys.keys().any(|k| key == format!("classes.{c}.{k}") || key.starts_with(&format!("classes.{c}.{k}.")) || key.starts_with(&format!("classes.{c}.{k}[")))
                })
            });
            match set_by {
                Some(g) => {
                    let key = format!("groups.{g}.{key}");
                    let on = match groups {
                        [one] => format!("on hosts with {}", selector(&self.policy.groups[*one])),
                        many => format!("on hosts in groups {}", many.join(" and ")),
                    };
                    let m = format!("groups.{g}.{m} ({on})");
                    locate(&self.file, &self.text, &[], &key, m, None)
                }
                None => locate(&self.file, &self.text, &[], &key, m, None),
            }
        };
        p.classes = toml::Value::Table(classes).try_into().map_err(|e: toml::de::Error| at(in_words(e.message().trim())))?;
        let (classes, intents, matches) = check_classes(&p).map_err(at)?;
        Ok(CheckedPolicy { policy: p, classes, matches, intents, file: self.file.clone(), text: self.text.clone() })
    }
}

/// A group's selector as text: `rack = "b", role = "storage"`.
fn selector(g: &Group) -> String {
    g.hosts.iter().map(|(k, v)| format!("{k} = {v:?}")).collect::<Vec<_>>().join(", ")
}

/// Reads and checks a policy file.
pub fn load(path: &Path) -> Result<CheckedPolicy, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ScenarioError { file: file.clone(), line: None, message: format!("cannot read the policy: {e}") })?;
    parse(&text, &file)
}

/// Parses and checks policy text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<CheckedPolicy, ScenarioError> {
    let err = |line, message| ScenarioError { file: file.to_string(), line, message };
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        err(e.span().map(|s| line_at(text, s.start)), format!("not valid TOML: {}", e.message().trim()))
    })?;
    tables_not_lists(doc.as_item(), &mut Vec::new()).map_err(|(key, m)| locate(file, text, &[], &key, m, None))?;
    let policy: HostPolicy = serde_path_to_error::deserialize(toml::Deserializer::new(text)).map_err(|e| {
        let path = e.path().to_string();
        let line = e.inner().span().map(|s| line_at(text, s.start));
        let msg = in_words(e.inner().message().trim());
        if path == "." || path.is_empty() {
            err(line, msg)
        } else {
            locate(file, text, &[], &path, format!("{path}: {msg}"), line)
        }
    })?;
    let at = |m: String| {
        let key = m.split(':').next().unwrap_or_default().to_string();
        locate(file, text, &[], &key, m, None)
    };
    let (classes, intents, matches) = check_classes(&policy).map_err(at)?;
    check_groups(&policy).map_err(at)?;
    let checked = CheckedPolicy { policy, classes, matches, intents, file: file.to_string(), text: text.to_string() };
    // Every host runs the policy with the groups that select it: each group, and each pair that
    // could select one host, is checked as those hosts will run it.
    let names: Vec<&str> = checked.policy.groups.keys().map(String::as_str).collect();
    for (i, a) in names.iter().enumerate() {
        checked.with_groups(&[a])?;
        for b in &names[i + 1..] {
            if checked.policy.groups[*a].overlaps(&checked.policy.groups[*b]) {
                checked.with_groups(&[a, b])?;
            }
        }
    }
    Ok(checked)
}

/// The shared checks of classes, intents and matches, and the host's own of presets and permits.
#[allow(clippy::type_complexity)]
fn check_classes(policy: &HostPolicy) -> Result<(Vec<CheckedClass>, Vec<(String, usize)>, Vec<(usize, MatchRules)>), String> {
    if let Some((name, _)) = policy.classes.iter().find(|(_, c)| c.preset.is_some()) {
        return Err(format!(
            "classes.{name}.preset: a preset pairs parameters with a simulated NIC; on a host write the parameters under params"
        ));
    }
    // No preset is allowed, so the line rate scales nothing.
    let checked = classes::check(&policy.classes, Side::Host, Rate::gbps(100))?;
    let intents = classes::check_intents(&policy.policy, &checked)?;
    check_permits(policy)?;
    let matches = classes::check_matches(&checked, Side::Host)?;
    Ok((checked, intents, matches))
}

/// Groups select on declared labels and change classes the policy has; two groups that could
/// select one host never set the same key.
fn check_groups(p: &HostPolicy) -> Result<(), String> {
    for (i, l) in p.labels.iter().enumerate() {
        if l.is_empty() || !l.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
            return Err(format!("labels[{i}]: expected a label key of letters, digits, '_', '-' or '.', got {l:?}"));
        }
    }
    for (name, g) in &p.groups {
        if g.hosts.is_empty() {
            return Err(format!("groups.{name}.hosts: expected the labels its hosts carry, as hosts = {{ rack = \"b\" }}"));
        }
        for label in g.hosts.keys() {
            if !p.labels.contains(label) {
                let declared = if p.labels.is_empty() { "none are declared".to_string() } else { format!("declared: {}", p.labels.join(", ")) };
                return Err(format!(
                    "groups.{name}.hosts.{label}: unknown label `{label}` ({declared}){}; a group selects on the labels the policy lists in labels = [...]",
                    did_you_mean(label, p.labels.iter().map(String::as_str))
                ));
            }
        }
        for (class, keys) in &g.classes {
            if !p.classes.contains_key(class) {
                return Err(format!(
                    "groups.{name}.classes.{class}: unknown class `{class}`{}; a group changes classes the policy defines",
                    did_you_mean(class, p.classes.keys().map(String::as_str))
                ));
            }
            if let Some(k) = keys.keys().find(|k| *k == "preset") {
                return Err(format!("groups.{name}.classes.{class}.{k}: a preset pairs parameters with a simulated NIC; on a host write the parameters under params"));
            }
        }
    }
    for (a, ga) in &p.groups {
        for (b, gb) in p.groups.range::<String, _>((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded)) {
            if !ga.overlaps(gb) {
                continue;
            }
            for (class, keys) in &ga.classes {
                if let Some(k) = keys.keys().find(|k| gb.classes.get(class).is_some_and(|t| t.contains_key(*k))) {
                    return Err(format!(
                        "groups.{b}.classes.{class}.{k}: groups.{a} sets it too, and a host with {} and {} would be in both; make one group's hosts exclude the other's",
                        selector(ga),
                        selector(gb)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Every intent a policy maps is given the cgroups that may claim it, and nothing else is.
fn check_permits(p: &HostPolicy) -> Result<(), String> {
    for (intent, cgroups) in &p.permits {
        classes::known_intent(intent, "permits")?;
        if !p.policy.contains_key(intent) {
            return Err(format!("permits.{intent}: no policy.{intent} maps this intent to a class; add one or remove the permit"));
        }
        if cgroups.is_empty() {
            return Err(format!("permits.{intent}: expected at least one cgroup whose processes may claim it"));
        }
    }
    if let Some(intent) = p.policy.keys().find(|i| !p.permits.contains_key(*i)) {
        return Err(format!(
            "policy.{intent}: say which cgroups may claim it, as permits.{intent} = [\"apps/frontend\"] (cgroup v2 directories)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        match parse(text, "p.toml") {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_policy_reads_the_scenario_class_schema() {
        let p = parse(
            "version = 7\n[classes.storage]\ncc = \"dctcp\"\nparams = { g = 0.125 }\npriority = 2\nfallback = \"cubic\"\n\
             match = { dst_ports = [5001, \"6000-6099\"] }\n[classes.query]\ncc = \"cubic\"\nmatch = { cgroups = [\"query\"] }\n\
             [policy]\nlatency_sensitive = \"query\"\n[permits]\nlatency_sensitive = [\"apps\"]\n",
            "p.toml",
        )
        .unwrap();
        assert_eq!(p.policy.version, Some(7));
        let names: Vec<&str> = p.classes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["query", "storage"], "classes in name order, no implicit default on a host");
        assert_eq!(p.classes[1].params.get("g").and_then(|v| v.as_float()), Some(0.125));
        assert_eq!(p.intents, [("latency_sensitive".to_string(), 0)]);
        let ports = p.matches[1].1.dst_ports.as_ref().unwrap();
        assert!(ports[1].contains(6099) && !ports[1].contains(6100) && ports[0].contains(5001));
    }

    #[test]
    fn bad_policies_name_the_file_line_key_and_expected_form() {
        let e = error("[classes.q]\ncc = \"dctpc\"\n");
        assert!(e.starts_with("p.toml:2: classes.q.cc: unknown congestion control \"dctpc\"") && e.contains("did you mean `dctcp`"), "{e}");
        assert!(e.contains("a host runs one of: newreno, dctcp, ecn_int, retcp, reno, cubic, bbr;") && !e.contains("hpcc"), "a host's list: {e}");
        let e = error("[classes.q]\ncc = \"dctcp\"\nparams = { gg = 1 }\n");
        assert!(e.starts_with("p.toml:3: classes.q.params.gg") && e.contains("did you mean"), "{e}");
        let e = error("[classes.q]\ncc = \"dctcp\"\nparams = { g = 3.0 }\n");
        assert!(e.starts_with("p.toml:3: classes.q.params.g") && e.contains("got 3"), "{e}");
        let e = error("[classes.q]\ncc = \"cubic\"\npriority = 9\n");
        assert!(e.starts_with("p.toml:3: classes.q.priority: expected 0 (highest) to 7"), "{e}");
        let e = error("[classes.q]\ncc = \"cubic\"\nmatch = { hosts = [1] }\n");
        assert!(e.starts_with("p.toml:3: classes.q.match.hosts") && e.contains("dst_ports or cgroups"), "{e}");
        let e = error("[classes.q]\ncc = \"cubic\"\nmatch = { dst_ports = [\"90-80\"] }\n");
        assert!(e.starts_with("p.toml:3: classes.q.match.dst_ports[0]") && e.contains("range like \"5200-5299\""), "{e}");
        let e = error("[classes.a]\ncc = \"cubic\"\nmatch = { dst_ports = [\"5000-5100\"] }\n[classes.b]\ncc = \"dctcp\"\nmatch = { dst_ports = [5050] }\n");
        assert!(e.starts_with("p.toml:6: classes.b.match: overlaps classes.a.match (dst_ports 5050 in both)"), "{e}");
        let e = error("[classes.q]\ncc = \"cubic\"\nmatch = { dst_port = [1] }\n");
        assert!(e.starts_with("p.toml:3: classes.q.match.dst_port") && e.contains("did you mean `dst_ports`"), "{e}");
        let e = error("[policy]\nbulk = \"nosuch\"\n");
        assert!(e.starts_with("p.toml:2: policy.bulk: unknown class \"nosuch\""), "{e}");
        let e = error("[classes.q]\ncc = \"cubic\"\n[policy]\nbulk = \"q\"\n");
        assert!(e.starts_with("p.toml:4: policy.bulk: say which cgroups may claim it"), "{e}");
        let e = error("[classes.q]\ncc = \"cubic\"\n[policy]\nbulk = \"q\"\n[permits]\nbulk = [\"a\"]\nlatency_sensitiv = [\"a\"]\n");
        assert!(e.starts_with("p.toml:7: permits.latency_sensitiv: unknown intent") && e.contains("did you mean `latency_sensitive`"), "{e}");
        let e = error("[classes.q]\ncc = \"cubic\"\n[permits]\ndeadline = [\"a\"]\n");
        assert!(e.starts_with("p.toml:4: permits.deadline: no policy.deadline"), "{e}");
        let e = error("[classes.q]\ncc = \"cubic\"\nspray = true\n");
        assert!(e.starts_with("p.toml:3: classes.q.spray: a Linux host keeps each connection on one path"), "{e}");
        let e = error("versoin = 2\n");
        assert!(e.starts_with("p.toml:1:") && e.contains("did you mean `version`"), "{e}");
    }

    const FLEET: &str = "labels = [\"rack\", \"role\"]\n\
        [classes.storage]\ncc = \"dctcp\"\nparams = { g = 0.0625 }\nmatch = { dst_ports = [5001] }\n\
        [classes.default]\ncc = \"cubic\"\n\
        [groups.rack_b]\nhosts = { rack = \"b\" }\nclasses.storage = { cc = \"cubic\" }\n\
        [groups.storage_hosts]\nhosts = { rack = \"a\", role = \"storage\" }\nclasses.storage = { params = { g = 0.25 } }\n";

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn class<'a>(p: &'a CheckedPolicy, name: &str) -> &'a CheckedClass {
        p.classes.iter().find(|c| c.name == name).unwrap()
    }

    #[test]
    fn groups_change_the_classes_of_the_hosts_they_select() {
        let p = parse(FLEET, "fleet.toml").unwrap();
        let plain = p.for_host(&labels(&[("rack", "a")])).unwrap();
        assert_eq!(class(&plain, "storage").cc, "dctcp");
        assert_eq!(class(&plain, "storage").params.get("g").and_then(|v| v.as_float()), Some(0.0625));
        let b = p.for_host(&labels(&[("rack", "b")])).unwrap();
        assert_eq!(class(&b, "storage").cc, "cubic", "rack b runs cubic");
        assert!(class(&b, "storage").params.is_empty(), "cubic takes no dctcp parameters");
        // Two groups setting different keys of one class both apply.
        let both = p.for_host(&labels(&[("rack", "a"), ("role", "storage")])).unwrap();
        assert_eq!(class(&both, "storage").params.get("g").and_then(|v| v.as_float()), Some(0.25));
        assert_eq!(class(&both, "default").cc, "cubic");
        assert_eq!(p.undeclared(&labels(&[("rack", "a"), ("zone", "z1")])), ["zone"]);
    }

    #[test]
    fn bad_groups_name_the_group_line_and_key() {
        let e = error("labels = [\"rack\"]\n[classes.q]\ncc = \"cubic\"\n[groups.g]\nhosts = { rak = \"b\" }\n");
        assert!(e.starts_with("p.toml:5: groups.g.hosts.rak: unknown label `rak` (declared: rack); did you mean `rack`?"), "{e}");
        let e = error("[classes.q]\ncc = \"cubic\"\n[groups.g]\nhosts = { rack = \"b\" }\n");
        assert!(e.contains("groups.g.hosts.rack: unknown label `rack` (none are declared)"), "{e}");
        let e = error("labels = [\"rack\"]\n[classes.q]\ncc = \"cubic\"\n[groups.g]\nhosts = { rack = \"b\" }\nclasses.qq = { cc = \"bbr\" }\n");
        assert!(e.starts_with("p.toml:6: groups.g.classes.qq: unknown class `qq`; did you mean `q`?"), "{e}");
        // A group's value is checked where the group writes it, for the hosts it selects.
        let e = error("labels = [\"rack\"]\n[classes.q]\ncc = \"cubic\"\n[groups.g]\nhosts = { rack = \"b\" }\nclasses.q = { cc = \"dctpc\" }\n");
        assert!(e.starts_with("p.toml:6: groups.g.classes.q.cc: unknown congestion control \"dctpc\"") && e.contains("(on hosts with rack = \"b\")"), "{e}");
        let e = error("labels = [\"rack\"]\n[classes.q]\ncc = \"cubic\"\n[groups.g]\nhosts = { rack = \"b\" }\nclasses.q = { priority = 9 }\n");
        assert!(e.starts_with("p.toml:6: groups.g.classes.q.priority: expected 0 (highest) to 7"), "{e}");
        // Two groups that can select one host may not both set a key; exclusive ones may.
        let two = |role: &str| {
            format!("labels = [\"rack\", \"role\"]\n[classes.q]\ncc = \"cubic\"\n[groups.a]\nhosts = {{ rack = \"b\" }}\nclasses.q = {{ cc = \"bbr\" }}\n[groups.b]\nhosts = {{ {role} }}\nclasses.q = {{ cc = \"reno\" }}\n")
        };
        let e = error(&two("role = \"x\""));
        assert!(e.starts_with("p.toml:9: groups.b.classes.q.cc: groups.a sets it too"), "{e}");
        parse(&two("rack = \"c\""), "p.toml").unwrap();
        let e = error("labels = [\"rack\"]\n[classes.q]\ncc = \"cubic\"\n[groups.g]\nhosts = {}\n");
        assert!(e.starts_with("p.toml:5: groups.g.hosts: expected the labels"), "{e}");
        // A host in two groups runs both: rack b's cubic with storage hosts' dctcp parameter.
        let e = error(&FLEET.replace("rack = \"a\", role", "role"));
        assert!(
            e.starts_with("p.toml:13: groups.storage_hosts.classes.storage.params.g: unknown field `g`")
                && e.ends_with("(on hosts in groups rack_b and storage_hosts)"),
            "{e}"
        );
        // Match rules that overlap only on a group's hosts are refused too.
        let e = error("labels = [\"rack\"]\n[classes.a]\ncc = \"cubic\"\nmatch = { dst_ports = [80] }\n[classes.b]\ncc = \"bbr\"\nmatch = { dst_ports = [81] }\n[groups.g]\nhosts = { rack = \"b\" }\nclasses.b = { match = { dst_ports = [80] } }\n");
        assert!(e.starts_with("p.toml:10: groups.g.classes.b.match: overlaps classes.a.match"), "{e}");
    }

    #[test]
    fn classes_that_differ_in_one_criterion_do_not_overlap() {
        // Same port, but one is narrowed to a cgroup: the more specific criterion set is not the
        // same set, so both stand (the agent tries port-and-cgroup classes first).
        parse(
            "[classes.a]\ncc = \"cubic\"\nmatch = { dst_ports = [80] }\n[classes.b]\ncc = \"dctcp\"\nmatch = { dst_ports = [80], cgroups = [\"x\"] }\n",
            "p.toml",
        )
        .unwrap();
        let e = error("[classes.a]\ncc = \"cubic\"\nmatch = { cgroups = [\"x\", \"y\"] }\n[classes.b]\ncc = \"dctcp\"\nmatch = { cgroups = [\"y\"] }\n");
        assert!(e.contains("cgroups \"y\" in both"), "{e}");
    }
}
