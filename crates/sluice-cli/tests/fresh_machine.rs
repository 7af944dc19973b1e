//! The first README command on a machine without the Linux half's toolchain: the CLI's default
//! build must not pull in libbpf (which needs clang and libelf), must run the quickstart, must
//! have `sluice admin`, and must say how to get `sluice host` and `sluice testbed`.

use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

#[test]
fn default_build_has_no_linux_half_in_its_dependency_tree() {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "-e", "normal", "-p", "sluice-cli", "--offline", "--prefix", "none"])
        .current_dir(repo())
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8(out.stdout).unwrap();
    assert!(tree.contains("sluice-sim") && tree.contains("sluice-platform"), "the tree lists the simulator and the platform:\n{tree}");
    for native in ["libbpf-sys", "libbpf-rs", "sluice-host"] {
        assert!(!tree.contains(native), "{native} is in the default CLI's tree:\n{tree}");
    }
}

#[test]
fn default_build_runs_the_quickstart() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "scenarios/quickstart.toml", "--quiet", "--out"])
        .arg(dir.path())
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap()).unwrap();
    // The quickstart's trace has 400 flows and stops when every one has finished.
    assert_eq!(summary["flows"]["total"], 400);
    assert_eq!(summary["flows"]["completed"], 400);
}

/// `sluice admin` needs no kernel: the default build has it, and it reaches etcd or says why not.
#[test]
fn default_build_has_sluice_admin() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(["admin", "status"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code() == Some(2) && err.contains("expected --etcd URL"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(["admin", "status", "--etcd", "http://127.0.0.1:9", "--insecure-plaintext"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("etcd does not answer (http://127.0.0.1:9"), "{err}");
}

#[test]
#[cfg(not(feature = "host"))]
fn host_commands_name_the_feature_and_packages_they_need() {
    for cmd in [&["host", "status"][..], &["testbed", "up", "--hosts", "2"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(cmd).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "sluice {cmd:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        for needed in ["feature `host`", "clang", "libelf-dev", "bpftool", "--features host"] {
            assert!(err.contains(needed), "sluice {cmd:?} does not mention {needed}: {err}");
        }
    }
}
