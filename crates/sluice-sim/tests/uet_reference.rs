//! The UET transport against the UEC reference simulator (uet-htsim at 40ccb05, `htsim_uec`,
//! built and run on its own validation cases: `tests/uet_reference/README.md`), on the same
//! fabrics and the reference's own connection matrices, read as it writes them. Each case runs
//! under NSCC (`-sender_cc_only`), RCCC (`-receiver_cc_only`) and both (`-sender_cc
//! -receiver_cc`).
//!
//! Tolerances: the median flow's finish within 3% of the reference's (they agree within 1.5%),
//! the last flow's within 10% (they agree within 1.5%); packets resent within 25% where the
//! reference resends more than 1% of what it sends, and under 0.1% of them where it resends
//! fewer.

mod common;
use common::{finish_us, run_text, uet_counts, uet_reference_fabric};
use std::path::Path;

/// One row of `ref/results.csv`.
struct Reference {
    mode: String,
    case: String,
    median: f64,
    last: f64,
    new: u64,
    rtx: u64,
}

fn reference() -> Vec<Reference> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/uet_reference/ref/results.csv");
    let mut rows = csv::Reader::from_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    rows.records()
        .map(|r| {
            let r = r.unwrap();
            let num = |i: usize| r[i].parse::<f64>().unwrap();
            Reference { mode: r[0].into(), case: r[1].into(), median: num(5), last: num(7), new: num(8) as u64, rtx: num(9) as u64 }
        })
        .collect()
}

/// The scenario of one reference run: its fabric, matrix and flags.
fn scenario(mode: &str, case: &str) -> String {
    let (matrix, k) = match case {
        "one" => ("one.cm", 4),
        "incast" => ("incast.cm", 4),
        "incast_128" => ("incast_128.cm", 8),
        _ => ("perm_1024n_1024c_0u_2000000b.cm", 16),
    };
    let cc = match mode {
        "sender" => "cc = \"nscc\"",
        "rcv" => "cc = \"rccc\"",
        _ => "cc = \"nscc\"\nparams = { receiver_cc = true }",
    };
    let paths = if case.starts_with("perm") { "paths = 128\n" } else { "" };
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/uet_reference").join(matrix);
    let mut text = uet_reference_fabric(k, mode != "sender")
        + &format!(
            "{paths}[classes.default]\ntransport = \"uet\"\n{cc}\n[[workloads]]\nkind = \"trace\"\nformat = \"htsim\"\nfile = \"{}\"\n",
            file.display()
        );
    if case == "perm_1024_failed" {
        // `-failed 1`: core 0's link down to agg 0 runs at a quarter of its rate, with a quarter
        // of the queue and of the ECN thresholds (`fat_tree_topology.cpp:1013-1014, 1173-1191`).
        let link = format!("sw{}->sw{}", k * k, k * k / 2);
        text += &format!(
            "[[failures]]\nlink = \"{link}\"\nrate = 0.25\none_way = true\n\
             [switch.ports.\"{link}\".ecn]\nmode = \"red\"\nkmin = \"9337B\"\nkmax = \"36312B\"\npmax = 1.0\nmark_at = \"dequeue\"\n\
             [switch.ports.\"{link}\".trim]\nthreshold = \"44612B\"\nheader = \"64B\"\n"
        );
    }
    text
}

#[test]
fn nscc_agrees_with_the_reference() {
    agrees("sender");
}

#[test]
fn rccc_agrees_with_the_reference() {
    agrees("rcv");
}

#[test]
fn nscc_and_rccc_together_agree_with_the_reference() {
    agrees("both");
}

/// Runs every case of the reference's `mode` and checks the figures against its.
fn agrees(mode: &str) {
    let mut misses = Vec::new();
    for r in reference().into_iter().filter(|r| r.mode == mode) {
        let w = run_text(&scenario(&r.mode, &r.case), &[]);
        let mut fin = finish_us(&w);
        fin.sort_by(f64::total_cmp);
        let (median, last) = (fin[fin.len() / 2], fin[fin.len() - 1]);
        let u = uet_counts(&w);
        let (new, rtx) = (u["new"].as_u64().unwrap(), u["rtx"].as_u64().unwrap());
        let case = format!("{} {}", r.mode, r.case);
        println!("{case}: median {median:.2} ({:.2}), last {last:.2} ({:.2}), resent {rtx} ({})", r.median, r.last, r.rtx);
        assert_eq!(new, r.new, "{case}: new packets");
        let checks = [
            ((median - r.median).abs() <= 0.03 * r.median, format!("median {median:.2} µs against {:.2} (3%)", r.median)),
            ((last - r.last).abs() <= 0.10 * r.last, format!("last {last:.2} µs against {:.2} (10%)", r.last)),
            (
                if r.rtx * 100 > r.new { rtx.abs_diff(r.rtx) * 4 <= r.rtx } else { rtx * 1000 < new },
                format!("{rtx} resent against {} (25% where over 1% of packets, else under 0.1%)", r.rtx),
            ),
        ];
        misses.extend(checks.into_iter().filter(|(ok, _)| !ok).map(|(_, what)| format!("{case}: {what}")));
    }
    assert!(misses.is_empty(), "{misses:#?}");
}

/// A permutation of 1 MB messages on 32 paths over the reference's 8,192-host leaf-spine at
/// 400 Gb/s, oversubscribed `oversub` to 1 (128 leaves of 64 hosts and 16 or 8 spines,
/// `leaf_spine_8192_400g_{oversub}_to_1.topo`), under `cc`, as its `results/400g_*_to_1.txt`
/// plans run it (`-q 100 -ecn 25 75`; under credit alone, no ECN on leaf ports to hosts).
/// Returns the median and last finish in µs and the packets resent.
fn leaf_spine_8192(oversub: u32, cc: &str) -> (f64, f64, u64) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/uet_reference");
    let mut text = format!(
        "[sim]\nseed = 1\n[topology]\nkind = \"htsim_file\"\nfile = \"{}\"\n[switch]\nbuffer = \"4GB\"\n\
         [switch.ecn]\nmode = \"red\"\nkmin = \"103750B\"\nkmax = \"311250B\"\npmax = 1.0\nmark_at = \"dequeue\"\n\
         [switch.trim]\nthreshold = \"415000B\"\n[uet]\nframing = 0\npaths = 32\n\
         [classes.default]\ntransport = \"uet\"\n{cc}\n\
         [[workloads]]\nkind = \"trace\"\nformat = \"htsim\"\nfile = \"{}\"\n",
        dir.join(format!("leaf_spine_8192_400g_{oversub}_to_1.topo")).display(),
        dir.join("perm_8192n_8192c_1MB.cm").display()
    );
    if cc.contains("rccc") {
        for h in 0..8192 {
            text += &format!("[switch.ports.\"sw{}->h{h}\".ecn]\nmode = \"off\"\n", h / 64);
        }
    }
    let w = run_text(&text, &[]);
    let mut fin = finish_us(&w);
    fin.sort_by(f64::total_cmp);
    assert_eq!(fin.len(), 8192);
    ((fin[4095] + fin[4096]) / 2.0, fin[8191], uet_counts(&w)["rtx"].as_u64().unwrap())
}

/// NSCC on the 4:1 leaf-spine (`-cwnd 150 -sender_cc_only`). Its uplinks carry four times what
/// they can, so two packets in five are trimmed and resent. `htsim_uec` here: median 91.00 µs,
/// last 112.06, 829,713 resent of 2,007,040 (`tools/uet-8k.py --uet-htsim <path>
/// 400:4:0:nscc:32`); sluice gives 91.16, 110.15 and 827,686. Held to the bounds above.
#[test]
fn nscc_on_an_oversubscribed_8192_host_leaf_spine_agrees_with_the_reference() {
    let (median, last, rtx) = leaf_spine_8192(4, "cc = \"nscc\"\nparams = { cwnd = 150 }");
    assert!((median - 91.00).abs() <= 0.03 * 91.00, "median {median:.2} µs against 91.00 (3%)");
    assert!((last - 112.06).abs() <= 0.10 * 112.06, "last {last:.2} µs against 112.06 (10%)");
    assert!(rtx.abs_diff(829_713) * 4 <= 829_713, "{rtx} resent against 829,713 (25%)");
}

/// RCCC alone on the 8:1 leaf-spine (`-receiver_cc_only`), where the receivers' oversubscription
/// control (`cc/oversubscribed.rs`) is what keeps credit paced at each receiver's line rate from
/// overrunning the spines eightfold. `htsim_uec` here: median 180.30 µs, last 197.00, 1,393,379
/// resent (`tools/uet-8k.py --uet-htsim <path> 400:8:0:rccc:32`); sluice gives 180.19, 196.52
/// and 1,392,015, and without the control 224.25, 230.47 and 13.5 million. Held to the bounds
/// above.
#[test]
fn rccc_on_an_8_to_1_leaf_spine_agrees_with_the_reference() {
    let (median, last, rtx) = leaf_spine_8192(8, "cc = \"rccc\"");
    assert!((median - 180.30).abs() <= 0.03 * 180.30, "median {median:.2} µs against 180.30 (3%)");
    assert!((last - 197.00).abs() <= 0.10 * 197.00, "last {last:.2} µs against 197.00 (10%)");
    assert!(rtx.abs_diff(1_393_379) * 4 <= 1_393_379, "{rtx} resent against 1,393,379 (25%)");
}
