//! A host's policy file, the input of `sluice agent` (crate `sluice-host`): a scenario's
//! `[classes]` and `[policy]` tables with a version, parsed and checked by the same code as a
//! scenario's, so its errors name the file, line and key the same way.

use super::classes::{self, CheckedClass, ClassConfig, MatchRules, Side};
use super::{line_at, locate, tables_not_lists, ScenarioError};
use crate::time::Rate;
use crate::words::in_words;
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
    if let Some((name, _)) = policy.classes.iter().find(|(_, c)| c.preset.is_some()) {
        return Err(at(format!(
            "classes.{name}.preset: a preset pairs parameters with a simulated NIC; on a host write the parameters under params"
        )));
    }
    // No preset is allowed, so the line rate scales nothing.
    let checked = classes::check(&policy.classes, Side::Host, Rate::gbps(100)).map_err(at)?;
    let intents = classes::check_intents(&policy.policy, &checked).map_err(at)?;
    check_permits(&policy).map_err(at)?;
    let matches = classes::check_matches(&checked, Side::Host).map_err(at)?;
    Ok(CheckedPolicy { policy, classes: checked, matches, intents, file: file.to_string(), text: text.to_string() })
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
        let e = error("versoin = 2\n");
        assert!(e.starts_with("p.toml:1:") && e.contains("did you mean `version`"), "{e}");
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
