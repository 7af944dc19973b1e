//! `sluice agent`: the host's platform service, run in the foreground (systemd, a container).
//! It loads the BPF programs once (or adopts the ones an earlier agent pinned), puts a policy
//! file in force, and reloads it on SIGHUP or when the file changes. A policy that fails a check
//! is refused whole, with its errors, and the one in force stays. The agent keeps no state of its
//! own beyond the pins and `/run/sluice/`: stopping, crashing or upgrading it leaves every
//! connection, its algorithm and the policy in the kernel.

use crate::service::enforce::{self, check_file, load_or_adopt, refuse, Signals, Stopped};
use crate::sys;
use anyhow::Result;
use sluice_platform::applied::{self, digest, Applied};
use sluice_platform::{log_error, log_info, log_warn};
use sluice_sim::scenario::host_policy;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

/// How `run` starts.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// The policy file.
    pub policy: PathBuf,
    /// The cgroup whose connections the agent sees, when it loads the programs itself.
    pub cgroup: PathBuf,
    /// How often the policy file is looked at for changes.
    pub poll: Duration,
}

/// The file's identity as a poll sees it: a change of either starts a reload.
fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
}

/// Runs the agent until SIGTERM or SIGINT.
pub fn run(opts: &AgentOptions) -> Result<Stopped> {
    sys::require_root("running the agent")?;
    let file = std::fs::canonicalize(&opts.policy).unwrap_or_else(|_| opts.policy.clone()).display().to_string();
    // Looked at before the file is read: a change while the programs load is applied after.
    let mut seen = stamp(&opts.policy);
    let first = match check_file(&opts.policy) {
        Ok(p) => p,
        Err(e) => {
            log_error!("{e}");
            log_error!("the policy was refused; nothing was loaded or changed");
            return Ok(Stopped::Refused);
        }
    };
    load_or_adopt(&opts.cgroup)?;
    put_in_force(&first, &file)?;

    let Signals { term, hup } = Signals::register()?;
    // Signals are looked at every tick, the file every `poll`.
    let tick = opts.poll.min(Duration::from_millis(50));
    let mut looked = Instant::now();
    while !term.load(Ordering::Relaxed) {
        std::thread::sleep(tick);
        let asked = hup.swap(false, Ordering::Relaxed);
        if !asked && looked.elapsed() < opts.poll {
            continue;
        }
        looked = Instant::now();
        let now = stamp(&opts.policy);
        if asked || now != seen {
            seen = now;
            reload(&opts.policy, &file, asked)?;
        }
    }
    log_info!("sluice agent: stopped; the policy stays in force in the kernel and connections keep their classes (`sluice host unload` removes it all)");
    Ok(Stopped::Signal)
}

/// Applies a checked policy and says so, or records why the host refused it.
fn put_in_force(p: &host_policy::CheckedPolicy, file: &str) -> Result<()> {
    match enforce::put_in_force(p, file)? {
        Ok(a) => {
            say_applied(&a);
            Ok(())
        }
        // The checks ran a moment ago; a cgroup removed since is the one way here.
        Err(e) => {
            refuse(file, &digest(p.text()), vec![e.to_string()])?;
            Ok(())
        }
    }
}

fn say_applied(a: &Applied) {
    let version = a.version.map_or("without a version".to_string(), |v| format!("version {v}"));
    let names: Vec<String> = a.classes.iter().map(|c| format!("{} ({})", c.name, c.cc)).collect();
    log_info!("sluice agent: policy {} {version} in force (generation {}): {}", a.file, a.generation, names.join(", "));
    for u in &a.unmatched {
        log_warn!("class {u} has no match rules, no intent names it and it is not default: no connection joins it");
    }
}

/// Reads the file again and applies it, or refuses it; `forced` (SIGHUP) also retries a text
/// refused before.
fn reload(path: &Path, file: &str, forced: bool) -> Result<()> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let digest = digest(&text);
    let Some(mut current) = applied::applied()? else { return put_or_refuse(path, file, &digest) };
    if forced {
        return put_or_refuse(path, file, &digest);
    }
    if current.digest == digest {
        // The file is the text in force again: a refusal of another text no longer stands.
        if let Some(r) = current.refused.take() {
            log_info!("sluice agent: policy {file} is the text in force again; the refusal of digest {} is cleared", r.digest);
            applied::record(&current)?;
        }
        return Ok(());
    }
    if current.refused.as_ref().is_some_and(|r| r.digest == digest) {
        return Ok(());
    }
    put_or_refuse(path, file, &digest)
}

/// Checks the file and puts it in force, or records its refusal.
fn put_or_refuse(path: &Path, file: &str, digest: &str) -> Result<()> {
    match check_file(path) {
        Ok(p) => put_in_force(&p, file),
        Err(e) => refuse(file, digest, e.lines().map(String::from).collect()),
    }
}

