#![no_main]
//! `cargo +nightly fuzz run tcp_int`: sluice_sim::fuzzing::tcp_int on arbitrary bytes.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = sluice_sim::fuzzing::tcp_int(data);
});
