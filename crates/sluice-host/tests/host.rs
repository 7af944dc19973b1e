//! The Linux half end to end, as root: the codec against the shared vectors (in userspace and in
//! the switch program via BPF_PROG_TEST_RUN), then real TCP through a netns testbed.
//!
//! Every test takes one lock: the agent, its cgroup and the BPF congestion-control names are
//! machine-wide, so the tests run one at a time. Guards undo what each test set up, also when an
//! assertion fails.

mod common;

use common::{in_netns, sink};
use sluice_host::kernel::cc_policy::{self, Selector};
use sluice_host::kernel::int_switch::{self, PortConfig};
use sluice_host::kernel::sockops::{self, LoadOptions};
use sluice_host::kernel::{agent_config, codec, pins};
use sluice_host::service::telemetry;
use sluice_host::sys;
use sluice_host::testbed::evidence::CpuMeter;
use sluice_host::testbed::netns::{self, Testbed, TestbedOptions};
use sluice_platform::prometheus::Exposition;
use sluice_sim::packet::tcp_int::{hop_int_val, IntEncoding, TcpInt};
use std::io::{Read, Write};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// Takes the test lock and checks what every test here needs, failing (never skipping) without it.
fn prerequisites() -> MutexGuard<'static, ()> {
    let g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    assert!(nix::unistd::geteuid().is_root(), "these tests need root (BPF, netns, tc): run `cargo test` as root");
    assert!(Path::new("/sys/kernel/btf/vmlinux").exists(), "kernel BTF missing at /sys/kernel/btf/vmlinux");
    assert!(Path::new(sys::CGROUP2_ROOT).is_dir(), "cgroup v2 is not mounted at {}", sys::CGROUP2_ROOT);
    for tool in ["ip", "tc", "ethtool", "tcpdump"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).exists()))
            .unwrap_or(false);
        assert!(found, "{tool} not found in PATH (Debian: apt-get install iproute2 ethtool tcpdump)");
    }
    g
}

fn vectors() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors/tcp_int.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("vectors file")).expect("vectors JSON")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn field(t: &serde_json::Value, k: &str) -> u32 {
    t[k].as_u64().unwrap() as u32
}

// ---------------------------------------------------------------------------------------------
// Guards

/// The agent loaded on a cgroup of its own, with this process in it; undone on drop.
struct AgentGuard {
    cgroup: PathBuf,
    home: PathBuf,
}

impl AgentGuard {
    fn load(name: &str) -> AgentGuard {
        // A previous run killed mid-test may have left an agent behind.
        sockops::unload().expect("unloading a stale agent");
        let cgroup = Path::new(sys::CGROUP2_ROOT).join(name);
        let home = sys::own_cgroup(Path::new(sys::CGROUP2_ROOT)).expect("own cgroup");
        let st = sockops::load(&LoadOptions { cgroup: cgroup.clone(), sample_ns: 0, ..LoadOptions::default() })
            .expect("loading the agent");
        // An algorithm left registered by an earlier load would serve these tests with that
        // load's maps: every one must be this agent's own.
        assert_eq!(st.ccs, sluice_host::kernel::struct_ops::ALGORITHMS, "congestion control this agent registered");
        let g = AgentGuard { cgroup, home };
        // Sockets belong to the cgroup of the process that creates them.
        sys::cgroup_join(&g.cgroup, std::process::id()).expect("joining the agent's cgroup");
        g
    }
}

impl Drop for AgentGuard {
    fn drop(&mut self) {
        let _ = sys::cgroup_join(&self.home, std::process::id());
        if let Err(e) = sockops::unload() {
            eprintln!("cleanup: unloading the agent: {e:#}");
        }
        let _ = std::fs::remove_dir(&self.cgroup);
    }
}

/// A testbed, brought down on drop.
struct TestbedGuard(Testbed);

impl TestbedGuard {
    fn up(prefix: &str, mtu: u32, ce_threshold: u64) -> TestbedGuard {
        TestbedGuard::up_at(prefix, mtu, ce_threshold, TestbedOptions::default().rate_bps)
    }
    /// A testbed whose switch ports run at `rate_bps`.
    fn up_at(prefix: &str, mtu: u32, ce_threshold: u64, rate_bps: u64) -> TestbedGuard {
        let _ = netns::down(prefix);
        let tb = netns::up(&TestbedOptions { prefix: prefix.into(), mtu, ce_threshold, rate_bps, ..TestbedOptions::default() })
            .expect("testbed up");
        TestbedGuard(tb)
    }
    fn ns(&self, host: usize) -> String {
        self.0.hosts[host].netns.clone()
    }
    fn addr(&self, host: usize) -> Ipv4Addr {
        self.0.hosts[host].addr
    }
}

impl Drop for TestbedGuard {
    fn drop(&mut self) {
        if let Err(e) = netns::down(&self.0.prefix) {
            eprintln!("cleanup: testbed down: {e:#}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Traffic



/// Sends for `secs` to dst:port; returns (bytes written, the socket's congestion control).
fn source(ns: &str, dst: Ipv4Addr, port: u16, secs: f64) -> JoinHandle<(u64, String)> {
    in_netns(ns, move || {
        let mut s = TcpStream::connect_timeout(&SocketAddr::from((dst, port)), Duration::from_secs(5)).expect("connect");
        let cc = format!("{}{}", congestion_control(&s), if ecn_negotiated(&s) { "+ecn" } else { "" });
        let buf = vec![0x5au8; 1 << 16];
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let mut n = 0u64;
        while Instant::now() < end {
            n += s.write(&buf).expect("write") as u64;
        }
        (n, cc)
    })
}

/// Whether ECN was negotiated on a connection (TCP_INFO's TCPI_OPT_ECN).
fn ecn_negotiated(s: &TcpStream) -> bool {
    let mut info = [0u8; 256];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`.
    let rc = unsafe { libc::getsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, info.as_mut_ptr().cast(), &mut len) };
    assert_eq!(rc, 0, "getsockopt TCP_INFO");
    info[5] & 8 != 0 // tcpi_options
}

fn congestion_control(s: &TcpStream) -> String {
    sys::congestion_control(s).expect("the socket's algorithm")
}

fn agent_counter(i: usize) -> u64 {
    pins::read_counters("agent_counters", sockops::COUNTERS.len()).unwrap()[i]
}

/// A kernel SNMP counter (e.g. Tcp InCsumErrors) in a network namespace.
fn snmp(ns: &str, proto: &str, name: &str) -> u64 {
    let (proto, name) = (proto.to_string(), name.to_string());
    in_netns(ns, move || {
        let s = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
        let lines: Vec<&str> = s.lines().filter(|l| l.starts_with(&format!("{proto}:"))).collect();
        let keys: Vec<&str> = lines[0].split_whitespace().collect();
        let vals: Vec<&str> = lines[1].split_whitespace().collect();
        vals[keys.iter().position(|k| *k == name).unwrap()].parse().unwrap()
    })
    .join()
    .unwrap()
}

// ---------------------------------------------------------------------------------------------
// The codec

#[test]
fn bpf_codec_agrees_with_the_shared_vectors() {
    let v = vectors();
    for t in v["vectors"].as_array().unwrap() {
        let bytes = hex(t["bytes"].as_str().unwrap());
        let o = codec::bpf_decode(&bytes).unwrap_or_else(|e| panic!("{}: {e}", t["name"]));
        assert_eq!(
            (o.int_val as u32, o.int_ecr as u32, o.id as u32, o.id_ecr as u32, o.lat, o.lat_ecr),
            (field(t, "int_val"), field(t, "int_ecr"), field(t, "id"), field(t, "id_ecr"), field(t, "lat"), field(t, "lat_ecr")),
            "{}",
            t["name"]
        );
        assert_eq!(codec::bpf_encode(&o).to_vec(), bytes, "{}", t["name"]);
        assert_eq!(TcpInt::decode(&bytes), Ok(o), "{}: BPF and simulator codecs differ", t["name"]);
    }
    let malformed = v["malformed"].as_array().unwrap();
    assert!(malformed.len() >= 4);
    for t in malformed {
        let bytes = hex(t["bytes"].as_str().unwrap());
        let bpf = codec::bpf_decode(&bytes);
        assert!(bpf.is_err(), "{} decoded", t["name"]);
        assert_eq!(bpf, TcpInt::decode(&bytes).map(|_| unreachable!()), "{}: fault named differently", t["name"]);
    }
    // Latency saturates at 24 bits in the BPF encoder too.
    let o = TcpInt { lat: 1 << 30, ..TcpInt::default() };
    assert_eq!(codec::bpf_encode(&o)[6..9], [0xff, 0xff, 0xff]);
    // The switch's hop value is the simulator's, across both branches and saturation.
    let enc = IntEncoding::default();
    for q in [0u64, 1, 8191, 8192, 16383, 16384, 1 << 20, 1 << 40] {
        for u in [0u64, 1, 57, 100, 127, 128, 1000] {
            assert_eq!(codec::bpf_hop_int_val(q, u, &enc), hop_int_val(q, u, &enc), "q {q} util {u}");
        }
    }
}

/// An Ethernet + IPv4 + TCP frame with the given TCP option bytes (padded with NOPs in front
/// by `lead`, EOL after to a multiple of 4) and a correct TCP checksum.
fn frame(options: &[u8], lead: usize, ttl: u8) -> Vec<u8> {
    let mut opts = vec![1u8; lead];
    opts.extend_from_slice(options);
    while !opts.len().is_multiple_of(4) {
        opts.push(0);
    }
    let payload = b"sluice-test-payload";
    let tcp_len = 20 + opts.len() + payload.len();
    let mut f = vec![0u8; 14];
    f[12] = 0x08; // IPv4
    let (src, dst) = ([10, 72, 1, 1], [10, 72, 3, 1]);
    let mut ip = vec![0x45, 0x02, 0, 0, 0, 1, 0x40, 0, ttl, 6, 0, 0];
    ip[2..4].copy_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = !fold(sum16(&ip, 0));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut tcp = vec![0u8; 20];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
    tcp[8..12].copy_from_slice(&2000u32.to_be_bytes());
    tcp[12] = (((20 + opts.len()) / 4) as u8) << 4;
    tcp[13] = 0x18; // PSH ACK
    tcp[14..16].copy_from_slice(&512u16.to_be_bytes());
    tcp.extend_from_slice(&opts);
    tcp.extend_from_slice(payload);
    let c = !fold(sum16(&tcp, pseudo(&src, &dst, tcp_len)));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&tcp);
    f
}

fn sum16(b: &[u8], init: u32) -> u32 {
    b.chunks(2).fold(init, |s, c| s + u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32)
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn pseudo(src: &[u8; 4], dst: &[u8; 4], len: usize) -> u32 {
    sum16(src, 0) + sum16(dst, 0) + 6 + len as u32
}

/// Whether the TCP checksum of a frame from `frame` verifies.
fn tcp_checksum_ok(f: &[u8]) -> bool {
    let tcp = &f[34..];
    fold(sum16(tcp, pseudo(&[10, 72, 1, 1], &[10, 72, 3, 1], tcp.len()))) == 0xffff
}

#[test]
fn switch_program_stamps_the_shared_vectors() {
    let _g = prerequisites();
    use libbpf_rs::skel::{OpenSkel, SkelBuilder};
    use libbpf_rs::{MapCore, MapFlags};
    use sluice_host::kernel::skel::int_switch::IntSwitchSkelBuilder;

    let mut obj = MaybeUninit::uninit();
    let skel = IntSwitchSkelBuilder::default().open(&mut obj).unwrap().load().expect("loading the switch");
    // BPF_PROG_TEST_RUN runs tc programs on the loopback device (ifindex 1).
    let pinned = 0x85u8; // queue branch, 5 x 8 KiB
    let cfg = PortConfig { pinned_int_val: pinned, ..PortConfig::default() };
    skel.maps.port_cfgs.update(&1u32.to_ne_bytes(), &cfg.to_bytes(false), MapFlags::ANY).unwrap();
    skel.maps.port_states.update(&1u32.to_ne_bytes(), &[0u8; 64], MapFlags::ANY).unwrap();
    let counters = |i: usize| sluice_host::kernel::pins::percpu_sums(&skel.maps.switch_counters, int_switch::COUNTERS.len()).unwrap()[i];

    let run = |input: &[u8]| -> Vec<u8> {
        let mut out = vec![0u8; input.len() + 64];
        let t = libbpf_rs::ProgramInput { data_in: Some(input), data_out: Some(&mut out), ..Default::default() };
        let r = skel.progs.sluice_egress.test_run(t).expect("test run");
        assert_eq!(r.return_value, 0, "TC_ACT_OK");
        let n = r.data.as_ref().map(|d| d.len()).unwrap();
        out.truncate(n);
        out
    };

    let v = vectors();
    let ttl = 61;
    let mut stamped = 0;
    for t in v["vectors"].as_array().unwrap() {
        let bytes = hex(t["bytes"].as_str().unwrap());
        // Lead 0 puts the option at an even offset, lead 1 at an odd one: both checksum paths.
        for lead in [0, 1, 3] {
            let inp = frame(&bytes, lead, ttl);
            let out = run(&inp);
            let at = 54 + lead;
            let o = TcpInt::decode(&out[at..at + 12]).expect("stamped option decodes");
            let name = format!("{} (lead {lead})", t["name"]);
            let raised = pinned as u32 > field(t, "int_val");
            assert_eq!(o.int_val as u32, field(t, "int_val").max(pinned as u32), "{name}: INTval is the path max");
            assert_eq!(o.id as u32, if raised { ttl as u32 } else { field(t, "id") }, "{name}: ID is the raising hop's TTL");
            let (lat_in, lat_out) = (field(t, "lat"), o.lat);
            assert!(lat_out >= lat_in && lat_out - lat_in < 1_000_000, "{name}: Lat {lat_in} -> {lat_out}");
            if lat_in < 0xffffff {
                // A frame of ~100 B queued at 1 Gb/s waits ~800 ns: the hop must add that.
                assert!(lat_out - lat_in >= 500, "{name}: hop latency {} ns", lat_out - lat_in);
            } else {
                assert_eq!(lat_out, 0xffffff, "{name}: saturates");
            }
            assert_eq!((o.int_ecr as u32, o.id_ecr as u32, o.lat_ecr), (field(t, "int_ecr"), field(t, "id_ecr"), field(t, "lat_ecr")), "{name}: echo untouched");
            assert!(tcp_checksum_ok(&out), "{name}: TCP checksum after stamping");
            // Only the option and the TCP checksum (bytes 50-51) change.
            assert_eq!((&out[..50], &out[52..at], &out[at + 12..]), (&inp[..50], &inp[52..at], &inp[at + 12..]), "{name}: only the option changes");
            stamped += 1;
        }
    }
    assert_eq!(counters(1) as usize, stamped, "stamped counter");

    let mut malformed = 0;
    for t in v["malformed"].as_array().unwrap() {
        let bytes = hex(t["bytes"].as_str().unwrap());
        // NOPs in front so the option ends exactly at the header's end: truncation is real.
        let inp = frame(&bytes, (4 - bytes.len() % 4) % 4, ttl);
        let before = counters(int_switch::MALFORMED);
        let out = run(&inp);
        assert_eq!(out, inp, "{}: malformed option must pass untouched", t["name"]);
        if bytes[0] == 0x72 {
            malformed += 1;
            assert_eq!(counters(int_switch::MALFORMED), before + 1, "{}: counted as malformed", t["name"]);
        }
    }
    assert!(malformed >= 4);
}

// ---------------------------------------------------------------------------------------------
// Real TCP in the testbed

/// Data segments captured with tcpdump while `f` runs, as tcpdump's verbose lines.
fn capture(ns: &str, filter: &str, count: usize, f: impl FnOnce()) -> Vec<String> {
    let out = std::env::temp_dir().join(format!("sluice-capture-{}.txt", std::process::id()));
    let file = std::fs::File::create(&out).unwrap();
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "tcpdump", "-i", "eth0", "-nn", "-v", "-l", "-c", &count.to_string(), filter])
        .stdout(file)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("tcpdump");
    std::thread::sleep(Duration::from_millis(800));
    f();
    let deadline = Instant::now() + Duration::from_secs(5);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let s = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    // tcpdump -v prints a packet over two lines; the TCP line carries the options.
    s.lines().filter(|l| l.contains("Flags")).map(String::from).collect()
}

#[test]
fn option_rides_data_and_switch_values_come_back_in_the_echo() {
    let _g = prerequisites();
    let tb = TestbedGuard::up("slt1", 9000, 30_000);
    let _agent = AgentGuard::load("sluice-test-echo");
    let (h1, h3, dst) = (tb.ns(0), tb.ns(2), tb.addr(2));
    let csum_before = snmp(&h3, "Tcp", "InCsumErrors");

    // A capture at the receiver of a real transfer: every data segment carries 0x72.
    let lines = capture(&h3, "tcp dst port 5301 and greater 200", 40, || {
        let s = sink(&h3, 5301, 1);
        let (sent, _) = source(&h1, dst, 5301, 0.5).join().unwrap();
        assert_eq!(s.join().unwrap(), vec![sent]);
    });
    assert!(lines.len() >= 20, "captured {} data segments", lines.len());
    for l in &lines {
        assert!(l.contains("unknown-114 0x"), "data segment without option 0x72: {l}");
        assert!(l.contains("(correct)"), "checksum after the switch: {l}");
    }

    // Two senders into one 1 Gb/s port: the queue builds, the switch reports it, the receiver
    // echoes it and the senders' telemetry shows it.
    int_switch::reset_stats("p3", Some(&tb.0.switch)).unwrap();
    let s = sink(&h3, 5302, 2);
    let tracer = std::thread::spawn(|| {
        let mut out = Vec::new();
        telemetry::trace(Some(Duration::from_secs(3)), true, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    });
    std::thread::sleep(Duration::from_millis(200));
    let a = source(&h1, dst, 5302, 2.0);
    let b = source(&tb.ns(1), dst, 5302, 2.0);
    let sent = a.join().unwrap().0 + b.join().unwrap().0;
    let got: u64 = s.join().unwrap().iter().sum();
    assert_eq!(got, sent, "every byte arrives");
    let trace = tracer.join().unwrap();
    let lines: Vec<&str> = trace.lines().collect();
    let senders: Vec<&&str> = lines.iter().filter(|l| l.contains(":5302 out[")).collect();
    assert!(senders.len() > 100, "sender records in trace: {}", senders.len());
    let queued = senders.iter().filter(|l| l.contains("out[queue ")).count();
    let with_lat = senders.iter().filter(|l| !l.contains(" lat 0ns]")).count();
    println!("trace: {} sender records, {queued} report a queue, {with_lat} a path latency; e.g. {}", senders.len(), senders[senders.len() / 2]);
    assert!(queued > 0, "no echoed queue reading in the senders' trace");
    assert!(with_lat * 2 > senders.len(), "most echoes carry the switch's latency");
    // The hop ID is the TTL at the switch: 64 less one forwarding hop.
    assert!(senders.iter().any(|l| l.contains(" hop 63 ")), "hop ID 63 expected");
    assert_eq!(snmp(&h3, "Tcp", "InCsumErrors"), csum_before, "receiver saw bad checksums");
    assert_eq!(agent_counter(sockops::MALFORMED_LEN) + agent_counter(sockops::MALFORMED_TRUNC), 0);
}

/// The switch port rate of the tests that measure how full an algorithm keeps a port.
///
/// At 1 Gb/s a port whose queue holds the few 9000-byte frames these algorithms aim for (K, the
/// INT target) drains in about 300 us, less than the host's own scheduling delays on a loaded
/// two-core machine: a CI run measured 92.8 % goodput for DCTCP with its flows' RTT at 0.5 ms
/// (cwnd 2-4), i.e. the idle time was the senders', not the algorithm's. At 300 Mb/s the same
/// queue lasts 1 ms and the port's work is a third.
const FILL_RATE: u64 = 300_000_000;

/// What a two-flow DCTCP run through the testbed's `FILL_RATE` port measured.
struct DctcpRun {
    /// Port goodput over its rate.
    goodput: f64,
    /// Each flow's goodput over the port's rate.
    flow_share: [f64; 2],
    q_mean: f64,
    backlog_max: u64,
    drops: u64,
    /// Each sender's pacing rate over its window's rate (`pacing_over_window_rate`).
    pacing: Vec<Option<f64>>,
}

const K: u64 = 30_000;

fn dctcp_two_flows(prefix: &str) -> DctcpRun {
    let tb = TestbedGuard::up_at(prefix, 9000, K, FILL_RATE);
    let _agent = AgentGuard::load("sluice-test-dctcp");
    assert!(sluice_host::kernel::struct_ops::available().unwrap().iter().any(|a| a == "dctcp"), "BPF dctcp registered");
    cc_policy::set(&Selector::Port(5401), "dctcp").unwrap();
    let (h3, dst, sw) = (tb.ns(2), tb.addr(2), tb.0.switch.clone());

    // Warm up, then measure over a fixed window from the receiver's side.
    let secs = 4.0;
    let s = sink(&h3, 5401, 2);
    let a = source(&tb.ns(0), dst, 5401, secs);
    let b = source(&tb.ns(1), dst, 5401, secs);
    std::thread::sleep(Duration::from_millis(500));
    int_switch::reset_stats("p3", Some(&sw)).unwrap();
    let ce0 = int_switch::counters(Some(&sw)).unwrap()[int_switch::CE_MARKED];
    let tx0 = port_tx_bytes(&sw, "p3");
    let t0 = Instant::now();
    let cpu = CpuMeter::start().unwrap();
    // Sample the shaper's real backlog alongside the switch's estimate.
    let mut backlog_max = 0u64;
    while t0.elapsed() < Duration::from_secs(3) {
        backlog_max = backlog_max.max(htb_backlog(&sw, "p3"));
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut pacing = Vec::new();
    for ns in [tb.ns(0), tb.ns(1)] {
        let ss = sys::run("ip", &["netns", "exec", &ns, "ss", "-tin", "dport = :5401"]).unwrap_or_default();
        let keep: Vec<&str> = ss.split_whitespace().filter(|w| w.starts_with("cwnd:") || w.starts_with("ssthresh:") || w.starts_with("delivered") || w.starts_with("rtt:")).collect();
        println!("{ns} sender: {}", keep.join(" "));
        pacing.push(pacing_over_window_rate(&ss));
    }
    let tx = port_tx_bytes(&sw, "p3") - tx0;
    let elapsed = t0.elapsed().as_secs_f64();
    let busy = cpu_text(&cpu);
    let st = int_switch::port_state("p3", Some(&sw)).unwrap();
    let ce = int_switch::counters(Some(&sw)).unwrap()[int_switch::CE_MARKED] - ce0;
    let (sa, cca) = a.join().unwrap();
    let (sb, ccb) = b.join().unwrap();
    let got = s.join().unwrap();
    assert_eq!(got.iter().sum::<u64>(), sa + sb, "every byte arrives");
    assert_eq!((cca.as_str(), ccb.as_str()), ("dctcp+ecn", "dctcp+ecn"), "policy selected the BPF DCTCP, with ECN");

    let rate = FILL_RATE as f64;
    let goodput = tx as f64 * 8.0 / elapsed / rate;
    let flow_share = [got[0] as f64 * 8.0 / secs / rate, got[1] as f64 * 8.0 / secs / rate];
    let share = got[0].min(got[1]) as f64 / got[0].max(got[1]) as f64;
    println!(
        "dctcp x2: bottleneck goodput {:.1}% of {} Mb/s (flows {:.1}% and {:.1}% of it over their {secs} s), backlog joined mean {:.0} B max {} B (K {K} B), shaper backlog max {} B, CE marks {}, flow share {:.2}; {busy}",
        goodput * 100.0,
        FILL_RATE / 1_000_000,
        flow_share[0] * 100.0,
        flow_share[1] * 100.0,
        st.q_mean(),
        st.q_max,
        backlog_max,
        ce,
        share
    );
    assert!(ce > 0, "the switch marked nothing");
    DctcpRun { goodput, flow_share, q_mean: st.q_mean(), backlog_max, drops: htb_drops(&sw, "p3"), pacing }
}

/// A connection's pacing rate over its window's rate (cwnd x mss / srtt), from `ss -tin`; None
/// when `ss` shows no pacing rate (the socket's is ~0, unset).
fn pacing_over_window_rate(ss: &str) -> Option<f64> {
    let words: Vec<&str> = ss.split_whitespace().collect();
    let value = |key: &str| words.iter().find_map(|w| w.strip_prefix(key)).and_then(|v| v.split('/').next()?.parse::<f64>().ok());
    let (cwnd, mss, srtt_ms) = (value("cwnd:")?, value("mss:")?, value("rtt:")?);
    let rate = words.iter().position(|w| *w == "pacing_rate").and_then(|i| words.get(i + 1))?;
    let (digits, unit) = rate.split_at(rate.find(|c: char| c.is_ascii_alphabetic())?);
    let scale = match unit {
        "bps" => 1.0,
        "Kbps" => 1e3,
        "Mbps" => 1e6,
        "Gbps" => 1e9,
        _ => return None,
    };
    Some(digits.parse::<f64>().ok()? * scale / (cwnd * mss * 8.0 / (srtt_ms / 1000.0)))
}

/// Issue 6's "must show": two BPF DCTCP flows fill the port and hold its queue near K.
///
/// This failed in about half the runs until cc_control (bpf/cc_common.h): on Linux 6.18 a stale
/// word (0x81104110) turns up in one flow's tp->snd_ssthresh, the kernel's PRR turned it into a
/// window of ~10^9, and that flow kept megabytes in the queue while the other starved.
#[test]
fn dctcp_two_flows_fill_the_bottleneck_and_hold_the_queue_near_k() {
    let _g = prerequisites();
    let r = dctcp_two_flows("slt2");
    // Measured 100.0% in 3 runs at 300 Mb/s, 99.2% with both cores kept busy by other work (at
    // 1 Gb/s: 99.4-99.9% here, 92.8% on a slower CI machine). With tc's default 1375-byte bucket
    // the port itself carried 76-80%, whatever the algorithm (netns::shaper_burst). With
    // 9000-byte frames two flows at their 2-packet floor already hold 36 KB, above K, so the
    // queue never drains and the port never idles.
    assert!(r.goodput >= 0.95, "goodput {:.1}% < 95%", r.goodput * 100.0);
    // DCTCP shares fairly: each flow within 30% of half the port. (Before alpha's window was
    // anchored to the SYN, see dctcp_est_init, one flow in three kept alpha at 1 and got 0.3.)
    assert!(r.flow_share[0].min(r.flow_share[1]) >= 0.35, "per-flow share of the port {:?}", r.flow_share);
    // ECN marking, not the shaper's 1000-packet (9 MB) queue, limits the flows: nothing dropped.
    assert_eq!(r.drops, 0, "drops at the bottleneck");
    assert!(r.q_mean < 4.0 * K as f64, "mean queue {:.0} B, K {K} B", r.q_mean);
    assert!(r.backlog_max < 1000 * 9000 / 4, "shaper backlog peaked at {} B", r.backlog_max);
    // The glue sets the pacing rate as tcp_update_pacing_rate would (1.2 times the window's rate
    // after slow start, 2 times in it); unset, `ss` shows none. The rate counts packets out when
    // they exceed the window, up to twice it just after a DCTCP cut (1.2 x 2), and `ss` prints
    // three digits, hence the margin.
    for p in &r.pacing {
        assert!(p.is_some_and(|p| (0.9..=2.6).contains(&p)), "pacing over cwnd x mss / srtt: {:?}", r.pacing);
    }
}

// ---------------------------------------------------------------------------------------------
// The algorithms' reactions, one flow at a time

/// Each core's busy share since `cpu` started, for a test's figures line.
fn cpu_text(cpu: &CpuMeter) -> String {
    let busy: Vec<String> = cpu.busy().unwrap().iter().map(|b| format!("{:.0}%", b * 100.0)).collect();
    format!("cpu busy per core {}", busy.join(" "))
}

/// The window of a connection (TCP_INFO tcpi_snd_cwnd), segments.
fn snd_cwnd(s: &TcpStream) -> u32 {
    let mut info = [0u8; 256];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`.
    let rc = unsafe { libc::getsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, info.as_mut_ptr().cast(), &mut len) };
    assert_eq!(rc, 0, "getsockopt TCP_INFO");
    u32::from_ne_bytes(info[80..84].try_into().unwrap())
}

/// An application-limited sender: `chunk` bytes every `every` until `secs` after `t0`, with the
/// window sampled after each write. Its window never fills, so Reno growth leaves it alone and
/// only the algorithm's own moves change it. Returns (samples as (s since t0, cwnd), cc).
fn paced_source(ns: &str, dst: Ipv4Addr, port: u16, t0: Instant, secs: f64, chunk: usize, every: Duration) -> JoinHandle<(Vec<(f64, u32)>, String)> {
    in_netns(ns, move || {
        let mut s = TcpStream::connect_timeout(&SocketAddr::from((dst, port)), Duration::from_secs(5)).expect("connect");
        let cc = format!("{}{}", congestion_control(&s), if ecn_negotiated(&s) { "+ecn" } else { "" });
        let buf = vec![0x5au8; chunk];
        let mut samples = vec![];
        let mut next = Instant::now();
        while t0.elapsed().as_secs_f64() < secs {
            s.write_all(&buf).expect("write");
            samples.push((t0.elapsed().as_secs_f64(), snd_cwnd(&s)));
            next += every;
            if let Some(d) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
        }
        (samples, cc)
    })
}

/// The median window over samples taken in [from, to) seconds.
fn median_cwnd(samples: &[(f64, u32)], from: f64, to: f64) -> f64 {
    let mut v: Vec<u32> = samples.iter().filter(|(t, _)| *t >= from && *t < to).map(|&(_, c)| c).collect();
    assert!(v.len() >= 20, "only {} window samples in [{from:.2}, {to:.2}) s", v.len());
    v.sort_unstable();
    v[v.len() / 2] as f64
}

/// Has a switch port mark every ECT packet CE, or go back to its threshold.
fn mark_every_packet(sw: &str, dev: &str, on: bool) {
    let mut cfg = int_switch::port_config(dev, Some(sw)).unwrap();
    cfg.ce_all = on;
    int_switch::set_port_config(dev, Some(sw), &cfg).unwrap();
}

/// reTCP's circuit signal: the switch marks every packet for a spell (the circuit is up) and
/// then nothing. The sender's window must jump by alpha (2) when ECE turns on and come back by
/// 1/alpha when it turns off, each median within 15 % of the ratio, twice over.
#[test]
fn retcp_multiplies_cwnd_when_ece_starts_and_divides_when_it_stops() {
    let _g = prerequisites();
    let tb = TestbedGuard::up("slt6", 9000, 0);
    let _agent = AgentGuard::load("sluice-test-retcp");
    cc_policy::set(&Selector::Port(5701), "retcp").unwrap();
    let (sw, h3) = (tb.0.switch.clone(), tb.ns(2));
    let s = sink(&h3, 5701, 1);
    let t0 = Instant::now();
    // 16 KiB a millisecond: 131 Mb/s, well under the port, so the window never fills.
    let src = paced_source(&tb.ns(0), tb.addr(2), 5701, t0, 2.1, 16 << 10, Duration::from_millis(1));
    // Marking spells [0.5, 0.9) and [1.3, 1.7) s.
    let spells = [(0.5, 0.9), (1.3, 1.7)];
    for &(on, off) in &spells {
        std::thread::sleep(Duration::from_secs_f64(on).saturating_sub(t0.elapsed()));
        mark_every_packet(&sw, "p3", true);
        std::thread::sleep(Duration::from_secs_f64(off).saturating_sub(t0.elapsed()));
        mark_every_packet(&sw, "p3", false);
    }
    let (samples, cc) = src.join().unwrap();
    s.join().unwrap();
    assert_eq!(cc, "retcp+ecn", "policy selected reTCP, with ECN");
    // Medians over the 100 ms just before each switch, and from 100 ms after it up to the next
    // one. The window before a spell is read right before it: a paced writer that falls behind
    // (a loaded machine) can still grow the initial window early in the run.
    let mut ratios = vec![];
    for (i, &(on, off)) in spells.iter().enumerate() {
        let prev = median_cwnd(&samples, on - 0.1, on);
        let up = median_cwnd(&samples, on + 0.1, off);
        let next = spells.get(i + 1).map(|s| s.0).unwrap_or(2.1);
        let down = median_cwnd(&samples, off + 0.1, next);
        ratios.push((prev, up, down));
    }
    println!("retcp: cwnd medians (before, during, after) per marking spell: {ratios:?}");
    for (i, &(prev, up, down)) in ratios.iter().enumerate() {
        let (r_up, r_down) = (up / prev, down / up);
        println!("retcp spell {}: ECE 0->1 cwnd x{r_up:.2}, ECE 1->0 cwnd x{r_down:.2} (alpha 2)", i + 1);
        assert!((1.7..=2.3).contains(&r_up), "spell {}: cwnd {prev} -> {up} on ECE, expected x2 +-15%", i + 1);
        assert!((0.425..=0.575).contains(&r_down), "spell {}: cwnd {up} -> {down} when ECE stopped, expected x0.5 +-15%", i + 1);
    }
}

/// One ECN+INT flow into the `FILL_RATE` port without CE marking: (mean backlog joined, its
/// max, goodput over the port's rate, CPU use) over 1.5 s after a 0.5 s warm-up; `echo` is the
/// agent's echo switch.
fn ecn_int_flow(prefix: &str, echo: bool) -> (f64, u64, f64, String) {
    let tb = TestbedGuard::up_at(prefix, 9000, 0, FILL_RATE);
    let _agent = AgentGuard::load("sluice-test-ecnint");
    agent_config::set(None, Some(echo), None).unwrap();
    cc_policy::set(&Selector::Port(5801), "ecn_int").unwrap();
    let (sw, h3) = (tb.0.switch.clone(), tb.ns(2));
    let s = sink(&h3, 5801, 1);
    let a = source(&tb.ns(0), tb.addr(2), 5801, 2.0);
    std::thread::sleep(Duration::from_millis(500));
    int_switch::reset_stats("p3", Some(&sw)).unwrap();
    let tx0 = port_tx_bytes(&sw, "p3");
    let (t, cpu) = (Instant::now(), CpuMeter::start().unwrap());
    std::thread::sleep(Duration::from_millis(1500));
    let load = (port_tx_bytes(&sw, "p3") - tx0) as f64 * 8.0 / t.elapsed().as_secs_f64() / FILL_RATE as f64;
    let busy = cpu_text(&cpu);
    let st = int_switch::port_state("p3", Some(&sw)).unwrap();
    let (sent, cc) = a.join().unwrap();
    assert_eq!(s.join().unwrap(), vec![sent], "every byte arrives");
    assert!(cc.starts_with("ecn_int"), "policy selected ECN+INT, got {cc}");
    (st.q_mean(), st.q_max, load, busy)
}

/// ECN+INT cuts on the queue the switches report even when nothing is CE-marked: with the
/// echo the mean queue must be under half of what the same flow builds without it (where only
/// the shaper's 9 MB buffer stops it), and the port must stay at least 70 % busy.
#[test]
fn ecn_int_cuts_cwnd_on_the_reported_queue_without_any_ce_mark() {
    let _g = prerequisites();
    let (q_off, max_off, load_off, busy_off) = ecn_int_flow("slt7", false);
    let (q_on, max_on, load_on, busy_on) = ecn_int_flow("slt8", true);
    println!(
        "ecn_int, no CE marks, {} Mb/s port: without INT echo queue mean {q_off:.0} B max {max_off} B at {:.1}% load ({busy_off}); with echo mean {q_on:.0} B max {max_on} B at {:.1}% load ({busy_on}); cut to {:.1}%",
        FILL_RATE / 1_000_000,
        load_off * 100.0,
        load_on * 100.0,
        q_on / q_off * 100.0
    );
    assert!(q_on < 0.5 * q_off, "INT echo left the mean queue at {q_on:.0} B against {q_off:.0} B without it");
    assert!(load_on >= 0.7, "with INT the port ran at {:.1}% of its rate", load_on * 100.0);
}

/// Moves this process into a child cgroup of the agent's while it lives; undone on drop.
struct ChildCgroup {
    path: PathBuf,
    home: PathBuf,
}

impl ChildCgroup {
    fn create(home: &Path, name: &str) -> ChildCgroup {
        let path = home.join(name);
        let _ = std::fs::remove_dir(&path);
        std::fs::create_dir(&path).expect("creating a child cgroup");
        ChildCgroup { path, home: home.to_path_buf() }
    }
    fn enter(&self) {
        sys::cgroup_join(&self.path, std::process::id()).unwrap();
    }
    fn leave(&self) {
        sys::cgroup_join(&self.home, std::process::id()).unwrap();
    }
}

impl Drop for ChildCgroup {
    fn drop(&mut self) {
        let _ = sys::cgroup_join(&self.home, std::process::id());
        if let Err(e) = std::fs::remove_dir(&self.path) {
            eprintln!("cleanup: removing cgroup {}: {e}", self.path.display());
        }
    }
}

/// Connects, sends a little and returns the connection's congestion control.
fn connect_cc(ns: &str, dst: Ipv4Addr, port: u16) -> String {
    in_netns(ns, move || {
        let mut s = TcpStream::connect_timeout(&SocketAddr::from((dst, port)), Duration::from_secs(5)).expect("connect");
        s.write_all(&[1u8; 4096]).unwrap();
        congestion_control(&s)
    })
    .join()
    .unwrap()
}

/// The policy keyed by cgroup: connections opened by a process in the mapped cgroup run its
/// algorithm, the same connection from outside it does not, and a port entry outranks it.
#[test]
fn cc_policy_follows_the_cgroup_of_the_connecting_process() {
    let _g = prerequisites();
    let tb = TestbedGuard::up("slt9", 1500, 0);
    let agent = AgentGuard::load("sluice-test-cgroup");
    let child = ChildCgroup::create(&agent.cgroup, "query");
    cc_policy::set(&Selector::Cgroup(child.path.clone()), "ecn_int").unwrap();
    cc_policy::set(&Selector::Port(5902), "retcp").unwrap();
    let (h1, h3, dst) = (tb.ns(0), tb.ns(2), tb.addr(2));
    let default = sys::run("ip", &["netns", "exec", &h1, "sysctl", "-n", "net.ipv4.tcp_congestion_control"]).unwrap().trim().to_string();
    let s1 = sink(&h3, 5901, 2);
    let s2 = sink(&h3, 5902, 1);
    let set0 = pins::read_counters("cc_counters", sockops::CC_COUNTERS.len()).unwrap()[0];

    child.enter();
    let in_child = connect_cc(&h1, dst, 5901);
    let port_wins = connect_cc(&h1, dst, 5902);
    child.leave();
    let outside = connect_cc(&h1, dst, 5901);
    s1.join().unwrap();
    s2.join().unwrap();
    let set = pins::read_counters("cc_counters", sockops::CC_COUNTERS.len()).unwrap()[0] - set0;
    println!("cc policy: from cgroup {} -> {in_child}; port 5902 -> {port_wins}; outside the cgroup -> {outside} (netns default {default}); {set} sets", child.path.display());
    assert_eq!(in_child, "ecn_int", "a connection from the mapped cgroup runs the cgroup's algorithm");
    assert_eq!(port_wins, "retcp", "a port entry outranks the cgroup entry");
    assert_eq!(outside, default, "outside the cgroup the namespace default applies");
    // Two active opens matched, and the listener on 5902 at listen().
    assert!(set >= 3, "cc_set counted {set}");
}

/// Bytes the shaper on a switch port has sent.
fn port_tx_bytes(sw: &str, dev: &str) -> u64 {
    let s = sys::run("tc", &["-n", sw, "-s", "qdisc", "show", "dev", dev]).unwrap();
    let l = s.lines().find(|l| l.trim_start().starts_with("Sent")).unwrap();
    l.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn htb_stat(sw: &str, dev: &str, key: &str) -> u64 {
    let s = sys::run("tc", &["-n", sw, "-s", "qdisc", "show", "dev", dev]).unwrap();
    // The first qdisc listed is the root htb, whose figures include its leaf.
    let w: Vec<&str> = s.split_whitespace().collect();
    let i = w.iter().position(|x| x.trim_start_matches('(') == key).unwrap_or_else(|| panic!("no {key} in: {s}"));
    let v = w[i + 1].trim_end_matches([',', ')']);
    match v.strip_suffix('b') {
        Some(n) => n.parse().unwrap_or_else(|_| parse_size(n)),
        None => v.parse().unwrap_or_else(|_| parse_size(v)),
    }
}

fn parse_size(v: &str) -> u64 {
    let (n, m) = match v.chars().last() {
        Some('K') => (&v[..v.len() - 1], 1000),
        Some('M') => (&v[..v.len() - 1], 1_000_000),
        _ => (v, 1),
    };
    n.parse::<u64>().unwrap_or(0) * m
}

fn htb_backlog(sw: &str, dev: &str) -> u64 {
    htb_stat(sw, dev, "backlog")
}

fn htb_drops(sw: &str, dev: &str) -> u64 {
    htb_stat(sw, dev, "dropped")
}

#[test]
fn malformed_options_on_the_wire_are_counted_and_ignored() {
    let _g = prerequisites();
    let tb = TestbedGuard::up("slt3", 1500, 0);
    let _agent = AgentGuard::load("sluice-test-malformed");
    let (h1, h3, dst, sw) = (tb.ns(0), tb.ns(2), tb.addr(2), tb.0.switch.clone());
    // Without timestamps a bare segment is as acceptable as the stack's own.
    sys::run("ip", &["netns", "exec", &h1, "sysctl", "-qw", "net.ipv4.tcp_timestamps=0"]).unwrap();

    let malformed: Vec<(String, Vec<u8>)> = vectors()["malformed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), hex(t["bytes"].as_str().unwrap())))
        .filter(|(_, b)| b[0] == 0x72)
        .collect();
    let n_len = malformed.iter().filter(|(_, b)| b.len() >= 2 && b[1] != 12).count() as u64;
    let n_trunc = malformed.len() as u64 - n_len;
    assert!(n_len >= 2 && n_trunc >= 2);

    let s = sink(&h3, 5501, 1);
    let len0 = agent_counter(sockops::MALFORMED_LEN);
    let trunc0 = agent_counter(sockops::MALFORMED_TRUNC);
    let sw0 = int_switch::counters(Some(&sw)).unwrap()[int_switch::MALFORMED];
    let inject = malformed.clone();
    let client = in_netns(&h1, move || {
        let mut c = TcpStream::connect((dst, 5501)).expect("connect");
        c.write_all(&vec![1u8; 1 << 20]).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let (seq, ack) = repair_seqs(&c);
        let raw = RawSocket::open();
        let local = match c.local_addr().unwrap() {
            SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        for (_, opt) in &inject {
            raw.send(&bare_ack(*local.ip(), dst, local.port(), 5501, seq, ack, opt));
        }
        std::thread::sleep(Duration::from_millis(300));
        // No stall: the connection carries on and the data arrives.
        let t = Instant::now();
        c.write_all(&vec![2u8; 4 << 20]).unwrap();
        drop(c);
        t.elapsed()
    });
    let took = client.join().unwrap();
    let got = s.join().unwrap();
    assert_eq!(got, vec![5 << 20], "all data after the malformed segments arrives");
    assert!(took < Duration::from_secs(5), "transfer after injection took {took:?}");
    let dlen = agent_counter(sockops::MALFORMED_LEN) - len0;
    let dtrunc = agent_counter(sockops::MALFORMED_TRUNC) - trunc0;
    let dsw = int_switch::counters(Some(&sw)).unwrap()[int_switch::MALFORMED] - sw0;
    println!("malformed: agent counted {dlen} wrong-length and {dtrunc} truncated options, switch {dsw}");
    assert_eq!(dlen, n_len, "agent malformed_len");
    assert_eq!(dtrunc, n_trunc, "agent malformed_trunc");
    assert_eq!(dsw, n_len + n_trunc, "switch malformed");
}

/// What the agent stored of the last echo a socket received: (INTecr, LatEcr, echoes so far),
/// read from its socket storage by descriptor (`struct int_sk`).
fn stored_echo(c: &TcpStream) -> (u8, u32, u64) {
    let m = libbpf_rs::MapHandle::from_pinned_path(pins::pin("int_sk_store")).expect("pinned int_sk_store");
    let v = libbpf_rs::MapCore::lookup(&m, &c.as_raw_fd().to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .expect("socket storage lookup")
        .expect("the socket has agent storage");
    (v[12], u32::from_ne_bytes(v[8..12].try_into().unwrap()), u64::from_ne_bytes(v[16..24].try_into().unwrap()))
}

/// A TCP-INT option carrying echo fields only.
fn echo_option(int_ecr: u8, lat_ecr: u32) -> Vec<u8> {
    let o = TcpInt { int_val: 0, int_ecr, id: 0, id_ecr: 3, lat: 0, lat_ecr };
    codec::bpf_encode(&o).to_vec()
}

#[test]
fn forged_echoes_are_clamped_and_counted() {
    let _g = prerequisites();
    let tb = TestbedGuard::up("sltfe", 1500, 0);
    let _agent = AgentGuard::load("sluice-test-forged-echo");
    let (h1, h3, dst) = (tb.ns(0), tb.ns(2), tb.addr(2));
    // Without timestamps a bare segment is as acceptable as the stack's own.
    sys::run("ip", &["netns", "exec", &h1, "sysctl", "-qw", "net.ipv4.tcp_timestamps=0"]).unwrap();
    let enc = IntEncoding::default();
    // A fabric whose buffers hold 256 KiB a port and whose paths add at most 2 ms.
    let bounds = agent_config::EchoBounds::from_units(256 << 10, 110, 2_000_000, &enc);
    assert_eq!((bounds.queue_code, bounds.util_code, bounds.lat_ns), (32, 110, 2_000_000));
    assert_eq!(agent_config::set_echo_bounds(bounds).unwrap().echo_bounds, bounds);

    let listener = in_netns(&h3, || TcpListener::bind(("0.0.0.0", 5601)).expect("bind")).join().unwrap();
    let client = in_netns(&h1, move || TcpStream::connect((dst, 5601)).expect("connect")).join().unwrap();
    let raw = in_netns(&h1, RawSocket::open).join().unwrap();
    let (mut server, _) = listener.accept().expect("accept");
    // Real traffic first, so the connection is in full swing before anything is forged.
    let mut c = &client;
    c.write_all(&vec![1u8; 1 << 16]).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    server.read_exact(&mut buf).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (seq, ack) = repair_seqs(&client);
    let local = match client.local_addr().unwrap() {
        SocketAddr::V4(a) => a,
        _ => unreachable!(),
    };

    // (INTecr, LatEcr sent) -> (INTecr, LatEcr stored, INTval clamped, latency clamped)
    let cases: [((u8, u32), (u8, u32, u64, u64)); 6] = [
        ((0x80 | 32, 2_000_000), (0x80 | 32, 2_000_000, 0, 0)), // a queue and a latency at their bounds
        ((100, 1_000), (100, 1_000, 0, 0)),                      // 100 % utilization
        ((0x80 | 127, 500), (0x80 | 32, 500, 1, 0)),             // 1 MiB queue: a queue still, at 256 KiB
        ((127, 0xff_ffff), (110, 2_000_000, 1, 1)),              // 127 % and 16.7 ms: both clamped
        ((50, 3_000_000), (50, 2_000_000, 0, 1)),                // 3 ms only
        ((0x80 | 33, 2_000_001), (0x80 | 32, 2_000_000, 1, 1)),  // one unit past each bound
    ];
    let int0 = agent_counter(sockops::ECHO_INT_CLAMPED);
    let lat0 = agent_counter(sockops::ECHO_LAT_CLAMPED);
    let (_, _, mut n) = stored_echo(&server);
    let (mut want_int, mut want_lat) = (0, 0);
    for ((sent_int, sent_lat), (int, lat, dint, dlat)) in cases {
        raw.send(&bare_ack(*local.ip(), dst, local.port(), 5601, seq, ack, &echo_option(sent_int, sent_lat)));
        let t = Instant::now();
        let got = loop {
            let got = stored_echo(&server);
            if got.2 > n || t.elapsed() > Duration::from_secs(2) {
                break got;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(got, (int, lat, n + 1), "echo {sent_int:#x} {sent_lat} ns stored as (INTecr, LatEcr, count)");
        n += 1;
        want_int += dint;
        want_lat += dlat;
        let counted = (agent_counter(sockops::ECHO_INT_CLAMPED) - int0, agent_counter(sockops::ECHO_LAT_CLAMPED) - lat0);
        assert_eq!(counted, (want_int, want_lat), "clamps counted after echo {sent_int:#x} {sent_lat} ns");
    }
    println!("forged echoes: {want_int} INTvals and {want_lat} latencies clamped and counted");
    assert_eq!((want_int, want_lat), (3, 3));

    // Operators see them: `sluice host status` and the Prometheus export name both counters.
    let status = sluice_host::service::status::programs_status().unwrap();
    assert!(status.contains("echoes clamped to: queue <= 262144 B, util <= 110%, latency <= 2000000 ns"), "{status}");
    let counters = pins::read_counters("agent_counters", sockops::COUNTERS.len()).unwrap();
    for (name, i) in [("echo_int_clamped", sockops::ECHO_INT_CLAMPED), ("echo_lat_clamped", sockops::ECHO_LAT_CLAMPED)] {
        assert!(status.contains(&format!("  {name:16} {}\n", counters[i])), "{status}");
        let mut prom = Exposition::new();
        telemetry::flow_metrics(&telemetry::Flows::new(), &counters, &enc, &mut prom);
        let prom = prom.into_text();
        assert!(prom.contains(&format!("sluice_agent_total{{counter=\"{name}\"}} {}\n", counters[i])), "{prom}");
    }
    drop((client, server));
}

/// (next sequence number to send, next expected) of a connection, read in TCP repair mode.
fn repair_seqs(c: &TcpStream) -> (u32, u32) {
    const TCP_REPAIR: i32 = 19;
    const TCP_REPAIR_QUEUE: i32 = 20;
    const TCP_QUEUE_SEQ: i32 = 21;
    let fd = c.as_raw_fd();
    let set = |opt: i32, v: i32| {
        // SAFETY: setsockopt reads one int.
        let rc = unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, opt, (&v as *const i32).cast(), 4) };
        assert_eq!(rc, 0, "setsockopt {opt}: {}", std::io::Error::last_os_error());
    };
    let get = || {
        let mut v: u32 = 0;
        let mut l = 4 as libc::socklen_t;
        // SAFETY: getsockopt writes one u32.
        let rc = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, TCP_QUEUE_SEQ, (&mut v as *mut u32).cast(), &mut l) };
        assert_eq!(rc, 0, "getsockopt TCP_QUEUE_SEQ");
        v
    };
    set(TCP_REPAIR, 1);
    set(TCP_REPAIR_QUEUE, 2); // send queue
    let snd = get();
    set(TCP_REPAIR_QUEUE, 1); // receive queue
    let rcv = get();
    set(TCP_REPAIR, 0);
    (snd, rcv)
}

/// A raw IPv4 socket that sends whole IP packets.
struct RawSocket(i32);

impl RawSocket {
    fn open() -> RawSocket {
        // SAFETY: plain socket(2); IPPROTO_RAW implies IP_HDRINCL.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
        assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
        RawSocket(fd)
    }
    fn send(&self, pkt: &[u8]) {
        let dst = libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: 0,
            sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(pkt[16..20].try_into().unwrap()) },
            sin_zero: [0; 8],
        };
        // SAFETY: sendto reads `pkt` and `dst`.
        let n = unsafe {
            libc::sendto(self.0, pkt.as_ptr().cast(), pkt.len(), 0, (&dst as *const libc::sockaddr_in).cast(), std::mem::size_of_val(&dst) as u32)
        };
        assert_eq!(n, pkt.len() as isize, "sendto: {}", std::io::Error::last_os_error());
    }
}

impl Drop for RawSocket {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor this struct owns.
        unsafe { libc::close(self.0) };
    }
}

/// A bare ACK (no data, so it moves no sequence numbers) carrying `opt` as its last option:
/// NOPs in front so a truncated option really runs into the header's end.
fn bare_ack(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, seq: u32, ack: u32, opt: &[u8]) -> Vec<u8> {
    bare_segment(src, dst, sport, dport, seq, ack, 0x10, opt)
}

/// A segment without data with TCP `flags`, carrying `opt` as its last option.
#[allow(clippy::too_many_arguments)]
fn bare_segment(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, seq: u32, ack: u32, flags: u8, opt: &[u8]) -> Vec<u8> {
    let mut opts = vec![1u8; (4 - opt.len() % 4) % 4];
    opts.extend_from_slice(opt);
    let tcp_len = 20 + opts.len();
    let mut tcp = vec![0u8; 20];
    tcp[0..2].copy_from_slice(&sport.to_be_bytes());
    tcp[2..4].copy_from_slice(&dport.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[8..12].copy_from_slice(&ack.to_be_bytes());
    tcp[12] = ((tcp_len / 4) as u8) << 4;
    tcp[13] = flags;
    tcp[14..16].copy_from_slice(&8192u16.to_be_bytes());
    tcp.extend_from_slice(&opts);
    let c = !fold(sum16(&tcp, pseudo(&src.octets(), &dst.octets(), tcp_len)));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0];
    ip[2..4].copy_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    ip.extend_from_slice(&tcp);
    ip
}

#[test]
fn unload_and_down_leave_nothing_behind() {
    let _g = prerequisites();
    // Programs already loaded (by other tools, or held by sockets of earlier runs) are not ours to
    // judge: only those this test loads must be gone.
    let progs_before: Vec<u32> = bpf_progs().into_iter().map(|(id, _)| id).collect();
    let bpffs_before = sys::run("mount", &[]).unwrap().contains(" /sys/fs/bpf type bpf");
    {
        let tb = TestbedGuard::up("slt4", 1500, 30_000);
        let _agent = AgentGuard::load("sluice-test-cleanup");
        cc_policy::set(&Selector::Port(5601), "ecn_int").unwrap();
        let s = sink(&tb.ns(2), 5601, 1);
        let (sent, cc) = source(&tb.ns(0), tb.addr(2), 5601, 0.3).join().unwrap();
        assert_eq!(cc, "ecn_int+ecn");
        assert_eq!(s.join().unwrap(), vec![sent]);
        let during: Vec<String> = bpf_progs().into_iter().map(|(_, n)| n).collect();
        for p in ["sluice_agent", "sluice_cc_select", "sluice_ingress", "sluice_egress"] {
            // The kernel keeps 15 characters of a program's name.
            assert!(during.iter().any(|n| p.starts_with(n.as_str()) && n.len() >= 12), "{p} loaded while up");
        }
    }
    // Guards dropped: agent unloaded, testbed down. The kernel frees struct_ops maps and their
    // programs after an RCU grace period, so give it a few seconds.
    let ours = |progs: Vec<(u32, String)>| -> Vec<String> {
        progs
            .into_iter()
            .filter(|(id, _)| !progs_before.contains(id))
            .map(|(_, n)| n)
            .filter(|n| ["sluice_", "newreno_", "dctcp_", "ecn_int_", "retcp_"].iter().any(|p| n.starts_with(p)))
            .collect()
    };
    let t = Instant::now();
    let mut left = ours(bpf_progs());
    while !left.is_empty() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(200));
        left = ours(bpf_progs());
    }
    assert!(left.is_empty(), "programs left after {:?}: {left:?} (before the test: {} programs)", t.elapsed(), progs_before.len());
    assert!(!pins::pin_root().exists(), "pins left under {}", pins::pin_root().display());
    let netns = sys::run("ip", &["netns", "list"]).unwrap();
    assert!(!netns.contains("slt4-"), "namespaces left: {netns}");
    assert!(!Path::new(sys::CGROUP2_ROOT).join("sluice-test-cleanup").exists(), "cgroup left");
    let cc = sluice_host::kernel::struct_ops::available().unwrap();
    for a in sluice_host::kernel::struct_ops::ALGORITHMS {
        assert!(!cc.iter().any(|c| c == a), "{a} still registered");
    }
    assert!(!Path::new(sys::STATE_DIR).join("agent.json").exists());
    let bpffs_after = sys::run("mount", &[]).unwrap().contains(" /sys/fs/bpf type bpf");
    assert_eq!(bpffs_after, bpffs_before, "bpffs mount left as found");
    assert!(!Path::new(sys::STATE_DIR).join("testbed-slt4.json").exists());
}

/// Ids and names of the BPF programs loaded in the kernel.
fn bpf_progs() -> Vec<(u32, String)> {
    let mut progs = vec![];
    let mut id = 0u32;
    loop {
        // SAFETY: plain BPF syscalls on ids and an owned fd.
        unsafe {
            if libbpf_rs::libbpf_sys::bpf_prog_get_next_id(id, &mut id) != 0 {
                break;
            }
            let fd = libbpf_rs::libbpf_sys::bpf_prog_get_fd_by_id(id);
            if fd < 0 {
                continue;
            }
            let mut info: libbpf_rs::libbpf_sys::bpf_prog_info = std::mem::zeroed();
            let mut len = std::mem::size_of_val(&info) as u32;
            if libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) == 0 {
                let n: Vec<u8> = info.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
                progs.push((id, String::from_utf8_lossy(&n).into_owned()));
            }
            libc::close(fd);
        }
    }
    progs
}

// ---------------------------------------------------------------------------------------------
// One source, two targets: the kernel's steps replayed into the simulator build

impl AgentGuard {
    /// The agent without its own algorithms (a recording registers them), unloaded on drop.
    fn load_bare(name: &str) -> AgentGuard {
        sockops::unload().expect("unloading a stale agent");
        let cgroup = Path::new(sys::CGROUP2_ROOT).join(name);
        let home = sys::own_cgroup(Path::new(sys::CGROUP2_ROOT)).expect("own cgroup");
        let opts = LoadOptions { cgroup: cgroup.clone(), sample_ns: 0, register_cc: false, ..LoadOptions::default() };
        let st = sockops::load(&opts).expect("loading the agent");
        assert!(st.ccs.is_empty(), "the agent registered {:?}", st.ccs);
        let g = AgentGuard { cgroup, home };
        sys::cgroup_join(&g.cgroup, std::process::id()).expect("joining the agent's cgroup");
        g
    }
}

/// How a recorded run's connections get their algorithm.
enum Selection<'a> {
    /// An entry of `sluice host policy set --port`: the algorithm's defaults.
    Map,
    /// A class of the agent's policy on the port with these `params`, changed to `then` (the
    /// parameters of a second policy version) halfway through the run.
    Class { params: &'a str, then: Option<&'a str> },
}

/// Puts in force a policy of one class running `name` with `params` on `port`.
fn apply_class(name: &str, port: u16, params: &str, version: u32) {
    let text = format!("version = {version}\n[classes.recorded]\ncc = \"{name}\"\nmatch = {{ dst_ports = [{port}] }}\n[classes.recorded.params]\n{params}\n");
    let policy = sluice_sim::scenario::host_policy::parse(&text, "test policy").expect("a valid policy");
    sluice_host::service::enforce::put_in_force(&policy, "test policy").unwrap().expect("the policy applied");
}

/// Runs two bulk flows of `name` (recorded) through a port with a 24-packet queue that marks CE
/// above `ce_threshold` bytes, so the trace has marks, drops and fast recovery; returns every
/// recorded step.
fn record_kernel_trace(name: &'static str, prefix: &str, port: u16, ce_threshold: u64) -> Vec<sluice_sim::cc::portable::Record> {
    record_kernel_trace_by(name, prefix, port, ce_threshold, Selection::Map)
}

/// [`record_kernel_trace`], the algorithm chosen by `selection`.
fn record_kernel_trace_by(name: &'static str, prefix: &str, port: u16, ce_threshold: u64, selection: Selection) -> Vec<sluice_sim::cc::portable::Record> {
    let _ = netns::down(prefix);
    let opts = TestbedOptions { prefix: prefix.into(), mtu: 1500, queue_packets: 24, ce_threshold, ..TestbedOptions::default() };
    let tb = TestbedGuard(netns::up(&opts).expect("testbed up"));
    let _agent = AgentGuard::load_bare(&format!("sluice-test-diff-{name}"));
    let shared = sluice_host::kernel::struct_ops::SharedMaps::pinned().expect("the agent's maps");
    let rec = sluice_host::kernel::struct_ops::Recording::start(name, &shared).expect("registering the recording algorithm");
    let then = match selection {
        Selection::Map => {
            cc_policy::set(&Selector::Port(port), name).unwrap();
            None
        }
        Selection::Class { params, then } => {
            apply_class(name, port, params, 1);
            then
        }
    };
    for h in [0, 1] {
        // Classic ECN for NewReno; the others ask for ECN themselves.
        sys::run("ip", &["netns", "exec", &tb.ns(h), "sysctl", "-qw", "net.ipv4.tcp_ecn=1"]).unwrap();
    }
    // Segments leave the senders one MTU each and are acknowledged every two, not per 64 KB batch.
    let sw = tb.0.switch.clone();
    let devs = [(tb.ns(0), "eth0"), (tb.ns(1), "eth0"), (tb.ns(2), "eth0"), (sw.clone(), "p1"), (sw.clone(), "p2"), (sw, "p3")];
    for (ns, dev) in &devs {
        sys::run("ip", &["netns", "exec", ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"]).unwrap();
    }
    let s = sink(&tb.ns(2), port, 2);
    let a = source(&tb.ns(0), tb.addr(2), port, 6.0);
    let b = source(&tb.ns(1), tb.addr(2), port, 6.0);
    // Drain as it runs so the ring buffer never fills.
    let mut trace = vec![];
    let start = Instant::now();
    let mut then = then;
    while !(a.is_finished() && b.is_finished()) {
        std::thread::sleep(Duration::from_millis(50));
        trace.extend(rec.drain().unwrap());
        if start.elapsed() > Duration::from_secs(3) {
            if let Some(params) = then.take() {
                apply_class(name, port, params, 2);
            }
        }
    }
    let ((_, cca), (_, ccb)) = (a.join().unwrap(), b.join().unwrap());
    s.join().unwrap();
    trace.extend(rec.drain().unwrap());
    assert!(cca.starts_with(name) && ccb.starts_with(name), "policy selected {name}: got {cca}, {ccb}");
    trace
}

/// The must-show of the portable form: for each algorithm, a trace of at least 10,000 ACKs with
/// CE marks, losses and fast recovery, recorded from the BPF build in real kernel TCP, replays
/// into the simulator build of the same C source with every cwnd and ssthresh identical; and the
/// simulator build with two constants changed (a loss quarters the window, an ECN cut takes alpha
/// / 4) fails the same replay.
///
/// The mutant differs from the standard build only where a cut leaves the window above the
/// two-segment floor. ECN+INT's windows sit near it: marking above 10 KB, every loss of some runs
/// came at the floor and the loss constant alone matched the kernel. Its ECN cuts show the second
/// constant. A recording is made again, marking above 15 then 10 KB, when it lacks marks, losses
/// or recovery, or when the mutant matches it (the trace then holds no cut the mutant changes);
/// every recording must replay exactly in the standard build.
#[test]
fn kernel_traces_replay_identically_in_the_simulator_build() {
    use sluice_sim::cc::portable::{replay, Build};
    let _g = prerequisites();
    for (i, name) in ["newreno", "dctcp", "ecn_int", "retcp"].into_iter().enumerate() {
        let mut tries = [20_000, 15_000, 10_000].into_iter().peekable();
        let (st, mutant) = loop {
            let ce = tries.next().expect("a threshold to try");
            let trace = record_kernel_trace(name, &format!("sltd{i}"), 6001 + i as u16, ce);
            let st = replay(name, Build::Standard, &trace).unwrap().unwrap_or_else(|m| panic!("{name}: {m}"));
            let mutant = replay(name, Build::Mutant, &trace).unwrap();
            println!("{name}: {} records, CE above {ce} B, {st:?}; mutant {mutant:?}", trace.len());
            let complete = st.marked > 0 && st.losses > 0 && st.in_recovery > 0 && mutant.is_err();
            if complete || tries.peek().is_none() {
                break (st, mutant);
            }
        };
        assert!(st.acks >= 10_000, "{name}: only {} ACKs recorded", st.acks);
        assert!(st.marked > 0 && st.losses > 0 && st.in_recovery > 0, "{name}: the trace lacks marks, losses or recovery: {st:?}");
        let m = mutant.expect_err("the mutant simulator build matched the kernel");
        println!("{name}: the mutant build diverges at {m}");
    }
}

/// A class's parameters reach the kernel's algorithm: DCTCP run by real kernel TCP with the
/// agent's class `g = 0.25, alpha_init = 0.5` replays exactly in the simulator build given the
/// same class table, and diverges from the simulator build with the defaults (what a kernel that
/// ignored the class's parameters would have run).
#[test]
fn class_parameters_reach_the_kernel_and_replay_identically_in_the_simulator() {
    use sluice_sim::cc::portable::{replay, replay_with, Build};
    let _g = prerequisites();
    let params = "g = 0.25\nalpha_init = 0.5";
    let trace = record_kernel_trace_by("dctcp", "sltp", 6101, 20_000, Selection::Class { params, then: None });
    let table: toml::Table = toml::from_str(params).unwrap();
    let st = replay_with("dctcp", &table, Build::Standard, &trace).unwrap().unwrap_or_else(|m| panic!("with the class's parameters: {m}"));
    println!("dctcp g = 0.25: {} records, {st:?}", trace.len());
    assert!(st.acks >= 10_000 && st.marked > 0, "the trace lacks ACKs or marks: {st:?}");
    let m = replay("dctcp", Build::Standard, &trace).unwrap().expect_err("the defaults matched a trace run with g = 0.25");
    println!("with the defaults the simulator build diverges at {m}");
}

/// Parameters that change after setup (the draft's 7.2): DCTCP's g goes from 1/16 to 1 halfway
/// through two recorded transfers. Each flow's trace is explained by the first value up to one
/// record and the second from there, with at least 1,000 ACKs on each side, and by neither value
/// alone: the open connections took the new value without a reset.
#[test]
fn a_parameter_changed_mid_flow_reaches_open_connections() {
    use sluice_sim::cc::portable::{change_point, replay_with, Build, Record, REC_ACK};
    let _g = prerequisites();
    let (before, after) = ("g = 0.0625", "g = 1.0");
    let trace = record_kernel_trace_by("dctcp", "sltm", 6102, 20_000, Selection::Class { params: before, then: Some(after) });
    let (b, a): (toml::Table, toml::Table) = (toml::from_str(before).unwrap(), toml::from_str(after).unwrap());
    // The trace numbers every setup of the algorithm (both ends, before and after the handshake)
    // as a flow: the two senders are the flows with data acknowledged (a receiver's only ACK
    // with data is its handshake's).
    let mut acked: std::collections::BTreeMap<u64, usize> = Default::default();
    for r in trace.iter().filter(|r| r.kind == REC_ACK && r.sig.acked > 0) {
        *acked.entry(r.flow).or_default() += 1;
    }
    let flows: Vec<u64> = acked.into_iter().filter(|(_, n)| *n > 1).map(|(f, _)| f).collect();
    assert_eq!(flows.len(), 2, "two recorded senders");
    for f in flows {
        let own: Vec<Record> = trace.iter().filter(|r| r.flow == f).copied().collect();
        replay_with("dctcp", &a, Build::Standard, &own).unwrap().expect_err("g = 1 alone explained the flow");
        let at = change_point("dctcp", &b, &a, Build::Standard, &own).unwrap().unwrap_or_else(|| panic!("flow {f}: g = 1/16 alone, or no single change of g, explains the trace"));
        let acks = |rs: &[Record]| rs.iter().filter(|r| r.kind == REC_ACK).count();
        println!("flow {f}: g = 1/16 for {} ACKs, then g = 1 for {}", acks(&own[..at]), acks(&own[at..]));
        assert!(acks(&own[..at]) >= 1_000 && acks(&own[at..]) >= 1_000, "flow {f}: the change at record {at} of {}", own.len());
    }
}

/// The worked example of docs/writing-a-cc.md, taken from the guide's text: it compiles with the
/// system C compiler as the simulator build does (exporting what the simulator's adapter reads),
/// and with clang into the kernel glue, whose struct_ops the verifier accepts and the kernel
/// registers under the example's name.
#[test]
fn the_guides_worked_example_builds_for_both_targets() {
    let _g = prerequisites();
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/writing-a-cc.md")).unwrap();
    let start = guide.find("```c\n/* aimd.c").expect("the guide's worked example") + "```c\n".len();
    let example = &guide[start..start + guide[start..].find("```").unwrap()];
    let dir = std::env::temp_dir().join(format!("sluice-guide-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("aimd.c"), example).unwrap();
    let portable = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-sim/src/cc/portable");
    let compile = |prog: &str, args: &[&str]| {
        let out = std::process::Command::new(prog).args(args).current_dir(&dir).output().unwrap();
        assert!(out.status.success(), "{prog} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };

    // The simulator's target: what build.rs does with the cc crate.
    compile("cc", &["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror", "-O2", "-I", portable, "-c", "aimd.c", "-o", "aimd.o"]);
    let nm = sys::run("nm", &[dir.join("aimd.o").to_str().unwrap()]).unwrap();
    for sym in ["aimd_init", "aimd_on_ack", "aimd_on_event", "aimd_vars", "aimd_defaults", "aimd_flags", "aimd_state_size"] {
        assert!(nm.lines().any(|l| l.ends_with(&format!(" {sym}")) && !l.contains(" U ")), "{sym} not defined natively:\n{nm}");
    }

    // The kernel's target: the same file after the struct_ops glue, as crates/sluice-host/build.rs does.
    std::fs::write(dir.join("aimd.bpf.c"), "#include \"vmlinux.h\"\n#include \"scc_kernel.h\"\n#include \"aimd.c\"\n").unwrap();
    let bpf = concat!(env!("CARGO_MANIFEST_DIR"), "/bpf");
    libbpf_cargo::SkeletonBuilder::new()
        .source(dir.join("aimd.bpf.c"))
        .obj(dir.join("aimd.bpf.o"))
        .clang_args(["-I", env!("OUT_DIR"), "-I", bpf, "-I", portable, "-I", dir.to_str().unwrap(), "-Wall", "-Wno-unused-parameter"])
        .build()
        .expect("clang -target bpf compiles the example in the kernel glue");
    let mut obj = libbpf_rs::ObjectBuilder::default().open_file(dir.join("aimd.bpf.o")).unwrap().load().expect("the verifier accepts the example");
    let mut map = obj.maps_mut().find(|m| libbpf_rs::MapCore::name(m) == "aimd").expect("the struct_ops map");
    let link = map.attach_struct_ops().expect("registering the example");
    assert!(sluice_host::kernel::struct_ops::available().unwrap().iter().any(|a| a == "aimd"), "aimd registered in the kernel");
    drop(link);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The testbed's circuit mode on real kernels (docs/rdcn.md): h1 sends to h3 over a path that runs
/// at 50 Mb/s except for a 50 ms day every 250 ms at 1 Gb/s, with 8-packet queues and a 5 ms
/// delay line on the ACK path, so a day needs a window several times the one a slow phase keeps;
/// the switch sets ECE on ACKs to h1 during each day. reTCP (Reno that doubles its window on the
/// signal) must move at least 15% more bytes in the fast phases than NewReno (the same Reno
/// without it), as medians over twelve days. Single days range from 0.5x to 3x the mean, so six
/// were once too few (1.06x); measured here 1.27-2.00x over 10 runs of six days as means,
/// 1.33-1.69x with a busy loop on one core. The median, not the mean: one reTCP day that stalled
/// at 41 Mb/s once pulled twelve days' mean to 1.11x while the median stood at 1.38x.
#[test]
fn retcp_fills_the_fast_phase_faster_than_newreno_in_circuit_mode() {
    use sluice_host::testbed::circuit::{self, CircuitPlan};
    use sluice_host::testbed::delay::DelayLine;
    let _g = prerequisites();
    let _ = netns::down("slt9");
    let opts = TestbedOptions { prefix: "slt9".into(), mtu: 9000, queue_packets: 8, ce_threshold: 0, ..TestbedOptions::default() };
    let tb = TestbedGuard(netns::up(&opts).expect("testbed up"));
    let _agent = AgentGuard::load("sluice-test-circuit");
    cc_policy::set(&Selector::Port(5911), "retcp").unwrap();
    cc_policy::set(&Selector::Port(5912), "newreno").unwrap();
    let line = DelayLine::start(&tb.0, 3, 1, Duration::from_millis(5)).expect("the delay line");
    let ms = Duration::from_millis;
    let plan = CircuitPlan {
        sender_port: "p1".into(),
        receiver_port: "p3".into(),
        slow_bps: 50_000_000,
        fast_bps: 1_000_000_000,
        day: ms(50),
        week: ms(250),
        tau: Duration::ZERO,
        weeks: 12,
    };
    let fast_phases = |port: u16| {
        let s = sink(&tb.ns(2), port, 1);
        let t0 = Instant::now();
        let src = source(&tb.ns(0), tb.addr(2), port, (plan.week * plan.weeks + plan.day).as_secs_f64() + 0.1);
        let log = circuit::run(&tb.0, &plan, t0, |_| {}).expect("the circuit schedule");
        let (sent, cc) = src.join().unwrap();
        assert_eq!(s.join().unwrap(), vec![sent], "every byte arrives");
        let days = circuit::day_rates(&log, plan.fast_bps);
        assert_eq!(days.len(), 12);
        let mut sorted = days.clone();
        sorted.sort_by(f64::total_cmp);
        ((sorted[5] + sorted[6]) / 2.0, days, cc)
    };
    let ece_before = int_switch::counters(Some(&tb.0.switch)).unwrap()[7];
    let (retcp, retcp_days, cc) = fast_phases(5911);
    assert_eq!(cc, "retcp+ecn", "policy selected reTCP, with ECN");
    let marked = int_switch::counters(Some(&tb.0.switch)).unwrap()[7] - ece_before;
    let (reno, reno_days, cc) = fast_phases(5912);
    assert_eq!(cc, "newreno");
    let carried = line.stop().expect("stopping the delay line");
    let mbps = |v: &[f64]| v.iter().map(|r| format!("{:.0}", r / 1e6)).collect::<Vec<_>>().join(" ");
    println!("circuit mode, fast-phase goodput per day (Mb/s): retcp {} (median {:.0}); newreno {} (median {:.0}); x{:.2}; {marked} ACKs given ECE, {carried} packets through the delay line",
        mbps(&retcp_days), retcp / 1e6, mbps(&reno_days), reno / 1e6, retcp / reno);
    assert!(marked > 100, "the switch set ECE on {marked} ACKs");
    assert!(carried > 1000, "{carried} packets took the delay line");
    assert!(retcp > 1.15 * reno, "reTCP {:.0} Mb/s against NewReno {:.0} Mb/s in the fast phases", retcp / 1e6, reno / 1e6);
}

// ---------------------------------------------------------------------------------------------
// Negotiation in the handshake

/// Two classes as the operator writes them, for the agent and for the simulator alike: one whose
/// algorithm needs TCP-INT (and ECN), one whose algorithm needs ECN, each with its own fallback.
const NEGOTIATED_CLASSES: &str = r#"
[classes.telemetry]
cc = "ecn_int"
fallback = "cubic"
match = { dst_ports = [5801] }
[classes.marks]
cc = "dctcp"
fallback = "newreno"
match = { dst_ports = [5802] }
"#;

/// The testbed as the simulator draws it: two hosts on one switch that marks ECN and stamps
/// TCP-INT, connections opened with a handshake, one flow per class from host 0 to host 1.
fn negotiation_scenario() -> String {
    format!(
        r#"
[topology]
kind = "star"
hosts = 2
host_rate = "1Gbps"
host_delay = "10us"
[switch.ecn]
mode = "step"
k = "30KB"
[transport]
handshake = true
{NEGOTIATED_CLASSES}
[[workloads]]
kind = "flows"
dst_port = 5801
flows = [{{ src = 0, dst = 1, size = "100KB" }}]
[[workloads]]
kind = "flows"
dst_port = 5802
flows = [{{ src = 0, dst = 1, size = "100KB", start = "1us" }}]
"#
    )
}

/// (algorithm run, negotiation outcome) of each class's flow in the simulator.
fn simulated_outcomes(overrides: &[&str]) -> Vec<(String, String)> {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let loaded = sluice_sim::scenario::parse(&negotiation_scenario(), "negotiation.toml", Path::new("."), &overrides).expect("the twin scenario");
    let mut world = sluice_sim::scenario::build(&loaded).expect("building the twin");
    world.run(&mut |_| {});
    world.flows().iter().map(|f| (f.cc_name().to_string(), f.negotiation().label().to_string())).collect()
}

/// A listener on `port` in `ns` that accepts one connection and reads it to the end; opened by
/// this process from cgroup `cgroup`, whose programs (if any) the listener then runs.
fn listener_in(ns: &str, port: u16, cgroup: &Path, back: &Path) -> JoinHandle<Vec<u64>> {
    sys::cgroup_join(cgroup, std::process::id()).expect("joining the listener's cgroup");
    let h = sink(ns, port, 1);
    sys::cgroup_join(back, std::process::id()).expect("returning to the agent's cgroup");
    h
}

/// (algorithm run, negotiation outcome) of one connection per class opened from host 0 to host 1,
/// the outcome read from the class's counters in the kernel.
fn kernel_outcomes(tb: &TestbedGuard, agent: &AgentGuard, peer_has_agent: bool) -> Vec<(String, String)> {
    let applied = sluice_platform::applied::applied().unwrap().expect("a policy in force");
    let server_cgroup = if peer_has_agent { agent.cgroup.clone() } else { agent.home.clone() };
    let mut out = vec![];
    for (class, port) in [("telemetry", 5801u16), ("marks", 5802)] {
        let id = applied.classes.iter().find(|c| c.name == class).unwrap().id;
        let before = sluice_host::kernel::class_table::counts(id).unwrap();
        let l = listener_in(&tb.ns(1), port, &server_cgroup, &agent.cgroup);
        let cc = connect_cc(&tb.ns(0), tb.addr(1), port);
        l.join().unwrap();
        let after = sluice_host::kernel::class_table::counts(id).unwrap();
        let moved: Vec<&str> = sluice_sim::cc::negotiation::Negotiation::ALL
            .iter()
            .zip(before.negotiated.iter().zip(after.negotiated))
            .filter(|(_, (b, a))| a > *b)
            .map(|(o, _)| o.label())
            .collect();
        assert_eq!(moved.len(), 1, "{class}: exactly one outcome counted, got {moved:?}");
        assert_eq!(after.malformed, before.malformed, "{class}: no malformed answer");
        out.push((cc, moved[0].to_string()));
    }
    out
}

/// The draft's negotiation (7.1) on real TCP, each case against the simulator: the agent's SYN
/// proposes, the switch clears what its port cannot honour, the peer's agent answers, and the
/// client runs its class's algorithm or the class's fallback; the simulator, given the same
/// classes and the same fabric, reports the same algorithm and the same reason.
#[test]
fn negotiation_outcomes_on_real_tcp_equal_the_simulators() {
    let _g = prerequisites();
    let tb = TestbedGuard::up("sltneg", 1500, 30_000);
    let agent = AgentGuard::load("sluice-test-negotiation");
    let policy = sluice_sim::scenario::host_policy::parse(&format!("version = 1\n{NEGOTIATED_CLASSES}"), "negotiation policy").expect("a valid policy");
    sluice_host::service::enforce::put_in_force(&policy, "negotiation policy").unwrap().expect("the policy applied");
    let (sw, port) = (tb.0.switch.clone(), tb.0.hosts[1].switch_port.clone());
    let normal = int_switch::port_config(&port, Some(&sw)).unwrap();
    let answered0 = pins::read_counters("cc_counters", sockops::CC_COUNTERS.len()).unwrap()[sockops::NEG_ANSWERED];
    // (case, the simulator's overrides, the switch port towards the peer, the peer runs the agent)
    let cases: [(&str, &[&str], PortConfig, bool); 4] = [
        ("both ends with the agent", &[], normal, true),
        ("a peer without the agent", &["transport.agentless_hosts=[1]"], normal, false),
        ("a switch port without ECN", &["switch.ecn.mode=\"off\""], PortConfig { ce_threshold: 0, ..normal }, true),
        ("a switch without TCP-INT", &["int.legacy_switches=[\"sw0\"]"], PortConfig { int_off: true, ..normal }, true),
    ];
    let mut fallbacks = 0;
    for (case, overrides, cfg, peer_has_agent) in &cases {
        int_switch::set_port_config(&port, Some(&sw), cfg).unwrap();
        let kernel = kernel_outcomes(&tb, &agent, *peer_has_agent);
        let sim = simulated_outcomes(overrides);
        println!("negotiation, {case}: kernel {kernel:?}, simulator {sim:?}");
        assert_eq!(kernel, sim, "{case}: the kernel and the simulator agree on each class's algorithm and reason");
        fallbacks += kernel.iter().filter(|(_, o)| o != "accepted").count();
    }
    int_switch::set_port_config(&port, Some(&sw), &normal).unwrap();
    // Each fallback case moves at least one class, and only the agentless peer answers nothing.
    assert!(fallbacks >= 4, "{fallbacks} fallbacks over the four cases");
    let answered = pins::read_counters("cc_counters", sockops::CC_COUNTERS.len()).unwrap()[sockops::NEG_ANSWERED] - answered0;
    assert_eq!(answered, 6, "the peer's agent answered both classes in the three cases it was there");
    let seen = int_switch::counters(Some(&sw)).unwrap()[int_switch::NEG_SEEN];
    assert!(seen >= 8, "the switch saw every proposal: {seen}");
}

/// Malformed negotiation options are ignored and counted, never trusted: a SYN whose option has
/// the wrong length, or runs past the header, gets no answer from the listener's agent, and the
/// switch passes it untouched and counts it.
#[test]
fn malformed_negotiation_options_are_counted_and_not_answered() {
    let _g = prerequisites();
    let tb = TestbedGuard::up("sltnegm", 1500, 30_000);
    let _agent = AgentGuard::load("sluice-test-negotiation-bad");
    let (h1, h2, src, dst, sw) = (tb.ns(0), tb.ns(1), tb.addr(0), tb.addr(1), tb.0.switch.clone());
    let l = sink(&h2, 5803, 1);
    let bad: [&[u8]; 3] = [
        &[253, 4, 0x53, 0x4c],                  // no capabilities byte
        &[253, 6, 0x53, 0x4c, 0xb0, 0x00],      // a byte too many
        &[1, 1, 1, 253, 5, 0x53, 0x4c],         // runs past the header's end
    ];
    let read = || pins::read_counters("cc_counters", sockops::CC_COUNTERS.len()).unwrap();
    let (c0, sw0) = (read(), int_switch::counters(Some(&sw)).unwrap()[int_switch::NEG_MALFORMED]);
    in_netns(&h1, move || {
        let raw = RawSocket::open();
        for (i, opt) in bad.iter().enumerate() {
            raw.send(&bare_segment(src, dst, 41000 + i as u16, 5803, 7, 0, 0x02, opt));
        }
        std::thread::sleep(Duration::from_millis(300));
    })
    .join()
    .unwrap();
    // The listener still serves a well-formed connection.
    assert!(!connect_cc(&h1, dst, 5803).is_empty());
    l.join().unwrap();
    let c = read();
    let malformed = c[sockops::NEG_MALFORMED] - c0[sockops::NEG_MALFORMED];
    let answered = c[sockops::NEG_ANSWERED] - c0[sockops::NEG_ANSWERED];
    let sw_bad = int_switch::counters(Some(&sw)).unwrap()[int_switch::NEG_MALFORMED] - sw0;
    println!("malformed negotiation: listener counted {malformed}, answered {answered}; switch counted {sw_bad}");
    assert_eq!(malformed, 3, "each malformed SYN counted once by the listener's agent");
    assert_eq!(answered, 0, "no connection here proposes, so nothing is answered");
    assert_eq!(sw_bad, 3, "the switch counted each malformed proposal");
}
