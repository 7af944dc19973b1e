//! `sluice agent`, the host's platform service, run as the operator runs it: the binary with the
//! Linux half (`cargo test -p sluice-cli --features host --test agent`, as root; tools/test-all
//! runs it). Connections are loopback pairs opened by this process from inside the agent's
//! cgroup, so what the kernel chose for each socket is read back with getsockopt.
//!
//! The tests take one lock: the agent, its pins and the algorithm names are machine-wide. Guards
//! stop the agent, unload it and leave the cgroup, also when an assertion fails.
#![cfg(feature = "host")]

mod common;

use common::stamped;
use sluice_host::kernel::{class_table, sockops};
use sluice_host::sys;
use sluice_platform::applied;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn sluice() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
}

fn run(args: &[&str]) -> Output {
    sluice().args(args).output().expect("running sluice")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Waits up to five seconds for `cond`.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(5), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running `sluice agent` on a cgroup of its own, this process in that cgroup; on drop the agent
/// is killed, everything unloaded and this process moved back.
struct Agent {
    child: Option<Child>,
    cgroup: PathBuf,
    home: PathBuf,
    dir: tempfile::TempDir,
}

impl Agent {
    fn policy(&self) -> PathBuf {
        self.dir.path().join("policy.toml")
    }

    /// Starts an agent on `policy` (written to the agent's file first).
    fn start(name: &str, policy: &str, poll_ms: u64) -> (MutexGuard<'static, ()>, Agent) {
        let g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        assert!(nix::unistd::geteuid().is_root(), "these tests need root (BPF): run them as root");
        sockops::unload().expect("unloading a stale agent");
        let cgroup = Path::new(sys::CGROUP2_ROOT).join(name);
        let home = sys::own_cgroup(Path::new(sys::CGROUP2_ROOT)).expect("own cgroup");
        let mut a = Agent { child: None, cgroup, home, dir: tempfile::tempdir().unwrap() };
        std::fs::write(a.policy(), policy).unwrap();
        a.spawn(poll_ms);
        wait_for("the agent's first policy", || applied::applied().ok().flatten().is_some_and(|p| p.generation >= 1));
        sys::cgroup_join(&a.cgroup, std::process::id()).expect("joining the agent's cgroup");
        (g, a)
    }

    fn spawn(&mut self, poll_ms: u64) {
        let child = sluice()
            .args(["agent", "--policy", self.policy().to_str().unwrap(), "--cgroup", self.cgroup.to_str().unwrap()])
            .args(["--poll-ms", &poll_ms.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting sluice agent");
        self.child = Some(child);
    }

    /// Sends a signal to the running agent.
    fn signal(&self, sig: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.as_ref().expect("a running agent").id() as i32);
        nix::sys::signal::kill(pid, sig).expect("signalling the agent");
    }

    /// Waits for the agent to exit; returns its status and what it printed.
    fn wait(&mut self) -> Output {
        self.child.take().expect("a running agent").wait_with_output().expect("the agent's exit")
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = sys::cgroup_join(&self.home, std::process::id());
        if let Err(e) = sockops::unload() {
            eprintln!("cleanup: unloading the agent: {e:#}");
        }
        let _ = std::fs::remove_dir(&self.cgroup);
    }
}

/// A loopback connection on `port`: (client, server).
fn pair(port: u16) -> (TcpStream, TcpStream) {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("listening");
    let c = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connecting");
    let (s, _) = l.accept().expect("accepting");
    (c, s)
}

fn congestion_control(s: &TcpStream) -> String {
    sys::congestion_control(s).expect("the socket's algorithm")
}

fn priority(s: &TcpStream) -> i32 {
    let mut v: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one int.
    let rc = unsafe { libc::getsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PRIORITY, (&mut v as *mut libc::c_int).cast(), &mut len) };
    assert_eq!(rc, 0, "getsockopt SO_PRIORITY");
    v
}

/// Both ends' algorithm, and the client's priority.
fn chosen(p: &(TcpStream, TcpStream)) -> (String, String, i32) {
    (congestion_control(&p.0), congestion_control(&p.1), priority(&p.0))
}

/// Moves 1 MB each way over a connection: it is alive and both ends still exchange data.
fn exchange(p: &mut (TcpStream, TcpStream)) {
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    for (a, b) in [(0, 1), (1, 0)] {
        let mut w = if a == 0 { p.0.try_clone().unwrap() } else { p.1.try_clone().unwrap() };
        let mut r = if b == 0 { p.0.try_clone().unwrap() } else { p.1.try_clone().unwrap() };
        let sent = data.clone();
        let writer = std::thread::spawn(move || w.write_all(&sent).unwrap());
        let mut got = vec![0u8; data.len()];
        r.read_exact(&mut got).unwrap();
        writer.join().unwrap();
        assert!(got == data, "the bytes arrived changed");
    }
}

/// The class's (open, opened) connection counts, by name.
fn counts(class: &str) -> (u64, u64) {
    let a = applied::applied().unwrap().expect("a policy in force");
    let c = a.classes.iter().find(|c| c.name == class).unwrap_or_else(|| panic!("no class {class} in {a:?}"));
    let n = class_table::counts(c.id).unwrap();
    (n.open(), n.opened)
}

const POLICY: &str = r#"version = 1

[classes.bulk]
cc = "newreno"
priority = 3
match = { dst_ports = ["7000-7099"] }

[classes.fast]
cc = "bbr"
match = { dst_ports = [7100] }

[classes.default]
cc = "cubic"
"#;

/// The classes pick each connection's algorithm and priority at both ends, and count them; a
/// crash and a restart of the agent leave connections, their algorithms, the policy and the
/// counts as they were; an edited file is applied to new connections only.
#[test]
fn classes_choose_algorithms_and_a_restarted_agent_keeps_every_connection() {
    let (_g, mut a) = Agent::start("sluice-test-agent-restart", POLICY, 50);
    let mut bulk = pair(7005);
    assert_eq!(chosen(&bulk), ("newreno".into(), "newreno".into(), 3), "class bulk on port 7005");
    let fast = pair(7100);
    assert_eq!(chosen(&fast), ("bbr".into(), "bbr".into(), 0), "class fast on port 7100");
    let other = pair(7200);
    assert_eq!(chosen(&other), ("cubic".into(), "cubic".into(), 0), "class default elsewhere");
    // Both ends of each loopback pair are connections of the class.
    assert_eq!(counts("bulk"), (2, 2));
    drop(other);
    wait_for("class default's pair to close", || counts("default").0 == 0);
    assert_eq!(counts("default"), (0, 2));

    // A crash: nothing of the agent's runs, and the kernel carries on.
    a.signal(nix::sys::signal::Signal::SIGKILL);
    a.wait();
    exchange(&mut bulk);
    assert_eq!(chosen(&bulk).0, "newreno");
    let second = pair(7006);
    assert_eq!(chosen(&second).0, "newreno", "with the agent down, the policy stays in force");

    a.spawn(50);
    wait_for("the restarted agent's policy", || applied::applied().ok().flatten().is_some_and(|p| p.generation >= 2));
    exchange(&mut bulk);
    assert_eq!(chosen(&bulk), ("newreno".into(), "newreno".into(), 3), "the connection kept its algorithm and priority");
    assert_eq!(counts("bulk"), (4, 4), "the counts survived the restart");

    // An edit reaches new connections; open ones keep the algorithm they started with.
    std::fs::write(a.policy(), POLICY.replace("version = 1", "version = 2").replace("cc = \"bbr\"", "cc = \"cubic\"")).unwrap();
    wait_for("version 2", || applied::applied().unwrap().unwrap().version == Some(2));
    assert_eq!(chosen(&pair(7100)).0, "cubic");
    assert_eq!(chosen(&fast).0, "bbr");

    // A bad edit is refused; the file put back to the text in force clears the refusal without
    // a signal and without applying anything again.
    let v2 = std::fs::read_to_string(a.policy()).unwrap();
    let generation = applied::applied().unwrap().unwrap().generation;
    std::fs::write(a.policy(), v2.replace("cc = \"cubic\"\nmatch", "cc = \"hpcc\"\nmatch")).unwrap();
    wait_for("the refusal", || applied::applied().unwrap().unwrap().refused.is_some());
    assert!(text(&run(&["agent", "status"]).stdout).contains("refused"));
    std::fs::write(a.policy(), &v2).unwrap();
    wait_for("the refusal cleared", || applied::applied().unwrap().unwrap().refused.is_none());
    assert_eq!(applied::applied().unwrap().unwrap().generation, generation, "the text in force was not applied again");
    assert!(!text(&run(&["agent", "status"]).stdout).contains("refused"));

    // The classes' counts in the Prometheus export.
    let mut export = sluice().args(["host", "export", "--listen", "127.0.0.1:9379", "--duration", "3"]).stderr(Stdio::null()).spawn().unwrap();
    let mut metrics = String::new();
    wait_for("the export's answer", || {
        let Ok(mut c) = TcpStream::connect((Ipv4Addr::LOCALHOST, 9379)) else { return false };
        metrics.clear();
        let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
        c.write_all(b"GET /metrics HTTP/1.0\r\nConnection: close\r\n\r\n").is_ok() && c.read_to_string(&mut metrics).is_ok() && metrics.contains("sluice_class")
    });
    export.kill().unwrap();
    export.wait().unwrap();
    let (open, opened) = counts("bulk");
    assert!(metrics.contains(&format!("sluice_class_connections_open{{class=\"bulk\",cc=\"newreno\"}} {open}")), "{metrics}");
    assert!(metrics.contains(&format!("sluice_class_connections_total{{class=\"bulk\",cc=\"newreno\"}} {opened}")), "{metrics}");
    assert!(metrics.contains("sluice_policy_version 2"), "{metrics}");

    a.signal(nix::sys::signal::Signal::SIGTERM);
    let out = a.wait();
    assert!(out.status.success(), "the agent's exit on SIGTERM: {out:?}");
    assert!(text(&out.stdout).contains("adopting the agent loaded on cgroup"), "{}", text(&out.stdout));
    let log = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(log.contains("the refusal of digest") && log.lines().all(stamped), "every line of the log has its time:\n{log}");
    assert_eq!(chosen(&pair(7050)).0, "newreno", "after SIGTERM the policy stays in force");
}

/// A policy with one bad class is refused whole, with the file, line and key; the one in force
/// stays until a good one is applied, here on SIGHUP with file polling slowed to a minute.
#[test]
fn a_bad_policy_is_refused_whole_and_sighup_applies_a_fixed_one() {
    let (_g, a) = Agent::start("sluice-test-agent-refuse", POLICY, 60_000);
    let bad = POLICY.replace("version = 1", "version = 2").replace("cc = \"newreno\"", "cc = \"cubic\"").replace("cc = \"bbr\"", "cc = \"hpcc\"");
    std::fs::write(a.policy(), &bad).unwrap();
    a.signal(nix::sys::signal::Signal::SIGHUP);
    wait_for("the refusal", || applied::applied().unwrap().unwrap().refused.is_some());
    let applied = applied::applied().unwrap().unwrap();
    let errors = applied.refused.as_ref().unwrap().errors.join("\n");
    let file = a.policy().display().to_string();
    assert!(
        errors.starts_with(&format!("{file}:9: classes.fast.cc: hpcc runs only in the simulator; on this host the algorithms are newreno, dctcp, ecn_int, retcp, reno, cubic")),
        "{errors}"
    );
    assert_eq!(applied.version, Some(1), "the policy in force");
    assert_eq!(chosen(&pair(7007)).0, "newreno", "class bulk's change in the refused policy did not apply");
    let status = text(&run(&["agent", "status"]).stdout);
    assert!(status.contains("refused") && status.contains("classes.fast.cc"), "{status}");

    std::fs::write(a.policy(), bad.replace("cc = \"hpcc\"", "cc = \"bbr\"")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(applied::applied().unwrap().unwrap().version, Some(1), "no poll within a minute: only SIGHUP reloads");
    a.signal(nix::sys::signal::Signal::SIGHUP);
    wait_for("version 2 on SIGHUP", || applied::applied().unwrap().unwrap().version == Some(2));
    assert_eq!(chosen(&pair(7008)).0, "cubic");
    assert!(applied::applied().unwrap().unwrap().refused.is_none(), "a policy applied clears the refusal");
}

/// A policy that fails a host's checks stops the agent before it loads anything; `check` says
/// the same without root. Each error names the file, line, key and what was expected.
#[test]
fn bad_policies_name_file_line_key_and_load_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[classes.q]\ncc = \"cubic\"\nmatch = { cgroups = [\"sluice-no-such-cgroup\"] }\n",
         ":3: classes.q.match.cgroups[0]: no cgroup /sys/fs/cgroup/unified/sluice-no-such-cgroup; expected a cgroup v2 directory"),
        ("[classes.q]\ncc = \"dctcp\"\nparams = { g = 2.0 }\nmatch = { dst_ports = [80] }\n", ":3: classes.q.params.g: expected a number in (0, 1], got 2"),
        ("[classes.q]\ncc = \"dctcp\"\nmatch = { dst_ports = [80] }\n[classes.r]\ncc = \"cubic\"\nmatch = { dst_ports = [\"1-100\"] }\n",
         ":6: classes.r.match: overlaps classes.q.match (dst_ports 80 in both)"),
        ("[classes.q]\ncc = \"timely\"\nmatch = { dst_ports = [80] }\n", ":2: classes.q.cc: timely runs only in the simulator"),
        ("[policy]\nbulk = \"q\"\n[classes.q]\ncc = \"cubic\"\nmatch = { dst_ports = [80] }\n", ":2: policy.bulk: say which cgroups may claim it"),
        ("[policy]\nbulk = \"q\"\n[permits]\nbulk = [\"sluice-no-such-cgroup\"]\n[classes.q]\ncc = \"cubic\"\n",
         ":4: permits.bulk[0]: no cgroup /sys/fs/cgroup/unified/sluice-no-such-cgroup; expected a cgroup v2 directory"),
    ];
    for (i, (policy, want)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("p{i}.toml"));
        std::fs::write(&path, policy).unwrap();
        let file = path.display().to_string();
        let out = run(&["agent", "check", &file]);
        assert_eq!(out.status.code(), Some(2), "{policy}");
        let err = text(&out.stderr);
        assert!(err.starts_with(&format!("error: {file}{want}")), "{policy}\ngot: {err}");
    }
    if nix::unistd::geteuid().is_root() {
        sockops::unload().unwrap();
        let path = dir.path().join("p0.toml");
        let out = run(&["agent", "--policy", path.to_str().unwrap(), "--cgroup", "/sys/fs/cgroup/unified/sluice-test-agent-bad"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(text(&out.stderr).contains("nothing was loaded or changed"), "{}", text(&out.stderr));
        assert!(sockops::state().unwrap().is_none() && !sluice_host::kernel::pins::pin("").exists(), "a refused start loaded nothing");
        assert!(!Path::new("/sys/fs/cgroup/unified/sluice-test-agent-bad").exists());
    }
}

/// The agent's cgroup and children of it, made before the agent starts (its policy names them);
/// on drop the children go, then the parent if the agent left it.
struct ChildCgroups(PathBuf, Vec<PathBuf>);

impl ChildCgroups {
    fn create(parent: &Path, names: &[&str]) -> ChildCgroups {
        let dirs: Vec<PathBuf> = names.iter().map(|n| parent.join(n)).collect();
        for d in &dirs {
            std::fs::create_dir_all(d).expect("creating a child cgroup");
        }
        ChildCgroups(parent.to_path_buf(), dirs)
    }
}

impl Drop for ChildCgroups {
    fn drop(&mut self) {
        for d in &self.1 {
            if let Err(e) = std::fs::remove_dir(d) {
                eprintln!("cleanup: removing cgroup {}: {e}", d.display());
            }
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// An application that declares an intent with `include/sluice/intent.h` and nothing else: it
/// declares (argv: port, intent number, value), connects to the loopback port, declares again on
/// the connected socket, and prints what the kernel gave its socket.
const INTENT_APP_C: &str = r#"
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sluice/intent.h>

int main(int argc, char **argv)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int kind = atoi(argv[2]);
	unsigned long long value = strtoull(argv[3], 0, 10);
	int declared = sluice_declare(fd, kind, value) ? errno : 0;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])), .sin_addr = { htonl(INADDR_LOOPBACK) } };
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
		return 3;
	char cc[16] = { 0 };
	socklen_t len = sizeof(cc);
	getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &len);
	int prio = -1;
	len = sizeof(prio);
	getsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, &len);
	unsigned int pacing = 0;
	len = sizeof(pacing);
	getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &pacing, &len);
	int late = sluice_declare(fd, kind, value) ? errno : 0;
	printf("uid=%d declared=%d cc=%s prio=%d pacing=%u late=%d\n", (int)getuid(), declared, cc, prio, pacing, late);
	return 0;
}
"#;

/// The same application in Python, with the standalone helper (python/sluice/intent.py).
const INTENT_APP_PY: &str = r#"
import importlib.util, os, socket, sys
spec = importlib.util.spec_from_file_location("intent", sys.argv[1])
intent = importlib.util.module_from_spec(spec)
spec.loader.exec_module(intent)
s = socket.socket()
try:
    intent.declare(s, sys.argv[3], int(sys.argv[4]))
    declared = 0
except OSError as e:
    declared = e.errno
s.connect(("127.0.0.1", int(sys.argv[2])))
cc = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
print(f"uid={os.getuid()} declared={declared} cc={cc}")
"#;

/// Runs `argv` as user nobody (no privilege) from inside `cgroup`; returns its one line of output
/// as key=value pairs.
fn as_nobody_in(cgroup: &Path, argv: &[&str]) -> std::collections::BTreeMap<String, String> {
    let script = format!("echo $$ > {}/cgroup.procs && exec setpriv --reuid=65534 --regid=65534 --clear-groups \"$@\"", cgroup.display());
    let out = Command::new("sh").args(["-c", &script, "sh"]).args(argv).output().expect("running the application");
    assert!(out.status.success(), "{argv:?}: {out:?}");
    text(&out.stdout).split_whitespace().filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

const INTENT_POLICY: &str = r#"version = 1

[classes.query]
cc = "dctcp"
priority = 1

[classes.paced]
cc = "newreno"
match = { dst_ports = [7300] }

[classes.default]
cc = "cubic"

[policy]
latency_sensitive = "query"
target_rate = "paced"

[permits]
latency_sensitive = ["sluice-test-agent-intents/apps"]
target_rate = ["sluice-test-agent-intents/apps"]
"#;

/// Applications' intents (draft 6.1) without root and without linking sluice: a process of a
/// permitted cgroup that declares `latency_sensitive` before connecting gets its class (here
/// reachable by no rule), `target_rate` paces its socket, and the same declaration from a cgroup
/// the policy does not permit is refused with EPERM and counted, the connection keeping its
/// ordinary class. A class intent declared on a connected socket is refused as late.
#[test]
fn intents_join_their_class_and_a_cgroup_not_permitted_is_refused() {
    let root = Path::new(sys::CGROUP2_ROOT).join("sluice-test-agent-intents");
    let apps = ChildCgroups::create(&root, &["apps", "other"]);
    let (_g, a) = Agent::start("sluice-test-agent-intents", INTENT_POLICY, 50);
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (src, bin) = (dir.path().join("app.c"), dir.path().join("app"));
    std::fs::write(&src, INTENT_APP_C).unwrap();
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-host/include");
    let cc = Command::new("clang").args(["-O2", "-Wall", "-Werror", "-I", include, "-o"]).arg(&bin).arg(&src).output().expect("clang");
    assert!(cc.status.success(), "compiling against include/sluice/intent.h: {}", text(&cc.stderr));
    let helper = dir.path().join("intent.py");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/../../python/sluice/intent.py"), &helper).unwrap();
    let app_py = dir.path().join("app.py");
    std::fs::write(&app_py, INTENT_APP_PY).unwrap();
    // The system's interpreter: a user's (pyenv, a virtual environment) may not be readable by nobody.
    let python = if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
    let (apps_cg, other_cg) = (&apps.1[0], &apps.1[1]);
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 7301)).unwrap();
    let paced_listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 7300)).unwrap();
    let bin = bin.to_str().unwrap();
    let (eperm, ok) = (libc::EPERM.to_string(), "0".to_string());

    let got = as_nobody_in(apps_cg, &[bin, "7301", "1", "0"]);
    let want = [("uid", "65534"), ("declared", "0"), ("cc", "dctcp"), ("prio", "1"), ("late", eperm.as_str())];
    assert!(want.iter().all(|(k, v)| got[*k] == *v), "latency_sensitive from a permitted cgroup: {got:?}");
    let got = as_nobody_in(other_cg, &[bin, "7301", "1", "0"]);
    assert!(got["declared"] == eperm && got["cc"] == "cubic" && got["prio"] == "0", "from a cgroup not permitted: {got:?}");
    let got = as_nobody_in(apps_cg, &[bin, "7301", "2", "0"]);
    assert!(got["declared"] == eperm && got["cc"] == "cubic", "bulk, which the policy does not map: {got:?}");
    // 100 Mb/s: SO_MAX_PACING_RATE counts bytes; the class's rule (port 7300) also matches.
    let got = as_nobody_in(apps_cg, &[bin, "7300", "3", "100000000"]);
    assert!(got["declared"] == ok && got["cc"] == "newreno" && got["pacing"] == "12500000" && got["late"] == ok, "target_rate: {got:?}");
    let got = as_nobody_in(apps_cg, &[python, app_py.to_str().unwrap(), helper.to_str().unwrap(), "7301", "latency_sensitive", "0"]);
    assert!(got["uid"] == "65534" && got["declared"] == ok && got["cc"] == "dctcp", "the Python helper: {got:?}");
    let got = as_nobody_in(other_cg, &[python, app_py.to_str().unwrap(), helper.to_str().unwrap(), "7301", "latency_sensitive", "0"]);
    assert!(got["declared"] == eperm && got["cc"] == "cubic", "the Python helper from a cgroup not permitted: {got:?}");
    drop((listener, paced_listener));

    let ls = class_table::intent_counts(1).unwrap();
    // The application from the cgroup not permitted is refused twice (before and after connect).
    assert_eq!(ls, [2, 3, 0, 1], "latency_sensitive: accepted, not permitted, not mapped, late");
    assert_eq!(class_table::intent_counts(2).unwrap()[2], 2, "bulk: not mapped, before and after connect");
    assert_eq!(class_table::intent_counts(3).unwrap(), [2, 0, 0, 0], "target_rate, before and after connect");
    let status = text(&run(&["agent", "status"]).stdout);
    assert!(status.contains("intent latency_sensitive -> class query") && status.contains("accepted 2, not_permitted 3, not_mapped 0, late 1"), "{status}");
    drop(a);
}
