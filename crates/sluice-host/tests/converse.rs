//! The converse of the kernel differential test (issue 19): traces recorded in the simulator
//! replay into the BPF build of the same C sources, run by the kernel through BPF_PROG_TEST_RUN,
//! with every window identical; the mutant BPF build (a loss quarters the window) diverges.
//! Needs root (CAP_BPF) but no network namespace.

use sluice_host::kernel::replay::{replay_in_kernel, KernelBuild};
use sluice_sim::cc::portable::{record_steps, Record};
use std::path::Path;

/// Two bulk flows into a 1 Gb/s port with a 40 KB buffer (20 KB for one port) that marks CE above
/// 15 KB, on links that lose one packet in 2,000: every algorithm's trace has losses and fast
/// recovery, and those that read ECN have marked ACKs (NewReno's defaults ignore ECN).
fn scenario(cc: &str) -> String {
    format!(
        r#"
[sim]
duration = "150ms"
seed = 3

[topology]
kind = "star"
hosts = 3
host_rate = "1Gbps"
host_delay = "10us"
host_loss = 0.0005

[switch]
buffer = "40KB"
alpha = 1.0

[switch.ecn]
mode = "step"
k = "15KB"

[transport]
mtu = 1500

[classes.default]
cc = "{cc}"

[[workloads]]
kind = "bulk"
senders = [0, 1]
receiver = 2
"#
    )
}

/// Runs the scenario for `cc` in the simulator and returns every step its algorithm took.
fn simulator_trace(cc: &str) -> Vec<Record> {
    let dir = std::env::temp_dir().join(format!("sluice-converse-{}-{cc}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("scenario.toml");
    std::fs::write(&file, scenario(cc)).unwrap();
    let loaded = sluice_sim::scenario::load(Path::new(&file), &[]).unwrap_or_else(|e| panic!("{e}"));
    // Building makes each flow's instance (and a probe the world asks what the algorithm needs).
    let ((), trace) = record_steps(|| sluice_sim::scenario::build(&loaded).unwrap().run(&mut |_| {}));
    std::fs::remove_dir_all(&dir).unwrap();
    trace
}

#[test]
fn simulator_traces_replay_identically_in_the_bpf_build() {
    assert!(nix::unistd::geteuid().is_root(), "this test needs root (CAP_BPF for BPF_PROG_TEST_RUN): run `cargo test` as root");
    for name in ["newreno", "dctcp", "ecn_int", "retcp"] {
        let trace = simulator_trace(name);
        let st = replay_in_kernel(name, KernelBuild::Standard, &trace).unwrap().unwrap_or_else(|m| panic!("{name}: {m}"));
        println!("{name}: {} records, {st:?}", trace.len());
        let mut acking: Vec<u64> = trace.iter().filter(|r| r.kind == sluice_sim::cc::portable::REC_ACK).map(|r| r.flow).collect();
        acking.dedup();
        acking.sort_unstable();
        acking.dedup();
        assert_eq!(acking.len(), 2, "{name}: both flows' instances took ACKs");
        assert!(st.acks >= 10_000, "{name}: only {} ACKs recorded", st.acks);
        assert!(st.losses > 0 && st.in_recovery > 0, "{name}: the trace lacks losses or recovery: {st:?}");
        if name == "dctcp" || name == "retcp" {
            assert!(st.marked > 0, "{name}: the trace has no marked ACK: {st:?}");
        }
        let m = replay_in_kernel(name, KernelBuild::Mutant, &trace).unwrap().expect_err("the mutant BPF build matched the simulator");
        println!("{name}: the mutant BPF build diverges at {m}");
    }
}
