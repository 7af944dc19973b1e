//! The agent's pins in bpffs: where each map and link is pinned, opening a pinned map, and the
//! sums of its per-CPU counters. Everything that reads the loaded agent's maps starts here.

use crate::sys::pin_root;
use anyhow::{anyhow, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::path::PathBuf;

/// Where the agent's maps and links are pinned.
pub fn dir() -> PathBuf {
    pin_root().join("agent")
}

/// Pin path of one of the agent's maps or links.
pub fn pin(name: &str) -> PathBuf {
    dir().join(name)
}

/// One of the agent's pinned maps, or why it is not there.
pub fn open_pinned(name: &str) -> Result<MapHandle> {
    MapHandle::from_pinned_path(pin(name)).map_err(|e| anyhow!("the host agent is not loaded (run `sluice agent` or `sluice host load`): {} ({e})", pin(name).display()))
}

/// Sums a pinned per-CPU counter array.
pub fn read_counters(map: &str, n: usize) -> Result<Vec<u64>> {
    let m = open_pinned(map)?;
    percpu_sums(&m, n)
}

/// Sums each of the first `n` slots of a per-CPU array of u64 over CPUs.
pub fn percpu_sums(m: &dyn MapCore, n: usize) -> Result<Vec<u64>> {
    percpu_range_sums(m, 0..n as u32)
}

/// Sums each slot in `keys` of a per-CPU array of u64 over CPUs.
pub fn percpu_range_sums(m: &dyn MapCore, keys: std::ops::Range<u32>) -> Result<Vec<u64>> {
    keys.map(|k| {
        let per_cpu = m.lookup_percpu(&k.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
        Ok(per_cpu.iter().map(|b| u64::from_ne_bytes(b[..8].try_into().unwrap())).sum())
    })
    .collect()
}
