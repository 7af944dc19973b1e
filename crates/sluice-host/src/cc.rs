//! BPF congestion control: DCTCP, ECN+INT and reTCP as `struct_ops`, registered in the kernel
//! under the names the simulator's registry uses, so `tcp_congestion_control` and the CC policy
//! select them like built-in algorithms.

use crate::skel::{dctcp::DctcpSkelBuilder, ecn_int::EcnIntSkelBuilder, retcp::RetcpSkelBuilder};
use crate::sys::pin_root;
use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::query::MapInfoIter;
use libbpf_rs::{Link, MapCore, MapType};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};
use std::mem::MaybeUninit;
use std::path::PathBuf;

/// The algorithms, by kernel name.
pub const ALGORITHMS: &[&str] = &["dctcp", "ecn_int", "retcp"];

fn pin(name: &str) -> PathBuf {
    pin_root().join("cc").join(name)
}

/// Names of the congestion-control algorithms the kernel offers now.
pub fn available() -> Result<Vec<String>> {
    let s = fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .context("reading /proc/sys/net/ipv4/tcp_available_congestion_control")?;
    Ok(s.split_whitespace().map(String::from).collect())
}

/// Registers one algorithm and pins its link so it stays registered; `int_sk_store` is the
/// agent's per-socket TCP-INT state, which ECN+INT reads.
pub fn register(name: &str, int_sk_store: &dyn MapCore) -> Result<()> {
    wait_for_name(name)?;
    fs::create_dir_all(pin_root().join("cc"))?;
    let mut link: Link = match name {
        "dctcp" => {
            let mut obj = MaybeUninit::uninit();
            let mut skel = DctcpSkelBuilder::default().open(&mut obj)?.load().context("loading dctcp (verifier)")?;
            skel.maps.dctcp.attach_struct_ops().context("registering dctcp")?
        }
        "ecn_int" => {
            let mut obj = MaybeUninit::uninit();
            let mut open = EcnIntSkelBuilder::default().open(&mut obj)?;
            open.maps.int_sk_store.reuse_fd(int_sk_store.as_fd()).context("sharing the agent's socket storage")?;
            let mut skel = open.load().context("loading ecn_int (verifier)")?;
            skel.maps.ecn_int.attach_struct_ops().context("registering ecn_int")?
        }
        "retcp" => {
            let mut obj = MaybeUninit::uninit();
            let mut skel = RetcpSkelBuilder::default().open(&mut obj)?.load().context("loading retcp (verifier)")?;
            skel.maps.retcp.attach_struct_ops().context("registering retcp")?
        }
        other => bail!("unknown BPF congestion control {other:?} (expected one of {})", ALGORITHMS.join(", ")),
    };
    link.pin(pin(name)).with_context(|| format!("pinning {name}"))?;
    Ok(())
}

/// Returns once no algorithm is registered under `name`. A BPF one that was just unpinned leaves
/// the kernel's list only when the last socket using it closes, so it gets a few seconds; until
/// then new connections would still run it, with the previous agent's maps. A built-in algorithm
/// of that name is an error at once.
fn wait_for_name(name: &str) -> Result<()> {
    const GRACE: Duration = Duration::from_secs(10);
    let start = Instant::now();
    while available()?.iter().any(|a| a == name) {
        if !struct_ops_named(name) {
            bail!("the kernel already has a built-in congestion control named {name}");
        }
        if start.elapsed() > GRACE {
            bail!(
                "a BPF congestion control named {name} is still registered after {}s, held by open sockets \
                 (see `ss -ti`); close them or wait, then load again",
                GRACE.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// True if a BPF `struct_ops` map of this name exists (the kernel keeps 15 bytes of a name).
fn struct_ops_named(name: &str) -> bool {
    let short = &name.as_bytes()[..name.len().min(15)];
    MapInfoIter::default().any(|m| m.ty == MapType::StructOps && m.name.as_bytes() == short)
}

/// Unregisters an algorithm registered by `register`; returns whether it was.
pub fn unregister(name: &str) -> Result<bool> {
    let p = pin(name);
    if !p.exists() {
        return Ok(false);
    }
    fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
    let dir = pin_root().join("cc");
    if fs::read_dir(&dir)?.next().is_none() {
        fs::remove_dir(&dir)?;
    }
    Ok(true)
}
