//! The agent's programs in the kernel: loads the TCP-INT sockops program, the CC policy program
//! and the intent program on a cgroup, registers the BPF congestion-control algorithms, and pins
//! everything so it outlives the command that loaded it; `unload` undoes exactly that.

use crate::kernel::agent_config::{config_bytes, Config, EchoBounds};
use crate::kernel::pins::{self, dir, pin};
use crate::kernel::skel::{agent::AgentSkelBuilder, cc_select::CcSelectSkelBuilder};
use crate::kernel::struct_ops;
use crate::sys;
use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use serde::{Deserialize, Serialize};
use std::fs;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

/// Default cgroup the agent attaches to: processes opt in by joining it.
pub const DEFAULT_CGROUP: &str = "/sys/fs/cgroup/unified/sluice";

/// Names of the agent's counters, in `enum agent_counter` order.
pub const COUNTERS: &[&str] = &[
    "socks_enabled",
    "opt_written",
    "opt_no_space",
    "opt_parsed",
    "opt_absent",
    "malformed_len",
    "malformed_trunc",
    "events",
    "events_lost",
    "no_storage",
    "echo_int_clamped",
    "echo_lat_clamped",
];
/// Index of the counter of 0x72 options with a wrong length.
pub const MALFORMED_LEN: usize = 5;
/// Index of the counter of truncated 0x72 options.
pub const MALFORMED_TRUNC: usize = 6;
/// Index of the counter of echoed INTvals clamped to `EchoBounds`.
pub const ECHO_INT_CLAMPED: usize = 10;
/// Index of the counter of echoed latencies clamped to `EchoBounds`.
pub const ECHO_LAT_CLAMPED: usize = 11;

/// Names of the CC policy program's counters.
pub const CC_COUNTERS: &[&str] = &["cc_set", "cc_set_failed", "neg_answered", "neg_malformed"];
/// Index of the counter of SYN-ACKs that answered a proposal.
pub const NEG_ANSWERED: usize = 2;
/// Index of the counter of SYNs whose negotiation option was malformed.
pub const NEG_MALFORMED: usize = 3;

/// What `load` set up, so `unload` undoes exactly that.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct AgentState {
    /// The cgroup the programs are attached to.
    pub cgroup: PathBuf,
    /// Whether `load` created that cgroup (and `unload` should remove it).
    pub created_cgroup: bool,
    /// Whether `load` mounted bpffs.
    pub mounted_bpffs: bool,
    /// Congestion-control algorithms registered.
    pub ccs: Vec<String>,
}

/// Options of `load`.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Cgroup to attach to.
    pub cgroup: PathBuf,
    /// Add the option to outgoing segments.
    pub int_enabled: bool,
    /// Echo what arrived.
    pub echo_enabled: bool,
    /// At most one telemetry record per flow per this many nanoseconds.
    pub sample_ns: u64,
    /// Register the BPF congestion-control algorithms too.
    pub register_cc: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { cgroup: DEFAULT_CGROUP.into(), int_enabled: true, echo_enabled: true, sample_ns: 100_000, register_cc: true }
    }
}

fn state_file() -> PathBuf {
    Path::new(sys::STATE_DIR).join("agent.json")
}

/// The recorded state of a loaded agent, if one is loaded.
pub fn state() -> Result<Option<AgentState>> {
    match fs::read_to_string(state_file()) {
        Ok(s) => Ok(Some(serde_json::from_str(&s).with_context(|| format!("reading {}", state_file().display()))?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", state_file().display())),
    }
}

/// Loads and attaches the agent; fails if one is already loaded.
pub fn load(opts: &LoadOptions) -> Result<AgentState> {
    sys::require_root("loading the host agent")?;
    if state()?.is_some() || dir().exists() {
        bail!("the host agent is already loaded (see `sluice host status`); run `sluice host unload` first");
    }
    let mounted_bpffs = pins::ensure_bpffs()?;
    let created_cgroup = sys::ensure_cgroup(&opts.cgroup)?;
    let mut st = AgentState { cgroup: opts.cgroup.clone(), created_cgroup, mounted_bpffs, ccs: vec![] };
    fs::create_dir_all(sys::STATE_DIR)?;
    // Record first: a failure half-way still leaves `unload` a complete list of what to undo.
    fs::write(state_file(), serde_json::to_string_pretty(&st)?)?;
    match attach(opts, &mut st) {
        Ok(()) => {
            fs::write(state_file(), serde_json::to_string_pretty(&st)?)?;
            Ok(st)
        }
        Err(e) => {
            let _ = unload();
            Err(e)
        }
    }
}

fn attach(opts: &LoadOptions, st: &mut AgentState) -> Result<()> {
    fs::create_dir_all(dir()).with_context(|| format!("creating {}", dir().display()))?;
    let cg = fs::File::open(&opts.cgroup).with_context(|| format!("opening cgroup {}", opts.cgroup.display()))?;

    let mut obj = MaybeUninit::uninit();
    let open = AgentSkelBuilder::default().open(&mut obj).context("opening the agent BPF object")?;
    let skel = open.load().context("loading the agent into the kernel (verifier)")?;
    let cfg = config_bytes(&Config {
        int_enabled: opts.int_enabled,
        echo_enabled: opts.echo_enabled,
        sample_ns: opts.sample_ns,
        echo_bounds: EchoBounds::default(),
    });
    skel.maps.agent_config.update(&0u32.to_ne_bytes(), &cfg, MapFlags::ANY)?;
    for (map, name) in [
        (&skel.maps.agent_config, "agent_config"),
        (&skel.maps.int_sk_store, "int_sk_store"),
        (&skel.maps.int_events, "int_events"),
        (&skel.maps.agent_counters, "agent_counters"),
    ] {
        let mut h = MapHandle::try_from(map)?;
        h.pin(pin(name)).with_context(|| format!("pinning map {name}"))?;
    }
    let mut link = skel.progs.sluice_agent.attach_cgroup(cg.as_raw_fd()).context("attaching the agent to the cgroup")?;
    link.pin(pin("agent_link"))?;

    let mut obj2 = MaybeUninit::uninit();
    let mut open = CcSelectSkelBuilder::default().open(&mut obj2).context("opening the CC policy BPF object")?;
    // Negotiation offers and answers TCP-INT as the TCP-INT program's switches say.
    open.maps.agent_config.reuse_fd(skel.maps.agent_config.as_fd()).context("sharing agent_config")?;
    let sel = open.load().context("loading the CC policy program")?;
    for (map, name) in [
        (&sel.maps.cc_policy, "cc_policy"),
        (&sel.maps.cc_counters, "cc_counters"),
        (&sel.maps.sluice_classes, "sluice_classes"),
        (&sel.maps.class_generation, "class_generation"),
        (&sel.maps.class_counters, "class_counters"),
        (&sel.maps.class_sk, "class_sk"),
        (&sel.maps.class_params, "class_params"),
        (&sel.maps.sluice_intents, "sluice_intents"),
        (&sel.maps.intent_counters, "intent_counters"),
    ] {
        let mut h = MapHandle::try_from(map)?;
        h.pin(pin(name)).with_context(|| format!("pinning map {name}"))?;
    }
    let mut link = sel.progs.sluice_cc_select.attach_cgroup(cg.as_raw_fd()).context("attaching the CC policy program")?;
    link.pin(pin("cc_select_link"))?;
    let mut link = sel.progs.sluice_intent.attach_cgroup(cg.as_raw_fd()).context("attaching the intent program")?;
    link.pin(pin("intent_link"))?;

    if opts.register_cc {
        let shared = struct_ops::SharedMaps::pinned()?;
        for name in struct_ops::ALGORITHMS {
            match struct_ops::register(name, &shared) {
                Ok(()) => st.ccs.push(name.to_string()),
                Err(e) => sluice_platform::log_warn!("{name} not registered: {e:#}"),
            }
        }
    }
    Ok(())
}

/// Detaches and unpins everything `load` made; safe to run when nothing is loaded.
pub fn unload() -> Result<Vec<String>> {
    sys::require_root("unloading the host agent")?;
    let st = state()?;
    let mut done = vec![];
    for name in struct_ops::ALGORITHMS {
        if struct_ops::unregister(name)? {
            done.push(format!("unregistered congestion control {name}"));
        }
    }
    if dir().exists() {
        // Removing the last pin of a link detaches it; of a map, frees it once unused.
        pins::remove_pins(&dir())?;
        done.push(format!("removed pins {}", dir().display()));
    }
    let root = pins::pin_root();
    if root.exists() && fs::read_dir(&root)?.next().is_none() {
        fs::remove_dir(&root)?;
    }
    if let Some(st) = st {
        if st.created_cgroup && st.cgroup.exists() {
            match fs::remove_dir(&st.cgroup) {
                Ok(()) => done.push(format!("removed cgroup {}", st.cgroup.display())),
                Err(e) => eprintln!("warning: cgroup {} left in place: {e} (processes still in it?)", st.cgroup.display()),
            }
        }
        fs::remove_file(state_file())?;
    }
    sluice_platform::applied::remove()?;
    sluice_platform::fleet::remove_figures()?;
    pins::release_bpffs()?;
    Ok(done)
}
