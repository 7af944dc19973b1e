//! BPF congestion control: the portable algorithms (NewReno, DCTCP, ECN+INT, reTCP; one C source
//! each, shared with the simulator) as `struct_ops`, registered in the kernel under the names the
//! simulator's registry uses, so `tcp_congestion_control` and the CC policy select them like
//! built-in algorithms. A recording registration also writes every step each one takes to a ring
//! buffer, for the differential test against the simulator build.

use crate::kernel::skel::{dctcp::DctcpSkelBuilder, ecn_int::EcnIntSkelBuilder, newreno::NewrenoSkelBuilder, retcp::RetcpSkelBuilder};
use crate::kernel::pins::pin_root;
use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::query::MapInfoIter;
use libbpf_rs::{Link, MapHandle, MapType, RingBufferBuilder};
use sluice_sim::cc::portable::Record;
use std::cell::RefCell;
use std::fs;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};
use std::mem::MaybeUninit;
use std::path::PathBuf;

/// The algorithms, by kernel name; their order gives their ids in the class table's parameters.
pub const ALGORITHMS: &[&str] = &sluice_sim::cc::portable::PORTABLE;

fn pin(name: &str) -> PathBuf {
    pin_root().join("cc").join(name)
}

/// Names of the congestion-control algorithms the kernel offers now.
pub fn available() -> Result<Vec<String>> {
    let s = fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .context("reading /proc/sys/net/ipv4/tcp_available_congestion_control")?;
    Ok(s.split_whitespace().map(String::from).collect())
}

/// The agent's maps every algorithm shares: the TCP-INT socket storage (ECN+INT reads the echo),
/// each socket's class, and each class's parameters.
pub struct SharedMaps {
    int_sk_store: MapHandle,
    class_sk: MapHandle,
    class_params: MapHandle,
}

impl SharedMaps {
    /// The maps the loaded agent pinned.
    pub fn pinned() -> Result<SharedMaps> {
        let open = |name: &str| {
            MapHandle::from_pinned_path(crate::kernel::pins::pin(name))
                .with_context(|| format!("the host agent's map {name} (is the agent loaded?)"))
        };
        Ok(SharedMaps { int_sk_store: open("int_sk_store")?, class_sk: open("class_sk")?, class_params: open("class_params")? })
    }
}

/// Loads one algorithm (recording its steps when `record`), shares the agent's maps with it, and
/// registers it; returns the registration and, when recording, its ring buffer.
fn attach(name: &str, shared: &SharedMaps, record: bool) -> Result<(Link, Option<MapHandle>)> {
    // Its id in the class table's parameters, as `classes` writes them.
    let alg_id = ALGORITHMS.iter().position(|a| *a == name).map_or(0, |i| i as u32 + 1);
    macro_rules! load {
        ($builder:ident, $map:ident) => {{
            let mut obj = MaybeUninit::uninit();
            let mut open = $builder::default().open(&mut obj)?;
            let rodata = open.maps.rodata_data.as_deref_mut().context("the program's read-only data")?;
            rodata.scc_record = record as u32;
            rodata.scc_alg_id = alg_id;
            open.maps.int_sk_store.reuse_fd(shared.int_sk_store.as_fd()).context("sharing the agent's socket storage")?;
            open.maps.class_sk.reuse_fd(shared.class_sk.as_fd()).context("sharing the agent's class storage")?;
            open.maps.class_params.reuse_fd(shared.class_params.as_fd()).context("sharing the agent's class parameters")?;
            let mut skel = open.load().with_context(|| format!("loading {name} (verifier)"))?;
            let trace = if record { Some(MapHandle::try_from(&skel.maps.scc_trace)?) } else { None };
            (skel.maps.$map.attach_struct_ops().with_context(|| format!("registering {name}"))?, trace)
        }};
    }
    Ok(match name {
        "newreno" => load!(NewrenoSkelBuilder, newreno),
        "dctcp" => load!(DctcpSkelBuilder, dctcp),
        "ecn_int" => load!(EcnIntSkelBuilder, ecn_int),
        "retcp" => load!(RetcpSkelBuilder, retcp),
        other => bail!("unknown BPF congestion control {other:?} (expected one of {})", ALGORITHMS.join(", ")),
    })
}

/// Registers one algorithm with the agent's maps and pins its link so it stays registered.
pub fn register(name: &str, shared: &SharedMaps) -> Result<()> {
    wait_for_name(name)?;
    fs::create_dir_all(pin_root().join("cc"))?;
    let (mut link, _) = attach(name, shared, false)?;
    link.pin(pin(name)).with_context(|| format!("pinning {name}"))?;
    Ok(())
}

/// An algorithm registered for as long as this value lives, recording every step it takes.
pub struct Recording {
    _link: Link,
    trace: MapHandle,
}

impl Recording {
    /// Registers `name` (not pinned: it goes when this is dropped and its sockets close) with
    /// recording on. Nothing else may be registered under that name.
    pub fn start(name: &str, shared: &SharedMaps) -> Result<Recording> {
        wait_for_name(name)?;
        let (link, trace) = attach(name, shared, true)?;
        Ok(Recording { _link: link, trace: trace.context("the recording's ring buffer")? })
    }

    /// Drains the ring buffer: every step recorded so far, in the order the kernel took them.
    pub fn drain(&self) -> Result<Vec<Record>> {
        let out = RefCell::new(Vec::new());
        let mut b = RingBufferBuilder::new();
        b.add(&self.trace, |data: &[u8]| {
            if data.len() >= std::mem::size_of::<Record>() {
                // SAFETY: the kernel wrote a `struct scc_record`, which `Record` mirrors.
                out.borrow_mut().push(unsafe { std::ptr::read_unaligned(data.as_ptr().cast::<Record>()) });
            }
            0
        })?;
        b.build()?.consume()?;
        Ok(out.into_inner())
    }
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
