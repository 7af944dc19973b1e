//! The host plumbing every layer stands on: root, cgroups, network namespaces, the iproute2 /
//! ethtool commands and a socket's algorithm. bpffs and the pins are the kernel layer's (`kernel::pins`).

use anyhow::{anyhow, bail, Context, Result};
use nix::sched::{setns, CloneFlags};
use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The cgroup v2 hierarchy the agent attaches under by default.
pub const CGROUP2_ROOT: &str = "/sys/fs/cgroup/unified";
pub use sluice_platform::applied::STATE_DIR;

/// Fails unless running as root, naming what needs it.
pub fn require_root(what: &str) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("{what} needs root (CAP_BPF, CAP_NET_ADMIN and CAP_SYS_ADMIN); run it with sudo");
    }
    Ok(())
}

/// Checks that `path` is (or can be made) a cgroup v2 directory; returns true if it was created.
pub fn ensure_cgroup(path: &Path) -> Result<bool> {
    let expected = format!("a directory in a cgroup v2 hierarchy, e.g. {CGROUP2_ROOT}/sluice");
    let parent_ok = |p: &Path| statfs(p).map(|s| s.filesystem_type() == CGROUP2_SUPER_MAGIC).unwrap_or(false);
    if path.is_dir() {
        if !parent_ok(path) {
            bail!("cgroup {}: not in a cgroup v2 file system (expected {expected})", path.display());
        }
        return Ok(false);
    }
    match path.parent() {
        Some(parent) if parent.is_dir() && parent_ok(parent) => {
            fs::create_dir(path).with_context(|| format!("creating cgroup {}", path.display()))?;
            Ok(true)
        }
        _ => bail!("cgroup {}: no such cgroup and its parent is not a cgroup v2 directory (expected {expected})", path.display()),
    }
}

/// Moves a process into a cgroup.
pub fn cgroup_join(path: &Path, pid: u32) -> Result<()> {
    fs::write(path.join("cgroup.procs"), pid.to_string()).with_context(|| format!("moving pid {pid} into cgroup {}", path.display()))
}

/// The calling process's cgroup v2 path (under the given hierarchy root).
pub fn own_cgroup(root: &Path) -> Result<PathBuf> {
    let s = fs::read_to_string("/proc/self/cgroup")?;
    let rel = s.lines().find_map(|l| l.strip_prefix("0::")).ok_or_else(|| anyhow!("no cgroup v2 entry in /proc/self/cgroup"))?;
    Ok(root.join(rel.trim_start_matches('/')))
}

/// Path of a named network namespace as iproute2 keeps it.
pub fn netns_path(name: &str) -> PathBuf {
    Path::new("/run/netns").join(name)
}

/// While alive, the calling thread is in another network namespace; dropping it returns.
pub struct NetnsGuard {
    home: File,
}

impl NetnsGuard {
    /// Enters the named network namespace (None: stays where it is, for uniform call sites).
    pub fn enter(name: Option<&str>) -> Result<Option<NetnsGuard>> {
        let Some(name) = name else { return Ok(None) };
        let home = File::open("/proc/thread-self/ns/net").context("opening this thread's network namespace")?;
        let target = File::open(netns_path(name))
            .with_context(|| format!("network namespace {name:?} not found (expected a name `ip netns list` shows)"))?;
        setns(&target, CloneFlags::CLONE_NEWNET).with_context(|| format!("entering network namespace {name}"))?;
        Ok(Some(NetnsGuard { home }))
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // Returning can only fail if the original namespace vanished, which cannot happen while
        // this thread holds it open.
        let _ = setns(&self.home, CloneFlags::CLONE_NEWNET);
    }
}

/// The ifindex of a network device in the calling thread's namespace, with a clear error.
pub fn ifindex(dev: &str, netns: Option<&str>) -> Result<u32> {
    nix::net::if_::if_nametoindex(dev).map_err(|_| {
        let ns = netns.map(|n| format!(" in network namespace {n}")).unwrap_or_default();
        anyhow!("no network device named {dev:?}{ns} (expected an interface name as `ip link` lists it)")
    })
}

/// Runs a command, failing with its stderr when it exits non-zero.
pub fn run(prog: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(prog).args(args).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow!("{prog} not found: install it (Debian: iproute2 for ip and tc, ethtool, tcpdump)")
        } else {
            anyhow!("running {prog}: {e}")
        }
    })?;
    if !out.status.success() {
        bail!("`{prog} {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Parses a rate such as `1gbit`, `100mbit`, `1G` or `250000000` (bits per second).
pub fn parse_rate(s: &str) -> Result<u64> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix("bit").or_else(|| t.strip_suffix("bps")).or_else(|| t.strip_suffix("b/s")).unwrap_or(&t);
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| anyhow!("rate {s:?}: expected a number with an optional unit, e.g. 1gbit or 500mbit"))?;
    if v.is_nan() || v <= 0.0 {
        bail!("rate {s:?}: expected a positive rate, e.g. 1gbit");
    }
    Ok((v * mult) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_in_tc_units() {
        assert_eq!(parse_rate("1gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("500mbit").unwrap(), 500_000_000);
        assert_eq!(parse_rate("2.5G").unwrap(), 2_500_000_000);
        assert_eq!(parse_rate("1000").unwrap(), 1000);
        assert!(parse_rate("fast").unwrap_err().to_string().contains("expected"));
        assert!(parse_rate("0").is_err());
    }
}

/// The CPU clock in MHz as `/proc/cpuinfo` reports it (the first CPU's), for cycle estimates.
pub fn cpu_mhz() -> Option<f64> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines().find(|l| l.starts_with("cpu MHz"))?.split(':').nth(1)?.trim().parse().ok()
}

/// The congestion-control algorithm a TCP socket runs (`TCP_CONGESTION`).
pub fn congestion_control(s: &impl std::os::fd::AsRawFd) -> Result<String> {
    let mut name = [0u8; 16];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `name`.
    let rc = unsafe { libc::getsockopt(s.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_mut_ptr().cast(), &mut len) };
    if rc != 0 {
        bail!("getsockopt TCP_CONGESTION: {}", std::io::Error::last_os_error());
    }
    Ok(String::from_utf8_lossy(&name[..name.iter().position(|&c| c == 0).unwrap_or(16)]).into_owned())
}
