//! The host agent: loads the TCP-INT sockops program and the CC policy program on a cgroup,
//! registers the BPF congestion-control algorithms, and pins everything so it outlives the
//! command that loaded it.

use crate::cc;
use crate::skel::{agent::AgentSkelBuilder, cc_select::CcSelectSkelBuilder};
use crate::pins::{dir, open_pinned, pin, read_counters};
use crate::sys;
use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use serde::{Deserialize, Serialize};
use sluice_sim::packet::tcp_int::IntEncoding;
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
    let mounted_bpffs = sys::ensure_bpffs()?;
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
        let shared = cc::SharedMaps::pinned()?;
        for name in cc::ALGORITHMS {
            match cc::register(name, &shared) {
                Ok(()) => st.ccs.push(name.to_string()),
                Err(e) => sluice_platform::log_warn!("{name} not registered: {e:#}"),
            }
        }
    }
    Ok(())
}

/// `struct agent_config` as the BPF programs read it.
fn config_bytes(c: &Config) -> Vec<u8> {
    let mut v = Vec::with_capacity(24);
    v.extend_from_slice(&(c.int_enabled as u32).to_ne_bytes());
    v.extend_from_slice(&(c.echo_enabled as u32).to_ne_bytes());
    v.extend_from_slice(&c.sample_ns.to_ne_bytes());
    v.extend_from_slice(&c.echo_bounds.lat_ns.to_ne_bytes());
    v.extend_from_slice(&[c.echo_bounds.queue_code, c.echo_bounds.util_code, 0, 0]);
    v
}

/// The agent's runtime switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The option is added to outgoing segments.
    pub int_enabled: bool,
    /// Echo fields are filled.
    pub echo_enabled: bool,
    /// Telemetry sampling interval per flow.
    pub sample_ns: u64,
    /// Bounds an arriving echo is clamped to.
    pub echo_bounds: EchoBounds,
}

/// The largest readings an arriving TCP-INT echo may carry. The agent clamps an echo above them
/// before the socket stores it, so a forged or corrupted echo moves congestion control (ECN+INT
/// reads the queue) and telemetry no further than a plausible one, and counts each clamped field
/// (`echo_int_clamped`, `echo_lat_clamped`).
///
/// INTval bounds are codes (bits 0-6 of the byte): a queue reading decodes to `code <<
/// qdepth_shift` bytes, a utilization to `code << util_shift` percent. The default admits the
/// whole wire range, because at the default encoding every code is one a sluice switch can
/// produce: 127 queue units are 1 MiB at 8 KiB each, within a datacenter port's buffer, and
/// utilization above 100 % is what a switch's window legitimately measures while a burst arrives
/// faster than the port drains (up to its own saturation at 127). An operator who knows the
/// fabric (its buffers, its longest plausible path latency) sets tighter ones with `set_echo_bounds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EchoBounds {
    /// Largest queue code (0 to 127).
    pub queue_code: u8,
    /// Largest utilization code (0 to 127).
    pub util_code: u8,
    /// Largest summed hop latency, ns (at most 2^24 - 1, the field's width).
    pub lat_ns: u32,
}

/// Largest INTval code and latency the wire can carry.
const CODE_MAX: u8 = 0x7f;
const LAT_MAX: u32 = 0xff_ffff;

impl Default for EchoBounds {
    fn default() -> Self {
        EchoBounds { queue_code: CODE_MAX, util_code: CODE_MAX, lat_ns: LAT_MAX }
    }
}

impl EchoBounds {
    /// Bounds in the units readings decode to under `enc`: each code is the largest whose
    /// decoded value does not exceed its bound.
    pub fn from_units(queue_bytes: u64, util_percent: u64, lat_ns: u64, enc: &IntEncoding) -> EchoBounds {
        let code = |v: u64, shift: u32| v.checked_shr(shift).unwrap_or(0).min(CODE_MAX as u64) as u8;
        EchoBounds {
            queue_code: code(queue_bytes, enc.qdepth_shift),
            util_code: code(util_percent, enc.util_shift),
            lat_ns: lat_ns.min(LAT_MAX as u64) as u32,
        }
    }

    /// The bounds as text, decoded under `enc`.
    pub fn text(&self, enc: &IntEncoding) -> String {
        let q = (self.queue_code as u64).checked_shl(enc.qdepth_shift).unwrap_or(u64::MAX);
        let u = (self.util_code as u64).checked_shl(enc.util_shift).unwrap_or(u64::MAX);
        format!("queue <= {q} B, util <= {u}%, latency <= {} ns", self.lat_ns)
    }
}

/// Reads the runtime switches.
pub fn config() -> Result<Config> {
    let m = open_pinned("agent_config")?;
    let v = m.lookup(&0u32.to_ne_bytes(), MapFlags::ANY)?.ok_or_else(|| anyhow!("agent_config has no entry"))?;
    if v.len() < 24 {
        bail!("agent_config holds {} bytes, expected 24 (an agent loaded by an older sluice: reload it)", v.len());
    }
    let u32_at = |o: usize| u32::from_ne_bytes(v[o..o + 4].try_into().unwrap());
    Ok(Config {
        int_enabled: u32_at(0) != 0,
        echo_enabled: u32_at(4) != 0,
        sample_ns: u64::from_ne_bytes(v[8..16].try_into().unwrap()),
        echo_bounds: EchoBounds { lat_ns: u32_at(16), queue_code: v[20], util_code: v[21] },
    })
}

/// Changes runtime switches; `None` leaves one as it is.
pub fn set(int: Option<bool>, echo: Option<bool>, sample_ns: Option<u64>) -> Result<Config> {
    sys::require_root("changing the agent's switches")?;
    let mut c = config()?;
    c.int_enabled = int.unwrap_or(c.int_enabled);
    c.echo_enabled = echo.unwrap_or(c.echo_enabled);
    c.sample_ns = sample_ns.unwrap_or(c.sample_ns);
    open_pinned("agent_config")?.update(&0u32.to_ne_bytes(), &config_bytes(&c), MapFlags::ANY)?;
    Ok(c)
}

/// Changes the bounds arriving echoes are clamped to; they apply from the next segment on.
pub fn set_echo_bounds(b: EchoBounds) -> Result<Config> {
    sys::require_root("changing the agent's echo bounds")?;
    if b.queue_code > CODE_MAX || b.util_code > CODE_MAX || b.lat_ns > LAT_MAX {
        bail!("echo bounds {b:?}: INTval codes go up to {CODE_MAX} and latencies to {LAT_MAX} ns");
    }
    let mut c = config()?;
    c.echo_bounds = b;
    open_pinned("agent_config")?.update(&0u32.to_ne_bytes(), &config_bytes(&c), MapFlags::ANY)?;
    Ok(c)
}

/// Detaches and unpins everything `load` made; safe to run when nothing is loaded.
pub fn unload() -> Result<Vec<String>> {
    sys::require_root("unloading the host agent")?;
    let st = state()?;
    let mut done = vec![];
    for name in cc::ALGORITHMS {
        if cc::unregister(name)? {
            done.push(format!("unregistered congestion control {name}"));
        }
    }
    if dir().exists() {
        // Removing the last pin of a link detaches it; of a map, frees it once unused.
        sys::remove_pins(&dir())?;
        done.push(format!("removed pins {}", dir().display()));
    }
    let root = sys::pin_root();
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
    sys::release_bpffs()?;
    Ok(done)
}

/// A policy entry: which connections get which algorithm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyKey {
    /// Connections whose local or remote port is this.
    Port(u16),
    /// Connections opened by processes in this cgroup.
    Cgroup(PathBuf),
}

fn policy_key_bytes(k: &PolicyKey) -> Result<Vec<u8>> {
    let (kind, value) = match k {
        PolicyKey::Port(p) => (1u32, *p as u64),
        PolicyKey::Cgroup(p) => (2u32, sys::cgroup_id(p)?),
    };
    let mut b = kind.to_ne_bytes().to_vec();
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&value.to_ne_bytes());
    Ok(b)
}

/// Sets the algorithm for a class of connections.
pub fn policy_set(k: &PolicyKey, algorithm: &str) -> Result<()> {
    sys::require_root("changing the CC policy")?;
    if algorithm.is_empty() || algorithm.len() > 15 || !algorithm.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        bail!("congestion control {algorithm:?}: expected a kernel algorithm name of at most 15 letters, digits or _ (e.g. dctcp)");
    }
    let avail = cc::available()?;
    if !avail.iter().any(|a| a == algorithm) {
        bail!("congestion control {algorithm:?} is not registered in this kernel (available: {})", avail.join(" "));
    }
    let mut name = [0u8; 16];
    name[..algorithm.len()].copy_from_slice(algorithm.as_bytes());
    open_pinned("cc_policy")?.update(&policy_key_bytes(k)?, &name, MapFlags::ANY)?;
    Ok(())
}

/// Removes a policy entry; returns whether there was one.
pub fn policy_del(k: &PolicyKey) -> Result<bool> {
    sys::require_root("changing the CC policy")?;
    Ok(open_pinned("cc_policy")?.delete(&policy_key_bytes(k)?).is_ok())
}

/// The policy entries as (kind, value, algorithm).
pub fn policy_list() -> Result<Vec<(String, u64, String)>> {
    let m = open_pinned("cc_policy")?;
    let mut out = vec![];
    for k in m.keys() {
        let kind = u32::from_ne_bytes(k[0..4].try_into().unwrap());
        let value = u64::from_ne_bytes(k[8..16].try_into().unwrap());
        if let Some(v) = m.lookup(&k, MapFlags::ANY)? {
            let name = String::from_utf8_lossy(&v[..v.iter().position(|&c| c == 0).unwrap_or(v.len())]).into_owned();
            out.push((if kind == 1 { "port".into() } else { "cgroup".into() }, value, name));
        }
    }
    out.sort();
    Ok(out)
}

/// A human-readable report of the agent's programs, switches and counters.
pub fn status_text() -> Result<String> {
    use std::fmt::Write;
    let mut s = String::new();
    let Some(st) = state()? else {
        return Ok("host agent: not loaded\n".into());
    };
    let c = config()?;
    writeln!(s, "host agent: loaded on cgroup {}", st.cgroup.display())?;
    writeln!(s, "  int: {}  echo: {}  sample: {} us", onoff(c.int_enabled), onoff(c.echo_enabled), c.sample_ns / 1000)?;
    writeln!(s, "  echoes clamped to: {}", c.echo_bounds.text(&IntEncoding::default()))?;
    writeln!(s, "  congestion control registered: {}", if st.ccs.is_empty() { "none".into() } else { st.ccs.join(" ") })?;
    let counters = read_counters("agent_counters", COUNTERS.len())?;
    for (n, v) in COUNTERS.iter().zip(&counters) {
        writeln!(s, "  {n:16} {v}")?;
    }
    let cc_counters = read_counters("cc_counters", CC_COUNTERS.len())?;
    for (n, v) in CC_COUNTERS.iter().zip(&cc_counters) {
        writeln!(s, "  {n:16} {v}")?;
    }
    for (kind, value, name) in policy_list()? {
        writeln!(s, "  policy {kind} {value} -> {name}")?;
    }
    Ok(s)
}

fn onoff(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_bounds_round_down_to_codes_and_saturate_at_the_wire_range() {
        let enc = IntEncoding::default();
        // 8 KiB queue units, 1 % utilization units.
        assert_eq!(EchoBounds::from_units((256 << 10) + 8191, 110, 2_000_000, &enc), EchoBounds { queue_code: 32, util_code: 110, lat_ns: 2_000_000 });
        assert_eq!(EchoBounds::from_units(u64::MAX, u64::MAX, u64::MAX, &enc), EchoBounds::default());
        let wide = IntEncoding { qdepth_shift: 64, util_shift: 1, ..enc };
        assert_eq!(EchoBounds::from_units(u64::MAX, 101, 0, &wide), EchoBounds { queue_code: 0, util_code: 50, lat_ns: 0 });
        assert_eq!(EchoBounds::default().text(&enc), "queue <= 1040384 B, util <= 127%, latency <= 16777215 ns");
        let c = Config { int_enabled: true, echo_enabled: false, sample_ns: 7, echo_bounds: EchoBounds { queue_code: 1, util_code: 2, lat_ns: 3 } };
        assert_eq!(config_bytes(&c)[16..], [3, 0, 0, 0, 1, 2, 0, 0]);
    }
}
