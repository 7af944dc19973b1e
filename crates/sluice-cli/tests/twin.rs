//! `sluice twin`: a scenario the testbed cannot host is refused with what to change (any build,
//! no root); with the Linux half, as root (`cargo test -p sluice-cli --features host --test twin`,
//! tools/test-all runs it), the small twin case agrees within the twin's own bounds and a run
//! whose testbed is CPU-bound is shown apart.

use std::path::Path;
use std::process::{Command, Output};

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .output()
        .expect("running sluice")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_scenario_the_testbed_cannot_host_is_refused_with_each_reason_where_it_is_written() {
    let out = sluice(&["twin", "scenarios/incast.toml", "--plan"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The host count is refused on the line that sets it, with the limit and what to change.
    assert!(
        err.contains(
            "scenarios/incast.toml:12: topology.hosts: the testbed runs 2 to 16 hosts, got 33; use fewer hosts"
        ),
        "{err}"
    );
    assert!(err.contains("sim.duration") && err.contains("give the run a duration"), "{err}");
}

#[test]
fn an_rpc_workload_on_a_connection_per_request_is_refused_with_the_override_that_fits() {
    let out =
        sluice(&["twin", "scenarios/twin_small.toml", "--plan", "--set", "workloads[1].connections=\"per_request\""]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("scenarios/twin_small.toml:") && err.contains("--set workloads[1].connections=persistent"),
        "{err}"
    );
}

#[test]
fn the_plan_describes_the_testbed_the_small_case_runs_on() {
    let out = sluice(&["twin", "scenarios/twin_small.toml", "--plan"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains(
            "testbed: 3 hosts on one switch, ports at 100Mbps, a 100000-byte buffer each, CE marks above 30000 bytes"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("class bulk: cubic") && stdout.contains("class query: dctcp"), "{stdout}");
}

#[cfg(not(feature = "host"))]
#[test]
fn without_the_linux_half_the_twin_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = sluice(&["twin", "scenarios/twin_small.toml", "--out", dir.path().to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--features host"), "{err}");
}

#[cfg(feature = "host")]
mod on_the_testbed {
    use super::{sluice, text};
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::process::Command;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    /// The testbed's namespaces and the agent's pins are machine-wide: one twin at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    /// twin.csv as (class, figure) → (kernel mean, kernel runs, simulator, agrees).
    fn table(dir: &Path) -> BTreeMap<(String, String), (f64, u32, f64, String)> {
        let csv = std::fs::read_to_string(dir.join("twin.csv")).expect("twin.csv");
        let mut lines = csv.lines();
        assert_eq!(
            lines.next(),
            Some("class,figure,kernel_mean,kernel_min,kernel_max,kernel_runs,simulator,difference_pct,agrees")
        );
        lines
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                let num = |s: &str| s.parse::<f64>().unwrap_or(f64::NAN);
                ((f[0].into(), f[1].into()), (num(f[2]), f[5].parse().unwrap(), num(f[6]), f[8].into()))
            })
            .collect()
    }

    /// Nothing of the twin is left: no namespace of its prefix, no cgroup, no agent.
    fn assert_cleaned_up(prefix: &str) {
        let netns = Command::new("ip").args(["netns", "list"]).output().expect("ip netns");
        let names = text(&netns.stdout);
        assert!(!names.lines().any(|l| l.starts_with(&format!("{prefix}-"))), "namespaces left: {names}");
        assert!(!Path::new(&format!("/sys/fs/cgroup/unified/sluice-twin-{prefix}")).exists(), "cgroup left");
        let agents = Command::new("pgrep").args(["-f", "sluice agent --policy"]).output().expect("pgrep");
        assert!(text(&agents.stdout).trim().is_empty(), "an agent is still running: {}", text(&agents.stdout));
    }

    /// The small case (scenarios/twin_small.toml): a CUBIC bulk flow and DCTCP queries served by
    /// the same host. Bound: issue 64's, throughput and completion mean and 95th percentile each
    /// within 15 % of the kernel's mean over three runs or inside their range (the 99th
    /// percentile of ~90 requests a run is one scheduling hiccup on a busy machine, so it is
    /// reported, not judged).
    #[test]
    fn the_small_case_agrees_with_the_kernel_on_throughput_and_completion() {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(nix::unistd::geteuid().is_root(), "these tests need root (netns, BPF): run them as root");
        let dir = tempfile::tempdir().unwrap();
        let out = sluice(&[
            "twin",
            "scenarios/twin_small.toml",
            "--repeats",
            "3",
            "--prefix",
            "twt",
            "--out",
            dir.path().to_str().unwrap(),
        ]);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{stderr}");
        assert_cleaned_up("twt");
        let t = table(dir.path());
        for (class, figure) in
            [("bulk", "throughput_mbps"), ("query", "completion_mean_ms"), ("query", "completion_p95_ms")]
        {
            let (kernel, runs, sim, agrees) = &t[&(class.to_string(), figure.to_string())];
            assert!(*runs >= 2, "{class} {figure}: only {runs} testbed runs were not CPU-bound\n{stdout}{stderr}");
            assert_eq!(agrees, "true", "{class} {figure}: kernel {kernel}, simulator {sim}\n{stdout}");
        }
        // The figures are the scenario's, not an empty agreement: the bulk flow and the answers
        // take turns on the serving host's 100 Mb/s link, so the bulk flow moves about half of it
        // and a 128 KB answer takes about twice its 10.5 ms at the full rate. (One FIFO at the
        // host, `--host-queue fifo`, lets each answer go whole: bulk 16-17 Mb/s, answers 12 ms.)
        let bulk = t[&("bulk".into(), "throughput_mbps".into())].0;
        assert!((40.0..60.0).contains(&bulk), "bulk {bulk} Mb/s\n{stdout}");
        let query = t[&("query".into(), "completion_mean_ms".into())].0;
        assert!((17.0..27.0).contains(&query), "query {query} ms\n{stdout}");
        for f in [
            "twin.md",
            "twin.png",
            "simulator/flows.csv",
            "testbed/policy.toml",
            "testbed/run-3/queue.csv",
            "testbed/run-3/connections.csv",
        ] {
            assert!(dir.path().join(f).exists(), "{f} missing");
        }
    }

    /// With a thread spinning on every core, the testbed's run is flagged and shown apart, not
    /// averaged into the kernel's figures.
    #[test]
    fn a_run_on_a_cpu_bound_testbed_is_shown_apart() {
        let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        assert!(nix::unistd::geteuid().is_root(), "these tests need root (netns, BPF): run them as root");
        let dir = tempfile::tempdir().unwrap();
        let stop = AtomicBool::new(false);
        let out = std::thread::scope(|s| {
            for _ in 0..std::thread::available_parallelism().unwrap().get() {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                });
            }
            let out = sluice(&[
                "twin",
                "scenarios/twin_small.toml",
                "--repeats",
                "1",
                "--warmup",
                "0.2",
                "--prefix",
                "twc",
                "--out",
                dir.path().to_str().unwrap(),
            ]);
            stop.store(true, Ordering::Relaxed);
            out
        });
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{stderr}");
        assert_cleaned_up("twc");
        assert!(stderr.contains("testbed run 1 of 1: CPU-BOUND"), "{stderr}");
        assert!(
            stdout.contains("kernel: mean of 0 testbed runs (lowest-highest), 1 CPU-bound run shown apart"),
            "{stdout}"
        );
        assert!(stdout.contains("CPU-bound testbed runs, left out of the kernel's figures"), "{stdout}");
        let t = table(dir.path());
        assert_eq!(t[&("bulk".into(), "throughput_mbps".into())].1, 0, "a CPU-bound run was averaged in");
    }
}
