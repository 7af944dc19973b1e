//! The administrator and application interfaces: match rules, QoS intents through the policy
//! table, and the NIC's rate limiter holding a flow to its target rate.

mod common;

use common::run_text;

const SCENARIO: &str = r#"
[topology]
kind = "star"
hosts = 4
host_rate = "25Gbps"
host_delay = "1us"
[switch]
priorities = 2
[switch.ecn]
mode = "step"
k = "40KB"
[classes.default]
cc = "cubic"
[classes.query]
cc = "dctcp"
priority = 0
[classes.query.match]
tags = ["search"]
[classes.backup]
cc = "newreno"
priority = 1
[classes.backup.match]
hosts = [3]
[classes.paced]
cc = "cubic"
[policy]
latency_sensitive = "query"
bulk = "backup"
target_rate = "paced"

[[workloads]]
kind = "flows"
tag = "search"
flows = [{ src = 0, dst = 1, size = "100KB" }]

[[workloads]]
kind = "flows"
flows = [{ src = 0, dst = 3, size = "100KB" }, { src = 1, dst = 2, size = "100KB" }]

[[workloads]]
kind = "flows"
intent = "bulk"
flows = [{ src = 2, dst = 1, size = "100KB" }]

[[workloads]]
kind = "flows"
target_rate = "2Gbps"
flows = [{ src = 2, dst = 0, size = "5MB" }]
"#;

#[test]
fn match_rules_intents_and_the_default_pick_each_flows_class() {
    let world = run_text(SCENARIO, &[]);
    let classes = world.classes();
    let got: Vec<(&str, &str)> =
        world.flows().iter().map(|f| (classes[f.class as usize].name.as_str(), f.cc_name())).collect();
    assert_eq!(
        got,
        [("query", "dctcp"), ("backup", "newreno"), ("default", "cubic"), ("backup", "newreno"), ("paced", "cubic")]
    );
}

#[test]
fn the_nic_holds_a_flow_to_its_target_rate() {
    let world = run_text(SCENARIO, &[]);
    let f = &world.flows()[4];
    let fct = (f.finish.unwrap() - f.start).secs_f64();
    // 5 MB of payload at 2 Gb/s on a 25 Gb/s link: about 20 ms; the limiter counts wire bytes, so
    // goodput sits just under the target.
    let goodput = 5e6 * 8.0 / fct;
    assert!(goodput < 2.0e9 && goodput > 0.9 * 2.0e9, "goodput {goodput}");
}

#[test]
fn an_intent_without_a_policy_entry_is_an_error_naming_the_key() {
    let text = SCENARIO.replace("latency_sensitive = \"query\"\n", "") + "[[workloads]]\nkind = \"flows\"\nintent = \"latency_sensitive\"\nflows = [{ src = 0, dst = 1, size = \"1KB\" }]\n";
    let loaded = sluice_sim::scenario::parse(&text, "s.toml", std::path::Path::new("."), &[]).unwrap();
    let err = match sluice_sim::scenario::build(&loaded) {
        Ok(_) => panic!("accepted"),
        Err(e) => e,
    };
    assert!(err.contains("workloads[4].intent") && err.contains("policy.latency_sensitive"), "{err}");
}

#[test]
fn the_nic_serves_a_higher_priority_class_first() {
    let text = r#"
[topology]
kind = "star"
hosts = 3
host_rate = "10Gbps"
host_delay = "1us"
[switch]
priorities = 2
[classes.high]
cc = "cubic"
priority = 0
[classes.low]
cc = "cubic"
priority = 1
[[workloads]]
kind = "flows"
flows = [{ src = 0, dst = 2, size = "2MB", class = "low" }, { src = 0, dst = 1, size = "2MB", class = "high" }]
"#;
    let world = run_text(text, &[]);
    let (low, high) = (&world.flows()[0], &world.flows()[1]);
    // Both start together from one NIC; the high class has the NIC to itself until it is done.
    let high_fct = (high.finish.unwrap() - high.start).secs_f64();
    assert!(high_fct < 1.25 * high.ideal_fct.secs_f64(), "high FCT {high_fct} vs ideal {}", high.ideal_fct);
    assert!(low.finish.unwrap() > high.finish.unwrap());
}
