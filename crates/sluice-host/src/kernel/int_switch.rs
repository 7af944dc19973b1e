//! The software INT switch: tc clsact programs on a Linux forwarding path that stamp TCP-INT
//! (INTval, ID, Lat) and mark CE from the port qdisc's backlog. One BPF object per network namespace
//! serves all its ports; its maps are pinned under bpffs per namespace.

use crate::kernel::skel::int_switch::{IntSwitchSkel, IntSwitchSkelBuilder};
use crate::kernel::pins::{self, pin_root};
use crate::sys::{self, NetnsGuard};
use anyhow::{anyhow, bail, Context, Result};
use libbpf_rs::libbpf_sys;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle, TcHookBuilder, TC_EGRESS, TC_INGRESS};
use std::fs;
use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::path::PathBuf;

/// Names of the switch counters, in `enum switch_counter` order.
pub const COUNTERS: &[&str] =
    &["pkts", "stamped", "raised", "no_opt", "malformed", "ce_marked", "no_port", "ece_marked", "neg_seen", "neg_malformed"];
/// Index of the counter of malformed options.
pub const MALFORMED: usize = 4;
/// Index of the CE-mark counter.
pub const CE_MARKED: usize = 5;
/// Index of the counter of SYNs whose proposal a port answered for.
pub const NEG_SEEN: usize = 8;
/// Index of the counter of SYNs with a malformed negotiation option.
pub const NEG_MALFORMED: usize = 9;

/// tc filter handle and priority of sluice's filters (0x72 is TCP-INT's option kind).
const TC_HANDLE: u32 = 0x72;
const TC_PRIORITY: u32 = 0x72;

/// How one egress port stamps (`struct port_cfg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortConfig {
    /// The port's egress rate, bits/s (its shaper's): utilization, and the wait its backlog means.
    pub rate_bps: u64,
    /// Queue bytes at which INTval reports the queue branch.
    pub qdepth_threshold: u64,
    /// ECT packets get CE above this many queued bytes (0: no marking).
    pub ce_threshold: u64,
    /// INTval queue unit, 2^qdepth_shift bytes.
    pub qdepth_shift: u32,
    /// INTval utilization unit, 2^util_shift percent.
    pub util_shift: u32,
    /// Non-zero: report this INTval whatever the queue (calibration, tests).
    pub pinned_int_val: u8,
    /// Utilization measurement window, ns.
    pub util_window_ns: u32,
    /// Set ECE on pure ACKs leaving the port (a circuit network's signal to reTCP senders).
    pub ece_acks: bool,
    /// The port neither stamps TCP-INT nor offers it in negotiation (a legacy hop).
    pub int_off: bool,
    /// CE on every ECT packet whatever the queue (a circuit's spell, as reTCP's tests make it).
    pub ce_all: bool,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            rate_bps: 1_000_000_000,
            qdepth_threshold: 8192,
            ce_threshold: 0,
            qdepth_shift: 13,
            util_shift: 0,
            pinned_int_val: 0,
            util_window_ns: 1_000_000,
            ece_acks: false,
            int_off: false,
            ce_all: false,
        }
    }
}

impl PortConfig {
    /// The map value bytes.
    pub fn to_bytes(&self, owns_clsact: bool) -> Vec<u8> {
        let mut b = Vec::with_capacity(56);
        b.extend_from_slice(&self.rate_bps.to_ne_bytes());
        b.extend_from_slice(&self.qdepth_threshold.to_ne_bytes());
        b.extend_from_slice(&self.ce_threshold.to_ne_bytes());
        b.extend_from_slice(&self.qdepth_shift.to_ne_bytes());
        b.extend_from_slice(&self.util_shift.to_ne_bytes());
        b.extend_from_slice(&(self.pinned_int_val as u32).to_ne_bytes());
        b.extend_from_slice(&self.util_window_ns.to_ne_bytes());
        // Not read by BPF: whether sluice created the clsact qdisc, so detach removes only that.
        b.extend_from_slice(&(owns_clsact as u32).to_ne_bytes());
        b.extend_from_slice(&(self.ece_acks as u32).to_ne_bytes());
        b.extend_from_slice(&(self.int_off as u32).to_ne_bytes());
        b.extend_from_slice(&(self.ce_all as u32).to_ne_bytes());
        b
    }

    /// Parses the map value; returns the config and whether sluice created the clsact qdisc.
    pub fn from_bytes(b: &[u8]) -> Result<(PortConfig, bool)> {
        if b.len() < 56 {
            bail!("port config: expected at least 56 bytes, got {}", b.len());
        }
        let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
        let u32_at = |o: usize| u32::from_ne_bytes(b[o..o + 4].try_into().unwrap());
        let cfg = PortConfig {
            rate_bps: u64_at(0),
            qdepth_threshold: u64_at(8),
            ce_threshold: u64_at(16),
            qdepth_shift: u32_at(24),
            util_shift: u32_at(28),
            pinned_int_val: u32_at(32) as u8,
            util_window_ns: u32_at(36),
            ece_acks: u32_at(44) != 0,
            int_off: u32_at(48) != 0,
            ce_all: u32_at(52) != 0,
        };
        Ok((cfg, u32_at(40) != 0))
    }
}

/// Live state of a port (`struct port_state`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PortState {
    /// Last utilization measured, percent.
    pub util_percent: u32,
    /// The qdisc's backlog as the last packet joined it, bytes.
    pub q_bytes: u64,
    /// Largest backlog a packet joined, bytes.
    pub q_max: u64,
    /// Sum of the backlog each packet joined.
    pub q_sum: u64,
    /// Packets the sum covers.
    pub q_samples: u64,
}

impl PortState {
    fn from_bytes(b: &[u8]) -> PortState {
        let u64_at = |o: usize| u64::from_ne_bytes(b[o..o + 8].try_into().unwrap());
        PortState {
            util_percent: u32::from_ne_bytes(b[4..8].try_into().unwrap()),
            q_bytes: u64_at(8),
            q_max: u64_at(40),
            q_sum: u64_at(48),
            q_samples: u64_at(56),
        }
    }

    /// Mean backlog the port's packets joined, bytes.
    pub fn q_mean(&self) -> f64 {
        if self.q_samples == 0 {
            0.0
        } else {
            self.q_sum as f64 / self.q_samples as f64
        }
    }
}

/// Size of `struct port_state`: the spin lock, util, then seven u64.
const PORT_STATE_SIZE: usize = 64;

fn ns_label(netns: Option<&str>) -> &str {
    netns.unwrap_or("init")
}

/// Pin directory of the switch maps for a network namespace.
pub fn pin_dir(netns: Option<&str>) -> PathBuf {
    pin_root().join("switch").join(ns_label(netns))
}

const MAPS: &[&str] = &["port_cfgs", "port_states", "switch_counters"];

/// Opens the switch object, sharing the namespace's pinned maps when they exist.
fn open_loaded<'o>(obj: &'o mut MaybeUninit<libbpf_rs::OpenObject>, netns: Option<&str>) -> Result<(IntSwitchSkel<'o>, bool)> {
    let dir = pin_dir(netns);
    let mut open = IntSwitchSkelBuilder::default().open(obj).context("opening the switch BPF object")?;
    let existing = dir.join("port_cfgs").exists();
    if existing {
        open.maps.port_cfgs.reuse_pinned_map(dir.join("port_cfgs"))?;
        open.maps.port_states.reuse_pinned_map(dir.join("port_states"))?;
        open.maps.switch_counters.reuse_pinned_map(dir.join("switch_counters"))?;
    }
    let skel = open.load().context("loading the switch programs (verifier)")?;
    Ok((skel, existing))
}

/// Attaches the switch programs to `dev` (in network namespace `netns`, if given).
pub fn attach(dev: &str, netns: Option<&str>, cfg: &PortConfig) -> Result<()> {
    sys::require_root("attaching the INT switch")?;
    if cfg.rate_bps == 0 {
        bail!("port rate: expected a positive rate, e.g. 1gbit");
    }
    pins::ensure_bpffs()?;
    let _ns = NetnsGuard::enter(netns)?;
    let ifindex = sys::ifindex(dev, netns)?;
    let mut obj = MaybeUninit::uninit();
    let (skel, existing) = open_loaded(&mut obj, netns)?;
    if !existing {
        let dir = pin_dir(netns);
        fs::create_dir_all(&dir)?;
        for (m, name) in [(&skel.maps.port_cfgs, MAPS[0]), (&skel.maps.port_states, MAPS[1]), (&skel.maps.switch_counters, MAPS[2])] {
            MapHandle::try_from(m)?.pin(dir.join(name)).with_context(|| format!("pinning {name}"))?;
        }
    }
    let key = ifindex.to_ne_bytes();
    if skel.maps.port_cfgs.lookup(&key, MapFlags::ANY)?.is_some() {
        bail!("{dev} already has the INT switch attached (detach it first)");
    }

    // Create clsact ourselves to learn whether it already existed.
    let mut hook = libbpf_sys::bpf_tc_hook {
        sz: std::mem::size_of::<libbpf_sys::bpf_tc_hook>() as _,
        ifindex: ifindex as i32,
        attach_point: libbpf_sys::BPF_TC_INGRESS | libbpf_sys::BPF_TC_EGRESS,
        ..Default::default()
    };
    // SAFETY: `hook` is a fully initialised bpf_tc_hook that libbpf only reads.
    let rc = unsafe { libbpf_sys::bpf_tc_hook_create(&mut hook) };
    let owns_clsact = match rc {
        0 => true,
        e if -e == libc::EEXIST => false,
        e => bail!("creating the clsact qdisc on {dev}: {}", std::io::Error::from_raw_os_error(-e)),
    };
    skel.maps.port_cfgs.update(&key, &cfg.to_bytes(owns_clsact), MapFlags::ANY)?;
    skel.maps.port_states.update(&key, &[0u8; PORT_STATE_SIZE], MapFlags::ANY)?;

    let result = (|| -> Result<()> {
        let mut b = TcHookBuilder::new(skel.progs.sluice_ingress.as_fd());
        b.ifindex(ifindex as i32).replace(true).handle(TC_HANDLE).priority(TC_PRIORITY);
        b.hook(TC_INGRESS).attach().with_context(|| format!("attaching the ingress program to {dev}"))?;
        let mut b = TcHookBuilder::new(skel.progs.sluice_egress.as_fd());
        b.ifindex(ifindex as i32).replace(true).handle(TC_HANDLE).priority(TC_PRIORITY);
        b.hook(TC_EGRESS).attach().with_context(|| format!("attaching the egress program to {dev}"))?;
        Ok(())
    })();
    if let Err(e) = result {
        drop(_ns);
        let _ = detach(dev, netns);
        return Err(e);
    }
    Ok(())
}

/// Detaches the switch programs from `dev`; removes the namespace's pins with its last port.
pub fn detach(dev: &str, netns: Option<&str>) -> Result<()> {
    sys::require_root("detaching the INT switch")?;
    let _ns = NetnsGuard::enter(netns)?;
    let dir = pin_dir(netns);
    let cfgs = MapHandle::from_pinned_path(dir.join("port_cfgs"))
        .map_err(|_| anyhow!("no INT switch is attached in network namespace {}", ns_label(netns)))?;
    let ifindex = sys::ifindex(dev, netns)?;
    let key = ifindex.to_ne_bytes();
    let Some(v) = cfgs.lookup(&key, MapFlags::ANY)? else {
        bail!("{dev} has no INT switch attached");
    };
    let owns_clsact = u32::from_ne_bytes(v[40..44].try_into().unwrap()) != 0;
    for ap in [TC_INGRESS, TC_EGRESS] {
        let mut b = TcHookBuilder::new(cfgs.as_fd());
        b.ifindex(ifindex as i32).handle(TC_HANDLE).priority(TC_PRIORITY);
        // The filter may already be gone with its device; that is the outcome wanted.
        let _ = b.hook(ap).detach();
    }
    if owns_clsact {
        let mut b = TcHookBuilder::new(cfgs.as_fd());
        b.ifindex(ifindex as i32);
        let _ = b.hook(TC_INGRESS | TC_EGRESS).destroy();
    }
    cfgs.delete(&key)?;
    let states = MapHandle::from_pinned_path(dir.join("port_states"))?;
    let _ = states.delete(&key);
    if cfgs.keys().next().is_none() {
        pins::remove_pins(&dir)?;
        let parent = pin_root().join("switch");
        if fs::read_dir(&parent).map(|mut d| d.next().is_none()).unwrap_or(false) {
            fs::remove_dir(&parent)?;
        }
        let root = pin_root();
        if fs::read_dir(&root).map(|mut d| d.next().is_none()).unwrap_or(false) {
            fs::remove_dir(&root)?;
        }
        pins::release_bpffs()?;
    }
    Ok(())
}

/// Removes every switch pin of a namespace without touching tc (for a namespace being deleted,
/// whose devices and filters go with it).
pub fn unpin_namespace(netns: Option<&str>) -> Result<()> {
    pins::remove_pins(&pin_dir(netns))?;
    for d in [pin_root().join("switch"), pin_root()] {
        if fs::read_dir(&d).map(|mut e| e.next().is_none()).unwrap_or(false) {
            fs::remove_dir(&d)?;
        }
    }
    pins::release_bpffs()
}

/// Live state of the port `dev`.
pub fn port_state(dev: &str, netns: Option<&str>) -> Result<PortState> {
    let ifindex = {
        let _ns = NetnsGuard::enter(netns)?;
        sys::ifindex(dev, netns)?
    };
    let m = MapHandle::from_pinned_path(pin_dir(netns).join("port_states"))
        .map_err(|_| anyhow!("no INT switch is attached in network namespace {}", ns_label(netns)))?;
    let v = m.lookup(&ifindex.to_ne_bytes(), MapFlags::ANY)?.ok_or_else(|| anyhow!("{dev} has no INT switch attached"))?;
    Ok(PortState::from_bytes(&v))
}

/// The configuration of an attached port.
pub fn port_config(dev: &str, netns: Option<&str>) -> Result<PortConfig> {
    let (m, key) = port_map("port_cfgs", dev, netns)?;
    let v = m.lookup(&key, MapFlags::ANY)?.ok_or_else(|| anyhow!("{dev} has no INT switch attached"))?;
    Ok(PortConfig::from_bytes(&v)?.0)
}

/// Changes an attached port's configuration in place (e.g. its CE threshold), without
/// detaching: the next packet uses it.
pub fn set_port_config(dev: &str, netns: Option<&str>, cfg: &PortConfig) -> Result<()> {
    if cfg.rate_bps == 0 {
        bail!("port rate: expected a positive rate, e.g. 1gbit");
    }
    let (m, key) = port_map("port_cfgs", dev, netns)?;
    let v = m.lookup(&key, MapFlags::ANY)?.ok_or_else(|| anyhow!("{dev} has no INT switch attached"))?;
    let owns_clsact = PortConfig::from_bytes(&v)?.1;
    m.update(&key, &cfg.to_bytes(owns_clsact), MapFlags::EXIST)?;
    Ok(())
}

/// A pinned switch map of a namespace and the key of `dev` in it.
fn port_map(map: &str, dev: &str, netns: Option<&str>) -> Result<(MapHandle, [u8; 4])> {
    let ifindex = {
        let _ns = NetnsGuard::enter(netns)?;
        sys::ifindex(dev, netns)?
    };
    let m = MapHandle::from_pinned_path(pin_dir(netns).join(map))
        .map_err(|_| anyhow!("no INT switch is attached in network namespace {}", ns_label(netns)))?;
    Ok((m, ifindex.to_ne_bytes()))
}

/// Zeroes a port's queue statistics, so a measurement starts clean.
pub fn reset_stats(dev: &str, netns: Option<&str>) -> Result<()> {
    let ifindex = {
        let _ns = NetnsGuard::enter(netns)?;
        sys::ifindex(dev, netns)?
    };
    let m = MapHandle::from_pinned_path(pin_dir(netns).join("port_states"))
        .map_err(|_| anyhow!("no INT switch is attached in network namespace {}", ns_label(netns)))?;
    // BPF_F_LOCK takes the value's spin lock, so the programs never see a half-written state.
    m.update(&ifindex.to_ne_bytes(), &[0u8; PORT_STATE_SIZE], MapFlags::LOCK)?;
    Ok(())
}

/// The switch counters of a namespace.
pub fn counters(netns: Option<&str>) -> Result<Vec<u64>> {
    let m = MapHandle::from_pinned_path(pin_dir(netns).join("switch_counters"))
        .map_err(|_| anyhow!("no INT switch is attached in network namespace {}", ns_label(netns)))?;
    pins::percpu_sums(&m, COUNTERS.len())
}

/// A human-readable report of the switch in a namespace.
pub fn switch_status(netns: Option<&str>) -> Result<String> {
    use std::fmt::Write;
    let mut s = String::new();
    let dir = pin_dir(netns);
    let Ok(cfgs) = MapHandle::from_pinned_path(dir.join("port_cfgs")) else {
        return Ok(format!("INT switch: not attached in network namespace {}\n", ns_label(netns)));
    };
    let states = MapHandle::from_pinned_path(dir.join("port_states"))?;
    writeln!(s, "INT switch in network namespace {}", ns_label(netns))?;
    for k in cfgs.keys() {
        let ifindex = u32::from_ne_bytes(k[..4].try_into().unwrap());
        let name = {
            let _ns = NetnsGuard::enter(netns)?;
            nix::net::if_::if_indextoname(ifindex).map(|c| c.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("ifindex {ifindex}"))
        };
        let (c, _) = PortConfig::from_bytes(&cfgs.lookup(&k, MapFlags::ANY)?.unwrap_or_default())?;
        let st = states.lookup(&k, MapFlags::ANY)?.map(|b| PortState::from_bytes(&b)).unwrap_or_default();
        writeln!(
            s,
            "  {name}: rate {} Mb/s, CE above {} B{}{}; queue now {} B, max {} B, mean {:.0} B; util {}%",
            c.rate_bps / 1_000_000,
            c.ce_threshold,
            if c.ce_all { ", CE on every ECT packet" } else { "" },
            if c.ece_acks { ", ECE on ACKs" } else { "" },
            st.q_bytes,
            st.q_max,
            st.q_mean(),
            st.util_percent
        )?;
    }
    for (n, v) in COUNTERS.iter().zip(counters(netns)?) {
        writeln!(s, "  {n:10} {v}")?;
    }
    Ok(s)
}
