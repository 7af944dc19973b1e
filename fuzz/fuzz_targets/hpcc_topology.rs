#![no_main]
//! `cargo +nightly fuzz run hpcc_topology`: sluice_sim::fuzzing::hpcc_topology on arbitrary bytes.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = sluice_sim::fuzzing::hpcc_topology(data);
});
