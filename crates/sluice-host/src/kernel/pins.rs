//! sluice's pins in bpffs: the file system itself (mounted when missing, unmounted when sluice
//! mounted it and its last pin goes), where each of the agent's maps and links is pinned, opening
//! a pinned map, and the sums of its per-CPU counters. Everything that reads the loaded agent's
//! maps starts here.

use crate::sys::STATE_DIR;
use anyhow::{anyhow, Context, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use nix::sys::statfs::{statfs, BPF_FS_MAGIC};
use std::fs;
use std::path::{Path, PathBuf};

/// Where BPF file systems are mounted by convention.
pub const BPFFS: &str = "/sys/fs/bpf";

/// Root of sluice's pins in bpffs.
pub fn pin_root() -> PathBuf {
    Path::new(BPFFS).join("sluice")
}

fn bpffs_marker() -> PathBuf {
    Path::new(STATE_DIR).join("mounted-bpffs")
}

/// Makes sure a BPF file system is mounted at /sys/fs/bpf; returns true if this call mounted it
/// (and leaves a marker so the last of sluice's pins to go unmounts it again).
pub fn ensure_bpffs() -> Result<bool> {
    if statfs(BPFFS).map(|s| s.filesystem_type() == BPF_FS_MAGIC).unwrap_or(false) {
        return Ok(false);
    }
    fs::create_dir_all(BPFFS).with_context(|| format!("creating {BPFFS}"))?;
    nix::mount::mount(Some("bpffs"), BPFFS, Some("bpf"), nix::mount::MsFlags::empty(), None::<&str>)
        .with_context(|| format!("mounting a BPF file system at {BPFFS}"))?;
    fs::create_dir_all(STATE_DIR)?;
    fs::write(bpffs_marker(), "")?;
    Ok(true)
}

/// Unmounts /sys/fs/bpf if sluice mounted it and no pins are left in it.
pub fn release_bpffs() -> Result<()> {
    if !bpffs_marker().exists() {
        return Ok(());
    }
    // The kernel's preloaded iterators (CONFIG_BPF_PRELOAD) appear in every bpffs mount.
    let empty = fs::read_dir(BPFFS)
        .map(|d| d.flatten().all(|e| matches!(e.file_name().to_str(), Some("maps.debug" | "progs.debug"))))
        .unwrap_or(false);
    if empty {
        nix::mount::umount(BPFFS).with_context(|| format!("unmounting {BPFFS}"))?;
        fs::remove_file(bpffs_marker())?;
    }
    Ok(())
}

/// Removes a pin directory tree (bpffs holds only pins and directories).
pub fn remove_pins(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            remove_pins(&p)?;
        } else {
            fs::remove_file(&p).with_context(|| format!("removing pin {}", p.display()))?;
        }
    }
    fs::remove_dir(dir).with_context(|| format!("removing {}", dir.display()))
}

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
