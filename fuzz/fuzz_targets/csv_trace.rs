#![no_main]
//! `cargo +nightly fuzz run csv_trace`: sluice_sim::fuzzing::csv_trace on arbitrary bytes.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = sluice_sim::fuzzing::csv_trace(data);
});
