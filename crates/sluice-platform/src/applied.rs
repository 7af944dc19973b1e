//! What the agent records of the policy in force, beside the pins (`/run/sluice/policy.json`):
//! the classes as the kernel runs them, the last refusal, and the per-class counts as status and
//! reports show them. Plain data and one file: read by `sluice agent status` and the fleet's
//! reports, written only by the agent.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sluice_sim::cc::negotiation::Negotiation;
use std::path::{Path, PathBuf};

/// Where sluice keeps its record of what it set up on a host (links and maps are pinned in bpffs).
pub const STATE_DIR: &str = "/run/sluice";

/// One class as the agent put it in the kernel.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct AppliedClass {
    /// Class name.
    pub name: String,
    /// Its id in the kernel's counters and in sockets' storage.
    pub id: u32,
    /// The algorithm's kernel name.
    pub cc: String,
    /// The sockets' SO_PRIORITY.
    pub priority: u8,
    /// The algorithm a peer or path without what `cc` needs gets.
    pub fallback: String,
    /// The parameters as the policy writes them (a portable algorithm's; its defaults where empty).
    pub params: toml::Table,
    /// Service port ranges ("5201", "6000-6099"); empty: any.
    pub dst_ports: Vec<String>,
    /// Cgroup directories; empty: any.
    pub cgroups: Vec<PathBuf>,
}

/// The policy in force, as recorded beside the pins (`/run/sluice/policy.json`).
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct Applied {
    /// The policy file.
    pub file: String,
    /// The operator's `version`, if the file gives one.
    pub version: Option<u64>,
    /// CRC-32 of the file's text, in hex.
    pub digest: String,
    /// Raised at every change; its low bit names the table half in force.
    pub generation: u32,
    /// When it was applied, in seconds since the epoch.
    pub applied_unix: u64,
    /// The classes, in the order the kernel tries them.
    pub classes: Vec<AppliedClass>,
    /// Classes that no connection can join (no match rules, and not `default`).
    pub unmatched: Vec<String>,
    /// The last policy refused since, with its errors.
    pub refused: Option<Refused>,
    /// Applications' intents: the class each joins and who may claim it.
    #[serde(default)]
    pub intents: Vec<AppliedIntent>,
    /// The id the next new class name gets.
    pub next_id: u32,
}

/// An intent as the agent put it in the kernel.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct AppliedIntent {
    /// `latency_sensitive`, `bulk`, `target_rate` or `deadline`.
    pub intent: String,
    /// The class a declaration joins.
    pub class: String,
    /// The cgroups whose processes may claim it.
    pub cgroups: Vec<PathBuf>,
}

/// A policy the agent would not apply, and why.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Refused {
    /// When, in seconds since the epoch.
    pub at_unix: u64,
    /// CRC-32 of the refused text, so an unchanged file is not refused again and again.
    pub digest: String,
    /// Each problem, one line each, file:line: key: what was expected.
    pub errors: Vec<String>,
}

/// The record's file.
fn state_file() -> PathBuf {
    Path::new(STATE_DIR).join("policy.json")
}

/// The policy in force, if the agent applied one.
pub fn applied() -> Result<Option<Applied>> {
    match std::fs::read_to_string(state_file()) {
        Ok(s) => Ok(Some(serde_json::from_str(&s).with_context(|| format!("reading {}", state_file().display()))?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", state_file().display())),
    }
}

/// Records the policy in force.
pub fn record(a: &Applied) -> Result<()> {
    std::fs::create_dir_all(STATE_DIR)?;
    let tmp = state_file().with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(a)?)?;
    std::fs::rename(&tmp, state_file()).with_context(|| format!("writing {}", state_file().display()))
}

/// Removes the record (on unload).
pub fn remove() -> Result<()> {
    match std::fs::remove_file(state_file()) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).with_context(|| format!("removing {}", state_file().display())),
        _ => Ok(()),
    }
}

/// CRC-32 of a policy's text, as `Applied::digest` writes it.
pub fn digest(text: &str) -> String {
    format!("{:08x}", crc32fast::hash(text.as_bytes()))
}

/// Seconds since the epoch.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A class's connection counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassCounts {
    /// Connections the class took since it was made.
    pub opened: u64,
    /// Of those, closed since.
    pub closed: u64,
    /// Connections whose algorithm the kernel refused (not registered).
    pub cc_failed: u64,
    /// Clients per negotiation outcome, in `Negotiation::ALL`'s order.
    pub negotiated: [u64; Negotiation::ALL.len()],
    /// Answers that were malformed (taken as no answer).
    pub malformed: u64,
}

impl ClassCounts {
    /// Connections of the class open now.
    pub fn open(&self) -> u64 {
        self.opened.saturating_sub(self.closed)
    }
}
