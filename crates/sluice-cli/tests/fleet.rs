//! Fleet mode against a real etcd: a three-member cluster on loopback, started by the test and
//! stopped after; `sluice admin` as the operator runs it; agents as processes. One agent enforces
//! (the kernel's class table); the others are dry-run agents, because the kernel's congestion
//! control names are one namespace per machine, so a second enforcing agent on this kernel would
//! share the first one's tables; their path from etcd to the policy's checks is the same. One
//! dry-run agent runs in a network namespace so that the test can cut it off.
//!
//! `cargo test --release -p sluice-cli --features host --test fleet -- --nocapture` prints the
//! distribution of the time a change takes to reach every agent (docs/admin.md).
#![cfg(feature = "host")]

mod common;

use common::{apply, now_ms, sluice, stamped, text, wait_for, Cluster};
use sluice_host::kernel::sockops;
use sluice_host::sys;
use sluice_platform::admin;
use sluice_platform::applied;
use sluice_platform::etcd::{Connect, Etcd};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn need_etcd() -> bool {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: the fleet tests need root (BPF, network namespaces)");
        return false;
    }
    assert!(
        Command::new("etcd").arg("--version").output().is_ok_and(|o| o.status.success()),
        "the fleet tests need etcd (Debian: apt-get install etcd-server etcd-client); tools/test-all installs it"
    );
    true
}

/// A running `sluice agent --etcd`; dropped: killed.
struct FleetAgent {
    name: String,
    state: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
}

impl FleetAgent {
    fn start(name: &str, state: &Path, args: Vec<String>) -> FleetAgent {
        let mut a = FleetAgent { name: name.into(), state: state.to_path_buf(), args, child: None };
        a.spawn();
        a
    }

    fn spawn(&mut self) {
        std::fs::create_dir_all(&self.state).unwrap();
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.state.join("agent.log")).unwrap();
        self.child = Some(
            Command::new(&self.args[0]).args(&self.args[1..]).stdout(log.try_clone().unwrap()).stderr(log).spawn().expect("starting the agent"),
        );
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// (version, applied at ms) of every version the agent put in force, in order.
    fn applied(&self) -> Vec<(u64, u64)> {
        let log = std::fs::read_to_string(self.state.join("fleet-applied.log")).unwrap_or_default();
        log.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                Some((f.first()?.parse().ok()?, f.get(2)?.parse().ok()?))
            })
            .collect()
    }

    fn version(&self) -> u64 {
        self.applied().last().map_or(0, |v| v.0)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.state.join("agent.log")).unwrap_or_default()
    }

    /// Waits up to `secs` for the log to say `what`; on a timeout, shows the log.
    fn wait_log(&self, what: &str, secs: u64) {
        let start = Instant::now();
        while !self.log().contains(what) {
            assert!(start.elapsed() < Duration::from_secs(secs), "{} did not say {what:?} within {secs} s:\n{}", self.name, self.log());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for FleetAgent {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A network namespace joined to this one by a veth pair (10.231.0.1 here, .2 there); dropped:
/// deleted.
struct Netns;

const NS: &str = "sluice-fleet";
const HERE: &str = "10.231.0.1";

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().expect("running ip");
    assert!(o.status.success(), "ip {}: {}", args.join(" "), text(&o.stderr));
}

impl Netns {
    fn new() -> Netns {
        let _ = Command::new("ip").args(["netns", "del", NS]).output();
        let _ = Command::new("ip").args(["link", "del", "sfleet0"]).output();
        ip(&["netns", "add", NS]);
        ip(&["link", "add", "sfleet0", "type", "veth", "peer", "name", "sfleet1"]);
        ip(&["link", "set", "sfleet1", "netns", NS]);
        ip(&["addr", "add", &format!("{HERE}/30"), "dev", "sfleet0"]);
        ip(&["link", "set", "sfleet0", "up"]);
        ip(&["-n", NS, "addr", "add", "10.231.0.2/30", "dev", "sfleet1"]);
        ip(&["-n", NS, "link", "set", "sfleet1", "up"]);
        ip(&["-n", NS, "link", "set", "lo", "up"]);
        Netns
    }

    /// Cuts the namespace off, or joins it again.
    fn cut(&self, off: bool) {
        ip(&["link", "set", "sfleet0", if off { "down" } else { "up" }]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", "sfleet0"]).output();
        let _ = Command::new("ip").args(["netns", "del", NS]).output();
    }
}

/// The enforcing agent's cgroup; dropped: the agent unloaded.
struct Enforcing {
    cgroup: PathBuf,
    home: PathBuf,
}

impl Enforcing {
    /// A loopback connection on `port` opened from the agent's cgroup, so both ends join their
    /// class; this process leaves the cgroup after, so the processes it starts do not.
    fn pair(&self, port: u16) -> (TcpStream, TcpStream) {
        sys::cgroup_join(&self.cgroup, std::process::id()).unwrap();
        let p = pair(port);
        sys::cgroup_join(&self.home, std::process::id()).unwrap();
        p
    }
}

impl Drop for Enforcing {
    fn drop(&mut self) {
        let _ = sys::cgroup_join(&self.home, std::process::id());
        if let Err(e) = sockops::unload() {
            eprintln!("cleanup: unloading the agent: {e:#}");
        }
        let _ = std::fs::remove_dir(&self.cgroup);
    }
}

/// A loopback connection on `port` (client, server).
fn pair(port: u16) -> (TcpStream, TcpStream) {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("listening");
    let c = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connecting");
    let (s, _) = l.accept().expect("accepting");
    (c, s)
}

/// Moves 1 MB each way: the connection is alive.
fn exchange(p: &mut (TcpStream, TcpStream)) {
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut w = p.0.try_clone().unwrap();
    let sent = data.clone();
    let writer = std::thread::spawn(move || w.write_all(&sent).unwrap());
    let mut got = vec![0u8; data.len()];
    p.1.read_exact(&mut got).unwrap();
    writer.join().unwrap();
    assert!(got == data, "the bytes arrived changed");
}

/// Waits up to `secs` for every agent of `agents` to run version `v`; on a timeout, shows what
/// each ran and said.
fn wait_agents(agents: &[FleetAgent], v: u64, secs: u64) {
    let start = Instant::now();
    while !agents.iter().all(|a| a.version() == v) {
        if start.elapsed() > Duration::from_secs(secs) {
            let seen: Vec<String> = agents.iter().map(|a| format!("{} at {}:\n{}", a.name, a.version(), a.log())).collect();
            panic!("timed out after {secs} s waiting for version {v}:\n{}", seen.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn percentile(sorted: &[u64], q: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// A change reaches every agent within a second (over 100 changes); one member killed changes
/// nothing; etcd stopped entirely leaves every agent enforcing and every connection running,
/// and they catch up without skipping a version when it returns; an agent killed and restarted
/// mid-change ends at the current version with every version in between; a partitioned agent is
/// stale after its lease and catches up when joined again; the history holds every version.
#[test]
fn changes_reach_every_agent_and_faults_lose_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !need_etcd() {
        return;
    }
    sockops::unload().expect("unloading a stale agent");
    let net = Netns::new();
    let mut etcd = Cluster::start(3, 23710, Some(HERE));
    let urls = etcd.urls("127.0.0.1");
    let client = etcd.client();
    let dir = tempfile::tempdir().unwrap();
    let start_agents = apply(dir.path(), &urls, 1);

    let home = sys::own_cgroup(Path::new(sys::CGROUP2_ROOT)).unwrap();
    let enforcing = Enforcing { cgroup: Path::new(sys::CGROUP2_ROOT).join("sluice-fleet-test"), home };
    let bin = env!("CARGO_BIN_EXE_sluice").to_string();
    let fleet = |host: &str, urls: &str, extra: &[&str]| -> Vec<String> {
        let mut v = vec![bin.clone(), "agent".into(), "--etcd".into(), urls.into(), "--insecure-plaintext".into(), "--host".into(), host.into()];
        v.extend(["--state-dir", dir.path().join(host).to_str().unwrap(), "--lease-ttl", "3", "--report-every-ms", "500"].map(String::from));
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let h0_args = ["--cgroup", enforcing.cgroup.to_str().unwrap(), "--label", "rack=a", "--window-s", &WINDOW_S.to_string()];
    let mut agents = vec![
        FleetAgent::start("h0", &dir.path().join("h0"), fleet("h0", &urls, &h0_args)),
        FleetAgent::start("h1", &dir.path().join("h1"), fleet("h1", &urls, &["--dry-run", "--label", "rack=b"])),
    ];
    let mut ns_args = vec!["ip".to_string(), "netns".into(), "exec".into(), NS.into()];
    ns_args.extend(fleet("h2", &etcd.urls(HERE), &["--dry-run", "--label", "rack=a"]));
    agents.push(FleetAgent::start("h2", &dir.path().join("h2"), ns_args));
    wait_agents(&agents, 1, 20);
    println!("three agents started and at version 1 {} ms after the first apply", now_ms() - start_agents);
    // The groups: rack b runs bbr for storage, the others dctcp.
    assert!(agents[1].log().contains("version 1 checked (dry run): default (cubic), storage (bbr)"), "{}", agents[1].log());
    assert!(agents[2].log().contains("storage (dctcp)"), "{}", agents[2].log());

    // A connection of the storage class, kept open through every fault below.
    let mut conn = enforcing.pair(7301);
    assert_eq!(sys::congestion_control(&conn.0).unwrap(), "dctcp", "the storage class's algorithm");
    exchange(&mut conn);

    // 100 changes, each awaited at every agent.
    let mut latencies = Vec::new();
    for k in 2..=101 {
        let t0 = apply(dir.path(), &urls, k);
        wait_agents(&agents, k, 10);
        latencies.extend(agents.iter().map(|a| a.applied().last().unwrap().1.saturating_sub(t0)));
    }
    latencies.sort_unstable();
    let (p50, p90, p99, max) = (percentile(&latencies, 0.5), percentile(&latencies, 0.9), percentile(&latencies, 0.99), *latencies.last().unwrap());
    println!("change to agent, 100 changes x 3 agents (ms, from `sluice admin apply` starting): p50 {p50}, p90 {p90}, p99 {p99}, max {max}");
    assert!(max < 1000, "a change took {max} ms to reach an agent: {latencies:?}");
    let a = applied::applied().unwrap().unwrap();
    assert_eq!(a.version, Some(101), "the kernel's table runs version 101");
    let g = a.classes.iter().find(|c| c.name == "storage").unwrap().params.get("g").and_then(|v| v.as_float()).unwrap();
    assert!((g - (0.0625 + 101.0 / 10_000.0)).abs() < 1e-9, "storage's g is version 101's: {g}");
    exchange(&mut conn);

    // One member killed (the one every agent asks first): nothing is noticed.
    etcd.kill(0);
    let t0 = apply(dir.path(), &urls, 102);
    wait_agents(&agents, 102, 10);
    let slowest = agents.iter().map(|a| a.applied().last().unwrap().1 - t0).max().unwrap();
    println!("with one member killed, version 102 reached every agent in {slowest} ms");
    exchange(&mut conn);

    // etcd stopped entirely: every agent keeps enforcing, connections run, new ones get their class.
    etcd.kill(1);
    etcd.kill(2);
    std::thread::sleep(Duration::from_secs(2));
    assert!(agents.iter_mut().all(|a| a.child.as_mut().unwrap().try_wait().unwrap().is_none()), "an agent exited without etcd");
    assert_eq!(applied::applied().unwrap().unwrap().version, Some(102));
    exchange(&mut conn);
    let fresh = enforcing.pair(7302);
    assert_eq!(sys::congestion_control(&fresh.0).unwrap(), "cubic", "a new connection still joins its class without etcd");
    drop(fresh);
    // An agent restarted while etcd is away runs the version it kept on disk.
    let before = agents[1].applied();
    // A dry run says what it checks, never that anything is in force.
    agents[1].wait_log("etcd does not answer; version 102 stays the one checked (a dry run", 10);
    assert!(!agents[1].log().contains("in force"), "a dry-run agent spoke as if it enforced:\n{}", agents[1].log());
    let checked = |a: &FleetAgent| a.log().matches("version 102 checked (dry run)").count();
    let before_restart = checked(&agents[1]);
    agents[1].kill();
    agents[1].spawn();
    wait_for("the restarted agent running its kept version", 10, || checked(&agents[1]) == before_restart + 1);
    assert!(agents[1].log().contains("running version 102 from"), "{}", agents[1].log());
    std::thread::sleep(Duration::from_millis(500));
    assert!(agents[1].child.as_mut().unwrap().try_wait().unwrap().is_none(), "the agent exited without etcd:\n{}", agents[1].log());
    assert_eq!(agents[1].applied(), before, "a restart logs the version it kept once, not again");
    for i in 0..3 {
        etcd.run(i);
    }
    wait_for("etcd back", 20, || client.get("/probe", None).is_ok());
    for k in 103..=104 {
        apply(dir.path(), &urls, k);
    }
    wait_agents(&agents, 104, 15);

    // An agent killed mid-change and restarted: it runs every version it missed, in order.
    agents[1].kill();
    for k in 105..=106 {
        apply(dir.path(), &urls, k);
    }
    agents[1].spawn();
    wait_agents(&agents, 106, 10);

    // A partitioned agent: stale after its lease, and at the current version once joined again.
    net.cut(true);
    apply(dir.path(), &urls, 107);
    wait_agents(&agents[..2], 107, 10);
    wait_for("the cut-off host reported stale", 15, || {
        admin::status(&client, "/sluice", 0.05).unwrap().hosts.iter().any(|h| h.report.host == "h2" && h.flags.contains(&"stale".to_string()))
    });
    let s = admin::status(&client, "/sluice", 0.05).unwrap();
    let h2 = s.hosts.iter().find(|h| h.report.host == "h2").unwrap();
    assert!(!h2.live && h2.lag_versions == 1 && h2.flags == ["behind", "stale", "dry-run"], "{h2:?}");
    let flags = |s: &admin::FleetStatus| -> Vec<Vec<String>> { s.hosts.iter().map(|h| h.flags.clone()).collect() };
    assert_eq!(flags(&s)[..2].to_vec(), vec![vec![], vec!["dry-run".to_string()]], "{s:?}");
    assert!(s.hosts.iter().filter(|h| h.report.host != "h2").all(|h| h.live), "{s:?}");
    let out = sluice().args(["admin", "status", "--etcd", &urls, "--insecure-plaintext"]).output().unwrap();
    assert!(text(&out.stdout).lines().any(|l| l.starts_with("h2 ") && l.ends_with("behind, stale, dry-run")), "{}", text(&out.stdout));
    net.cut(false);
    wait_for("the joined host at 107 and live", 20, || {
        agents[2].version() == 107 && admin::status(&client, "/sluice", 0.05).unwrap().hosts.iter().all(|h| h.live && h.flags.len() == usize::from(h.report.dry_run))
    });

    // The enforcing agent's own view: the version once, its fleet figures, a stamp on each line.
    let status = text(&sluice().args(["agent", "status"]).output().unwrap().stdout);
    let line = status.lines().find(|l| l.starts_with("policy: ")).unwrap_or_default();
    assert!(line.starts_with("policy: etcd /sluice/policy version 107 (") && line.matches("version").count() == 1, "{status}");
    assert!(status.contains("fleet: host h0, version 107 in force, latest seen 107,") && !status.contains("failing"), "{status}");
    assert!(agents.iter().flat_map(|a| a.log().lines().map(String::from).collect::<Vec<_>>()).all(|l| stamped(&l)), "a log line without a time");

    // Clients whose peer runs no agent fall back: the fleet view flags a host over the
    // threshold, over the agent's window only: the flag clears once the window has passed.
    let outside = TcpListener::bind((Ipv4Addr::LOCALHOST, 7303)).unwrap();
    let fallen = Instant::now();
    sys::cgroup_join(&enforcing.cgroup, std::process::id()).unwrap();
    let silent: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect((Ipv4Addr::LOCALHOST, 7303)).unwrap()).collect();
    sys::cgroup_join(&enforcing.home, std::process::id()).unwrap();
    let accepted: Vec<_> = (0..5).map(|i| enforcing.pair(7310 + i)).collect();
    wait_for("h0's report of 10 fallbacks and 5 acceptances", 5, || {
        admin::status(&client, "/sluice", 0.05).unwrap().hosts.iter().any(|h| h.report.host == "h0" && h.fallbacks == 10 && h.negotiations >= 15)
    });
    let h0 = |threshold: f64| admin::status(&client, "/sluice", threshold).unwrap().hosts.into_iter().find(|h| h.report.host == "h0").unwrap();
    let flagged = h0(0.05);
    assert_eq!(flagged.flags, ["falls_back"]);
    let share = 10.0 / flagged.negotiations as f64;
    assert!(h0(share + 0.01).flags.is_empty(), "{:?}", h0(share + 0.01));
    let out = sluice().args(["admin", "status", "--etcd", &urls, "--insecure-plaintext", "--json"]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["version"], 107);
    assert_eq!(json["hosts"][0]["flags"][0], "falls_back", "{json}");
    assert_eq!(json["hosts"][1]["flags"], serde_json::json!(["dry-run"]), "the JSON flags a dry run as the table does: {json}");
    drop((silent, outside, accepted));
    wait_for("falls_back cleared after the window", WINDOW_S + 10, || h0(0.05).flags.is_empty());
    assert!(fallen.elapsed() >= Duration::from_secs(WINDOW_S), "the flag cleared {:?} after the fallbacks, within the window", fallen.elapsed());
    let totals = h0(0.05).report.classes.iter().flat_map(|c| c.negotiated.iter().map(|(k, n)| (k.clone(), *n)).collect::<Vec<_>>()).collect::<Vec<_>>();
    let fell_back: u64 = totals.iter().filter(|(k, _)| k != "accepted").map(|(_, n)| n).sum();
    assert!(fell_back >= 10 && totals.iter().map(|(_, n)| n).sum::<u64>() >= 15, "the totals since the agent loaded stay: {totals:?}");

    // Nothing lost: every agent ran every version from its first, in order, and logged each
    // once, restarts included; the history has all.
    for a in &agents {
        let versions: Vec<u64> = a.applied().iter().map(|v| v.0).collect();
        assert_eq!(versions, (1..=107).collect::<Vec<_>>(), "{} skipped or repeated a version", a.name);
    }
    let (history, compacted) = admin::history(&client, "/sluice").unwrap();
    assert_eq!(compacted, 0);
    assert_eq!(history.iter().map(|v| v.doc.version).collect::<Vec<_>>(), (1..=107).rev().collect::<Vec<_>>());
    exchange(&mut conn);
    drop(conn);
    // A dry run stops without claiming the kernel holds anything.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(agents[1].child.as_ref().unwrap().id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let _ = agents[1].child.as_mut().unwrap().wait();
    assert!(agents[1].log().contains("stopped (a dry run: the kernel's tables were never written)"), "{}", agents[1].log());
    drop(agents);
    drop(enforcing);
    drop(net);
}

/// The window over which h0 reports its negotiations.
const WINDOW_S: u64 = 8;


/// Runs a command that must succeed.
fn must(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(o.status.success(), "{cmd:?}: {}{}", text(&o.stdout), text(&o.stderr));
    text(&o.stdout)
}

/// A CA and a certificate it signs for 127.0.0.1, made with openssl in `dir` under `name`.
fn certificates(dir: &Path, name: &str) {
    let p = |f: &str| dir.join(format!("{name}-{f}")).to_str().unwrap().to_string();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    must(Command::new("openssl").args(["req", "-x509"]).args(ec).args(["-keyout", &p("ca.key"), "-out", &p("ca.pem"), "-days", "2", "-subj", "/CN=sluice test CA"]));
    must(Command::new("openssl").arg("req").args(ec).args(["-keyout", &p("server.key"), "-out", &p("server.csr"), "-subj", "/CN=etcd"]));
    std::fs::write(p("san.ext"), "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n").unwrap();
    must(Command::new("openssl").args(["x509", "-req", "-in", &p("server.csr"), "-CA", &p("ca.pem"), "-CAkey", &p("ca.key"), "-CAcreateserial"]).args([
        "-out",
        &p("server.pem"),
        "-days",
        "2",
        "-extfile",
        &p("san.ext"),
    ]));
}

/// A one-member etcd with users and roles as docs/security.md sets them up, over TLS (the
/// "good" CA in the directory signed its certificate) or plain HTTP, authentication still off;
/// dropped: killed.
struct Secured {
    member: Child,
    url: String,
    dir: PathBuf,
    tls: bool,
}

impl Secured {
    fn start(d: &Path, tls: bool, port: u16) -> Secured {
        let f = |n: &str| d.join(n).to_str().unwrap().to_string();
        let url = format!("{}://127.0.0.1:{port}", if tls { "https" } else { "http" });
        let peer = format!("http://127.0.0.1:{}", port + 100);
        let mut etcd = Command::new("etcd");
        etcd.args(["--name", "t", "--data-dir", &f("data"), "--listen-client-urls", &url, "--advertise-client-urls", &url])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer, "--initial-cluster", &format!("t={peer}")])
            .stdout(std::fs::File::create(d.join("etcd.log")).unwrap())
            .stderr(std::fs::File::create(d.join("etcd.err")).unwrap());
        if tls {
            certificates(d, "good");
            certificates(d, "other");
            etcd.args(["--cert-file", &f("good-server.pem"), "--key-file", &f("good-server.key")]);
        }
        let c = Secured { member: etcd.spawn().unwrap(), url, dir: d.to_path_buf(), tls };
        wait_for("etcd", 20, || c.ctl(&["endpoint", "health"]).output().is_ok_and(|o| o.status.success()));
        // docs/security.md's setup, command for command.
        for args in [
            &["user", "add", "root", "--new-user-password", "rootpw"][..],
            &["user", "grant-role", "root", "root"],
            &["role", "add", "sluice-admin"],
            &["role", "grant-permission", "sluice-admin", "--prefix=true", "readwrite", "/sluice/"],
            &["role", "add", "sluice-agent"],
            &["role", "grant-permission", "sluice-agent", "read", "/sluice/policy"],
            &["role", "grant-permission", "sluice-agent", "--prefix=true", "readwrite", "/sluice/hosts/"],
            &["role", "grant-permission", "sluice-agent", "--prefix=true", "readwrite", "/sluice/seen/"],
            &["user", "add", "admin", "--new-user-password", "adminpw"],
            &["user", "grant-role", "admin", "sluice-admin"],
            &["user", "add", "agent", "--new-user-password", "agentpw"],
            &["user", "grant-role", "agent", "sluice-agent"],
        ] {
            must(&mut c.ctl(args));
        }
        for (user, pw) in [("admin", "adminpw"), ("agent", "agentpw"), ("wrong", "nope")] {
            std::fs::write(d.join(user), format!("{pw}\n")).unwrap();
        }
        c
    }

    fn file(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }

    /// `etcdctl` towards the member.
    fn ctl(&self, args: &[&str]) -> Command {
        let mut c = Command::new("etcdctl");
        c.env("ETCDCTL_API", "3").args(["--endpoints", &self.url]).args(args);
        if self.tls {
            c.args(["--cacert", &self.file("good-ca.pem")]);
        }
        c
    }

    /// How sluice reaches the member: its URL, and the CA or leave for plain text.
    fn connect(&self) -> Vec<String> {
        let mut v = vec!["--etcd".to_string(), self.url.clone()];
        v.extend(if self.tls { vec!["--cacert".to_string(), self.file("good-ca.pem")] } else { vec!["--insecure-plaintext".to_string()] });
        v
    }

    /// `sluice admin ARGS` as `user` ("": none).
    fn admin(&self, user: &str, args: &[&str]) -> Output {
        let mut c = sluice();
        c.arg("admin").args(args).args(self.connect());
        if !user.is_empty() {
            c.args(["--user", user, "--password-file", &self.file(user)]);
        }
        c.output().unwrap()
    }

    fn enable_auth(&self) {
        must(&mut self.ctl(&["auth", "enable"]));
    }
}

impl Drop for Secured {
    fn drop(&mut self) {
        let _ = self.member.kill();
        let _ = self.member.wait();
    }
}

/// With authentication on, each failure says what the documentation says, within seconds:
/// no user, a wrong password, and an agent's user applying policy.
fn auth_failures_are_said(c: &Secured, policy: &Path) {
    let t = Instant::now();
    let e = text(&c.admin("", &["status"]).stderr);
    assert!(e.contains("etcd: user name is empty: etcd has authentication on; give --user NAME and --password-file FILE"), "{e}");
    let e = text(&c.admin("wrong", &["status"]).stderr);
    assert!(e.contains("etcd user wrong: authentication failed") && e.contains("check --user and --password-file"), "{e}");
    let o = c.admin("agent", &["apply", policy.to_str().unwrap()]);
    let e = text(&o.stderr);
    assert!(o.status.code() == Some(2) && e.contains("permission denied") && e.contains("sluice-admin role"), "{e}");
    assert!(!e.contains("broke off"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10), "errors took {:?}", t.elapsed());
}

/// etcd with TLS and users and roles, as docs/security.md sets it up: the admin's user writes
/// policy; an agent's user reads it and writes only its reports, so an agent cannot write
/// policy; a wrong CA, a wrong password or no user get one clear line each.
#[test]
fn tls_and_roles_keep_agents_from_writing_policy() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !need_etcd() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let c = Secured::start(d, true, 23770);
    c.enable_auth();
    let f = |n: &str| c.file(n);
    let url = c.url.as_str();
    let policy = d.join("p.toml");
    std::fs::write(&policy, policy_text()).unwrap();
    let o = c.admin("admin", &["apply", policy.to_str().unwrap()]);
    assert!(o.status.success() && text(&o.stdout).contains("version 1 applied"), "{}{}", text(&o.stdout), text(&o.stderr));

    // The agent's user: cannot apply, from the CLI or the client itself.
    let changed = d.join("changed.toml");
    std::fs::write(&changed, policy_text().replace("cubic", "bbr")).unwrap();
    let agent_client = Etcd::new(&Connect {
        endpoints: vec![url.into()],
        cacert: Some(d.join("good-ca.pem")),
        user: Some(("agent".into(), d.join("agent"))),
        ..Connect::default()
    })
    .unwrap();
    let (kv, _) = agent_client.get_latest("/sluice/policy").unwrap();
    let kv = kv.expect("the agent reads the policy");
    let forged = agent_client.put_if_unchanged("/sluice/policy", kv.mod_revision, b"{}", &[]).unwrap_err();
    assert!(forged.downcast_ref::<sluice_platform::etcd::EtcdError>().is_some_and(|e| e.is_permission_denied()), "{forged:#}");
    assert!(agent_client.delete("/sluice/policy").is_err(), "an agent may not delete the policy");

    // An agent under that user runs the policy and reports.
    let state = d.join("agent-state");
    let mut a = FleetAgent::start(
        "tls",
        &state,
        [env!("CARGO_BIN_EXE_sluice"), "agent", "--dry-run", "--host", "tls-host", "--etcd", url, "--cacert", &f("good-ca.pem")]
            .iter()
            .map(|s| s.to_string())
            .chain(["--user", "agent", "--password-file", &f("agent"), "--state-dir", state.to_str().unwrap()].map(String::from))
            .collect(),
    );
    wait_agents(std::slice::from_ref(&a), 1, 10);
    wait_for("the agent's report", 10, || {
        let o = c.admin("admin", &["status", "--json"]);
        text(&o.stdout).contains("\"host\": \"tls-host\"")
    });
    a.kill();

    // Bad credentials and certificates: one line each, within seconds; a wrong CA keeps its
    // hint with a user as without.
    auth_failures_are_said(&c, &changed);
    for user in [&[][..], &["--user", "admin", "--password-file", &f("admin")]] {
        let o = sluice().args(["admin", "history", "--etcd", url, "--cacert", &f("other-ca.pem")]).args(user).output().unwrap();
        let e = text(&o.stderr);
        assert!(e.contains("TLS failed") && e.contains("invalid peer certificate") && e.contains("check that --cacert signed"), "{user:?}: {e}");
    }
}

/// Over plain HTTP (`--insecure-plaintext`), etcd 3.4's gateway ends each error reply in a
/// trailer: every authentication failure reads as over TLS. An agent without credentials when
/// authentication is turned on says why in its log, its status and its metrics, lets its lease
/// lapse so the fleet view shows it stale within the lease's time, and recovers when it can
/// report again.
#[test]
fn plain_http_with_authentication_reads_as_tls_and_an_agent_that_cannot_report_shows_stale() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !need_etcd() {
        return;
    }
    sockops::unload().expect("unloading a stale agent");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let c = Secured::start(d, false, 23780);
    let policy = d.join("p.toml");
    std::fs::write(&policy, policy_text()).unwrap();
    let o = c.admin("", &["apply", policy.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));

    // An enforcing agent without --user, on a host whose /run/sluice holds another host's figures.
    std::fs::create_dir_all(sys::STATE_DIR).unwrap();
    let other = sluice_platform::fleet::Report { host: "elsewhere".into(), ..Default::default() };
    std::fs::write(Path::new(sys::STATE_DIR).join("fleet.json"), serde_json::to_vec(&other).unwrap()).unwrap();
    let home = sys::own_cgroup(Path::new(sys::CGROUP2_ROOT)).unwrap();
    let enforcing = Enforcing { cgroup: Path::new(sys::CGROUP2_ROOT).join("sluice-fleet-auth-test"), home };
    let state = d.join("agent-state");
    let mut args: Vec<String> = [env!("CARGO_BIN_EXE_sluice"), "agent", "--host", "plain-host"].map(String::from).into();
    args.extend(c.connect());
    args.extend(["--state-dir", state.to_str().unwrap(), "--cgroup", enforcing.cgroup.to_str().unwrap()].map(String::from));
    args.extend(["--lease-ttl", "3", "--report-every-ms", "500"].map(String::from));
    let a = FleetAgent::start("plain", &state, args);
    wait_agents(std::slice::from_ref(&a), 1, 20);
    assert!(a.log().contains("/run/sluice/fleet.json holds the fleet figures of host elsewhere's agent; this agent reports as plain-host"), "{}", a.log());
    let host = |user: &str| {
        let o = c.admin(user, &["status", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        v["hosts"].as_array().and_then(|h| h.iter().find(|h| h["host"] == "plain-host").cloned())
    };
    wait_for("the agent live and well", 10, || host("").is_some_and(|h| h["live"] == true && h["flags"] == serde_json::json!([])));

    // Authentication on, then a new version: the agent can neither watch nor report.
    c.enable_auth();
    let enabled = Instant::now();
    std::fs::write(&policy, policy_text().replace("cubic", "bbr")).unwrap();
    let o = c.admin("admin", &["apply", policy.to_str().unwrap()]);
    assert!(o.status.success() && text(&o.stdout).contains("version 2 applied"), "{}{}", text(&o.stdout), text(&o.stderr));
    wait_for("the host stale within its lease", 10, || host("admin").is_some_and(|h| h["live"] == false));
    // The lease (3 s) outlives the last renewal before the first report failed (reports every
    // 500 ms, renewals every second), and etcd expires leases every 500 ms: about 4.5 s at most,
    // with 2.5 s more for a loaded machine. Without the fix the host never turns stale.
    let took = enabled.elapsed();
    println!("stale {} ms after authentication was turned on (lease 3 s)", took.as_millis());
    assert!(took < Duration::from_millis(7000), "stale {took:?} after authentication was turned on");
    let table = text(&c.admin("admin", &["status"]).stdout);
    assert!(table.lines().any(|l| l.starts_with("plain-host ") && l.contains("stale")) && table.contains("cannot write its report"), "{table}");
    a.wait_log("cannot watch /sluice/policy: etcd: user name is empty", 10);
    let log = a.log();
    assert!(
        log.contains("error: cannot write this host's report to /sluice/hosts/plain-host: etcd: user name is empty: etcd has authentication on; give --user"),
        "{log}"
    );
    assert_eq!(log.matches("cannot write this host's report").count(), 1, "said once, not at every try:\n{log}");
    let status = || text(&sluice().args(["agent", "status"]).output().unwrap().stdout);
    wait_for("the watch's failure in the agent's status", 5, || status().contains("  failing: cannot watch the policy: etcd: user name is empty"));
    let status = status();
    assert!(status.contains("fleet: host plain-host, version ") && status.contains("  failing: cannot write its report: etcd: user name is empty"), "{status}");
    let metrics = policy_metrics();
    assert!(metrics.contains("sluice_fleet_failing{what=\"watch\"} 1") && metrics.contains("sluice_fleet_failing{what=\"report\"} 1"), "{metrics}");

    // Every failure reads as over TLS.
    let third = d.join("third.toml");
    std::fs::write(&third, policy_text().replace("cubic", "reno")).unwrap();
    auth_failures_are_said(&c, &third);

    // Authentication off again: the agent catches up, reports, and is live and well.
    must(&mut c.ctl(&["--user", "root:rootpw", "auth", "disable"]));
    wait_agents(std::slice::from_ref(&a), 2, 15);
    wait_for("the agent live and well again", 10, || host("").is_some_and(|h| h["live"] == true && h["flags"] == serde_json::json!([])));
    wait_for("the agent's word that it works again", 10, || {
        let log = a.log();
        log.contains("reports reach etcd again") && log.contains("etcd serves the watch again")
    });
    assert!(policy_metrics().contains("sluice_fleet_failing{what=\"report\"} 0"));
    drop(a);
    drop(enforcing);
    assert!(!Path::new(sys::STATE_DIR).join("fleet.json").exists(), "unloading removes the fleet figures");
}

fn policy_text() -> String {
    "[classes.default]\ncc = \"cubic\"\n".into()
}

/// The policy's and the fleet's metrics as the agent exports them.
fn policy_metrics() -> String {
    let mut e = sluice_platform::prometheus::Exposition::new();
    sluice_host::service::status::policy_metrics(&mut e);
    e.into_text()
}
