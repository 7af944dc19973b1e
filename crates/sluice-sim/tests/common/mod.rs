//! Helpers shared by the integration tests: build a world from scenario text, run it, and check
//! conservation on every run.
#![allow(dead_code)]

use sluice_sim::scenario;
use sluice_sim::world::World;
use std::path::Path;

/// Builds and runs a scenario given as TOML text; asserts conservation before returning.
pub fn run_text(text: &str, overrides: &[&str]) -> World {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let loaded = scenario::parse(text, "test.toml", Path::new("."), &overrides).unwrap_or_else(|e| panic!("{e}"));
    let mut world = sluice_sim::scenario::build(&loaded).unwrap_or_else(|e| panic!("{e}"));
    world.run(&mut |_| {});
    world.check_conservation().unwrap_or_else(|e| panic!("{e}"));
    world
}

/// Builds and runs a scenario file of the repository; asserts conservation.
pub fn run_file(rel: &str, overrides: &[&str]) -> World {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel);
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let loaded = scenario::load(&path, &overrides).unwrap_or_else(|e| panic!("{e}"));
    let mut world = sluice_sim::scenario::build(&loaded).unwrap_or_else(|e| panic!("{e}"));
    world.run(&mut |_| {});
    world.check_conservation().unwrap_or_else(|e| panic!("{e}"));
    world
}

/// Wire bytes of one full-size frame at MTU 1500 (payload, TCP+timestamps, IP, Ethernet framing).
pub const FRAME: f64 = 1538.0;

/// What a scenario given as TOML text (read as file `name`) is refused with: as it is read (a bad
/// key, with its line) or as it is built (a bad value). Panics if it is accepted.
pub fn refusal(text: &str, name: &str) -> String {
    let loaded = match scenario::parse(text, name, Path::new("."), &[]) {
        Ok(loaded) => loaded,
        Err(e) => return e.to_string(),
    };
    match scenario::build(&loaded) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}
