//! The CC policy's ad-hoc entries (`sluice host policy`): connections on a port, or opened from
//! a cgroup, get an algorithm; the class table takes precedence, and a connection no class takes
//! is looked up here (bpf/cc_select.bpf.c, map `cc_policy`).

use crate::kernel::pins::open_pinned;
use crate::kernel::struct_ops;
use crate::sys;
use anyhow::{bail, Context, Result};
use libbpf_rs::{MapCore, MapFlags};
use std::path::PathBuf;

/// Which connections an entry is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Connections whose local or remote port is this.
    Port(u16),
    /// Connections opened by processes in this cgroup.
    Cgroup(PathBuf),
}

fn key_bytes(k: &Selector) -> Result<Vec<u8>> {
    let (kind, value) = match k {
        Selector::Port(p) => (1u32, *p as u64),
        Selector::Cgroup(p) => (2u32, sluice_platform::plan::cgroup_id(p).with_context(|| format!("reading cgroup {}", p.display()))?),
    };
    let mut b = kind.to_ne_bytes().to_vec();
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&value.to_ne_bytes());
    Ok(b)
}

/// Sets the algorithm for a class of connections.
pub fn set(k: &Selector, algorithm: &str) -> Result<()> {
    sys::require_root("changing the CC policy")?;
    if algorithm.is_empty() || algorithm.len() > 15 || !algorithm.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        bail!("congestion control {algorithm:?}: expected a kernel algorithm name of at most 15 letters, digits or _ (e.g. dctcp)");
    }
    let avail = struct_ops::available()?;
    if !avail.iter().any(|a| a == algorithm) {
        bail!("congestion control {algorithm:?} is not registered in this kernel (available: {})", avail.join(" "));
    }
    let mut name = [0u8; 16];
    name[..algorithm.len()].copy_from_slice(algorithm.as_bytes());
    open_pinned("cc_policy")?.update(&key_bytes(k)?, &name, MapFlags::ANY)?;
    Ok(())
}

/// Removes a policy entry; returns whether there was one.
pub fn del(k: &Selector) -> Result<bool> {
    sys::require_root("changing the CC policy")?;
    Ok(open_pinned("cc_policy")?.delete(&key_bytes(k)?).is_ok())
}

/// The policy entries as (kind, value, algorithm).
pub fn list() -> Result<Vec<(String, u64, String)>> {
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
