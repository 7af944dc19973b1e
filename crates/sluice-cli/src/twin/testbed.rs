//! The twin's kernel side: the netns testbed the fit describes, the classes applied by
//! `sluice agent` (its own process, as on a host), the traffic, and each run's evidence.

use super::compare::{self, Figure, Run};
use super::fit::{Fit, Traffic};
use super::TwinArgs;
use anyhow::{anyhow, bail, Context, Result};
use sluice_host::sys::{self, CGROUP2_ROOT};
use sluice_host::testbed::evidence::{Evidence, Recorder};
use sluice_host::testbed::netns::{self, FlowKey, Offloads, Testbed, TestbedOptions};
use sluice_host::testbed::traffic::{self, ClassFigures, Role};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The testbed's runs, each recorded under `out/testbed/run-N/`: those that were not CPU-bound,
/// and those that were.
pub fn runs(fit: &Fit, args: &TwinArgs) -> Result<(Vec<Run>, Vec<Run>)> {
    if !nix::unistd::geteuid().is_root() {
        bail!("sluice twin runs the testbed, which needs root (network namespaces, BPF): run it with sudo");
    }
    let dir = args.out.join("testbed");
    std::fs::create_dir_all(&dir)?;
    let roles = roles(fit);
    let bed = Bed::up(fit, args, &dir, &roles)?;
    let (mut kept, mut flagged) = (Vec::new(), Vec::new());
    for i in 1..=args.repeats {
        let warmup = Duration::from_secs_f64(args.warmup);
        // The evidence covers the measured window, as the figures do, not the warm-up.
        let (figures, evidence) = traffic::run(&bed.tb, &roles, warmup, fit.duration, |from, to| {
            std::thread::sleep(from.saturating_duration_since(Instant::now()));
            let recorder = Recorder::start(&bed.tb, Duration::from_millis(10))?;
            std::thread::sleep(to.saturating_duration_since(Instant::now()));
            recorder.finish()
        })?;
        let run_dir = dir.join(format!("run-{i}"));
        std::fs::create_dir_all(&run_dir)?;
        std::fs::write(run_dir.join("evidence.json"), serde_json::to_vec_pretty(&evidence)?)?;
        std::fs::write(run_dir.join("queue.csv"), evidence.queue_csv())?;
        std::fs::write(run_dir.join("connections.csv"), evidence.connections_csv())?;
        check_algorithms(fit, &figures)?;
        let run = kernel_figures(fit, &figures, &evidence);
        eprintln!(
            "testbed run {i} of {}{}",
            args.repeats,
            if evidence.cpu_bound { ": CPU-BOUND (a core was saturated), shown apart" } else { "" }
        );
        if evidence.cpu_bound {
            flagged.push(run);
        } else {
            kept.push(run);
        }
    }
    drop(bed);
    Ok((kept, flagged))
}

/// The first port the testbed's workloads listen on; workload i uses `FIRST_PORT + i`.
const FIRST_PORT: u16 = 5201;

/// The fit's workloads as the testbed's traffic roles, workload i on port `FIRST_PORT + i`.
fn roles(fit: &Fit) -> Vec<Role> {
    fit.traffic
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let port = FIRST_PORT + i as u16;
            match t.clone() {
                Traffic::Bulk { class, senders, receiver } => Role::Bulk { class, senders, receiver, port },
                Traffic::Rpc { class, clients, servers, outstanding, request, response, think } => {
                    Role::Rpc { class, clients, servers, outstanding, request, response, think, port }
                }
            }
        })
        .collect()
}

/// Every connection that carried a class's data ran the class's algorithm, as the agent chose it.
fn check_algorithms(fit: &Fit, figures: &BTreeMap<String, ClassFigures>) -> Result<()> {
    for (class, cc) in &fit.classes {
        let ran = figures.get(class).map(|f| f.ran.iter().cloned().collect::<Vec<_>>()).unwrap_or_default();
        if ran != [cc.clone()] {
            bail!("class {class}: its connections ran {ran:?}, not {cc} as the policy says; `sluice agent status` shows what the agent applied");
        }
    }
    Ok(())
}

/// A run's figures per class, and the fabric's drops and marks.
fn kernel_figures(fit: &Fit, figures: &BTreeMap<String, ClassFigures>, ev: &Evidence) -> Run {
    let mut run = Run::new();
    let secs = fit.duration.as_secs_f64();
    for t in &fit.traffic {
        let class = t.class().to_string();
        let f = figures.get(&class).cloned().unwrap_or_default();
        match t {
            Traffic::Bulk { .. } => {
                run.insert((class.clone(), Figure::ThroughputMbps), f.bulk_bytes as f64 * 8.0 / secs / 1e6);
            }
            Traffic::Rpc { .. } => compare::insert_completions(&mut run, &class, &f.completions_ns),
        }
        run.insert((class.clone(), Figure::RetransSegs), f.retrans_segs as f64);
        if let Some(r) = f.rtos {
            run.insert((class, Figure::Rtos), r as f64);
        }
    }
    let port_drops: u64 = ev.ports.iter().map(|p| p.sent.drops + p.device_drops).sum();
    let host_drops: u64 = ev.hosts.iter().map(|h| h.device_drops).sum();
    run.insert(("fabric".into(), Figure::Drops), (port_drops + host_drops + ev.backlog_drops) as f64);
    let marks: u64 = ev.hosts.iter().map(|h| h.counters.get("IpExt.InCEPkts").copied().unwrap_or(0)).sum();
    run.insert(("fabric".into(), Figure::EcnMarks), marks as f64);
    run
}

/// The testbed, its routes and the agent, torn down when dropped.
struct Bed {
    tb: Testbed,
    agent: Child,
    cgroup: PathBuf,
}

impl Bed {
    fn up(fit: &Fit, args: &TwinArgs, dir: &Path, roles: &[Role]) -> Result<Bed> {
        netns::down(&args.prefix)?;
        let o = TestbedOptions {
            prefix: args.prefix.clone(),
            hosts: fit.hosts as u8,
            rate_bps: fit.rate_bps,
            queue_bytes: Some(fit.queue_bytes),
            offloads: if args.offloads == "linux" { Offloads::Linux } else { Offloads::Off },
            steer_flows: true,
            shape_hosts: true,
            ce_threshold: fit.ce_threshold,
            int_switch: true,
            mtu: fit.mtu,
            ..TestbedOptions::default()
        };
        let tb = netns::up(&o)?;
        if args.host_queue == "flows" {
            queue_per_flow(&tb, roles)?;
        }
        let cgroup = Path::new(CGROUP2_ROOT).join(format!("sluice-twin-{}", args.prefix));
        let policy = dir.join("policy.toml");
        std::fs::write(&policy, policy_text(fit, roles))?;
        let exe = std::env::current_exe().context("finding this sluice binary")?;
        let _ = Command::new(&exe).args(["host", "unload"]).output();
        let agent = Command::new(&exe)
            .args(["agent", "--policy"])
            .arg(&policy)
            .arg("--cgroup")
            .arg(&cgroup)
            .args(["--poll-ms", "100"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting sluice agent")?;
        // Dropped from here on, the testbed and the agent are taken down whatever fails.
        let mut bed = Bed { tb, agent, cgroup };
        bed.routes(fit)?;
        bed.wait_for_policy(&exe)?;
        // This process's connections are the agent's: it joins the agent's cgroup.
        std::fs::write(bed.cgroup.join("cgroup.procs"), std::process::id().to_string())
            .with_context(|| format!("joining {}", bed.cgroup.display()))?;
        Ok(bed)
    }

    /// The scenario's minimum RTO and initial window on every route of every host.
    fn routes(&self, fit: &Fit) -> Result<()> {
        let rto = format!("{}ms", fit.rto_min.as_millis().max(1));
        for h in &self.tb.hosts {
            let out = sys::run("ip", &["-n", &h.netns, "-j", "route", "show"])?;
            let routes: serde_json::Value =
                serde_json::from_str(&out).with_context(|| format!("ip's routes in {}: {out}", h.netns))?;
            for r in routes.as_array().into_iter().flatten() {
                let (Some(dst), Some(dev)) = (r["dst"].as_str(), r["dev"].as_str()) else { continue };
                let mut a = vec!["-n", &h.netns, "route", "replace", dst];
                if let Some(via) = r["gateway"].as_str() {
                    a.extend(["via", via]);
                }
                let cwnd = fit.init_cwnd.to_string();
                a.extend(["dev", dev, "rto_min", &rto, "initcwnd", &cwnd]);
                sys::run("ip", &a)?;
            }
        }
        Ok(())
    }

    /// Waits until `sluice agent status` shows the policy in force.
    fn wait_for_policy(&mut self, exe: &Path) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(status) = self.agent.try_wait()? {
                let mut err = String::new();
                if let Some(mut e) = self.agent.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                bail!("sluice agent stopped ({status}): {}", err.trim());
            }
            let out = Command::new(exe).args(["agent", "status"]).output()?;
            if String::from_utf8_lossy(&out.stdout).contains("version 1 ") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(anyhow!("sluice agent did not put the twin's policy in force within 20 s"))
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = std::fs::write(Path::new(CGROUP2_ROOT).join("cgroup.procs"), std::process::id().to_string());
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.agent.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.agent.wait();
        if let Ok(exe) = std::env::current_exe() {
            let _ = Command::new(exe).args(["host", "unload"]).output();
        }
        let _ = std::fs::remove_dir(&self.cgroup);
        let _ = netns::down(&self.tb.prefix);
    }
}

/// Gives every host a queue per flow it sends, as `fq_codel` would (`--host-queue flows`).
fn queue_per_flow(tb: &Testbed, roles: &[Role]) -> Result<()> {
    let mut keys: BTreeMap<usize, Vec<FlowKey>> = BTreeMap::new();
    for r in roles {
        for (host, peer) in r.ends() {
            keys.entry(host).or_default().push(FlowKey { peer: tb.hosts[peer].addr, port: r.port() });
        }
    }
    for (host, mut flows) in keys {
        flows.sort();
        flows.dedup();
        netns::queue_per_flow(tb, host, &flows)
            .with_context(|| format!("giving {}'s flows a queue each", tb.hosts[host].netns))?;
    }
    Ok(())
}

/// The agent's policy: each class's algorithm, matched on the ports of its workloads.
fn policy_text(fit: &Fit, roles: &[Role]) -> String {
    let mut s = String::from("version = 1\n");
    for (class, cc) in &fit.classes {
        let ports: Vec<String> = roles.iter().filter(|r| r.class() == class).map(|r| r.port().to_string()).collect();
        s.push_str(&format!("\n[classes.{class}]\ncc = \"{cc}\"\nmatch = {{ dst_ports = [{}] }}\n", ports.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_matches_each_class_on_its_workloads_ports() {
        let fit = Fit {
            hosts: 3,
            rate_bps: 1,
            mtu: 1500,
            queue_bytes: 1,
            ce_threshold: 0,
            rto_min: Duration::from_millis(10),
            init_cwnd: 10,
            duration: Duration::from_secs(1),
            classes: [("a".to_string(), "bbr".to_string()), ("b".to_string(), "dctcp".to_string())]
                .into_iter()
                .collect(),
            traffic: vec![
                Traffic::Bulk { class: "a".into(), senders: vec![0], receiver: 2 },
                Traffic::Bulk { class: "b".into(), senders: vec![1], receiver: 2 },
                Traffic::Bulk { class: "a".into(), senders: vec![2], receiver: 0 },
            ],
            notes: vec![],
        };
        let text = policy_text(&fit, &roles(&fit));
        assert!(text.contains("[classes.a]\ncc = \"bbr\"\nmatch = { dst_ports = [5201, 5203] }"), "{text}");
        assert!(text.contains("[classes.b]\ncc = \"dctcp\"\nmatch = { dst_ports = [5202] }"), "{text}");
    }
}
