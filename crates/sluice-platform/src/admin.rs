//! `sluice admin`: the fleet's policy in etcd. `apply` checks a policy as every agent and `sluice
//! check` do and writes it as the next version in one transaction on the current version's
//! revision, so two admins applying at once cannot both win; `diff`, `history` and `rollback` read
//! etcd's revisions of the document; `status` lists the hosts' reports.

use crate::applied::digest;
use crate::etcd::{Etcd, EtcdError};
use crate::fleet::{current, hostname, now_ms, policy_key, seen_key, Document, Report};
use crate::log::utc;
use anyhow::{anyhow, bail, Result};
use serde::Serialize;
use sluice_sim::scenario::host_policy::{self, CheckedPolicy};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// Reads and checks a policy file as the agents will: every error names the file, line and key.
pub fn check_file(path: &Path) -> Result<CheckedPolicy> {
    host_policy::load(path).map_err(|e| anyhow!("{e}\nsluice admin: the policy was refused; nothing was written to etcd"))
}

/// Who applies: the etcd user, or the local user at this host.
fn author(user: Option<&str>) -> String {
    user.map(String::from).unwrap_or_else(|| {
        let who = std::env::var("SUDO_USER").or_else(|_| std::env::var("USER")).unwrap_or_else(|_| "root".into());
        format!("{who}@{}", hostname())
    })
}

/// Writes `text` as the next version; the version written, or `None` if it equals the one in
/// force. `rollback_of` marks a rollback.
fn write(etcd: &Etcd, prefix: &str, p: &CheckedPolicy, source: &str, user: Option<&str>, rollback_of: Option<u64>) -> Result<Option<u64>> {
    let now = current(etcd, prefix)?;
    if let Some((d, _)) = &now {
        if d.text == p.text() && rollback_of.is_none() {
            return Ok(None);
        }
    }
    let (in_force, revision) = now.as_ref().map_or((0, 0), |(d, r)| (d.version, *r));
    let version = match p.policy.version {
        Some(v) if rollback_of.is_none() && v <= in_force => {
            bail!("{source}: version = {v}, but the fleet is at version {in_force}; raise it, or remove it to take {}", in_force + 1)
        }
        Some(v) if rollback_of.is_none() => v,
        _ => in_force + 1,
    };
    let doc = Document {
        version,
        text: p.text().to_string(),
        digest: digest(p.text()),
        author: author(user),
        at_unix: now_ms() / 1000,
        source: source.to_string(),
        rollback_of,
    };
    let written = etcd.put_if_unchanged(&policy_key(prefix), revision, &serde_json::to_vec(&doc)?, &[]).map_err(|e| {
        match e.downcast_ref::<EtcdError>() {
            Some(x) if x.is_permission_denied() => anyhow!(
                "{x}: {} may not write {}; apply as a user with the sluice-admin role (docs/security.md)",
                user.unwrap_or("this client"),
                policy_key(prefix)
            ),
            _ => e,
        }
    })?;
    match written {
        Some(_) => Ok(Some(version)),
        None => {
            let theirs = current(etcd, prefix)?;
            // An answer lost to a member's death, asked again: the first try wrote it.
            if theirs.as_ref().is_some_and(|(d, _)| *d == doc) {
                return Ok(Some(version));
            }
            let theirs = theirs.map_or(0, |(d, _)| d.version);
            bail!("another admin applied version {theirs} while this one was being written; nothing was written: see `sluice admin diff {source}` and apply again")
        }
    }
}

/// `sluice admin apply FILE`.
pub fn apply(etcd: &Etcd, prefix: &str, path: &Path, user: Option<&str>) -> Result<String> {
    let p = check_file(path)?;
    let source = path.display().to_string();
    Ok(match write(etcd, prefix, &p, &source, user, None)? {
        Some(v) => format!("sluice admin: version {v} applied ({source}, {} classes); agents apply it as they see it", p.classes.len()),
        None => format!("sluice admin: {source} is the version in force already; nothing was written"),
    })
}

/// `sluice admin diff FILE`: what applying it would change, class by class, then line by line.
pub fn diff(etcd: &Etcd, prefix: &str, path: &Path) -> Result<String> {
    let new = check_file(path)?;
    let Some((doc, _)) = current(etcd, prefix)? else {
        return Ok(format!("no policy in etcd yet: applying {} writes version {}\n", path.display(), new.policy.version.unwrap_or(1)));
    };
    let old = host_policy::parse(&doc.text, &format!("version {}", doc.version)).map_err(|e| anyhow!("the version in force no longer parses: {e}"))?;
    let mut s = semantic_diff(&old, &new);
    if s.is_empty() {
        return Ok(format!("{} is the same as version {}\n", path.display(), doc.version));
    }
    s.push('\n');
    let lines = similar::TextDiff::from_lines(doc.text.as_str(), new.text());
    write!(s, "{}", lines.unified_diff().context_radius(2).header(&format!("version {}", doc.version), &path.display().to_string()))?;
    Ok(s)
}

/// Per class, group and intent: what differs.
fn semantic_diff(old: &CheckedPolicy, new: &CheckedPolicy) -> String {
    let mut s = String::new();
    let table = |p: &CheckedPolicy| -> BTreeMap<String, toml::Value> {
        p.policy.classes.iter().map(|(n, c)| (n.clone(), toml::Value::try_from(c).expect("a class serializes"))).collect()
    };
    let (a, b) = (table(old), table(new));
    for name in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        match (a.get(name), b.get(name)) {
            (Some(_), None) => writeln!(s, "class {name}: removed").unwrap(),
            (None, Some(v)) => {
                let keys: Vec<String> = v.as_table().unwrap().iter().filter(|(_, v)| v.as_table().is_none_or(|t| !t.is_empty())).map(|(k, v)| format!("{k} = {}", inline(v))).collect();
                writeln!(s, "class {name}: added ({})", keys.join(", ")).unwrap()
            }
            (Some(x), Some(y)) if x != y => {
                let (x, y) = (x.as_table().unwrap(), y.as_table().unwrap());
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys.into_iter().filter(|k| x.get(*k) != y.get(*k)) {
                    let show = |v: Option<&toml::Value>| v.map_or("(unset)".to_string(), inline);
                    writeln!(s, "class {name}: {k} {} -> {}", show(x.get(k)), show(y.get(k))).unwrap();
                }
            }
            _ => {}
        }
    }
    for (what, x, y) in [("intent", &old.policy.policy, &new.policy.policy)] {
        for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
            if x.get(k) != y.get(k) {
                writeln!(s, "{what} {k}: {} -> {}", x.get(k).map_or("(unset)", String::as_str), y.get(k).map_or("(unset)", String::as_str)).unwrap();
            }
        }
    }
    let (x, y) = (&old.policy.groups, &new.policy.groups);
    for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
        match (x.get(k), y.get(k)) {
            (Some(_), None) => writeln!(s, "group {k}: removed").unwrap(),
            (None, Some(_)) => writeln!(s, "group {k}: added").unwrap(),
            (Some(g), Some(h)) if g != h => writeln!(s, "group {k}: changed").unwrap(),
            _ => {}
        }
    }
    if old.policy.permits != new.policy.permits {
        writeln!(s, "permits: changed").unwrap();
    }
    if old.policy.labels != new.policy.labels {
        writeln!(s, "labels: {:?} -> {:?}", old.policy.labels, new.policy.labels).unwrap();
    }
    s
}

/// A TOML value on one line.
fn inline(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) => {
            let parts: Vec<String> = t.iter().map(|(k, v)| format!("{k} = {}", inline(v))).collect();
            format!("{{ {} }}", parts.join(", "))
        }
        v => v.to_string(),
    }
}

/// One version in the history.
#[derive(Debug, Clone)]
pub struct Version {
    /// The document.
    pub doc: Document,
    /// The etcd revision that wrote it.
    pub revision: i64,
}

/// Every version etcd still holds, newest first, and the revision before which etcd compacted
/// (0 if the history is whole).
pub fn history(etcd: &Etcd, prefix: &str) -> Result<(Vec<Version>, i64)> {
    let key = policy_key(prefix);
    let mut out = Vec::new();
    let mut at = None;
    loop {
        let kv = match etcd.get(&key, at) {
            Ok(Some(kv)) => kv,
            Ok(None) => return Ok((out, 0)),
            Err(e) if e.downcast_ref::<EtcdError>().is_some_and(|e| e.message.contains("compacted")) => {
                return Ok((out, at.unwrap_or(0) + 1));
            }
            Err(e) => return Err(e),
        };
        out.push(Version { doc: Document::from_bytes(&kv.value)?, revision: kv.mod_revision });
        if kv.mod_revision <= kv.create_revision {
            return Ok((out, 0));
        }
        at = Some(kv.mod_revision - 1);
    }
}

/// `sluice admin history` as text.
pub fn history_text(etcd: &Etcd, prefix: &str) -> Result<String> {
    let (versions, compacted) = history(etcd, prefix)?;
    if versions.is_empty() {
        return Ok("no policy in etcd yet (`sluice admin apply FILE`)\n".into());
    }
    let mut s = format!("{:>7} {:>9} {:<20} {:<24} {:<8} source\n", "version", "revision", "applied (UTC)", "by", "digest");
    for v in &versions {
        let d = &v.doc;
        let note = d.rollback_of.map(|r| format!(" (rollback to version {r})")).unwrap_or_default();
        writeln!(s, "{:>7} {:>9} {:<20} {:<24} {:<8} {}{note}", d.version, v.revision, utc(d.at_unix), d.author, d.digest, d.source)?;
    }
    if compacted > 0 {
        writeln!(s, "(etcd compacted the revisions before {compacted}: older versions are gone from its history)")?;
    }
    Ok(s)
}

/// `sluice admin rollback N`: writes version N's text as the next version.
pub fn rollback(etcd: &Etcd, prefix: &str, to: u64, user: Option<&str>) -> Result<String> {
    let (versions, _) = history(etcd, prefix)?;
    let Some(old) = versions.iter().find(|v| v.doc.version == to) else {
        let have: Vec<String> = versions.iter().map(|v| v.doc.version.to_string()).collect();
        bail!("rollback {to}: no version {to} in etcd's history (it has {}); see `sluice admin history`", have.join(", "));
    };
    let p = host_policy::parse(&old.doc.text, &format!("version {to}")).map_err(|e| anyhow!("version {to} no longer passes the checks: {e}"))?;
    let v = write(etcd, prefix, &p, &old.doc.source, user, Some(to))?.expect("a rollback always writes");
    Ok(format!("sluice admin: version {v} applied: the text of version {to}"))
}

/// One host in the fleet view.
#[derive(Serialize, Debug, Clone)]
pub struct HostStatus {
    /// Its last report.
    #[serde(flatten)]
    pub report: Report,
    /// Whether its lease is alive.
    pub live: bool,
    /// Versions behind the one in force.
    pub lag_versions: u64,
    /// Seconds since the version in force was written, while the host lacks it.
    pub lag_seconds: u64,
    /// Negotiations that fell back, of all.
    pub fallbacks: u64,
    /// All negotiations.
    pub negotiations: u64,
    /// What needs a look (`behind`, `stale`, `failing`, `refused`, `falls_back`,
    /// `undeclared_labels`), and `dry-run` for a host that checks without enforcing.
    pub flags: Vec<String>,
}

/// The fleet view.
#[derive(Serialize, Debug)]
pub struct FleetStatus {
    /// The version in force.
    pub version: Option<u64>,
    /// When it was applied.
    pub applied_unix: Option<u64>,
    /// The hosts, by name.
    pub hosts: Vec<HostStatus>,
}

/// The fleet view: every host that reported, live or not, flagged against `fallback_threshold`
/// (a share of negotiations).
pub fn status(etcd: &Etcd, prefix: &str, fallback_threshold: f64) -> Result<FleetStatus> {
    let doc = current(etcd, prefix)?.map(|(d, _)| d);
    let (live, _) = etcd.get_prefix(&format!("{prefix}/hosts/"))?;
    let (seen, _) = etcd.get_prefix(&format!("{prefix}/seen/"))?;
    let live: BTreeMap<String, Report> = live.iter().filter_map(|kv| serde_json::from_slice::<Report>(&kv.value).ok()).map(|r| (r.host.clone(), r)).collect();
    let mut hosts = Vec::new();
    for kv in &seen {
        let Ok(last) = serde_json::from_slice::<Report>(&kv.value) else { continue };
        let is_live = live.contains_key(&last.host);
        let report = live.get(&last.host).cloned().unwrap_or(last);
        let now = doc.as_ref().map_or(0, |d| d.version);
        let lag_versions = now.saturating_sub(report.version.unwrap_or(0));
        let lag_seconds = if lag_versions > 0 { (now_ms() / 1000).saturating_sub(doc.as_ref().map_or(0, |d| d.at_unix)) } else { 0 };
        let (fallbacks, negotiations) = report.fallbacks();
        let mut flags = Vec::new();
        if lag_versions > 0 {
            flags.push("behind".to_string());
        }
        if !is_live {
            flags.push("stale".into());
        } else if !report.failing().is_empty() {
            flags.push("failing".into());
        }
        if report.refused.as_ref().is_some_and(|(v, _)| Some(*v) > report.version) {
            flags.push("refused".into());
        }
        if negotiations > 0 && fallbacks as f64 > fallback_threshold * negotiations as f64 {
            flags.push("falls_back".into());
        }
        if !report.undeclared_labels.is_empty() {
            flags.push("undeclared_labels".into());
        }
        if report.dry_run {
            flags.push("dry-run".into());
        }
        hosts.push(HostStatus { report, live: is_live, lag_versions, lag_seconds, fallbacks, negotiations, flags });
    }
    Ok(FleetStatus { version: doc.as_ref().map(|d| d.version), applied_unix: doc.as_ref().map(|d| d.at_unix), hosts })
}

/// The fleet view as a table.
pub fn status_text(s: &FleetStatus, fallback_threshold: f64) -> String {
    let mut out = match s.version {
        Some(v) => format!("policy version {v}, applied {}\n", utc(s.applied_unix.unwrap_or(0))),
        None => "no policy in etcd yet (`sluice admin apply FILE`)\n".into(),
    };
    let now = now_ms();
    writeln!(out, "{:<20} {:<24} {:>7} {:>4} {:>8} {:>9} {:>14}  state", "host", "labels", "version", "lag", "lag (s)", "reported", "fallbacks").unwrap();
    for h in &s.hosts {
        let r = &h.report;
        let labels: Vec<String> = r.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let fb = if h.negotiations == 0 { "-".to_string() } else { format!("{}/{} ({:.0}%)", h.fallbacks, h.negotiations, 100.0 * h.fallbacks as f64 / h.negotiations as f64) };
        let state = if h.flags.is_empty() { "ok".to_string() } else { h.flags.join(", ") };
        writeln!(
            out,
            "{:<20} {:<24} {:>7} {:>4} {:>8} {:>8}s {:>14}  {state}",
            r.host,
            if labels.is_empty() { "-".into() } else { labels.join(",") },
            r.version.map_or("-".into(), |v| v.to_string()),
            h.lag_versions,
            h.lag_seconds,
            now.saturating_sub(r.reported_unix_ms) / 1000,
            fb
        )
        .unwrap();
        if let Some((v, errors)) = r.refused.as_ref().filter(|_| h.flags.iter().any(|f| f == "refused")) {
            for e in errors {
                writeln!(out, "    refused version {v}: {e}").unwrap();
            }
        }
        if h.live {
            for f in r.failing() {
                writeln!(out, "    failing: {f}").unwrap();
            }
        }
    }
    let flagged = |flag: &str| s.hosts.iter().any(|h| h.flags.iter().any(|f| f == flag));
    if flagged("falls_back") {
        writeln!(
            out,
            "falls_back: over {:.0}% of the host's negotiations in its last window ended in a fallback (--fallback-threshold; the agent's --window-s)",
            fallback_threshold * 100.0
        )
        .unwrap();
    }
    if flagged("stale") {
        writeln!(
            out,
            "stale: the host's lease expired: it is down, cut off from etcd, or its agent cannot write its report (its log and \
             `sluice agent status` say why); `sluice admin forget HOST` once it is gone for good"
        )
        .unwrap();
    }
    if flagged("failing") {
        writeln!(out, "failing: the host reports, but its agent cannot do all its work (see the lines under it)").unwrap();
    }
    out
}

/// `sluice admin forget HOST`: drops a host's last report.
pub fn forget(etcd: &Etcd, prefix: &str, host: &str) -> Result<String> {
    if etcd.delete(&seen_key(prefix, host))? {
        Ok(format!("sluice admin: {host} forgotten"))
    } else {
        bail!("forget {host}: no host of that name has reported; see `sluice admin status`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_names_each_changed_key() {
        let a = host_policy::parse("[classes.s]\ncc = \"dctcp\"\nmatch = { dst_ports = [5001] }\n[classes.q]\ncc = \"cubic\"\n", "a").unwrap();
        let b = host_policy::parse("[classes.s]\ncc = \"cubic\"\nmatch = { dst_ports = [5001] }\n[classes.r]\ncc = \"bbr\"\n", "b").unwrap();
        let d = semantic_diff(&a, &b);
        assert_eq!(d, "class q: removed\nclass s: cc \"dctcp\" -> \"cubic\"\nclass r: added (cc = \"bbr\", priority = 0, transport = \"tcp\")\n", "{d}");
    }
}
