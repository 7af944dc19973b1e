//! Workload generators and closed-loop traffic: offered load, incast rounds, request latency,
//! the storage mix, and CDF errors that name the file and line.

mod common;

use common::{run_file, run_text};
use sluice_sim::scenario;
use sluice_sim::world::World;
use std::path::Path;

fn repo(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)
}

/// Offered load of a built (not run) world: payload bits of all flows over the hosts' capacity.
fn offered_load(world: &World, window_s: f64) -> f64 {
    let bits: f64 = world.flows().iter().map(|f| f.size.unwrap() as f64 * 8.0).sum();
    let capacity: f64 = (0..world.host_count() as u32).map(|h| world.host_rate(h).0 as f64).sum();
    bits / (capacity * window_s)
}

#[test]
fn websearch_offers_its_target_load_within_3_percent_over_10ms() {
    for load in [0.3, 0.5] {
        for seed in [1, 2, 3] {
            let loaded = scenario::load(
                &repo("scenarios/websearch_leafspine.toml"),
                &[format!("workloads.0.load={load}"), format!("sim.seed={seed}")],
            )
            .unwrap();
            let world = sluice_sim::scenario::build(&loaded).unwrap();
            let offered = offered_load(&world, 0.010);
            assert!((offered - load).abs() / load < 0.03, "load {load} seed {seed}: offered {offered:.4}");
        }
    }
}

#[test]
fn incast_completes_every_round_and_conserves() {
    let world = run_file("scenarios/incast.toml", &[]);
    let rounds = world.requests();
    assert_eq!(rounds.len(), 20);
    assert_eq!(world.flows().len(), 20 * 32);
    assert!(world.flows().iter().all(|f| f.finish.is_some() && f.rx_done.is_some()));
    // Rounds are sequential: each starts when the previous ended, and lasts at least the time to
    // drain 32 x 64 KB through the receiver's 10 Gb/s port.
    let min_round = 32.0 * 65536.0 * 8.0 / 10e9;
    for w in rounds.windows(2) {
        assert_eq!(w[1].start, w[0].end);
    }
    assert!(rounds.iter().all(|r| (r.end - r.start).secs_f64() > min_round));
}

const RPC: &str = r#"
[sim]
seed = 3
[topology]
kind = "leaf_spine"
hosts_per_leaf = 2
leaves = 2
spines = 1
host_rate = "10Gbps"
host_delay = "2us"
fabric_rate = "10Gbps"
fabric_delay = "2us"
[classes.default]
cc = "dctcp"
[switch.ecn]
mode = "step"
k = "65KB"
[[workloads]]
kind = "rpc"
clients = [0]
servers = [3]
outstanding = 1
request_size = "20KB"
response_size = "200KB"
think_time = "30us"
duration = "2ms"
"#;

#[test]
fn request_latency_is_request_plus_response_fct_within_one_rtt_when_idle() {
    let world = run_text(RPC, &[]);
    let reqs = world.requests();
    assert!(reqs.len() >= 5, "{} requests", reqs.len());
    let flows = world.flows();
    assert_eq!(flows.len() % 2, 0);
    for (i, r) in reqs.iter().enumerate() {
        let (req, resp) = (&flows[2 * i], &flows[2 * i + 1]);
        assert_eq!((req.src.0, req.dst.0, resp.src.0, resp.dst.0), (0, 3, 3, 0));
        assert_eq!(req.start, r.start);
        let fct = |f: &sluice_sim::flow::Flow| (f.finish.unwrap() - f.start).secs_f64();
        let latency = (r.end - r.start).secs_f64();
        let rtt = req.base_rtt.secs_f64();
        // The server answers once it has the whole request, and the client has the answer before
        // the server's last ACK returns: each FCT overshoots its part of the latency by about
        // half a round trip.
        let gap = (fct(req) + fct(resp) - latency).abs();
        assert!(gap <= rtt, "request {i}: latency {latency} vs FCTs {} + {} (RTT {rtt})", fct(req), fct(resp));
    }
    // Closed loop: the next request waits the think time after the previous response.
    for w in reqs.windows(2) {
        assert!((w[1].start - w[0].end).secs_f64() >= 30e-6 - 1e-12);
    }
}

#[test]
fn storage_mix_runs_both_classes_with_their_own_cc() {
    let world = run_file("scenarios/storage_query_backup.toml", &["sim.duration=5ms", "workloads.0.duration=5ms"]);
    let classes = world.classes();
    let idx = |n: &str| classes.iter().position(|c| c.name == n).unwrap();
    let (q, b) = (idx("query"), idx("backup"));
    assert_eq!((classes[q].cc.as_str(), classes[b].cc.as_str()), ("dctcp", "cubic"));
    assert!(world.requests().iter().filter(|r| r.class == q).count() > 100);
    let backup_bytes: u64 = world.flows().iter().filter(|f| f.class as usize == b).map(|f| f.bytes_delivered()).sum();
    // Four bulk senders into two 10 Gb/s server links for 5 ms: well over 2 x 10 Gb/s x 5 ms x 50%.
    assert!(backup_bytes as f64 * 8.0 > 0.5 * 2.0 * 10e9 * 5e-3, "backup delivered {backup_bytes} B");
}

#[test]
fn a_bad_cdf_is_rejected_naming_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("nonmono.cdf", "0 0\n1000 50\n2000 40\n3000 100\n", "line 3"),
        ("above.cdf", "0 0\n1000 120\n", "line 2"),
        ("empty.cdf", "", "line 1"),
        ("text.cdf", "0 0\nabc 50\n", "line 2"),
    ];
    for (name, text, line) in cases {
        std::fs::write(dir.path().join(name), text).unwrap();
        let sc = format!(
            "[topology]\nkind = \"star\"\nhosts = 4\nhost_rate = \"10Gbps\"\nhost_delay = \"1us\"\n\
             [[workloads]]\nkind = \"poisson\"\ncdf = \"{name}\"\nload = 0.3\nduration = \"1ms\"\n"
        );
        let loaded = scenario::parse(&sc, "s.toml", dir.path(), &[]).unwrap();
        let err = match sluice_sim::scenario::build(&loaded) {
            Ok(_) => panic!("{name} accepted"),
            Err(e) => loaded.error_at(e).to_string(),
        };
        assert!(err.contains("workloads[0].cdf") && err.contains(name) && err.contains(line), "{name}: {err}");
    }
}

#[test]
fn persistent_connections_carry_every_request_on_two_flows_at_one_rtt_each() {
    let persistent = RPC.replace("outstanding = 1", "outstanding = 1\nconnections = \"persistent\"");
    let world = run_text(&persistent, &[]);
    let flows = world.flows();
    // One connection each way, reused: its bytes are the sum of its messages, in order.
    assert_eq!(flows.len(), 2);
    let reqs = world.requests();
    assert!(reqs.len() >= 5, "{} requests", reqs.len());
    let (up, down) = (&flows[0], &flows[1]);
    assert_eq!((up.src.0, up.dst.0, down.src.0, down.dst.0), (0, 3, 3, 0));
    assert_eq!(up.bytes_delivered(), reqs.len() as u64 * 20_000);
    assert_eq!(down.bytes_delivered(), reqs.len() as u64 * 200_000);
    // Once the window has opened, a request costs one round trip plus serializing both messages
    // at 10 Gb/s (headers included); the first ones pay slow start.
    let rtt = up.base_rtt.secs_f64();
    let serialize = |payload: f64| (payload / 1448.0).ceil() * 1538.0 * 8.0 / 10e9;
    let ideal = rtt + serialize(20_000.0) + serialize(200_000.0);
    for (i, r) in reqs.iter().enumerate().skip(2) {
        let latency = (r.end - r.start).secs_f64();
        assert!(latency >= ideal - 1e-6 && latency <= ideal + rtt, "request {i}: {latency} vs ideal {ideal} (RTT {rtt})");
    }
    // The same exchange on a new connection per request starts from the initial window each time:
    // 10 segments against a 25 KB BDP cost it close to a round trip per request.
    let fresh = run_text(RPC, &[]);
    let mean = |w: &World| w.requests().iter().skip(2).map(|r| (r.end - r.start).secs_f64()).sum::<f64>() / (w.requests().len() - 2) as f64;
    assert!(mean(&world) < mean(&fresh) - 0.5 * rtt, "persistent {} vs per request {}", mean(&world), mean(&fresh));
}

#[test]
fn an_unknown_connection_mode_is_rejected_naming_the_key() {
    let bad = RPC.replace("outstanding = 1", "outstanding = 1\nconnections = \"pooled\"");
    let loaded = scenario::parse(&bad, "s.toml", Path::new("."), &[]).unwrap();
    let err = match sluice_sim::scenario::build(&loaded) {
        Ok(_) => panic!("connections = \"pooled\" accepted"),
        Err(e) => loaded.error_at(e).to_string(),
    };
    assert!(err.contains("workloads[0].connections") && err.contains("persistent"), "{err}");
}
