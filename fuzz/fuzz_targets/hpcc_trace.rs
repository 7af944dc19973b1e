#![no_main]
//! `cargo +nightly fuzz run hpcc_trace`: sluice_sim::fuzzing::hpcc_trace on arbitrary bytes.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = sluice_sim::fuzzing::hpcc_trace(data);
});
