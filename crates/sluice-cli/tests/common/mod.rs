//! What the platform's tests share (admin, agent, fleet): the binary, an etcd cluster on loopback
//! started and stopped by the test, `sluice admin apply` as an operator runs it, and the agent
//! log's time stamp.
#![allow(dead_code)]

use sluice_platform::etcd::{Connect, Etcd};
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime};

/// The `sluice` binary under test.
pub fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

/// A process's output as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Waits up to `secs` for `cond`.
pub fn wait_for(what: &str, secs: u64, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(secs), "timed out after {secs} s waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// An etcd cluster of `n` members on loopback (and, for the partition, on `also`), each a child
/// process with its data in a temporary directory; dropped: every member killed.
pub struct Cluster {
    dir: tempfile::TempDir,
    members: Vec<Option<Child>>,
    base: u16,
    also: Option<&'static str>,
}

impl Cluster {
    pub fn start(n: usize, base: u16, also: Option<&'static str>) -> Cluster {
        let mut c = Cluster { dir: tempfile::tempdir().unwrap(), members: (0..n).map(|_| None).collect(), base, also };
        for i in 0..n {
            c.run(i);
        }
        let etcd = c.client();
        wait_for("etcd's quorum", 20, || etcd.get("/probe", None).is_ok());
        c
    }

    pub fn client_port(&self, i: usize) -> u16 {
        self.base + i as u16
    }

    /// Client URLs on `host`.
    pub fn urls(&self, host: &str) -> String {
        (0..self.members.len()).map(|i| format!("http://{host}:{}", self.client_port(i))).collect::<Vec<_>>().join(",")
    }

    pub fn client(&self) -> Etcd {
        Etcd::new(&Connect { endpoints: self.urls("127.0.0.1").split(',').map(String::from).collect(), insecure_plaintext: true, ..Connect::default() })
            .unwrap()
    }

    /// Starts member `i` (again: its data directory keeps it in the cluster).
    pub fn run(&mut self, i: usize) {
        let peers: Vec<String> = (0..self.members.len()).map(|j| format!("m{j}=http://127.0.0.1:{}", self.base + 100 + j as u16)).collect();
        let mut listen = format!("http://127.0.0.1:{}", self.client_port(i));
        if let Some(ip) = self.also {
            listen.push_str(&format!(",http://{ip}:{}", self.client_port(i)));
        }
        let log = std::fs::File::create(self.dir.path().join(format!("m{i}.log"))).unwrap();
        let child = Command::new("etcd")
            .args(["--name", &format!("m{i}"), "--data-dir", self.dir.path().join(format!("m{i}")).to_str().unwrap()])
            .args(["--listen-client-urls", &listen, "--advertise-client-urls", &format!("http://127.0.0.1:{}", self.client_port(i))])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{}", self.base + 100 + i as u16)])
            .args(["--initial-advertise-peer-urls", &format!("http://127.0.0.1:{}", self.base + 100 + i as u16)])
            .args(["--initial-cluster", &peers.join(","), "--initial-cluster-token", "sluice-fleet-test"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting etcd");
        self.members[i] = Some(child);
    }

    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

/// Policy version `k`: the storage class's DCTCP gain changes with it.
pub fn policy(k: u64) -> String {
    format!(
        "labels = [\"rack\"]\n[classes.storage]\ncc = \"dctcp\"\nparams = {{ g = {} }}\nmatch = {{ dst_ports = [7301] }}\n\
         [classes.default]\ncc = \"cubic\"\n[groups.rack_b]\nhosts = {{ rack = \"b\" }}\nclasses.storage = {{ cc = \"bbr\" }}\n",
        0.0625 + k as f64 / 10_000.0
    )
}

/// Writes policy `k` with `sluice admin apply` as an operator does; returns when it was started.
pub fn apply(dir: &Path, urls: &str, k: u64) -> u64 {
    let file = dir.join(format!("v{k}.toml"));
    std::fs::write(&file, policy(k)).unwrap();
    let t0 = now_ms();
    let o = sluice().args(["admin", "apply", file.to_str().unwrap(), "--etcd", urls, "--insecure-plaintext"]).output().unwrap();
    assert!(o.status.success(), "admin apply v{k}: {}{}", text(&o.stdout), text(&o.stderr));
    assert!(text(&o.stdout).contains(&format!("version {k} applied")), "{}", text(&o.stdout));
    t0
}

/// Whether an agent's log line starts with its UTC time, `2026-12-02T06:45:41.123Z `.
pub fn stamped(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 25 && b[4] == b'-' && b[10] == b'T' && b[23] == b'Z' && b[24] == b' ' && b[..4].iter().all(u8::is_ascii_digit)
}
