//! The Ultra Ethernet transport (`transport = "uet"`, `cc = "nscc"`) on the UEC reference
//! simulator's own setups (uet-htsim at 40ccb05, `htsim/sim/datacenter/main_uec.cpp` with no
//! topology file): a 16-host, three-tier k = 4 fat tree of 100 Gb/s links of 1 µs, 4150-byte
//! packets, switch queues that trim past 178,450 bytes (43 packets) and mark by RED at dequeue
//! between 37,350 and 145,250 bytes. The reference counts no Ethernet framing, so these runs set
//! `uet.framing = 0`. Figures are from its validation outputs (`validate_uec_sender.out`).

mod common;
use common::{finish_us, refusal, run_text, uet_counts, uet_reference_fabric};
use sluice_sim::time::Time;

/// The reference's fabric (`common::uet_reference_fabric`) with k = 4 and one NSCC class.
fn fabric() -> String {
    uet_reference_fabric(4, false) + "[classes.default]\ncc = \"nscc\"\ntransport = \"uet\"\n"
}

/// One 2 MB flow across the core, host 0 to host 13 (`one.cm`). The reference: 490 new
/// packets, none resent, 124 ACKs, done at 176.2 µs.
#[test]
fn one_connection_takes_what_the_reference_takes() {
    let fabric = fabric();
    let w = run_text(&format!("{fabric}[[workloads]]\nkind = \"flows\"\nflows = [{{ src = 0, dst = 13, size = \"2000000B\", start = \"0us\" }}]\n"), &[]);
    let u = uet_counts(&w);
    assert_eq!((u["new"].as_u64(), u["rtx"].as_u64(), u["nacks"].as_u64()), (Some(490), Some(0), Some(0)), "{u}");
    assert_eq!(u["acks"].as_u64(), Some(124), "{u}");
    let t = finish_us(&w)[0];
    assert!((t - 176.2).abs() <= 1.762, "finished at {t} µs; the reference at 176.2 (1%)");
}

/// Fifteen 2 MB flows into host 0 (`incast.cm`): the last finishes at 2478.53 µs in the
/// reference, with 811 NACKs and as many packets resent: each loss repaired by its NACK.
#[test]
fn an_incast_is_repaired_by_nacks_and_ends_with_the_reference() {
    let fabric = fabric();
    let flows: Vec<String> = (1..16).map(|s| format!("{{ src = {s}, dst = 0, size = \"2000000B\", start = \"0us\" }}")).collect();
    let w = run_text(&format!("{fabric}[[workloads]]\nkind = \"flows\"\nflows = [{}]\n", flows.join(", ")), &[]);
    let u = uet_counts(&w);
    let last = finish_us(&w).into_iter().fold(0.0, f64::max);
    assert!(last <= 2550.0 && (last - 2478.53).abs() <= 0.05 * 2478.53, "last flow done at {last} µs; the reference at 2478.53 (5%)");
    let (nacks, ignored, rtx) = (u["nacks"].as_u64().unwrap(), u["nacks_ignored"].as_u64().unwrap(), u["rtx"].as_u64().unwrap());
    // A timer may still fire: after the NACKs' cuts a window of one packet can be held by a
    // packet sent earlier without asking for an ACK, which its receiver holds until an ACK's
    // worth of bytes arrive. What the timer marks lost is acknowledged before it is resent.
    assert_eq!(rtx, nacks - ignored, "each loss resent once, on its NACK: {u}");
    assert!((nacks as f64 - 811.0).abs() <= 0.3 * 811.0, "{nacks} NACKs; the reference 811 (30%)");
    assert_eq!(u["headers_nacked"].as_u64().unwrap(), w.counters().trims + w.counters().trim_evictions, "every header reached its receiver");
}

/// The fabric with `cc`'s class under receiver credit: as the reference does while RCCC runs
/// (`main_uec.cpp:708`), ToR ports towards hosts mark no ECN.
fn credited(cc: &str, k: usize) -> String {
    uet_reference_fabric(k, true) + &format!("[classes.default]\n{cc}\ntransport = \"uet\"\n")
}

/// RCCC alone (`rccc`, the reference's `-receiver_cc_only`) and beside NSCC (`nscc` with
/// `receiver_cc = true`, its `-sender_cc -receiver_cc`), on one 2 MB flow: 490 packets, none
/// resent, 126 ACKs, done at 177.368 µs (`validate_uec_rcv.out`, `validate_uec_both.out`).
/// The reference's own trace (`-debug`) shows 157 PULLs reaching the sender before it finishes,
/// of the 206 it counts: its pacer goes on slow-pulling a finished flow, where sluice's drops a
/// flow whose receiver has closed.
#[test]
fn one_connection_under_receiver_credit_takes_what_the_reference_takes() {
    for cc in ["cc = \"rccc\"", "cc = \"nscc\"\nparams = { receiver_cc = true }"] {
        let w = run_text(&format!("{}[[workloads]]\nkind = \"flows\"\nflows = [{{ src = 0, dst = 13, size = \"2000000B\", start = \"0us\" }}]\n", credited(cc, 4)), &[]);
        let u = uet_counts(&w);
        assert_eq!((u["new"].as_u64(), u["rtx"].as_u64(), u["acks"].as_u64(), u["rts"].as_u64()), (Some(490), Some(0), Some(126), Some(0)), "{cc}: {u}");
        let pulls = u["pulls"].as_u64().unwrap();
        assert!(pulls.abs_diff(157) <= 8, "{cc}: {pulls} PULLs; the reference's sender took 157 before it finished (5%)");
        let t = finish_us(&w)[0];
        assert!((t - 177.368).abs() <= 0.177, "{cc}: finished at {t} µs; the reference at 177.368 (0.1%)");
    }
}

/// A permutation of 2 MB flows: pinned to one path each (`paths = 1`), flows collide on the
/// core and the last takes twice as long as when each sprays over 64 EVs (the reference:
/// 527.8 against 194.0 µs on its `perm_16n`).
#[test]
fn spreading_over_many_paths_halves_a_permutations_tail() {
    let fabric = fabric();
    let run = |paths: u32| {
        let text = format!("{fabric}[[workloads]]\nkind = \"permutation\"\nsize = \"2000000B\"\n").replacen("framing = 0", &format!("framing = 0\npaths = {paths}"), 1);
        let w = run_text(&text, &[]);
        (finish_us(&w).into_iter().fold(0.0, f64::max), uet_counts(&w))
    };
    let (pinned, u1) = run(1);
    let (sprayed, _) = run(64);
    assert!(pinned >= 2.0 * sprayed, "one path: {pinned} µs, 64 paths: {sprayed} µs");
    assert!(u1["headers_nacked"].as_u64().unwrap() > 0, "{u1}");
}

#[test]
fn a_uet_class_refuses_what_it_cannot_run() {
    let fabric = fabric();
    let flows = "[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0, dst = 13, size = \"1MB\" }]\n";
    let refuse = |from: &str, to: &str| refusal(&format!("{fabric}{flows}").replacen(from, to, 1), "uet.toml");
    assert_eq!(refuse("cc = \"nscc\"", "cc = \"cubic\""), "classes.default.cc: transport = \"uet\" runs UET's congestion control; expected \"nscc\", \"rccc\" or \"constant\", got \"cubic\"");
    let tcp = format!("{fabric}{flows}").replacen("transport = \"uet\"", "transport = \"tcp\"", 1).replacen("[uet]\nframing = 0\n", "", 1);
    assert_eq!(
        refusal(&tcp, "uet.toml"),
        "classes.default.cc: \"nscc\" is UET's congestion control and runs only with transport = \"uet\"; this class has transport = \"tcp\""
    );
    assert!(refuse("cc = \"nscc\"", "cc = \"nsc\"").contains("did you mean `nscc`?"));
    assert_eq!(
        refusal(&tcp.replacen("cc = \"nscc\"", "cc = \"rccc\"", 1), "uet.toml"),
        "classes.default.cc: \"rccc\" is UET's congestion control and runs only with transport = \"uet\"; this class has transport = \"tcp\""
    );
    assert!(refuse("cc = \"nscc\"", "cc = \"nscc\"\nparams = { receiver_cc = 1 }").contains("receiver_cc"));
    assert_eq!(refuse("framing = 0", "framing = 0\npaths = 100"), "uet.paths: expected a power of two from 1 to 32768 entropy values, got 100");
    assert!(refuse("framing = 0", "framing = 0\nload_balancing_algo = \"ecmp\"").starts_with("uet.load_balancing_algo: expected \"oblivious\""));
    assert_eq!(
        refuse("transport = \"uet\"", "transport = \"uet\"\nspray = true"),
        "classes.default.spray: a UET class chooses each packet's path itself (uet.load_balancing_algo); remove spray"
    );
    assert!(refuse("[uet]", "[tlt]\nenabled = true\n[uet]").starts_with("tlt.enabled: TLT colours TCP and RDMA packets"));
    assert!(refuse("[uet]", "[output.pcap]\nports = [\"sw0\"]\n[uet]").starts_with("output.pcap: "));
    assert!(refuse("transport = \"uet\"", "transport = \"uet\"\nfallback = \"cubic\"").starts_with("classes.default.fallback: "));
}

#[test]
fn reps_without_trimming_and_uet_settings_without_uet_are_refused() {
    let fabric = fabric();
    let flows = "[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0, dst = 13, size = \"1MB\" }]\n";
    let untrimmed = format!("{fabric}{flows}").replacen("[switch.trim]\nthreshold = \"178450B\"\nheader = \"64B\"\n", "", 1);
    assert!(run_ok(&untrimmed));
    let reps = untrimmed.replacen("framing = 0", "framing = 0\nload_balancing_algo = \"reps\"", 1);
    assert!(refusal(&reps, "uet.toml").starts_with("uet.load_balancing_algo: \"reps\" freezes its paths on a timeout only where switches trim"));
    let tcp = format!("{fabric}{flows}").replacen("cc = \"nscc\"\ntransport = \"uet\"", "cc = \"cubic\"", 1);
    assert!(refusal(&tcp, "uet.toml").starts_with("uet: these settings are for classes with transport = \"uet\""));
    let proxy = format!("{fabric}[[workloads]]\nkind = \"proxy\"\nclients = [0]\nproxy = 1\nbackends = [2]\n");
    assert!(refusal(&proxy, "uet.toml").contains("runs on UET; use TCP classes with a proxy"));
}

fn run_ok(text: &str) -> bool {
    let w = run_text(text, &[]);
    w.flows().iter().all(|f| f.finish.is_some_and(|t| t > Time::ZERO))
}
