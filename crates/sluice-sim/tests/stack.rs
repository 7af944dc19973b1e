//! `transport.stack`: the Linux preset under a scenario's own `[transport]` keys, and a stack
//! the simulator does not have refused with the key and the stacks it has.

mod common;
use common::refusal;
use sluice_sim::scenario;
use sluice_sim::time::Time;
use sluice_sim::transport::tcp::Stack;
use std::path::Path;

const SCENARIO: &str = r#"
[topology]
kind = "star"
hosts = 2
[transport]
rto_min = "10ms"
[[workloads]]
kind = "bulk"
senders = [0]
receiver = 1
"#;

/// Host 0 sending to host 1 over a 10 Gb/s star, with `sim` and `transport` as those tables'
/// keys and `bulk` as more of the workload's.
fn two_hosts(sim: &str, transport: &str, bulk: &str) -> String {
    format!(
        "\n[sim]\n{sim}\n[topology]\nkind = \"star\"\nhosts = 2\nhost_rate = \"10Gbps\"\nhost_delay = \"1us\"\n[transport]\n{transport}\n[[workloads]]\nkind = \"bulk\"\nsenders = [0]\nreceiver = 1\n{bulk}\n"
    )
}

#[test]
fn the_linux_stack_gives_linuxs_constants_where_the_scenario_gives_none() {
    let loaded = scenario::parse(SCENARIO, "stack.toml", Path::new("."), &["transport.stack=linux".into()]).unwrap();
    let t = &loaded.scenario.transport;
    assert_eq!(t.stack, Stack::Linux);
    assert_eq!(t.rto_min, Time::from_ms(10), "the scenario's rto_min, not Linux's 200 ms");
    assert_eq!((t.rto_init, t.rto_max, t.delayed_ack, t.tlp), (Time::from_ms(1_000), Time::from_ms(120_000), Some(Time::from_ms(8)), true));
    let plain = scenario::parse(SCENARIO, "stack.toml", Path::new("."), &[]).unwrap();
    assert_eq!(plain.scenario.transport.stack, Stack::Rfc);
    assert_eq!((plain.scenario.transport.delayed_ack, plain.scenario.transport.tlp), (None, false), "rfc keeps the defaults");
}

#[test]
fn an_unknown_stack_is_refused_with_the_key_and_the_stacks_there_are() {
    let text = SCENARIO.replace("rto_min = \"10ms\"", "rto_min = \"10ms\"\nstack = \"freebsd\"");
    let e = refusal(&text, "stack.toml");
    assert!(e.contains("stack.toml:7") && e.contains("transport.stack") && e.contains("rfc") && e.contains("linux"), "{e}");
}

/// A delayed ACK armed again after an immediate one cancelled it, while the first timer's event
/// is still queued, goes out at its own deadline: three segments at once, the second ACKed at
/// once (two unacknowledged), the third held. Linux's 40 ms delayed ACK (rto_min 200 ms, no
/// loss probe) then ends the flow at ~40 ms; a lost timer would leave the sender's RTO, ~200 ms
/// later, to end it.
#[test]
fn a_delayed_ack_armed_again_after_an_immediate_one_goes_out_on_time() {
    let text = two_hosts("stop_when_done = true", "stack = \"linux\"\nhandshake = false\ntlp = false", "size = \"4344B\"");
    let world = common::run_text(&text, &[]);
    let f = &world.flows()[0];
    let fct = (f.finish.expect("the flow finishes") - f.start).ps() as f64 / 1e9;
    assert!((40.0..40.1).contains(&fct), "FCT {fct} ms: the held ACK should go out after 40 ms");
    assert_eq!(f.timeouts().len(), 0);
}

#[test]
fn tso_without_the_linux_stack_is_refused_with_the_key_and_what_to_set() {
    // Line 10: the [transport] table's first key.
    let text = two_hosts("duration = \"10ms\"", "tso = true", "");
    let loaded = scenario::parse(&text, "stack.toml", Path::new("."), &[]).unwrap();
    let e = match scenario::build(&loaded) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(m) => loaded.error_at(m).to_string(),
    };
    assert!(e.contains("stack.toml:10") && e.contains("transport.tso") && e.contains("transport.stack = \"linux\""), "{e}");
}

/// The draft's grid cell of Reno queries beside DCTCP backups at 100 Mb/s, in the simulator with
/// and without Linux's TSO packets: the queries' mean completion and the backups' Mb/s.
fn reno_queries_beside_dctcp_backups(tso: bool) -> (f64, f64) {
    let tso = format!("transport.tso={tso}");
    let sets = [
        "transport.stack=\"linux\"",
        &tso,
        "topology.host_rate=\"100Mbps\"",
        "sim.duration=\"2s\"",
        "workloads[0].connections=\"persistent\"",
        "workloads[1].connections=\"persistent\"",
        "workloads[0].duration=\"2s\"",
        "workloads[1].duration=\"2s\"",
        "classes.query.cc=\"reno\"",
        "classes.backup.cc=\"dctcp\"",
    ];
    let world = common::run_file("scenarios/opencc_storage.toml", &sets);
    // The second second, as the twin measures after its warm-up.
    let from = Time::from_ms(1_000);
    let latencies: Vec<f64> = world.requests().iter().filter(|r| r.start >= from).map(|r| (r.end - r.start).secs_f64() * 1e3).collect();
    let backup = world.classes().iter().position(|c| c.name == "backup").unwrap();
    let bytes: u64 = world.flows().iter().filter(|f| f.class as usize == backup).map(|f| f.bytes_delivered()).sum();
    (latencies.iter().sum::<f64>() / latencies.len() as f64, bytes as f64 * 8.0 / 2.0 / 1e6)
}

/// On the testbed, cutting TCP's packets into frames at the host (offloads on) rather than
/// sending a frame per packet (offloads off) moves this cell's DCTCP backups from 129 to 86-88
/// Mb/s and its queries from 7.6 to 4.0-4.1 ms (docs/twin.md). The simulator's TSO packets move
/// them the same way: backups under 92 % and queries under 85 % of their figures without.
#[test]
fn tso_packets_slow_dctcp_backups_and_speed_reno_queries_as_on_the_kernel() {
    let (q_frames, b_frames) = reno_queries_beside_dctcp_backups(false);
    let (q_tso, b_tso) = reno_queries_beside_dctcp_backups(true);
    println!("queries {q_frames:.2} -> {q_tso:.2} ms, backups {b_frames:.1} -> {b_tso:.1} Mb/s");
    assert!(b_tso < 0.92 * b_frames, "backups {b_frames:.1} -> {b_tso:.1} Mb/s");
    assert!(q_tso < 0.85 * q_frames, "queries {q_frames:.2} -> {q_tso:.2} ms");
}
