//! Fleet mode: the policy of many hosts kept in etcd. `sluice admin` checks and writes it as one
//! versioned document; each `sluice agent --etcd` watches it, applies it as a policy file is
//! applied, keeps it on disk, and reports under a lease what it runs and what its connections
//! did. The keys, under a prefix (`/sluice` by default):
//!
//! - `<prefix>/policy`: the [`Document`] in force; its etcd revisions are the history.
//! - `<prefix>/hosts/<host>`: each live agent's [`Report`], attached to its lease.
//! - `<prefix>/seen/<host>`: the same report without a lease, so a host whose lease expired is
//!   still shown, as stale, until `sluice admin forget` removes it.

pub use crate::log::now_ms;
use crate::applied::STATE_DIR;
use crate::etcd::Etcd;
use crate::prometheus::{Exposition, Kind};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    /// The span, in seconds, of each class's `recent` outcomes (0: an agent that reports none).
    #[serde(default)]
    pub window_s: u64,
    /// Why the agent cannot watch the policy, while it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch_error: Option<String>,
    /// Why the agent cannot write its report, while it cannot (read from the host, never from
    /// etcd: the host shows as stale there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_error: Option<String>,
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
    /// Clients per negotiation outcome within the report's last `window_s`.
    #[serde(default)]
    pub recent: BTreeMap<String, u64>,
}

impl Report {
    /// Negotiations that ended in a fallback, and all negotiations: within the report's window,
    /// or since the agent loaded for an agent that reports no window.
    pub fn fallbacks(&self) -> (u64, u64) {
        let outcomes = |c: &ClassReport| if self.window_s > 0 { c.recent.clone() } else { c.negotiated.clone() };
        let (mut all, mut accepted) = (0, 0);
        for c in &self.classes {
            let o = outcomes(c);
            all += o.values().sum::<u64>();
            accepted += o.get("accepted").copied().unwrap_or(0);
        }
        (all - accepted, all)
    }

    /// What keeps the agent from doing its work, in words; empty while it works.
    pub fn failing(&self) -> Vec<String> {
        let watch = self.watch_error.iter().map(|e| format!("cannot watch the policy: {e}"));
        watch.chain(self.report_error.iter().map(|e| format!("cannot write its report: {e}"))).collect()
    }
}

/// Counts per class and outcome, as the kernel keeps them since the agent loaded.
pub type Outcomes = BTreeMap<String, BTreeMap<String, u64>>;

/// Negotiation outcomes over a sliding window: snapshots of the kernel's cumulative counts,
/// so a host's fallbacks of an hour ago (or of before a restart that adopted the counters) no
/// longer flag it.
#[derive(Debug)]
pub struct Window {
    span: Duration,
    /// Snapshots, oldest first; the first is at or before the window's start once the agent
    /// has run that long.
    snapshots: VecDeque<(Instant, Outcomes)>,
}

impl Window {
    /// A window of `span`.
    pub fn new(span: Duration) -> Window {
        Window { span, snapshots: VecDeque::new() }
    }

    /// Adds the counts as they are at `at`, and returns what they grew by within the window
    /// (since the agent started, while it has run less than the window).
    pub fn update(&mut self, at: Instant, now: Outcomes) -> Outcomes {
        // Counters that went back were loaded anew: what they hold is all recent.
        let reset = self.snapshots.back().is_some_and(|(_, last)| {
            last.iter().any(|(class, o)| o.iter().any(|(k, n)| now.get(class).and_then(|m| m.get(k)).copied().unwrap_or(0) < *n))
        });
        if reset {
            self.snapshots.clear();
            self.snapshots.push_back((at, Outcomes::new()));
        }
        self.snapshots.push_back((at, now));
        // Keep one snapshot at or before the window's start, the base of the difference.
        while self.snapshots.len() > 2 && self.snapshots[1].0 + self.span <= at {
            self.snapshots.pop_front();
        }
        let (base, latest) = (&self.snapshots[0].1, &self.snapshots.back().expect("just pushed").1);
        latest
            .iter()
            .map(|(class, o)| {
                let grown = o
                    .iter()
                    .map(|(k, n)| (k.clone(), n - base.get(class).and_then(|m| m.get(k)).copied().unwrap_or(0)))
                    .filter(|(_, n)| *n > 0)
                    .collect();
                (class.clone(), grown)
            })
            .collect()
    }
}

/// A host name for reports: the kernel's node name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_else(|_| "localhost".into())
}

/// The document in force and its etcd revision, if any was applied.
pub fn current(etcd: &Etcd, prefix: &str) -> anyhow::Result<Option<(Document, i64)>> {
    match etcd.get(&policy_key(prefix), None)? {
        Some(kv) => Ok(Some((Document::from_bytes(&kv.value)?, kv.mod_revision))),
        None => Ok(None),
    }
}

/// Where the enforcing agent keeps its fleet figures beside the pins, for `sluice agent status`
/// and the Prometheus export.
pub fn figures_file() -> PathBuf {
    Path::new(STATE_DIR).join("fleet.json")
}

/// Writes the agent's fleet figures (atomically); a failure leaves the last ones.
pub fn write_figures(r: &Report) {
    let tmp = Path::new(STATE_DIR).join(".fleet.json.tmp");
    if let Ok(b) = serde_json::to_vec(r) {
        if std::fs::write(&tmp, b).is_ok() {
            let _ = std::fs::rename(&tmp, figures_file());
        }
    }
}

/// The fleet figures the agent last wrote, if it runs in fleet mode.
pub fn figures() -> Option<Report> {
    std::fs::read(figures_file()).ok().and_then(|b| serde_json::from_slice(&b).ok())
}

/// Removes the fleet figures, with the rest of what the agent keeps; fine when there are none.
pub fn remove_figures() -> anyhow::Result<()> {
    use anyhow::Context;
    match std::fs::remove_file(figures_file()) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).with_context(|| format!("removing {}", figures_file().display())),
        _ => Ok(()),
    }
}

/// The fleet part of `sluice agent status`: the host's name, the versions it runs and saw, when
/// it last reported, and what keeps it from watching or reporting; empty outside fleet mode.
pub fn figures_text() -> String {
    let Some(r) = figures() else { return String::new() };
    let v = |v: Option<u64>| v.map_or("none".to_string(), |v| v.to_string());
    let mut s = format!(
        "fleet: host {}, version {} in force, latest seen {}, last report {}s ago\n",
        r.host,
        v(r.version),
        v(r.seen_version.or(r.version)),
        now_ms().saturating_sub(r.reported_unix_ms) / 1000
    );
    for f in r.failing() {
        s.push_str(&format!("  failing: {f}\n"));
    }
    s
}

/// An agent's fleet figures as Prometheus metrics: the version it runs and the latest it saw,
/// for `sluice admin status`'s view from each host and the fleet dashboard.
pub fn metrics(r: &Report, e: &mut Exposition) {
    let seen = r.seen_version.or(r.version).unwrap_or(0);
    let figures = [
        ("sluice_fleet_version", "The fleet policy version in force on this host.", r.version.unwrap_or(0)),
        ("sluice_fleet_seen_version", "The latest fleet policy version this host saw in etcd.", seen),
        ("sluice_fleet_lag_versions", "Versions seen but not in force.", seen.saturating_sub(r.version.unwrap_or(0))),
        ("sluice_fleet_refused_version", "The last version this host refused (0: none).", r.refused.as_ref().map_or(0, |(v, _)| *v)),
        ("sluice_fleet_report_timestamp_seconds", "When the agent last wrote its report.", r.reported_unix_ms / 1000),
    ];
    for (name, help, v) in figures {
        e.single(name, Kind::Gauge, help, v);
    }
    let name = "sluice_fleet_failing";
    e.family(name, Kind::Gauge, "Whether the agent cannot watch the policy or write its report (its log and `sluice agent status` say why).");
    for (what, failing) in [("watch", &r.watch_error), ("report", &r.report_error)] {
        e.sample(name, &[("what", what)], u8::from(failing.is_some()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcomes(accepted: u64, fallback: u64) -> Outcomes {
        let o: BTreeMap<String, u64> = [("accepted".to_string(), accepted), ("fallback_peer_silent".to_string(), fallback)].into();
        [("storage".to_string(), o.into_iter().filter(|(_, n)| *n > 0).collect())].into()
    }

    #[test]
    fn the_window_counts_only_its_span() {
        let t0 = Instant::now();
        let s = |secs| t0 + Duration::from_secs(secs);
        let mut w = Window::new(Duration::from_secs(10));
        // Counts the agent found at start (adopted from an earlier agent) are not recent.
        assert_eq!(w.update(s(0), outcomes(50, 40)), outcomes(0, 0));
        assert_eq!(w.update(s(4), outcomes(55, 50)), outcomes(5, 10));
        assert_eq!(w.update(s(9), outcomes(60, 50)), outcomes(10, 10));
        // 10 s after the fallbacks' snapshot (at 4 s), only what came after it is recent.
        assert_eq!(w.update(s(12), outcomes(60, 50)), outcomes(10, 10), "the base is the 0 s snapshot until 14 s");
        assert_eq!(w.update(s(14), outcomes(60, 50)), outcomes(5, 0));
        assert_eq!(w.update(s(25), outcomes(61, 50)), outcomes(1, 0));
        // Counters loaded anew (lower than before): all they hold is recent.
        assert_eq!(w.update(s(26), outcomes(2, 3)), outcomes(2, 3));
        assert_eq!(w.update(s(40), outcomes(2, 3)), outcomes(0, 0));
    }

    #[test]
    fn fallbacks_read_the_window_where_the_agent_reports_one() {
        let class = ClassReport { negotiated: outcomes(90, 10)["storage"].clone(), recent: outcomes(3, 1)["storage"].clone(), ..ClassReport::default() };
        let mut r = Report { classes: vec![class], ..Report::default() };
        assert_eq!(r.fallbacks(), (10, 100), "an agent without a window: every negotiation since it loaded");
        r.window_s = 600;
        assert_eq!(r.fallbacks(), (1, 4));
    }
}
