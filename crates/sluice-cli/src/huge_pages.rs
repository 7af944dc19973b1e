//! Transparent huge pages for a run's heap.
//!
//! A large fabric's run reads hundreds of megabytes at random (ports, packets in flight, flows,
//! the event wheel). With 4 KB pages nearly every such read also misses the TLB, and the page
//! walks cost the 10,240-host benchmark about a tenth of its time. Where the kernel gives huge
//! pages only to memory that asks (`madvise` mode, Debian's default), glibc asks for its heap
//! when its tunable `glibc.malloc.hugetlb=1` is set; a tunable is read only as a program starts,
//! so `run` and `sweep` start the program again with it set. A `GLIBC_TUNABLES` that already
//! names the tunable is left as it is: `glibc.malloc.hugetlb=0` keeps small pages.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

const TUNABLE: &str = "glibc.malloc.hugetlb";
const THP_MODE: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// Replaces this process with itself, same arguments, its heap on huge pages; returns (and the
/// run goes on with small pages) where that is not possible or not needed.
pub fn restart_on_huge_pages() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let current = std::env::var_os("GLIBC_TUNABLES").unwrap_or_default();
    let Some(tunables) = current.to_str().and_then(asking_for_huge_pages) else { return };
    // Under `always` the heap has them already; under `never` asking gives nothing.
    if !std::fs::read_to_string(THP_MODE).is_ok_and(|mode| mode.contains("[madvise]")) {
        return;
    }
    let Ok(exe) = std::env::current_exe() else { return };
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| OsString::from("sluice"));
    // `exec` returns only if it failed, and then the run goes on here.
    let _ = Command::new(exe).arg0(arg0).args(args).env("GLIBC_TUNABLES", tunables).exec();
}

/// `GLIBC_TUNABLES` with the huge-page tunable added, or `None` if it names it already.
fn asking_for_huge_pages(current: &str) -> Option<String> {
    match current {
        _ if current.split(':').any(|t| t.split('=').next() == Some(TUNABLE)) => None,
        "" => Some(format!("{TUNABLE}=1")),
        other => Some(format!("{other}:{TUNABLE}=1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_the_tunable_and_leaves_a_users_choice_alone() {
        assert_eq!(asking_for_huge_pages("").as_deref(), Some("glibc.malloc.hugetlb=1"));
        assert_eq!(
            asking_for_huge_pages("glibc.malloc.arena_max=2").as_deref(),
            Some("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1")
        );
        assert_eq!(asking_for_huge_pages("glibc.malloc.hugetlb=0"), None);
        assert_eq!(asking_for_huge_pages("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2"), None);
    }
}
