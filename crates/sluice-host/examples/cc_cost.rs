//! The per-ACK cost of BPF congestion control in the kernel, from the kernel's BPF run-time
//! statistics (`kernel.bpf_stats_enabled`): for each algorithm, one bulk TCP flow with ECN through
//! the netns testbed (1 Gb/s port marking CE above 30 KB) for a few seconds; the nanoseconds all
//! of its struct_ops programs ran, divided by the ACKs its `in_ack_event` program saw.
//!
//! ```text
//! sudo target/release/examples/cc_cost [--secs 5] [ALG | NAME=OBJECT.bpf.o]...
//! ```
//! `ALG` is a portable algorithm of this build (newreno, dctcp, ecn_int, retcp; the default is all
//! four); `NAME=OBJECT` loads another struct_ops object whose algorithm is named NAME (an older
//! hand-written build, say). Nothing else may be registered under these names while it runs.
//! With `--class`, the agent runs too (on a cgroup of its own, this process in it) with a policy
//! that puts the flow in a class running its algorithm with that algorithm's default
//! parameters, so the glue reads the class's parameters at every ACK; an object with the agent's
//! maps shares them.

use anyhow::{bail, Context, Result};
use libbpf_rs::{Link, MapCore, MapType, Object, ObjectBuilder};
use sluice_host::sys::NetnsGuard;
use sluice_host::testbed::netns::{self, TestbedOptions};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

const PREFIX: &str = "ccb";
const PORT: u16 = 5901;

/// Run time and run count of one program.
fn stats(fd: i32) -> Result<(u64, u64)> {
    // SAFETY: a plain BPF syscall on an open program fd, into a zeroed info struct.
    unsafe {
        let mut info: libbpf_rs::libbpf_sys::bpf_prog_info = std::mem::zeroed();
        let mut len = std::mem::size_of_val(&info) as u32;
        if libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) != 0 {
            bail!("bpf_prog_get_info_by_fd: {}", std::io::Error::last_os_error());
        }
        Ok((info.run_time_ns, info.run_cnt))
    }
}

/// Each program of `obj` by name: (run time ns, run count).
fn snapshot(obj: &Object) -> Result<HashMap<String, (u64, u64)>> {
    obj.progs().map(|p| Ok((p.name().to_string_lossy().into_owned(), stats(p.as_fd().as_raw_fd())?))).collect()
}

/// The object bytes of a portable algorithm of this build.
fn portable(name: &str) -> Result<&'static [u8]> {
    macro_rules! obj {
        ($n:literal) => {
            include_bytes!(concat!(env!("OUT_DIR"), "/", $n, ".bpf.o")).as_slice()
        };
    }
    Ok(match name {
        "newreno" => obj!("newreno"),
        "dctcp" => obj!("dctcp"),
        "ecn_int" => obj!("ecn_int"),
        "retcp" => obj!("retcp"),
        other => bail!("{other}: not a portable algorithm (newreno, dctcp, ecn_int, retcp); give NAME=OBJECT.bpf.o for others"),
    })
}

/// Loads an object and registers its struct_ops; the registration lasts as long as the link.
fn register(name: &str, bytes: &[u8]) -> Result<(Object, Link)> {
    if sluice_host::kernel::struct_ops::available()?.iter().any(|a| a == name) {
        bail!("{name} is already registered (unload the agent, `sluice host unload`, first)");
    }
    let mut open = ObjectBuilder::default().open_memory(bytes).with_context(|| format!("opening {name}"))?;
    if sluice_host::kernel::sockops::state()?.is_some() {
        for mut m in open.maps_mut() {
            let shared = m.name().to_str().map(String::from).filter(|n| ["int_sk_store", "class_sk", "class_params"].contains(&n.as_str()));
            if let Some(n) = shared {
                let pinned = libbpf_rs::MapHandle::from_pinned_path(sluice_host::kernel::pins::pin(&n))?;
                m.reuse_fd(pinned.as_fd()).with_context(|| format!("sharing the agent's {n}"))?;
            }
        }
    }
    let mut obj = open.load().with_context(|| format!("loading {name} (verifier)"))?;
    let link = obj
        .maps_mut()
        .find(|m| m.map_type() == MapType::StructOps)
        .with_context(|| format!("{name}: no struct_ops in the object"))?
        .attach_struct_ops()
        .with_context(|| format!("registering {name}"))?;
    Ok((obj, link))
}

/// One bulk flow of `secs` seconds from host 1 to host 2 under algorithm `cc`; returns the bytes.
fn bulk(tb: &netns::Testbed, cc: &str, secs: f64) -> Result<u64> {
    let (h1, h2, dst) = (tb.hosts[0].netns.clone(), tb.hosts[1].netns.clone(), tb.hosts[1].addr);
    let sink = std::thread::spawn(move || -> Result<u64> {
        let _g = NetnsGuard::enter(Some(&h2))?;
        let l = TcpListener::bind(("0.0.0.0", PORT))?;
        let (mut s, _) = l.accept()?;
        let (mut buf, mut n) = (vec![0u8; 1 << 16], 0u64);
        loop {
            match s.read(&mut buf)? {
                0 => return Ok(n),
                k => n += k as u64,
            }
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    let cc = cc.to_string();
    let source = std::thread::spawn(move || -> Result<()> {
        let _g = NetnsGuard::enter(Some(&h1))?;
        let mut s = TcpStream::connect((dst, PORT))?;
        // SAFETY: setsockopt on an open socket with a valid name buffer.
        let rc = unsafe { libc::setsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CONGESTION, cc.as_ptr().cast(), cc.len() as u32) };
        if rc != 0 {
            bail!("TCP_CONGESTION {cc}: {}", std::io::Error::last_os_error());
        }
        let (buf, t0) = (vec![0x5au8; 1 << 16], Instant::now());
        while t0.elapsed().as_secs_f64() < secs {
            s.write_all(&buf)?;
        }
        Ok(())
    });
    source.join().expect("source thread")?;
    sink.join().expect("sink thread")
}

fn main() -> Result<()> {
    sluice_host::sys::require_root("cc_cost")?;
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut secs = 5.0;
    if let Some(i) = args.iter().position(|a| a == "--secs") {
        secs = args.get(i + 1).and_then(|v| v.parse().ok()).filter(|s: &f64| *s > 0.0).context("--secs: expected a positive number of seconds")?;
        args.drain(i..i + 2);
    }
    let class = args.iter().position(|a| a == "--class").map(|i| args.remove(i)).is_some();
    if args.is_empty() {
        args = sluice_host::kernel::struct_ops::ALGORITHMS.iter().map(|s| s.to_string()).collect();
    }
    let cgroup = std::path::Path::new(sluice_host::sys::CGROUP2_ROOT).join("sluice-cc-cost");
    let home = sluice_host::sys::own_cgroup(std::path::Path::new(sluice_host::sys::CGROUP2_ROOT))?;
    if class {
        let opts = sluice_host::kernel::sockops::LoadOptions { cgroup: cgroup.clone(), sample_ns: 0, register_cc: false, ..Default::default() };
        sluice_host::kernel::sockops::load(&opts)?;
        sluice_host::sys::cgroup_join(&cgroup, std::process::id())?;
    }
    let stats_path = "/proc/sys/kernel/bpf_stats_enabled";
    let before = std::fs::read_to_string(stats_path).context(stats_path)?;
    std::fs::write(stats_path, "1").context(stats_path)?;
    let _ = netns::down(PREFIX);
    let opts = TestbedOptions { prefix: PREFIX.into(), hosts: 2, ..TestbedOptions::default() };
    let tb = netns::up(&opts)?;
    let result = (|| -> Result<()> {
        for h in &tb.hosts {
            sluice_host::sys::run("ip", &["netns", "exec", &h.netns, "sysctl", "-qw", "net.ipv4.tcp_ecn=1"])?;
        }
        println!("{:<12} {:>10} {:>8} {:>10}  per program (ns per call)", "algorithm", "ACKs", "Gbit/s", "ns/ACK");
        for a in &args {
            let (name, bytes) = match a.split_once('=') {
                Some((n, path)) => (n.to_string(), std::fs::read(path).with_context(|| format!("reading {path}"))?),
                None => (a.clone(), portable(a)?.to_vec()),
            };
            if class {
                let base = if sluice_host::kernel::struct_ops::ALGORITHMS.contains(&name.as_str()) { name.as_str() } else { "cubic" };
                let text = format!("[classes.measured]\ncc = \"{base}\"\nmatch = {{ dst_ports = [{PORT}] }}\n");
                let policy = sluice_sim::scenario::host_policy::parse(&text, "cc_cost").map_err(|e| anyhow::anyhow!("{e}"))?;
                sluice_host::service::enforce::put_in_force(&policy, "cc_cost")?.map_err(|e| anyhow::anyhow!("{e}"))?;
            }
            let (obj, link) = register(&name, &bytes)?;
            let s0 = snapshot(&obj)?;
            let moved = bulk(&tb, &name, secs)?;
            let s1 = snapshot(&obj)?;
            drop(link);
            let mut total_ns = 0;
            let mut acks = 0;
            let mut per = vec![];
            for (prog, &(t1, c1)) in &s1 {
                let (t0, c0) = s0[prog];
                let (dt, dc) = (t1 - t0, c1 - c0);
                total_ns += dt;
                if prog.contains("in_ack") {
                    acks = dc;
                }
                if dc > 0 {
                    per.push(format!("{prog} {:.0}", dt as f64 / dc as f64));
                }
            }
            per.sort();
            if acks == 0 {
                bail!("{name}: its in_ack_event program never ran (no ECN negotiated, or no such program)");
            }
            let gbps = moved as f64 * 8.0 / secs / 1e9;
            println!("{name:<12} {acks:>10} {gbps:>8.3} {:>10.1}  {}", total_ns as f64 / acks as f64, per.join(", "));
        }
        Ok(())
    })();
    netns::down(PREFIX)?;
    std::fs::write(stats_path, before.trim())?;
    if class {
        sluice_host::sys::cgroup_join(&home, std::process::id())?;
        sluice_host::kernel::sockops::unload()?;
        let _ = std::fs::remove_dir(&cgroup);
    }
    result
}
