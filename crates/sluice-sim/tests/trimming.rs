//! Packet trimming (`[switch.trim]`) and per-packet spraying (`spray` on a class): a full queue
//! cuts data to headers instead of dropping it, the coin splits the cuts between the arrival
//! and the packet queued last, lossless traffic is never cut, and a sprayed flow's packets
//! spread evenly over equal-cost paths with its ideal taken on the longest.

mod common;
use common::{refusal, run_text};
use sluice_sim::scenario;
use sluice_sim::time::Time;
use sluice_sim::world::World;

/// Eight CUBIC senders without ECN into one receiver across a 10 Gb/s core link: the core port
/// of sw0 fills and overflows.
const INCAST: &str = r#"
[sim]
duration = "30ms"
stop_when_done = false
[topology]
kind = "dumbbell"
left = 8
right = 1
host_rate = "10Gbps"
host_delay = "2us"
core_rate = "10Gbps"
core_delay = "2us"
[switch]
buffer = "1MB"
[transport]
ecn = false
rto_min = "1ms"
[classes.default]
cc = "cubic"
[[workloads]]
kind = "bulk"
senders = [0, 1, 2, 3, 4, 5, 6, 7]
receiver = 8
size = "1MB"
"#;

const TRIM: &str = "\n[switch.trim]\nthreshold = \"30KB\"\n";

fn summary(world: &World) -> serde_json::Value {
    serde_json::to_value(sluice_sim::metrics::summarize(world, 0.0)).unwrap()
}

#[test]
fn a_full_queue_trims_instead_of_dropping_and_every_header_is_accounted_for() {
    let world = run_text(&format!("{INCAST}{TRIM}"), &[]);
    let c = world.counters();
    assert!(c.trims > 100, "{c:?}");
    assert_eq!(c.drops_buffer, 0, "a port that trims drops no data for room: {c:?}");
    assert!(world.flows().iter().all(|f| f.finish.is_some()), "every flow finishes");
    // The run drained: each header was discarded by its receiver or dropped at a full band.
    assert_eq!(c.trim_headers_discarded + c.drops_trim_header, c.trims + c.trim_evictions, "{c:?}");
    // The coin: a full queue cuts the arrival or the packet queued last with even odds, and in
    // an incast of full frames the packet queued last is data that may always be cut.
    let ratio = c.trim_evictions as f64 / c.trims as f64;
    assert!((0.8..1.25).contains(&ratio), "{} evicted against {} trimmed on arrival", c.trim_evictions, c.trims);
    let s = summary(&world);
    assert_eq!(s["trimming"]["trimmed"].as_u64(), Some(c.trims));
    assert_eq!(s["trimming"]["evicted"].as_u64(), Some(c.trim_evictions));
    assert_eq!(s["drops_by_reason"]["trim_header"].as_u64(), Some(c.drops_trim_header));

    // The same incast without trimming drops for room, and its summary has no trimming keys.
    let plain = run_text(INCAST, &[]);
    assert!(plain.counters().drops_buffer > 100, "{:?}", plain.counters());
    let s = summary(&plain);
    assert!(s.get("trimming").is_none() && s["drops_by_reason"].get("trim_header").is_none());
}

#[test]
fn victim_arrival_always_cuts_the_arrival_and_a_small_header_band_drops_headers() {
    let world = run_text(&format!("{INCAST}{TRIM}victim = \"arrival\"\n"), &[]);
    let c = world.counters();
    assert!(c.trims > 100 && c.trim_evictions == 0, "{c:?}");
    // Room for three headers: a burst of cuts overflows the band.
    let small = run_text(&format!("{INCAST}{TRIM}header_queue = \"192B\"\n"), &[]);
    let c = small.counters();
    assert!(c.drops_trim_header > 0, "{c:?}");
    assert_eq!(c.drops(), c.drops_trim_header, "only headers are dropped: {c:?}");
}

#[test]
fn lossless_traffic_is_never_trimmed() {
    let text = format!("{INCAST}{TRIM}\n[pfc]\nenabled = true\npriorities = [0]\n");
    let world = run_text(&text, &[]);
    let c = world.counters();
    assert_eq!((c.trims, c.trim_evictions, c.drops()), (0, 0, 0), "PFC holds lossless traffic upstream: {c:?}");
    assert!(c.pfc_pauses > 0, "{c:?}");
}

#[test]
fn trimming_that_cannot_work_is_refused_at_its_key() {
    let cases = [
        (
            "[switch.trim]\nthreshold = \"30KB\"\nheader_queue = \"32B\"",
            "switch.trim.header_queue: trimming on a queue too small for one header (64 bytes), got 32 bytes",
        ),
        ("[switch.trim]\nthreshold = \"1KB\"", "switch.trim.threshold: trimming on a queue too small for one full frame (1538 bytes), got 1000 bytes"),
        ("[switch.trim]\nthreshold = \"30KB\"\nvictim = \"tail\"", "switch.trim.victim: expected \"coin\" or \"arrival\", got \"tail\""),
        ("[switch.trim]\nenabled = true", "switch.trim.header_queue: required, since port sw0->h0 has neither trim.threshold nor a buffer limit"),
        (
            "[switch.ports.\"sw0->sw1\".trim]\nthreshold = \"30KB\"\nheader_queue = \"10B\"",
            "switch.ports.\"sw0->sw1\".trim.header_queue: trimming on a queue too small for one header",
        ),
        ("[switch.trim]\nthreshold = \"30KB\"\n[tlt]\nenabled = true\nthreshold = \"20KB\"", "switch.trim: trimming cannot be combined with TLT's colour-aware dropping"),
        ("[switch.trim]\ntreshold = \"30KB\"", "t.toml:27: switch.trim.treshold: unknown field `treshold`, expected one of `enabled`, `header`, `threshold`, `header_queue`, `victim`; did you mean `threshold`?"),
    ];
    for (extra, expected) in cases {
        let e = refusal(&format!("{INCAST}\n{extra}\n"), "t.toml");
        assert!(e.contains(expected), "{extra}:\n{e}");
    }
}

#[test]
fn a_port_entry_turns_trimming_off_where_the_switch_table_turns_it_on() {
    let text = format!("{INCAST}{TRIM}\n[switch.ports.\"sw0->sw1\".trim]\nenabled = false\n");
    let world = run_text(&text, &[]);
    let c = world.counters();
    assert!(c.drops_buffer > 0, "the core port drops again: {c:?}");
    let trims_elsewhere = world.fabric().ports.iter().filter(|p| p.discipline.trim.is_some()).count();
    assert!(trims_elsewhere > 0, "the other switch ports still trim");
}

/// Two equal-cost paths from h0 to h1 (nodes 0 and 1): through sw1 (node 3, 1 us links) and
/// through sw2 (node 4), whose first link is 5 us.
const DIAMOND: &str = "6 4 6\n2 3 4 5\n0 2 10Gbps 1us 0\n2 3 10Gbps 1us 0\n2 4 10Gbps 5us 0\n3 5 10Gbps 1us 0\n4 5 10Gbps 1us 0\n5 1 10Gbps 1us 0\n";

fn diamond(spray: bool) -> World {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("diamond.txt"), DIAMOND).unwrap();
    let text = format!(
        "[topology]\nkind = \"hpcc_file\"\nfile = \"diamond.txt\"\n[classes.default]\ncc = \"dctcp\"\nspray = {spray}\n\
         [switch.ecn]\nmode = \"step\"\nk = \"60KB\"\n[[workloads]]\nkind = \"flows\"\nflows = [{{ src = 0, dst = 1, size = \"10MB\" }}]\n"
    );
    let loaded = scenario::parse(&text, "diamond.toml", dir.path(), &[]).unwrap();
    let mut world = scenario::build(&loaded).unwrap();
    world.run(&mut |_| {});
    world.check_conservation().unwrap();
    world
}

/// Bytes sent from node `a` to node `b`.
fn sent(world: &World, a: &str, b: &str) -> u64 {
    let net = world.fabric();
    let id = |n: &str| net.node_names.iter().position(|x| x == n).unwrap() as u32;
    net.ports.iter().find(|p| p.node == id(a) && p.peer_node == id(b)).unwrap().tx_bytes
}

#[test]
fn a_sprayed_flow_spreads_its_packets_over_both_paths_and_its_ideal_takes_the_longer() {
    let pinned = diamond(false);
    let (short, long) = (sent(&pinned, "sw0", "sw1"), sent(&pinned, "sw0", "sw2"));
    assert!(short == 0 || long == 0, "one hash, one path: {short} and {long} bytes");
    let sprayed = diamond(true);
    let (short_s, long_s) = (sent(&sprayed, "sw0", "sw1"), sent(&sprayed, "sw0", "sw2"));
    let share = short_s as f64 / (short_s + long_s) as f64;
    // About 7,000 packets each a fair coin: a 3% band is five standard deviations.
    assert!((share - 0.5).abs() < 0.03, "{short_s} and {long_s} bytes");
    assert!(sprayed.flows()[0].finish.is_some());
    // The ideal of a sprayed flow is its longest path: 4 us more than the short one, the same
    // as the long one. The ACKs' path is the same hash in both runs.
    let extra = sprayed.flows()[0].base_rtt - pinned.flows()[0].base_rtt;
    let expected = if long == 0 { Time::from_us(4) } else { Time::ZERO };
    assert_eq!(extra, expected);
}
