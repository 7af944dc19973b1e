//! Connection-setup negotiation: a class whose algorithm needs TCP-INT falls back to its fallback
//! algorithm when the receiver's stack or the path lacks it.

mod common;

use common::run_text;
use sluice_sim::cc::negotiation::Negotiation;

const SCENARIO: &str = r#"
[topology]
kind = "star"
hosts = 4
host_rate = "25Gbps"
host_delay = "1us"
[switch.ecn]
mode = "step"
k = "40KB"
[transport]
handshake = true
[int]
legacy_hosts = [2]
[classes.storage]
cc = "ecn_int"
fallback = "dctcp"
[[workloads]]
kind = "flows"
class = "storage"
flows = [
  { src = 0, dst = 1, size = "1MB" },
  { src = 0, dst = 2, size = "1MB" },
  { src = 3, dst = 1, size = "1MB" },
]
"#;

#[test]
fn an_int_class_falls_back_when_the_receiver_lacks_tcp_int() {
    let world = run_text(SCENARIO, &[]);
    let f = world.flows();
    let outcome: Vec<(Negotiation, &str, bool)> =
        f.iter().map(|f| (f.negotiation(), f.cc_name(), f.int_enabled())).collect();
    assert_eq!(
        outcome,
        [
            (Negotiation::Accepted, "ecn_int", true),
            (Negotiation::PeerLacksInt, "dctcp", false),
            (Negotiation::Accepted, "ecn_int", true),
        ]
    );
    assert!(f.iter().all(|f| f.finish.is_some()));
}

#[test]
fn a_fabric_of_legacy_switches_is_a_path_without_int() {
    let world = run_text(SCENARIO, &["int.legacy_switches=[\"sw0\"]", "int.legacy_hosts=[]"]);
    assert!(world.flows().iter().all(|f| f.negotiation() == Negotiation::PathLacksInt && f.cc_name() == "dctcp"));
}

#[test]
fn dctcp_without_ecn_marking_on_the_path_falls_back_to_the_default_fallback() {
    let world = run_text(SCENARIO, &["switch.ecn.mode=\"off\"", "classes.storage.cc=\"dctcp\"", "classes.storage.fallback=\"cubic\""]);
    assert!(world.flows().iter().all(|f| f.negotiation() == Negotiation::PathLacksEcn && f.cc_name() == "cubic"));
}

/// A receiver without the agent answers the SYN without the option: the class falls back
/// whatever its algorithm needs (an unanswered proposal agrees nothing), and a client without
/// the agent proposes nothing and runs its class's algorithm as configured.
#[test]
fn a_host_without_the_agent_gets_the_legacy_default() {
    let world = run_text(SCENARIO, &["int.legacy_hosts=[]", "transport.agentless_hosts=[1]", "classes.storage.cc=\"bbr\""]);
    let outcome: Vec<(Negotiation, &str)> = world.flows().iter().map(|f| (f.negotiation(), f.cc_name())).collect();
    assert_eq!(
        outcome,
        [(Negotiation::PeerSilent, "dctcp"), (Negotiation::Accepted, "bbr"), (Negotiation::PeerSilent, "dctcp")],
        "flows to host 1 fall back; the flow to host 2 is agreed"
    );
    let world = run_text(SCENARIO, &["int.legacy_hosts=[]", "transport.agentless_hosts=[0]"]);
    let outcome: Vec<(Negotiation, &str)> = world.flows().iter().map(|f| (f.negotiation(), f.cc_name())).collect();
    assert_eq!(outcome[..2], [(Negotiation::NotNegotiated, "ecn_int"), (Negotiation::NotNegotiated, "ecn_int")], "host 0 proposes nothing");
    assert_eq!(outcome[2], (Negotiation::Accepted, "ecn_int"));
}
