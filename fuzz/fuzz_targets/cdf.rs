#![no_main]
//! `cargo +nightly fuzz run cdf`: sluice_sim::fuzzing::cdf on arbitrary bytes.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = sluice_sim::fuzzing::cdf(data);
});
