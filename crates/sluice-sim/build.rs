//! Compiles the portable congestion-control algorithms (`src/cc/portable/*.c`) with the system C
//! compiler into the simulator; clang is not needed. A second copy, built with a changed constant
//! and `mutant_`-prefixed names, is the negative control of the kernel differential test.

const DIR: &str = "src/cc/portable";
/// The portable algorithms, one C file each.
const ALGORITHMS: &[&str] = &["newreno", "dctcp", "ecn_int", "retcp"];
/// Each algorithm's exported symbols, `<name>_<suffix>`.
const SYMBOLS: &[&str] = &["init", "on_ack", "on_event", "vars", "defaults", "flags", "state_size"];

fn build() -> cc::Build {
    let mut b = cc::Build::new();
    b.include(DIR).std("c11").warnings(true).extra_warnings(true).flag_if_supported("-Wno-unused-parameter");
    b
}

fn main() {
    println!("cargo:rerun-if-changed={DIR}");
    println!("cargo:rerun-if-changed=build.rs");
    let files: Vec<String> = ALGORITHMS.iter().map(|a| format!("{DIR}/{a}.c")).collect();
    build().files(&files).compile("sluice_cc");

    let mut mutant = build();
    // A loss multiplies the window by 1/4 instead of 1/2, and an ECN cut takes alpha / 4 instead
    // of alpha / 2, in this copy only: ECN+INT's windows seldom lose above the floor, where the
    // loss constant shows, but are cut by ECN all the time.
    mutant.define("SCC_LOSS_SHIFT", "2");
    mutant.define("DCTCP_CUT_SHIFT", "2");
    for a in ALGORITHMS {
        for s in SYMBOLS {
            mutant.define(&format!("{a}_{s}"), format!("mutant_{a}_{s}").as_str());
        }
    }
    mutant.files(&files).compile("sluice_cc_mutant");
}
