//! Fleet mode: the policy of many hosts kept in etcd. `sluice admin` checks and writes it as one
//! versioned document; each `sluice agent --etcd` watches it, applies it as a policy file is
//! applied, keeps it on disk, and reports under a lease what it runs and what its connections
//! did. The keys, under a prefix (`/sluice` by default):
//!
//! - `<prefix>/policy`: the [`Document`] in force; its etcd revisions are the history.
//! - `<prefix>/hosts/<host>`: each live agent's [`Report`], attached to its lease.
//! - `<prefix>/seen/<host>`: the same report without a lease, so a host whose lease expired is
//!   still shown, as stale, until `sluice admin forget` removes it.

pub mod admin;
pub mod etcd;
pub mod reconcile;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The key of the policy document.
pub fn policy_key(prefix: &str) -> String {
    format!("{prefix}/policy")
}

/// The key of a live host's report.
pub fn host_key(prefix: &str, host: &str) -> String {
    format!("{prefix}/hosts/{host}")
}

/// The key of a host's last report, kept after its lease.
pub fn seen_key(prefix: &str, host: &str) -> String {
    format!("{prefix}/seen/{host}")
}

/// One version of the fleet's policy, as `sluice admin apply` writes it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Document {
    /// Raised by one at each apply (or the file's own `version`, if higher).
    pub version: u64,
    /// The policy file's text: what every agent parses and checks again.
    pub text: String,
    /// CRC-32 of `text`, in hex.
    pub digest: String,
    /// Who applied it: the etcd user, or the local user and host.
    pub author: String,
    /// When, in seconds since the epoch.
    pub at_unix: u64,
    /// The file it came from.
    pub source: String,
    /// The version this one restores, for a rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_of: Option<u64>,
}

impl Document {
    /// Reads a document from etcd's bytes.
    pub fn from_bytes(b: &[u8]) -> anyhow::Result<Document> {
        serde_json::from_slice(b).map_err(|e| anyhow::anyhow!("the policy document in etcd is not one sluice wrote ({e})"))
    }
}

/// What an agent reports of itself.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Host name.
    pub host: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The version in force, if any.
    pub version: Option<u64>,
    /// When it was put in force, in seconds since the epoch.
    pub applied_unix: u64,
    /// The latest version the agent has seen in etcd.
    pub seen_version: Option<u64>,
    /// A version this host refused (a check only the host can make failed), and why.
    pub refused: Option<(u64, Vec<String>)>,
    /// Checks and reports without writing the kernel's tables.
    pub dry_run: bool,
    /// When this report was written, in milliseconds since the epoch.
    pub reported_unix_ms: u64,
    /// Label keys the policy in force does not declare.
    #[serde(default)]
    pub undeclared_labels: Vec<String>,
    /// Per class: connections and negotiation outcomes.
    pub classes: Vec<ClassReport>,
}

/// One class's figures on one host.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ClassReport {
    /// Class name.
    pub name: String,
    /// Its algorithm on this host.
    pub cc: String,
    /// Connections open now.
    pub open: u64,
    /// Connections it took.
    pub opened: u64,
    /// Clients per negotiation outcome (`accepted`, `fallback_...`), nonzero ones.
    pub negotiated: BTreeMap<String, u64>,
    /// Malformed negotiation answers.
    pub malformed: u64,
}

impl Report {
    /// Negotiations that ended in a fallback, and all negotiations.
    pub fn fallbacks(&self) -> (u64, u64) {
        let all: u64 = self.classes.iter().flat_map(|c| c.negotiated.values()).sum();
        let accepted: u64 = self.classes.iter().filter_map(|c| c.negotiated.get("accepted")).sum();
        (all - accepted, all)
    }
}

/// A host name for reports: the kernel's node name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_else(|_| "localhost".into())
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
