//! `sluice admin` against a real etcd, in the default build (no Linux half, no root): one member
//! on loopback, started by the test and stopped after. It needs etcd (Debian: apt-get install
//! etcd-server; tools/test-all installs it).

mod common;

use common::{apply, policy, sluice, text, Cluster};
use sluice_platform::admin;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Whether etcd is here; outside CI a machine without it skips, saying so.
fn have_etcd() -> bool {
    if Command::new("etcd").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "CI runs the admin tests: etcd must be installed (tools/test-all installs it)");
    eprintln!("skipped: the admin tests need etcd (Debian: apt-get install etcd-server etcd-client)");
    false
}

/// Two admins applying at once: one wins, the other is told and writes nothing; bad input gets
/// one clear line and nothing reaches etcd.
#[test]
fn concurrent_applies_and_bad_input_are_refused_cleanly() {
    if !have_etcd() {
        return;
    }
    let etcd = Cluster::start(1, 23760, None);
    let urls = etcd.urls("127.0.0.1");
    let client = etcd.client();
    let dir = tempfile::tempdir().unwrap();
    apply(dir.path(), &urls, 1);
    // Eight admins apply different texts at once: each write is a transaction on the version
    // read, so every one that reports success wrote a version of its own.
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let (urls, file) = (urls.clone(), dir.path().join(format!("c{i}.toml")));
            std::fs::write(&file, policy(1000 + i)).unwrap();
            std::thread::spawn(move || sluice().args(["admin", "apply", file.to_str().unwrap(), "--etcd", &urls, "--insecure-plaintext"]).output().unwrap())
        })
        .collect();
    let outs: Vec<Output> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let won = outs.iter().filter(|o| o.status.success()).count();
    for o in outs.iter().filter(|o| !o.status.success()) {
        assert!(text(&o.stderr).contains("another admin applied version"), "{}", text(&o.stderr));
    }
    let (history, _) = admin::history(&client, "/sluice").unwrap();
    assert_eq!(history.len(), 1 + won, "every success is one version, and only those");
    assert!(won >= 1);

    let run = |args: &[&str]| sluice().arg("admin").args(args).output().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "labels = [\"rack\"]\n[classes.q]\ncc = \"cubic\"\n[groups.g]\nhosts = { rak = \"b\" }\n").unwrap();
    let o = run(&["apply", bad.to_str().unwrap(), "--etcd", &urls, "--insecure-plaintext"]);
    let e = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert!(e.contains("bad.toml:5: groups.g.hosts.rak: unknown label `rak`") && e.contains("nothing was written"), "{e}");
    std::fs::write(&bad, "[classes.q]\ncc = \"dctpc\"\n").unwrap();
    let e = text(&run(&["apply", bad.to_str().unwrap(), "--etcd", &urls, "--insecure-plaintext"]).stderr);
    assert!(
        e.contains("bad.toml:2: classes.q.cc: unknown congestion control \"dctpc\"; a host runs one of: newreno, dctcp, ecn_int, retcp, reno, cubic, bbr; did you mean `dctcp`?"),
        "an unknown algorithm offers what a host runs, not the simulator's: {e}"
    );
    assert_eq!(admin::history(&client, "/sluice").unwrap().0.len(), 1 + won, "a refused policy never reaches etcd");
    // etcd not answering: a clear error within seconds.
    let t = Instant::now();
    let e = text(&run(&["status", "--etcd", "http://127.0.0.1:9", "--insecure-plaintext"]).stderr);
    assert!(e.contains("etcd does not answer") && t.elapsed() < Duration::from_secs(5), "{e}");
    let e = text(&run(&["status", "--etcd", &urls]).stderr);
    assert!(e.contains("refusing a plain-text connection") && e.contains("--insecure-plaintext"), "{e}");
    // A rollback writes the old text as a new version.
    let o = run(&["rollback", "1", "--etcd", &urls, "--insecure-plaintext"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (history, _) = admin::history(&client, "/sluice").unwrap();
    assert_eq!(history[0].doc.rollback_of, Some(1));
    assert_eq!(history[0].doc.text, history.last().unwrap().doc.text);
    assert_eq!(history[0].doc.version, 2 + won as u64);
    let e = text(&run(&["rollback", "99", "--etcd", &urls, "--insecure-plaintext"]).stderr);
    assert!(e.contains("no version 99 in etcd's history"), "{e}");
}
