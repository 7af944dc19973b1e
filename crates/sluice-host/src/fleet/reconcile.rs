//! `sluice agent --etcd`: the agent in fleet mode. One thread watches the policy key and hands
//! each version over in revision order; the main thread puts each in force exactly as a policy
//! file is (the host's checks, then the class table), keeps it on disk, and logs it; a third
//! thread keeps the agent's lease and writes its report. etcd going away changes nothing in the
//! kernel: the last version stays in force, a restart runs it from disk, and the watch resumes
//! from the last revision seen, so no version is skipped.

use super::etcd::{Etcd, Event, Unreachable, Watched};
use super::{host_key, now_ms, policy_key, seen_key, ClassReport, Document, Report};
use crate::classes::{self, digest};
use crate::service::{self, Stopped};
use crate::sys;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sluice_sim::cc::negotiation::Negotiation;
use sluice_sim::scenario::host_policy::{self, CheckedPolicy};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How `run` starts.
#[derive(Clone)]
pub struct FleetOptions {
    /// The etcd client.
    pub etcd: Etcd,
    /// The keys' prefix.
    pub prefix: String,
    /// This host's name in reports.
    pub host: String,
    /// Its labels, which choose its groups.
    pub labels: BTreeMap<String, String>,
    /// Where the last applied version and the log of versions are kept.
    pub state_dir: PathBuf,
    /// Check and report each version without writing the kernel's tables.
    pub dry_run: bool,
    /// The cgroup the programs attach to, when the agent loads them.
    pub cgroup: PathBuf,
    /// The lease's time to live: a host silent this long is stale.
    pub lease_ttl: u64,
    /// How often the report (counters) is written.
    pub report_every: Duration,
}

/// The file holding the last version put in force.
fn cache_file(dir: &Path) -> PathBuf {
    dir.join("fleet-policy.json")
}

/// The log of versions put in force: `version digest unix_ms` a line.
pub fn log_file(dir: &Path) -> PathBuf {
    dir.join("fleet-applied.log")
}

/// The version in force, kept on disk with the etcd revision that wrote it.
#[derive(Serialize, Deserialize)]
struct Cached {
    document: Document,
    revision: i64,
}

/// What the watcher hands the main thread.
enum News {
    /// A version, as etcd holds it at this revision.
    Version(Document, i64),
    /// Whether etcd answers.
    Reachable(bool),
}

/// Runs the agent in fleet mode until SIGTERM or SIGINT.
pub fn run(o: &FleetOptions) -> Result<Stopped> {
    if !o.dry_run {
        sys::require_root("running the agent")?;
    }
    std::fs::create_dir_all(&o.state_dir).with_context(|| format!("--state-dir {}: cannot create it", o.state_dir.display()))?;
    let cached: Option<Cached> = std::fs::read(cache_file(&o.state_dir)).ok().and_then(|b| serde_json::from_slice(&b).ok());
    // etcd is asked once before anything loads: a wrong URL or certificate says so at once.
    let first = match super::admin::current(&o.etcd, &o.prefix) {
        Ok(d) => d,
        Err(e) if e.downcast_ref::<Unreachable>().is_some() && cached.is_some() => {
            eprintln!("warning: {e}; running version {} from {} until it answers", cached.as_ref().unwrap().document.version, o.state_dir.display());
            None
        }
        Err(e) if e.downcast_ref::<Unreachable>().is_some() => {
            bail!("{e}\nsluice agent: no policy is kept in {} either, so there is nothing to run", o.state_dir.display())
        }
        Err(e) => return Err(e),
    };
    if !o.dry_run {
        service::load_or_adopt(&o.cgroup)?;
    }
    let report = Report { host: o.host.clone(), labels: o.labels.clone(), dry_run: o.dry_run, ..Report::default() };
    let mut agent = Agent { o: o.clone(), in_force: None, report: Arc::new(Mutex::new(report)) };
    // The version kept on disk first; then every version etcd wrote since, in order, so none is
    // skipped (etcd may have compacted them: then the latest).
    let from = match (&cached, first) {
        (Some(c), _) => {
            agent.put_in_force(&c.document, c.revision);
            c.revision + 1
        }
        (None, Some((doc, rev))) => {
            agent.put_in_force(&doc, rev);
            rev + 1
        }
        (None, None) => 0,
    };

    let term = Arc::new(AtomicBool::new(false));
    let hup = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, term.clone())?;
    }
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())?;
    let (news_tx, news) = channel();
    let (nudge, nudged) = channel();
    {
        let (etcd, key, term) = (o.etcd.clone(), policy_key(&o.prefix), term.clone());
        std::thread::spawn(move || watch(&etcd, &key, from, &news_tx, &term));
    }
    let reporter = {
        let (o, report, term) = (o.clone(), agent.report.clone(), term.clone());
        std::thread::spawn(move || report_loop(&o, &report, &nudged, &term))
    };
    let mut reachable = true;
    while !term.load(Ordering::Relaxed) {
        match news.recv_timeout(Duration::from_millis(50)) {
            Ok(News::Version(doc, rev)) => {
                agent.report.lock().unwrap().seen_version = Some(doc.version);
                if agent.put_in_force(&doc, rev) {
                    let _ = nudge.send(());
                }
            }
            Ok(News::Reachable(now)) if now != reachable => {
                reachable = now;
                let v = agent.in_force.as_ref().map_or("none".to_string(), |d| d.version.to_string());
                if now {
                    println!("sluice agent: etcd answers again; catching up from version {v}");
                } else {
                    eprintln!("warning: etcd does not answer; version {v} stays in force, and the agent catches up when it returns");
                }
            }
            Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => bail!("the etcd watch stopped"),
        }
        if hup.swap(false, Ordering::Relaxed) {
            // SIGHUP: the version in force again, e.g. after a cgroup it names was created.
            if let Ok(Some((doc, rev))) = super::admin::current(&o.etcd, &o.prefix) {
                agent.in_force = None;
                agent.put_in_force(&doc, rev);
                let _ = nudge.send(());
            }
        }
    }
    drop(nudge);
    let _ = reporter.join();
    println!("sluice agent: stopped; the policy stays in force in the kernel and connections keep their classes (`sluice host unload` removes it all)");
    Ok(Stopped::Signal)
}

/// The agent's own state in the main thread.
struct Agent {
    o: FleetOptions,
    /// The version in force.
    in_force: Option<Document>,
    /// What the reporter writes.
    report: Arc<Mutex<Report>>,
}

impl Agent {
    /// Puts the version etcd wrote at `revision` in force, unless it is the one in force;
    /// whether anything changed.
    fn put_in_force(&mut self, doc: &Document, revision: i64) -> bool {
        if self.in_force.as_ref().is_some_and(|d| d.version == doc.version && d.digest == doc.digest) {
            return false;
        }
        let source = format!("etcd {} version {}", policy_key(&self.o.prefix), doc.version);
        let outcome = host_policy::parse(&doc.text, &source)
            .and_then(|p| p.for_host(&self.o.labels))
            .map_err(|e| vec![e.to_string()])
            .and_then(|mut p| {
                p.policy.version = Some(doc.version);
                self.enforce(&p, &source).map(|()| p)
            });
        match outcome {
            Ok(p) => {
                if let Err(e) = self.keep(doc, revision) {
                    eprintln!("warning: {e}");
                }
                let names: Vec<String> = p.classes.iter().map(|c| format!("{} ({})", c.name, c.cc)).collect();
                let mode = if self.o.dry_run { "checked (dry run)" } else { "in force" };
                println!("sluice agent: version {} {mode}: {}", doc.version, names.join(", "));
                let mut r = self.report.lock().unwrap();
                r.version = Some(doc.version);
                r.applied_unix = now_ms() / 1000;
                r.undeclared_labels = p.undeclared(&self.o.labels).into_iter().map(String::from).collect();
                if !r.undeclared_labels.is_empty() {
                    eprintln!("warning: labels {} are not among the policy's labels: no group selects on them", r.undeclared_labels.join(", "));
                }
                r.classes = p.classes.iter().map(|c| ClassReport { name: c.name.clone(), cc: c.cc.to_string(), ..ClassReport::default() }).collect();
                self.in_force = Some(doc.clone());
                true
            }
            Err(errors) => {
                for e in &errors {
                    eprintln!("error: {e}");
                }
                let v = self.in_force.as_ref().map_or("none".to_string(), |d| d.version.to_string());
                eprintln!("sluice agent: version {} refused on this host; version {v} stays in force", doc.version);
                self.report.lock().unwrap().refused = Some((doc.version, errors));
                true
            }
        }
    }

    /// The host's checks, then (unless a dry run) the kernel's table.
    fn enforce(&self, p: &CheckedPolicy, source: &str) -> std::result::Result<(), Vec<String>> {
        if self.o.dry_run {
            return classes::check(p).map_err(|e| vec![e.to_string()]);
        }
        match classes::apply(p, source) {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(vec![e.to_string()]),
            Err(e) => Err(vec![format!("{e:#}")]),
        }
    }

    /// Keeps the version on disk (atomically) and logs it.
    fn keep(&self, doc: &Document, revision: i64) -> Result<()> {
        let dir = &self.o.state_dir;
        let tmp = dir.join(".fleet-policy.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(&Cached { document: doc.clone(), revision })?)?;
        std::fs::rename(&tmp, cache_file(dir))?;
        let mut log = std::fs::OpenOptions::new().create(true).append(true).open(log_file(dir))?;
        writeln!(log, "{} {} {}", doc.version, digest(&doc.text), now_ms())?;
        Ok(())
    }
}

/// Watches the policy key from revision `from` (0: read it first) and hands over every version
/// in order, until `term`.
fn watch(etcd: &Etcd, key: &str, mut from: i64, news: &Sender<News>, term: &AtomicBool) {
    let mut was_reachable = true;
    while !term.load(Ordering::Relaxed) {
        let outcome = if from == 0 {
            etcd.get_latest(key).and_then(|(kv, revision)| {
                if let Some(kv) = kv {
                    let _ = news.send(News::Version(Document::from_bytes(&kv.value)?, kv.mod_revision));
                }
                from = revision + 1;
                Ok(())
            })
        } else {
            etcd.watch(key, from, |events| {
                for e in events {
                    if let Event::Put(kv) = e {
                        from = kv.mod_revision + 1;
                        match Document::from_bytes(&kv.value) {
                            Ok(doc) => {
                                let _ = news.send(News::Version(doc, kv.mod_revision));
                            }
                            Err(e) => eprintln!("warning: revision {}: {e}; skipped", kv.mod_revision),
                        }
                    }
                }
            })
            .map(|w| {
                // Revisions were compacted away: the key's latest value is what counts.
                if let Watched::Compacted(_) = w {
                    from = 0;
                }
            })
        };
        let reachable = match &outcome {
            Ok(()) => true,
            Err(e) if e.downcast_ref::<Unreachable>().is_some() => false,
            Err(e) => {
                eprintln!("warning: watching {key}: {e:#}");
                true
            }
        };
        if reachable != was_reachable {
            was_reachable = reachable;
            let _ = news.send(News::Reachable(reachable));
        }
        if outcome.is_err() {
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

/// Keeps the lease alive and writes the report every `report_every`, and at once when nudged,
/// until `term`; revokes the lease at the end, so the host shows as stale at once.
fn report_loop(o: &FleetOptions, report: &Mutex<Report>, nudged: &Receiver<()>, term: &AtomicBool) {
    let mut lease = 0i64;
    let keepalive = Duration::from_secs(o.lease_ttl.max(3) / 3);
    let mut kept = Instant::now();
    let mut reported = Instant::now() - o.report_every;
    let mut pending = true;
    while !term.load(Ordering::Relaxed) {
        match nudged.recv_timeout(Duration::from_millis(50)) {
            Ok(()) => pending = true,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let now = Instant::now();
        let result = (|| -> Result<()> {
            if lease != 0 && now.duration_since(kept) >= keepalive {
                if o.etcd.lease_keepalive(lease)? <= 0 {
                    // Expired while etcd was away: a new lease, and the report again under it.
                    lease = 0;
                }
                kept = now;
            }
            if lease == 0 {
                lease = o.etcd.lease_grant(o.lease_ttl)?;
                kept = now;
                pending = true;
            }
            if pending || now.duration_since(reported) >= o.report_every {
                let r = current_report(o, report);
                let bytes = serde_json::to_vec(&r)?;
                o.etcd.put_all(&[(&host_key(&o.prefix, &o.host), &bytes, lease), (&seen_key(&o.prefix, &o.host), &bytes, 0)])?;
                reported = now;
                pending = false;
            }
            Ok(())
        })();
        if let Err(e) = result {
            if e.downcast_ref::<Unreachable>().is_none() {
                eprintln!("warning: reporting to etcd: {e:#}");
            }
            // Asked again after a pause; the lease may have lapsed meanwhile.
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    if lease != 0 {
        let _ = o.etcd.lease_revoke(lease);
    }
}

/// The report with the kernel's counters as they are now.
fn current_report(o: &FleetOptions, report: &Mutex<Report>) -> Report {
    let mut r = report.lock().unwrap().clone();
    r.reported_unix_ms = now_ms();
    if !o.dry_run {
        if let Ok(Some(a)) = classes::applied() {
            for c in &mut r.classes {
                let Some(id) = a.classes.iter().find(|x| x.name == c.name).map(|x| x.id) else { continue };
                if let Ok(n) = classes::counts(id) {
                    c.open = n.open();
                    c.opened = n.opened;
                    c.malformed = n.malformed;
                    c.negotiated = Negotiation::ALL.iter().zip(n.negotiated).filter(|(_, k)| *k > 0).map(|(o, k)| (o.label().to_string(), k)).collect();
                }
            }
        }
        write_fleet_state(&r);
    }
    r
}

/// The fleet figures beside the pins, for the agent's Prometheus export.
fn write_fleet_state(r: &Report) {
    let path = Path::new(sys::STATE_DIR).join("fleet.json");
    let tmp = Path::new(sys::STATE_DIR).join(".fleet.json.tmp");
    if let Ok(b) = serde_json::to_vec(r) {
        if std::fs::write(&tmp, b).is_ok() {
            let _ = std::fs::rename(&tmp, path);
        }
    }
}

/// The fleet figures the agent last wrote, if it runs in fleet mode.
pub fn fleet_state() -> Option<Report> {
    std::fs::read(Path::new(sys::STATE_DIR).join("fleet.json")).ok().and_then(|b| serde_json::from_slice(&b).ok())
}
