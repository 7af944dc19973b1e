//! `sluice agent --etcd`: the agent in fleet mode. One thread watches the policy key and hands
//! each version over in revision order; the main thread puts each in force exactly as a policy
//! file is (the host's checks, then the class table), keeps it on disk, and logs it; a third
//! thread keeps the agent's lease and writes its report. etcd going away changes nothing in the
//! kernel: the last version stays in force, a restart runs it from disk, and the watch resumes
//! from the last revision seen, so no version is skipped.

use crate::kernel::class_table;
use crate::service::enforce::{self, load_or_adopt, Signals, Stopped};
use crate::sys;
use sluice_platform::applied::{self, digest};
use sluice_platform::etcd::{Etcd, Event, Unreachable, Watched};
use sluice_platform::fleet::{self, host_key, now_ms, policy_key, seen_key, ClassReport, Document, Outcomes, Report, Window};
use sluice_platform::{log_error, log_info, log_warn};
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
    /// The span over which negotiation outcomes are reported (`falls_back` reads them).
    pub window: Duration,
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
    /// Why etcd refuses the watch (no user, no permission), or `None` once it serves it again.
    WatchError(Option<String>),
}

/// Runs the agent in fleet mode until SIGTERM or SIGINT.
pub fn run(o: &FleetOptions) -> Result<Stopped> {
    let (mut agent, from) = start(o)?;
    let Signals { term, hup } = Signals::register()?;
    let (news_tx, news) = channel();
    let (nudge, nudged) = channel();
    {
        let (etcd, key, term) = (o.etcd.clone(), policy_key(&o.prefix), term.clone());
        std::thread::spawn(move || watch(&etcd, &key, from, &news_tx, &term));
    }
    let reporter = {
        let (o, report, term) = (o.clone(), agent.report.clone(), term.clone());
        std::thread::spawn(move || Reporter::new(&o).run(&report, &nudged, &term))
    };
    let mut reachable = true;
    while !term.load(Ordering::Relaxed) {
        match news.recv_timeout(Duration::from_millis(50)) {
            Ok(n) => {
                if agent.take(n, &mut reachable) {
                    let _ = nudge.send(());
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => bail!("the etcd watch stopped"),
        }
        if hup.swap(false, Ordering::Relaxed) {
            // SIGHUP: the version in force again, e.g. after a cgroup it names was created.
            if let Ok(Some((doc, rev))) = fleet::current(&o.etcd, &o.prefix) {
                agent.in_force = None;
                agent.put_in_force(&doc, rev);
                let _ = nudge.send(());
            }
        }
    }
    drop(nudge);
    let _ = reporter.join();
    if o.dry_run {
        log_info!("sluice agent: stopped (a dry run: the kernel's tables were never written)");
    } else {
        log_info!("sluice agent: stopped; the policy stays in force in the kernel and connections keep their classes (`sluice host unload` removes it all)");
    }
    Ok(Stopped::Signal)
}

/// Everything before the watch: etcd asked once (a wrong URL or certificate says so at once),
/// the programs loaded or adopted, and the version kept on disk, else etcd's, put in force.
/// Returns the agent and the revision the watch starts from: every version etcd wrote since, in
/// order, so none is skipped (etcd may have compacted them: then the latest).
fn start(o: &FleetOptions) -> Result<(Agent, i64)> {
    if !o.dry_run {
        sys::require_root("running the agent")?;
    }
    std::fs::create_dir_all(&o.state_dir).with_context(|| format!("--state-dir {}: cannot create it", o.state_dir.display()))?;
    let cached: Option<Cached> = std::fs::read(cache_file(&o.state_dir)).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let first = match fleet::current(&o.etcd, &o.prefix) {
        Ok(d) => d,
        Err(e) if e.downcast_ref::<Unreachable>().is_some() => match &cached {
            Some(c) => {
                log_warn!("{e}; running version {} from {} until it answers", c.document.version, o.state_dir.display());
                None
            }
            None => bail!("{e}\nsluice agent: no policy is kept in {} either, so there is nothing to run", o.state_dir.display()),
        },
        Err(e) => return Err(e),
    };
    if !o.dry_run {
        load_or_adopt(&o.cgroup)?;
        if let Some(other) = fleet::figures().filter(|r| r.host != o.host) {
            log_warn!(
                "{} holds the fleet figures of host {}'s agent; this agent reports as {} and replaces them (--host names the host)",
                fleet::figures_file().display(),
                other.host,
                o.host
            );
        }
    }
    let report = Report { host: o.host.clone(), labels: o.labels.clone(), dry_run: o.dry_run, window_s: o.window.as_secs(), ..Report::default() };
    let logged = last_logged(&o.state_dir);
    let mut agent = Agent { o: o.clone(), in_force: None, report: Arc::new(Mutex::new(report)), logged };
    let from = match (cached, first) {
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
    Ok((agent, from))
}

/// The agent's own state in the main thread.
struct Agent {
    o: FleetOptions,
    /// The version in force.
    in_force: Option<Document>,
    /// What the reporter writes.
    report: Arc<Mutex<Report>>,
    /// The last (version, digest) in the log of versions, so a restart does not log it again.
    logged: Option<(u64, String)>,
}

impl Agent {
    /// What becomes of the version in force while a newer one cannot be had, in words true of
    /// a dry run too.
    fn stays(&self) -> &'static str {
        if self.o.dry_run {
            "stays the one checked (a dry run: the kernel is not changed)"
        } else {
            "stays in force"
        }
    }

    /// The version in force, for the log.
    fn version(&self) -> String {
        self.in_force.as_ref().map_or("none".to_string(), |d| d.version.to_string())
    }

    /// Acts on the watcher's news; whether the reporter should report at once. `reachable` is
    /// whether etcd answered at the last news of it.
    fn take(&mut self, news: News, reachable: &mut bool) -> bool {
        match news {
            News::Version(doc, rev) => {
                self.report.lock().unwrap().seen_version = Some(doc.version);
                self.put_in_force(&doc, rev)
            }
            News::Reachable(now) if now != *reachable => {
                *reachable = now;
                if now {
                    log_info!("sluice agent: etcd answers again; catching up from version {}", self.version());
                } else {
                    log_warn!("etcd does not answer; version {} {}, and the agent catches up when it returns", self.version(), self.stays());
                }
                false
            }
            News::Reachable(_) => false,
            News::WatchError(e) => {
                match &e {
                    Some(e) => log_error!(
                        "cannot watch {}: {e}; version {} {} and no new version reaches this host until etcd serves the watch",
                        policy_key(&self.o.prefix),
                        self.version(),
                        self.stays()
                    ),
                    None => log_info!("sluice agent: etcd serves the watch again; catching up from version {}", self.version()),
                }
                self.report.lock().unwrap().watch_error = e;
                true
            }
        }
    }

    /// Puts the version etcd wrote at `revision` in force, unless it is the one in force;
    /// whether anything changed.
    fn put_in_force(&mut self, doc: &Document, revision: i64) -> bool {
        if self.in_force.as_ref().is_some_and(|d| d.version == doc.version && d.digest == doc.digest) {
            return false;
        }
        // Errors name the version; the table in force names the key, beside its own version.
        let source = format!("etcd {} version {}", policy_key(&self.o.prefix), doc.version);
        let outcome = host_policy::parse(&doc.text, &source)
            .and_then(|p| p.for_host(&self.o.labels))
            .map_err(|e| vec![e.to_string()])
            .and_then(|mut p| {
                p.policy.version = Some(doc.version);
                self.enforce(&p, &format!("etcd {}", policy_key(&self.o.prefix))).map(|()| p)
            });
        match outcome {
            Ok(p) => {
                if let Err(e) = self.keep(doc, revision) {
                    log_warn!("{e}");
                }
                let names: Vec<String> = p.classes.iter().map(|c| format!("{} ({})", c.name, c.cc)).collect();
                let mode = if self.o.dry_run { "checked (dry run)" } else { "in force" };
                log_info!("sluice agent: version {} {mode}: {}", doc.version, names.join(", "));
                let mut r = self.report.lock().unwrap();
                r.version = Some(doc.version);
                r.applied_unix = now_ms() / 1000;
                r.undeclared_labels = p.undeclared(&self.o.labels).into_iter().map(String::from).collect();
                if !r.undeclared_labels.is_empty() {
                    log_warn!("labels {} are not among the policy's labels: no group selects on them", r.undeclared_labels.join(", "));
                }
                r.classes = p.classes.iter().map(|c| ClassReport { name: c.name.clone(), cc: c.cc.to_string(), ..ClassReport::default() }).collect();
                self.in_force = Some(doc.clone());
                true
            }
            Err(errors) => {
                for e in &errors {
                    log_error!("{e}");
                }
                log_error!("version {} refused on this host; version {} {}", doc.version, self.version(), self.stays());
                self.report.lock().unwrap().refused = Some((doc.version, errors));
                true
            }
        }
    }

    /// The host's checks, then (unless a dry run) the kernel's table.
    fn enforce(&self, p: &CheckedPolicy, source: &str) -> std::result::Result<(), Vec<String>> {
        if self.o.dry_run {
            return enforce::check(p).map(|_| ()).map_err(|e| vec![e.to_string()]);
        }
        match enforce::put_in_force(p, source) {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(vec![e.to_string()]),
            Err(e) => Err(vec![format!("{e:#}")]),
        }
    }

    /// Keeps the version on disk (atomically) and logs it, once: a restart that puts the kept
    /// version in force again does not log it again.
    fn keep(&mut self, doc: &Document, revision: i64) -> Result<()> {
        let dir = &self.o.state_dir;
        let tmp = dir.join(".fleet-policy.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(&Cached { document: doc.clone(), revision })?)?;
        std::fs::rename(&tmp, cache_file(dir))?;
        let entry = (doc.version, digest(&doc.text));
        if self.logged.as_ref() != Some(&entry) {
            let mut log = std::fs::OpenOptions::new().create(true).append(true).open(log_file(dir))?;
            writeln!(log, "{} {} {}", entry.0, entry.1, now_ms())?;
            self.logged = Some(entry);
        }
        Ok(())
    }
}

/// The (version, digest) of the log's last line, if any.
fn last_logged(dir: &Path) -> Option<(u64, String)> {
    let log = std::fs::read_to_string(log_file(dir)).ok()?;
    let mut f = log.lines().last()?.split(' ');
    Some((f.next()?.parse().ok()?, f.next()?.to_string()))
}

/// Watches the policy key from revision `from` (0: read it first) and hands over every version
/// in order, until `term`.
fn watch(etcd: &Etcd, key: &str, mut from: i64, news: &Sender<News>, term: &AtomicBool) {
    let mut was_reachable = true;
    let mut refused: Option<String> = None;
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
                            Err(e) => log_warn!("revision {}: {e}; skipped", kv.mod_revision),
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
        let (reachable, now_refused) = match &outcome {
            Ok(()) => (true, None),
            Err(e) if e.downcast_ref::<Unreachable>().is_some() => (false, refused.clone()),
            Err(e) => (true, Some(format!("{e:#}"))),
        };
        if reachable != was_reachable {
            was_reachable = reachable;
            let _ = news.send(News::Reachable(reachable));
        }
        // Said once when it begins, changes or ends, not at every try.
        if now_refused != refused {
            refused = now_refused;
            let _ = news.send(News::WatchError(refused.clone()));
        }
        match outcome {
            Ok(()) => {}
            Err(_) if refused.is_some() => std::thread::sleep(Duration::from_secs(1)),
            Err(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
}

/// The reporter thread's state: the lease, when the report was last written, and why it fails.
struct Reporter {
    o: FleetOptions,
    /// The lease (0: none yet, or it lapsed).
    lease: i64,
    /// When the lease was last renewed.
    kept: Instant,
    /// When a report last went through.
    reported: Instant,
    /// A report is due at once (news, or a new lease).
    pending: bool,
    /// Negotiation outcomes over the last `o.window`.
    window: Window,
    /// Why the last report failed.
    failing: Option<String>,
    /// When to try again.
    retry_at: Instant,
    /// When the last report went through, in milliseconds since the epoch.
    reported_ms: u64,
}

impl Reporter {
    fn new(o: &FleetOptions) -> Reporter {
        let now = Instant::now();
        Reporter {
            o: o.clone(),
            lease: 0,
            kept: now,
            reported: now,
            pending: true,
            window: Window::new(o.window),
            failing: None,
            retry_at: now,
            reported_ms: 0,
        }
    }

    /// Writes the report every `report_every`, and at once when nudged, until `term`; revokes
    /// the lease at the end, so the host shows as stale at once. The lease is renewed only while
    /// reports go through: an agent that cannot write its report (its credentials stopped
    /// working, its role lost a permission) lets the lease lapse, so the fleet view shows it
    /// stale within the lease's time, while its log, `sluice agent status` and its metrics say why.
    fn run(mut self, report: &Mutex<Report>, nudged: &Receiver<()>, term: &AtomicBool) {
        while !term.load(Ordering::Relaxed) {
            match nudged.recv_timeout(Duration::from_millis(50)) {
                // News (a version, a watch that fails or works again) is reported at once.
                Ok(()) => (self.pending, self.retry_at) = (true, Instant::now()),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let now = Instant::now();
            if now < self.retry_at {
                continue;
            }
            let result = self.try_report(report, now);
            if !self.settle(result, now) {
                continue;
            }
            // The figures on the host change with each report written or refused.
            if !self.o.dry_run {
                let mut state = report.lock().unwrap().clone();
                state.reported_unix_ms = self.reported_ms;
                state.report_error = self.failing.clone();
                fleet::write_figures(&state);
            }
        }
        if self.lease != 0 {
            let _ = self.o.etcd.lease_revoke(self.lease);
        }
    }

    /// Renews or grants the lease and writes the report when one is due. `Ok(Some(when))`: a
    /// report went through, at that time in milliseconds since the epoch.
    fn try_report(&mut self, report: &Mutex<Report>, now: Instant) -> Result<Option<u64>> {
        let o = &self.o;
        let keepalive = Duration::from_secs(o.lease_ttl.max(3) / 3);
        if self.lease != 0 && self.failing.is_none() && now.duration_since(self.kept) >= keepalive {
            if o.etcd.lease_keepalive(self.lease)? <= 0 {
                // Expired while etcd was away: a new lease, and the report again under it.
                self.lease = 0;
            }
            self.kept = now;
        }
        if self.lease == 0 {
            self.lease = o.etcd.lease_grant(o.lease_ttl)?;
            self.kept = now;
            self.pending = true;
        }
        if !(self.pending || self.failing.is_some() || now.duration_since(self.reported) >= o.report_every) {
            return Ok(None);
        }
        let r = current_report(o, report, &mut self.window);
        let bytes = serde_json::to_vec(&r)?;
        o.etcd.put_all(&[(&host_key(&o.prefix, &o.host), &bytes, self.lease), (&seen_key(&o.prefix, &o.host), &bytes, 0)])?;
        self.reported = now;
        self.pending = false;
        Ok(Some(r.reported_unix_ms))
    }

    /// Takes a try's outcome: logs a failure once when it begins or changes, and a recovery;
    /// whether the host's figures changed.
    fn settle(&mut self, result: Result<Option<u64>>, now: Instant) -> bool {
        match result {
            Ok(None) => return false,
            Ok(Some(when)) => {
                if let Some(e) = self.failing.take() {
                    log_info!("sluice agent: reports reach etcd again (they failed: {e})");
                }
                self.reported_ms = when;
            }
            Err(e) if e.downcast_ref::<Unreachable>().is_some() => {
                self.retry_at = now + Duration::from_millis(300);
                return false;
            }
            // The lease lapsed while reports failed: a new one, and the report under it, at once.
            Err(e) if format!("{e:#}").contains("lease not found") => {
                self.lease = 0;
                return false;
            }
            Err(e) => {
                let why = format!("{e:#}");
                if self.failing.as_ref() != Some(&why) {
                    log_error!(
                        "cannot write this host's report to {}: {why}; its lease is left to lapse, so `sluice admin status` shows it stale until a report goes through",
                        host_key(&self.o.prefix, &self.o.host)
                    );
                    // Revoked where etcd lets it, so the fleet view need not wait for the lease's time.
                    if self.lease != 0 && self.o.etcd.lease_revoke(self.lease).is_ok() {
                        self.lease = 0;
                    }
                }
                self.failing = Some(why);
                self.retry_at = now + Duration::from_secs(1);
            }
        }
        true
    }
}

/// The report with the kernel's counters as they are now, and the negotiations within the window.
fn current_report(o: &FleetOptions, report: &Mutex<Report>, window: &mut Window) -> Report {
    let mut r = report.lock().unwrap().clone();
    r.reported_unix_ms = now_ms();
    r.report_error = None;
    if !o.dry_run {
        if let Ok(Some(a)) = applied::applied() {
            for c in &mut r.classes {
                let Some(id) = a.classes.iter().find(|x| x.name == c.name).map(|x| x.id) else { continue };
                if let Ok(n) = class_table::counts(id) {
                    c.open = n.open();
                    c.opened = n.opened;
                    c.malformed = n.malformed;
                    c.negotiated = Negotiation::ALL.iter().zip(n.negotiated).filter(|(_, k)| *k > 0).map(|(o, k)| (o.label().to_string(), k)).collect();
                }
            }
        }
    }
    let totals: Outcomes = r.classes.iter().map(|c| (c.name.clone(), c.negotiated.clone())).collect();
    let mut recent = window.update(Instant::now(), totals);
    for c in &mut r.classes {
        c.recent = recent.remove(&c.name).unwrap_or_default();
    }
    r
}
