//! Replays every fuzz corpus and crash file (fuzz/corpus/<target>/, fuzz/artifacts/<target>/)
//! through the entry points the fuzz targets call, on stable Rust: each must return without
//! panicking. The bundled inputs the seed corpora came from must also be accepted.

use sluice_sim::fuzzing;
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_and_crash_file_returns_without_panicking() {
    let mut replayed = 0;
    for (name, target) in fuzzing::TARGETS {
        let corpus = files_in(&fuzz_dir().join("corpus").join(name));
        assert!(!corpus.is_empty(), "fuzz/corpus/{name} has no seed");
        for file in corpus.iter().chain(&files_in(&fuzz_dir().join("artifacts").join(name))) {
            let data = std::fs::read(file).unwrap();
            let outcome = std::panic::catch_unwind(|| target(&data));
            assert!(outcome.is_ok(), "{name} panicked on {}", file.display());
            replayed += 1;
        }
    }
    assert!(replayed >= 20, "only {replayed} files replayed");
}

#[test]
fn the_bundled_seeds_are_valid_inputs() {
    // Seeds taken from the bundled scenarios, CDFs, traces, topologies and TCP-INT vectors all
    // pass: a target rejecting them would be fuzzing only its error paths.
    for (name, target) in fuzzing::TARGETS {
        for file in files_in(&fuzz_dir().join("corpus").join(name)) {
            let data = std::fs::read(&file).unwrap();
            if let Err(e) = target(&data) {
                panic!("{name} rejects its seed {}: {e}", file.display());
            }
        }
    }
}

#[test]
fn scenario_input_overrides_follow_the_marker() {
    let base = "[sim]\nduration = \"1ms\"\n[topology]\nkind = \"star\"\nhosts = 2\nhost_rate = \"10Gbps\"\nhost_delay = \"1us\"\n[[workloads]]\nkind = \"flows\"\nflows = [{ src = 0, dst = 1, size = \"1KB\" }]\n";
    assert_eq!(fuzzing::scenario(base.as_bytes()), Ok(()));
    let bad = format!("{base}{}workloads.0.kind=nope\n", fuzzing::OVERRIDES);
    let err = fuzzing::scenario(bad.as_bytes()).unwrap_err();
    assert!(err.contains("--set workloads.0.kind=nope") && err.contains("workloads[0].kind"), "{err}");
}
