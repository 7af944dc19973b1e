//! Enforcing a policy, as the local and the fleet mode both do: the one way into a policy's checks
//! on this host (its plan against this kernel and these cgroups), putting a plan in the class
//! table and recording it, recording a refusal, loading or adopting the programs, and the signals
//! that stop or reload the agent.

use crate::kernel::sockops::{self, LoadOptions};
use crate::kernel::{class_table, pins, struct_ops};
use crate::sys;
use anyhow::Result;
use sluice_platform::applied::{self, digest, now_unix, record, Applied, Refused};
use sluice_platform::plan::{self, Host, Plan};
use sluice_platform::{log_error, log_info, log_warn};
use sluice_sim::scenario::host_policy::{self, CheckedPolicy};
use sluice_sim::scenario::ScenarioError;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What the agent returns when it stops.
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped {
    /// SIGTERM or SIGINT: the policy stays in force.
    Signal,
    /// The policy given at start failed a check: nothing was changed.
    Refused,
}

/// Checks a policy on this host, without applying it: its plan against the kernel's algorithms,
/// the cgroups under the cgroup v2 root and the class table's sizes, with class ids carried over
/// from the policy in force. Every check of a policy on a host goes through here; the errors
/// name the file, line and key.
pub fn check(p: &CheckedPolicy) -> Result<Plan, ScenarioError> {
    let kernel = struct_ops::available().unwrap_or_default();
    let host = Host { cgroup_root: Path::new(sys::CGROUP2_ROOT), kernel: &kernel };
    plan::plan(p, &host, applied::applied().ok().flatten().as_ref())
}

/// Reads a policy file and checks it on this host (`check`).
pub fn check_file(path: &Path) -> std::result::Result<CheckedPolicy, String> {
    let p = host_policy::load(path).map_err(|e| e.to_string())?;
    check(&p).map_err(|e| e.to_string())?;
    Ok(p)
}

/// Puts a checked policy in force: its plan goes to the class table, and what was applied is
/// recorded for `status`. `Ok(Err(_))`: the host's checks refused it and nothing changed.
pub fn put_in_force(p: &CheckedPolicy, file: &str) -> Result<std::result::Result<Applied, ScenarioError>> {
    sys::require_root("applying a policy")?;
    let previous = applied::applied()?;
    let plan = match check(p) {
        Ok(plan) => plan,
        Err(e) => return Ok(Err(e)),
    };
    // A new class's counters start from zero, also where its id served a class removed earlier.
    let new_ids: Vec<u32> = plan
        .slots
        .iter()
        .map(|s| s.class.id)
        .filter(|id| !previous.as_ref().is_some_and(|a| a.classes.iter().any(|c| c.id == *id)))
        .collect();
    let generation = class_table::write(&plan, &new_ids)?;
    let a = Applied {
        file: file.to_string(),
        version: p.policy.version,
        digest: digest(p.text()),
        generation,
        applied_unix: now_unix(),
        classes: plan.slots.into_iter().map(|s| s.class).collect(),
        unmatched: plan.unmatched,
        refused: None,
        next_id: plan.next_id,
        intents: plan.intents.into_iter().flatten().map(|r| r.applied).collect(),
    };
    record(&a)?;
    Ok(Ok(a))
}

/// Records and logs a refused policy; the one in force stays.
pub fn refuse(file: &str, digest: &str, errors: Vec<String>) -> Result<()> {
    for e in &errors {
        log_error!("{e}");
    }
    let mut a = applied::applied()?.unwrap_or_default();
    log_error!("policy {file} refused; generation {} stays in force", a.generation);
    a.refused = Some(Refused { at_unix: now_unix(), digest: digest.to_string(), errors });
    record(&a)
}

/// Loads the BPF programs on `cgroup`, or adopts the ones an earlier agent pinned.
pub fn load_or_adopt(cgroup: &Path) -> Result<()> {
    match sockops::state()? {
        Some(st) => {
            log_info!(
                "sluice agent: adopting the agent loaded on cgroup {}: its programs, maps and connections carry on",
                st.cgroup.display()
            );
            if st.cgroup != *cgroup {
                log_warn!("--cgroup {} differs from the loaded agent's; `sluice host unload` first to move it", cgroup.display());
            }
        }
        None => {
            let st = sockops::load(&LoadOptions { cgroup: cgroup.to_path_buf(), ..LoadOptions::default() })?;
            log_info!(
                "sluice agent: loaded on cgroup {}, pinned under {}; algorithms registered: {}",
                st.cgroup.display(),
                pins::dir().display(),
                st.ccs.join(" ")
            );
        }
    }
    Ok(())
}

/// The flags the agent's signals set: SIGTERM or SIGINT stop it, SIGHUP asks for a reload.
pub struct Signals {
    /// Stop.
    pub term: Arc<AtomicBool>,
    /// Reload.
    pub hup: Arc<AtomicBool>,
}

impl Signals {
    /// Registers the flags.
    pub fn register() -> Result<Signals> {
        let s = Signals { term: Arc::default(), hup: Arc::default() };
        for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::flag::register(sig, s.term.clone())?;
        }
        signal_hook::flag::register(signal_hook::consts::SIGHUP, s.hup.clone())?;
        Ok(s)
    }
}
