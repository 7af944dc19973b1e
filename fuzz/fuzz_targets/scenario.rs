#![no_main]
//! `cargo +nightly fuzz run scenario`: sluice_sim::fuzzing::scenario on arbitrary bytes.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = sluice_sim::fuzzing::scenario(data);
});
