#![no_main]
//! `cargo +nightly fuzz run report`: the report's readers on arbitrary files. The first byte picks
//! the file (modulo the number of known files), the rest is its content.

#[allow(dead_code)]
#[path = "../../crates/sluice-cli/src/report/inputs.rs"]
mod inputs;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some((&pick, body)) = data.split_first() {
        let name = inputs::KNOWN_FILES[pick as usize % inputs::KNOWN_FILES.len()];
        let _ = inputs::check_file(name, body);
    }
});
