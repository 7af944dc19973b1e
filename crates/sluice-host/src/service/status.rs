//! What `sluice agent status`, `sluice host status` and the Prometheus export say of the agent:
//! its programs, the policy in force with each class's connections, and the fleet figures.
//! Every metric the agent exports is written through `sluice_platform::prometheus`.

use crate::kernel::{agent_config, cc_policy, class_table, pins, sockops};
use crate::kernel::class_table::INTENT_OUTCOMES;
use anyhow::Result;
use sluice_platform::applied::{applied, now_unix, Applied, ClassCounts};
use sluice_platform::plan::intent_number;
use sluice_platform::prometheus::{Exposition, Kind};
use sluice_sim::cc::negotiation::Negotiation;
use sluice_sim::packet::tcp_int::IntEncoding;

/// `sluice agent status` and the first part of `sluice host status`: the programs, the policy in
/// force and, in fleet mode, the fleet figures.
pub fn agent_status() -> Result<String> {
    if sockops::state()?.is_none() {
        return Ok("host agent: not loaded\n".into());
    }
    Ok(format!("{}{}{}", programs_status()?, policy_status()?, sluice_platform::fleet::figures_text()))
}

/// The programs part of `sluice agent status`: where they are attached, their switches and
/// counters, and the ad-hoc CC policy entries.
pub fn programs_status() -> Result<String> {
    use std::fmt::Write;
    let mut s = String::new();
    let Some(st) = sockops::state()? else {
        return Ok("host agent: not loaded\n".into());
    };
    let c = agent_config::config()?;
    writeln!(s, "host agent: loaded on cgroup {}", st.cgroup.display())?;
    writeln!(s, "  int: {}  echo: {}  sample: {} us", onoff(c.int_enabled), onoff(c.echo_enabled), c.sample_ns / 1000)?;
    writeln!(s, "  echoes clamped to: {}", c.echo_bounds.text(&IntEncoding::default()))?;
    writeln!(s, "  congestion control registered: {}", if st.ccs.is_empty() { "none".into() } else { st.ccs.join(" ") })?;
    let counters = pins::read_counters("agent_counters", sockops::COUNTERS.len())?;
    for (n, v) in sockops::COUNTERS.iter().zip(&counters) {
        writeln!(s, "  {n:16} {v}")?;
    }
    let cc_counters = pins::read_counters("cc_counters", sockops::CC_COUNTERS.len())?;
    for (n, v) in sockops::CC_COUNTERS.iter().zip(&cc_counters) {
        writeln!(s, "  {n:16} {v}")?;
    }
    for (kind, value, name) in cc_policy::list()? {
        writeln!(s, "  policy {kind} {value} -> {name}")?;
    }
    Ok(s)
}

fn onoff(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// The policy part of `sluice agent status` and `sluice host status`.
pub fn policy_status() -> Result<String> {
    use std::fmt::Write;
    let mut s = String::new();
    let Some(a) = applied()? else {
        return Ok("policy: none applied (start `sluice agent --policy FILE`)\n".into());
    };
    let version = a.version.map_or("none".to_string(), |v| v.to_string());
    writeln!(s, "policy: {} version {version} (generation {}, digest {}), applied {}s ago", a.file, a.generation, a.digest, now_unix().saturating_sub(a.applied_unix))?;
    writeln!(s, "  {:<16} {:>3} {:<10} {:<10} {:>4} {:>7} {:>7} {:>6}  match", "class", "id", "cc", "fallback", "prio", "open", "opened", "failed")?;
    for c in &a.classes {
        let n = class_table::counts(c.id)?;
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
        let k = class_table::intent_counts(intent_number(&i.intent))?;
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

/// The policy in force as Prometheus metrics, for `sluice host export`: its generation and
/// version, each class's connections, its intents' declarations and, in fleet mode, the fleet
/// figures. Nothing when no policy is in force; a class whose counters cannot be read is left out.
pub fn policy_metrics(e: &mut Exposition) {
    let Ok(Some(a)) = applied() else { return };
    let Ok(counts) = a.classes.iter().map(|c| class_table::counts(c.id)).collect::<Result<Vec<_>>>() else { return };
    let declared: Vec<[u64; 4]> = a.intents.iter().map(|i| class_table::intent_counts(intent_number(&i.intent)).unwrap_or_default()).collect();
    class_metrics(&a, &counts, &declared, e);
    if let Some(r) = sluice_platform::fleet::figures() {
        sluice_platform::fleet::metrics(&r, e);
    }
}

/// [`policy_metrics`] of a policy, its classes' counts and its intents' declarations.
fn class_metrics(a: &Applied, counts: &[ClassCounts], declared: &[[u64; 4]], e: &mut Exposition) {
    e.single("sluice_policy_generation", Kind::Gauge, "The agent's generation of the policy in force.", a.generation);
    if let Some(v) = a.version {
        e.single("sluice_policy_version", Kind::Gauge, "The operator's version of the policy in force.", v);
    }
    e.single("sluice_policy_refused", Kind::Gauge, "Whether the last policy read was refused (the one in force stays).", u8::from(a.refused.is_some()));
    type Figure = (&'static str, Kind, &'static str, fn(&ClassCounts) -> u64);
    let figures: [Figure; 3] = [
        ("sluice_class_connections_open", Kind::Gauge, "Connections of the class open now.", ClassCounts::open),
        ("sluice_class_connections_total", Kind::Counter, "Connections the class took.", |n| n.opened),
        ("sluice_class_cc_failures_total", Kind::Counter, "Connections whose algorithm the kernel refused.", |n| n.cc_failed),
    ];
    for (name, kind, help, f) in figures {
        e.family(name, kind, help);
        for (c, n) in a.classes.iter().zip(counts) {
            e.sample(name, &[("class", &c.name), ("cc", &c.cc)], f(n));
        }
    }
    let name = "sluice_class_negotiations_total";
    e.family(name, Kind::Counter, "The class's clients by how negotiation ended (accepted, or the reason for the fallback).");
    for (c, n) in a.classes.iter().zip(counts) {
        for (outcome, k) in Negotiation::ALL.iter().zip(n.negotiated) {
            e.sample(name, &[("class", &c.name), ("cc", &c.cc), ("outcome", outcome.label())], k);
        }
    }
    let name = "sluice_class_negotiation_malformed_total";
    e.family(name, Kind::Counter, "Malformed negotiation answers the class's clients ignored.");
    for (c, n) in a.classes.iter().zip(counts) {
        e.sample(name, &[("class", &c.name), ("cc", &c.cc)], n.malformed);
    }
    if !a.intents.is_empty() {
        let name = "sluice_intent_declarations_total";
        e.family(name, Kind::Counter, "Applications' declarations of the intent, by outcome.");
        for (i, k) in a.intents.iter().zip(declared) {
            for (outcome, n) in INTENT_OUTCOMES.iter().zip(k) {
                e.sample(name, &[("intent", &i.intent), ("class", &i.class), ("outcome", outcome)], n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_platform::applied::AppliedClass;
    use sluice_platform::fleet::Report;

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
        let mut e = Exposition::new();
        class_metrics(&a, &counts, &[], &mut e);
        let m = e.into_text();
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
        let mut e = Exposition::new();
        class_metrics(&a, &[], &[], &mut e);
        sluice_platform::fleet::metrics(&r, &mut e);
        crate::service::telemetry::flow_metrics(&Default::default(), &[], &IntEncoding::default(), &mut e);
        let exported = e.into_text();
        assert!(exported.contains("sluice_fleet_lag_versions 1"), "{exported}");
        assert!(exported.contains("sluice_fleet_failing{what=\"report\"} 1\n") && exported.contains("sluice_fleet_failing{what=\"watch\"} 0\n"), "{exported}");
        let names: Vec<&str> = exported.lines().filter_map(|l| l.strip_prefix("# TYPE ")).filter_map(|l| l.split(' ').next()).collect();
        let dashboard = include_str!("../../../../docs/grafana/sluice-fleet.json");
        let mut used = 0;
        for (i, _) in dashboard.match_indices("sluice_") {
            let name: String = dashboard[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            assert!(names.contains(&name.as_str()), "the dashboard reads {name}, which no agent exports: {names:?}");
            used += 1;
        }
        assert!(used >= 9, "the dashboard's queries name {used} metrics");
    }
}
